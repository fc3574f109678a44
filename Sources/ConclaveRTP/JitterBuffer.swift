import ConclaveCore

/// How a receiver asks a sender for a keyframe.
public enum KeyframeRequestMethod: Sendable, Hashable {
    /// Picture loss indication (RFC 4585), what browsers and Janus use first.
    case pli
    /// Full intra request (RFC 5104), for peers that negotiated `ccm fir` but not `nack pli`.
    case fir
    /// Never ask (audio, or nothing negotiated).
    case none
}

/// A keyframe request the jitter buffer wants sent.
public enum KeyframeRequest: Sendable, Hashable {
    /// Send a PLI.
    case pli
    /// Send a FIR with this command sequence number.
    case fir(sequenceNumber: UInt8)
}

/// Tuning of a `JitterBuffer`. The defaults suit one WebRTC stream relayed by Janus.
public struct JitterBufferConfiguration: Sendable, Hashable {
    /// The stream's codec; selects the depacketizer and audio/video behavior.
    public var codec: MediaCodec
    /// Packets the buffer can hold (rounded up to a power of two).
    public var capacity: Int
    /// Whether to ask for retransmissions (`a=rtcp-fb:* nack`).
    public var nackEnabled: Bool
    /// How many times one missing packet is NACKed before giving up on it.
    public var maxNackRetries: Int
    /// How long a missing packet is NACKed before giving up on it.
    public var maxNackAge: Duration
    /// How long a gap may stay open before its first NACK, so reordered packets are not NACKed.
    public var reorderTolerance: Duration
    /// The NACK retry interval before an RTT is known; afterwards 1.5 RTT, at least 5 ms.
    public var initialNackRetryInterval: Duration
    /// The most missing packets tracked; a larger gap is not NACKed but answered with a keyframe request.
    public var maxNackListSize: Int
    /// How long an incomplete frame at the head may wait for missing packets before it is dropped.
    public var maxWaitForMissing: Duration
    /// How keyframes are requested when a frame cannot be completed.
    public var keyframeRequestMethod: KeyframeRequestMethod
    /// The least time between two keyframe requests.
    public var keyframeRequestInterval: Duration

    /// Creates a configuration.
    public init(
        codec: MediaCodec,
        capacity: Int,
        nackEnabled: Bool,
        maxNackRetries: Int = 10,
        maxNackAge: Duration = .milliseconds(1000),
        reorderTolerance: Duration = .milliseconds(5),
        initialNackRetryInterval: Duration = .milliseconds(100),
        maxNackListSize: Int = 300,
        maxWaitForMissing: Duration,
        keyframeRequestMethod: KeyframeRequestMethod,
        keyframeRequestInterval: Duration = .milliseconds(500)
    ) {
        self.codec = codec
        self.capacity = capacity
        self.nackEnabled = nackEnabled
        self.maxNackRetries = maxNackRetries
        self.maxNackAge = maxNackAge
        self.reorderTolerance = reorderTolerance
        self.initialNackRetryInterval = initialNackRetryInterval
        self.maxNackListSize = maxNackListSize
        self.maxWaitForMissing = maxWaitForMissing
        self.keyframeRequestMethod = keyframeRequestMethod
        self.keyframeRequestInterval = keyframeRequestInterval
    }

    /// Video: NACK, wait up to 1 s for retransmissions, keyframe by PLI.
    public static func video(_ codec: MediaCodec, keyframeRequestMethod: KeyframeRequestMethod = .pli)
        -> JitterBufferConfiguration
    {
        JitterBufferConfiguration(
            codec: codec,
            capacity: 2048,
            nackEnabled: true,
            maxWaitForMissing: .milliseconds(1000),
            keyframeRequestMethod: keyframeRequestMethod
        )
    }

    /// The configuration for a negotiated stream: NACK only if `nack` was negotiated, keyframes by
    /// PLI if negotiated, else FIR if negotiated, else not at all.
    public static func negotiated(codec: MediaCodec, nack: Bool, pli: Bool, fir: Bool) -> JitterBufferConfiguration {
        guard codec.kind == .video else { return .audio(codec) }
        var config = JitterBufferConfiguration.video(codec, keyframeRequestMethod: pli ? .pli : fir ? .fir : .none)
        config.nackEnabled = nack
        return config
    }

