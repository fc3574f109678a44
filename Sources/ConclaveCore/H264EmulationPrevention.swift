#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// H264 emulation prevention (ITU-T H.264 7.4.1): after any `00 00`, a byte of 0–3 gets a `03`
/// inserted before it, so no start code can appear inside a NAL unit; a reader removes every `03`
/// that follows `00 00` before parsing the unit's fields.
///
/// The `sframe` format escapes its sealed bytes with it, and the recorder unescapes an SPS to read
/// the picture size.
public enum H264EmulationPrevention {
    /// Whether `escape` would insert anything into `input`: some `00 00` followed by 0–3.
    public static func needsEscape(_ input: UnsafeRawBufferPointer) -> Bool {
        ZeroZeroLow.first(in: input, from: 0, to: input.count) != nil
    }

    /// Appends `input` with a `03` inserted wherever `00 00` is followed by a byte of 0–3.
    ///
    /// Zero bytes are rare in ciphertext, so the scan jumps from zero to zero with `memchr` and copies
    /// the runs between them in bulk.
    public static func escape(_ input: ArraySlice<UInt8>, into output: inout [UInt8]) {
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
    public static func unescape(_ input: ArraySlice<UInt8>) -> [UInt8] {
        input.withUnsafeBytes { unescape($0) }
    }

    /// Removes every `03` that follows `00 00`.
    public static func unescape(_ input: UnsafeRawBufferPointer) -> [UInt8] {
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
