import ECallSignaling
import Foundation

/// One call to record, as submitted to the job queue (the JSON body of a STOMP MESSAGE).
///
/// A job crosses a trust boundary: anyone allowed to publish to the queue can write one, and the
/// service that takes it writes files and joins calls on its behalf. So decoding is strict: every
/// field is checked against its range and the output path is confined to the storage root before
/// a service can act on it, and a job that fails is refused with one line naming the field.
public struct RecordJob: Codable, Sendable, Hashable {
    /// The only format version so far; a service refuses versions it does not know.
    public static let currentVersion = 1

    public var version: Int
    /// `[A-Za-z0-9._-]{1,64}`, unique per job: file names and events refer to it.
    public var jobID: String
    public var callID: UInt64
    public var room: UInt64
    /// The Janus server's WebSocket, `ws://` or `wss://`.
    public var janusURL: String
    public var crypto: RecordJobCrypto
    /// The call key wrapped (ConclaveE2EE's `KeyWrapping.wrap`, ECall's `encryptedAESKey`) for the
    /// recorder fleet's device key; nil only with crypto `none`.
    public var wrappedKey: String?
    /// The epoch of ``wrappedKey``; nil only with crypto `none`.
    public var keyEpoch: UInt64?
    /// The device id the key is wrapped for (the fleet's recorder device); nil only with crypto `none`.
    public var recorderDeviceID: UInt64?
    /// The host's signed `call_invitation` to the fleet device (``SignalMessage`` JSON, roster
    /// included), as the fleet device received it. With it the service follows the call's key
    /// rotations as an invited device: the roster says whose key messages it may accept, which the
    /// job's one key cannot. Optional: without it the job records under ``wrappedKey`` alone.
    public var invitation: String?
    /// Where to write, relative to the service's storage root (see ``RecordJobPath``).
    public var output: String
    public var stop: StopCondition
    /// The name the recorder joins with.
    public var display: String?
    /// When the job was submitted, ISO 8601.
    public var submittedAt: String

    public init(
        version: Int = RecordJob.currentVersion,
        jobID: String,
        callID: UInt64,
        room: UInt64,
        janusURL: String,
        crypto: RecordJobCrypto,
        wrappedKey: String? = nil,
        keyEpoch: UInt64? = nil,
        recorderDeviceID: UInt64? = nil,
        invitation: String? = nil,
        output: String,
        stop: StopCondition,
        display: String? = nil,
        submittedAt: String
    ) {
        self.version = version
        self.jobID = jobID
        self.callID = callID
        self.room = room
        self.janusURL = janusURL
        self.crypto = crypto
        self.wrappedKey = wrappedKey
        self.keyEpoch = keyEpoch
        self.recorderDeviceID = recorderDeviceID
        self.invitation = invitation
        self.output = output
        self.stop = stop
        self.display = display
        self.submittedAt = submittedAt
    }

    /// The JSON names: ECall's camelCase with `Id`, as its signaling messages spell ids.
    enum CodingKeys: String, CodingKey, CaseIterable {
        case version
        case jobID = "jobId"
        case callID = "callId"
        case room
        case janusURL = "janusUrl"
        case crypto
        case wrappedKey
        case keyEpoch
        case recorderDeviceID = "recorderDeviceId"
        case invitation
        case output
        case stop
        case display
        case submittedAt
    }

