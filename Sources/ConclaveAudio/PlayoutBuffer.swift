public import ConclaveCore
public import ConclaveOpus

/// How a `PlayoutBuffer` sizes its delay.
public struct PlayoutConfiguration: Sendable, Hashable {
    /// The shortest delay kept even on a perfect network (it absorbs the device's own pull jitter).
    public var minimumDelay: Duration
    /// The longest delay jitter may push the target to; beyond it late packets are lost instead.
    public var maximumDelay: Duration
    /// Packets held at most; the oldest is dropped beyond (about 1.3 s of 20 ms packets).
    public var capacity: Int

    /// Creates a configuration; the defaults suit a voice call (20 ms to 200 ms).
    public init(
        minimumDelay: Duration = .milliseconds(20),
        maximumDelay: Duration = .milliseconds(200),
        capacity: Int = 64
    ) {
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
        self.capacity = capacity
    }
}

/// What a `PlayoutBuffer` has done so far.
public struct PlayoutStatistics: Sendable, Hashable {
    /// Frames decoded from their own packet.
    public var played = 0
    /// Frames made by packet-loss concealment: a loss without FEC, an underrun, or a frame inserted
    /// to grow the delay towards its target.
    public var concealed = 0
    /// Lost frames rebuilt from the in-band FEC data of the packet after them.
    public var fecRecovered = 0
    /// Packets that arrived after their frame was played (or would have to be played to keep the
    /// target delay) and were discarded.
    public var late = 0
    /// Times the buffer ran dry while the stream went on (its next packet came late but within
    /// the concealment window); a talk spurt ending in DTX is not one.
    public var underruns = 0
    /// Packets discarded to bring a grown delay back to its target, or because the buffer was full.
    public var dropped = 0
    /// Times playback (re)started at the target delay: the first packet, after DTX or an outage,
    /// after a timestamp jump.
    public var resyncs = 0
    /// Frames decoded (or rebuilt from FEC) just after a loss that came out far louder than the
    /// stream had been, and were concealed instead (counted in `concealed` too): libopus's
    /// decoder can overshoot to full scale there (see `PlayoutBuffer`).
    public var overshoots = 0
    /// Lost frames given to the decoder from the next packet's FEC after they had been concealed
    /// (the next packet came too late to play them), so that it decodes what follows at its
    /// level.
    public var fecCaughtUp = 0
    /// Runs of two or more frames in a row whose packets were missing when due (lost, or too
    /// late): in-band FEC rebuilds only the last frame of a run, so the others are concealed,
    /// and a sound that starts inside one is heard late.
    public var lossRuns = 0
    /// How long the frame being played waited behind the fastest recent packet.
    public var currentDelay: Duration = .zero
    /// The delay the buffer steers towards, from the measured jitter.
    public var targetDelay: Duration = .zero
    /// RFC 3550 interarrival jitter.
    public var jitter: Duration = .zero

    /// Creates empty statistics.
    public init() {}
}

