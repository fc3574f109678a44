import ConclaveCore
import Crypto

/// How Conclave composes SFrame key ids: the sender in the high 56 bits, the key epoch (mod 256) in
/// the low 8 bits.
///
/// A receiver reads the epoch from the key id and picks that key from its ring directly, instead of
/// trying keys as the `ecall` format must; a sender's key id changes on every rotation.
public struct SFrameKeyID: Sendable, Hashable, CustomStringConvertible {
    /// The largest sender id that fits.
    public static let maxSenderID: UInt64 = (1 << 56) - 1

    public var senderID: UInt64
    public var epoch: UInt8

    public init(senderID: UInt64, epoch: UInt8) {
        self.senderID = senderID & Self.maxSenderID
        self.epoch = epoch
    }

    public init(rawValue: UInt64) {
        senderID = rawValue >> 8
        epoch = UInt8(truncatingIfNeeded: rawValue)
    }

    public var rawValue: UInt64 { senderID << 8 | UInt64(epoch) }

    public var description: String { "sender \(senderID) epoch \(epoch)" }
}

/// Conclave's `sframe` media format: RFC 9605 SFrame applied per codec so an SFU still sees what it
/// needs to route and a recorder can find frame boundaries.
///
/// - Opus: the whole packet is the SFrame plaintext; no metadata.
/// - VP8: the payload header (10 bytes on keyframes, 3 otherwise; RFC 6386 §9.1) stays clear and is
///   the SFrame metadata, so it is authenticated; the rest is sealed after it.
/// - H264 (Annex-B): start codes and each NAL header byte stay clear; the NAL header is the metadata.
///   Every NAL unit except SPS (7), PPS (8) and access unit delimiters (9) is sealed with its own
///   counter, so every slice of a multi-slice frame is covered. The sealed bytes get a `0x80` stop
///   byte (so the unit never ends in zero) and H264 emulation prevention, so no start code can appear
///   inside them on the wire.
public enum SFrameFrameFormat {
    /// NAL types sent in clear: parameter sets and delimiters carry no picture content and an SFU or
    /// recorder may need them.
    static func isClearNALType(_ type: H264NALUnitType) -> Bool {
        type == .sps || type == .pps || type == .accessUnitDelimiter
    }
    /// Appended to each sealed H264 unit before escaping, removed after unescaping.
    static let h264StopByte: UInt8 = 0x80

    /// Length of the clear VP8 payload header given its first byte.
    static func vp8HeaderLength(firstByte: UInt8) -> Int { firstByte & 0x01 == 0 ? 10 : 3 }

    /// Seals `frame`. `nextCounter` is called once per sealed unit and must never repeat a value for
    /// the same key id.
    public static func seal(
        _ frame: [UInt8],
        codec: MediaCodec,
        material: SFrameKeyMaterial,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self,
        nextCounter: () throws(FrameEncryptionError) -> UInt64
    ) throws(FrameEncryptionError) -> [UInt8] {
        guard let key = SFrameKeyContext(material: material, cipher: cipher) else { throw .cipherFailed(codec: codec) }
        return try seal(frame, codec: codec, key: key, nextCounter: nextCounter)
    }

    /// `seal(_:codec:material:cipher:nextCounter:)` with a cipher kept for the key id.
    ///
    /// Each output is allocated once at its final size and the cipher writes into it directly.
    static func seal(
        _ frame: [UInt8],
        codec: MediaCodec,
        key: SFrameKeyContext,
        nextCounter: () throws(FrameEncryptionError) -> UInt64
    ) throws(FrameEncryptionError) -> [UInt8] {
        switch codec {
        case .opus:
            let header = SFrameHeader(keyID: key.material.keyID, counter: try nextCounter())
            let count = SFrameCipher.sealedLength(header: header, plaintextCount: frame.count)
            return try build(count: count, from: frame, codec: codec) { input, output in
                SFrameCipher.seal(
                    plaintext: input,
                    metadata: UnsafeRawBufferPointer(start: nil, count: 0),
                    header: header,
                    key: key,
                    to: output
                )
            }
        case .vp8:
            let clear = frame.first.map { min(vp8HeaderLength(firstByte: $0), frame.count) } ?? 0
            let header = SFrameHeader(keyID: key.material.keyID, counter: try nextCounter())
            let count = clear + SFrameCipher.sealedLength(header: header, plaintextCount: frame.count - clear)
            return try build(count: count, from: frame, codec: codec) { input, output in
                if let inputBase = input.baseAddress { output.copyMemory(from: inputBase, byteCount: clear) }
                return SFrameCipher.seal(
                    plaintext: UnsafeRawBufferPointer(rebasing: input[clear...]),
                    metadata: UnsafeRawBufferPointer(rebasing: input[..<clear]),
                    header: header,
                    key: key,
                    to: output + clear
                )
            }
        case .h264:
            return try sealH264(frame, key: key, nextCounter: nextCounter)
        }
    }

