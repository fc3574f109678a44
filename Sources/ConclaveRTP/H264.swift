import ConclaveCore

extension H264NALUnitType {
    /// Whether an RTP payload whose first byte has this type is one whole NAL unit (RFC 6184 §5.2:
    /// types 1...23); 24...29 are aggregation and fragmentation packets, 0, 30 and 31 reserved.
    var isSingleNALUnitPacket: Bool { (1...23).contains(rawValue) }
}

/// Splits Annex-B access units into RTP payloads (RFC 6184 packetization-mode 1).
///
/// NAL units that fit are sent alone or, when several small ones are adjacent (SPS, PPS, SEI),
/// aggregated in one STAP-A; larger ones are split into FU-A fragments of balanced size.
public struct H264Packetizer: Sendable {
    /// The largest payload to produce.
    public var maxPayloadSize: Int
    /// Whether to aggregate small adjacent NAL units into STAP-A packets.
    public var aggregates: Bool

    /// Creates a packetizer; see `RTPPacketization.defaultMaxPayloadSize` for the default size.
    public init(maxPayloadSize: Int = RTPPacketization.defaultMaxPayloadSize, aggregates: Bool = true) {
        self.maxPayloadSize = max(maxPayloadSize, 16)
        self.aggregates = aggregates
    }

    /// The payloads for one access unit, in order; the caller sets the marker bit on the last one.
    public func packetize(_ accessUnit: [UInt8]) -> [[UInt8]] {
        let nals = H264AnnexB.nalUnitRanges(accessUnit).filter { !$0.isEmpty }
        var result: [[UInt8]] = []
        var index = 0
        while index < nals.count {
            let nal = nals[index]
            if nal.count > maxPayloadSize || nal.count > 0xFFFF {
                appendFragments(of: accessUnit[nal], to: &result)
                index += 1
                continue
            }
            // Try to aggregate nal and its successors.
            var size = 1 + 2 + nal.count
            var last = index
            if aggregates {
                while last + 1 < nals.count, size + 2 + nals[last + 1].count <= min(maxPayloadSize, 0xFFFF) {
                    last += 1
                    size += 2 + nals[last].count
                }
            }
            if last == index {
                result.append(Array(accessUnit[nal]))
            } else {
                var payload: [UInt8] = []
                payload.reserveCapacity(size)
                var forbidden: UInt8 = 0
                var nri: UInt8 = 0
                for r in nals[index...last] {
                    forbidden |= accessUnit[r.lowerBound] & 0x80
                    nri = max(nri, accessUnit[r.lowerBound] & 0x60)
                }
                payload.append(forbidden | nri | H264NALUnitType.stapA.rawValue)
                for r in nals[index...last] {
                    payload.appendBE16(UInt16(r.count))
                    payload.append(contentsOf: accessUnit[r])
                }
                result.append(payload)
            }
            index = last + 1
        }
        return result
    }

    private func appendFragments(of nal: ArraySlice<UInt8>, to result: inout [[UInt8]]) {
        let header = nal[nal.startIndex]
        let body = nal.dropFirst()
        let sizes = RTPPacketization.balancedSizes(total: body.count, maxChunk: maxPayloadSize - 2)
        var i = body.startIndex
        for (n, size) in sizes.enumerated() {
            var payload: [UInt8] = []
            payload.reserveCapacity(2 + size)
            payload.append((header & 0xE0) | H264NALUnitType.fuA.rawValue)
            var fu = H264NALUnitType(header: header).rawValue
            if n == 0 { fu |= 0x80 }
            if n == sizes.count - 1 { fu |= 0x40 }
            payload.append(fu)
            payload.append(contentsOf: body[i..<(i + size)])
            i += size
            result.append(payload)
        }
    }
}

/// Rebuilds Annex-B access units (4-byte start codes) from RTP payloads (RFC 6184).
///
/// Liberal in what it accepts, because Janus relays whatever the publisher sent: single NAL
/// units that carry their own Annex-B start code have it stripped, empty payloads and
/// zero-length STAP-A entries are skipped, an FU-A that lacks its end bit is closed at the next
/// NAL unit or the end of the frame, and reserved types 0, 30 and 31 are ignored.
public enum H264Depacketizer {
    /// Whether the payload begins a NAL unit: false only for an FU-A continuation fragment.
    static func beginsNAL(_ payload: ArraySlice<UInt8>) -> Bool {
        guard payload.count >= 2, H264NALUnitType(header: payload[payload.startIndex]) == .fuA else { return true }
        return payload[payload.startIndex + 1] & 0x80 != 0
    }

