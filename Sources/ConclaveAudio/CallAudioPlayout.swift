public import ConclaveCore
public import ConclaveOpus
import Synchronization

/// A participant's playout as other threads see it: statistics, level and volume.
public struct ParticipantPlayout: Sendable, Hashable {
    /// The playout buffer's counters and delays.
    public var statistics: PlayoutStatistics
    /// The level of the last 20 ms played (before the volume).
    public var level: AudioLevel
    /// The volume in force, 0 ... 2.
    public var volume: Float
}

/// Plays a call: every participant's received Opus packets, each through its own
/// `PlayoutBuffer`, mixed by `AudioMixer` into the output device's samples.
///
/// Two threads use it. The receive path calls `received(feedID:frame:at:)`, which only appends
/// the packet to an inbox under a lock (no decoding, no allocation beyond the inbox's growth), so
/// the network thread is never held up by audio work. The output device's thread calls
/// `render(into:)`, which takes the inbox, inserts the packets into their buffers and decodes
/// what it plays: decoding happens on the device thread, which is acceptable at Opus's cost (well
/// under a millisecond per participant per 20 ms) and keeps every decoder on one thread. Levels,
/// statistics and volumes are readable and settable from any thread.
///
/// `render` accepts any number of samples: it mixes 20 ms at a time and keeps what a block has
/// left over for the next call. Each block is pulled at the instant it will be heard (the
/// `DeviceClock`'s instant for the call plus the samples before it), so the buffers' delay
/// control sees a steady 20 ms pace whatever size the device asks for and however late its
/// callbacks run.
public final class CallAudioPlayout: Sendable {
    /// Samples per second of the output: 48 kHz mono Int16.
    public static let sampleRate = AudioFrame.sampleRate

    private struct Arrival {
        var feedID: UInt64
        var frame: EncodedFrame
        var instant: ContinuousClock.Instant
    }

    /// What other threads hand to the render thread.
    private struct Inbox {
        var arrivals: [Arrival] = []
        var left: [UInt64] = []
        var volumes: [UInt64: Float] = [:]
    }

    /// Owned by whichever thread renders (the lock is uncontended; it makes `render` safe to call
    /// from more than one thread, one at a time).
    private struct Renderer {
        var buffers: [UInt64: PlayoutBuffer] = [:]
        var order: [UInt64] = []
        var mixer = AudioMixer()
        var block = [Int16](repeating: 0, count: AudioMixer.frameSamples)
        var pulled = [Int16](repeating: 0, count: AudioMixer.frameSamples)
        /// Samples of `block` not yet rendered: `block[(count - remainder)...]`.
        var remainder = 0
        var spare: [Arrival] = []
        var volumes: [UInt64: Float] = [:]
        var clock = DeviceClock(sampleRate: CallAudioPlayout.sampleRate)
        /// The figures of the last block, published together (capacity reused).
        var figures: [(UInt64, ParticipantPlayout)] = []
        var failures: [UInt64: OpusCodecError] = [:]
    }

    private let configuration: PlayoutConfiguration
    private let inbox = Mutex(Inbox())
    private let renderer: Mutex<Renderer>
    private let published = Mutex([UInt64: ParticipantPlayout]())
    /// Arrivals kept at most between two renders (about 10 s of 20 ms packets from 10 people): a
    /// device that stopped rendering must not make the inbox grow without bound.
    private let inboxLimit = 5_000

    /// Creates a playout; `configuration` applies to every participant's buffer.
    public init(configuration: PlayoutConfiguration = PlayoutConfiguration()) {
        self.configuration = configuration
        renderer = Mutex(Renderer())
    }

    /// Takes a participant's Opus packet as it arrives (any thread; cheap).
    public func received(feedID: UInt64, frame: EncodedFrame, at instant: ContinuousClock.Instant = .now) {
        inbox.withLock { inbox in
            if inbox.arrivals.count >= inboxLimit { inbox.arrivals.removeFirst(inbox.arrivals.count / 2) }
            inbox.arrivals.append(Arrival(feedID: feedID, frame: frame, instant: instant))
        }
    }

    /// Forgets a participant who left: their buffer, decoder and figures.
    public func participantLeft(feedID: UInt64) {
        inbox.withLock { $0.left.append(feedID) }
        published.withLock { _ = $0.removeValue(forKey: feedID) }
    }

    /// Sets a participant's volume: 0 (muted) ... 1 (as received) ... 2 (+6 dB).
    public func setVolume(_ volume: Float, feedID: UInt64) {
        let clamped = volume.isNaN ? 1 : min(AudioMixer.maximumVolume, max(0, volume))
        inbox.withLock { $0.volumes[feedID] = clamped }
        published.withLock { $0[feedID]?.volume = clamped }
    }

    /// Every participant's statistics, last level and volume (any thread).
    public var participants: [UInt64: ParticipantPlayout] { published.withLock { $0 } }

    /// Participants whose decoder could not be created (their audio is not played).
    public var failures: [UInt64: OpusCodecError] { renderer.withLock { $0.failures } }