    /// H264: each unit's framing and header byte in clear, then for sealed units the escaped
    /// `SFrame header ‖ ciphertext ‖ tag ‖ 0x80`.
    ///
    /// Sealed bytes need an escape only where `00 00` is followed by 0–3, about once in 4 MB of
    /// ciphertext, so the frame is first written unescaped at its exact size and escaped in a second
    /// pass only when a sealed region needs it.
    private static func sealH264(
        _ frame: [UInt8],
        key: SFrameKeyContext,
        nextCounter: () throws(FrameEncryptionError) -> UInt64
    ) throws(FrameEncryptionError) -> [UInt8] {
        guard H264AnnexB.startsWithStartCode(frame) else {
            throw .malformedFrame(codec: .h264, detail: "frame does not start with an Annex-B start code")
        }
        let units = H264AnnexB.units(in: frame, rule: .ecall)
        var headers: [SFrameHeader] = []
        var count = 0
        for unit in units {
            count += unit.headerIndex + 1 - unit.framingStart
            let payloadCount = unit.end - unit.headerIndex - 1
            if isClearNALType(unit.type) {
                count += payloadCount
                continue
            }
            let header = SFrameHeader(keyID: key.material.keyID, counter: try nextCounter())
            headers.append(header)
            count += SFrameCipher.sealedLength(header: header, plaintextCount: payloadCount) + 1
        }
        var needsEscape = false
        let unescaped = try build(count: count, from: frame, codec: .h264) { input, output in
            guard let inputBase = input.baseAddress else { return false }
            var written = 0
            var sealedIndex = 0
            for unit in units {
                if copyClearParts(of: unit, from: inputBase, to: output, written: &written) { continue }
                let payload = UnsafeRawBufferPointer(rebasing: input[(unit.headerIndex + 1)..<unit.end])
                let header = headers[sealedIndex]
                sealedIndex += 1
                guard
                    SFrameCipher.seal(
                        plaintext: payload,
                        metadata: UnsafeRawBufferPointer(rebasing: input[unit.headerIndex...unit.headerIndex]),
                        header: header,
                        key: key,
                        to: output + written
                    )
                else { return false }
                let regionEnd = written + SFrameCipher.sealedLength(header: header, plaintextCount: payload.count) + 1
                output.storeBytes(of: h264StopByte, toByteOffset: regionEnd - 1, as: UInt8.self)
                if !needsEscape {
                    needsEscape = H264EmulationPrevention.needsEscape(
                        UnsafeRawBufferPointer(start: output + written, count: regionEnd - written)
                    )
                }
                written = regionEnd
            }
            return true
        }
        guard needsEscape else { return unescaped }
        // The rare second pass: walk the same layout again, escaping each sealed region.
        var output = [UInt8]()
        output.reserveCapacity(unescaped.count + unescaped.count / 64 + 4 * headers.count)
        var position = 0
        var sealedIndex = 0
        for unit in units {
            var unitEnd = position + unit.end - unit.framingStart
            let regionStart = position + unit.headerIndex + 1 - unit.framingStart
            output.append(contentsOf: unescaped[position..<regionStart])
            if isClearNALType(unit.type) {
                output.append(contentsOf: unescaped[regionStart..<unitEnd])
            } else {
                let payloadCount = unit.end - unit.headerIndex - 1
                unitEnd =
                    regionStart + SFrameCipher.sealedLength(header: headers[sealedIndex], plaintextCount: payloadCount)
                    + 1
                sealedIndex += 1
                H264EmulationPrevention.escape(unescaped[regionStart..<unitEnd], into: &output)
            }
            position = unitEnd
        }
        return output
    }

