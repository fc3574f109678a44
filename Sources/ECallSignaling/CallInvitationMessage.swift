import ConclaveE2EE
import Foundation

/// Why a received `call_invitation` cannot be used.
public enum InvitationMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A field the invitation needs is missing.
    case missingField(String)
    /// The caller's device is not in the invitation's own roster.
    case callerNotInRoster
    /// The invitation is not addressed to this device.
    case otherDevice
    /// The signature does not hold (and the invitation is not accepted unsigned).
    case signature(SignatureError)
    /// The key does not open with this device's key.
    case key(KeyMaterialError)

    public var description: String {
        switch self {
        case .missingField(let field): "call invitation: no '\(field)'"
        case .callerNotInRoster: "call invitation: the caller's device is not in its roster"
        case .otherDevice: "call invitation: addressed to another device"
        case .signature(let error): "call invitation: \(error)"
        case .key(let error): "call invitation: \(error)"
        }
    }
}

/// A `call_invitation` as this device received and checked it.
public struct ReceivedInvitation: Sendable {
    public var callId: UInt64
    public var roomId: UInt64
    public var caller: RosterEntry
    public var key: CallKey
    public var janusUrl: String?
    public var crypto: FrameCryptoFormat?
    public var isVideo: Bool
    /// Everyone invited: what this device's ``CallKeyLifecycle`` starts from.
    public var roster: [RosterEntry]
    /// The invitation came without a signature (ECall's form, accepted in ECall-compatible mode).
    public var unsigned: Bool
}

extension SignalMessage {
    /// The `call_invitation` for `recipient`: ECall's fields (the key wrapped for that device) plus
    /// Conclave's Janus URL, crypto format and roster, signed by the caller's device.
    ///
    /// A signed invitation proves only that the caller holds the key its roster lists; that the
    /// roster's keys are the right people's is for the user to check (`conclave keys` fingerprints).
    public static func callInvitation(
        callId: UInt64,
        roomId: UInt64,
        caller: RosterEntry,
        recipient: RosterEntry,
        roster: [RosterEntry],
        key: CallKey,
        janusUrl: String?,
        crypto: FrameCryptoFormat,
        isVideo: Bool,
        signedBy identity: DeviceIdentity,
        at now: Date
    ) throws(KeyMaterialError) -> SignalMessage {
        var message = SignalMessage(type: .callInvitation)
        message.callId = callId
        message.roomId = roomId
        message.callerId = caller.userId
        message.callerDeviceId = caller.deviceId
        message.callerName = caller.displayName
        message.calleeId = recipient.userId
        message.calleeDeviceId = recipient.deviceId
        message.senderId = caller.userId
        message.senderDeviceId = caller.deviceId
        message.isVideo = isVideo
        message.isOnGoing = false
        message.janusUrl = janusUrl
        message.crypto = crypto
        message.roster = roster
        message.epoch = 0
        message.encryptedAESKey = try KeyWrapping.wrap(
            key,
            for: try DevicePublicKey(publicKeyString: recipient.publicKey)
        )
        return try message.signed(by: identity, at: now)
    }

    /// Checks a received `call_invitation` and opens its key for `identity` (this device, `me`).
    ///
    /// The signature must verify against the caller's key in the invitation's roster; with
    /// `acceptUnsigned` (ECall-compatible mode) an unsigned invitation is taken as it is, as ECall
    /// takes it, and marked ``ReceivedInvitation/unsigned``.
    public func openInvitation(
        as me: DeviceAddress,
        with identity: DeviceIdentity,
        now: Date,
        acceptUnsigned: Bool = false,
        window: Double = SignalMessage.defaultSignatureWindow
    ) throws(InvitationMessageError) -> ReceivedInvitation {
        guard let callId else { throw .missingField("callId") }
        guard let roomId else { throw .missingField("roomId") }
        guard let callerId, let callerDeviceId else { throw .missingField("callerId") }
        guard let encryptedAESKey else { throw .missingField("encryptedAESKey") }
        if let calleeDeviceId, calleeDeviceId != me.deviceId { throw .otherDevice }
        if let calleeId, calleeId != me.userId { throw .otherDevice }
        let roster = self.roster ?? []
        let callerDevice = DeviceAddress(userId: callerId, deviceId: callerDeviceId)
        let caller =
            roster.first { $0.device == callerDevice }
            ?? RosterEntry(userId: callerId, deviceId: callerDeviceId, displayName: callerName ?? "", publicKey: "")
        if signature != nil || !acceptUnsigned {
            guard roster.contains(where: { $0.device == callerDevice }) else { throw .callerNotInRoster }
            do {
                try verifySignature(publicKey: caller.publicKey, now: now, window: window)
            } catch {
                throw .signature(error)
            }
        }
        let key: CallKey
        do {
            key = try KeyWrapping.unwrap(encryptedAESKey, with: identity)
        } catch {
            throw .key(error)
        }
        return ReceivedInvitation(
            callId: callId,
            roomId: roomId,
            caller: caller,
            key: key,
            janusUrl: janusUrl,
            crypto: crypto,
            isVideo: isVideo ?? true,
            roster: roster,
            unsigned: signature == nil
        )
    }
}
