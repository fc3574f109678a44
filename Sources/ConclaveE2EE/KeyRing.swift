import ConclaveCore
import Synchronization

/// How long keys stay usable for decryption after they stop being current, as in ECall iOS.
public struct KeyRetention: Sendable, Hashable {
    /// The previous key is kept this long for video (ECall: 120 s).
    public var previousVideo: Duration
    /// The previous key is kept this long for audio (ECall: 30 s).
    public var previousAudio: Duration
    /// A scheduled next key is usable for decryption this long after it was scheduled (ECall: 60 s),
    /// or until it is applied.
    public var next: Duration

    public init(
        previousVideo: Duration = .seconds(120),
        previousAudio: Duration = .seconds(30),
        next: Duration = .seconds(60)
    ) {
        self.previousVideo = previousVideo
        self.previousAudio = previousAudio
        self.next = next
    }

    /// ECall's values.
    public static let ecall = KeyRetention()

    func previous(for kind: MediaKind) -> Duration {
        kind == .audio ? previousAudio : previousVideo
    }
}

/// One key in the ring, with the epoch that names it (the rotation count; the `sframe` key id carries
/// it mod 256).
public struct KeyRingEntry: Sendable, Hashable {
    public var key: CallKey
    public var epoch: UInt64

    public init(key: CallKey, epoch: UInt64) {
        self.key = key
        self.epoch = epoch
    }
}

/// The keys of one call: current, previous (until its retention runs out) and next (scheduled for a
/// rotation), as ECall's `CallEncryptionManager` keeps them.
///
/// A value type: every change is a `mutating` method taking the time, so it is easy to test and to
/// share behind a lock (`CallKeyRing`).
public struct KeyRing: Sendable {
    public private(set) var current: KeyRingEntry?
    public private(set) var previous: KeyRingEntry?
    public private(set) var next: KeyRingEntry?
    /// When `previous` stopped being current.
    private var previousRetiredAt: Duration?
    /// When `next` was scheduled, and when it becomes current.
    private var nextScheduledAt: Duration?
    private var nextApplyAt: Duration?
    public let retention: KeyRetention

    public init(retention: KeyRetention = .ecall) {
        self.retention = retention
    }

    /// What ``install(_:at:)`` did with a key.
    public enum Installation: Sendable, Hashable {
        /// The key is current from now on; it was not before.
        case madeCurrent
        /// The key was current already: nothing changed.
        case alreadyCurrent
        /// The key's epoch is older than the current one's: it is kept for decryption only
        /// (``retain(_:at:)``) and the current key stays.
        case keptForDecryption
    }

    /// Makes `entry` current now; the old current becomes previous (unless it is the same key), as
    /// ECall's `setUpAesKey` does. A pending `next` with the same key, or with an epoch that is not
    /// newer, is consumed: applied later, it would replace a newer key.
    ///
    /// Epochs only move forward here: an `entry` older than the current key (an answer written
    /// before a rotation that this ring has applied meanwhile) is kept for decryption only. The
    /// ring applies a due rotation on its own clock, so a caller deciding from its own view of
    /// time can be a moment behind it.
    @discardableResult
    public mutating func install(_ entry: KeyRingEntry, at now: Duration) -> Installation {
        if let next, next.key == entry.key || next.epoch <= entry.epoch { forgetNext() }
        if let current, entry.epoch < current.epoch {
            retain(entry, at: now)
            return .keptForDecryption
        }
        guard current != entry else { return .alreadyCurrent }
        if let current, current.key != entry.key {
            previous = current
            previousRetiredAt = now
        }
        current = entry
        return .madeCurrent
    }

    /// Keeps `entry` usable for decryption without making it current: a key that arrives after a
    /// newer one took over may still be the one of frames in flight. It takes the previous slot,
    /// retired now, unless it is the current or next key, or the previous slot holds a newer epoch
    /// (the ring keeps one previous key, as ECall keeps one backup).
    public mutating func retain(_ entry: KeyRingEntry, at now: Duration) {
        guard entry.key != current?.key, entry.key != next?.key else { return }
        if let previous, previous.epoch > entry.epoch { return }
        previous = entry
        previousRetiredAt = now
    }

    /// Schedules a rotation: `entry` is usable for decryption at once, and becomes current at `applyAt`
    /// (ECall: the host's timestamp, ten seconds ahead).
    public mutating func schedule(_ entry: KeyRingEntry, applyAt: Duration, at now: Duration) {
        next = entry
        nextScheduledAt = now
        nextApplyAt = applyAt
        advance(to: now)
    }

