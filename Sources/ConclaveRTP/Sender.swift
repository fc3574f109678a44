import ConclaveCore

/// Recently sent packets of one stream, kept to answer NACKs (RFC 4585).
///
/// A fixed ring indexed by sequence number; a packet is retransmitted at most once per
/// `minRetransmitInterval`, so a burst of duplicate NACKs does not multiply traffic.
public struct RTPPacketHistory: Sendable {
    private struct Entry: Sendable {
        var sequenceNumber: UInt16
        var packet: [UInt8]
        var sentAt: MonotonicTime
        var lastRetransmit: MonotonicTime?
    }

    private var entries: [Entry?]
    /// The longest time a packet stays answerable.
    public var maxAge: Duration
    /// The least time between two retransmissions of one packet.
    public var minRetransmitInterval: Duration

    /// Creates a history of `capacity` packets (1024 covers about 1 s of 10 Mbit/s video).
    public init(
        capacity: Int = 1024,
        maxAge: Duration = .seconds(2),
        minRetransmitInterval: Duration = .milliseconds(10)
    ) {
        self.entries = Array(repeating: nil, count: max(capacity, 1))
        self.maxAge = maxAge
        self.minRetransmitInterval = minRetransmitInterval
    }

    /// Records a packet as sent at `now`.
    public mutating func store(_ packet: [UInt8], sequenceNumber: UInt16, now: MonotonicTime) {
        entries[Int(sequenceNumber) % entries.count] = Entry(
            sequenceNumber: sequenceNumber,
            packet: packet,
            sentAt: now,
            lastRetransmit: nil
        )
    }

    /// The packet to retransmit for a NACKed `sequenceNumber`, or nil if it is unknown, too old, or
    /// was retransmitted too recently.
    public mutating func retransmission(of sequenceNumber: UInt16, now: MonotonicTime) -> [UInt8]? {
        let index = Int(sequenceNumber) % entries.count
        guard var entry = entries[index], entry.sequenceNumber == sequenceNumber,
            now.since(entry.sentAt) <= maxAge
        else { return nil }
        if let last = entry.lastRetransmit, now.since(last) < minRetransmitInterval { return nil }
        entry.lastRetransmit = now
        entries[index] = entry
        return entry.packet
    }
}

/// Assigns sequence numbers and RTP timestamps to one outgoing stream and writes its packets.
public struct RTPSequencer: Sendable {
    /// The stream's SSRC.
    public let ssrc: UInt32
    /// The negotiated payload type.
    public let payloadType: UInt8
    /// The sequence number of the next packet.
    public private(set) var nextSequenceNumber: UInt16
    /// Added to every media timestamp (RFC 3550 asks for a random start).
    public let timestampOffset: UInt32
    /// Packets written.
    public private(set) var packetCount: UInt32 = 0
    /// Payload bytes written.
    public private(set) var octetCount: UInt32 = 0
    /// The RTP timestamp of the latest frame, nil before the first.
    public private(set) var lastTimestamp: UInt32?

    /// Creates a sequencer. Pass random `initialSequenceNumber` and `timestampOffset`; this type does
    /// not read a random source so that tests are reproducible.
    public init(ssrc: UInt32, payloadType: UInt8, initialSequenceNumber: UInt16, timestampOffset: UInt32) {
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.nextSequenceNumber = initialSequenceNumber
        self.timestampOffset = timestampOffset
    }

    /// Writes the RTP packets for one frame's payloads. `mediaTimestamp` is the frame time in the
    /// codec clock; `markLast` sets the marker on the last packet (video); `extensions` go on
    /// every packet.
    public mutating func packets(
        for payloads: [[UInt8]],
        mediaTimestamp: UInt32,
        markLast: Bool,
        extensions: [RTPHeaderExtensionElement] = []
    ) -> [[UInt8]] {
        let timestamp = mediaTimestamp &+ timestampOffset
        lastTimestamp = timestamp
        var result: [[UInt8]] = []
        result.reserveCapacity(payloads.count)
        for (index, payload) in payloads.enumerated() {
            let header = RTPHeader(
                marker: markLast && index == payloads.count - 1,
                payloadType: payloadType,
                sequenceNumber: nextSequenceNumber,
                timestamp: timestamp,
                ssrc: ssrc,
                extensions: extensions
            )
            result.append(header.serialize(payload: payload))
            nextSequenceNumber &+= 1
            packetCount &+= 1
            octetCount &+= UInt32(truncatingIfNeeded: payload.count)
        }
        return result
    }
}