    /// Fills `output` with the mix, 48 kHz mono, from now on (the output device's thread).
    ///
    /// The instant its first sample is heard comes from a `DeviceClock`: the samples the device
    /// has asked for, not the moment of this call, whose lateness on a loaded machine would make
    /// the buffers drop and conceal frames.
    public func render(into output: UnsafeMutableBufferPointer<Int16>) {
        render(into: output, calledAt: .now)
    }

    /// Fills `output` with the mix, 48 kHz mono, for a device callback made at `instant` (tests
    /// drive the callbacks' times through it); the samples are heard at the device clock's instant.
    public func render(into output: UnsafeMutableBufferPointer<Int16>, calledAt instant: ContinuousClock.Instant) {
        let count = output.count
        let heard = renderer.withLock { $0.clock.instant(forCallAt: instant, samples: count) }
        render(into: output, now: heard, arrivedBy: instant)
    }

    /// Fills `output` with the mix, 48 kHz mono, its first sample heard at `now` (tests drive the
    /// clock through it).
    public func render(into output: UnsafeMutableBufferPointer<Int16>, now: ContinuousClock.Instant) {
        render(into: output, now: now, arrivedBy: now)
    }

    /// Fills `output`, its first sample heard at `now`, with the packets that arrived by
    /// `arrivedBy`. Each block is mixed ahead of its instant by the difference (a callback early
    /// on the device clock's steady line, a block that starts inside the request), which its
    /// buffer adds to its target delay.
    private func render(
        into output: UnsafeMutableBufferPointer<Int16>,
        now: ContinuousClock.Instant,
        arrivedBy: ContinuousClock.Instant
    ) {
        renderer.withLock { renderer in
            take(into: &renderer)
            var written = 0
            while written < output.count {
                if renderer.remainder == 0 {
                    let heard = now + .microseconds(Int64(written) * 1_000_000 / Int64(Self.sampleRate))
                    mix(&renderer, at: heard, lookahead: max(.zero, heard - arrivedBy))
                    renderer.remainder = AudioMixer.frameSamples
                }
                let start = AudioMixer.frameSamples - renderer.remainder
                let count = min(renderer.remainder, output.count - written)
                for index in 0..<count { output[written + index] = renderer.block[start + index] }
                written += count
                renderer.remainder -= count
            }
        }
    }

    /// Moves the inbox into the buffers (creating a buffer for a new participant).
    private func take(into renderer: inout Renderer) {
        var arrivals = renderer.spare
        let (left, volumes) = inbox.withLock { inbox in
            swap(&arrivals, &inbox.arrivals)
            defer { inbox.left.removeAll() }
            return (inbox.left, inbox.volumes)
        }
        // Arrivals first: a packet taken with the leave is from before it, and must not bring the
        // participant back.
        for arrival in arrivals {
            guard let buffer = buffer(for: arrival.feedID, in: &renderer) else { continue }
            buffer.insert(arrival.frame, arrival: arrival.instant)
        }
        renderer.volumes = volumes
        for feedID in left {
            renderer.buffers.removeValue(forKey: feedID)
            renderer.order.removeAll { $0 == feedID }
            renderer.failures.removeValue(forKey: feedID)
        }
        if !left.isEmpty {
            inbox.withLock { inbox in for feedID in left { inbox.volumes.removeValue(forKey: feedID) } }
        }
        arrivals.removeAll(keepingCapacity: true)
        renderer.spare = arrivals
    }

    private func buffer(for feedID: UInt64, in renderer: inout Renderer) -> PlayoutBuffer? {
        if let buffer = renderer.buffers[feedID] { return buffer }
        guard renderer.failures[feedID] == nil else { return nil }
        do {
            let buffer = try PlayoutBuffer(configuration: configuration)
            renderer.buffers[feedID] = buffer
            renderer.order.append(feedID)
            return buffer
        } catch {
            renderer.failures[feedID] = error
            return nil
        }
    }

    /// Pulls 20 ms from every buffer into `renderer.block` and publishes levels and statistics.
    private func mix(_ renderer: inout Renderer, at heard: ContinuousClock.Instant, lookahead: Duration) {
        renderer.mixer.begin()
        renderer.figures.removeAll(keepingCapacity: true)
        for feedID in renderer.order {
            guard let buffer = renderer.buffers[feedID] else { continue }
            let volume = renderer.volumes[feedID] ?? 1
            renderer.pulled.withUnsafeMutableBufferPointer { buffer.pull(now: heard, lookahead: lookahead, into: $0) }
            let level = renderer.pulled.withUnsafeBufferPointer { renderer.mixer.add($0, volume: volume) }
            let figure = ParticipantPlayout(statistics: buffer.statistics, level: level, volume: volume)
            renderer.figures.append((feedID, figure))
        }
        renderer.block.withUnsafeMutableBufferPointer { renderer.mixer.finish(into: $0) }
        published.withLock { [figures = renderer.figures] published in
            for (feedID, figure) in figures { published[feedID] = figure }
        }
    }
}