    /// Audio: no NACK, a missing packet holds later ones back for at most 10 ms.
    ///
    /// Without retransmission only reordering can still bring a missing audio packet, and paths
    /// swap packets by a few milliseconds. Every packet held is late by that much for the
    /// playout, whose delay follows the latest arrivals: at 5% loss a 60 ms hold raised the
    /// speaker's target delay from 24 to about 75 ms and, with the successors arriving in a
    /// burst, made it conceal and then drop frames inside words (`bench/devices/loss`).
    public static let audioReorderWait: Duration = .milliseconds(10)

    /// Audio: no NACK, a missing packet holds later ones back for at most ``audioReorderWait``.
    public static func audio(_ codec: MediaCodec = .opus) -> JitterBufferConfiguration {
        JitterBufferConfiguration(
            codec: codec,
            capacity: 256,
            nackEnabled: false,
            maxWaitForMissing: audioReorderWait,
            keyframeRequestMethod: .none
        )
    }
}

/// Counters of one received stream (the receive half of WebRTC's inbound-rtp statistics).
public struct ReceiveStatistics: Sendable, Hashable {
    /// Valid packets received, retransmissions and duplicates included.
    public var packets: UInt64 = 0
    /// Bytes of those packets (RTP headers included).
    public var bytes: UInt64 = 0
    /// Cumulative lost (expected minus received, RFC 3550 A.3); recovered packets are not lost.
    public var lost: Int64 = 0
    /// Distinct packets that were NACKed at least once.
    public var nackedPackets: UInt64 = 0
    /// Sequence numbers sent in NACKs, retries included.
    public var nackRequests: UInt64 = 0
    /// NACKed packets that then arrived.
    public var recovered: UInt64 = 0
    /// PLIs requested.
    public var pliSent: UInt64 = 0
    /// FIRs requested.
    public var firSent: UInt64 = 0
    /// Packets seen twice.
    public var duplicates: UInt64 = 0
    /// Packets that arrived after their frame was delivered or given up.
    public var late: UInt64 = 0
    /// Interarrival jitter in RTP timestamp units (RFC 3550 A.8).
    public var jitter: Double = 0
    /// Frames delivered.
    public var framesAssembled: UInt64 = 0
    /// Frames given up: incomplete, undecodable payload, or delta frames while waiting for a keyframe.
    public var framesDropped: UInt64 = 0
    /// Frames whose payloads the depacketizer rejected (included in `framesDropped`).
    public var depacketizationErrors: UInt64 = 0

    /// Jitter in seconds for a stream with `clockRate`.
    public func jitterSeconds(clockRate: UInt32) -> Double { jitter / Double(max(clockRate, 1)) }
}

/// A frame delivered by the jitter buffer, with what the E2EE stage and the recorder need.
public struct ReceivedFrame: Sendable, Hashable {
    /// The frame.
    public var frame: EncodedFrame
    /// The SSRC it arrived on.
    public var ssrc: UInt32
    /// The unwrapped sequence number of its first packet.
    public var firstSequenceNumber: Int64
    /// The unwrapped sequence number of its last packet.
    public var lastSequenceNumber: Int64
    /// When its last missing packet arrived (the frame became complete).
    public var completionTime: MonotonicTime
    /// When its first packet arrived.
    public var firstArrivalTime: MonotonicTime
    /// Frames of this stream the buffer gave up on between the previous frame it delivered and
    /// this one (lost packets, frames that could not be completed in time, delta frames that could
    /// not be decoded while waiting for a keyframe); 0 for the first frame. A recorder tells loss
    /// from silence (DTX, a muted sender) by this, not by the RTP timestamp step.
    public var framesLostBefore: Int = 0
}

/// What a `JitterBuffer` event asks the caller to do.
public struct JitterBufferOutput: Sendable {
    /// Frames completed, in order.
    public var frames: [ReceivedFrame] = []
    /// Sequence numbers to NACK now (send one generic NACK with all of them).
    public var nack: [UInt16] = []
    /// A keyframe request to send now.
    public var keyframeRequest: KeyframeRequest? = nil
    /// The reception report that leads the feedback compound, set whenever there is feedback.
    public var reportBlock: RTCPReportBlock? = nil