/// One participant's received Opus packets, reordered, delayed just enough to absorb the
/// network's jitter, and decoded into a steady 20 ms at a time.
///
/// Time is the caller's: `insert` gets each packet's arrival instant and `pull` the instant its
/// block will be heard, so tests drive it with simulated clocks. All bookkeeping is in 48 kHz
/// samples on 64-bit integers: RTP timestamps are unwrapped against the highest one seen, and a
/// packet whose transit time jumps by more than `resetTransit` (a restarted or hostile sender)
/// starts a new timeline instead of being compared with the old one, so no value can grow
/// without bound.
///
/// The delay: each packet's transit (arrival minus timestamp) is compared with the fastest
/// transit of the last one to two seconds; the largest such excess, decaying over about five
/// seconds, plus one frame of margin, is the target delay (bounded by the configuration). The
/// current delay is how long after the fastest packets the frame being played is heard. Playback
/// starts (and restarts after DTX or an outage) at the target delay; while playing, a delay more
/// than two frames above the target drops a frame of silence (of sound only when more than four
/// frames above), and one below it inserts a concealed
/// frame, so a delay grown by an underrun or a burst returns to the target instead of staying.
/// Keeping the delay at or above the target (the peak plus one frame) also means that when a
/// packet is lost, the one after it is usually there already, with the FEC that rebuilds it.
///
/// Losses: a missing frame whose successor is there is rebuilt from the successor's in-band FEC
/// (SILK and hybrid packets carry it) when the frame before it was decoded; a longer hole, or one
/// before a CELT-only packet, is concealed frame by frame by `PitchExpander`, and a hole longer
/// than `maximumDelay` is a new talk spurt. An empty buffer conceals three frames, then plays
/// silence, and after `maximumDelay` waits for the next talk spurt.
///
/// Splices: wherever the output leaves the decoder's continuous signal (a dropped frame, the end
/// of a concealment run, a restart, sound stopping or resuming), the two sides are crossfaded
/// over `spliceSamples` (5 ms), the way NetEq's merge does, because two blocks that do not meet
/// are heard as a click: a dropped frame fades out under the frame after it, a concealment run
/// (or, at a restart, the concealment that would have followed) fades out under the decoded
/// frame, output that stops fades out a concealed tail, and output that resumes after silence
/// fades in.
///
/// Not thread-safe: one thread (the output device's) owns a buffer; `CallAudioPlayout` is the
/// thread-safe front.
public final class PlayoutBuffer {
    /// Samples in one pull: 20 ms at 48 kHz, mono.
    public static let frameSamples = 960
    static let samplesPerSecond: Int64 = 48_000
    /// A transit change this large (5 s) is a new timeline, not jitter.
    static let resetTransit: Int64 = 5 * samplesPerSecond
    /// Frames concealed when the buffer runs dry before falling silent (60 ms): longer PLC only
    /// drones.
    static let concealedWhenDry = 3
    /// The crossfade at a splice (5 ms): long enough that a jump across it is spread below the
    /// signal's own steps, short enough that the blend of two unrelated waveforms never dips for
    /// an audible time.
    static let spliceSamples = 240
    /// Frames after a loss whose level is checked against the stream's recent peak (60 ms).
    static let settlingFrames = 3
    /// The loudest a frame after a loss may be whatever the recent peak (-8.5 dBFS): a stream
    /// that was quiet or silent may start a talk spurt right after a loss.
    static let overshootFloor: Int32 = 12_288
    /// How long the delay may stay more than a frame above its target before a frame of silence
    /// is left out to bring it back (1 s: longer than the delay's own wobble as the fastest
    /// transit's window moves on).
    static let excessPatience: Int64 = samplesPerSecond
    /// Frames above the target (4, 80 ms) past which a frame of sound is dropped rather than
    /// waiting for silence: a burst after an outage comes back at once.
    static let urgentExcessFrames = 4

    private enum State {
        /// No playhead: before the first packet, after a reset or a long gap.
        case waiting
        /// `next` is the unwrapped timestamp of the next sample to decode; `dryFrames` counts the
        /// pulls the buffer has been empty since the last decoded packet.
        case playing(next: Int64, dryFrames: Int)
    }

    private struct Packet {
        var timestamp: Int64
        var frame: EncodedFrame
    }

    public let configuration: PlayoutConfiguration
    public private(set) var statistics = PlayoutStatistics()

