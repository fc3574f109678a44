// Big-endian helpers over byte collections. Callers check bounds first; these never look
// past `index + width - 1`.

extension Collection where Element == UInt8, Index == Int {
    @inline(__always)
    func be16(_ index: Int) -> UInt16 {
        UInt16(self[index]) << 8 | UInt16(self[index + 1])
    }

    @inline(__always)
    func be24(_ index: Int) -> UInt32 {
        UInt32(self[index]) << 16 | UInt32(self[index + 1]) << 8 | UInt32(self[index + 2])
    }

    @inline(__always)
    func be32(_ index: Int) -> UInt32 {
        UInt32(self[index]) << 24 | UInt32(self[index + 1]) << 16 | UInt32(self[index + 2]) << 8
            | UInt32(self[index + 3])
    }
}

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendBE16(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func appendBE24(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func appendBE32(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 24))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func setBE16(_ value: UInt16, at index: Int) {
        self[index] = UInt8(truncatingIfNeeded: value >> 8)
        self[index + 1] = UInt8(truncatingIfNeeded: value)
    }
}
