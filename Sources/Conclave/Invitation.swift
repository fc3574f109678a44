import ConclaveE2EE
import ConclaveFiles
import Foundation
import JanusProtocol

/// An invitation to an end-to-end encrypted call: ECall's invitation fields plus what a client
/// without ECall's backend needs to find the call (the Janus URL and the media crypto format).
///
/// The file is JSON. `callId` and `roomId` are written as JSON numbers, as ECall sends them, and
/// read from numbers or decimal strings (JSON numbers lose precision above 2^53 in many parsers).
/// `encryptedAESKey` is the call key wrapped for one device (ECall's format, see `KeyWrapping`),
/// so an invitation written by another tool for this device's public key works the same.
public struct CallInvitation: Sendable, Hashable {
    /// Who an invitation is for (a Conclave extension; absent in invitations from other tools).
    public struct Recipient: Sendable, Hashable {
        /// The display to join with, `"<userId>:<name>"`.
        public var display: String?
        /// ECall's `publicKeyHash` of the device the key is wrapped for, so that an invitation for
        /// another device is recognised before any key is tried.
        public var publicKeyHash: String?

        public init(display: String?, publicKeyHash: String?) {
            self.display = display
            self.publicKeyHash = publicKeyHash
        }
    }

    public var callID: UInt64
    public var roomID: UInt64
    /// The call key wrapped for the recipient device.
    public var encryptedAESKey: String
    public var callerID: String
    public var callerName: String
    public var isVideo: Bool
    /// The Janus WebSocket URL of the call.
    public var janusURL: String?
    /// The media crypto format; nil means ECall's.
    public var crypto: FrameCryptoFormat?
    public var recipient: Recipient?

    public init(
        callID: UInt64,
        roomID: UInt64,
        encryptedAESKey: String,
        callerID: String,
        callerName: String,
        isVideo: Bool = true,
        janusURL: String? = nil,
        crypto: FrameCryptoFormat? = .ecall,
        recipient: Recipient? = nil
    ) {
        self.callID = callID
        self.roomID = roomID
        self.encryptedAESKey = encryptedAESKey
        self.callerID = callerID
        self.callerName = callerName
        self.isVideo = isVideo
        self.janusURL = janusURL
        self.crypto = crypto
        self.recipient = recipient
    }
}

/// Why an invitation could not be read or used. Never carries key material.
public enum InvitationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file could not be read.
    case unreadable(path: String, reason: String)
    /// The text is not a JSON object.
    case notJSON(path: String)
    /// A field is missing or has the wrong type or value.
    case invalidField(path: String, field: String, expected: String)
    /// The invitation names another device than this one.
    case otherDevice(path: String, intendedFingerprint: String, thisDevice: String)
    /// The wrapped key does not open with this device's private key.
    case keyDoesNotOpen(path: String, reason: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read invitation \(path): \(reason)"
        case .notJSON(let path): "invitation \(path) is not a JSON object"
        case .invalidField(let path, let field, let expected):
            "invitation \(path): field '\(field)' must be \(expected)"
        case .otherDevice(let path, let intended, let this):
            "invitation \(path) is for another device (public key hash \(intended)…), not this one (\(this)…)"
        case .keyDoesNotOpen(let path, let reason):
            "invitation \(path): the call key does not open with this device's key: \(reason)"
        }
    }
}

extension CallInvitation {
    /// Parses an invitation; `path` names it in errors.
    public init(json text: some StringProtocol, path: String) throws(InvitationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(text)
        } catch {
            throw .notJSON(path: path)
        }
        guard case .object(let object) = value else { throw .notJSON(path: path) }

        func id(_ field: String) throws(InvitationError) -> UInt64 {
            switch object[field] {
            case .int(let number) where number >= 0: return UInt64(number)
            case .string(let text):
                if let number = UInt64(text) { return number }
            default: break
            }
            throw .invalidField(path: path, field: field, expected: "a non-negative integer (number or decimal string)")
        }
        func string(_ field: String, required: Bool = true) throws(InvitationError) -> String? {
            switch object[field] {
            case .string(let text) where !text.isEmpty: return text
            case nil, .null?: if !required { return nil }
            default: break
            }
            throw .invalidField(path: path, field: field, expected: "a non-empty string")
        }

