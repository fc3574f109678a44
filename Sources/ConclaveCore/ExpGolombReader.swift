/// Reads unsigned Exp-Golomb codes (`ue(v)`, H.264 9.1) MSB first: the coding of most fields in
/// H264 parameter sets and slice headers. Input is RBSP, emulation prevention already removed.
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
