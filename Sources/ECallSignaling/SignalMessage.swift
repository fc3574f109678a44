import ConclaveE2EE
import Foundation

/// ECall's signaling message (`SignalMessage` in ECall iOS), plus the fields Conclave adds and ECall
/// ignores.
///
/// ECall's fields keep their names and JSON types: ids are unsigned JSON numbers, nil fields are
/// left out. Decoding is more forgiving than ECall's own (which drops a whole message for one
/// unknown enum value): ids may also be decimal strings, unknown fields are ignored and an unknown
/// `type` decodes as ``SignalMessageType/unknown(_:)`` for the caller to log and drop. A field of
/// the wrong type is a ``SignalMessageError`` that names it.
public struct SignalMessage: Sendable, Hashable {
    public var type: SignalMessageType

    // MARK: ECall's ids
    public var callerId: UInt64?
    public var callerDeviceId: UInt64?
    public var calleeId: UInt64?
    public var calleeDeviceId: UInt64?
    public var participantId: UInt64?
    public var participantDeviceId: UInt64?
    public var callId: UInt64?
    public var roomId: UInt64?
    public var feedId: UInt64?
    public var handleId: UInt64?
    public var senderId: UInt64?
    public var senderDeviceId: UInt64?

    // MARK: ECall's other fields
    public var callerName: String?
    /// The call key wrapped for the receiving device (``KeyWrapping``).
    public var encryptedAESKey: String?
    public var participantName: String?
    public var sdp: String?
    public var transaction: String?
    public var status: ParticipantStatus?
    public var isVideo: Bool?
    public var isVideoEnabled: Bool?
    public var isMuted: Bool?
    public var isOnGoing: Bool?
    public var candidate: Candidate?
    /// When a rotated key becomes current, Unix seconds with fractions.
    public var keyRotationTimestamp: Double?

    // MARK: Conclave's additions (ignored by ECall)
    /// `call_invitation`: the Janus WebSocket URL of the call.
    public var janusUrl: String?
    /// `call_invitation`: the media crypto format.
    public var crypto: FrameCryptoFormat?
    /// `call_invitation`: everyone invited, with their device keys and who holds the key role.
    public var roster: [RosterEntry]?
    /// Key messages: the rotation count of the key carried.
    public var epoch: UInt64?
    /// Key messages: when the sender signed, Unix seconds; bounds replays.
    public var sentAt: Double?
    /// Key messages: base64 signature by the sender's device key over ``signingBytes``.
    public var signature: String?

    /// A message of `type` with every other field nil.
    public init(type: SignalMessageType) {
        self.type = type
    }

    /// ECall's `candidate` object (a leftover of its peer-to-peer calls).
    public struct Candidate: Sendable, Hashable, Codable {
        public var candidate: String
        public var sdpMid: String?
        public var sdpMLineIndex: Int32

        public init(candidate: String, sdpMid: String?, sdpMLineIndex: Int32) {
            self.candidate = candidate
            self.sdpMid = sdpMid
            self.sdpMLineIndex = sdpMLineIndex
        }
    }
}

/// One device invited to a call, as the caller's roster lists it.
public struct RosterEntry: Sendable, Hashable {
    public var userId: UInt64
    public var deviceId: UInt64
    public var displayName: String
    /// The device's public key string as ECall publishes it (``DevicePublicKey``).
    public var publicKey: String
    /// Whether this device holds the call's key role at the start (the creator).
    public var isHost: Bool

    public init(userId: UInt64, deviceId: UInt64, displayName: String, publicKey: String, isHost: Bool = false) {
        self.userId = userId
        self.deviceId = deviceId
        self.displayName = displayName
        self.publicKey = publicKey
        self.isHost = isHost
    }

    /// The device, as a pair that orders by user id and then device id.
    public var device: DeviceAddress { DeviceAddress(userId: userId, deviceId: deviceId) }
}

