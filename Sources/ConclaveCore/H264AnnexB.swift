/// H264 Annex-B bitstream helpers shared by the encoder, the muxer, the E2EE framing and tests.
///
/// Everything here reads untrusted bytes with bounds checks only; malformed input yields fewer or
/// shorter units, or nil, never a trap.
public enum H264AnnexB {
    /// NAL unit types Conclave cares about.
    public enum NALType: UInt8, Sendable {
        case nonIDRSlice = 1
        case idrSlice = 5
        case sei = 6
        case sps = 7
        case pps = 8
        case accessUnitDelimiter = 9
    }

    /// One NAL unit found in an Annex-B buffer: where its header byte starts and where it ends.
    public struct NALUnit: Sendable, Hashable {
        /// Offset of the start code.
        public var startCodeOffset: Int
        /// Length of the start code: 3 or 4.
        public var startCodeLength: Int
        /// The NAL unit's bytes, header byte first, without the start code.
        public var payload: ArraySlice<UInt8>

        /// `nal_unit_type`, the low five bits of the header byte.
        public var type: UInt8 { payload.first.map { $0 & 0x1F } ?? 0 }
    }

    /// The 4-byte start code Conclave writes before every NAL unit it assembles.
    public static let startCode: [UInt8] = [0, 0, 0, 1]

    /// Where a start code stands in a buffer: its offset and its length (3 or 4).
    public struct StartCode: Sendable, Hashable {
        public var offset: Int
        public var length: Int

        public init(offset: Int, length: Int) {
            self.offset = offset
            self.length = length
        }
    }

    /// Every `00 00 01` / `00 00 00 01` start code in `data`, in order.
    ///
    /// This is the one start-code scan of the RTP packetizer, the muxer and the encoder. (The
    /// `ecall` frame format keeps a scan of its own, because it must cut frames exactly as ECall
    /// iOS does, and the H264 bitstream is handed over as is.) When the third byte of a window is
    /// above 1, no start code can begin at any of the window's three positions, so the scan
    /// advances by three: on slice data, which is mostly non-zero, it reads about a third of the
    /// bytes.
    public static func startCodes<C: RandomAccessCollection<UInt8>>(in data: C) -> [StartCode]
    where C.Index == Int {
        var codes: [StartCode] = []
        let start = data.startIndex
        let end = data.endIndex
        var index = start
        while index + 2 < end {
            if data[index + 2] > 1 {
                index += 3
            } else if data[index] == 0, data[index + 1] == 0, data[index + 2] == 1 {
                if index > start, data[index - 1] == 0 {
                    codes.append(StartCode(offset: index - 1, length: 4))
                } else {
                    codes.append(StartCode(offset: index, length: 3))
                }
                index += 3
            } else {
                index += 1
            }
        }
        return codes
    }

    /// Splits an Annex-B buffer at its `00 00 01` / `00 00 00 01` start codes. Bytes before the
    /// first start code and empty units are left out; a buffer without a start code has no units.
    public static func nalUnits(in bytes: [UInt8]) -> [NALUnit] {
        let codes = startCodes(in: bytes)
        var units: [NALUnit] = []
        units.reserveCapacity(codes.count)
        for (position, code) in codes.enumerated() {
            let begin = code.offset + code.length
            let end = position + 1 < codes.count ? codes[position + 1].offset : bytes.count
            guard begin < end else { continue }
            units.append(
                NALUnit(startCodeOffset: code.offset, startCodeLength: code.length, payload: bytes[begin..<end])
            )
        }
        return units
    }

    /// The ranges of the NAL units in `data`, without their start codes. Bytes before the first
    /// start code are ignored; a buffer without any start code is taken as one bare NAL unit (as
    /// an RTP single-NAL payload is).
    public static func nalUnitRanges<C: RandomAccessCollection<UInt8>>(_ data: C) -> [Range<Int>]
    where C.Index == Int {
        let codes = startCodes(in: data)
        guard !codes.isEmpty else { return data.isEmpty ? [] : [data.startIndex..<data.endIndex] }
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(codes.count)
        for (position, code) in codes.enumerated() {
            let begin = code.offset + code.length
            let end = position + 1 < codes.count ? codes[position + 1].offset : data.endIndex
            if begin < end { ranges.append(begin..<end) }
        }
        return ranges
    }