    /// Whether there is nothing to do.
    public var isEmpty: Bool { frames.isEmpty && nack.isEmpty && keyframeRequest == nil }

    /// Whether this output asks for any RTCP feedback.
    public var hasFeedback: Bool { !nack.isEmpty || keyframeRequest != nil }

    /// The RTCP feedback packets this output asks for, from `senderSSRC` about `mediaSSRC`, to be
    /// sent as one compound packet.
    ///
    /// The compound starts with a receiver report carrying a report block about `mediaSSRC`, as
    /// RFC 3550 §6.1 requires of every compound packet. This is not a formality: a receive-only
    /// peer has no SSRC the SFU knows, so Janus finds the stream a compound packet is about from
    /// the SSRC in its first report block or transport-layer feedback (NACK). It does not look
    /// into payload-specific feedback, so a PLI or FIR sent on its own is dropped before it can
    /// reach the publisher.
    public func feedbackPackets(senderSSRC: UInt32, mediaSSRC: UInt32) -> [RTCPPacket] {
        guard hasFeedback else { return [] }
        var block =
            reportBlock
            ?? .nothingReceived(ssrc: mediaSSRC)
        block.ssrc = mediaSSRC
        var packets: [RTCPPacket] = [.receiverReport(RTCPReceiverReport(ssrc: senderSSRC, reports: [block]))]
        if !nack.isEmpty {
            packets.append(
                .genericNACK(RTCPGenericNACK(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, sequenceNumbers: nack))
            )
        }
        switch keyframeRequest {
        case .pli: packets.append(.pictureLossIndication(.init(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC)))
        case .fir(let n):
            packets.append(
                .fullIntraRequest(.init(senderSSRC: senderSSRC, entries: [.init(ssrc: mediaSSRC, sequenceNumber: n)]))
            )
        case nil: break
        }
        return packets
    }
}

/// The receive side of one RTP stream: reorders packets, detects loss, asks for retransmissions
/// and keyframes, and turns packets into complete frames.
///
/// A state machine without clocks or I/O: feed it packets with `receive(_:arrival:)` and call
/// `tick(now:)` so timeouts and NACK retries happen without new packets, either every 10–20 ms or
/// only when `nextDeadline` says something is due (nothing is, while no packet is missing). Each event
/// returns a `JitterBufferOutput` saying what to deliver and send. Packets are stored by
/// reference to their datagram; the only per-packet work is a ring-slot write.
///
/// Frames are delivered strictly in order. A frame is complete when every packet from the one
/// after the previous frame's end up to a packet with the marker bit (or the last before a
/// timestamp change) is present. A frame that stays incomplete for `maxWaitForMissing` (or that
/// the buffer has no room to wait for) is dropped; for video the buffer then drops delta frames
/// until a keyframe arrives and asks for one, throttled.
public struct JitterBuffer: Sendable {
    /// The configuration.
    public let configuration: JitterBufferConfiguration
    /// Counters.
    public private(set) var statistics = ReceiveStatistics()

    private struct Slot: Sendable {
        var sequence: Int64
        var packet: RTPPacket
        var arrival: MonotonicTime
    }

    private struct MissingPacket: Sendable {
        var detected: MonotonicTime
        var lastSent: MonotonicTime?
        var retries: Int
    }