        callID = try id("callId")
        roomID = try id("roomId")
        guard let key = try string("encryptedAESKey") else {
            throw .invalidField(path: path, field: "encryptedAESKey", expected: "a non-empty string")
        }
        encryptedAESKey = key
        callerID = try string("callerId", required: false) ?? ""
        callerName = try string("callerName", required: false) ?? ""
        switch object["isVideo"] {
        case .bool(let flag): isVideo = flag
        case nil, .null?: isVideo = true
        default: throw .invalidField(path: path, field: "isVideo", expected: "true or false")
        }
        if let url = try string("janusUrl", required: false) {
            guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
                throw .invalidField(path: path, field: "janusUrl", expected: "a ws:// or wss:// URL")
            }
            janusURL = url
        } else {
            janusURL = nil
        }
        if let crypto = try string("crypto", required: false) {
            guard let format = FrameCryptoFormat(rawValue: crypto) else {
                throw .invalidField(path: path, field: "crypto", expected: "\"ecall\" or \"sframe\"")
            }
            self.crypto = format
        } else {
            crypto = nil
        }
        switch object["recipient"] {
        case nil, .null?: recipient = nil
        case .object(let fields)?:
            func text(_ name: String) throws(InvitationError) -> String? {
                switch fields[name] {
                case .string(let value)?: return value
                case nil, .null?: return nil
                default: throw .invalidField(path: path, field: "recipient.\(name)", expected: "a string")
                }
            }
            recipient = Recipient(display: try text("display"), publicKeyHash: try text("publicKeyHash"))
        default:
            throw .invalidField(path: path, field: "recipient", expected: "an object")
        }
    }

    /// Reads an invitation file.
    public static func read(from path: String) throws(InvitationError) -> CallInvitation {
        // A FIFO or a folder is refused at once, without blocking; an invitation is a few hundred bytes.
        let data: Data
        do throws(FileError) {
            guard let contents = try PrivateFiles.readRegularFile(path, limit: 1 << 20) else {
                throw FileError(path: path, .system("open", ENOENT))
            }
            data = contents
        } catch {
            throw .unreadable(path: path, reason: error.description)
        }
        guard let text = String(data: data, encoding: .utf8) else { throw .notJSON(path: path) }
        return try CallInvitation(json: text, path: path)
    }

    /// The invitation as pretty JSON with ECall's field names (ids as JSON numbers).
    public func jsonText() -> String {
        func quoted(_ text: String) -> String { JSONValue.string(text).serialized() }
        var lines = [
            "\"callId\": \(callID)",
            "\"roomId\": \(roomID)",
            "\"encryptedAESKey\": \(quoted(encryptedAESKey))",
            "\"callerId\": \(quoted(callerID))",
            "\"callerName\": \(quoted(callerName))",
            "\"isVideo\": \(isVideo)",
        ]
        if let janusURL { lines.append("\"janusUrl\": \(quoted(janusURL))") }
        if let crypto { lines.append("\"crypto\": \(quoted(crypto.rawValue))") }
        if let recipient {
            var fields: [String: JSONValue] = [:]
            if let display = recipient.display { fields["display"] = .string(display) }
            if let hash = recipient.publicKeyHash { fields["publicKeyHash"] = .string(hash) }
            lines.append("\"recipient\": \(JSONValue.object(fields).serialized())")
        }
        return "{\n  " + lines.joined(separator: ",\n  ") + "\n}\n"
    }

    /// Checks that the invitation is for `identity` and opens its key; nothing is stored.
    ///
    /// An invitation that names another device's public key hash is refused before any key is
    /// tried; otherwise the wrapped key must open with the device's private key.
    public func openKey(with identity: DeviceIdentity, path: String) throws(InvitationError) -> CallKey {
        let ours = identity.publicKey.publicKeyHash
        if let intended = recipient?.publicKeyHash, intended.lowercased() != ours {
            throw .otherDevice(
                path: path,
                intendedFingerprint: String(intended.prefix(16)),
                thisDevice: String(ours.prefix(16))
            )
        }
        do {
            return try KeyWrapping.unwrap(encryptedAESKey, with: identity)
        } catch {
            throw .keyDoesNotOpen(path: path, reason: error.description)
        }
    }
}
