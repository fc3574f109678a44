#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One NAL unit located inside an encoded H264 frame.
public struct NALUnitRange: Sendable, Hashable {
    /// Offset of the first byte of the framing before the unit (start code or AVCC length).
    public var framingStart: Int
    /// Offset of the NAL header byte.
    public var headerIndex: Int
    /// One past the last byte of the unit.
    public var end: Int
    /// `nal_unit_type`, the low five bits of the header byte.
    public var type: UInt8

    /// Slices of a coded picture: non-IDR (1) and IDR (5), the only types ECall encrypts.
    public var isECallSlice: Bool { type == 1 || type == 5 }
}

/// Locates NAL units in an H264 frame exactly as ECall iOS's `H264NALUParser` does.
///
/// Annex-B when the buffer starts with `00 00 00 01` or `00 00 01`; otherwise AVCC (4-byte big-endian
/// lengths), stopping at the first length that runs past the end. In Annex-B the scan resumes one
/// byte after each NAL header, prefers a 4-byte start code over a 3-byte one, and ends a unit at the
/// first byte of the next start code. Matching this matters: an `ecall` receiver must cut the frame
/// where the iOS sender cut it, or the GCM region shifts and authentication fails.
public enum H264FrameParser {
    /// Whether `data` begins with an Annex-B start code.
    public static func isAnnexB(_ data: [UInt8]) -> Bool {
        data.count >= 3 && data[0] == 0 && data[1] == 0
            && (data[2] == 1 || (data.count >= 4 && data[2] == 0 && data[3] == 1))
    }

    /// All NAL units of `data`, in order; empty for bytes that are neither Annex-B nor AVCC.
    public static func nalUnits(in data: [UInt8]) -> [NALUnitRange] {
        isAnnexB(data) ? annexBUnits(in: data) : avccUnits(in: data)
    }

    /// Annex-B units. Finds each start code from its `00 00` pair with `ZeroPairs`, which finds the
    /// same start codes as a byte-by-byte scan but runs at memory speed on large frames.
    public static func annexBUnits(in data: [UInt8]) -> [NALUnitRange] {
        annexBUnits(in: data) { _ in }
    }

    /// `annexBUnits(in:)`, also handing `otherPair` the offset of every `00 00` pair inside a unit
    /// that does not begin a start code and has a byte after it, so a caller that looks for escapes
    /// needs no second pass over the frame.
    @inline(__always)
    static func annexBUnits(in data: [UInt8], otherPair: (Int) -> Void) -> [NALUnitRange] {
        var units: [NALUnitRange] = []
        data.withUnsafeBufferPointer { buffer in
            let count = buffer.count
            var lowerBound = 0  // the first byte a start code may begin at
            var open: (framingStart: Int, header: Int)?
            var searchFrom = 0
            // A start code is 00 00 01 beginning no earlier than `lowerBound`.
            while let pair = ZeroPairs.first(in: UnsafeRawBufferPointer(buffer), from: searchFrom, to: count) {
                let one = pair + 2
                guard one < count else { break }
                guard buffer[one] == 1 else {
                    otherPair(pair)
                    searchFrom = pair + 1
                    continue
                }
                var start = pair
                if start - 1 >= lowerBound, buffer[start - 1] == 0 { start -= 1 }
                if let current = open {
                    units.append(unit(current.framingStart, current.header, start, buffer))
                }
                let header = one + 1
                guard header < count else {
                    open = nil
                    break
                }
                open = (start, header)
                lowerBound = header + 1
                searchFrom = lowerBound
            }
            if let current = open {
                units.append(unit(current.framingStart, current.header, count, buffer))
            }
        }
        return units
    }

    private static func unit(_ framing: Int, _ header: Int, _ end: Int, _ buffer: UnsafeBufferPointer<UInt8>)
        -> NALUnitRange
    {
        NALUnitRange(framingStart: framing, headerIndex: header, end: end, type: buffer[header] & 0x1F)
    }

    /// AVCC units: 4-byte big-endian length, then the unit.
    public static func avccUnits(in data: [UInt8]) -> [NALUnitRange] {
        var units: [NALUnitRange] = []
        var offset = 0
        while offset + 4 <= data.count {
            let length =
                Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8
                | Int(data[offset + 3])
            let header = offset + 4
            guard length > 0, length <= data.count - header else { break }
            units.append(
                NALUnitRange(framingStart: offset, headerIndex: header, end: header + length, type: data[header] & 0x1F)
            )
            offset = header + length
        }
        return units
    }
}

/// H264 emulation prevention: keeps encrypted bytes from looking like a start code on the wire.
///
/// After any `00 00`, a byte of 0–3 gets a `03` inserted before it. The decrypting side removes every
/// `03` that follows `00 00`.
enum EmulationPrevention {
    /// Appends `input` with a `03` inserted wherever `00 00` is followed by a byte of 0–3.
    ///
    /// Zero bytes are rare in ciphertext, so the scan jumps from zero to zero with `memchr` and copies
    /// the runs between them in bulk.
    static func escape(_ input: [UInt8], into output: inout [UInt8]) {
        escape(input[...], into: &output)
    }

