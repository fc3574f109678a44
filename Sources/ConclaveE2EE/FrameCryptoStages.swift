import ConclaveCore
import Crypto
import Logging
import Synchronization

/// The media encryption format of a call.
public enum FrameCryptoFormat: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Bit-exact with ECall iOS (`ECallFrameFormat`).
    case ecall
    /// RFC 9605 SFrame per codec (`SFrameFrameFormat`), for peers that support it.
    case sframe

    public var description: String { rawValue }
}

/// The frame encryption state of one call: its key ring, format, SFrame counter, failure counters
/// and "key needed" rate limit. Encryptor and decryptor stages for each stream come from here.
///
/// Thread-safe: stages run on media threads while signalling installs keys.
public final class CallFrameCrypto: Sendable {
    public let callID: UInt64
    public let format: FrameCryptoFormat
    public let keyRing: CallKeyRing
    private let logger: Logger
    private let onKeyNeeded: (@Sendable (KeyNeededEvent) -> Void)?
    /// The next SFrame counter of this device, shared by all its encryptors so that two streams
    /// (audio and video) never use the same counter under the same key id.
    private let sframeCounter = Atomic<UInt64>(0)
    private let warnedVP8 = Atomic<Bool>(false)
    private let failures = Mutex(DecryptFailureCounts())
    private let limiter: Mutex<KeyRequestLimiter>

    /// - Parameters:
    ///   - onKeyNeeded: called (on the media thread, so keep it short) when a frame fails and the
    ///     ECall rate limits allow asking for the key again.
    public init(
        callID: UInt64,
        format: FrameCryptoFormat,
        keyRing: CallKeyRing = CallKeyRing(),
        keyRequestPolicy: KeyRequestPolicy = .ecall,
        logger: Logger,
        onKeyNeeded: (@Sendable (KeyNeededEvent) -> Void)? = nil
    ) {
        self.callID = callID
        self.format = format
        self.keyRing = keyRing
        self.logger = logger
        self.onKeyNeeded = onKeyNeeded
        limiter = Mutex(KeyRequestLimiter(policy: keyRequestPolicy))
    }

    /// An encryptor for this device's stream of `codec`. `senderID` goes into `sframe` key ids.
    /// `cipher` does the AES-256-GCM (one instance per key, kept across frames); the composition
    /// layer passes OpenSSL's, which seals straight into the outgoing frame.
    public func makeEncryptor(
        codec: MediaCodec,
        senderID: UInt64,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) -> FrameEncryptor {
        FrameEncryptor(call: self, codec: codec, senderID: senderID, cipher: cipher)
    }

    /// A decryptor for a remote stream; failures are counted under `senderID`. `cipher` as for
    /// ``makeEncryptor(codec:senderID:cipher:)``: either opens what the other seals.
    public func makeDecryptor(
        codec: MediaCodec,
        senderID: UInt64,
        cipher: any FrameCipher.Type = SwiftCryptoFrameCipher.self
    ) -> FrameDecryptor {
        FrameDecryptor(call: self, codec: codec, senderID: senderID, cipher: cipher)
    }

    /// Failures so far.
    public var failureCounts: DecryptFailureCounts { failures.withLock { $0 } }

    /// Signalling got an answer to a key request: allow the next one.
    public func keyRequestCompleted() { limiter.withLock { $0.requestCompleted() } }

    // MARK: Internals used by the stages

    func nextSFrameCounter() throws(FrameEncryptionError) -> UInt64 {
        let value = sframeCounter.add(1, ordering: .relaxed).oldValue
        guard value < UInt64.max - 1 else { throw .counterExhausted }
        return value
    }

    func warnVP8InClearOnce(direction: String) {
        guard !warnedVP8.exchange(true, ordering: .relaxed) else { return }
        logger.warning(
            "VP8 is not end-to-end encrypted in the ecall format (ECall iOS does not encrypt it); frames pass in clear",
            metadata: ["call": "\(callID)", "direction": "\(direction)"]
        )
    }

    func recordFailure(_ error: FrameDecryptionError, senderID: UInt64) {
        failures.withLock { $0.record(senderID: senderID, reason: error.reason) }
        logger.debug(
            "frame dropped",
            metadata: ["call": "\(callID)", "sender": "\(senderID)", "error": "\(error.description)"]
        )
        guard let onKeyNeeded else { return }
        let event = KeyNeededEvent(callID: callID, senderID: senderID, codec: error.codec, reason: error.reason)
        let now = keyRing.timeSource.now()
        if limiter.withLock({ $0.shouldRequest(reason: event.ecallReason, at: now) }) {
            onKeyNeeded(event)
        }
    }
}

