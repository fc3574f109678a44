/// H264 in ISO form ("AVCC"): each NAL unit preceded by its length in 1, 2 or 4 big-endian bytes,
/// with the SPS and PPS kept apart in an `AVCDecoderConfigurationRecord` (ISO/IEC 14496-15 5.3.3),
/// as MP4 and Matroska store it. Conclave carries Annex-B, so the demuxer converts with this.
public enum H264AVCC {
    /// Why length-prefixed bytes could not be split into NAL units; offsets count from the start of
    /// the buffer.
    public enum ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// Fewer than `lengthSize` bytes were left for the next length prefix.
        case truncatedLengthPrefix(offset: Int, lengthSize: Int, available: Int)
        /// The prefix at `offset` announces more bytes than follow it.
        case unitPastEnd(offset: Int, length: Int, available: Int)
        /// The prefix at `offset` announces a unit of zero bytes, which has no header to read.
        case emptyUnit(offset: Int)
        /// A length size other than 1, 2 or 4.
        case unsupportedLengthSize(Int)

        public var description: String {
            switch self {
            case .truncatedLengthPrefix(let offset, let lengthSize, let available):
                "\(available) byte(s) at offset \(offset) cannot hold a \(lengthSize)-byte NAL length"
            case .unitPastEnd(let offset, let length, let available):
                "NAL length \(length) at offset \(offset) runs past the end (\(available) byte(s) follow)"
            case .emptyUnit(let offset): "NAL length 0 at offset \(offset)"
            case .unsupportedLengthSize(let size): "NAL length size \(size) is not 1, 2 or 4"
            }
        }
    }

    /// The NAL units of a length-prefixed buffer, in order; throws at the first prefix that is cut
    /// short, is zero or runs past the end, so a damaged sample is refused whole, never half read.
    public static func units(in bytes: [UInt8], lengthSize: Int = 4) throws(ParseError) -> [H264NALUnit] {
        guard lengthSize == 1 || lengthSize == 2 || lengthSize == 4 else {
            throw .unsupportedLengthSize(lengthSize)
        }
        var units: [H264NALUnit] = []
        var offset = 0
        while offset < bytes.count {
            guard lengthSize <= bytes.count - offset else {
                throw .truncatedLengthPrefix(offset: offset, lengthSize: lengthSize, available: bytes.count - offset)
            }
            var length = 0
            for byte in bytes[offset..<(offset + lengthSize)] { length = length << 8 | Int(byte) }
            let header = offset + lengthSize
            guard length > 0 else { throw .emptyUnit(offset: offset) }
            guard length <= bytes.count - header else {
                throw .unitPastEnd(offset: offset, length: length, available: bytes.count - header)
            }
            units.append(
                H264NALUnit(
                    framingStart: offset,
                    headerIndex: header,
                    end: header + length,
                    type: H264NALUnitType(header: bytes[header])
                )
            )
            offset = header + length
        }
        return units
    }

    /// What a demuxer needs from an `AVCDecoderConfigurationRecord`: the length prefix size of the
    /// samples and the parameter sets a decoder needs before the first keyframe.
    public struct DecoderConfiguration: Sendable, Hashable {
        /// Bytes in each NAL length prefix of a sample: 1, 2 or 4.
        public let lengthSize: Int
        /// Every SPS and then every PPS of the record, each after a 4-byte start code.
        public let parameterSets: [UInt8]

        /// Parses a record; nil when `extradata` is not one (e.g. it is already Annex-B, which
        /// starts with a zero where a record has its version 1) or is cut short.
        public init?(extradata: [UInt8]) {
            guard extradata.count >= 7, extradata[0] == 1 else { return nil }
            lengthSize = Int(extradata[4] & 0x03) + 1
            guard lengthSize != 3 else { return nil }
            var sets: [UInt8] = []
            var index = 5
            for kind in 0..<2 {
                guard index < extradata.count else { return nil }
                // numOfSequenceParameterSets has three reserved bits above it; the PPS count has none.
                let count = kind == 0 ? Int(extradata[index] & 0x1F) : Int(extradata[index])
                index += 1
                for _ in 0..<count {
                    guard index + 2 <= extradata.count else { return nil }
                    let length = Int(extradata[index]) << 8 | Int(extradata[index + 1])
                    index += 2
                    guard index + length <= extradata.count else { return nil }
                    sets += H264AnnexB.startCode + extradata[index..<(index + length)]
                    index += length
                }
            }
            parameterSets = sets
        }

        /// Rewrites one sample as Annex-B with 4-byte start codes, putting the record's parameter
        /// sets in front of a keyframe that lacks an SPS of its own (MP4 keeps them only in the
        /// record, but a receiver joining mid-stream needs them with every keyframe).
        public func annexB(_ sample: [UInt8], keyframe: Bool) throws(ParseError) -> [UInt8] {
            let units = try H264AVCC.units(in: sample, lengthSize: lengthSize)
            let hasParameterSets = units.contains { $0.type == .sps }
            var output: [UInt8] = []
            output.reserveCapacity(sample.count + parameterSets.count + 16)
            if keyframe && !hasParameterSets { output += parameterSets }
            for unit in units {
                output += H264AnnexB.startCode
                output += sample[unit.range]
            }
            return output
        }
    }
}
