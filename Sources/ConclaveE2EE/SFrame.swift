import ConclaveCore
import Crypto
import Foundation

/// The SFrame header of RFC 9605 §4.3: a config byte, then the key id and counter in as few
/// big-endian bytes as they need.
///
/// Config byte `X KKK Y CCC`: with X = 0 the key id (0–7) sits in KKK; with X = 1, KKK + 1 is the
/// length of the key id that follows. The counter uses Y and CCC the same way, after the key id.
public struct SFrameHeader: Sendable, Hashable {
    /// `KID`: selects the base key.
    public var keyID: UInt64
    /// `CTR`: makes the nonce unique under one key.
    public var counter: UInt64

    public init(keyID: UInt64, counter: UInt64) {
        self.keyID = keyID
        self.counter = counter
    }

    /// The encoded header.
    public var bytes: [UInt8] {
        var output = [UInt8]()
        encode(into: &output)
        return output
    }

    /// Appends the encoded header.
    public func encode(into output: inout [UInt8]) {
        let kidLength = Self.minimalLength(keyID)
        let ctrLength = Self.minimalLength(counter)
        var config: UInt8 = 0
        config |= keyID < 8 ? UInt8(keyID) << 4 : 0x80 | UInt8(kidLength - 1) << 4
        config |= counter < 8 ? UInt8(counter) : 0x08 | UInt8(ctrLength - 1)
        output.append(config)
        if keyID >= 8 { Self.appendBigEndian(keyID, length: kidLength, to: &output) }
        if counter >= 8 { Self.appendBigEndian(counter, length: ctrLength, to: &output) }
    }

    /// Parses a header at the start of `bytes`, returning it and its length.
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(SFrameHeaderError) -> (
        header: SFrameHeader, length: Int
    ) {
        guard let config = bytes.first else { throw .empty }
        var index = bytes.startIndex + 1
        func field(extended: Bool, value: UInt8, name: String) throws(SFrameHeaderError) -> UInt64 {
            guard extended else { return UInt64(value) }
            let length = Int(value) + 1
            guard bytes.endIndex - index >= length else {
                throw .truncated(field: name, needed: length, available: bytes.endIndex - index)
            }
            var result: UInt64 = 0
            for offset in 0..<length { result = result << 8 | UInt64(bytes[index + offset]) }
            index += length
            return result
        }
        let keyID = try field(extended: config & 0x80 != 0, value: (config >> 4) & 0x07, name: "key id")
        let counter = try field(extended: config & 0x08 != 0, value: config & 0x07, name: "counter")
        return (SFrameHeader(keyID: keyID, counter: counter), index - bytes.startIndex)
    }

    static func minimalLength(_ value: UInt64) -> Int {
        max(1, (64 - value.leadingZeroBitCount + 7) / 8)
    }

