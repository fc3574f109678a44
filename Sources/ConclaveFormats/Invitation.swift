import ConclaveE2EE
import ConclaveFiles
import Foundation

/// An invitation to an end-to-end encrypted call: ECall's invitation fields plus what a client
/// without ECall's backend needs to find the call (the Janus URL and the media crypto format).
///
/// The file is JSON. `callId`, `roomId` and `callerId` are written as JSON numbers, as ECall sends
/// them, and read from numbers or decimal strings (JSON numbers lose precision above 2^53 in many
/// parsers). Older Conclave versions wrote a user name as `callerId`: it is read as the caller's
/// display name when `callerName` is absent.
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
    /// The caller's ECall user id (a JSON number on the wire); nil when the caller has none, as in
    /// invitations from older Conclave versions that wrote a user name here.
    public var callerID: UInt64?
    /// The caller's display name.
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
        callerID: UInt64?,
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
        let document: InvitationDocument
        do {
            document = try JSONDecoder().decode(InvitationDocument.self, from: Data(text.utf8))
        } catch let error as InvitationDocument.FieldError {
            throw .invalidField(path: path, field: error.field, expected: error.expected)
        } catch {
            throw .notJSON(path: path)
        }
        self = document.invitation
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

    /// The invitation as pretty JSON with ECall's field names (ids as JSON numbers), one field a
    /// line in ECall's order; each value is written by `JSONEncoder` (see ``InvitationDocument``).
    public func jsonText() -> String {
        let lines = InvitationDocument(self).fields.map { "\"\($0.key.rawValue)\": \($0.json)" }
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