/// Encrypts this device's frames of one codec, between encoder and packetizer.
public final class FrameEncryptor: Sendable {
    public let codec: MediaCodec
    public let senderID: UInt64
    private let call: CallFrameCrypto
    private let cipher: any FrameCipher.Type
    /// The cipher for the current key (and for `sframe` its derived material), reused until the
    /// key changes. Also serializes the stage: a cipher is not thread-safe.
    private let keys = Mutex<EncryptionKeys?>(nil)

    /// What `keys` holds: the entry it was made for and one cipher for the call's format.
    private struct EncryptionKeys {
        var entry: KeyRingEntry
        var ecall: (any FrameCipher)?
        var sframe: SFrameKeyContext?
    }

    init(call: CallFrameCrypto, codec: MediaCodec, senderID: UInt64, cipher: any FrameCipher.Type) {
        self.call = call
        self.codec = codec
        self.senderID = senderID
        self.cipher = cipher
    }

    /// The frame to send, encrypted with the call's current key.
    ///
    /// Throws instead of ever returning plaintext of an encrypted codec: with no key (ECall would send
    /// H264 slices in clear) or a frame the format cannot carry, the frame must not be sent.
    public func encrypt(_ frame: EncodedFrame) throws(FrameEncryptionError) -> EncodedFrame {
        if call.format == .ecall && frame.codec == .vp8 {
            call.warnVP8InClearOnce(direction: "send")
            return frame
        }
        guard let entry = call.keyRing.current() else { throw .noKey(codec: frame.codec) }
        let format = call.format
        let senderID = senderID
        let call = call
        let data = frame.data
        let codec = frame.codec
        let cipher = cipher
        let sealed = try keys.withLock { (keys) throws(FrameEncryptionError) -> [UInt8] in
            if keys?.entry != entry { keys = EncryptionKeys(entry: entry) }
            switch format {
            case .ecall:
                let context: any FrameCipher
                if let cached = keys?.ecall {
                    context = cached
                } else {
                    guard let made = cipher.make(key: entry.key) else { throw .cipherFailed(codec: codec) }
                    keys?.ecall = made
                    context = made
                }
                return codec == .h264
                    ? try ECallFrameFormat.sealH264(data, context: context)
                    : try ECallFrameFormat.sealAudio(data, context: context)
            case .sframe:
                let key: SFrameKeyContext
                if let cached = keys?.sframe {
                    key = cached
                } else {
                    // HKDF-SHA512 runs once per key and sender, not per frame.
                    let keyID = SFrameKeyID(senderID: senderID, epoch: UInt8(truncatingIfNeeded: entry.epoch))
                    guard
                        let made = SFrameKeyContext(
                            material: SFrameKeyMaterial(callKey: entry.key, keyID: keyID.rawValue),
                            cipher: cipher
                        )
                    else { throw .cipherFailed(codec: codec) }
                    keys?.sframe = made
                    key = made
                }
                return try SFrameFrameFormat.seal(data, codec: codec, key: key) {
                    () throws(FrameEncryptionError) -> UInt64 in try call.nextSFrameCounter()
                }
            }
        }
        var output = frame
        output.data = sealed
        return output
    }
}

/// Decrypts one remote stream, between depacketizer and consumer (decoder or recorder).
public final class FrameDecryptor: Sendable {
    public let codec: MediaCodec
    public let senderID: UInt64
    private let call: CallFrameCrypto
    private let cipher: any FrameCipher.Type
    /// Ciphers for the keys this stream may use, reused across frames; the lock also serializes
    /// the stage, because a cipher is not thread-safe.
    private let keys = Mutex(DecryptionKeys())

    /// What `keys` holds.
    private struct DecryptionKeys {
        /// `ecall`: the ring's candidates when the ciphers were made, and one cipher for each.
        var ecallEntries: [KeyRingEntry] = []
        var ecallContexts: [any FrameCipher] = []
        /// `sframe`: derived material and context by key id; small, one key id per epoch.
        var sframe: [UInt64: (entry: KeyRingEntry, key: SFrameKeyContext)] = [:]
    }

    init(call: CallFrameCrypto, codec: MediaCodec, senderID: UInt64, cipher: any FrameCipher.Type) {
        self.call = call
        self.codec = codec
        self.senderID = senderID
        self.cipher = cipher
    }

    /// The decrypted frame. A frame that does not decrypt is counted, may trigger the "key needed"
    /// callback, and is thrown as an error: the caller drops it and never hands it on as media.
    public func decrypt(_ frame: EncodedFrame) throws(FrameDecryptionError) -> EncodedFrame {
        try decryptReportingEpoch(frame).frame
    }