    /// Decodes and checks every field: a job from a `Decoder` is as valid as one from ``decode(_:)``.
    public init(from decoder: any Decoder) throws {
        try JSONFields.rejectUnknownKeys(in: decoder, allowed: CodingKeys.allCases.map(\.stringValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // Foundation reports a number out of a field's range without the field's name: add it.
        func required<T: Decodable>(_ type: T.Type, _ key: CodingKeys) throws -> T {
            try JSONFields.naming(key, under: decoder.codingPath) { try container.decode(type, forKey: key) }
        }
        func optional<T: Decodable>(_ type: T.Type, _ key: CodingKeys) throws -> T? {
            try JSONFields.naming(key, under: decoder.codingPath) { try container.decodeIfPresent(type, forKey: key) }
        }
        version = try required(Int.self, .version)
        jobID = try required(String.self, .jobID)
        callID = try required(UInt64.self, .callID)
        room = try required(UInt64.self, .room)
        janusURL = try required(String.self, .janusURL)
        crypto = try required(RecordJobCrypto.self, .crypto)
        wrappedKey = try optional(String.self, .wrappedKey)
        keyEpoch = try optional(UInt64.self, .keyEpoch)
        recorderDeviceID = try optional(UInt64.self, .recorderDeviceID)
        invitation = try optional(String.self, .invitation)
        output = try required(String.self, .output)
        stop = try required(StopCondition.self, .stop)
        display = try optional(String.self, .display)
        submittedAt = try required(String.self, .submittedAt)
        try validate()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(callID, forKey: .callID)
        try container.encode(room, forKey: .room)
        try container.encode(janusURL, forKey: .janusURL)
        try container.encode(crypto, forKey: .crypto)
        try container.encodeIfPresent(wrappedKey, forKey: .wrappedKey)
        try container.encodeIfPresent(keyEpoch, forKey: .keyEpoch)
        try container.encodeIfPresent(recorderDeviceID, forKey: .recorderDeviceID)
        try container.encodeIfPresent(invitation, forKey: .invitation)
        try container.encode(output, forKey: .output)
        try container.encode(stop, forKey: .stop)
        try container.encodeIfPresent(display, forKey: .display)
        try container.encode(submittedAt, forKey: .submittedAt)
    }
}

/// How the call's media is encrypted end to end, which decides how the recorder opens it.
public enum RecordJobCrypto: String, Codable, Sendable, Hashable, CaseIterable {
    /// ECall's frame encryption.
    case ecall
    /// SFrame (RFC 9605).
    case sframe
    /// No end-to-end encryption: the job carries no key.
    case none
}

/// When a recording ends.
public enum StopCondition: Codable, Sendable, Hashable {
    /// A fixed duration from the moment the recorder joined.
    case after(seconds: Double)
    /// Once no participant has published for `graceSeconds`.
    case roomEmpty(graceSeconds: Double)

    /// The longest duration or grace a job may ask for: a day.
    public static let maximumSeconds: Double = 24 * 60 * 60

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case after
        case roomEmpty
    }

    /// `{"after": seconds}` or `{"roomEmpty": graceSeconds}`, exactly one of them.
    public init(from decoder: any Decoder) throws {
        try JSONFields.rejectUnknownKeys(in: decoder, allowed: CodingKeys.allCases.map(\.stringValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let after = try container.decodeIfPresent(Double.self, forKey: .after)
        let grace = try container.decodeIfPresent(Double.self, forKey: .roomEmpty)
        switch (after, grace) {
        case (let seconds?, nil): self = .after(seconds: seconds)
        case (nil, let seconds?): self = .roomEmpty(graceSeconds: seconds)
        default: throw RecordJobError("stop: expected exactly one of {\"after\": seconds} or {\"roomEmpty\": seconds}")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .after(let seconds): try container.encode(seconds, forKey: .after)
        case .roomEmpty(let grace): try container.encode(grace, forKey: .roomEmpty)
        }
    }

    /// The seconds it carries, and the JSON name they came under.
    var seconds: (value: Double, name: String) {
        switch self {
        case .after(let seconds): (seconds, "stop.after")
        case .roomEmpty(let grace): (grace, "stop.roomEmpty")
        }
    }
}

/// A job that cannot be taken, and why: one line that names the field.
public struct RecordJobError: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

extension RecordJob {
    /// The largest job body a service reads: the invitation at its largest and 16 KiB for the rest
    /// (a wrapped RSA-4096 key is under 700 bytes), bounding what a bad publisher can make a
    /// service parse.
    public static let maximumBodySize = maximumInvitationLength + 16 * 1024
    /// The longest invitation: its roster lists a public key per invited device (about 800 bytes
    /// for RSA-4096, 100 for P-256), so 48 KiB holds a roster of 50 RSA-4096 devices.
    public static let maximumInvitationLength = 48 * 1024
    /// The longest wrapped key (base64 of RSA-OAEP up to 16384-bit keys, or ECall's P-256 box).
    public static let maximumWrappedKeyLength = 4096
    public static let maximumURLLength = 2048
    public static let maximumDisplayLength = 256
    public static let maximumJobIDLength = 64

    /// Parses and checks a job body (bounded size, every field's range, the output path rules).
    public static func decode(_ body: [UInt8]) throws(RecordJobError) -> RecordJob {
        guard body.count <= maximumBodySize else {
            throw RecordJobError("job: \(body.count) bytes, more than the \(maximumBodySize) a job may have")
        }
        return try JSONFields.decode(RecordJob.self, from: body, what: "job")
    }

    /// The JSON body (keys sorted, so equal jobs are equal bytes).
    public func encoded() -> [UInt8] {
        JSONFields.encode(self)
    }

    /// Checks the ranges and rules the types alone do not express.
    public func validate() throws(RecordJobError) {
        guard version == Self.currentVersion else {
            throw RecordJobError("version: \(version) is not supported (expected \(Self.currentVersion))")
        }
        try Self.checkIdentifier(jobID, field: "jobId")
        guard callID > 0 else { throw RecordJobError("callId: must not be 0") }
        // Janus picks a random room for 0, which is never the call's room.
        guard room > 0 else { throw RecordJobError("room: must not be 0") }
        try Self.checkURL(janusURL)
        switch crypto {
        case .none:
            guard wrappedKey == nil, keyEpoch == nil, recorderDeviceID == nil else {
                throw RecordJobError("wrappedKey: a job with crypto \"none\" carries no key, epoch or recorder device")
            }
            guard invitation == nil else {
                throw RecordJobError("invitation: a job with crypto \"none\" has no keys to follow")
            }
        case .ecall, .sframe:
            guard let wrappedKey else {
                throw RecordJobError("wrappedKey: missing (crypto \"\(crypto.rawValue)\" needs the wrapped call key)")
            }
            try Self.checkWrappedKey(wrappedKey)
            guard keyEpoch != nil else {
                throw RecordJobError("keyEpoch: missing (crypto \"\(crypto.rawValue)\" needs the key's epoch)")
            }
            guard let recorderDeviceID else {
                throw RecordJobError("recorderDeviceId: missing (the device the key is wrapped for)")
            }
            guard recorderDeviceID > 0 else { throw RecordJobError("recorderDeviceId: must not be 0") }
            if let invitation { try checkInvitation(invitation, recorderDeviceID: recorderDeviceID) }
        }
        do {
            _ = try RecordJobPath(output)
        } catch {
            throw RecordJobError("output: \(error.reason)")
        }
        let (seconds, name) = stop.seconds
        guard seconds.isFinite, seconds > 0, seconds <= StopCondition.maximumSeconds else {
            throw RecordJobError("\(name): \(seconds) is not in (0, \(Int(StopCondition.maximumSeconds))] seconds")
        }
        if let display {
            try Self.checkText(display, field: "display", limit: Self.maximumDisplayLength, allowEmpty: false)
        }
        try Self.checkTimestamp(submittedAt, field: "submittedAt")
    }

    /// The invitation's shape: a `call_invitation` for this call whose roster has the fleet device
    /// (and, when it names a callee, addressed to it) and whose crypto is the job's. Its signature
    /// is the service's to check: it needs the roster's keys and says which one failed.
    func checkInvitation(_ text: String, recorderDeviceID: UInt64) throws(RecordJobError) {
        let count = text.utf8.count
        guard (1...Self.maximumInvitationLength).contains(count) else {
            throw RecordJobError("invitation: \(count) bytes, expected 1 to \(Self.maximumInvitationLength)")
        }
        let message: SignalMessage
        do {
            message = try SignalMessage(json: text)
        } catch {
            throw RecordJobError("invitation: not a signaling message: \(error)")
        }
        guard message.type == .callInvitation else {
            throw RecordJobError("invitation: a \(Self.quoted(message.type.rawValue)) message, not a call_invitation")
        }
        guard message.callId == callID else {
            throw RecordJobError(
                "invitation: for call \(message.callId.map(String.init) ?? "-"), not the job's call \(callID)"
            )
        }
        if let callee = message.calleeDeviceId, callee != recorderDeviceID {
            throw RecordJobError(
                "invitation: addressed to device \(callee), not the recorder device \(recorderDeviceID)"
            )
        }
        guard let roster = message.roster, roster.contains(where: { $0.deviceId == recorderDeviceID }) else {
            throw RecordJobError("invitation: its roster does not list the recorder device \(recorderDeviceID)")
        }
        guard roster.contains(where: \.isHost) else { throw RecordJobError("invitation: its roster names no host") }
        if let format = message.crypto, format.rawValue != crypto.rawValue {
            throw RecordJobError("invitation: crypto \(format.rawValue), the job's is \(crypto.rawValue)")
        }
    }

    static func checkIdentifier(_ value: String, field: String) throws(RecordJobError) {
        let bytes = Array(value.utf8)
        guard (1...maximumJobIDLength).contains(bytes.count) else {
            throw RecordJobError("\(field): \(bytes.count) characters, expected 1 to \(maximumJobIDLength)")
        }
        for byte in bytes where !isIdentifierByte(byte) {
            throw RecordJobError("\(field): \(quoted(value)) has a character outside [A-Za-z0-9._-]")
        }
    }

    static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    static func checkURL(_ url: String) throws(RecordJobError) {
        let bytes = Array(url.utf8)
        guard bytes.count <= maximumURLLength else {
            throw RecordJobError("janusUrl: \(bytes.count) bytes, more than \(maximumURLLength)")
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw RecordJobError("janusUrl: only printable ASCII without spaces is allowed")
        }
        let lowered = url.lowercased()
        guard lowered.hasPrefix("ws://") || lowered.hasPrefix("wss://") else {
            throw RecordJobError("janusUrl: \(quoted(url)) is not a ws:// or wss:// URL")
        }
        guard let parsed = URLComponents(string: url), let host = parsed.host, !host.isEmpty else {
            throw RecordJobError("janusUrl: \(quoted(url)) has no host")
        }
    }

    static func checkWrappedKey(_ key: String) throws(RecordJobError) {
        let bytes = Array(key.utf8)
        guard (1...maximumWrappedKeyLength).contains(bytes.count) else {
            throw RecordJobError("wrappedKey: \(bytes.count) characters, expected 1 to \(maximumWrappedKeyLength)")
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="),
                UInt8(ascii: ":"):
                continue
            default:
                throw RecordJobError("wrappedKey: expected base64 (with one ':' for a P-256 box)")
            }
        }
    }

    /// Free text: bounded, no control characters (it reaches logs and file metadata).
    static func checkText(_ value: String, field: String, limit: Int, allowEmpty: Bool) throws(RecordJobError) {
        let count = value.utf8.count
        guard count <= limit else { throw RecordJobError("\(field): \(count) bytes, more than \(limit)") }
        guard allowEmpty || count > 0 else { throw RecordJobError("\(field): must not be empty") }
        guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw RecordJobError("\(field): control characters are not allowed")
        }
    }

    static func checkTimestamp(_ value: String, field: String) throws(RecordJobError) {
        guard value.utf8.count <= 64, RecorderTime.parse(value) != nil else {
            throw RecordJobError("\(field): \(quoted(String(value.prefix(64)))) is not an ISO 8601 date and time")
        }
    }

    /// A value for an error message: quoted, cut short, control characters escaped.
    static func quoted(_ value: String) -> String {
        var text = ""
        for scalar in value.unicodeScalars.prefix(80) {
            text += scalar.properties.generalCategory == .control ? scalar.escaped(asASCII: true) : String(scalar)
        }
        return "\"" + text + (value.unicodeScalars.count > 80 ? "…" : "") + "\""
    }
}

/// Timestamps as the queue's messages carry them: ISO 8601 in UTC.
public enum RecorderTime {
    /// `date` as `2026-11-24T07:00:00.123Z`.
    public static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The date of an ISO 8601 date and time, with or without fractional seconds; nil otherwise.
    public static func parse(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