/// Plans when to send each packet, from frame timestamps and an optional bitrate limit.
///
/// Pure: it returns instants and reads no clock. Frame *n* is due at the anchor instant plus its
/// media time since the anchor frame; the packets of a frame are spaced so the pacing rate
/// (2.5 × the bitrate limit, as WebRTC's pacer does) is not exceeded. A source that falls more
/// than `maxLag` behind, or whose timestamps jump more than `maxLead` ahead, is re-anchored.
public struct FramePacer: Sendable {
    /// The media clock rate.
    public let clockRate: UInt32
    /// The bitrate limit in bits per second (REMB or configuration), nil for no limit.
    public var bitrateLimit: UInt64?
    /// The pacing rate multiplier over `bitrateLimit`.
    public var pacingFactor: Double = 2.5
    /// How far behind schedule the plan may fall before it re-anchors to now.
    public var maxLag: Duration = .milliseconds(500)
    /// How far ahead of now a frame may be scheduled before the plan re-anchors.
    public var maxLead: Duration = .seconds(2)

    private var anchor: (timestamp: Int64, time: MonotonicTime)?
    private var unwrapper = TimestampUnwrapper()
    private var busyUntil: MonotonicTime?

    /// Creates a pacer for a stream with `clockRate`.
    public init(clockRate: UInt32, bitrateLimit: UInt64? = nil) {
        self.clockRate = max(clockRate, 1)
        self.bitrateLimit = bitrateLimit
    }

    /// The send instants for the packets of a frame with `timestamp` whose sizes are `packetSizes`.
    public mutating func schedule(timestamp: UInt32, packetSizes: [Int], now: MonotonicTime) -> [MonotonicTime] {
        let unwrapped = unwrapper.unwrap(timestamp)
        var due: MonotonicTime
        if let anchor {
            // The timestamps may come from a media file: a distance too large for microseconds
            // is as far off as any, so it re-anchors like one.
            let (distance, far) = unwrapped.subtractingReportingOverflow(anchor.timestamp)
            let (product, overflow) = distance.multipliedReportingOverflow(by: 1_000_000)
            let tooFar = far || overflow
            due = tooFar ? now : anchor.time.advanced(by: .microseconds(product / Int64(clockRate)))
            if tooFar || now.since(due) > maxLag || due.since(now) > maxLead {
                self.anchor = (unwrapped, now)
                due = now
            }
        } else {
            anchor = (unwrapped, now)
            due = now
        }
        var t = max(due, busyUntil ?? due)
        var instants: [MonotonicTime] = []
        instants.reserveCapacity(packetSizes.count)
        let rate = bitrateLimit.map { max(Double($0) * pacingFactor, 1) }
        for size in packetSizes {
            instants.append(t)
            if let rate {
                t = t.advanced(by: .microseconds(Int64(Double(size * 8) * 1_000_000 / rate)))
            }
        }
        busyUntil = t
        return instants
    }
}

/// What the sender must do in response to RTCP feedback.
public enum RTPSenderAction: Sendable, Hashable {
    /// Send these packets again (answers to a NACK).
    case retransmit([[UInt8]])
    /// Ask the media source for a keyframe (PLI or a new FIR).
    case requestKeyframe
    /// The receiver's bandwidth estimate changed: do not exceed this many bits per second.
    case limitBitrate(UInt64)
    /// A report block for our stream gave this round-trip time.
    case roundTripTime(Duration)
}

/// The send side of one RTP stream: packet history, feedback handling, sender reports.
public struct RTPSender: Sendable {
    /// Sequence and timestamp assignment.
    public private(set) var sequencer: RTPSequencer
    /// Answers for NACKs.
    public var history: RTPPacketHistory
    /// The media clock rate.
    public let clockRate: UInt32
    /// The least time between two keyframe requests passed to the source. A request within this
    /// time of the previous one is deferred, not dropped: see ``dueKeyframeRequest(now:)``.
    public var keyframeRequestInterval: Duration = .milliseconds(300)

    private var lastKeyframeRequest: MonotonicTime?
    private var keyframeRequestDeferred = false
    private var lastFIRSequence: [UInt32: UInt8] = [:]
    private var lastFrameTime: (timestamp: UInt32, time: MonotonicTime)?
    /// NACKed packets answered.
    public private(set) var retransmitted: UInt64 = 0
    /// PLIs received.
    public private(set) var pliReceived: UInt64 = 0
    /// FIRs received.
    public private(set) var firReceived: UInt64 = 0

    /// Creates a sender.
    public init(sequencer: RTPSequencer, clockRate: UInt32, history: RTPPacketHistory = RTPPacketHistory()) {
        self.sequencer = sequencer
        self.clockRate = max(clockRate, 1)
        self.history = history
    }

