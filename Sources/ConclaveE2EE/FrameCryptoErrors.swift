import ConclaveCore

/// Why a received frame was dropped instead of being handed to the decoder or recorder.
///
/// The raw values are stable: they name counters and appear in `conclave` status output.
public enum DecryptFailureReason: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The AEAD tag did not verify with any candidate key: tampered bytes, a wrong key, or (for
    /// `ecall` H264) a plaintext slice from a sender that has no key yet.
    case authenticationFailed = "authentication_failed"
    /// No key is installed for this call yet.
    case noKey = "no_key"
    /// An `sframe` key id names an epoch the key ring does not hold.
    case unknownKeyID = "unknown_key_id"
    /// The frame is shorter than its format's fixed overhead.
    case truncated
    /// The frame's framing (SFrame header, NAL structure, escape trailer) does not parse.
    case malformedHeader = "malformed_header"
    /// The frame carries no encryption marker at all (`ecall` audio without the 0xFF byte).
    case notEncrypted = "not_encrypted"

    public var description: String { rawValue }
}

/// A frame that did not decrypt. It carries where and why, never key bytes or plaintext.
public struct FrameDecryptionError: Error, Hashable, CustomStringConvertible {
    /// The counted reason.
    public var reason: DecryptFailureReason
    /// The codec of the dropped frame.
    public var codec: MediaCodec
    /// The byte offset in the received frame where the problem was found, when it has one.
    public var byteOffset: Int?
    /// A short human explanation (lengths, NAL types); never key material.
    public var detail: String

    public init(_ reason: DecryptFailureReason, codec: MediaCodec, at byteOffset: Int? = nil, _ detail: String) {
        self.reason = reason
        self.codec = codec
        self.byteOffset = byteOffset
        self.detail = detail
    }

    public var description: String {
        let offset = byteOffset.map { " at byte \($0)" } ?? ""
        return "\(codec) frame dropped: \(reason)\(offset): \(detail)"
    }
}

/// A frame that could not be encrypted. The frame must then not be sent at all.
public enum FrameEncryptionError: Error, Hashable, CustomStringConvertible {
    /// No current key is installed for the call.
    case noKey(codec: MediaCodec)
    /// An `ecall` H264 frame holds more than one slice NAL unit (type 1 or 5). ECall iOS computes
    /// NAL offsets once and then shifts the buffer, so it cannot decrypt any slice after the first.
    case multipleSlices(count: Int)
    /// The frame does not have the structure its codec needs (for example H264 without start codes).
    case malformedFrame(codec: MediaCodec, detail: String)
    /// The per-sender SFrame counter is exhausted; the key must be rotated first.
    case counterExhausted
    /// The AES-256-GCM implementation reported an error (it cannot fail on valid input short of
    /// running out of memory).
    case cipherFailed(codec: MediaCodec)

    public var description: String {
        switch self {
        case .noKey(let codec):
            "\(codec) frame not sent: no call key installed yet"
        case .multipleSlices(let count):
            "H264 frame has \(count) slice NAL units; the ecall format needs exactly one slice per frame"
        case .malformedFrame(let codec, let detail):
            "\(codec) frame not encryptable: \(detail)"
        case .counterExhausted:
            "SFrame counter exhausted for this key; rotate the call key"
        case .cipherFailed(let codec):
            "\(codec) frame not sent: AES-256-GCM encryption failed"
        }
    }
}
