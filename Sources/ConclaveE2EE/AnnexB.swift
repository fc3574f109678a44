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

    /// Annex-B units. Finds each start code with `ZeroZeroLow`, which finds the same start codes as a
    /// byte-by-byte scan but runs at memory speed on large frames.
    public static func annexBUnits(in data: [UInt8]) -> [NALUnitRange] {
        annexBUnits(in: data) { _ in }
    }

    /// `annexBUnits(in:)`, also handing `otherPair` the offset of every `00 00 0x` (x <= 3) that does
    /// not begin a start code, so a caller that looks for escapes needs no second pass over the frame.
    @inline(__always)
    static func annexBUnits(in data: [UInt8], otherPair: (Int) -> Void) -> [NALUnitRange] {
        var units: [NALUnitRange] = []
        data.withUnsafeBufferPointer { buffer in
            let count = buffer.count
            var lowerBound = 0  // the first byte a start code may begin at
            var open: (framingStart: Int, header: Int)?
            var searchFrom = 0
            // A start code is 00 00 01 beginning no earlier than `lowerBound`.
            while let pair = ZeroZeroLow.first(in: UnsafeRawBufferPointer(buffer), from: searchFrom, to: count) {
                let one = pair + 2
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
        ZeroZeroLow.first(in: input, from: 0, to: input.count) != nil
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

/// Finds `00 00 0x` with x at most 3: the start of every start code (`00 00 01`) and escape
/// (`00 00 03`), and every spot H264 emulation prevention would escape.
///
/// Compressed or encrypted bytes hold a zero about every 256 bytes but such a triple only about
/// every 4 MB, so searching for the triple itself is far cheaper than one `memchr` call per `00` or
/// `01` byte (a fifth of the H264 frame crypto time in profiles). Every triple at `p` contains an
/// aligned 16-bit lane (relative to where the search starts) whose low byte is zero and whose high
/// byte is at most 3: `(00, 00)` at `p` if `p` is even, `(00, x)` at `p + 1` if it is odd. So each
/// step tests 64 bytes as 32 lanes with one mask and one compare per 16 bytes, and only a block with
/// such a lane (a triple, or rarely a lone `00 0x`) is looked at byte by byte.
enum ZeroZeroLow {
    /// The first `index` with `from <= index`, `index + 2 < to` and `bytes[index...index + 2]` equal
    /// to `00 00 x` with x <= 3; nil if there is none. `to` is clamped to `bytes.count`.
    static func first(in bytes: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        let end = min(to, bytes.count)
        guard let base = bytes.baseAddress, from >= 0 else { return nil }
        var index = from
        while index &+ 64 <= end {
            var lanes = candidateLanes(base + index)
            lanes .|= candidateLanes(base + (index &+ 16))
            lanes .|= candidateLanes(base + (index &+ 32))
            lanes .|= candidateLanes(base + (index &+ 48))
            if hasLane(lanes) {
                // A triple starting on the byte before the block shows in its first lane.
                if let found = firstByteByByte(bytes, from: max(from, index - 1), to: min(index + 64, end - 2)) {
                    return found
                }
            }
            index &+= 64
        }
        return firstByteByByte(bytes, from: max(from, index - 1), to: end - 2)
    }

    /// The first triple starting in `from..<to`; the caller keeps `to + 2` within `bytes`.
    @inline(__always)
    private static func firstByteByByte(_ bytes: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        var index = from
        while index < to {
            if bytes[index] == 0 && bytes[index + 1] == 0 && bytes[index + 2] <= 3 { return index }
            index += 1
        }
        return nil
    }

    /// Lanes of the 16 bytes at `pointer` (as eight 16-bit lanes, little-endian) whose first byte is
    /// zero and second byte at most 3.
    @inline(__always)
    private static func candidateLanes(_ pointer: UnsafeRawPointer) -> SIMDMask<SIMD8<Int16>> {
        let lanes = pointer.loadUnaligned(as: SIMD8<UInt16>.self)
        return lanes & SIMD8(repeating: 0xFCFF) .== SIMD8(repeating: 0)
    }

    /// Whether any lane of `mask` is set. Written out because the generic `any(_:)` does not inline.
    @inline(__always)
    private static func hasLane(_ mask: SIMDMask<SIMD8<Int16>>) -> Bool {
        let lanes = unsafeBitCast(mask, to: SIMD2<UInt64>.self)
        return lanes[0] | lanes[1] != 0
    }
}
