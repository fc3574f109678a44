import ConclaveCore

/// The VP8 payload descriptor at the start of every VP8 RTP payload (RFC 7741 §4.2).
public struct VP8PayloadDescriptor: Sendable, Hashable {
    /// N: the frame is not used as a reference.
    public var nonReference: Bool
    /// S: the payload starts a VP8 partition.
    public var startOfPartition: Bool
    /// PID: the partition index (0 is the first partition, which starts the frame).
    public var partitionIndex: UInt8
    /// The picture id (7 or 15 bits), if present.
    public var pictureID: UInt16?
    /// Whether `pictureID` uses the 15-bit form.
    public var pictureIDIs15Bit: Bool
    /// TL0PICIDX, if present.
    public var tl0PictureIndex: UInt8?
    /// TID, if present.
    public var temporalLayer: UInt8?
    /// Y (layer sync), meaningful when `temporalLayer` is present.
    public var layerSync: Bool
    /// KEYIDX, if present.
    public var keyIndex: UInt8?
    /// The descriptor length in bytes; the VP8 data starts after it.
    public var length: Int

    /// Creates a descriptor to write.
    public init(
        nonReference: Bool = false,
        startOfPartition: Bool,
        partitionIndex: UInt8 = 0,
        pictureID: UInt16? = nil,
        pictureIDIs15Bit: Bool = true
    ) {
        self.nonReference = nonReference
        self.startOfPartition = startOfPartition
        self.partitionIndex = partitionIndex
        self.pictureID = pictureID
        self.pictureIDIs15Bit = pictureIDIs15Bit
        self.tl0PictureIndex = nil
        self.temporalLayer = nil
        self.layerSync = false
        self.keyIndex = nil
        self.length = 0
        self.length = serialized.count
    }

    /// Parses the descriptor at the start of `payload`; nil if it is truncated.
    public init?(parsing payload: ArraySlice<UInt8>) {
        var i = payload.startIndex
        let end = payload.endIndex
        guard i < end else { return nil }
        let b0 = payload[i]
        i += 1
        nonReference = b0 & 0x20 != 0
        startOfPartition = b0 & 0x10 != 0
        partitionIndex = b0 & 0x07
        pictureID = nil
        pictureIDIs15Bit = false
        tl0PictureIndex = nil
        temporalLayer = nil
        layerSync = false
        keyIndex = nil
        if b0 & 0x80 != 0 {
            guard i < end else { return nil }
            let x = payload[i]
            i += 1
            if x & 0x80 != 0 {  // I
                guard i < end else { return nil }
                let p0 = payload[i]
                if p0 & 0x80 != 0 {
                    guard i + 1 < end else { return nil }
                    pictureID = UInt16(p0 & 0x7F) << 8 | UInt16(payload[i + 1])
                    pictureIDIs15Bit = true
                    i += 2
                } else {
                    pictureID = UInt16(p0)
                    i += 1
                }
            }
            if x & 0x40 != 0 {  // L
                guard i < end else { return nil }
                tl0PictureIndex = payload[i]
                i += 1
            }
            if x & 0x30 != 0 {  // T or K
                guard i < end else { return nil }
                let t = payload[i]
                i += 1
                if x & 0x20 != 0 {
                    temporalLayer = t >> 6
                    layerSync = t & 0x20 != 0
                }
                if x & 0x10 != 0 { keyIndex = t & 0x1F }
            }
        }
        length = i - payload.startIndex
    }

    /// The descriptor bytes.
    public var serialized: [UInt8] {
        var out: [UInt8] = []
        let hasExtension = pictureID != nil || tl0PictureIndex != nil || temporalLayer != nil || keyIndex != nil
        var b0: UInt8 = (hasExtension ? 0x80 : 0) | (partitionIndex & 0x07)
        if nonReference { b0 |= 0x20 }
        if startOfPartition { b0 |= 0x10 }
        out.append(b0)
        guard hasExtension else { return out }
        var x: UInt8 = 0
        if pictureID != nil { x |= 0x80 }
        if tl0PictureIndex != nil { x |= 0x40 }
        if temporalLayer != nil { x |= 0x20 }
        if keyIndex != nil { x |= 0x10 }
        out.append(x)
        if let pictureID {
            if pictureIDIs15Bit {
                out.append(0x80 | UInt8(truncatingIfNeeded: (pictureID >> 8) & 0x7F))
                out.append(UInt8(truncatingIfNeeded: pictureID))
            } else {
                out.append(UInt8(truncatingIfNeeded: pictureID) & 0x7F)
            }
        }
        if let tl0PictureIndex { out.append(tl0PictureIndex) }
        if temporalLayer != nil || keyIndex != nil {
            out.append((temporalLayer ?? 0) << 6 | (layerSync ? 0x20 : 0) | ((keyIndex ?? 0) & 0x1F))
        }
        return out
    }
}