    static func appendBigEndian(_ value: UInt64, length: Int, to output: inout [UInt8]) {
        for shift in stride(from: (length - 1) * 8, through: 0, by: -8) {
            output.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

/// A header that does not parse.
public enum SFrameHeaderError: Error, Hashable, CustomStringConvertible {
    case empty
    case truncated(field: String, needed: Int, available: Int)

    public var description: String {
        switch self {
        case .empty: "empty SFrame header"
        case .truncated(let field, let needed, let available):
            "SFrame header \(field) needs \(needed) bytes, \(available) left"
        }
    }
}

/// The key and salt derived from one base key and key id for cipher suite AES_256_GCM_SHA512_128
/// (0x0005), per RFC 9605 §4.4.2:
///
///     secret = HKDF-Extract(salt = "", IKM = base_key)                  (SHA-512)
///     key    = HKDF-Expand(secret, "SFrame 1.0 Secret key "  ‖ KID(8) ‖ suite(2), 32)
///     salt   = HKDF-Expand(secret, "SFrame 1.0 Secret salt " ‖ KID(8) ‖ suite(2), 12)
///
/// Because the key id is in both labels, every sender and epoch gets its own key and salt from the
/// one shared call key, so per-sender counters never collide under the same key.
public struct SFrameKeyMaterial: Sendable {
    /// The cipher suite identifier of AES_256_GCM_SHA512_128.
    public static let cipherSuite: UInt16 = 0x0005
    public static let keyLength = 32
    public static let nonceLength = 12
    public static let tagLength = 16

    /// The key id this material belongs to.
    public let keyID: UInt64
    /// `sframe_key`.
    public let key: SymmetricKey
    /// `sframe_salt`.
    public let salt: [UInt8]

    /// Derives the material for `keyID` from `baseKey`.
    public init(baseKey: [UInt8], keyID: UInt64) {
        self.keyID = keyID
        let secret = HKDF<SHA512>.extract(inputKeyMaterial: SymmetricKey(data: baseKey), salt: [UInt8]())
        key = HKDF<SHA512>.expand(
            pseudoRandomKey: secret,
            info: Self.label("key ", keyID),
            outputByteCount: Self.keyLength
        )
        salt = HKDF<SHA512>.expand(
            pseudoRandomKey: secret,
            info: Self.label("salt ", keyID),
            outputByteCount: Self.nonceLength
        )
        .withUnsafeBytes { Array($0) }
    }

    /// Derives the material for `keyID` from a call key.
    public init(callKey: CallKey, keyID: UInt64) {
        self = callKey.withUnsafeBytes { SFrameKeyMaterial(baseKey: Array($0), keyID: keyID) }
    }

    /// `"SFrame 1.0 Secret " + kind + KID (8 bytes) + suite (2 bytes)`.
    static func label(_ kind: String, _ keyID: UInt64) -> [UInt8] {
        var label = Array("SFrame 1.0 Secret \(kind)".utf8)
        SFrameHeader.appendBigEndian(keyID, length: 8, to: &label)
        SFrameHeader.appendBigEndian(UInt64(cipherSuite), length: 2, to: &label)
        return label
    }

    /// The nonce for `counter`: the salt XOR the counter, right-aligned.
    public func nonce(counter: UInt64) -> AES.GCM.Nonce {
        var bytes = salt
        for index in 0..<8 {
            bytes[Self.nonceLength - 1 - index] ^= UInt8(truncatingIfNeeded: counter >> UInt64(index * 8))
        }
        // Twelve bytes is always a valid GCM nonce.
        guard let nonce = try? AES.GCM.Nonce(data: bytes) else { preconditionFailure("12-byte nonce rejected") }
        return nonce
    }
}

/// SFrame encryption and decryption of one payload (RFC 9605 §4.4.3 and §4.4.4).
public enum SFrameCipher {
    /// Appends `header ‖ ciphertext ‖ tag`, authenticating `header ‖ metadata`.
    public static func seal(
        _ plaintext: ArraySlice<UInt8>,
        metadata: ArraySlice<UInt8>,
        counter: UInt64,
        material: SFrameKeyMaterial,
        appendingTo output: inout [UInt8]
    ) {
        let headerStart = output.count
        SFrameHeader(keyID: material.keyID, counter: counter).encode(into: &output)
        var aad = Array(output[headerStart...])
        aad.append(contentsOf: metadata)
        guard
            let box = try? AES.GCM.seal(
                plaintext,
                using: material.key,
                nonce: material.nonce(counter: counter),
                authenticating: aad
            )
        else { preconditionFailure("AES-GCM seal failed with a valid key and nonce") }
        ECallFrameFormat.appendBytes(of: box.ciphertext, to: &output)
        ECallFrameFormat.appendBytes(of: box.tag, to: &output)
    }

    /// Parses the header of `sealed`, asks `material` for the key of its key id, and opens it.
    ///
    /// - Returns: the plaintext and the parsed header.
    public static func open(
        _ sealed: ArraySlice<UInt8>,
        metadata: ArraySlice<UInt8>,
        codec: MediaCodec,
        material: (UInt64) throws(FrameDecryptionError) -> SFrameKeyMaterial
    ) throws(FrameDecryptionError) -> (plaintext: [UInt8], header: SFrameHeader) {
        let parsed: (header: SFrameHeader, length: Int)
        do {
            parsed = try SFrameHeader.parse(sealed)
        } catch {
            throw FrameDecryptionError(.malformedHeader, codec: codec, at: sealed.startIndex, error.description)
        }
        let bodyStart = sealed.startIndex + parsed.length
        guard sealed.endIndex - bodyStart >= SFrameKeyMaterial.tagLength else {
            throw FrameDecryptionError(
                .truncated,
                codec: codec,
                at: sealed.endIndex,
                "SFrame body of \(sealed.endIndex - bodyStart) bytes is shorter than the 16-byte tag"
            )
        }
        let keys = try material(parsed.header.keyID)
        var aad = Array(sealed[sealed.startIndex..<bodyStart])
        aad.append(contentsOf: metadata)
        do {
            // nonce ‖ ciphertext ‖ tag as one buffer: `SealedBox(combined:)` copies it in one go,
            // where the (nonce:ciphertext:tag:) initializer appends array slices byte by byte.
            var combined = [UInt8]()
            combined.reserveCapacity(SFrameKeyMaterial.nonceLength + sealed.endIndex - bodyStart)
            keys.nonce(counter: parsed.header.counter).withUnsafeBytes {
                combined.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self))
            }
            combined.append(contentsOf: sealed[bodyStart...])
            let box = try AES.GCM.SealedBox(combined: combined)
            let plaintext = try AES.GCM.open(box, using: keys.key, authenticating: aad)
            var bytes = [UInt8]()
            bytes.reserveCapacity(plaintext.count)
            ECallFrameFormat.appendBytes(of: plaintext, to: &bytes)
            return (bytes, parsed.header)
        } catch {
            throw FrameDecryptionError(
                .authenticationFailed,
                codec: codec,
                at: bodyStart,
                "GCM tag did not verify for key id \(parsed.header.keyID)"
            )
        }
    }
}
