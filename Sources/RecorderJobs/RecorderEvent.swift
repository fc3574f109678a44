import Foundation

/// What recorder services announce on the events exchange, for whatever processes recordings next
/// (composing, transcription, upload) and for `conclave recorder status`.
///
/// The JSON is one flat object with a `type` (`recording_started`, ...); the routing key is that
/// type with `_` turned into `.`, so a consumer can bind to `recording.*` or `service.status` alone.
public enum RecorderEvent: Codable, Sendable, Hashable {
    case recordingStarted(RecordingStarted)
    case recordingFinished(RecordingFinished)
    case recordingFailed(RecordingFailed)
    case serviceStatus(ServiceStatus)

    /// The largest event body a reader accepts (a status of many calls with problems fits easily).
    public static let maximumBodySize = 256 * 1024

    /// The `type` of the JSON object.
    public var type: String {
        switch self {
        case .recordingStarted: "recording_started"
        case .recordingFinished: "recording_finished"
        case .recordingFailed: "recording_failed"
        case .serviceStatus: "service_status"
        }
    }

    /// The routing key on ``RecorderTopology/eventsExchange``.
    public var routingKey: String { type.replacingOccurrences(of: "_", with: ".") }

    /// The service that announced it.
    public var serviceID: String {
        switch self {
        case .recordingStarted(let event): event.serviceID
        case .recordingFinished(let event): event.serviceID
        case .recordingFailed(let event): event.serviceID
        case .serviceStatus(let event): event.serviceID
        }
    }

    private enum TypeKey: String, CodingKey {
        case type
    }

    public init(from decoder: any Decoder) throws {
        let type = try decoder.container(keyedBy: TypeKey.self).decode(String.self, forKey: .type)
        switch type {
        case "recording_started": self = .recordingStarted(try RecordingStarted(from: decoder))
        case "recording_finished": self = .recordingFinished(try RecordingFinished(from: decoder))
        case "recording_failed": self = .recordingFailed(try RecordingFailed(from: decoder))
        case "service_status": self = .serviceStatus(try ServiceStatus(from: decoder))
        default: throw RecordJobError("type: \(RecordJob.quoted(type)) is not a recorder event")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: TypeKey.self)
        try container.encode(type, forKey: .type)
        switch self {
        case .recordingStarted(let event): try event.encode(to: encoder)
        case .recordingFinished(let event): try event.encode(to: encoder)
        case .recordingFailed(let event): try event.encode(to: encoder)
        case .serviceStatus(let event): try event.encode(to: encoder)
        }
    }
}

extension RecorderEvent {
    /// Parses an event body (bounded size, the service id's form).
    public static func decode(_ body: [UInt8]) throws(RecordJobError) -> RecorderEvent {
        guard body.count <= maximumBodySize else {
            throw RecordJobError("event: \(body.count) bytes, more than the \(maximumBodySize) an event may have")
        }
        let event = try JSONFields.decode(RecorderEvent.self, from: body, what: "event")
        try RecordJob.checkIdentifier(event.serviceID, field: "serviceId")
        return event
    }

    /// The JSON body (keys sorted).
    public func encoded() -> [UInt8] { JSONFields.encode(self) }
}

/// A service took a job and is recording (again, after a takeover, with a higher `attempt`).
public struct RecordingStarted: Codable, Sendable, Hashable {
    public var jobID: String
    public var callID: UInt64
    public var serviceID: String
    /// The recording folder, relative to the storage root (the job's `output`).
    public var path: String
    /// 1 for the first service to take the job, 2 for the one that took it over, and so on.
    public var attempt: Int
    /// ISO 8601.
    public var time: String

    public init(jobID: String, callID: UInt64, serviceID: String, path: String, attempt: Int, time: String) {
        self.jobID = jobID
        self.callID = callID
        self.serviceID = serviceID
        self.path = path
        self.attempt = attempt
        self.time = time
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case callID = "callId"
        case serviceID = "serviceId"
        case path, attempt, time
    }
}

/// A recording ended, was verified, and its job acknowledged.
public struct RecordingFinished: Codable, Sendable, Hashable {
    public var jobID: String
    public var callID: UInt64
    public var serviceID: String
    public var path: String
    public var summary: RecordingSummary
    public var time: String

    public init(
        jobID: String,
        callID: UInt64,
        serviceID: String,
        path: String,
        summary: RecordingSummary,
        time: String
    ) {
        self.jobID = jobID
        self.callID = callID
        self.serviceID = serviceID
        self.path = path
        self.summary = summary
        self.time = time
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case callID = "callId"
        case serviceID = "serviceId"
        case path, summary, time
    }
}