/// VP8 frame facts read from the uncompressed data chunk (RFC 6386 §9.1).
public enum VP8Frame {
    /// Whether `frame` is a keyframe: the P bit of the frame tag is 0 and the start code
    /// `9d 01 2a` follows the 3-byte tag.
    public static func isKeyframe(_ frame: some Collection<UInt8>) -> Bool {
        var it = frame.makeIterator()
        guard let tag = it.next(), tag & 0x01 == 0 else { return false }
        _ = it.next()
        _ = it.next()
        return it.next() == 0x9D && it.next() == 0x01 && it.next() == 0x2A
    }
}

/// Splits VP8 frames into RTP payloads with a 15-bit picture id (RFC 7741).
public struct VP8Packetizer: Sendable {
    /// The picture id of the next frame; incremented per frame, wrapping at 2^15.
    public private(set) var pictureID: UInt16
    /// The largest payload to produce, descriptor included.
    public var maxPayloadSize: Int

    /// Creates a packetizer. `maxPayloadSize` defaults to what fits a 1200-byte datagram after the
    /// RTP header (12), a header-extension budget (24) and the SRTP tag (16).
    public init(initialPictureID: UInt16 = 0, maxPayloadSize: Int = RTPPacketization.defaultMaxPayloadSize) {
        self.pictureID = initialPictureID & 0x7FFF
        self.maxPayloadSize = max(maxPayloadSize, 8)
    }

    /// The payloads for one frame, in order; the caller sets the marker bit on the last one.
    public mutating func packetize(_ frame: some Collection<UInt8>) -> [[UInt8]] {
        guard !frame.isEmpty else { return [] }
        let descriptorLength = 4
        let chunkBudget = maxPayloadSize - descriptorLength
        let sizes = RTPPacketization.balancedSizes(total: frame.count, maxChunk: chunkBudget)
        var result: [[UInt8]] = []
        result.reserveCapacity(sizes.count)
        var index = frame.startIndex
        for (n, size) in sizes.enumerated() {
            var payload: [UInt8] = []
            payload.reserveCapacity(descriptorLength + size)
            payload.append(0x80 | (n == 0 ? 0x10 : 0))
            payload.append(0x80)
            payload.append(0x80 | UInt8(truncatingIfNeeded: pictureID >> 8))
            payload.append(UInt8(truncatingIfNeeded: pictureID))
            let next = frame.index(index, offsetBy: size)
            payload.append(contentsOf: frame[index..<next])
            index = next
            result.append(payload)
        }
        pictureID = (pictureID + 1) & 0x7FFF
        return result
    }
}

/// Rebuilds VP8 frames from RTP payloads (RFC 7741).
public enum VP8Depacketizer {
    /// Joins the payloads of one frame, in sequence order. The first must start partition 0.
    public static func depacketize(
        _ payloads: some Collection<ArraySlice<UInt8>>
    ) throws(DepacketizationError) -> DepacketizedFrame {
        var total = 0
        for payload in payloads { total += payload.count }
        var data: [UInt8] = []
        data.reserveCapacity(total)
        for (index, payload) in payloads.enumerated() {
            guard let descriptor = VP8PayloadDescriptor(parsing: payload) else {
                throw DepacketizationError(codec: .vp8, reason: .truncated, packetIndex: index, offset: payload.count)
            }
            if index == 0, !(descriptor.startOfPartition && descriptor.partitionIndex == 0) {
                throw DepacketizationError(codec: .vp8, reason: .missingFrameStart, packetIndex: 0, offset: 0)
            }
            data.append(contentsOf: payload.dropFirst(descriptor.length))
        }
        guard !data.isEmpty else { throw DepacketizationError(codec: .vp8, reason: .empty, packetIndex: 0, offset: 0) }
        return DepacketizedFrame(data: data, isKeyframe: VP8Frame.isKeyframe(data))
    }
}

/// Shared packetization arithmetic.
public enum RTPPacketization {
    /// 1200-byte datagrams minus RTP header (12), extension budget (24) and SRTP tag (16).
    public static let defaultMaxPayloadSize = 1200 - 12 - 24 - 16

    /// Splits `total` bytes into the fewest chunks of at most `maxChunk`, with sizes differing by at
    /// most one, so no packet of a frame is tiny (as RFC 7741 and WebRTC recommend).
    public static func balancedSizes(total: Int, maxChunk: Int) -> [Int] {
        guard total > 0 else { return [] }
        let chunk = max(maxChunk, 1)
        let count = (total + chunk - 1) / chunk
        let base = total / count
        let extra = total % count
        return (0..<count).map { $0 < extra ? base + 1 : base }
    }
}