    private let decoder: OpusAudioDecoder
    private var expander = PitchExpander()
    /// Room for one frame of concealment and for a splice's continuation (capacity reused).
    private var scratch: [Int16] = []
    private let minimumDelay: Int64
    private let maximumDelay: Int64
    private var state = State.waiting
    /// Packets not yet decoded, sorted by timestamp, no duplicates.
    private var queue: [Packet] = []
    /// Decoded samples not yet pulled: `pcm[pcmStart...]`.
    private var pcm: [Int16] = []
    private var pcmStart = 0
    /// What the output would have continued with at a pending splice (`splice[..<spliceCount]`);
    /// the next samples appended fade from it, `spliceNext` being the next position to blend.
    private var splice = [Int16](repeating: 0, count: spliceSamples)
    private var spliceCount = 0
    private var spliceNext = 0
    /// The decoder has made sound, so a stop or restart is a splice (the very first start is not:
    /// the fresh decoder begins from silence itself).
    private var decoderStarted = false
    /// The output has stopped (faded out to silence) and not resumed yet.
    private var outputStopped = false
    /// Frames decoded since the decoder last missed one (lost, concealed or rebuilt from FEC);
    /// `settlingFrames` or more when it has not missed any lately.
    private var framesSinceLoss = settlingFrames
    /// The timestamp that follows the last frame the decoder decoded or rebuilt from FEC; nil
    /// before the first and after a reset.
    private var decoderNext: Int64?
    /// Frames in a row so far whose packets were missing when due.
    private var missingFrames = 0
    /// Since when (on the clock of `clock(_:)`) the delay has been more than a frame above its
    /// target; nil while it is not.
    private var excessSince: Int64?
    /// Since when the delay has been more than two frames above its target (a frame must go,
    /// silence preferred); nil while it is not.
    private var dropDueSince: Int64?
    /// The decaying peak of the frames decoded outside `settlingFrames` after a loss: how loud
    /// this stream has been.
    private var recentPeak: Int32 = 0

    /// The clock's origin: the first instant seen.
    private var origin: ContinuousClock.Instant?
    /// The highest RTP timestamp seen and its unwrapped value.
    private var highest: (rtp: UInt32, unwrapped: Int64)?
    private var lastTransit: Int64?
    /// RFC 3550 jitter, in 1/16 samples.
    private var jitter16: Int64 = 0
    /// The fastest transit in the current and previous second of arrivals.
    private var transitWindow = (start: Int64(0), current: Int64.max, previous: Int64.max)
    /// The decaying peak of (transit - fastest transit).
    private var peakExcess: Int64 = 0
    /// The decaying peak of how long before it is heard a block is mixed (see `pull`).
    private var peakLookahead: Int64 = 0
    /// When a frame was last missing (on the clock of `clock(_:)`), nil before any.
    private var lastLoss: Int64?
    /// Whether a frame was missing within the last `lossMemory` (set at each pull). Only then
    /// does the target count all of `peakLookahead` and is a delay a frame above it kept: both
    /// serve only to have the packet after a lost one (and its FEC) there in time, and would cost
    /// every call that loses nothing as much mouth-to-ear latency.
    private var lossIsRecent = false
    /// How long after a loss the target keeps room for the lookahead (10 s).
    static let lossMemory: Int64 = 10 * samplesPerSecond

    /// Creates a buffer with its own Opus decoder (48 kHz mono).
    public init(configuration: PlayoutConfiguration = PlayoutConfiguration()) throws(OpusCodecError) {
        self.configuration = configuration
        decoder = try OpusAudioDecoder(channels: 1)
        scratch.reserveCapacity(Self.frameSamples)
        minimumDelay = Self.samples(configuration.minimumDelay)
        maximumDelay = max(minimumDelay, Self.samples(configuration.maximumDelay))
        statistics.targetDelay = Self.duration(targetDelay)
    }

    /// The fastest recent transit (arrival minus timestamp, in samples).
    private var fastestTransit: Int64 { min(transitWindow.current, transitWindow.previous) }

    private var targetDelay: Int64 {
        // A block mixed ahead needs its own packet there in time: the lookahead beyond the frame
        // of margin always counts; within `lossMemory` of a loss all of it, for the packet after.
        let frame = Int64(Self.frameSamples)
        let lookahead = lossIsRecent ? peakLookahead : max(0, peakLookahead - frame)
        return min(maximumDelay, max(minimumDelay, peakExcess + lookahead + frame))
    }

