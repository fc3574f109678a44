/// The one Annex-B scanner: finds the NAL units of an H264 buffer framed with `00 00 01` /
/// `00 00 00 01` start codes, for the RTP packetizer and depacketizer, the encoder, the demuxer,
/// the muxer, the recorder and the E2EE frame formats.
///
/// Everything here reads untrusted bytes with bounds checks only; malformed input yields fewer or
/// shorter units, never a trap. Start codes are found with `ZeroZeroLow`, which tests 64 bytes per
/// step, so slice data (mostly non-zero) is scanned at memory speed.
public enum H264AnnexB {
    /// The 4-byte start code Conclave writes before every NAL unit it assembles.
    public static let startCode: [UInt8] = [0, 0, 0, 1]

    /// Where one unit ends and the next begins: the scanner's two modes.
    public enum CutRule: Sendable, Hashable {
        /// Every `00 00 01` starts a unit (ITU-T H.264 Annex B); a zero right before it makes it a
        /// 4-byte start code. Bytes before the first start code and empty units are left out.
        case everyStartCode
        /// ECall iOS's `H264NALUParser`, exactly: after each start code the search resumes one byte
        /// after the NAL header, so a start code may not begin at the header byte and a 4-byte start
        /// code may not take the header byte as its leading zero; a unit ends at the first byte of
        /// the next start code, and a start code with no header byte after it ends the scan. An
        /// `ecall` receiver must cut a frame where the iOS sender cut it, or the GCM region shifts
        /// and authentication fails; Conclave's `sframe` format cuts the same way.
        case ecall
    }

    /// Whether `data` begins with a start code: the test ECall iOS uses to tell Annex-B from AVCC.
    public static func startsWithStartCode(_ data: [UInt8]) -> Bool {
        data.count >= 3 && data[0] == 0 && data[1] == 0
            && (data[2] == 1 || (data.count >= 4 && data[2] == 0 && data[3] == 1))
    }

    /// The NAL units of `data` in order, cut by `rule`.
    public static func units(in data: [UInt8], rule: CutRule = .everyStartCode) -> [H264NALUnit] {
        units(in: data, rule: rule) { _ in }
    }

    /// `units(in:rule:)`, also handing `otherTriple` the offset of every `00 00 0x` (x <= 3) the
    /// scan passes that does not begin a start code, so a caller that looks for emulation-prevention
    /// escapes (`00 00 03`) needs no second pass over the frame.
    @inline(__always)
    package static func units(in data: [UInt8], rule: CutRule, otherTriple: (Int) -> Void) -> [H264NALUnit] {
        data.withUnsafeBufferPointer { scan($0, offset: 0, rule: rule, otherTriple: otherTriple) }
    }

    /// The ranges of the NAL units in `data`, without their start codes. Bytes before the first
    /// start code are ignored; a buffer without any start code is taken as one bare NAL unit (as
    /// an RTP single-NAL payload is).
    public static func nalUnitRanges<C: RandomAccessCollection<UInt8>>(_ data: C) -> [Range<Int>]
    where C.Index == Int {
        let start = data.startIndex
        let found =
            data.withContiguousStorageIfAvailable { unitRanges(in: $0, offset: start) }
            ?? Array(data).withUnsafeBufferPointer { unitRanges(in: $0, offset: start) }
        return found ?? (data.isEmpty ? [] : [data.startIndex..<data.endIndex])
    }

    /// The ranges of the units in `buffer`, moved by `offset`; nil when it holds no start code at all
    /// (looked for only when no unit was found, so an Annex-B frame is scanned once).
    private static func unitRanges(in buffer: UnsafeBufferPointer<UInt8>, offset: Int) -> [Range<Int>]? {
        let units = scan(buffer, offset: offset, rule: .everyStartCode) { _ in }
        guard !units.isEmpty || containsStartCode(buffer) else { return nil }
        return units.map(\.range)
    }

    /// Rewrites the buffer so every NAL unit is preceded by a 4-byte start code (bytes before the
    /// first start code and empty units are dropped); returns it unchanged when it already is so.
    public static func withFourByteStartCodes(_ bytes: [UInt8]) -> [UInt8] {
        let units = units(in: bytes)
        guard units.contains(where: { $0.framingLength != 4 }) else { return bytes }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + units.count)
        for unit in units {
            output += startCode
            output += bytes[unit.range]
        }
        return output
    }

    /// The first SPS and PPS of an access unit, each with a 4-byte start code, or nil if either is
    /// missing. Muxers need these as the stream's extradata.
    public static func parameterSets(in bytes: [UInt8]) -> [UInt8]? {
        let units = units(in: bytes)
        guard let sps = units.first(where: { $0.type == .sps }), let pps = units.first(where: { $0.type == .pps })
        else { return nil }
        return startCode + bytes[sps.range] + startCode + bytes[pps.range]
    }

    /// Whether `buffer` holds a `00 00 01` anywhere.
    private static func containsStartCode(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        var searchFrom = 0
        while let triple = ZeroZeroLow.first(in: UnsafeRawBufferPointer(buffer), from: searchFrom, to: buffer.count) {
            if buffer[triple + 2] == 1 { return true }
            searchFrom = triple + 1
        }
        return false
    }

    /// The scan behind every entry point. Offsets in the result (and given to `otherTriple`) are
    /// `offset` plus the position in `buffer`.
    @inline(__always)
    private static func scan(
        _ buffer: UnsafeBufferPointer<UInt8>,
        offset: Int,
        rule: CutRule,
        otherTriple: (Int) -> Void
    ) -> [H264NALUnit] {
        var units: [H264NALUnit] = []
        let count = buffer.count
        let bytes = UnsafeRawBufferPointer(buffer)
        var lowerBound = 0  // the first byte a start code may take as its leading zero
        var open: (framingStart: Int, header: Int)?
        var searchFrom = 0
        scanning: while let triple = ZeroZeroLow.first(in: bytes, from: searchFrom, to: count) {
            guard buffer[triple + 2] == 1 else {
                otherTriple(offset + triple)
                searchFrom = triple + 1
                continue
            }
            var framingStart = triple
            if framingStart - 1 >= lowerBound, buffer[framingStart - 1] == 0 { framingStart -= 1 }
            // Under `.ecall` a unit always holds its header byte; under `.everyStartCode` two start
            // codes in a row leave an empty unit, which is dropped.
            if let current = open, current.header < framingStart {
                units.append(unit(current, end: framingStart, buffer, offset))
            }
            let header = triple + 3
            switch rule {
            case .everyStartCode:
                open = (framingStart, header)
                lowerBound = header
                searchFrom = header
            case .ecall:
                guard header < count else {
                    open = nil
                    break scanning
                }
                open = (framingStart, header)
                lowerBound = header + 1
                searchFrom = lowerBound
            }
        }
        if let current = open, current.header < count {
            units.append(unit(current, end: count, buffer, offset))
        }
        return units
    }

    @inline(__always)
    private static func unit(
        _ open: (framingStart: Int, header: Int),
        end: Int,
        _ buffer: UnsafeBufferPointer<UInt8>,
        _ offset: Int
    ) -> H264NALUnit {
        H264NALUnit(
            framingStart: offset + open.framingStart,
            headerIndex: offset + open.header,
            end: offset + end,
            type: H264NALUnitType(header: buffer[open.header])
        )
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
package enum ZeroZeroLow {
    /// The first `index` with `from <= index`, `index + 2 < to` and `bytes[index...index + 2]` equal
    /// to `00 00 x` with x <= 3; nil if there is none. `to` is clamped to `bytes.count`.
    package static func first(in bytes: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
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
