import Foundation
public import Logging
public import RecorderJobs
public import STOMPClient
import STOMPProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave recorder serve`: records the calls of the job queue, as many at once as its budget
/// allows, and announces what happens on the events exchange.
///
/// A job is ACKed only once its recording is finished and verified (or it failed for good), so a
/// service that dies leaves its jobs unacknowledged and the broker redelivers them, marked
/// `redelivered`, to another service, which continues the recording (``AttemptPlan``).
///
/// Jobs arrive through slots: one STOMP connection per call the service may hold
/// (``Admission/maxCalls``), each with a `client-individual` subscription to
/// ``RecorderTopology/jobQueue`` and a prefetch of 1, so the service as a whole prefetches its slot
/// count. A slot that holds a job keeps its subscription until the job is ACKed; admission
/// unsubscribes the idle slots while the service is full or over its CPU budget, and the broker
/// then gives new jobs to the other services. One subscription shared by every call cannot do
/// this: RabbitMQ refuses an ACK for a delivery of a cancelled subscription ("Subscription not
/// found", and the connection closes, requeueing every job it held). A job that reaches an idle
/// slot just after its UNSUBSCRIBE cannot be ACKed or NACKed either; that slot's connection is
/// replaced, which gives the job back to the queue, and nothing else is lost with it. Events go
/// out on a connection of their own. Jobs that follow their call's key rotations share one more:
/// the fleet device's signaling channel (``CallSignalingHub``), opened for the first such job.
///
/// An actor: messages, job completions, status ticks and the drain request all change the same
/// small state (the slots and their calls, draining or not), one at a time.
public actor RecorderService {
    public struct Configuration: Sendable {
        /// Names this service in events and status (`host-pid` by default in the command).
        public var serviceID: String
        public var host: String
        public var admission: Admission
        public var environment: JobEnvironment
        public var broker: STOMPClientConfiguration
        /// How often `service_status` goes out (and admission is re-evaluated).
        public var statusInterval: Duration

        public init(
            serviceID: String,
            host: String,
            admission: Admission,
            environment: JobEnvironment,
            broker: STOMPClientConfiguration,
            statusInterval: Duration = .seconds(2)
        ) {
            self.serviceID = serviceID
            self.host = host
            self.admission = admission
            self.environment = environment
            self.broker = broker
            self.statusInterval = statusInterval
        }
    }

    /// The subscription id of the job queue on every slot.
    static let jobSubscription = "recorder-jobs"

    /// One call's worth of intake: its own connection and subscription.
    private struct Slot {
        var connection: STOMPConnection
        /// Bumped when the connection is replaced: a late message of the old one is ignored.
        var generation: Int
        var subscribed = false
        /// The job it holds.
        var job: Held?
        var tasks: [Task<Void, Never>] = []
    }

    private struct Held {
        var recording: JobRecording
        var message: STOMPMessage
        var task: Task<Void, Never>?
    }

    private enum Phase: Equatable {
        case serving
        /// Taking no new jobs; `handover`: the current ones were stopped and go back to the queue.
        case draining(handover: Bool)
        case stopped
    }

    public let configuration: Configuration
    /// Every event this service announced, in order (the command logs them).
    public nonisolated let events: AsyncStream<RecorderEvent>
    private let eventContinuation: AsyncStream<RecorderEvent>.Continuation
    /// Announces events; never subscribes.
    private let control: STOMPConnection
    /// The fleet device's signaling channel, for the jobs with an invitation; nil without a
    /// fleet device id.
    private let signaling: CallSignalingHub?
    private let logger: Logger
    private var slots: [Slot] = []
    private var phase = Phase.serving
    private var cpu = CPUWindow(span: 5)
    private let origin = ContinuousClock.now
    private var problems: [String: String] = [:]
    private var stopped: CheckedContinuation<Void, Never>?

    public init(configuration: Configuration, logger: Logger) throws(STOMPError) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "service"] = "\(configuration.serviceID)"
        self.logger = logger
        control = try STOMPConnection(configuration: configuration.broker, logger: logger)
        signaling = configuration.environment.identity.deviceID.map {
            CallSignalingHub(deviceID: $0, broker: configuration.broker, logger: logger)
        }
        (events, eventContinuation) = AsyncStream.makeStream(of: RecorderEvent.self)
    }

    private var held: [Held] { slots.compactMap(\.job) }

    /// Connects, serves until drained, and returns. Throws when the broker cannot be reached at
    /// start or refuses the credentials.
    public func run() async throws(STOMPError) {
        control.start()
        try await control.waitUntilConnected()
        for index in 0..<max(configuration.admission.maxCalls, 1) {
            let connection = try STOMPConnection(configuration: configuration.broker, logger: logger)
            slots.append(Slot(connection: connection, generation: 0))
            start(slot: index)
        }
        let interval = configuration.statusInterval
        let ticker = Task { [weak self] in
            while !Task.isCancelled {
                await self?.tick()
                try? await Task.sleep(for: interval)
            }
        }
        // Resumed by the drain once the last call is done.
        if phase != .stopped { await withCheckedContinuation { continuation in stopped = continuation } }
        ticker.cancel()
        for slot in slots {
            for task in slot.tasks { task.cancel() }
            await slot.connection.close()
        }
        await signaling?.close()
        await control.close()
        eventContinuation.finish()
    }

    /// Starts slot `index`'s connection and the tasks that feed its messages and states here.
    private func start(slot index: Int) {
        let connection = slots[index].connection
        let generation = slots[index].generation
        connection.start()
        let messages = Task { [weak self] in
            for await message in connection.messages where message.subscription == Self.jobSubscription {
                await self?.take(message, slot: index, generation: generation)
            }
        }
        let states = Task { [weak self] in
            for await event in connection.events {
                guard case .state(let state) = event else { continue }
                await self?.connectionChanged(state, slot: index, generation: generation)
            }
        }
        slots[index].tasks = [messages, states]
    }

    /// Gives slot `index` a new connection: the broker requeues whatever the old one held.
    private func replace(slot index: Int) {
        let old = slots[index]
        for task in old.tasks { task.cancel() }
        Task { await old.connection.close() }
        do {
            slots[index] = Slot(
                connection: try STOMPConnection(configuration: configuration.broker, logger: logger),
                generation: old.generation + 1
            )
        } catch {
            problems["slot"] = "cannot reconnect a job slot: \(error)"
            return
        }
        start(slot: index)
        updateSubscriptions()
    }

    /// Stops taking jobs; the service returns from ``run()`` once the calls it holds are done.
    /// `handover`: stop them now and give them back to the queue (NACK with requeue), so another
    /// service continues each in a new attempt; otherwise each records to its own end.
    public func drain(handover: Bool) {
        guard phase != .stopped else { return }
        if case .draining(true) = phase { return }
        phase = .draining(handover: handover)
        logger.notice("draining", metadata: ["calls": "\(held.count)", "handover": "\(handover)"])
        updateSubscriptions()
        if handover {
            for item in held { item.recording.stop(.handover("the service drains and hands the call over")) }
        }
        Task { await publishStatus() }
        finishIfDrained()
    }

    // MARK: Jobs

    private func take(_ message: STOMPMessage, slot index: Int, generation: Int) {
        guard slots.indices.contains(index), slots[index].generation == generation else { return }
        let connection = slots[index].connection
        guard slots[index].subscribed, slots[index].job == nil else {
            if slots[index].job != nil {
                // Prefetch 1 makes this impossible; give it back rather than hold two calls here.
                Task { await acknowledge(message, .nack(requeue: true), on: connection) }
            } else {
                // Delivered after our UNSUBSCRIBE: it can be neither ACKed nor NACKed now.
                logger.info("a job reached an unsubscribed slot; reconnecting it", metadata: ["slot": "\(index)"])
                replace(slot: index)
            }
            return
        }
        let job: RecordJob
        do throws(RecordJobError) {
            job = try RecordJob.decode(message.body)
        } catch {
            // Malformed: refused for good (ACKed) so that it does not come back forever.
            logger.warning("refused a job", metadata: ["reason": "\(error.reason)"])
            Task {
                await announce(.recordingFailed(failure(jobID: nil, callID: nil, reason: error.reason)))
                await acknowledge(message, .ack, on: connection)
            }
            return
        }
        guard phase == .serving else {
            // Delivered before the UNSUBSCRIBE reached the broker: back to the queue at once.
            Task { await acknowledge(message, .nack(requeue: true), on: connection) }
            return
        }
        let recording = JobRecording(job: job, logger: logger)
        // The same job back while its earlier attempt here still stops (the broker requeued it
        // when a slot's connection dropped): the new attempt starts once the old one has finished
        // writing, so that it never repairs a folder still being written.
        let earlier = held.first { $0.recording.job.jobID == job.jobID }?.task
        logger.notice(
            "job taken",
            metadata: ["job": "\(job.jobID)", "call": "\(job.callID)", "redelivered": "\(message.redelivered)"]
        )
        let environment = configuration.environment
        let signaling = signaling
        let task = Task {
            await earlier?.value
            let outcome = await recording.run(
                in: environment,
                redelivered: message.redelivered,
                signaling: signaling
            ) {
                directory,
                attempt in
                await self.started(job, directory: directory, attempt: attempt)
            }
            await self.completed(slot: index, generation: generation, outcome)
        }
        slots[index].job = Held(recording: recording, message: message, task: task)
        updateSubscriptions()
    }

    private func started(_ job: RecordJob, directory: String, attempt: Int) async {
        logger.notice("recording", metadata: ["job": "\(job.jobID)", "path": "\(directory)", "attempt": "\(attempt)"])
        await announce(.recordingStarted(startedEvent(job, path: directory, attempt: attempt)))
    }

    private func completed(slot index: Int, generation: Int, _ outcome: JobOutcome) async {
        guard slots.indices.contains(index), slots[index].generation == generation, let item = slots[index].job else {
            return
        }
        slots[index].job = nil
        let connection = slots[index].connection
        let job = item.recording.job
        switch outcome {
        case .finished(let recording):
            // Only now, finished and verified: a service that dies before this line leaves the job
            // to be redelivered.
            await acknowledge(item.message, .ack, on: connection)
            logger.notice(
                "recording finished",
                metadata: [
                    "job": "\(job.jobID)", "path": "\(recording.directory)", "problems": "\(recording.problems.count)",
                ]
            )
            await announce(.recordingFinished(finishedEvent(job, recording)))
        case .failed(let reason):
            logger.warning("job failed", metadata: ["job": "\(job.jobID)", "reason": "\(reason)"])
            await acknowledge(item.message, .ack, on: connection)
            await announce(.recordingFailed(failure(jobID: job.jobID, callID: job.callID, reason: reason)))
        case .handedOver(let why):
            logger.notice("job handed over", metadata: ["job": "\(job.jobID)", "reason": "\(why)"])
            await acknowledge(item.message, .nack(requeue: true), on: connection)
        }
        updateSubscriptions()
        finishIfDrained()
    }

    private func acknowledge(_ message: STOMPMessage, _ verdict: STOMPAcknowledgement, on connection: STOMPConnection)
        async
    {
        do {
            switch verdict {
            case .ack: try await connection.ack(message)
            case .nack(let requeue): try await connection.nack(message, requeue: requeue)
            }
        } catch {
            // The delivering connection is gone: the broker has the job back already.
            logger.warning("cannot acknowledge a job", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Admission and status

    /// Subscribes the idle slots while the service admits jobs, unsubscribes them otherwise. A
    /// slot holding a job keeps its subscription: its ACK needs it.
    private func updateSubscriptions() {
        let wanted = configuration.admission.admits(active: held.count, cores: cpu.cores, draining: phase != .serving)
        for index in slots.indices where slots[index].job == nil && slots[index].subscribed != wanted {
            slots[index].subscribed = wanted
            if wanted {
                slots[index].connection.subscribe(
                    id: Self.jobSubscription,
                    destination: RecorderTopology.jobQueue,
                    ack: "client-individual",
                    headers: [.init("prefetch-count", "1")]
                )
            } else {
                slots[index].connection.unsubscribe(id: Self.jobSubscription)
            }
        }
    }

    private func tick() async {
        let now = ContinuousClock.now - origin
        let wall = Double(now.components.seconds) + Double(now.components.attoseconds) / 1e18
        cpu.add(.init(wall: wall, cpu: CPUWindow.processCPUSeconds()))
        updateSubscriptions()
        await publishStatus()
    }

    private func connectionChanged(_ state: STOMPConnectionState, slot index: Int, generation: Int) {
        guard slots.indices.contains(index), slots[index].generation == generation else { return }
        switch state {
        case .reconnecting(_, _, let reason):
            // The broker requeued the slot's job with the connection: another service may take it
            // now, so this recording stops rather than record the call twice.
            problems["broker"] = "broker connection lost: \(reason)"
            slots[index].job?.recording.stop(
                .handover("the broker connection was lost; the job went back to the queue")
            )
        case .connected:
            problems["broker"] = nil
        case .closed, .connecting:
            break
        }
    }

    private func finishIfDrained() {
        guard case .draining = phase, held.isEmpty else { return }
        phase = .stopped
        Task {
            await publishStatus()
            stopped?.resume()
            stopped = nil
        }
    }

    private func publishStatus() async {
        await announce(.serviceStatus(statusEvent()))
    }

    private func announce(_ event: RecorderEvent) async {
        eventContinuation.yield(event)
        let frame = STOMPFrame(
            .send,
            headers: [
                .init("destination", RecorderTopology.eventDestination(event)),
                .init("content-type", "application/json"),
            ],
            body: event.encoded()
        )
        do {
            try await control.send(frame)
        } catch {
            logger.warning("cannot announce", metadata: ["error": "\(error)"])
        }
    }

    /// Free bytes on the storage root's file system.
    private func diskFreeBytes() -> UInt64? {
        var info = statvfs()
        guard statvfs(configuration.environment.storage.path, &info) == 0 else { return nil }
        return UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue
    }

    // MARK: Events

    private func now() -> String { RecorderTime.format(Date()) }

    private func startedEvent(_ job: RecordJob, path: String, attempt: Int) -> RecordingStarted {
        RecordingStarted(
            jobID: job.jobID,
            callID: job.callID,
            serviceID: configuration.serviceID,
            path: path,
            attempt: attempt,
            time: now()
        )
    }

    private func finishedEvent(_ job: RecordJob, _ recording: FinishedRecording) -> RecordingFinished {
        RecordingFinished(
            jobID: job.jobID,
            callID: job.callID,
            serviceID: configuration.serviceID,
            path: recording.directory,
            summary: Self.summary(recording),
            time: now()
        )
    }

    private func failure(jobID: String?, callID: UInt64?, reason: String) -> RecordingFailed {
        RecordingFailed(jobID: jobID, callID: callID, serviceID: configuration.serviceID, reason: reason, time: now())
    }

    private func statusEvent() -> ServiceStatus {
        ServiceStatus(
            serviceID: configuration.serviceID,
            host: configuration.host,
            calls: held.map { item in
                ServiceCall(
                    jobID: item.recording.job.jobID,
                    callID: item.recording.job.callID,
                    participants: item.recording.participants,
                    seconds: item.recording.seconds
                )
            }.sorted { $0.jobID < $1.jobID },
            cpu: cpu.cores,
            cpuBudget: configuration.admission.cpuBudget,
            diskFreeBytes: diskFreeBytes() ?? 0,
            draining: phase != .serving,
            problems: problems.keys.sorted().compactMap { problems[$0] },
            time: now()
        )
    }

    /// The manifest in brief; the outage of a continued attempt is its gap, on this attempt's
    /// timeline (negative start: it began before this attempt did).
    static func summary(_ recording: FinishedRecording) -> RecordingSummary {
        let manifest = recording.manifest
        let tracks = manifest.participants.flatMap { $0.segments.flatMap(\.tracks) }
        let written = tracks.reduce(UInt64(0)) { $0 + UInt64(max($1.framesWritten, 0)) }
        let first = Outage.firstFrame(of: manifest)
        let last = Outage.lastFrame(of: manifest)
        let duration = first.flatMap { first in last.map { max(0, $0.timeIntervalSince(first)) } } ?? 0
        var gaps: [RecordingGap] = []
        if let continuation = manifest.continuation, let seconds = continuation.outageSeconds,
            let start = continuation.outageStart.flatMap(Outage.parse), let origin = Outage.parse(manifest.startTime)
        {
            gaps.append(RecordingGap(start: start.timeIntervalSince(origin), seconds: seconds))
        }
        return RecordingSummary(
            participants: manifest.participants.filter(\.recorded).count,
            duration: duration,
            framesWritten: written,
            problems: recording.problems,
            gaps: gaps
        )
    }
}
