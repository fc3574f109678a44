/// Parsing and writing of RTCP compound packets (RFC 3550 §6.1).
public enum RTCPCompound {
    /// Parses every packet in `bytes`. A malformed packet rejects the whole datagram, as the
    /// compound is one SRTCP unit and a broken length would misalign everything after it.
    public static func parse(_ bytes: [UInt8]) throws(RTCPParseError) -> [RTCPPacket] {
        var packets: [RTCPPacket] = []
        var offset = 0
        let n = bytes.count
        guard n >= 4 else { throw RTCPParseError(reason: .truncated, offset: n) }
        while offset < n {
            guard offset + 4 <= n else { throw RTCPParseError(reason: .truncated, offset: offset) }
            let b0 = bytes[offset]
            let version = b0 >> 6
            guard version == 2 else { throw RTCPParseError(reason: .unsupportedVersion(version), offset: offset) }
            let count = b0 & 0x1F
            let type = bytes[offset + 1]
            let length = (Int(bytes.be16(offset + 2)) + 1) * 4
            guard offset + length <= n else { throw RTCPParseError(reason: .truncated, offset: offset + 2) }
            var end = offset + length
            if b0 & 0x20 != 0 {
                let pad = Int(bytes[end - 1])
                guard pad > 0, pad <= length - 4 else { throw RTCPParseError(reason: .invalidPadding, offset: end - 1) }
                end -= pad
            }
            let body = bytes[(offset + 4)..<end]
            packets.append(try parsePacket(type: type, count: count, body: body, offset: offset))
            offset += length
        }
        return packets
    }