    /// Applies a due rotation and forgets keys whose retention has run out for both media kinds.
    public mutating func advance(to now: Duration) {
        if let pending = next, let applyAt = nextApplyAt, applyAt <= now {
            install(pending, at: applyAt)
        }
        if let retiredAt = previousRetiredAt,
            now - retiredAt >= max(retention.previousAudio, retention.previousVideo)
        {
            previous = nil
            previousRetiredAt = nil
        }
        if next != nil, let scheduledAt = nextScheduledAt, now - scheduledAt >= retention.next {
            forgetNext()
        }
    }

    private mutating func forgetNext() {
        next = nil
        nextScheduledAt = nil
        nextApplyAt = nil
    }

    /// The keys to try for a frame of `kind`, in ECall's order: current, previous, next.
    public func decryptionCandidates(for kind: MediaKind, at now: Duration) -> [KeyRingEntry] {
        var candidates: [KeyRingEntry] = []
        if let current { candidates.append(current) }
        if let previous, let retiredAt = previousRetiredAt, now - retiredAt < retention.previous(for: kind) {
            candidates.append(previous)
        }
        if let next, let scheduledAt = nextScheduledAt, now - scheduledAt < retention.next {
            candidates.append(next)
        }
        return candidates
    }

    /// The candidate whose epoch is `epoch` mod 256, for `sframe` key ids.
    public func entry(epochByte: UInt8, for kind: MediaKind, at now: Duration) -> KeyRingEntry? {
        decryptionCandidates(for: kind, at: now).first { UInt8(truncatingIfNeeded: $0.epoch) == epochByte }
    }

    /// Forgets every key (end of call).
    public mutating func removeAll() {
        self = KeyRing(retention: retention)
    }
}

/// A `KeyRing` shared between the media threads of one call and the signalling that updates it.
public final class CallKeyRing: Sendable {
    private let ring: Mutex<KeyRing>
    private let clock: any MonotonicTimeSource

    public init(retention: KeyRetention = .ecall, clock: any MonotonicTimeSource = SystemTimeSource()) {
        ring = Mutex(KeyRing(retention: retention))
        self.clock = clock
    }

    /// The time source the ring uses.
    public var timeSource: any MonotonicTimeSource { clock }

    /// Makes `key` current now (a received invitation, an emergency key, a rejoin), unless its
    /// epoch is older than the current one's: see ``KeyRing/install(_:at:)``.
    @discardableResult
    public func install(_ key: CallKey, epoch: UInt64) -> KeyRing.Installation {
        let now = clock.now()
        return ring.withLock {
            $0.advance(to: now)
            return $0.install(KeyRingEntry(key: key, epoch: epoch), at: now)
        }
    }

    /// Keeps `key` usable for decryption only (a late key older than the current one): see
    /// ``KeyRing/retain(_:at:)``.
    public func retain(_ key: CallKey, epoch: UInt64) {
        let now = clock.now()
        ring.withLock {
            $0.advance(to: now)
            $0.retain(KeyRingEntry(key: key, epoch: epoch), at: now)
        }
    }

    /// Schedules a rotation to `key` after `delay` (zero or negative applies at once).
    public func schedule(_ key: CallKey, epoch: UInt64, after delay: Duration) {
        let now = clock.now()
        ring.withLock { $0.schedule(KeyRingEntry(key: key, epoch: epoch), applyAt: now + max(delay, .zero), at: now) }
    }

    /// The current key, after applying any due rotation.
    public func current() -> KeyRingEntry? {
        let now = clock.now()
        return ring.withLock {
            $0.advance(to: now)
            return $0.current
        }
    }

    /// Decryption candidates for `kind`, after applying any due rotation.
    public func candidates(for kind: MediaKind) -> [KeyRingEntry] {
        let now = clock.now()
        return ring.withLock {
            $0.advance(to: now)
            return $0.decryptionCandidates(for: kind, at: now)
        }
    }

    /// The candidate with this epoch byte, after applying any due rotation.
    public func entry(epochByte: UInt8, for kind: MediaKind) -> KeyRingEntry? {
        let now = clock.now()
        return ring.withLock {
            $0.advance(to: now)
            return $0.entry(epochByte: epochByte, for: kind, at: now)
        }
    }

    /// A copy of the ring as it is now.
    public func snapshot() -> KeyRing {
        let now = clock.now()
        return ring.withLock {
            $0.advance(to: now)
            return $0
        }
    }

    /// Forgets every key.
    public func removeAll() { ring.withLock { $0.removeAll() } }
}