    // MARK: Packets in

    /// Takes a received Opus packet and the instant it arrived.
    ///
    /// Packets for frames already played are counted late and discarded; duplicates are ignored.
    public func insert(_ frame: EncodedFrame, arrival: ContinuousClock.Instant) {
        guard frame.codec == .opus, !frame.data.isEmpty else { return }
        let arrived = clock(arrival)
        var timestamp = unwrap(frame.rtpTimestamp)
        var transit = arrived &- timestamp
        if let lastTransit, abs(transit &- lastTransit) > Self.resetTransit {
            reset()
            timestamp = unwrap(frame.rtpTimestamp)
            transit = arrived &- timestamp
        }
        measure(transit: transit, arrived: arrived)
        if case .playing(let next, _) = state, timestamp < next {
            statistics.late += 1
            return
        }
        var index = queue.count
        while index > 0, queue[index - 1].timestamp >= timestamp {
            if queue[index - 1].timestamp == timestamp { return }
            index -= 1
        }
        queue.insert(Packet(timestamp: timestamp, frame: frame), at: index)
        if queue.count > max(1, configuration.capacity) {
            queue.removeFirst()
            statistics.dropped += 1
        }
    }

    private func clock(_ instant: ContinuousClock.Instant) -> Int64 {
        guard let origin else {
            self.origin = instant
            return 0
        }
        return Self.samples(instant - origin)
    }

    private func unwrap(_ rtp: UInt32) -> Int64 {
        guard let highest else {
            self.highest = (rtp, Int64(rtp))
            return Int64(rtp)
        }
        let unwrapped = highest.unwrapped + Int64(Int32(bitPattern: rtp &- highest.rtp))
        if unwrapped > highest.unwrapped { self.highest = (rtp, unwrapped) }
        return unwrapped
    }

    /// Forgets the timeline (a sender restart or a hostile jump): the next packet starts afresh.
    private func reset() {
        queue.removeAll(keepingCapacity: true)
        highest = nil
        lastTransit = nil
        transitWindow = (0, .max, .max)
        peakExcess = 0
        decoderNext = nil
        excessSince = nil
        dropDueSince = nil
        state = .waiting
    }

    private func measure(transit: Int64, arrived: Int64) {
        if let lastTransit {
            let difference = abs(transit &- lastTransit)
            jitter16 += difference - (jitter16 + 8) / 16
        }
        lastTransit = transit
        let elapsed = arrived &- transitWindow.start
        if transitWindow.current == .max || elapsed >= 2 * Self.samplesPerSecond || elapsed < 0 {
            transitWindow = (arrived, transit, transit)
        } else if elapsed >= Self.samplesPerSecond {
            transitWindow = (arrived, transit, transitWindow.current)
        } else {
            transitWindow.current = min(transitWindow.current, transit)
        }
        // Capped at the maximum delay, so that after a burst the target starts shrinking at once.
        let excess = min(maximumDelay, max(0, transit &- fastestTransit))
        peakExcess = max(excess, peakExcess - (peakExcess + 255) / 256)
        statistics.jitter = Self.duration(jitter16 / 16)
        statistics.targetDelay = Self.duration(targetDelay)
    }

    // MARK: Audio out