    /// Writes the packets as one compound packet.
    public static func serialize(_ packets: [RTCPPacket]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 * packets.count)
        for packet in packets { write(packet, into: &out) }
        return out
    }

    // MARK: Parsing

    private static func malformed(_ type: UInt8, _ offset: Int) -> RTCPParseError {
        RTCPParseError(reason: .malformed(packetType: type), offset: offset)
    }

    private static func parseReportBlocks(
        _ body: ArraySlice<UInt8>,
        at start: Int,
        count: Int,
        type: UInt8,
        offset: Int
    ) throws(RTCPParseError) -> [RTCPReportBlock] {
        guard start + 24 * count <= body.endIndex else { throw malformed(type, offset) }
        var blocks: [RTCPReportBlock] = []
        blocks.reserveCapacity(count)
        for k in 0..<count {
            let i = start + 24 * k
            let lost24 = body.be24(i + 5)
            let lost = Int32(bitPattern: lost24 << 8) >> 8
            blocks.append(
                RTCPReportBlock(
                    ssrc: body.be32(i),
                    fractionLost: body[i + 4],
                    cumulativeLost: lost,
                    extendedHighestSequence: body.be32(i + 8),
                    jitter: body.be32(i + 12),
                    lastSenderReport: body.be32(i + 16),
                    delaySinceLastSenderReport: body.be32(i + 20)
                )
            )
        }
        return blocks
    }

    private static func parsePacket(
        type: UInt8,
        count: UInt8,
        body: ArraySlice<UInt8>,
        offset: Int
    ) throws(RTCPParseError) -> RTCPPacket {
        let s = body.startIndex
        let e = body.endIndex
        switch type {
        case RTCPPacket.PacketType.senderReport:
            guard s + 24 <= e else { throw malformed(type, offset) }
            let reports = try parseReportBlocks(body, at: s + 24, count: Int(count), type: type, offset: offset)
            return .senderReport(
                RTCPSenderReport(
                    ssrc: body.be32(s),
                    ntpTimestamp: NTPTimestamp(seconds: body.be32(s + 4), fraction: body.be32(s + 8)),
                    rtpTimestamp: body.be32(s + 12),
                    packetCount: body.be32(s + 16),
                    octetCount: body.be32(s + 20),
                    reports: reports
                )
            )
        case RTCPPacket.PacketType.receiverReport:
            guard s + 4 <= e else { throw malformed(type, offset) }
            let reports = try parseReportBlocks(body, at: s + 4, count: Int(count), type: type, offset: offset)
            return .receiverReport(RTCPReceiverReport(ssrc: body.be32(s), reports: reports))
        case RTCPPacket.PacketType.sourceDescription:
            var chunks: [RTCPSourceDescription.Chunk] = []
            var i = s
            for _ in 0..<count {
                guard i + 4 <= e else { throw malformed(type, offset) }
                var chunk = RTCPSourceDescription.Chunk(ssrc: body.be32(i), items: [])
                i += 4
                while true {
                    guard i < e else { throw malformed(type, offset) }
                    let itemType = body[i]
                    if itemType == 0 {
                        i += 1
                        while (i - s) % 4 != 0 { i += 1 }  // chunk ends on a word boundary
                        break
                    }
                    guard i + 2 <= e else { throw malformed(type, offset) }
                    let len = Int(body[i + 1])
                    guard i + 2 + len <= e else { throw malformed(type, offset) }
                    chunk.items.append(.init(type: itemType, value: Array(body[(i + 2)..<(i + 2 + len)])))
                    i += 2 + len
                }
                chunks.append(chunk)
            }
            return .sourceDescription(RTCPSourceDescription(chunks: chunks))
        case RTCPPacket.PacketType.goodbye:
            let c = Int(count)
            guard s + 4 * c <= e else { throw malformed(type, offset) }
            let ssrcs = (0..<c).map { body.be32(s + 4 * $0) }
            var reason: [UInt8] = []
            let r = s + 4 * c
            if r < e {
                let len = Int(body[r])
                guard r + 1 + len <= e else { throw malformed(type, offset) }
                reason = Array(body[(r + 1)..<(r + 1 + len)])
            }
            return .goodbye(RTCPGoodbye(ssrcs: ssrcs, reason: reason))
        case RTCPPacket.PacketType.transportFeedback:
            guard s + 8 <= e else { throw malformed(type, offset) }
            let sender = body.be32(s)
            let media = body.be32(s + 4)
            if count == 1 {
                var seqs: [UInt16] = []
                var i = s + 8
                while i + 4 <= e {
                    let pid = body.be16(i)
                    let blp = body.be16(i + 2)
                    seqs.append(pid)
                    for bit in 0..<16 where blp & (1 << bit) != 0 { seqs.append(pid &+ UInt16(bit + 1)) }
                    i += 4
                }
                return .genericNACK(RTCPGenericNACK(senderSSRC: sender, mediaSSRC: media, sequenceNumbers: seqs))
            }
            if count == 15, let feedback = parseTransportFeedback(body, sender: sender, media: media) {
                return .transportFeedback(feedback)
            }
        case RTCPPacket.PacketType.payloadFeedback:
            guard s + 8 <= e else { throw malformed(type, offset) }
            let sender = body.be32(s)
            let media = body.be32(s + 4)
            switch count {
            case 1:
                return .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: sender, mediaSSRC: media))
            case 4:
                var entries: [RTCPFullIntraRequest.Entry] = []
                var i = s + 8
                while i + 8 <= e {
                    entries.append(.init(ssrc: body.be32(i), sequenceNumber: body[i + 4]))
                    i += 8
                }
                return .fullIntraRequest(RTCPFullIntraRequest(senderSSRC: sender, entries: entries))
            case 15:
                // "REMB" | num SSRC | BR exp (6) | BR mantissa (18) | SSRCs
                if s + 16 <= e, body[s + 8] == 0x52, body[s + 9] == 0x45, body[s + 10] == 0x4D, body[s + 11] == 0x42 {
                    let numSSRC = Int(body[s + 12])
                    let exponent = UInt64(body[s + 13] >> 2)
                    let mantissa = UInt64(body.be24(s + 13) & 0x3_FFFF)
                    guard s + 16 + 4 * numSSRC <= e else { throw malformed(type, offset) }
                    let ssrcs = (0..<numSSRC).map { body.be32(s + 16 + 4 * $0) }
                    let bitrate = exponent >= 46 ? UInt64.max : mantissa << exponent
                    return .receiverEstimatedMaxBitrate(
                        RTCPReceiverEstimatedMaxBitrate(senderSSRC: sender, bitrate: bitrate, ssrcs: ssrcs)
                    )
                }
            default:
                break
            }
        default:
            break
        }
        return .unknown(packetType: type, count: count, body: Array(body))
    }

    /// Decodes transport-cc feedback; nil if malformed (it is then kept as `.unknown`).
    private static func parseTransportFeedback(
        _ body: ArraySlice<UInt8>,
        sender: UInt32,
        media: UInt32
    ) -> RTCPTransportFeedback? {
        let s = body.startIndex
        let e = body.endIndex
        guard s + 16 <= e else { return nil }
        let base = body.be16(s + 8)
        let statusCount = Int(body.be16(s + 10))
        let reference = Int32(bitPattern: body.be24(s + 12) << 8) >> 8
        let fbCount = body[s + 15]
        var statuses: [UInt8] = []
        statuses.reserveCapacity(statusCount)
        var i = s + 16
        while statuses.count < statusCount {
            guard i + 2 <= e else { return nil }
            let chunk = body.be16(i)
            i += 2
            if chunk & 0x8000 == 0 {  // run length
                let symbol = UInt8((chunk >> 13) & 0x3)
                let run = Int(chunk & 0x1FFF)
                statuses.append(contentsOf: repeatElement(symbol, count: min(run, statusCount - statuses.count)))
            } else if chunk & 0x4000 == 0 {  // 14 one-bit symbols
                for k in 0..<14 where statuses.count < statusCount {
                    statuses.append(UInt8((chunk >> (13 - k)) & 0x1))
                }
            } else {  // 7 two-bit symbols
                for k in 0..<7 where statuses.count < statusCount {
                    statuses.append(UInt8((chunk >> (12 - 2 * k)) & 0x3))
                }
            }
        }
        var packets: [RTCPTransportFeedback.Packet] = []
        packets.reserveCapacity(statusCount)
        for (k, status) in statuses.enumerated() {
            let seq = base &+ UInt16(truncatingIfNeeded: k)
            switch status {
            case 1:
                guard i + 1 <= e else { return nil }
                packets.append(.init(sequenceNumber: seq, receiveDelta: Int32(body[i])))
                i += 1
            case 2:
                guard i + 2 <= e else { return nil }
                packets.append(.init(sequenceNumber: seq, receiveDelta: Int32(Int16(bitPattern: body.be16(i)))))
                i += 2
            default:
                packets.append(.init(sequenceNumber: seq, receiveDelta: nil))
            }
        }
        return RTCPTransportFeedback(
            senderSSRC: sender,
            mediaSSRC: media,
            referenceTime: reference,
            feedbackCount: fbCount,
            packets: packets
        )
    }

    // MARK: Writing

    private static func writeHeader(count: UInt8, type: UInt8, into out: inout [UInt8]) -> Int {
        out.append(0x80 | (count & 0x1F))
        out.append(type)
        let lengthIndex = out.count
        out.appendBE16(0)
        return lengthIndex
    }

    private static func finish(_ lengthIndex: Int, into out: inout [UInt8]) {
        while (out.count - (lengthIndex - 2)) % 4 != 0 { out.append(0) }
        let words = (out.count - (lengthIndex - 2)) / 4 - 1
        out.setBE16(UInt16(truncatingIfNeeded: words), at: lengthIndex)
    }

    private static func write(_ block: RTCPReportBlock, into out: inout [UInt8]) {
        out.appendBE32(block.ssrc)
        out.append(block.fractionLost)
        out.appendBE24(UInt32(bitPattern: block.cumulativeLost) & 0xFF_FFFF)
        out.appendBE32(block.extendedHighestSequence)
        out.appendBE32(block.jitter)
        out.appendBE32(block.lastSenderReport)
        out.appendBE32(block.delaySinceLastSenderReport)
    }

    /// Appends one packet to `out`. Lists longer than a field can count are truncated (31 report
    /// blocks, SDES chunks or BYE sources).
    public static func write(_ packet: RTCPPacket, into out: inout [UInt8]) {
        switch packet {
        case .senderReport(let sr):
            let blocks = sr.reports.prefix(31)
            let li = writeHeader(count: UInt8(blocks.count), type: RTCPPacket.PacketType.senderReport, into: &out)
            out.appendBE32(sr.ssrc)
            out.appendBE32(sr.ntpTimestamp.seconds)
            out.appendBE32(sr.ntpTimestamp.fraction)
            out.appendBE32(sr.rtpTimestamp)
            out.appendBE32(sr.packetCount)
            out.appendBE32(sr.octetCount)
            for block in blocks { write(block, into: &out) }
            finish(li, into: &out)
        case .receiverReport(let rr):
            let blocks = rr.reports.prefix(31)
            let li = writeHeader(count: UInt8(blocks.count), type: RTCPPacket.PacketType.receiverReport, into: &out)
            out.appendBE32(rr.ssrc)
            for block in blocks { write(block, into: &out) }
            finish(li, into: &out)
        case .sourceDescription(let sdes):
            let chunks = sdes.chunks.prefix(31)
            let li = writeHeader(count: UInt8(chunks.count), type: RTCPPacket.PacketType.sourceDescription, into: &out)
            let start = out.count
            for chunk in chunks {
                out.appendBE32(chunk.ssrc)
                for item in chunk.items where item.type != 0 {
                    let value = item.value.prefix(255)
                    out.append(item.type)
                    out.append(UInt8(value.count))
                    out.append(contentsOf: value)
                }
                out.append(0)
                while (out.count - start) % 4 != 0 { out.append(0) }
            }
            finish(li, into: &out)
        case .goodbye(let bye):
            let ssrcs = bye.ssrcs.prefix(31)
            let li = writeHeader(count: UInt8(ssrcs.count), type: RTCPPacket.PacketType.goodbye, into: &out)
            for ssrc in ssrcs { out.appendBE32(ssrc) }
            if !bye.reason.isEmpty {
                let reason = bye.reason.prefix(255)
                out.append(UInt8(reason.count))
                out.append(contentsOf: reason)
            }
            finish(li, into: &out)
        case .genericNACK(let nack):
            let li = writeHeader(count: 1, type: RTCPPacket.PacketType.transportFeedback, into: &out)
            out.appendBE32(nack.senderSSRC)
            out.appendBE32(nack.mediaSSRC)
            for entry in nack.entries {
                out.appendBE16(entry.pid)
                out.appendBE16(entry.blp)
            }
            finish(li, into: &out)
        case .pictureLossIndication(let pli):
            let li = writeHeader(count: 1, type: RTCPPacket.PacketType.payloadFeedback, into: &out)
            out.appendBE32(pli.senderSSRC)
            out.appendBE32(pli.mediaSSRC)
            finish(li, into: &out)
        case .fullIntraRequest(let fir):
            let li = writeHeader(count: 4, type: RTCPPacket.PacketType.payloadFeedback, into: &out)
            out.appendBE32(fir.senderSSRC)
            out.appendBE32(0)
            for entry in fir.entries {
                out.appendBE32(entry.ssrc)
                out.append(entry.sequenceNumber)
                out.append(contentsOf: [0, 0, 0])
            }
            finish(li, into: &out)
        case .receiverEstimatedMaxBitrate(let remb):
            let li = writeHeader(count: 15, type: RTCPPacket.PacketType.payloadFeedback, into: &out)
            out.appendBE32(remb.senderSSRC)
            out.appendBE32(0)
            out.append(contentsOf: [0x52, 0x45, 0x4D, 0x42])
            let ssrcs = remb.ssrcs.prefix(255)
            out.append(UInt8(ssrcs.count))
            var mantissa = remb.bitrate
            var exponent: UInt32 = 0
            while mantissa > 0x3_FFFF {
                mantissa >>= 1
                exponent += 1
            }
            out.appendBE24(exponent << 18 | UInt32(mantissa))
            for ssrc in ssrcs { out.appendBE32(ssrc) }
            finish(li, into: &out)
        case .transportFeedback(let fb):
            let li = writeHeader(count: 15, type: RTCPPacket.PacketType.transportFeedback, into: &out)
            out.appendBE32(fb.senderSSRC)
            out.appendBE32(fb.mediaSSRC)
            let packets = fb.packets.prefix(0xFFFF)
            out.appendBE16(packets.first?.sequenceNumber ?? 0)
            out.appendBE16(UInt16(packets.count))
            out.appendBE24(UInt32(bitPattern: fb.referenceTime) & 0xFF_FFFF)
            out.append(fb.feedbackCount)
            let symbols: [UInt8] = packets.map { p in
                guard let d = p.receiveDelta else { return 0 }
                return (0...255).contains(d) ? 1 : 2
            }
            var k = 0
            while k < symbols.count {  // two-bit status vector chunks, 7 symbols each
                var chunk: UInt16 = 0xC000
                for j in 0..<7 where k + j < symbols.count {
                    chunk |= UInt16(symbols[k + j]) << (12 - 2 * j)
                }
                out.appendBE16(chunk)
                k += 7
            }
            for (p, symbol) in zip(packets, symbols) {
                if symbol == 1, let d = p.receiveDelta { out.append(UInt8(d)) }
                if symbol == 2, let d = p.receiveDelta {
                    out.appendBE16(UInt16(bitPattern: Int16(clamping: d)))
                }
            }
            finish(li, into: &out)
        case .unknown(let type, let count, let body):
            let li = writeHeader(count: count, type: type, into: &out)
            out.append(contentsOf: body)
            finish(li, into: &out)
        }
    }
}
