/// The `nal_unit_type` of an H264 NAL unit: the low five bits of its header byte (ITU-T H.264
/// Table 7-1), with RFC 6184's RTP packet types (24...29) in the same number space.
///
/// A struct with named values instead of a closed enum: the field has 32 values and bytes from the
/// network may carry any of them (reserved and SVC/MVC types included), so every header byte must
/// map to a value without a failure path, and a switch must still be able to name the ones Conclave
/// acts on. Wraps one byte, so it costs nothing over the bare number on the frame paths.
public struct H264NALUnitType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The type number, 0...31.
    public let rawValue: UInt8

    /// The type with number `rawValue`; bits above the low five are dropped, as in a header byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x1F }

    /// The type a NAL header byte (`forbidden_zero_bit`, `nal_ref_idc`, `nal_unit_type`) announces.
    @inline(__always)
    public init(header: UInt8) { rawValue = header & 0x1F }

    /// Coded slice of a non-IDR picture.
    public static let nonIDRSlice = Self(rawValue: 1)
    /// Coded slice of an IDR picture: a decoder can start here.
    public static let idrSlice = Self(rawValue: 5)
    /// Supplemental enhancement information.
    public static let sei = Self(rawValue: 6)
    /// Sequence parameter set.
    public static let sps = Self(rawValue: 7)
    /// Picture parameter set.
    public static let pps = Self(rawValue: 8)
    /// Access unit delimiter.
    public static let accessUnitDelimiter = Self(rawValue: 9)
    /// End of sequence.
    public static let endOfSequence = Self(rawValue: 10)
    /// End of stream.
    public static let endOfStream = Self(rawValue: 11)
    /// Filler data.
    public static let fillerData = Self(rawValue: 12)
    /// Single-time aggregation packet (RFC 6184 section 5.7.1).
    public static let stapA = Self(rawValue: 24)
    /// Single-time aggregation packet with a decoding order number.
    public static let stapB = Self(rawValue: 25)
    /// Multi-time aggregation packet, 16-bit timestamp offsets.
    public static let mtap16 = Self(rawValue: 26)
    /// Multi-time aggregation packet, 24-bit timestamp offsets.
    public static let mtap24 = Self(rawValue: 27)
    /// Fragmentation unit without a decoding order number (RFC 6184 section 5.8).
    public static let fuA = Self(rawValue: 28)
    /// Fragmentation unit with a decoding order number.
    public static let fuB = Self(rawValue: 29)

    /// Whether units of this type carry a coded picture's slice data (types 1 and 5): the units the
    /// `ecall` format seals and the ones whose IDR form makes a keyframe.
    @inline(__always)
    public var isSlice: Bool { self == .nonIDRSlice || self == .idrSlice }

    /// The number, so logs and errors read as the specification's tables do.
    public var description: String { String(rawValue) }
}

/// Where one NAL unit lies in a buffer of Annex-B or length-prefixed (AVCC) H264.
///
/// Offsets rather than a slice of the bytes, so a frame's units cost one small array and the
/// callers that rewrite frames (E2EE sealing, start-code normalising) can copy between offsets.
public struct H264NALUnit: Sendable, Hashable {
    /// Offset of the first byte of the unit's framing: its start code or its length prefix.
    public var framingStart: Int
    /// Offset of the NAL header byte.
    public var headerIndex: Int
    /// One past the unit's last byte.
    public var end: Int
    /// The type the header byte announces.
    public var type: H264NALUnitType

    /// Creates a unit record.
    public init(framingStart: Int, headerIndex: Int, end: Int, type: H264NALUnitType) {
        self.framingStart = framingStart
        self.headerIndex = headerIndex
        self.end = end
        self.type = type
    }

    /// Bytes of framing before the header: 3 or 4 for a start code, the prefix size for AVCC.
    public var framingLength: Int { headerIndex - framingStart }

    /// The unit's bytes, header byte first, without its framing.
    public var range: Range<Int> { headerIndex..<end }

    /// The unit's bytes after the header byte (the RBSP, still with emulation prevention).
    public var payloadRange: Range<Int> { (headerIndex + 1)..<end }
}
