/// Why an RTCP compound packet was rejected.
public struct RTCPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Hashable {
        /// Shorter than a header, or shorter than the length field says.
        case truncated
        /// The version field is not 2.
        case unsupportedVersion(UInt8)
        /// The padding count is zero or larger than the packet.
        case invalidPadding
        /// The packet body does not match its type (for example a report block count that overruns).
        case malformed(packetType: UInt8)
    }

    /// What was wrong.
    public var reason: Reason
    /// Byte offset in the compound packet.
    public var offset: Int

    public var description: String { "RTCP rejected at byte \(offset): \(reason)" }
}

/// A 64-bit NTP timestamp (seconds since 1900 and a 32-bit binary fraction), as carried in SR.
public struct NTPTimestamp: Sendable, Hashable, Comparable {
    /// Seconds between 1900-01-01 and 1970-01-01.
    public static let unixEpochOffset: UInt64 = 2_208_988_800

    /// Whole seconds since 1900.
    public var seconds: UInt32
    /// Fraction of a second in units of 2^-32.
    public var fraction: UInt32

    /// Creates a timestamp from its two words.
    public init(seconds: UInt32, fraction: UInt32) {
        self.seconds = seconds
        self.fraction = fraction
    }

    /// Creates a timestamp from the 64-bit form.
    public init(rawValue: UInt64) {
        self.init(seconds: UInt32(truncatingIfNeeded: rawValue >> 32), fraction: UInt32(truncatingIfNeeded: rawValue))
    }

    /// Creates a timestamp from microseconds since the Unix epoch.
    public init(unixMicroseconds: Int64) {
        let us = UInt64(max(unixMicroseconds, 0))
        let secs = us / 1_000_000 + Self.unixEpochOffset
        let frac = ((us % 1_000_000) << 32) / 1_000_000
        self.init(seconds: UInt32(truncatingIfNeeded: secs), fraction: UInt32(truncatingIfNeeded: frac))
    }

    /// The 64-bit form.
    public var rawValue: UInt64 { UInt64(seconds) << 32 | UInt64(fraction) }

