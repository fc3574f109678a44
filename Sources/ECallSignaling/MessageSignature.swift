import ConclaveE2EE
import Foundation

/// Why a key message's signature was not accepted.
public enum SignatureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The message carries no signature (or no send time to sign).
    case unsigned
    /// The signature is not base64, or the signer's public key string does not parse.
    case malformed(String)
    /// The signature does not match the message and the signer's key: a changed field or another
    /// device's key.
    case invalid
    /// The send time is outside the accepted window around now: a replay or a badly wrong clock.
    case outsideWindow(sentAt: Double, now: Double)

    public var description: String {
        switch self {
        case .unsigned: "not signed"
        case .malformed(let what): "malformed signature: \(what)"
        case .invalid: "signature does not match the message and the sender's device key"
        case .outsideWindow(let sentAt, let now):
            "sent at \(sentAt), \(Int((now - sentAt).rounded())) s from now: outside the replay window"
        }
    }
}

extension SignalMessage {
    /// How far a signed send time may be from the receiver's clock, either way.
    public static let defaultSignatureWindow: Double = 60

    /// The bytes a signature covers: a version tag, then each field that decides what a key message
    /// does (type, every id, the wrapped key, the rotation time, epoch, send time and, for
    /// invitations, the Janus URL, crypto format and roster), each length-prefixed and an absent
    /// field distinct from an empty one, so that no two messages share a byte string.
    public var signingBytes: [UInt8] {
        var out = Array("conclave-signal-v1".utf8)
        func field(_ bytes: [UInt8]?) {
            guard let bytes else {
                out.append(0)
                return
            }
            out.append(1)
            let count = UInt32(clamping: bytes.count)
            withUnsafeBytes(of: count.bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes.prefix(Int(count)))
        }
        func number(_ value: UInt64?) { field(value.map { v in withUnsafeBytes(of: v.bigEndian) { Array($0) } }) }
        func time(_ value: Double?) { number(value?.bitPattern) }
        func text(_ value: String?) { field(value.map { Array($0.utf8) }) }
        text(type.rawValue)
        for (_, path) in Self.idFields where path != \.feedId && path != \.handleId { number(self[keyPath: path]) }
        text(encryptedAESKey)
        time(keyRotationTimestamp)
        time(sentAt)
        text(janusUrl)
        text(crypto?.rawValue)
        number(roster.map { UInt64($0.count) })
        for entry in roster ?? [] {
            number(entry.userId)
            number(entry.deviceId)
            text(entry.displayName)
            text(entry.publicKey)
            number(entry.isHost ? 1 : 0)
        }
        return out
    }

    /// This message stamped with `sentAt` = `now` and signed by `identity`.
    public func signed(by identity: DeviceIdentity, at now: Date) throws(KeyMaterialError) -> SignalMessage {
        var message = self
        message.signature = nil
        message.sentAt = now.timeIntervalSince1970
        message.signature = Data(try identity.sign(message.signingBytes)).base64EncodedString()
        return message
    }

    /// Checks that the message was signed by the device whose published key is `publicKey`, within
    /// `window` seconds of `now`.
    public func verifySignature(
        publicKey: String,
        now: Date,
        window: Double = SignalMessage.defaultSignatureWindow
    ) throws(SignatureError) {
        guard let signature, let sentAt else { throw .unsigned }
        guard let signatureBytes = Data(base64Encoded: signature) else { throw .malformed("not base64") }
        let key: DevicePublicKey
        do {
            key = try DevicePublicKey(publicKeyString: publicKey)
        } catch {
            throw .malformed("the sender's public key: \(error)")
        }
        guard key.isValidSignature(signatureBytes, for: signingBytes) else { throw .invalid }
        let nowSeconds = now.timeIntervalSince1970
        guard abs(nowSeconds - sentAt) <= window else { throw .outsideWindow(sentAt: sentAt, now: nowSeconds) }
    }
}