    /// Packetizes one frame's payloads, stores the packets for retransmission and returns them.
    public mutating func send(
        payloads: [[UInt8]],
        mediaTimestamp: UInt32,
        markLast: Bool,
        extensions: [RTPHeaderExtensionElement] = [],
        now: MonotonicTime
    ) -> [[UInt8]] {
        let first = sequencer.nextSequenceNumber
        let packets = sequencer.packets(
            for: payloads,
            mediaTimestamp: mediaTimestamp,
            markLast: markLast,
            extensions: extensions
        )
        for (i, packet) in packets.enumerated() {
            history.store(packet, sequenceNumber: first &+ UInt16(truncatingIfNeeded: i), now: now)
        }
        if let ts = sequencer.lastTimestamp { lastFrameTime = (ts, now) }
        return packets
    }

    /// Handles one RTCP packet addressed to this stream. `arrivalNTP` is our wall clock when the
    /// compound arrived, for the round-trip time.
    public mutating func handle(_ packet: RTCPPacket, now: MonotonicTime, arrivalNTP: NTPTimestamp) -> [RTPSenderAction]
    {
        let ssrc = sequencer.ssrc
        switch packet {
        case .genericNACK(let nack) where nack.mediaSSRC == ssrc:
            var packets: [[UInt8]] = []
            for seq in nack.sequenceNumbers {
                if let p = history.retransmission(of: seq, now: now) { packets.append(p) }
            }
            retransmitted += UInt64(packets.count)
            return packets.isEmpty ? [] : [.retransmit(packets)]
        case .pictureLossIndication(let pli) where pli.mediaSSRC == ssrc:
            pliReceived += 1
            return keyframeRequest(now: now)
        case .fullIntraRequest(let fir):
            var actions: [RTPSenderAction] = []
            for entry in fir.entries where entry.ssrc == ssrc {
                let key = fir.senderSSRC
                // A repeated command sequence number is a retransmission of a request already handled.
                if lastFIRSequence[key] == entry.sequenceNumber { continue }
                lastFIRSequence[key] = entry.sequenceNumber
                firReceived += 1
                actions += keyframeRequest(now: now)
            }
            return actions
        case .receiverEstimatedMaxBitrate(let remb) where remb.ssrcs.isEmpty || remb.ssrcs.contains(ssrc):
            return [.limitBitrate(remb.bitrate)]
        case .receiverReport(let rr):
            return rr.reports.compactMap { block in
                guard block.ssrc == ssrc, let rtt = block.roundTripTime(arrival: arrivalNTP) else { return nil }
                return .roundTripTime(rtt)
            }
        case .senderReport(let sr):
            return sr.reports.compactMap { block in
                guard block.ssrc == ssrc, let rtt = block.roundTripTime(arrival: arrivalNTP) else { return nil }
                return .roundTripTime(rtt)
            }
        default:
            return []
        }
    }

    private mutating func keyframeRequest(now: MonotonicTime) -> [RTPSenderAction] {
        if let last = lastKeyframeRequest, now.since(last) < keyframeRequestInterval {
            // The keyframe made for the previous request may have been sent before this receiver
            // could use it (an SFU asks once for each subscriber that joins, and two can join
            // within the interval), so the request is kept for later instead of dropped.
            keyframeRequestDeferred = true
            return []
        }
        lastKeyframeRequest = now
        keyframeRequestDeferred = false
        return [.requestKeyframe]
    }

    /// Whether a keyframe request deferred by the throttle is now due; true once per deferral.
    /// Call it regularly (each frame sent is often enough) and ask the source for a keyframe when
    /// it returns true.
    public mutating func dueKeyframeRequest(now: MonotonicTime) -> Bool {
        guard keyframeRequestDeferred, let last = lastKeyframeRequest, now.since(last) >= keyframeRequestInterval
        else { return false }
        keyframeRequestDeferred = false
        lastKeyframeRequest = now
        return true
    }

    /// A sender report for `now`, whose wall-clock time is `wallClock`; the RTP timestamp is
    /// extrapolated from the latest frame. Nil before the first frame.
    public func senderReport(now: MonotonicTime, wallClock: NTPTimestamp, reports: [RTCPReportBlock] = [])
        -> RTCPSenderReport?
    {
        guard let last = lastFrameTime else { return nil }
        let elapsed = max(0, now.since(last.time).microseconds)
        let rate = Int64(clockRate)
        let ticks = (elapsed / 1_000_000) &* rate &+ (elapsed % 1_000_000) * rate / 1_000_000
        let rtp = last.timestamp &+ UInt32(truncatingIfNeeded: ticks)
        return RTCPSenderReport(
            ssrc: sequencer.ssrc,
            ntpTimestamp: wallClock,
            rtpTimestamp: rtp,
            packetCount: sequencer.packetCount,
            octetCount: sequencer.octetCount,
            reports: reports
        )
    }
}