    /// Whether `escape` would insert anything into `input`: some `00 00` followed by 0–3.
    static func needsEscape(_ input: UnsafeRawBufferPointer) -> Bool {
        firstZeroPair(in: input) { $0 <= 3 }
    }

    /// Whether some `00 00` in `input` is followed by a byte that satisfies `next`.
    private static func firstZeroPair(in input: UnsafeRawBufferPointer, followedBy next: (UInt8) -> Bool) -> Bool {
        var position = 0
        // Pairs whose following byte is inside `input`.
        while let pair = ZeroPairs.first(in: input, from: position, to: input.count - 1) {
            if next(input[pair + 2]) { return true }
            position = pair + 1
        }
        return false
    }

    /// `escape` for part of an array.
    static func escape(_ input: ArraySlice<UInt8>, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + input.count + input.count / 64 + 4)
        input.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            let count = buffer.count
            var runStart = 0
            var position = 0
            while position < count, let hit = memchr(base + position, 0, count - position) {
                let zero = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                if zero + 2 < count && buffer[zero + 1] == 0 && buffer[zero + 2] <= 3 {
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<(zero + 2)]))
                    output.append(3)
                    runStart = zero + 2
                    position = zero + 2
                } else {
                    position = zero + 1
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<count]))
        }
    }

    /// Removes every `03` that follows `00 00`.
    static func unescape(_ input: ArraySlice<UInt8>) -> [UInt8] {
        input.withUnsafeBytes { unescape($0) }
    }

    /// Removes every `03` that follows `00 00`.
    static func unescape(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(input.count)
        let buffer = input.assumingMemoryBound(to: UInt8.self)
        guard let base = buffer.baseAddress else { return output }
        let count = buffer.count
        var runStart = 0
        var position = 0
        while position < count, let hit = memchr(base + position, 0, count - position) {
            let zero = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            if zero + 2 < count && buffer[zero + 1] == 0 && buffer[zero + 2] == 3 {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<(zero + 2)]))
                runStart = zero + 3
                position = zero + 3
            } else {
                position = zero + 1
            }
        }
        if runStart < count {
            output.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<count]))
        }
        return output
    }
}

/// Finds `00 00` byte pairs, the start of every start code, escape and emulated start code.
///
/// In compressed or encrypted bytes a zero byte comes about every 256 bytes but a zero pair only
/// about every 64 kB, so this tests 64 bytes at a time for a pair with SIMD compares and only looks
/// byte by byte in the rare block that has one. That is cheaper than one `memchr` call per `01` or
/// `00` byte, which cost a fifth of the H264 frame crypto time in profiles.
enum ZeroPairs {
    /// The first `index` with `from <= index`, `index + 1 < to` and `bytes[index] == 0 ==
    /// bytes[index + 1]`; nil if there is none. `to` is clamped to `bytes.count`.
    static func first(in bytes: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        let end = min(to, bytes.count)
        guard let base = bytes.baseAddress, from >= 0 else { return nil }
        var index = from
        // Each step reads bytes index..<index + 65 (the pair test looks one byte further).
        while index &+ 65 <= end {
            // A pair at i means bytes i and i + 1 are both zero: OR each vector with the one a byte
            // later. No test for a lone zero first: a block has one about every fourth time, a
            // branch the processor cannot predict.
            var pairs = pairMask(base + index)
            pairs .|= pairMask(base + (index &+ 16))
            pairs .|= pairMask(base + (index &+ 32))
            pairs .|= pairMask(base + (index &+ 48))
            if hasLane(pairs) { break }
            index &+= 64
        }
        while index + 1 < end {
            if bytes[index] == 0 && bytes[index + 1] == 0 { return index }
            index += 1
        }
        return nil
    }

    /// Lane i is set when bytes i and i + 1 after `pointer` are both zero (reads 17 bytes).
    @inline(__always)
    private static func pairMask(_ pointer: UnsafeRawPointer) -> SIMDMask<SIMD16<Int8>> {
        let here = pointer.loadUnaligned(as: SIMD16<UInt8>.self)
        let next = pointer.loadUnaligned(fromByteOffset: 1, as: SIMD16<UInt8>.self)
        return (here | next) .== SIMD16<UInt8>(repeating: 0)
    }

    /// Whether any lane of `mask` is set. Written out because the generic `any(_:)` does not inline.
    @inline(__always)
    private static func hasLane(_ mask: SIMDMask<SIMD16<Int8>>) -> Bool {
        let lanes = unsafeBitCast(mask, to: SIMD2<UInt64>.self)
        return lanes[0] | lanes[1] != 0
    }
}