    private var slots: [Slot?]
    private let mask: Int64
    private var unwrapper = SequenceNumberUnwrapper()
    private var nextSequence: Int64?
    private var highestSequence: Int64 = 0
    private var baseSequence: Int64 = 0
    private var receivedUnique: Int64 = 0
    private var missing: [Int64: MissingPacket] = [:]
    private var headBlockedSince: MonotonicTime?
    /// Video only: after a loss (or before the first frame) delta frames reference a picture the
    /// receiver never got, so none is handed out until a keyframe, and one is asked for. This is the
    /// receiver's concern, for every consumer; where a recorded file may start is decided apart, in
    /// the recorder's segment muxer.
    private var waitingForKeyframe: Bool
    private var hasDelivered = false
    /// The last sequence number and the timestamp of the last frame delivered, and
    /// `framesDropped` then.
    private var lastDelivered: (sequence: Int64, timestamp: UInt32, framesDropped: UInt64)?
    /// Video: the smallest timestamp step between two frames delivered back to back (the frame
    /// interval), to tell how many frames a run of lost packets held.
    private var frameStep: UInt32?
    private var lastKeyframeRequest: MonotonicTime?
    private var firSequence: UInt8 = 0
    private var roundTripTime: Duration?
    private var lastTransit: Int64?
    private var jitterEstimate: Double = 0
    private var ssrc: UInt32 = 0
    // Report-block interval state (RFC 3550 A.3).
    private var expectedPrior: Int64 = 0
    private var receivedPrior: Int64 = 0
    private var lastSenderReport: (middle: UInt32, arrival: MonotonicTime)?

    /// Creates an empty buffer.
    public init(configuration: JitterBufferConfiguration) {
        self.configuration = configuration
        var size = 16
        while size < configuration.capacity { size <<= 1 }
        self.slots = Array(repeating: nil, count: size)
        self.mask = Int64(size - 1)
        self.waitingForKeyframe = configuration.codec.kind == .video
    }

    private var isVideo: Bool { configuration.codec.kind == .video }

    private var nackRetryInterval: Duration {
        guard let rtt = roundTripTime else { return configuration.initialNackRetryInterval }
        return max(rtt * 3 / 2, .milliseconds(5))
    }

    /// Sets the round-trip time measured from RTCP; NACK retries are spaced by 1.5 RTT.
    public mutating func updateRoundTripTime(_ rtt: Duration) {
        roundTripTime = rtt
    }

    /// Records the arrival of a sender report from this stream's source, for report blocks.
    public mutating func noteSenderReport(_ report: RTCPSenderReport, arrival: MonotonicTime) {
        lastSenderReport = (report.ntpTimestamp.middle32, arrival)
    }

    /// The number of packets currently buffered or missing ahead of the next frame.
    public var bufferedSpan: Int64 {
        guard let next = nextSequence else { return 0 }
        return max(0, highestSequence - next + 1)
    }

    @inline(__always)
    private func slot(_ sequence: Int64) -> Slot? {
        guard let s = slots[Int(sequence & mask)], s.sequence == sequence else { return nil }
        return s
    }

    /// Takes one received packet (new, reordered or retransmitted) that arrived at `arrival`.
    public mutating func receive(_ packet: RTPPacket, arrival: MonotonicTime) -> JitterBufferOutput {
        var output = receivePacket(packet, arrival: arrival)
        if output.hasFeedback { output.reportBlock = makeReportBlock(now: arrival) }
        return output
    }