/// A user's device: where key messages go.
public struct DeviceAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var userId: UInt64
    public var deviceId: UInt64

    public init(userId: UInt64, deviceId: UInt64) {
        self.userId = userId
        self.deviceId = deviceId
    }

    public static func < (lhs: DeviceAddress, rhs: DeviceAddress) -> Bool {
        (lhs.userId, lhs.deviceId) < (rhs.userId, rhs.deviceId)
    }

    public var description: String { "\(userId)_\(deviceId)" }
}

/// ECall's message types; anything else is kept as ``unknown(_:)``.
public enum SignalMessageType: Sendable, Hashable, CustomStringConvertible {
    case callInvitation
    case callEnded
    case callCancelled
    case participantJoined
    case participantLeft
    case participantInvited
    case participantRejected
    case participantFeedIdUpdated
    case participantUpdated
    case handoverHost
    case participantRequestRejoin
    case participantAcceptRejoin
    case keyRotation
    case requestAESKey
    case sendAESKey
    /// A type this version does not know: logged and dropped by the receiver.
    case unknown(String)

    private static let known: [(SignalMessageType, String)] = [
        (.callInvitation, "call_invitation"),
        (.callEnded, "call_ended"),
        (.callCancelled, "call_cancelled"),
        (.participantJoined, "participant_joined"),
        (.participantLeft, "participant_left"),
        (.participantInvited, "participant_invited"),
        (.participantRejected, "participant_rejected"),
        (.participantFeedIdUpdated, "participant_feedId_updated"),
        (.participantUpdated, "participant_updated"),
        (.handoverHost, "handover_host"),
        (.participantRequestRejoin, "participant_request_rejoin"),
        (.participantAcceptRejoin, "participant_accept_rejoin"),
        (.keyRotation, "key_rotation"),
        (.requestAESKey, "request_aes_key"),
        (.sendAESKey, "send_aes_key"),
    ]

    /// Every type ECall knows.
    public static var allKnown: [SignalMessageType] { known.map(\.0) }

    /// The type named by ECall's wire string.
    public init(rawValue: String) {
        self = Self.known.first { $0.1 == rawValue }?.0 ?? .unknown(rawValue)
    }

    /// ECall's wire string.
    public var rawValue: String {
        if case .unknown(let text) = self { return text }
        return Self.known.first { $0.0 == self }?.1 ?? ""
    }

    /// Whether a message of this type carries or moves the call key, and so must be signed.
    public var carriesKey: Bool {
        switch self {
        case .keyRotation, .sendAESKey, .participantAcceptRejoin, .handoverHost, .callInvitation: true
        default: false
        }
    }

    public var description: String { rawValue }
}

/// ECall's participant `status` values; others are kept as ``other(_:)``.
public enum ParticipantStatus: Sendable, Hashable {
    case inviting, accepted, rejected, reconnecting, connected, left
    case other(String)

    private static let known: [(ParticipantStatus, String)] = [
        (.inviting, "inviting"), (.accepted, "accepted"), (.rejected, "rejected"),
        (.reconnecting, "reconnecting"), (.connected, "connected"), (.left, "left"),
    ]

    public init(rawValue: String) {
        self = Self.known.first { $0.1 == rawValue }?.0 ?? .other(rawValue)
    }

    public var rawValue: String {
        if case .other(let text) = self { return text }
        return Self.known.first { $0.0 == self }?.1 ?? ""
    }
}

/// A signaling message that could not be read. Never carries key material.
public enum SignalMessageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The body is not a JSON object.
    case notJSON
    /// The required `type` field is missing or not a string.
    case missingType
    /// A field has the wrong JSON type or value.
    case wrongType(field: String, expected: String)

    public var description: String {
        switch self {
        case .notJSON: "signaling message is not a JSON object"
        case .missingType: "signaling message has no 'type' string"
        case .wrongType(let field, let expected): "signaling message field '\(field)' must be \(expected)"
        }
    }
}