    /// Joins the payloads of one access unit, in sequence order.
    public static func depacketize(
        _ payloads: some Collection<ArraySlice<UInt8>>
    ) throws(DepacketizationError) -> DepacketizedFrame {
        var total = 0
        for payload in payloads { total += payload.count + 8 }
        var out: [UInt8] = []
        out.reserveCapacity(total)
        var keyframe = false
        var inFragment = false
        for (index, payload) in payloads.enumerated() {
            let s = payload.startIndex
            guard s < payload.endIndex else { continue }
            let header = payload[s]
            let type = H264NALUnitType(header: header)
            // Some senders put Annex-B data (start codes included) in a packet instead of one bare
            // NAL unit; copy each unit it holds with our own start code.
            if payload.count >= 4, header == 0, payload[s + 1] == 0,
                payload[s + 2] == 1 || (payload[s + 2] == 0 && payload[s + 3] == 1)
            {
                inFragment = false
                for r in H264AnnexB.nalUnitRanges(payload) where !r.isEmpty {
                    if H264NALUnitType(header: payload[r.lowerBound]) == .idrSlice { keyframe = true }
                    out.append(contentsOf: H264AnnexB.startCode)
                    out.append(contentsOf: payload[r])
                }
                continue
            }
            switch type {
            case _ where type.isSingleNALUnitPacket:
                inFragment = false
                if type == .idrSlice { keyframe = true }
                out.append(contentsOf: H264AnnexB.startCode)
                out.append(contentsOf: payload)
            case .stapA:
                inFragment = false
                var i = s + 1
                while i < payload.endIndex {
                    guard i + 2 <= payload.endIndex else {
                        throw DepacketizationError(codec: .h264, reason: .truncated, packetIndex: index, offset: i - s)
                    }
                    let size = Int(payload.be16(i))
                    i += 2
                    guard i + size <= payload.endIndex else {
                        throw DepacketizationError(codec: .h264, reason: .truncated, packetIndex: index, offset: i - s)
                    }
                    if size > 0 {
                        if H264NALUnitType(header: payload[i]) == .idrSlice { keyframe = true }
                        out.append(contentsOf: H264AnnexB.startCode)
                        out.append(contentsOf: payload[i..<(i + size)])
                    }
                    i += size
                }
            case .fuA:
                guard payload.count >= 2 else {
                    throw DepacketizationError(codec: .h264, reason: .truncated, packetIndex: index, offset: 1)
                }
                let fu = payload[s + 1]
                let isStart = fu & 0x80 != 0
                let isEnd = fu & 0x40 != 0
                if isStart {
                    let nalHeader = (header & 0xE0) | H264NALUnitType(header: fu).rawValue
                    if H264NALUnitType(header: nalHeader) == .idrSlice { keyframe = true }
                    out.append(contentsOf: H264AnnexB.startCode)
                    out.append(nalHeader)
                    inFragment = true
                } else if !inFragment {
                    throw DepacketizationError(
                        codec: .h264,
                        reason: .fragmentWithoutStart,
                        packetIndex: index,
                        offset: 1
                    )
                }
                out.append(contentsOf: payload[(s + 2)...])
                if isEnd { inFragment = false }
            case .stapB, .mtap16, .mtap24, .fuB:
                throw DepacketizationError(
                    codec: .h264,
                    reason: .unsupportedNALType(type.rawValue),
                    packetIndex: index,
                    offset: 0
                )
            default:
                continue  // 0, 30, 31: reserved, ignored (RFC 6184 §5.2)
            }
        }
        guard !out.isEmpty else { throw DepacketizationError(codec: .h264, reason: .empty, packetIndex: 0, offset: 0) }
        return DepacketizedFrame(data: out, isKeyframe: keyframe)
    }
}
