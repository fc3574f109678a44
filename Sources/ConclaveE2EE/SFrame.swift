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
        withUnsafeTemporaryAllocation(byteCount: Self.maxLength, alignment: 1) { buffer in
            guard let base = buffer.baseAddress else { return }
            encode(to: base)
            output.append(contentsOf: UnsafeRawBufferPointer(start: base, count: encodedLength))
        }
    }

    /// Parses a header at the start of `bytes`, returning it and its length.
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(SFrameHeaderError) -> (
        header: SFrameHeader, length: Int
    ) {
        let parsed = bytes.withUnsafeBytes { raw in Result { () throws(SFrameHeaderError) in try parse(raw) } }
        return try parsed.get()
    }

    /// Parses a header at the start of `bytes`, returning it and its length.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(SFrameHeaderError) -> (
        header: SFrameHeader, length: Int
    ) {
        guard let config = bytes.first else { throw .empty }
        var index = 1
        func field(extended: Bool, value: UInt8, name: String) throws(SFrameHeaderError) -> UInt64 {
            guard extended else { return UInt64(value) }
            let length = Int(value) + 1
            guard bytes.count - index >= length else {
                throw .truncated(field: name, needed: length, available: bytes.count - index)
            }
            var result: UInt64 = 0
            for offset in 0..<length { result = result << 8 | UInt64(bytes[index + offset]) }
            index += length
            return result
        }
        let keyID = try field(extended: config & 0x80 != 0, value: (config >> 4) & 0x07, name: "key id")
        let counter = try field(extended: config & 0x08 != 0, value: config & 0x07, name: "counter")
        return (SFrameHeader(keyID: keyID, counter: counter), index)
    }

    /// The length of the encoded header.
    var encodedLength: Int {
        1 + (keyID >= 8 ? Self.minimalLength(keyID) : 0) + (counter >= 8 ? Self.minimalLength(counter) : 0)
    }

    /// Writes the encoded header (`encodedLength` bytes) to `destination`.
    func encode(to destination: UnsafeMutableRawPointer) {
        let kidLength = Self.minimalLength(keyID)
        let ctrLength = Self.minimalLength(counter)
        var config: UInt8 = 0
        config |= keyID < 8 ? UInt8(keyID) << 4 : 0x80 | UInt8(kidLength - 1) << 4
        config |= counter < 8 ? UInt8(counter) : 0x08 | UInt8(ctrLength - 1)
        destination.storeBytes(of: config, as: UInt8.self)
        var offset = 1
        if keyID >= 8 {
            Self.storeBigEndian(keyID, length: kidLength, to: destination + offset)
            offset += kidLength
        }
        if counter >= 8 { Self.storeBigEndian(counter, length: ctrLength, to: destination + offset) }
    }

    static func storeBigEndian(_ value: UInt64, length: Int, to destination: UnsafeMutableRawPointer) {
        for index in 0..<length {
            let shift = UInt64((length - 1 - index) * 8)
            destination.storeBytes(of: UInt8(truncatingIfNeeded: value >> shift), toByteOffset: index, as: UInt8.self)
        }
    }

    /// The longest header: config byte, 8-byte key id, 8-byte counter.
    static let maxLength = 17

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

    /// Writes the 12-byte nonce for `counter` to `destination`.
    func writeNonce(counter: UInt64, to destination: UnsafeMutableRawPointer) {
        for index in 0..<Self.nonceLength {
            var byte = salt[index]
            let fromEnd = Self.nonceLength - 1 - index
            if fromEnd < 8 { byte ^= UInt8(truncatingIfNeeded: counter >> UInt64(fromEnd * 8)) }
            destination.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
        }
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

/// The material of one key id together with an AES-256-GCM cipher for its key, so a stage sets
/// the key up once per key id rather than once per frame.
///
/// Not thread-safe (the cipher is not); each stage keeps its own under its lock.
final class SFrameKeyContext {
    let material: SFrameKeyMaterial
    let cipher: any FrameCipher

    /// Nil only if `cipher` cannot set up the key.
    init?(material: SFrameKeyMaterial, cipher: any FrameCipher.Type) {
        guard let cipher = cipher.make(key: material.key) else { return nil }
        self.material = material
        self.cipher = cipher
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
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self,
        appendingTo output: inout [UInt8]
    ) {
        // A 32-byte key always makes a cipher, and sealing into a sized buffer cannot fail.
        guard let key = SFrameKeyContext(material: material, cipher: cipher) else {
            preconditionFailure("AES-256-GCM context setup failed")
        }
        let header = SFrameHeader(keyID: material.keyID, counter: counter)
        let start = output.count
        let length = sealedLength(header: header, plaintextCount: plaintext.count)
        output.append(contentsOf: repeatElement(0, count: length))
        let sealed = plaintext.withUnsafeBytes { plaintext in
            metadata.withUnsafeBytes { metadata in
                output.withUnsafeMutableBytes { buffer in
                    guard let base = buffer.baseAddress else { return false }
                    return seal(plaintext: plaintext, metadata: metadata, header: header, key: key, to: base + start)
                }
            }
        }
        guard sealed else { preconditionFailure("AES-GCM seal failed with a valid key and nonce") }
    }

    /// Bytes `seal` writes for `header` and a plaintext of `plaintextCount` bytes.
    static func sealedLength(header: SFrameHeader, plaintextCount: Int) -> Int {
        header.encodedLength + plaintextCount + SFrameKeyMaterial.tagLength
    }

    /// Writes `header ‖ ciphertext ‖ tag` (`sealedLength` bytes) to `destination`, authenticating
    /// `header ‖ metadata`. `plaintext` must not overlap `destination`. False if the cipher fails.
    static func seal(
        plaintext: UnsafeRawBufferPointer,
        metadata: UnsafeRawBufferPointer,
        header: SFrameHeader,
        key: SFrameKeyContext,
        to destination: UnsafeMutableRawPointer
    ) -> Bool {
        header.encode(to: destination)
        let headerLength = header.encodedLength
        let ciphertext = destination + headerLength
        let tag = ciphertext + plaintext.count
        return withUnsafeTemporaryAllocation(
            byteCount: SFrameKeyMaterial.nonceLength + SFrameHeader.maxLength + metadata.count,
            alignment: 1
        ) { scratch in
            guard let nonce = scratch.baseAddress else { return false }
            key.material.writeNonce(counter: header.counter, to: nonce)
            // The AAD is the header as written, then the metadata; without metadata it is the header
            // in place.
            var aad = UnsafeRawBufferPointer(start: destination, count: headerLength)
            if let metadataBase = metadata.baseAddress, metadata.count > 0 {
                let joined = nonce + SFrameKeyMaterial.nonceLength
                joined.copyMemory(from: destination, byteCount: headerLength)
                (joined + headerLength).copyMemory(from: metadataBase, byteCount: metadata.count)
                aad = UnsafeRawBufferPointer(start: joined, count: headerLength + metadata.count)
            }
            return key.cipher.seal(nonce: nonce, aad: aad, plaintext: plaintext, ciphertext: ciphertext, tag: tag)
        }
    }

    /// Parses the header of `sealed`, asks `material` for the keys of its key id, and opens it.
    ///
    /// - Returns: the plaintext and the parsed header.
    public static func open(
        _ sealed: ArraySlice<UInt8>,
        metadata: ArraySlice<UInt8>,
        codec: MediaCodec,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self,
        material: (UInt64) throws(FrameDecryptionError) -> SFrameKeyMaterial
    ) throws(FrameDecryptionError) -> (plaintext: [UInt8], header: SFrameHeader) {
        let result = sealed.withUnsafeBytes { sealedBytes in
            metadata.withUnsafeBytes { metadataBytes in
                var header = SFrameHeader(keyID: 0, counter: 0)
                var failure: FrameDecryptionError?
                let plaintext = [UInt8](unsafeUninitializedCapacity: max(sealed.count, 1)) { buffer, count in
                    guard let destination = UnsafeMutableRawPointer(buffer.baseAddress) else { return }
                    do throws(FrameDecryptionError) {
                        let opened = try open(
                            sealed: sealedBytes,
                            offset: sealed.startIndex,
                            metadata: metadataBytes,
                            codec: codec,
                            key: { (keyID: UInt64) throws(FrameDecryptionError) -> SFrameKeyContext in
                                let keys = try material(keyID)
                                guard let context = SFrameKeyContext(material: keys, cipher: cipher) else {
                                    throw FrameDecryptionError(
                                        .authenticationFailed,
                                        codec: codec,
                                        "AES-256-GCM context setup failed"
                                    )
                                }
                                return context
                            },
                            to: destination
                        )
                        header = opened.header
                        count = opened.count
                    } catch {
                        failure = error
                    }
                }
                return (plaintext, header, failure)
            }
        }
        if let failure = result.2 { throw failure }
        return (result.0, result.1)
    }

    /// Parses the header of `sealed`, asks `key` for the context of its key id, and opens it into
    /// `destination`, which must have room for `sealed.count` bytes. Error offsets are reported as
    /// `offset` plus the position in `sealed`.
    ///
    /// - Returns: the parsed header and the plaintext length.
    static func open(
        sealed: UnsafeRawBufferPointer,
        offset: Int,
        metadata: UnsafeRawBufferPointer,
        codec: MediaCodec,
        key: (UInt64) throws(FrameDecryptionError) -> SFrameKeyContext,
        to destination: UnsafeMutableRawPointer
    ) throws(FrameDecryptionError) -> (header: SFrameHeader, count: Int) {
        let parsed: (header: SFrameHeader, length: Int)
        do {
            parsed = try SFrameHeader.parse(sealed)
        } catch {
            throw FrameDecryptionError(.malformedHeader, codec: codec, at: offset, error.description)
        }
        let bodyLength = sealed.count - parsed.length
        guard bodyLength >= SFrameKeyMaterial.tagLength, let sealedBase = sealed.baseAddress else {
            throw FrameDecryptionError(
                .truncated,
                codec: codec,
                at: offset + sealed.count,
                "SFrame body of \(bodyLength) bytes is shorter than the 16-byte tag"
            )
        }
        let keys = try key(parsed.header.keyID)
        let plaintextCount = bodyLength - SFrameKeyMaterial.tagLength
        let opened = withUnsafeTemporaryAllocation(
            byteCount: SFrameKeyMaterial.nonceLength + parsed.length + metadata.count,
            alignment: 1
        ) { scratch -> Bool in
            guard let nonce = scratch.baseAddress else { return false }
            keys.material.writeNonce(counter: parsed.header.counter, to: nonce)
            var aad = UnsafeRawBufferPointer(start: sealedBase, count: parsed.length)
            if let metadataBase = metadata.baseAddress, metadata.count > 0 {
                let joined = nonce + SFrameKeyMaterial.nonceLength
                joined.copyMemory(from: sealedBase, byteCount: parsed.length)
                (joined + parsed.length).copyMemory(from: metadataBase, byteCount: metadata.count)
                aad = UnsafeRawBufferPointer(start: joined, count: parsed.length + metadata.count)
            }
            return keys.cipher.open(
                nonce: nonce,
                aad: aad,
                ciphertext: UnsafeRawBufferPointer(start: sealedBase + parsed.length, count: plaintextCount),
                tag: sealedBase + parsed.length + plaintextCount,
                plaintext: destination
            )
        }
        guard opened else {
            throw FrameDecryptionError(
                .authenticationFailed,
                codec: codec,
                at: offset + parsed.length,
                "GCM tag did not verify for key id \(parsed.header.keyID)"
            )
        }
        return (parsed.header, plaintextCount)
    }
}