    /// An array of exactly `count` bytes that `fill` writes given the bytes of `frame`; throws
    /// `cipherFailed` when `fill` returns false.
    private static func build(
        count: Int,
        from frame: [UInt8],
        codec: MediaCodec,
        _ fill: (UnsafeRawBufferPointer, UnsafeMutableRawPointer) -> Bool
    ) throws(FrameEncryptionError) -> [UInt8] {
        var filled = false
        let output = frame.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: max(count, 1)) { buffer, initializedCount in
                guard let base = UnsafeMutableRawPointer(buffer.baseAddress) else { return }
                filled = fill(input, base)
                if filled { initializedCount = count }
            }
        }
        guard filled else { throw .cipherFailed(codec: codec) }
        return output
    }

    /// Opens an `sframe` frame, asking `material` for the keys of each key id it names.
    public static func open(
        _ frame: [UInt8],
        codec: MediaCodec,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self,
        material: (UInt64) throws(FrameDecryptionError) -> SFrameKeyMaterial
    ) throws(FrameDecryptionError) -> [UInt8] {
        try open(frame, codec: codec) { (keyID: UInt64) throws(FrameDecryptionError) -> SFrameKeyContext in
            guard let key = SFrameKeyContext(material: try material(keyID), cipher: cipher) else {
                throw FrameDecryptionError(.authenticationFailed, codec: codec, "AES-256-GCM context setup failed")
            }
            return key
        }
    }

    /// `open(_:codec:cipher:material:)` with ciphers kept per key id. Plaintext is written straight into
    /// the output, which is never longer than the frame.
    static func open(
        _ frame: [UInt8],
        codec: MediaCodec,
        key: (UInt64) throws(FrameDecryptionError) -> SFrameKeyContext
    ) throws(FrameDecryptionError) -> [UInt8] {
        var units: [H264NALUnit] = []
        var escapes: [Int] = []
        switch codec {
        case .opus:
            guard !frame.isEmpty else { throw FrameDecryptionError(.truncated, codec: codec, at: 0, "empty frame") }
        case .vp8:
            guard let first = frame.first else {
                throw FrameDecryptionError(.truncated, codec: codec, at: 0, "empty frame")
            }
            let clear = vp8HeaderLength(firstByte: first)
            guard frame.count > clear else {
                throw FrameDecryptionError(
                    .truncated,
                    codec: codec,
                    at: frame.count,
                    "\(frame.count) bytes cannot hold the \(clear)-byte clear header and an SFrame header"
                )
            }
        case .h264:
            if H264AnnexB.startsWithStartCode(frame) {
                // One pass finds the units and any `00 00 03` escape (rare in ciphertext).
                units = H264AnnexB.units(in: frame, rule: .ecall) { pair in
                    if frame[pair + 2] == 3 { escapes.append(pair) }
                }
            }
            guard !units.isEmpty else {
                throw FrameDecryptionError(
                    .malformedHeader,
                    codec: codec,
                    at: 0,
                    "no Annex-B NAL units in \(frame.count) bytes"
                )
            }
        }
        var failure: FrameDecryptionError?
        let output = frame.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: frame.count) { buffer, initializedCount in
                guard let output = UnsafeMutableRawPointer(buffer.baseAddress), let inputBase = input.baseAddress else {
                    return
                }
                do throws(FrameDecryptionError) {
                    switch codec {
                    case .opus:
                        initializedCount =
                            try SFrameCipher.open(
                                sealed: input,
                                offset: 0,
                                metadata: UnsafeRawBufferPointer(start: nil, count: 0),
                                codec: codec,
                                key: key,
                                to: output
                            ).count
                    case .vp8:
                        let clear = vp8HeaderLength(firstByte: input[0])
                        output.copyMemory(from: inputBase, byteCount: clear)
                        initializedCount =
                            clear
                            + (try SFrameCipher.open(
                                sealed: UnsafeRawBufferPointer(rebasing: input[clear...]),
                                offset: clear,
                                metadata: UnsafeRawBufferPointer(rebasing: input[..<clear]),
                                codec: codec,
                                key: key,
                                to: output + clear
                            ).count)
                    case .h264:
                        initializedCount = try openH264(
                            units: units,
                            escapes: escapes,
                            input: input,
                            key: key,
                            to: output
                        )
                    }
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return output
    }

    /// Copies what of `unit` stays clear to `output + written`: its framing (start code and NAL
    /// header byte) always, and its payload too when the whole unit travels in clear. Returns
    /// whether the unit is done (a clear one), so sealing and opening skip it.
    @inline(__always)
    private static func copyClearParts(
        of unit: H264NALUnit,
        from inputBase: UnsafeRawPointer,
        to output: UnsafeMutableRawPointer,
        written: inout Int
    ) -> Bool {
        let clearCount = unit.headerIndex + 1 - unit.framingStart
        (output + written).copyMemory(from: inputBase + unit.framingStart, byteCount: clearCount)
        written += clearCount
        guard isClearNALType(unit.type) else { return false }
        let payloadCount = unit.end - (unit.headerIndex + 1)
        (output + written).copyMemory(from: inputBase + unit.headerIndex + 1, byteCount: payloadCount)
        written += payloadCount
        return true
    }

    /// Opens the units of an H264 frame into `output`; returns the bytes written. `escapes` holds
    /// the offset of every `00 00 03` in the frame outside start codes.
    private static func openH264(
        units: [H264NALUnit],
        escapes: [Int],
        input: UnsafeRawBufferPointer,
        key: (UInt64) throws(FrameDecryptionError) -> SFrameKeyContext,
        to output: UnsafeMutableRawPointer
    ) throws(FrameDecryptionError) -> Int {
        guard let inputBase = input.baseAddress else { return 0 }
        var written = 0
        for unit in units {
            if copyClearParts(of: unit, from: inputBase, to: output, written: &written) { continue }
            let payload = UnsafeRawBufferPointer(rebasing: input[(unit.headerIndex + 1)..<unit.end])
            let metadata = UnsafeRawBufferPointer(rebasing: input[unit.headerIndex...unit.headerIndex])
            // Escapes are rare in ciphertext: open the unit where it lies unless it has one.
            if escapes.contains(where: { $0 > unit.headerIndex && $0 < unit.end }) {
                let sealed = H264EmulationPrevention.unescape(payload)
                let opened = sealed.withUnsafeBytes { sealed in
                    Result { () throws(FrameDecryptionError) -> Int in
                        try openH264Unit(unit, sealed: sealed, metadata: metadata, key: key, to: output + written)
                    }
                }
                written += try opened.get()
            } else {
                written += try openH264Unit(unit, sealed: payload, metadata: metadata, key: key, to: output + written)
            }
        }
        return written
    }

    /// Opens one unescaped H264 unit payload (`SFrame header ‖ ciphertext ‖ tag ‖ 0x80`).
    private static func openH264Unit(
        _ unit: H264NALUnit,
        sealed: UnsafeRawBufferPointer,
        metadata: UnsafeRawBufferPointer,
        key: (UInt64) throws(FrameDecryptionError) -> SFrameKeyContext,
        to output: UnsafeMutableRawPointer
    ) throws(FrameDecryptionError) -> Int {
        guard sealed.last == h264StopByte else {
            throw FrameDecryptionError(
                .malformedHeader,
                codec: .h264,
                at: unit.end,
                "NAL type \(unit.type) unit does not end with the SFrame stop byte"
            )
        }
        guard sealed.count > 1 else {
            throw FrameDecryptionError(.truncated, codec: .h264, at: unit.headerIndex + 1, "empty sealed NAL unit")
        }
        return try SFrameCipher.open(
            sealed: UnsafeRawBufferPointer(rebasing: sealed.dropLast()),
            offset: unit.headerIndex + 1,
            metadata: metadata,
            codec: .h264,
            key: key,
            to: output
        ).count
    }
}