    private mutating func receivePacket(_ packet: RTPPacket, arrival: MonotonicTime) -> JitterBufferOutput {
        var output = JitterBufferOutput()
        statistics.packets += 1
        statistics.bytes += UInt64(packet.buffer.count)
        let sequence = unwrapper.unwrap(packet.sequenceNumber)
        let capacity = Int64(slots.count)

        guard let next = nextSequence else {
            start(at: sequence, ssrc: packet.ssrc)
            store(packet, sequence: sequence, arrival: arrival)
            updateJitter(packet, arrival: arrival)
            highestSequence = sequence
            assemble(now: arrival, into: &output)
            return output
        }
        if sequence < next {
            guard !hasDelivered, next - sequence < capacity / 2 else {
                statistics.late += 1
                return output
            }
            // Nothing delivered yet and an earlier packet arrived: the stream started before the
            // first packet we saw (reordering at the start), so move the head back to it.
            if configuration.nackEnabled {
                for s in (sequence + 1)..<next where slot(s) == nil {
                    missing[s] = MissingPacket(detected: arrival, lastSent: nil, retries: 0)
                }
            }
            nextSequence = sequence
            baseSequence = min(baseSequence, sequence)
            headBlockedSince = nil
            store(packet, sequence: sequence, arrival: arrival)
            assemble(now: arrival, into: &output)
            return output
        }
        if sequence - highestSequence > capacity || highestSequence - sequence > capacity {
            // The source restarted its sequence space or jumped far: start over, keeping the loss
            // count as it was.
            let lost = statistics.lost
            clearAll()
            start(at: sequence, ssrc: packet.ssrc)
            baseSequence = sequence - receivedUnique - lost
            store(packet, sequence: sequence, arrival: arrival)
            highestSequence = sequence
            requestKeyframeIfAllowed(now: arrival, into: &output)
            assemble(now: arrival, into: &output)
            return output
        }
        if slot(sequence) != nil {
            statistics.duplicates += 1
            return output
        }
        if sequence - next >= capacity {
            // No room to wait any longer for the head: give up on frames until the packet fits.
            dropHead(upTo: sequence - capacity + 1, now: arrival, into: &output)
        }
        store(packet, sequence: sequence, arrival: arrival)
        if sequence > highestSequence {
            if configuration.nackEnabled, sequence > highestSequence + 1 {
                let gap = sequence - highestSequence - 1
                if missing.count + Int(gap) > configuration.maxNackListSize {
                    missing.removeAll(keepingCapacity: true)
                    requestKeyframeIfAllowed(now: arrival, into: &output)
                } else {
                    for s in (highestSequence + 1)..<sequence {
                        missing[s] = MissingPacket(detected: arrival, lastSent: nil, retries: 0)
                    }
                }
            }
            highestSequence = sequence
            updateJitter(packet, arrival: arrival)
        } else if let entry = missing.removeValue(forKey: sequence), entry.retries > 0 {
            statistics.recovered += 1
        }
        if !missing.isEmpty { collectNacks(now: arrival, into: &output) }
        assemble(now: arrival, into: &output)
        return output
    }

    /// Advances time without a packet: retries NACKs, gives up on frames that waited too long.
    public mutating func tick(now: MonotonicTime) -> JitterBufferOutput {
        var output = JitterBufferOutput()
        guard nextSequence != nil else { return output }
        if !missing.isEmpty { collectNacks(now: now, into: &output) }
        assemble(now: now, into: &output)
        if output.hasFeedback { output.reportBlock = makeReportBlock(now: now) }
        return output
    }

    /// The earliest instant at which `tick(now:)` can do anything, or nil when only a new packet
    /// can change this buffer's state.
    ///
    /// A tick acts on three timers: a missing packet's first NACK (after `reorderTolerance`) or
    /// its retry (after the retry interval), giving up on a missing packet (after its last retry
    /// or `maxNackAge`), and dropping a blocked head frame (after `maxWaitForMissing`). A stream
    /// without loss and without a partly received frame has none of these, so its owner can stop
    /// ticking it: a periodic tick would wake the receive thread 50 times a second for nothing.
    /// Calling `tick(now:)` at or after this instant (and again at the instant it then reports)
    /// keeps every timeout and NACK retry on time.
    public var nextDeadline: MonotonicTime? {
        guard nextSequence != nil else { return nil }
        var earliest = headBlockedSince?.advanced(by: configuration.maxWaitForMissing)
        func consider(_ instant: MonotonicTime) {
            if earliest.map({ instant < $0 }) ?? true { earliest = instant }
        }
        guard !missing.isEmpty else { return earliest }
        let interval = nackRetryInterval
        for entry in missing.values {
            guard let lastSent = entry.lastSent else {
                consider(entry.detected.advanced(by: configuration.reorderTolerance))
                continue
            }
            // Out of retries: given up at the next tick, which unblocks the head at once.
            if entry.retries >= configuration.maxNackRetries {
                consider(lastSent)
                continue
            }
            consider(lastSent.advanced(by: interval))
            // `collectNacks` expires an entry once strictly older than `maxNackAge`.
            consider(entry.detected.advanced(by: configuration.maxNackAge + .microseconds(1)))
        }
        return earliest
    }

