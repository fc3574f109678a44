import ConclaveCore

/// ECall's limits on asking the host for the call key again (interop spec §2.7).
public struct KeyRequestPolicy: Sendable, Hashable {
    /// No new request while one is in flight, until this long has passed without an answer.
    public var timeout: Duration
    /// At least this long between two requests.
    public var cooldown: Duration
    /// At least this long between two requests with the same reason.
    public var dedupe: Duration

    public init(timeout: Duration = .seconds(10), cooldown: Duration = .seconds(3), dedupe: Duration = .seconds(1)) {
        self.timeout = timeout
        self.cooldown = cooldown
        self.dedupe = dedupe
    }

    /// ECall's values: 10 s timeout, 3 s cooldown, 1 s dedupe.
    public static let ecall = KeyRequestPolicy()
}

/// Decides whether a decrypt failure should turn into a "key needed" request.
///
/// The checks run in ECall's order: in flight (until `timeout`), cooldown, same reason recently. With
/// ECall's numbers the dedupe window is inside the cooldown, so it only matters if a caller shortens
/// the cooldown; it is kept so the policy is ECall's as written. The host/no-host checks belong to
/// signalling, which receives the request.
public struct KeyRequestLimiter: Sendable {
    public let policy: KeyRequestPolicy
    private var inFlightSince: Duration?
    private var lastSent: Duration?
    private var lastSentByReason: [String: Duration] = [:]

    public init(policy: KeyRequestPolicy = .ecall) {
        self.policy = policy
    }

    /// Whether a request for `reason` may go out at `now`; if so, it is recorded as sent and in flight.
    public mutating func shouldRequest(reason: String, at now: Duration) -> Bool {
        if let since = inFlightSince, now - since < policy.timeout { return false }
        if let last = lastSent, now - last < policy.cooldown { return false }
        if let last = lastSentByReason[reason], now - last < policy.dedupe { return false }
        inFlightSince = now
        lastSent = now
        lastSentByReason[reason] = now
        return true
    }

    /// The key arrived (or the answer failed to unwrap): the request is no longer in flight.
    public mutating func requestCompleted() {
        inFlightSince = nil
    }
}

/// A frame failed to decrypt and the limiter let a key request through.
public struct KeyNeededEvent: Sendable, Hashable {
    /// The call whose key is needed.
    public var callID: UInt64
    /// The remote sender whose frame failed (as given to `makeDecryptor`).
    public var senderID: UInt64
    /// The codec of the frame that failed.
    public var codec: MediaCodec
    /// Why it failed.
    public var reason: DecryptFailureReason

    public init(callID: UInt64, senderID: UInt64, codec: MediaCodec, reason: DecryptFailureReason) {
        self.callID = callID
        self.senderID = senderID
        self.codec = codec
        self.reason = reason
    }

    /// The reason string ECall sends (`audio_decrypt_failed` or `video_decrypt_failed`).
    public var ecallReason: String { "\(codec.kind.rawValue)_decrypt_failed" }
}

/// Decrypt failures counted by sender and reason.
public struct DecryptFailureCounts: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        public var senderID: UInt64
        public var reason: DecryptFailureReason
    }

    public private(set) var counts: [Key: Int] = [:]

    public init() {}

    /// How many frames from `senderID` failed for `reason`.
    public func count(senderID: UInt64, reason: DecryptFailureReason) -> Int {
        counts[Key(senderID: senderID, reason: reason)] ?? 0
    }

    /// How many frames failed for `reason`, all senders together.
    public func count(reason: DecryptFailureReason) -> Int {
        counts.filter { $0.key.reason == reason }.reduce(0) { $0 + $1.value }
    }

    /// All failures.
    public var total: Int { counts.values.reduce(0, +) }

    mutating func record(senderID: UInt64, reason: DecryptFailureReason) {
        counts[Key(senderID: senderID, reason: reason), default: 0] += 1
    }
}
