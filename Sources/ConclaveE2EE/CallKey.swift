import Crypto
import Foundation

/// The 32-byte AES-256 media key shared by everyone in a call (ECall's "session AES key").
///
/// The bytes are reachable only through `withUnsafeBytes`, `hexString` and `symmetricKey`, and the
/// description is redacted, so a key that ends up in string interpolation, a log line or an error
/// message shows as `CallKey(<redacted>)`.
public struct CallKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The length of every call key, in bytes.
    public static let byteCount = 32

    let bytes: [UInt8]
    /// The same bytes as a swift-crypto key, made once: media stages use it for every frame.
    public let symmetricKey: SymmetricKey

    /// Wraps exactly 32 key bytes.
    public init(bytes: some Collection<UInt8>) throws(KeyMaterialError) {
        guard bytes.count == Self.byteCount else {
            throw .wrongLength(what: "call key", expected: Self.byteCount, actual: bytes.count)
        }
        self.bytes = Array(bytes)
        symmetricKey = SymmetricKey(data: self.bytes)
    }

    /// Parses 64 hexadecimal characters (either case), as `conclave keys wrap --key` takes them.
    public init(hex: String) throws(KeyMaterialError) {
        guard let decoded = HexCoding.decode(hex) else {
            throw .invalidEncoding(what: "call key", expected: "64 hexadecimal characters")
        }
        try self.init(bytes: decoded)
    }

    /// A fresh key from the system's secure random generator.
    public static func random() -> CallKey {
        let key = SymmetricKey(size: .bits256)
        // A 256-bit SymmetricKey always holds 32 bytes, so this cannot fail.
        return key.withUnsafeBytes { CallKey(unchecked: Array($0)) }
    }

    init(unchecked bytes: [UInt8]) {
        precondition(bytes.count == Self.byteCount)
        self.bytes = bytes
        symmetricKey = SymmetricKey(data: bytes)
    }

    /// The key as 64 lowercase hexadecimal characters, for `conclave keys unwrap` only.
    public var hexString: String { HexCoding.encode(bytes) }

    public static func == (lhs: CallKey, rhs: CallKey) -> Bool { lhs.bytes == rhs.bytes }

    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// Gives temporary access to the raw key bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    public var description: String { "CallKey(<redacted>)" }
    public var debugDescription: String { description }
}

/// Key material that could not be parsed. Never carries the key bytes themselves.
public enum KeyMaterialError: Error, Equatable, CustomStringConvertible {
    /// A key or field has the wrong number of bytes.
    case wrongLength(what: String, expected: Int, actual: Int)
    /// A key or field is not in the expected text encoding (base64, hex).
    case invalidEncoding(what: String, expected: String)
    /// The bytes decode but are not a usable key (bad DER, point not on the curve, RSA under 2048 bits).
    case unusableKey(what: String, reason: String)
    /// The key type cannot do what was asked (for example unwrap an RSA wrap with a P-256 key).
    case keyTypeMismatch(expected: String, actual: String)
    /// The wrapped call key did not open: wrong recipient key or corrupted string.
    case unwrapFailed(format: String)

    public var description: String {
        switch self {
        case .wrongLength(let what, let expected, let actual):
            "\(what): expected \(expected) bytes, got \(actual)"
        case .invalidEncoding(let what, let expected):
            "\(what): not valid, expected \(expected)"
        case .unusableKey(let what, let reason):
            "\(what): unusable key (\(reason))"
        case .keyTypeMismatch(let expected, let actual):
            "this needs a \(expected) device key but the device key is \(actual)"
        case .unwrapFailed(let format):
            "the \(format) wrapped call key did not open with this device's private key (wrong recipient or corrupted)"
        }
    }
}

/// Hexadecimal text to bytes and back.
public enum HexCoding {
    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes of an even-length hex string, or nil if any character is not a hex digit.
    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