    /// The middle 32 bits, used as LSR in report blocks and for RTT.
    public var middle32: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 16) }

    /// Seconds since the Unix epoch, as a floating-point value.
    public var unixSeconds: Double {
        Double(Int64(seconds) - Int64(Self.unixEpochOffset)) + Double(fraction) / 4_294_967_296.0
    }

    /// Microseconds since the Unix epoch.
    public var unixMicroseconds: Int64 {
        (Int64(seconds) - Int64(Self.unixEpochOffset)) * 1_000_000 + Int64((UInt64(fraction) * 1_000_000) >> 32)
    }

    public static func < (lhs: NTPTimestamp, rhs: NTPTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One report block of an SR or RR (RFC 3550 §6.4.1).
public struct RTCPReportBlock: Sendable, Hashable {
    /// The source this block reports on.
    public var ssrc: UInt32
    /// Fraction of packets lost since the previous report, in units of 1/256.
    public var fractionLost: UInt8
    /// Cumulative packets lost (24-bit signed; negative with duplicates).
    public var cumulativeLost: Int32
    /// Extended highest sequence number received.
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received (0 if none).
    public var lastSenderReport: UInt32
    /// Delay since that SR, in units of 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    /// Creates a block.
    public init(
        ssrc: UInt32,
        fractionLost: UInt8,
        cumulativeLost: Int32,
        extendedHighestSequence: UInt32,
        jitter: UInt32,
        lastSenderReport: UInt32,
        delaySinceLastSenderReport: UInt32
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = max(min(cumulativeLost, 0x7F_FFFF), -0x80_0000)
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    /// A block about `ssrc` that reports nothing received yet. Feedback (NACK, PLI, FIR) is sent
    /// led by a receiver report with a block about the stream, because Janus finds the stream a
    /// compound packet is about from that block; before any statistics exist, this is the block.
    public static func nothingReceived(ssrc: UInt32) -> RTCPReportBlock {
        RTCPReportBlock(
            ssrc: ssrc,
            fractionLost: 0,
            cumulativeLost: 0,
            extendedHighestSequence: 0,
            jitter: 0,
            lastSenderReport: 0,
            delaySinceLastSenderReport: 0
        )
    }

    /// The round-trip time this block implies when it arrives at `arrival` (RFC 3550 §6.4.1),
    /// or nil if the peer has not seen an SR from us yet.
    public func roundTripTime(arrival: NTPTimestamp) -> Duration? {
        guard lastSenderReport != 0 else { return nil }
        let rtt = Int64(arrival.middle32 &- lastSenderReport &- delaySinceLastSenderReport)
        let units = Int64(Int32(bitPattern: UInt32(truncatingIfNeeded: rtt)))
        guard units >= 0 else { return .zero }
        return .microseconds(units * 1_000_000 / 65536)
    }
}

/// Sender report (PT 200).
public struct RTCPSenderReport: Sendable, Hashable {
    /// The sender.
    public var ssrc: UInt32
    /// Wall-clock time of this report.
    public var ntpTimestamp: NTPTimestamp
    /// The RTP timestamp corresponding to `ntpTimestamp`.
    public var rtpTimestamp: UInt32
    /// Packets sent.
    public var packetCount: UInt32
    /// Payload bytes sent.
    public var octetCount: UInt32
    /// Reception reports.
    public var reports: [RTCPReportBlock]

    /// Creates a report.
    public init(
        ssrc: UInt32,
        ntpTimestamp: NTPTimestamp,
        rtpTimestamp: UInt32,
        packetCount: UInt32,
        octetCount: UInt32,
        reports: [RTCPReportBlock] = []
    ) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
    }
}

/// Receiver report (PT 201).
public struct RTCPReceiverReport: Sendable, Hashable {
    /// The reporter.
    public var ssrc: UInt32
    /// Reception reports.
    public var reports: [RTCPReportBlock]

    /// Creates a report.
    public init(ssrc: UInt32, reports: [RTCPReportBlock]) {
        self.ssrc = ssrc
        self.reports = reports
    }
}

/// Source description (PT 202); Conclave only writes CNAME, but keeps every item it reads.
public struct RTCPSourceDescription: Sendable, Hashable {
    /// One SDES item.
    public struct Item: Sendable, Hashable {
        /// The item type (1 = CNAME).
        public var type: UInt8
        /// The item text bytes.
        public var value: [UInt8]

        /// Creates an item.
        public init(type: UInt8, value: [UInt8]) {
            self.type = type
            self.value = value
        }
    }

    /// The items for one source.
    public struct Chunk: Sendable, Hashable {
        /// The source.
        public var ssrc: UInt32
        /// Its items.
        public var items: [Item]

        /// Creates a chunk.
        public init(ssrc: UInt32, items: [Item]) {
            self.ssrc = ssrc
            self.items = items
        }

        /// The CNAME, if present and valid UTF-8.
        public var cname: String? {
            items.first { $0.type == 1 }.flatMap { String(validating: $0.value, as: UTF8.self) }
        }
    }

    /// The chunks.
    public var chunks: [Chunk]

    /// Creates a description.
    public init(chunks: [Chunk]) {
        self.chunks = chunks
    }

    /// A description with one CNAME.
    public static func cname(_ cname: String, ssrc: UInt32) -> RTCPSourceDescription {
        RTCPSourceDescription(chunks: [Chunk(ssrc: ssrc, items: [Item(type: 1, value: Array(cname.utf8.prefix(255)))])])
    }
}

/// Goodbye (PT 203).
public struct RTCPGoodbye: Sendable, Hashable {
    /// The sources leaving.
    public var ssrcs: [UInt32]
    /// The optional reason text bytes.
    public var reason: [UInt8]

    /// Creates a goodbye.
    public init(ssrcs: [UInt32], reason: [UInt8] = []) {
        self.ssrcs = ssrcs
        self.reason = reason
    }
}

/// Generic NACK (RFC 4585 §6.2.1, PT 205 FMT 1), as the list of sequence numbers it asks for.
public struct RTCPGenericNACK: Sendable, Hashable {
    /// The sender of the feedback.
    public var senderSSRC: UInt32
    /// The source whose packets are missing.
    public var mediaSSRC: UInt32
    /// The missing sequence numbers, in the order of the FCI entries.
    public var sequenceNumbers: [UInt16]

    /// Creates a NACK.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, sequenceNumbers: [UInt16]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.sequenceNumbers = sequenceNumbers
    }

    /// The FCI entries (PID, BLP): each PID covers itself and the 16 numbers after it.
    var entries: [(pid: UInt16, blp: UInt16)] {
        var result: [(pid: UInt16, blp: UInt16)] = []
        for seq in sequenceNumbers {
            if let last = result.last {
                let distance = seq &- last.pid
                if distance == 0 { continue }
                if distance <= 16 {
                    result[result.count - 1].blp |= 1 << (distance - 1)
                    continue
                }
            }
            result.append((seq, 0))
        }
        return result
    }
}