    /// Writes the next 20 ms (960 samples, 48 kHz mono) into `output`, to be heard at `now`.
    ///
    /// `lookahead` is how long before `now` the block is mixed, with the packets that had arrived
    /// by then: a device that asks for 40 ms at once has its second 20 ms mixed 20 ms early.
    /// The target delay keeps the recent peak of it beyond one frame on top of the jitter, so
    /// that the block's own packet is there when it is mixed, and within 10 s of a loss all of
    /// it, so that when a frame is lost the packet after it (and its FEC) is there by the time
    /// the lost frame is mixed; without it such a loss was concealed twice and the delay grew by
    /// a frame. A call that loses nothing does not pay the rest (20 ms of mouth-to-ear latency
    /// with `bench/devices`' speaker).
    ///
    /// Silence while there is nothing to play. `output` must hold at least 960 samples; only the
    /// first 960 are written (a shorter buffer is filled with silence).
    public func pull(
        now: ContinuousClock.Instant,
        lookahead: Duration = .zero,
        into output: UnsafeMutableBufferPointer<Int16>
    ) {
        let count = Self.frameSamples
        guard output.count >= count else {
            output.update(repeating: 0)
            return
        }
        let early = min(maximumDelay, max(0, Self.samples(lookahead)))
        peakLookahead = max(early, peakLookahead - (peakLookahead + 255) / 256)
        let now = clock(now)
        lossIsRecent = lastLoss.map { now &- $0 < Self.lossMemory } ?? false
        statistics.targetDelay = Self.duration(targetDelay)
        if pcmStart > 0 {
            pcm.removeSubrange(0..<pcmStart)
            pcmStart = 0
        }
        while pcm.count < count, produce(now: now) {}
        if pcm.count < count { stopOutput() }
        let available = min(count, pcm.count)
        for index in 0..<available { output[index] = pcm[index] }
        for index in available..<count { output[index] = 0 }
        pcmStart = available
    }

    /// Appends the next decoded, recovered or concealed samples to `pcm`; false when there is
    /// nothing to play now (the rest of the pull is silence).
    private func produce(now: Int64) -> Bool {
        guard case .playing(let next, let dryFrames) = state else { return start(now: now) }
        let delay = now &- (next &- Int64(pcm.count)) &- fastestTransit
        statistics.currentDelay = Self.duration(max(0, delay))
        guard let head = queue.first else {
            return runDry(next: next, dryFrames: dryFrames)
        }
        let gap = head.timestamp &- next
        if gap > maximumDelay {
            state = .waiting
            spliceFromConcealment()
            return start(now: now)
        }
        if gap <= 0 {
            // The very packet the buffer ran dry waiting for: it came late, not lost.
            if dryFrames > 0 { statistics.underruns += 1 }
            // More than two frames above the target, a frame goes: silence when the next one is
            // silent (below), sound only when the delay is more than `urgentExcessFrames` above
            // or no silence came for `2 * excessPatience` since the drop fell due. A dropped
            // frame of sound is 20 ms of what someone said (`bench/devices/loss` heard a beep
            // 20 ms short), and a talker pauses within a second or two.
            let aboveTarget = delay &- targetDelay
            let dropDue = aboveTarget > 2 * Int64(Self.frameSamples)
            dropDueSince = dropDue ? dropDueSince ?? now : nil
            let mustDrop =
                dropDue
                && (aboveTarget > Int64(Self.urgentExcessFrames * Self.frameSamples)
                    || dropDueSince.map { now &- $0 >= 2 * Self.excessPatience } ?? false)
            if mustDrop, queue.count > 1 {
                // Decoded, so the decoder's state stays continuous, but not played.
                queue.removeFirst()
                let samples = decode(head, keep: false)?.samples
                statistics.dropped += 1
                state = .playing(next: head.timestamp + Int64(samples ?? Self.frameSamples), dryFrames: 0)
                return true
            }
            if delay < targetDelay {
                conceal(Self.frameSamples)
                state = .playing(next: next, dryFrames: 0)
                return true
            }
            queue.removeFirst()
            // A delay more than a frame above the target (grown by an underrun, a late packet or a
            // concealed frame) is below the two frames that make a drop due, and would stay for the
            // whole call: after a second of it, it comes back in a pause, where a frame of silence
            // is left out. Not within `lossMemory` of a loss: there the frame is the room the
            // packet after a lost one needs to be there for its FEC (taken back every second, it
            // was given again at the next loss: twice the concealment under 5 % loss).
            if delay > targetDelay + Int64(Self.frameSamples) {
                excessSince = excessSince ?? now
            } else {
                excessSince = nil
            }
            let dropIfQuiet =
                !queue.isEmpty
                && (dropDue
                    || !lossIsRecent && excessSince.map { now &- $0 >= Self.excessPatience } ?? false)
            let decoded = decode(head, keep: true, dropIfQuiet: dropIfQuiet)
            if let decoded {
                if decoded.played {
                    statistics.played += 1
                } else {
                    statistics.dropped += 1
                    excessSince = nil
                }
            } else {
                conceal(Self.frameSamples)
                framesSinceLoss = 0
            }
            state = .playing(next: head.timestamp + Int64(decoded?.samples ?? Self.frameSamples), dryFrames: 0)
            return true
        }
        lastLoss = now
        framesSinceLoss = 0
        missingFrames += 1
        // FEC only right after decoded audio: libopus's recovery of a frame whose predecessor it
        // never saw comes out at a fraction of the level for 10-20 ms (a gap), so the second frame
        // of a longer hole is concealed too and the packet after it crossfaded in. Except after
        // concealed silence: a hole that swallows the end of a pause and the first frame of a
        // sound would conceal that frame as silence too, and the sound would start 20 ms late
        // (cut); from the pause's state, the decoder rebuilds the onset at its level.
        if gap <= Int64(Self.frameSamples), !expander.isConcealing || expander.concealsSilence {
            recover(before: head, samples: Int(gap))
            state = .playing(next: head.timestamp, dryFrames: 0)
            return true
        }
        conceal(Self.frameSamples)
        state = .playing(next: next + Int64(Self.frameSamples), dryFrames: 0)
        return true
    }