    /// ``decrypt(_:)``, also telling the epoch of the key that opened the frame: nil when nothing
    /// in it was encrypted (VP8 in `ecall`, which ECall sends in clear, or an H264 frame of
    /// parameter sets only). Recordings list the epochs each track was really decrypted with.
    public func decryptReportingEpoch(_ frame: EncodedFrame) throws(FrameDecryptionError)
        -> (frame: EncodedFrame, keyEpoch: UInt64?)
    {
        do {
            return try open(frame)
        } catch {
            call.recordFailure(error, senderID: senderID)
            throw error
        }
    }

    private func open(_ frame: EncodedFrame) throws(FrameDecryptionError) -> (frame: EncodedFrame, keyEpoch: UInt64?) {
        let data = frame.data
        let codec = frame.codec
        let opened: [UInt8]
        var epoch: UInt64?
        switch call.format {
        case .ecall:
            if codec == .vp8 {
                call.warnVP8InClearOnce(direction: "receive")
                return (frame, nil)
            }
            let candidates = call.keyRing.candidates(for: codec.kind)
            let cipher = cipher
            opened = try keys.withLock { (keys) throws(FrameDecryptionError) -> [UInt8] in
                if keys.ecallEntries != candidates {
                    try Self.remake(&keys, for: candidates, cipher: cipher, codec: codec)
                }
                var openedWith: Int?
                let bytes =
                    codec == .h264
                    ? try ECallFrameFormat.openH264(data, contexts: keys.ecallContexts, openedWith: &openedWith)
                    : try ECallFrameFormat.openAudio(data, contexts: keys.ecallContexts, openedWith: &openedWith)
                if let openedWith, openedWith < keys.ecallEntries.count { epoch = keys.ecallEntries[openedWith].epoch }
                return bytes
            }
        case .sframe:
            let call = call
            let cipher = cipher
            opened = try keys.withLock { (keys) throws(FrameDecryptionError) -> [UInt8] in
                try SFrameFrameFormat.open(data, codec: codec) {
                    (rawKeyID: UInt64) throws(FrameDecryptionError) -> SFrameKeyContext in
                    let (key, keyEpoch) = try Self.key(
                        forKeyID: rawKeyID,
                        codec: codec,
                        call: call,
                        cipher: cipher,
                        cache: &keys.sframe
                    )
                    epoch = keyEpoch
                    return key
                }
            }
        }
        var output = frame
        output.data = opened
        return (output, epoch)
    }

    /// Makes the `ecall` ciphers match `candidates`, keeping those whose key is still a candidate.
    private static func remake(
        _ keys: inout DecryptionKeys,
        for candidates: [KeyRingEntry],
        cipher: any FrameCipher.Type,
        codec: MediaCodec
    ) throws(FrameDecryptionError) {
        var contexts: [any FrameCipher] = []
        for candidate in candidates {
            if let index = keys.ecallEntries.firstIndex(of: candidate) {
                contexts.append(keys.ecallContexts[index])
            } else if let made = cipher.make(key: candidate.key) {
                contexts.append(made)
            } else {
                throw FrameDecryptionError(.authenticationFailed, codec: codec, "AES-256-GCM context setup failed")
            }
        }
        keys.ecallEntries = candidates
        keys.ecallContexts = contexts
    }

    /// The material and context of an `sframe` key id, derived once per key id and key.
    private static func key(
        forKeyID rawKeyID: UInt64,
        codec: MediaCodec,
        call: CallFrameCrypto,
        cipher: any FrameCipher.Type,
        cache: inout [UInt64: (entry: KeyRingEntry, key: SFrameKeyContext)]
    ) throws(FrameDecryptionError) -> (SFrameKeyContext, UInt64) {
        let keyID = SFrameKeyID(rawValue: rawKeyID)
        guard let entry = call.keyRing.entry(epochByte: keyID.epoch, for: codec.kind) else {
            if call.keyRing.current() == nil {
                throw FrameDecryptionError(.noKey, codec: codec, "no call key installed")
            }
            throw FrameDecryptionError(
                .unknownKeyID,
                codec: codec,
                "key id \(rawKeyID) (\(keyID)) is not in the key ring"
            )
        }
        if let cached = cache[rawKeyID], cached.entry == entry { return (cached.key, entry.epoch) }
        guard
            let key = SFrameKeyContext(material: SFrameKeyMaterial(callKey: entry.key, keyID: rawKeyID), cipher: cipher)
        else {
            throw FrameDecryptionError(.authenticationFailed, codec: codec, "AES-256-GCM context setup failed")
        }
        if cache.count >= 16 { cache.removeAll() }
        cache[rawKeyID] = (entry, key)
        return (key, entry.epoch)
    }
}
