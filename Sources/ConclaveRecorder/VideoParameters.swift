public import ConclaveCore

/// The picture size of a video keyframe, read from its bitstream header.
///
/// The recorder needs it for the container header and starts a new segment when it changes.
public typealias VideoDimensions = PictureSize

extension VideoDimensions {
    /// The size a keyframe announces, or nil for a non-keyframe or an unreadable header.
    public static func of(_ frame: EncodedFrame) -> VideoDimensions? {
        guard frame.isKeyframe else { return nil }
        switch frame.codec {
        case .vp8: return vp8(frame.data)
        case .h264: return h264(frame.data)
        case .opus: return nil
        }
    }

    /// RFC 6386 section 9.1: a keyframe has a 3-byte tag, the start code 9d 01 2a, then 14-bit
    /// width and height (the top two bits are the scaling mode).
    static func vp8(_ bytes: [UInt8]) -> VideoDimensions? {
        guard bytes.count >= 10, bytes[0] & 1 == 0, bytes[3] == 0x9D, bytes[4] == 0x01, bytes[5] == 0x2A else {
            return nil
        }
        let width = Int(bytes[6]) | Int(bytes[7] & 0x3F) << 8
        let height = Int(bytes[8]) | Int(bytes[9] & 0x3F) << 8
        guard width > 0, height > 0 else { return nil }
        return VideoDimensions(width: width, height: height)
    }

    /// ITU-T H.264 7.3.2.1.1: the picture size from the access unit's SPS, frame cropping applied.
    /// SPSs with scaling matrices are not parsed (nil); the caller falls back to a default size,
    /// which only affects the container header, not decoding.
    static func h264(_ bytes: [UInt8]) -> VideoDimensions? {
        guard let sps = H264AnnexB.units(in: bytes).first(where: { $0.type == .sps }) else { return nil }
        var reader = ExpGolombReader(bytes: H264EmulationPrevention.unescape(bytes[sps.payloadRange]))
        func bits(_ count: Int) -> UInt32? {
            var value: UInt32 = 0
            for _ in 0..<count {
                guard let bit = reader.readBit() else { return nil }
                value = value << 1 | bit
            }
            return value
        }
        func signed() -> Int64? {
            guard let code = reader.readUnsigned() else { return nil }
            return code & 1 == 1 ? Int64(code + 1) / 2 : -Int64(code / 2)
        }
        guard let profile = bits(8), bits(16) != nil, reader.readUnsigned() != nil else { return nil }
        var chromaFormat: UInt32 = 1
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            guard let format = reader.readUnsigned() else { return nil }
            chromaFormat = format
            if format == 3 { guard bits(1) != nil else { return nil } }
            guard reader.readUnsigned() != nil, reader.readUnsigned() != nil, bits(1) != nil,
                let scaling = bits(1), scaling == 0
            else { return nil }
        }
        guard reader.readUnsigned() != nil, let pocType = reader.readUnsigned() else { return nil }
        if pocType == 0 {
            guard reader.readUnsigned() != nil else { return nil }
        } else if pocType == 1 {
            guard bits(1) != nil, signed() != nil, signed() != nil, let cycle = reader.readUnsigned(), cycle < 256
            else {
                return nil
            }
            for _ in 0..<cycle { guard signed() != nil else { return nil } }
        }
        guard reader.readUnsigned() != nil, bits(1) != nil, let widthMBs = reader.readUnsigned(),
            let heightUnits = reader.readUnsigned(), let frameMBsOnly = bits(1)
        else { return nil }
        if frameMBsOnly == 0 { guard bits(1) != nil else { return nil } }
        guard bits(1) != nil, let cropping = bits(1) else { return nil }
        var crop: (left: UInt32, right: UInt32, top: UInt32, bottom: UInt32) = (0, 0, 0, 0)
        if cropping == 1 {
            guard let left = reader.readUnsigned(), let right = reader.readUnsigned(), let top = reader.readUnsigned(),
                let bottom = reader.readUnsigned()
            else { return nil }
            crop = (left, right, top, bottom)
        }
        let fieldFactor = Int(2 - frameMBsOnly)
        let cropX = chromaFormat == 0 || chromaFormat == 3 ? 1 : 2
        let cropY = (chromaFormat == 1 ? 2 : 1) * fieldFactor
        let width = (Int(widthMBs) + 1) * 16 - (Int(crop.left) + Int(crop.right)) * cropX
        let height = fieldFactor * (Int(heightUnits) + 1) * 16 - (Int(crop.top) + Int(crop.bottom)) * cropY
        guard width > 0, height > 0, width <= 16_384, height <= 16_384 else { return nil }
        return VideoDimensions(width: width, height: height)
    }
}