/// Picture loss indication (RFC 4585 §6.3.1, PT 206 FMT 1).
public struct RTCPPictureLossIndication: Sendable, Hashable {
    /// The sender of the feedback.
    public var senderSSRC: UInt32
    /// The source that should send a keyframe.
    public var mediaSSRC: UInt32

    /// Creates a PLI.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
    }
}

/// Full intra request (RFC 5104 §4.3.1, PT 206 FMT 4).
public struct RTCPFullIntraRequest: Sendable, Hashable {
    /// One FCI entry.
    public struct Entry: Sendable, Hashable {
        /// The source that should send a keyframe.
        public var ssrc: UInt32
        /// The command sequence number; a repeated number is a retransmission of the same request.
        public var sequenceNumber: UInt8

        /// Creates an entry.
        public init(ssrc: UInt32, sequenceNumber: UInt8) {
            self.ssrc = ssrc
            self.sequenceNumber = sequenceNumber
        }
    }

    /// The sender of the feedback.
    public var senderSSRC: UInt32
    /// The requests.
    public var entries: [Entry]

    /// Creates a FIR.
    public init(senderSSRC: UInt32, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.entries = entries
    }
}

/// Receiver estimated maximum bitrate (draft-alvestrand-rmcat-remb, PT 206 FMT 15 "REMB").
public struct RTCPReceiverEstimatedMaxBitrate: Sendable, Hashable {
    /// The sender of the feedback.
    public var senderSSRC: UInt32
    /// The estimate in bits per second (exponent and 18-bit mantissa on the wire).
    public var bitrate: UInt64
    /// The sources the estimate applies to.
    public var ssrcs: [UInt32]

    /// Creates a REMB.
    public init(senderSSRC: UInt32, bitrate: UInt64, ssrcs: [UInt32]) {
        self.senderSSRC = senderSSRC
        self.bitrate = bitrate
        self.ssrcs = ssrcs
    }
}

/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions,
/// PT 205 FMT 15), decoded to one entry per reported sequence number.
public struct RTCPTransportFeedback: Sendable, Hashable {
    /// One reported packet.
    public struct Packet: Sendable, Hashable {
        /// The transport-wide sequence number.
        public var sequenceNumber: UInt16
        /// The receive delta from the previous received packet in 250 µs units, nil if not received.
        public var receiveDelta: Int32?

        /// Creates an entry.
        public init(sequenceNumber: UInt16, receiveDelta: Int32?) {
            self.sequenceNumber = sequenceNumber
            self.receiveDelta = receiveDelta
        }
    }

    /// The sender of the feedback.
    public var senderSSRC: UInt32
    /// The media source (often 0 or the first media SSRC).
    public var mediaSSRC: UInt32
    /// The reference time in multiples of 64 ms (24-bit signed).
    public var referenceTime: Int32
    /// The feedback packet counter.
    public var feedbackCount: UInt8
    /// The reported packets from the base sequence number on.
    public var packets: [Packet]

    /// Creates feedback.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, referenceTime: Int32, feedbackCount: UInt8, packets: [Packet]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.referenceTime = referenceTime
        self.feedbackCount = feedbackCount
        self.packets = packets
    }
}

/// One RTCP packet of a compound packet.
public enum RTCPPacket: Sendable, Hashable {
    /// SR.
    case senderReport(RTCPSenderReport)
    /// RR.
    case receiverReport(RTCPReceiverReport)
    /// SDES.
    case sourceDescription(RTCPSourceDescription)
    /// BYE.
    case goodbye(RTCPGoodbye)
    /// Generic NACK.
    case genericNACK(RTCPGenericNACK)
    /// PLI.
    case pictureLossIndication(RTCPPictureLossIndication)
    /// FIR.
    case fullIntraRequest(RTCPFullIntraRequest)
    /// REMB.
    case receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate)
    /// Transport-wide CC feedback.
    case transportFeedback(RTCPTransportFeedback)
    /// Any other packet, kept verbatim (body = bytes after the 4-byte header, padding removed).
    case unknown(packetType: UInt8, count: UInt8, body: [UInt8])

    /// Packet types (RFC 3550, RFC 4585).
    public enum PacketType {
        /// SR.
        public static let senderReport: UInt8 = 200
        /// RR.
        public static let receiverReport: UInt8 = 201
        /// SDES.
        public static let sourceDescription: UInt8 = 202
        /// BYE.
        public static let goodbye: UInt8 = 203
        /// APP.
        public static let application: UInt8 = 204
        /// Transport-layer feedback.
        public static let transportFeedback: UInt8 = 205
        /// Payload-specific feedback.
        public static let payloadFeedback: UInt8 = 206
    }
}
