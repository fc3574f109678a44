import ConclaveCore
import Crypto
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
    public static func sealH264(_ frame: [UInt8], key: SymmetricKey) throws(FrameEncryptionError) -> [UInt8] {
        guard H264FrameParser.isAnnexB(frame) else {
            throw .malformedFrame(codec: .h264, detail: "frame does not start with an Annex-B start code")
        }
        let units = H264FrameParser.annexBUnits(in: frame)
        let slices = units.filter(\.isECallSlice)
        guard slices.count <= 1 else { throw .multipleSlices(count: slices.count) }
        guard let slice = slices.first else { return frame }
        let regionStart = slice.headerIndex + clearSliceBytes
        guard regionStart < slice.end else { return frame }
        var output = [UInt8]()
        output.reserveCapacity(frame.count + sealOverhead)
        // ECall adds no emulation prevention, so sealed bytes that contain `00 00 01` (or end in a zero
        // a following start code would absorb) get cut apart on the way. The nonce is free, so draw a
        // new one until the sealed region is safe: about one frame in 2^24 / length needs a second try.
        for _ in 0..<maxNonceDraws {
            output.removeAll(keepingCapacity: true)
            output.append(contentsOf: frame[..<regionStart])
            appendSealed(frame[regionStart..<slice.end], key: key, to: &output)
            let sealedEnd = output.count
            output.append(contentsOf: frame[slice.end...])
            let followed = sealedEnd < output.count
            if !emulatesStartCode(output, from: slice.headerIndex + 1, to: sealedEnd, followedByUnit: followed) {
                break
            }
        }
        return output
    }

    /// Fresh nonces tried before giving up on a start-code-free region (never reached in practice:
    /// each try fails with probability about length / 2^24).
    static let maxNonceDraws = 16

    /// Whether `bytes[from..<to]` contains `00 00 01`, or ends in `00` while another unit follows
    /// (the scanner would take that zero as the first byte of the next 4-byte start code).
    static func emulatesStartCode(_ bytes: [UInt8], from: Int, to: Int, followedByUnit: Bool) -> Bool {
        guard to > from else { return false }
        if followedByUnit && bytes[to - 1] == 0 { return true }
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return false }
            var search = from + 2
            while search < to, let hit = memchr(base + search, 1, to - search) {
                let one = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                if buffer[one - 1] == 0 && buffer[one - 2] == 0 { return true }
                search = one + 1
            }
            return false
        }
    }

    /// Opens every slice of an `ecall` H264 frame, trying `keys` in order.
    ///
    /// Unlike ECall iOS, which hands undecryptable frames to its decoder, this throws so the caller
    /// drops the frame. Slices are opened at their true offsets, so multi-slice frames also work.
    public static func openH264(_ frame: [UInt8], keys: [SymmetricKey]) throws(FrameDecryptionError) -> [UInt8] {
        // Depacketized frames are always Annex-B (ECall's AVCC branch only matters inside iOS).
        let units = H264FrameParser.isAnnexB(frame) ? H264FrameParser.annexBUnits(in: frame) : []
        guard !units.isEmpty else {
            throw FrameDecryptionError(
                .malformedHeader,
                codec: .h264,
                at: 0,
                "no Annex-B NAL units in \(frame.count) bytes"
            )
        }
        let slices = units.filter(\.isECallSlice)
        if slices.isEmpty {
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
        guard !keys.isEmpty else {
            throw FrameDecryptionError(.noKey, codec: .h264, "no call key installed")
        }
        var output = [UInt8]()
        output.reserveCapacity(frame.count)
        var copied = 0
        for slice in slices {
            let regionStart = slice.headerIndex + clearSliceBytes
            guard regionStart < slice.end else { continue }
            guard slice.end - regionStart >= sealOverhead else {
                throw FrameDecryptionError(
                    .truncated,
                    codec: .h264,
                    at: regionStart,
                    "slice region of \(slice.end - regionStart) bytes is shorter than nonce and tag (28)"
                )
            }
            output.append(contentsOf: frame[copied..<regionStart])
            guard openSealed(frame[regionStart..<slice.end], keys: keys, appendingTo: &output) else {
                throw FrameDecryptionError(
                    .authenticationFailed,
                    codec: .h264,
                    at: regionStart,
                    "GCM tag of NAL type \(slice.type) did not verify with \(keys.count) key(s)"
                )
            }
            copied = slice.end
        }
        output.append(contentsOf: frame[copied...])
        return output
    }

    /// NAL types ECall leaves clear and that may make up a frame on their own: SEI, SPS, PPS, AUD,
    /// end of sequence/stream, filler.
    static let clearNALTypes: Set<UInt8> = [6, 7, 8, 9, 10, 11, 12]

    // MARK: Audio

    /// Seals a whole audio packet: `0xFF ‖ nonce ‖ ciphertext ‖ tag`.
    public static func sealAudio(_ packet: [UInt8], key: SymmetricKey) -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(packet.count + sealOverhead + 1)
        output.append(audioMarker)
        appendSealed(packet[...], key: key, to: &output)
        return output
    }

    /// Opens an `ecall` audio packet, trying `keys` in order.
    public static func openAudio(_ packet: [UInt8], keys: [SymmetricKey]) throws(FrameDecryptionError) -> [UInt8] {
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
        guard !keys.isEmpty else {
            throw FrameDecryptionError(.noKey, codec: .opus, "no call key installed")
        }
        var output = [UInt8]()
        output.reserveCapacity(packet.count - sealOverhead - 1)
        guard openSealed(packet[1...], keys: keys, appendingTo: &output) else {
            throw FrameDecryptionError(
                .authenticationFailed,
                codec: .opus,
                at: 1,
                "GCM tag did not verify with \(keys.count) key(s)"
            )
        }
        return output
    }

    // MARK: GCM boxes

    /// Appends `nonce ‖ ciphertext ‖ tag` of `plaintext` under a fresh random nonce.
    static func appendSealed(_ plaintext: ArraySlice<UInt8>, key: SymmetricKey, to output: inout [UInt8]) {
        let nonce = NoncePool.shared.next()
        // Sealing with a 32-byte key and a 12-byte nonce cannot fail.
        guard let box = try? AES.GCM.seal(plaintext, using: key, nonce: nonce) else {
            preconditionFailure("AES-GCM seal failed with a valid key and nonce")
        }
        // Append nonce, ciphertext and tag directly: `box.combined` would first build another copy.
        nonce.withUnsafeBytes { output.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
        appendBytes(of: box.ciphertext, to: &output)
        appendBytes(of: box.tag, to: &output)
    }

    /// Appends the bytes of `data` with a single memory copy.
    @inline(__always)
    static func appendBytes(of data: Data, to output: inout [UInt8]) {
        data.withUnsafeBytes { output.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Opens a combined box with the first key that authenticates it; false when none does.
    static func openSealed(_ combined: ArraySlice<UInt8>, keys: [SymmetricKey], appendingTo output: inout [UInt8])
        -> Bool
    {
        guard let box = try? AES.GCM.SealedBox(combined: combined) else { return false }
        for key in keys {
            if let plaintext = try? AES.GCM.open(box, using: key) {
                appendBytes(of: plaintext, to: &output)
                return true
            }
        }
        return false
    }
}
