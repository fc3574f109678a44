import ConclaveCore
import Foundation

/// ECall iOS's media frame encryption, byte for byte (interop spec §1.2 and §1.4).
///
/// AES-256-GCM with a random 12-byte nonce per sealed region, no AAD, `nonce ‖ ciphertext ‖ tag`
/// written in place of the plaintext. There is no key id on the wire: the receiver tries its keys in
/// ECall's order (current, previous, next).
///
/// - H264: only slice NAL units (types 1 and 5) are sealed, from two bytes after the start code (the
///   NAL header and the first slice-header byte stay clear) to the end of the unit; start codes are
///   kept and no emulation prevention is added (iOS would not remove it).
/// - Audio: `0xFF ‖ nonce ‖ ciphertext ‖ tag` over the whole Opus packet, TOC byte included. The
///   spec marks the hook point [UNK]; this follows its recommended reading (the encoded packet).
/// - VP8 is never encrypted by ECall; `FrameEncryptor` passes it through with a warning.
public enum ECallFrameFormat {
    /// Nonce plus tag: what sealing adds to each region.
    public static let sealOverhead = 28
    /// The byte that marks an encrypted audio frame.
    public static let audioMarker: UInt8 = 0xFF
    /// Clear bytes at the start of a slice NAL unit: the header and one slice-header byte.
    public static let clearSliceBytes = 2

    // MARK: H264

    /// Seals the single slice of an Annex-B H264 frame.
    ///
    /// Throws `multipleSlices` for a frame with two or more slice units, because ECall iOS would fail
    /// to decrypt every slice after the first. A frame without slices is returned unchanged.
    public static func sealH264(
        _ frame: [UInt8],
        key: CallKey,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) throws(FrameEncryptionError) -> [UInt8] {
        guard let context = cipher.make(key: key) else { throw .cipherFailed(codec: .h264) }
        return try sealH264(frame, context: context)
    }