    /// Starts playback at the target delay when the earliest packet that can still make it is due.
    private func start(now: Int64) -> Bool {
        let due = now &- fastestTransit &- targetDelay
        // Packets more than a frame older than the target delay allows are late for the new
        // start; the newest one is kept so that a burst after an outage resumes at once.
        var stale = 0
        while stale < queue.count - 1, queue[stale].timestamp <= due - Int64(Self.frameSamples) { stale += 1 }
        if stale > 0 {
            queue.removeFirst(stale)
            statistics.late += stale
        }
        guard let first = queue.first, first.timestamp <= due else { return false }
        statistics.resyncs += 1
        state = .playing(next: first.timestamp, dryFrames: 0)
        return true
    }

    private func runDry(next: Int64, dryFrames: Int) -> Bool {
        if Int64(dryFrames) * Int64(Self.frameSamples) >= maximumDelay {
            state = .waiting
            return false
        }
        state = .playing(next: next, dryFrames: dryFrames + 1)
        guard dryFrames < Self.concealedWhenDry else { return false }
        conceal(Self.frameSamples)
        return true
    }

    // MARK: Splices

    /// Appends played samples to `pcm`, blending the start with a pending splice.
    private func append(_ samples: [Int16]) {
        let start = pcm.count
        var position = start
        pcm.append(contentsOf: samples)
        decoderStarted = true
        outputStopped = false
        let total = Int32(spliceCount + 1)
        while spliceNext < spliceCount, position < pcm.count {
            let weight = Int32(spliceNext + 1)
            let blended = (Int32(splice[spliceNext]) * (total - weight) + Int32(pcm[position]) * weight) / total
            pcm[position] = Int16(truncatingIfNeeded: blended)
            spliceNext += 1
            position += 1
        }
        expander.record(pcm[start...])
    }

    /// Appends decoded (or FEC-recovered) samples: after a concealment run, they fade in under
    /// the run's continuation, since the decoder never saw the concealed stretch.
    private func appendDecoded(_ samples: [Int16]) {
        if expander.isConcealing {
            expander.peek(Self.spliceSamples, into: &scratch)
            beginSplice(from: scratch)
            expander.end()
        }
        append(samples)
    }