    /// Whether an Annex-B access unit contains an IDR slice.
    public static func containsIDR<C: RandomAccessCollection<UInt8>>(_ data: C) -> Bool where C.Index == Int {
        nalUnitRanges(data).contains { data[$0.lowerBound] & 0x1F == NALType.idrSlice.rawValue }
    }

    /// Rewrites the buffer so every NAL unit is preceded by a 4-byte start code.
    public static func withFourByteStartCodes(_ bytes: [UInt8]) -> [UInt8] {
        let units = nalUnits(in: bytes)
        guard units.contains(where: { $0.startCodeLength != 4 }) else { return bytes }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + units.count)
        for unit in units {
            output += startCode
            output += unit.payload
        }
        return output
    }

    /// The first SPS and PPS of an access unit, each with a 4-byte start code, or nil if either is
    /// missing. Muxers need these as the stream's extradata.
    public static func parameterSets(in bytes: [UInt8]) -> [UInt8]? {
        let units = nalUnits(in: bytes)
        guard let sps = units.first(where: { $0.type == NALType.sps.rawValue }),
            let pps = units.first(where: { $0.type == NALType.pps.rawValue })
        else { return nil }
        return startCode + Array(sps.payload) + startCode + Array(pps.payload)
    }

    /// The first fields of a slice header (ITU-T H.264 7.3.3), read from a slice NAL unit.
    public struct SliceHeader: Sendable, Hashable {
        /// `first_mb_in_slice`: 0 for the first (and, for us, only) slice of a picture.
        public var firstMacroblock: UInt32
        /// `slice_type`: 0 P, 1 B, 2 I, 3 SP, 4 SI; 5...9 mean the same plus "all slices alike".
        public var sliceType: UInt32
        /// `pic_parameter_set_id`.
        public var pictureParameterSetID: UInt32
        /// How many bits these three fields took, counted from the byte after the NAL header.
        public var bitLength: Int
    }

    /// Parses the start of a slice header from a type 1 or 5 NAL unit (header byte included).
    /// Returns nil for other types or truncated input. Emulation-prevention bytes cannot occur in
    /// the first bytes these fields use, so they are not removed.
    public static func sliceHeader(of unit: NALUnit) -> SliceHeader? {
        guard unit.type == NALType.nonIDRSlice.rawValue || unit.type == NALType.idrSlice.rawValue else { return nil }
        var reader = ExpGolombReader(bytes: Array(unit.payload.dropFirst()))
        guard let firstMacroblock = reader.readUnsigned(), let sliceType = reader.readUnsigned(),
            let ppsID = reader.readUnsigned()
        else { return nil }
        return SliceHeader(
            firstMacroblock: firstMacroblock,
            sliceType: sliceType,
            pictureParameterSetID: ppsID,
            bitLength: reader.bitPosition
        )
    }
}

/// Reads unsigned Exp-Golomb codes (`ue(v)`, H.264 9.1) MSB first.
public struct ExpGolombReader: Sendable {
    private let bytes: [UInt8]
    /// Bits consumed so far.
    public private(set) var bitPosition = 0

    /// Starts at the first bit of `bytes`.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Reads one bit, or nil past the end.
    public mutating func readBit() -> UInt32? {
        let byteIndex = bitPosition >> 3
        guard byteIndex < bytes.count else { return nil }
        let bit = (bytes[byteIndex] >> (7 - UInt8(bitPosition & 7))) & 1
        bitPosition += 1
        return UInt32(bit)
    }

    /// Reads one `ue(v)` value, or nil when truncated or longer than 31 leading zeros.
    public mutating func readUnsigned() -> UInt32? {
        var leadingZeros = 0
        while true {
            guard let bit = readBit() else { return nil }
            if bit == 1 { break }
            leadingZeros += 1
            guard leadingZeros < 32 else { return nil }
        }
        var suffix: UInt64 = 0
        for _ in 0..<leadingZeros {
            guard let bit = readBit() else { return nil }
            suffix = suffix << 1 | UInt64(bit)
        }
        let value = (UInt64(1) << UInt64(leadingZeros)) - 1 + suffix
        return value <= UInt64(UInt32.max) ? UInt32(value) : nil
    }
}