    /// `sealH264(_:key:cipher:)` with a cipher kept for the key.
    static func sealH264(_ frame: [UInt8], context: any FrameCipher) throws(FrameEncryptionError) -> [UInt8] {
        guard H264AnnexB.startsWithStartCode(frame) else {
            throw .malformedFrame(codec: .h264, detail: "frame does not start with an Annex-B start code")
        }
        var slice: H264NALUnit?
        var sliceCount = 0
        for unit in H264AnnexB.units(in: frame, rule: .ecall) where unit.type.isSlice {
            sliceCount += 1
            if slice == nil { slice = unit }
        }
        guard sliceCount <= 1 else { throw .multipleSlices(count: sliceCount) }
        guard let slice else { return frame }
        let regionStart = slice.headerIndex + clearSliceBytes
        guard regionStart < slice.end else { return frame }
        let outputCount = frame.count + sealOverhead
        let sealedEnd = slice.end + sealOverhead
        let followed = slice.end < frame.count
        var sealed = true
        // One allocation: the clear head and tail are copied once, the cipher writes the middle.
        let output = frame.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: outputCount) { buffer, initializedCount in
                guard let inputBase = input.baseAddress, let outputBase = UnsafeMutableRawPointer(buffer.baseAddress)
                else {
                    sealed = false
                    return
                }
                outputBase.copyMemory(from: inputBase, byteCount: regionStart)
                (outputBase + sealedEnd).copyMemory(from: inputBase + slice.end, byteCount: frame.count - slice.end)
                let nonce = outputBase + regionStart
                let plaintext = UnsafeRawBufferPointer(rebasing: input[regionStart..<slice.end])
                // ECall adds no emulation prevention, so sealed bytes that contain `00 00 01` (or end in
                // a zero a following start code would absorb) get cut apart on the way. The nonce is
                // free, so draw a new one until the sealed region is safe: about one frame in
                // 2^24 / length needs a second try.
                for _ in 0..<maxNonceDraws {
                    NoncePool.shared.fill(nonce)
                    guard
                        context.seal(
                            nonce: nonce,
                            aad: UnsafeRawBufferPointer(start: nil, count: 0),
                            plaintext: plaintext,
                            ciphertext: nonce + AES256GCM.nonceLength,
                            tag: outputBase + sealedEnd - AES256GCM.tagLength
                        )
                    else {
                        sealed = false
                        return
                    }
                    let written = UnsafeBufferPointer(start: buffer.baseAddress, count: outputCount)
                    if !emulatesStartCode(written, from: slice.headerIndex + 1, to: sealedEnd, followedByUnit: followed)
                    {
                        break
                    }
                }
                initializedCount = outputCount
            }
        }
        guard sealed else { throw .cipherFailed(codec: .h264) }
        return output
    }

    /// Fresh nonces tried before giving up on a start-code-free region (never reached in practice:
    /// each try fails with probability about length / 2^24).
    static let maxNonceDraws = 16

    /// Whether `bytes[from..<to]` contains `00 00 01`, or ends in `00` while another unit follows
    /// (the scanner would take that zero as the first byte of the next 4-byte start code).
    static func emulatesStartCode(_ bytes: [UInt8], from: Int, to: Int, followedByUnit: Bool) -> Bool {
        bytes.withUnsafeBufferPointer { emulatesStartCode($0, from: from, to: to, followedByUnit: followedByUnit) }
    }

    /// `emulatesStartCode` on a buffer; `from` and `to` must lie within it.
    static func emulatesStartCode(_ buffer: UnsafeBufferPointer<UInt8>, from: Int, to: Int, followedByUnit: Bool)
        -> Bool
    {
        guard to > from, to <= buffer.count, from >= 0 else { return false }
        if followedByUnit && buffer[to - 1] == 0 { return true }
        var search = from
        // `00 00 01` with the `01` before `to`.
        while let pair = ZeroZeroLow.first(in: UnsafeRawBufferPointer(buffer), from: search, to: to) {
            if buffer[pair + 2] == 1 { return true }
            search = pair + 1
        }
        return false
    }

    /// Opens every slice of an `ecall` H264 frame, trying `keys` in order.
    ///
    /// Unlike ECall iOS, which hands undecryptable frames to its decoder, this throws so the caller
    /// drops the frame. Slices are opened at their true offsets, so multi-slice frames also work.
    public static func openH264(
        _ frame: [UInt8],
        keys: [CallKey],
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) throws(FrameDecryptionError) -> [UInt8] {
        var openedWith: Int?
        return try openH264(frame, contexts: contexts(for: keys, cipher: cipher, codec: .h264), openedWith: &openedWith)
    }

    /// `openH264(_:keys:cipher:)` with ciphers kept for the keys, in the order to try them. `openedWith`
    /// is set to the index of the context that opened the frame's first sealed slice (nil when the
    /// frame had nothing sealed).
    static func openH264(_ frame: [UInt8], contexts: [any FrameCipher], openedWith: inout Int?)
        throws(FrameDecryptionError) -> [UInt8]
    {
        // Depacketized frames are always Annex-B (ECall's AVCC branch only matters inside iOS).
        let units = H264AnnexB.startsWithStartCode(frame) ? H264AnnexB.units(in: frame, rule: .ecall) : []
        guard !units.isEmpty else {
            throw FrameDecryptionError(
                .malformedHeader,
                codec: .h264,
                at: 0,
                "no Annex-B NAL units in \(frame.count) bytes"
            )
        }
        guard units.contains(where: \.type.isSlice) else {
            // Parameter sets, SEI and delimiters travel in clear in ECall; anything else is not H264.
            if let odd = units.first(where: { !clearNALTypes.contains($0.type) }) {
                throw FrameDecryptionError(
                    .malformedHeader,
                    codec: .h264,
                    at: odd.headerIndex,
                    "unexpected NAL type \(odd.type)"
                )
            }
            return frame
        }
        guard !contexts.isEmpty else {
            throw FrameDecryptionError(.noKey, codec: .h264, "no call key installed")
        }
        var failure: FrameDecryptionError?
        // Every sealed slice shrinks by nonce and tag, so the frame's length bounds the output.
        let output = frame.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: frame.count) { buffer, initializedCount in
                guard let inputBase = input.baseAddress, let outputBase = UnsafeMutableRawPointer(buffer.baseAddress)
                else {
                    failure = FrameDecryptionError(.malformedHeader, codec: .h264, at: 0, "empty frame")
                    return
                }
                var copied = 0
                var written = 0
                for slice in units where slice.type.isSlice {
                    let regionStart = slice.headerIndex + clearSliceBytes
                    guard regionStart < slice.end else { continue }
                    guard slice.end - regionStart >= sealOverhead else {
                        failure = FrameDecryptionError(
                            .truncated,
                            codec: .h264,
                            at: regionStart,
                            "slice region of \(slice.end - regionStart) bytes is shorter than nonce and tag (28)"
                        )
                        return
                    }
                    (outputBase + written).copyMemory(from: inputBase + copied, byteCount: regionStart - copied)
                    written += regionStart - copied
                    let ciphertext = UnsafeRawBufferPointer(
                        rebasing: input[
                            (regionStart + AES256GCM.nonceLength)..<(slice.end - AES256GCM.tagLength)
                        ]
                    )
                    let opener = contexts.firstIndex { context in
                        context.open(
                            nonce: inputBase + regionStart,
                            aad: UnsafeRawBufferPointer(start: nil, count: 0),
                            ciphertext: ciphertext,
                            tag: inputBase + slice.end - AES256GCM.tagLength,
                            plaintext: outputBase + written
                        )
                    }
                    guard let opener else {
                        failure = FrameDecryptionError(
                            .authenticationFailed,
                            codec: .h264,
                            at: regionStart,
                            "GCM tag of NAL type \(slice.type) did not verify with \(contexts.count) key(s)"
                        )
                        return
                    }
                    if openedWith == nil { openedWith = opener }
                    written += ciphertext.count
                    copied = slice.end
                }
                (outputBase + written).copyMemory(from: inputBase + copied, byteCount: frame.count - copied)
                initializedCount = written + frame.count - copied
            }
        }
        if let failure { throw failure }
        return output
    }

    /// NAL types ECall leaves clear and that may make up a frame on their own: SEI, SPS, PPS, AUD,
    /// end of sequence/stream, filler.
    static let clearNALTypes: Set<H264NALUnitType> = [
        .sei, .sps, .pps, .accessUnitDelimiter, .endOfSequence, .endOfStream, .fillerData,
    ]

    // MARK: Audio

    /// Seals a whole audio packet: `0xFF ‖ nonce ‖ ciphertext ‖ tag`.
    public static func sealAudio(
        _ packet: [UInt8],
        key: CallKey,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) throws(FrameEncryptionError) -> [UInt8] {
        guard let context = cipher.make(key: key) else { throw .cipherFailed(codec: .opus) }
        return try sealAudio(packet, context: context)
    }

    /// `sealAudio(_:key:cipher:)` with a cipher kept for the key.
    static func sealAudio(_ packet: [UInt8], context: any FrameCipher) throws(FrameEncryptionError) -> [UInt8] {
        let outputCount = packet.count + sealOverhead + 1
        var sealed = true
        let output = packet.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: outputCount) { buffer, initializedCount in
                guard let outputBase = UnsafeMutableRawPointer(buffer.baseAddress) else {
                    sealed = false
                    return
                }
                outputBase.storeBytes(of: audioMarker, as: UInt8.self)
                let nonce = outputBase + 1
                NoncePool.shared.fill(nonce)
                sealed = context.seal(
                    nonce: nonce,
                    aad: UnsafeRawBufferPointer(start: nil, count: 0),
                    plaintext: input,
                    ciphertext: nonce + AES256GCM.nonceLength,
                    tag: outputBase + outputCount - AES256GCM.tagLength
                )
                if sealed { initializedCount = outputCount }
            }
        }
        guard sealed else { throw .cipherFailed(codec: .opus) }
        return output
    }

    /// Opens an `ecall` audio packet, trying `keys` in order.
    public static func openAudio(
        _ packet: [UInt8],
        keys: [CallKey],
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) throws(FrameDecryptionError) -> [UInt8] {
        var openedWith: Int?
        return try openAudio(
            packet,
            contexts: contexts(for: keys, cipher: cipher, codec: .opus),
            openedWith: &openedWith
        )
    }

    /// `openAudio(_:keys:cipher:)` with ciphers kept for the keys, in the order to try them; `openedWith`
    /// is set to the index of the context that opened the packet.
    static func openAudio(_ packet: [UInt8], contexts: [any FrameCipher], openedWith: inout Int?)
        throws(FrameDecryptionError) -> [UInt8]
    {
        guard let first = packet.first else {
            throw FrameDecryptionError(.truncated, codec: .opus, at: 0, "empty audio frame")
        }
        guard first == audioMarker else {
            throw FrameDecryptionError(
                .notEncrypted,
                codec: .opus,
                at: 0,
                "first byte is not the 0xFF encryption marker"
            )
        }
        guard packet.count >= 1 + sealOverhead else {
            throw FrameDecryptionError(
                .truncated,
                codec: .opus,
                at: packet.count,
                "audio frame of \(packet.count) bytes is shorter than marker, nonce and tag (29)"
            )
        }
        guard !contexts.isEmpty else {
            throw FrameDecryptionError(.noKey, codec: .opus, "no call key installed")
        }
        let outputCount = packet.count - sealOverhead - 1
        var opener: Int?
        let output = packet.withUnsafeBytes { input in
            // At least one byte, so an empty plaintext still has a buffer to point at.
            [UInt8](unsafeUninitializedCapacity: max(outputCount, 1)) { buffer, initializedCount in
                guard let inputBase = input.baseAddress, let plaintext = UnsafeMutableRawPointer(buffer.baseAddress)
                else { return }
                let ciphertext = UnsafeRawBufferPointer(
                    rebasing: input[(1 + AES256GCM.nonceLength)..<(packet.count - AES256GCM.tagLength)]
                )
                opener = contexts.firstIndex { context in
                    context.open(
                        nonce: inputBase + 1,
                        aad: UnsafeRawBufferPointer(start: nil, count: 0),
                        ciphertext: ciphertext,
                        tag: inputBase + packet.count - AES256GCM.tagLength,
                        plaintext: plaintext
                    )
                }
                if opener != nil { initializedCount = outputCount }
            }
        }
        guard let opener else {
            throw FrameDecryptionError(
                .authenticationFailed,
                codec: .opus,
                at: 1,
                "GCM tag did not verify with \(contexts.count) key(s)"
            )
        }
        openedWith = opener
        return output
    }

    /// One cipher per key, for the public entry points that take keys.
    private static func contexts(
        for keys: [CallKey],
        cipher: any FrameCipher.Type,
        codec: MediaCodec
    ) throws(FrameDecryptionError)
        -> [any FrameCipher]
    {
        var contexts: [any FrameCipher] = []
        for key in keys {
            guard let context = cipher.make(key: key) else {
                throw FrameDecryptionError(.authenticationFailed, codec: codec, "AES-256-GCM context setup failed")
            }
            contexts.append(context)
        }
        return contexts
    }
}