    /// Makes the next samples appended fade from `continuation` (its first `spliceSamples`). A
    /// splice already pending is kept: it is what continues the samples already out.
    private func beginSplice(from continuation: [Int16]) {
        guard spliceNext >= spliceCount else { return }
        spliceCount = min(Self.spliceSamples, continuation.count)
        for index in 0..<spliceCount { splice[index] = continuation[index] }
        spliceNext = 0
    }

    /// A splice from silence: the next samples fade in.
    private func beginSpliceFromSilence() {
        guard spliceNext >= spliceCount else { return }
        for index in splice.indices { splice[index] = 0 }
        spliceCount = Self.spliceSamples
        spliceNext = 0
    }

    /// A splice from what the output would have continued with (its concealment), for a restart
    /// while sound is playing.
    private func spliceFromConcealment() {
        guard decoderStarted, !outputStopped else { return }
        expander.peek(Self.spliceSamples, into: &scratch)
        beginSplice(from: scratch)
        expander.end()
    }

    /// The output stops (nothing to play for the rest of this pull): its continuation (a splice
    /// not yet begun, or the concealment) fades out over `spliceSamples` instead of the sound
    /// breaking off, and whatever plays next fades in.
    private func stopOutput() {
        guard decoderStarted, !outputStopped else { return }
        scratch.removeAll(keepingCapacity: true)
        if spliceNext == 0, spliceCount > 0 {
            scratch.append(contentsOf: splice[0..<spliceCount])
            spliceNext = spliceCount
        } else {
            expander.peek(Self.spliceSamples, into: &scratch)
        }
        expander.end()
        let total = Int32(scratch.count + 1)
        for index in scratch.indices {
            scratch[index] = Int16(truncatingIfNeeded: Int32(scratch[index]) * (total - Int32(index + 1)) / total)
        }
        append(scratch)
        outputStopped = true
        beginSpliceFromSilence()
    }

    // MARK: Decoding

    /// Decodes `packet`, onto `pcm` when `keep` (unless `dropIfQuiet` and it and what plays now are
    /// silence); the samples it holds and whether they were kept, nil when it is undecodable.
    private func decode(_ packet: Packet, keep: Bool, dropIfQuiet: Bool = false) -> (samples: Int, played: Bool)? {
        catchUp(before: packet)
        guard let audio = try? decoder.decode(packet.frame), !audio.samples.isEmpty else { return nil }
        decoderNext = packet.timestamp + Int64(audio.samples.count)
        if missingFrames >= 2 { statistics.lossRuns += 1 }
        missingFrames = 0
        let peak = audio.samples.peakMagnitude
        if keep, dropIfQuiet, !expander.isConcealing, peak <= PitchExpander.silencePeak,
            expander.peakOfLast(Self.spliceSamples) <= PitchExpander.silencePeak
        {
            // Silence after silence, left out to bring the delay back: nothing to splice.
            return (audio.samples.count, false)
        }
        if keep {
            if isOvershoot(peak: peak) {
                conceal(audio.samples.count)
            } else {
                appendDecoded(audio.samples)
            }
        } else if expander.isConcealing {
            // Dropped right after a concealment run: the run's continuation is what the output
            // would have gone on with.
            expander.peek(Self.spliceSamples, into: &scratch)
            beginSplice(from: scratch)
            expander.end()
        } else {
            // A dropped frame is where the output would have gone on: the next frame fades in
            // under it.
            beginSplice(from: audio.samples)
        }
        return (audio.samples.count, keep)
    }