/// What a finished recording's manifest says, in brief.
public struct RecordingSummary: Codable, Sendable, Hashable {
    /// Participants recorded.
    public var participants: Int
    /// Seconds from the first to the last frame.
    public var duration: Double
    public var framesWritten: UInt64
    /// Problems the manifest notes, one line each.
    public var problems: [String]
    /// Stretches with nothing recorded (a service died and another took over).
    public var gaps: [RecordingGap]

    public init(participants: Int, duration: Double, framesWritten: UInt64, problems: [String], gaps: [RecordingGap]) {
        self.participants = participants
        self.duration = duration
        self.framesWritten = framesWritten
        self.problems = problems
        self.gaps = gaps
    }
}

/// A stretch of a recording with nothing in it.
public struct RecordingGap: Codable, Sendable, Hashable {
    /// Seconds after the recording's start.
    public var start: Double
    public var seconds: Double

    public init(start: Double, seconds: Double) {
        self.start = start
        self.seconds = seconds
    }
}

/// A job was refused or a recording failed; nothing usable was written for it.
public struct RecordingFailed: Codable, Sendable, Hashable {
    /// Nil for a body that is not a job at all.
    public var jobID: String?
    public var callID: UInt64?
    public var serviceID: String
    /// One line, naming the field for a refused job.
    public var reason: String
    public var time: String

    public init(jobID: String?, callID: UInt64?, serviceID: String, reason: String, time: String) {
        self.jobID = jobID
        self.callID = callID
        self.serviceID = serviceID
        self.reason = reason
        self.time = time
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case callID = "callId"
        case serviceID = "serviceId"
        case reason, time
    }
}

/// A service's state, announced every ``interval``.
public struct ServiceStatus: Codable, Sendable, Hashable {
    /// How often a service announces its status; `recorder status` waits a little longer.
    public static let interval: Duration = .seconds(2)

    public var serviceID: String
    public var host: String
    public var calls: [ServiceCall]
    /// Cores in use (1.5 = one and a half cores).
    public var cpu: Double
    /// Cores the service may use; it takes no new job at or above it.
    public var cpuBudget: Double
    public var diskFreeBytes: UInt64
    /// Taking no new jobs (SIGTERM), finishing or handing over the current ones.
    public var draining: Bool
    public var problems: [String]
    /// ISO 8601.
    public var time: String

    public init(
        serviceID: String,
        host: String,
        calls: [ServiceCall],
        cpu: Double,
        cpuBudget: Double,
        diskFreeBytes: UInt64,
        draining: Bool,
        problems: [String],
        time: String
    ) {
        self.serviceID = serviceID
        self.host = host
        self.calls = calls
        self.cpu = cpu
        self.cpuBudget = cpuBudget
        self.diskFreeBytes = diskFreeBytes
        self.draining = draining
        self.problems = problems
        self.time = time
    }

    enum CodingKeys: String, CodingKey {
        case serviceID = "serviceId"
        case host, calls, cpu, cpuBudget, diskFreeBytes, draining, problems, time
    }
}

/// One call a service is recording.
public struct ServiceCall: Codable, Sendable, Hashable {
    public var jobID: String
    public var callID: UInt64
    public var participants: Int
    /// Seconds recorded so far.
    public var seconds: Double

    public init(jobID: String, callID: UInt64, participants: Int, seconds: Double) {
        self.jobID = jobID
        self.callID = callID
        self.participants = participants
        self.seconds = seconds
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case callID = "callId"
        case participants, seconds
    }
}

/// Where jobs and events travel on the broker (virtual host `ecall`, declared in
/// config/rabbitmq/definitions.json).
public enum RecorderTopology {
    /// The durable quorum queue of jobs: `/amq/queue/` names an existing queue, so neither a
    /// submitter nor a service can declare it with other arguments.
    public static let jobQueue = "/amq/queue/recorder.jobs"
    /// The queue's name as the broker knows it.
    public static let jobQueueName = "recorder.jobs"
    /// Where submitters send jobs: a direct exchange bound to ``jobQueueName`` alone, so that
    /// the right to submit is not the right to write into every queue (as `amq.default` would be).
    public static let submitDestination = "/exchange/recorder.submit/recorder.jobs"
    /// Jobs delivered ``deliveryLimit`` times without an ack (a job that kills every service
    /// that takes it) end up here instead of looping for ever.
    public static let deadJobQueueName = "recorder.jobs.dead"
    /// How often the broker delivers one job before dead-lettering it: enough for a few
    /// takeovers, few enough that a poison job cannot take the whole fleet down.
    public static let deliveryLimit = 5
    /// The topic exchange of ``RecorderEvent``s.
    public static let eventsExchange = "recorder.events"

    /// `/exchange/recorder.events/<routing key>`.
    public static func eventDestination(_ event: RecorderEvent) -> String {
        "/exchange/\(eventsExchange)/\(event.routingKey)"
    }

    /// Every event, for a subscriber.
    public static let allEvents = "/exchange/recorder.events/#"
}