    /// A report block for this stream's RR or SR, updating the interval counters (RFC 3550 A.3).
    public mutating func makeReportBlock(now: MonotonicTime) -> RTCPReportBlock? {
        guard nextSequence != nil else { return nil }
        let expected = highestSequence - baseSequence + 1
        let lost = expected - receivedUnique
        let expectedInterval = expected - expectedPrior
        let receivedInterval = receivedUnique - receivedPrior
        expectedPrior = expected
        receivedPrior = receivedUnique
        let lostInterval = expectedInterval - receivedInterval
        let fraction: UInt8 =
            expectedInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expectedInterval))
        var lsr: UInt32 = 0
        var dlsr: UInt32 = 0
        if let sr = lastSenderReport {
            lsr = sr.middle
            dlsr = UInt32(truncatingIfNeeded: max(0, now.since(sr.arrival).microseconds) * 65536 / 1_000_000)
        }
        return RTCPReportBlock(
            ssrc: ssrc,
            fractionLost: fraction,
            cumulativeLost: Int32(clamping: lost),
            extendedHighestSequence: UInt32(truncatingIfNeeded: highestSequence),
            jitter: UInt32(max(0, min(statistics.jitter, Double(UInt32.max)))),
            lastSenderReport: lsr,
            delaySinceLastSenderReport: dlsr
        )
    }

    // MARK: - Internals

    private mutating func start(at sequence: Int64, ssrc: UInt32) {
        nextSequence = sequence
        highestSequence = sequence
        baseSequence = sequence
        self.ssrc = ssrc
    }

    private mutating func clearAll() {
        for i in slots.indices { slots[i] = nil }
        missing.removeAll()
        headBlockedSince = nil
        lastTransit = nil
        // A new sequence space: what was skipped cannot be counted.
        lastDelivered = nil
        if isVideo { waitingForKeyframe = true }
    }

    private mutating func store(_ packet: RTPPacket, sequence: Int64, arrival: MonotonicTime) {
        slots[Int(sequence & mask)] = Slot(sequence: sequence, packet: packet, arrival: arrival)
        receivedUnique += 1
        statistics.lost = highestSequence - baseSequence + 1 - receivedUnique
    }

    private mutating func updateJitter(_ packet: RTPPacket, arrival: MonotonicTime) {
        // Split into seconds and remainder so a wall-clock-sized origin cannot overflow.
        let rate = Int64(configuration.codec.clockRate)
        let us = arrival.microseconds
        let arrivalUnits = (us / 1_000_000) &* rate &+ (us % 1_000_000) * rate / 1_000_000
        let transit = arrivalUnits - Int64(packet.timestamp)
        if let last = lastTransit {
            // Timestamps wrap at 2^32; the difference of transits is taken modulo that.
            let d = Double(abs(Int64(Int32(truncatingIfNeeded: transit - last))))
            jitterEstimate += (d - jitterEstimate) / 16
            statistics.jitter = jitterEstimate
        }
        lastTransit = transit
        statistics.lost = highestSequence - baseSequence + 1 - receivedUnique
    }

    private mutating func collectNacks(now: MonotonicTime, into output: inout JitterBufferOutput) {
        let interval = nackRetryInterval
        var due: [Int64] = []
        var expired: [Int64] = []
        for (sequence, entry) in missing {
            if entry.retries >= configuration.maxNackRetries || now.since(entry.detected) > configuration.maxNackAge {
                expired.append(sequence)
            } else if entry.lastSent.map({ now.since($0) >= interval })
                ?? (now.since(entry.detected) >= configuration.reorderTolerance)
            {
                due.append(sequence)
            }
        }
        for s in expired { missing.removeValue(forKey: s) }
        guard !due.isEmpty else { return }
        due.sort()
        for s in due {
            if missing[s]?.retries == 0 { statistics.nackedPackets += 1 }
            missing[s]?.retries += 1
            missing[s]?.lastSent = now
            output.nack.append(UInt16(truncatingIfNeeded: s))
        }
        statistics.nackRequests += UInt64(due.count)
    }

    private mutating func requestKeyframeIfAllowed(now: MonotonicTime, into output: inout JitterBufferOutput) {
        guard output.keyframeRequest == nil else { return }
        if let last = lastKeyframeRequest, now.since(last) < configuration.keyframeRequestInterval { return }
        switch configuration.keyframeRequestMethod {
        case .none: return
        case .pli:
            output.keyframeRequest = .pli
            statistics.pliSent += 1
        case .fir:
            firSequence &+= 1
            output.keyframeRequest = .fir(sequenceNumber: firSequence)
            statistics.firSent += 1
        }
        lastKeyframeRequest = now
    }

    /// Whether the packet at `sequence` (present) is known to start a frame.
    /// Whether `current` is known to start a frame, given the packet just before it (nil if that
    /// packet is missing): after a marker or a timestamp change, or where the payload says so.
    private func beginsFrame(_ current: Slot, previous: Slot?) -> Bool {
        if !isVideo { return true }
        if let previous {
            return previous.packet.marker || previous.packet.timestamp != current.packet.timestamp
        }
        return PayloadFormat.beginsFrame(codec: configuration.codec, payload: current.packet.payload) == true
    }

    /// Gives up on the head frame(s): removes packets before `limit` (at least the head) and moves
    /// the head to the next packet known to start a frame.
    private mutating func dropHead(upTo limit: Int64, now: MonotonicTime, into output: inout JitterBufferOutput) {
        guard var next = nextSequence else { return }
        var droppedTimestamps = 0
        var lastTimestamp: UInt32? = nil
        var previous: Slot? = nil
        func take(_ s: Int64) {
            previous = self.slot(s)
            if let slot = previous {
                if slot.packet.timestamp != lastTimestamp {
                    droppedTimestamps += 1
                    lastTimestamp = slot.packet.timestamp
                }
                slots[Int(s & mask)] = nil
            }
        }
        repeat {
            take(next)
            next += 1
        } while next < limit
        // Advance to a frame start, judging each packet by the one before it.
        while next <= highestSequence {
            if let s = slot(next), beginsFrame(s, previous: previous) { break }
            take(next)
            next += 1
        }
        nextSequence = next
        hasDelivered = true
        for s in missing.keys where s < next { missing.removeValue(forKey: s) }
        statistics.framesDropped += UInt64(max(droppedTimestamps, 1))
        headBlockedSince = nil
        if isVideo {
            waitingForKeyframe = true
            requestKeyframeIfAllowed(now: now, into: &output)
        }
    }

    private mutating func assemble(now: MonotonicTime, into output: inout JitterBufferOutput) {
        while let next = nextSequence, next <= highestSequence {
            guard let head = slot(next) else {
                if !waitForHead(now: now, missingSequence: next, into: &output) { continue }
                return
            }
            if head.packet.payloadRange.isEmpty {
                // A padding-only packet (bandwidth probing) takes a sequence number and carries
                // nothing: step over it instead of treating it as a broken frame.
                slots[Int(next & mask)] = nil
                nextSequence = next + 1
                headBlockedSince = nil
                continue
            }
            if !hasDelivered, isVideo,
                PayloadFormat.beginsFrame(codec: configuration.codec, payload: head.packet.payload) == false
            {
                // The first packet seen is inside a frame; earlier packets may still arrive reordered.
                if !waitForHead(now: now, missingSequence: nil, into: &output) { continue }
                return
            }
            var end = next
            var complete = false
            var gap: Int64? = nil
            if !isVideo {
                complete = true
            } else {
                var k = next
                while let p = slot(k), p.packet.timestamp == head.packet.timestamp {
                    if p.packet.marker {
                        complete = true
                        break
                    }
                    k += 1
                }
                end = k
                if !complete, k <= highestSequence {
                    if slot(k) != nil {
                        complete = true  // the timestamp changed without a marker bit
                        end = k - 1
                    } else {
                        gap = k  // a packet inside the frame is missing (not merely not yet sent)
                    }
                }
            }
            guard complete else {
                if !waitForHead(now: now, missingSequence: gap, into: &output) { continue }
                return
            }
            emitFrame(from: next, to: end, now: now, into: &output)
        }
    }

    /// The head frame is blocked, by the absence of `missingSequence` if known; returns true to keep
    /// waiting, false after dropping it. With NACK, a missing packet that is no longer tracked has
    /// used up its retries (or the gap was too large to NACK), so the frame is dropped at once and
    /// the keyframe request goes out without waiting for `maxWaitForMissing`.
    private mutating func waitForHead(
        now: MonotonicTime,
        missingSequence: Int64?,
        into output: inout JitterBufferOutput
    ) -> Bool {
        guard let next = nextSequence else { return true }
        if configuration.nackEnabled, let missingSequence, missing[missingSequence] == nil {
            dropHead(upTo: next + 1, now: now, into: &output)
            return false
        }
        guard let since = headBlockedSince else {
            headBlockedSince = now
            return true
        }
        if now.since(since) < configuration.maxWaitForMissing { return true }
        dropHead(upTo: next + 1, now: now, into: &output)
        return false
    }

    /// How many video frames the packets skipped between two delivered frames held. Each frame
    /// given up on counts, but frames of which no packet arrived leave no trace but the gap, so
    /// the timestamp step tells how many frame intervals are missing; never more than the
    /// skipped packets (each frame has one at least), never fewer than those given up on, and at
    /// least one.
    static func videoFramesLost(skippedPackets: Int, givenUp: Int, timestampStep: UInt32, frameStep: UInt32?) -> Int {
        var estimate = givenUp
        if let frameStep, frameStep > 0, timestampStep < 1 << 31 {
            estimate = max(estimate, Int(timestampStep / frameStep) - 1)
        }
        return min(max(estimate, 1), skippedPackets)
    }

    private mutating func emitFrame(
        from first: Int64,
        to last: Int64,
        now: MonotonicTime,
        into output: inout JitterBufferOutput
    ) {
        headBlockedSince = nil
        hasDelivered = true
        nextSequence = last + 1
        var payloads: [ArraySlice<UInt8>] = []
        payloads.reserveCapacity(Int(last - first + 1))
        var firstArrival = now
        var timestamp: UInt32 = 0
        var ssrc: UInt32 = 0
        for s in first...last {
            let index = Int(s & mask)
            guard let slot = slots[index] else { continue }
            if s == first {
                firstArrival = slot.arrival
                timestamp = slot.packet.timestamp
                ssrc = slot.packet.ssrc
            }
            if !slot.packet.payloadRange.isEmpty { payloads.append(slot.packet.payload) }
            slots[index] = nil
        }
        let depacketized: DepacketizedFrame
        do {
            depacketized = try PayloadFormat.depacketize(codec: configuration.codec, payloads: payloads)
        } catch {
            statistics.depacketizationErrors += 1
            statistics.framesDropped += 1
            if isVideo {
                waitingForKeyframe = true
                requestKeyframeIfAllowed(now: now, into: &output)
            }
            return
        }
        if waitingForKeyframe {
            guard depacketized.isKeyframe else {
                statistics.framesDropped += 1
                requestKeyframeIfAllowed(now: now, into: &output)
                return
            }
            waitingForKeyframe = false
        }
        statistics.framesAssembled += 1
        var lostBefore = 0
        if let previous = lastDelivered {
            let skipped = Int(max(0, first - previous.sequence - 1))
            if !isVideo {
                lostBefore = skipped  // a packet is a frame
            } else if skipped > 0 {
                lostBefore = Self.videoFramesLost(
                    skippedPackets: skipped,
                    givenUp: Int(clamping: statistics.framesDropped - previous.framesDropped),
                    timestampStep: timestamp &- previous.timestamp,
                    frameStep: frameStep
                )
            } else {
                let step = timestamp &- previous.timestamp
                if step > 0, step < 1 << 31 { frameStep = min(frameStep ?? step, step) }
            }
        }
        lastDelivered = (last, timestamp, statistics.framesDropped)
        output.frames.append(
            ReceivedFrame(
                frame: EncodedFrame(
                    codec: configuration.codec,
                    data: depacketized.data,
                    rtpTimestamp: timestamp,
                    isKeyframe: depacketized.isKeyframe
                ),
                ssrc: ssrc,
                firstSequenceNumber: first,
                lastSequenceNumber: last,
                completionTime: now,
                firstArrivalTime: firstArrival,
                framesLostBefore: lostBefore
            )
        )
    }
}