    /// Rebuilds the `samples` before `next` from its FEC data (libopus conceals when it has none).
    private func recover(before next: Packet, samples: Int) {
        let size = samples - samples % 120
        guard size > 0 else { return }
        guard Self.carriesFEC(next.frame), let audio = try? decoder.recoverLost(before: next.frame, samples: size)
        else {
            conceal(size)
            return
        }
        decoderNext = next.timestamp
        statistics.fecRecovered += 1
        if isOvershoot(peak: audio.samples.peakMagnitude) {
            conceal(audio.samples.count)
        } else {
            appendDecoded(audio.samples)
        }
    }

    /// Gives the decoder the frame before `packet` from `packet`'s FEC when it missed that frame
    /// (concealed as lost, the packet after it not there yet, or a second lost frame), though
    /// the concealment was already played: libopus's SILK layer predicts each frame from the
    /// ones before (its long-term predictor repeats the last pitch periods), so a decoder that
    /// never saw a sound's first frame rebuilds the sound from its small residual alone, rising
    /// to its level over 60-80 ms (`bench/devices/loss` heard a beep's first 30 ms at an eighth
    /// of its level, a gap), and one that missed a sound's end can overshoot. With the frame's
    /// FEC copy in its state it decodes the packet at its level. Holes longer than two frames
    /// are a pause or a new talk spurt, not a loss, and are left alone.
    private func catchUp(before packet: Packet) {
        guard let expected = decoderNext, Self.carriesFEC(packet.frame) else { return }
        let hole = packet.timestamp &- expected
        guard hole > 0, hole <= 2 * Int64(Self.frameSamples) else { return }
        let size = Int(min(hole, Int64(Self.frameSamples)))
        guard size >= 120, (try? decoder.recoverLost(before: packet.frame, samples: size - size % 120)) != nil else {
            return
        }
        statistics.fecCaughtUp += 1
        framesSinceLoss = 0
    }

    /// Whether samples just decoded, whose loudest is `peak`, are the decoder's error rather than the talker: within
    /// `settlingFrames` after a loss, louder than half as loud again as the stream's recent peak
    /// (and than `overshootFloor`). After FEC at a sound's abrupt end, libopus 1.3's decoder
    /// turns the next packet, silence, into a low thump up to full scale (its gain state comes
    /// from the FEC copy's higher gains; `bench/devices/loss` heard it as a burst of ~31,600 at
    /// a beep's end); after a frame it never saw it can overshoot the same way. Such a frame is
    /// concealed instead, and the decoder, which has decoded it, settles by the next one. Other
    /// frames only feed the recent peak.
    private func isOvershoot(peak: Int16) -> Bool {
        let peak = Int32(peak)
        guard framesSinceLoss < Self.settlingFrames else {
            recentPeak = max(peak, recentPeak - (recentPeak + 255) / 256)
            return false
        }
        framesSinceLoss += 1
        guard peak > max(Self.overshootFloor, recentPeak + recentPeak / 2) else { return false }
        statistics.overshoots += 1
        return true
    }

    /// Conceals `samples` with the pitch expander; the decoder does not see the loss.
    private func conceal(_ samples: Int) {
        statistics.concealed += 1
        scratch.removeAll(keepingCapacity: true)
        expander.conceal(samples, into: &scratch)
        append(scratch)
    }

    /// Whether an Opus packet can carry in-band FEC: its TOC byte says SILK or hybrid
    /// (configurations 0...15, RFC 6716 §3.1). CELT-only packets never do.
    static func carriesFEC(_ frame: EncodedFrame) -> Bool {
        guard let toc = frame.data.first else { return false }
        return toc >> 3 < 16
    }

    // MARK: Units

    static func samples(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: samplesPerSecond)
        guard !overflow else { return seconds < 0 ? Int64.min / 4 : Int64.max / 4 }
        return max(Int64.min / 4, min(Int64.max / 4, whole)) + attoseconds / 20_833_333_333_333
    }

    static func duration(_ samples: Int64) -> Duration {
        .microseconds(samples / 48 * 1_000 + samples % 48 * 1_000 / 48)
    }
}
