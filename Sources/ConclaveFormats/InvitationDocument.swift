import ConclaveE2EE
import Foundation

/// An invitation file as written, with ECall's field names, for `Codable`.
///
/// Decoding checks each field in ECall's order and stops at the first bad one with a
/// ``FieldError`` that names it (the invitation refuses a file, it does not list problems).
/// Unknown keys are ignored: other tools may add fields. `callId`, `roomId` and `callerId` are
/// read from JSON numbers or decimal strings and written as numbers, as ECall writes them.
struct InvitationDocument: Codable, Sendable {
    /// A field that is missing or has the wrong type or value.
    struct FieldError: Error {
        var field: String
        var expected: String
    }

    struct Recipient: Codable, Sendable {
        var display: String?
        var publicKeyHash: String?

        enum CodingKeys: String, CodingKey {
            case display, publicKeyHash
        }
    }

    enum CodingKeys: String, CodingKey {
        case callId, roomId, encryptedAESKey, callerId, callerName, isVideo, janusUrl, crypto, recipient
    }

    var invitation: CallInvitation

    init(_ invitation: CallInvitation) { self.invitation = invitation }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let callID = try Self.id(container, .callId)
        let roomID = try Self.id(container, .roomId)
        guard let key = try Self.string(container, .encryptedAESKey) else {
            throw FieldError(field: CodingKeys.encryptedAESKey.rawValue, expected: "a non-empty string")
        }
        let caller = try Self.caller(container)
        let callerName = try Self.string(container, .callerName) ?? caller.name ?? ""
        let isVideo = try Self.decode(Bool.self, container, .isVideo, expected: "true or false") ?? true
        let janusURL = try Self.string(container, .janusUrl)
        if let janusURL, !(janusURL.hasPrefix("ws://") || janusURL.hasPrefix("wss://")) {
            throw FieldError(field: CodingKeys.janusUrl.rawValue, expected: "a ws:// or wss:// URL")
        }
        var crypto: FrameCryptoFormat?
        if let text = try Self.string(container, .crypto) {
            guard let format = FrameCryptoFormat(rawValue: text) else {
                throw FieldError(field: CodingKeys.crypto.rawValue, expected: "\"ecall\" or \"sframe\"")
            }
            crypto = format
        }
        let recipient = try Self.recipient(container)
        invitation = CallInvitation(
            callID: callID,
            roomID: roomID,
            encryptedAESKey: key,
            callerID: caller.id,
            callerName: callerName,
            isVideo: isVideo,
            janusURL: janusURL,
            crypto: crypto,
            recipient: recipient.map {
                CallInvitation.Recipient(display: $0.display, publicKeyHash: $0.publicKeyHash)
            }
        )
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(invitation.callID, forKey: .callId)
        try container.encode(invitation.roomID, forKey: .roomId)
        try container.encode(invitation.encryptedAESKey, forKey: .encryptedAESKey)
        try container.encodeIfPresent(invitation.callerID, forKey: .callerId)
        try container.encode(invitation.callerName, forKey: .callerName)
        try container.encode(invitation.isVideo, forKey: .isVideo)
        try container.encodeIfPresent(invitation.janusURL, forKey: .janusUrl)
        try container.encodeIfPresent(invitation.crypto?.rawValue, forKey: .crypto)
        try container.encodeIfPresent(recipient, forKey: .recipient)
    }

    /// Each present field with its value as JSON, in ECall's order, for ``CallInvitation/jsonText()``.
    var fields: [(key: CodingKeys, json: String)] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func json(_ value: some Encodable) -> String {
            // Strings, numbers, booleans and a struct of strings always encode.
            String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
        }
        var fields: [(key: CodingKeys, json: String)] = [
            (.callId, json(invitation.callID)),
            (.roomId, json(invitation.roomID)),
            (.encryptedAESKey, json(invitation.encryptedAESKey)),
        ]
        if let callerID = invitation.callerID { fields.append((.callerId, json(callerID))) }
        fields += [(.callerName, json(invitation.callerName)), (.isVideo, json(invitation.isVideo))]
        if let janusURL = invitation.janusURL { fields.append((.janusUrl, json(janusURL))) }
        if let crypto = invitation.crypto { fields.append((.crypto, json(crypto.rawValue))) }
        if let recipient { fields.append((.recipient, json(recipient))) }
        return fields
    }

    private var recipient: Recipient? {
        invitation.recipient.map { Recipient(display: $0.display, publicKeyHash: $0.publicKeyHash) }
    }

    // MARK: Fields

    private typealias Container = KeyedDecodingContainer<CodingKeys>

    /// A value of `type`, nil when the key is absent or null; a ``FieldError`` for any other value.
    private static func decode<Value: Decodable>(
        _ type: Value.Type,
        _ container: Container,
        _ key: CodingKeys,
        expected: String
    ) throws(FieldError) -> Value? {
        do {
            return try container.decodeIfPresent(type, forKey: key)
        } catch {
            throw FieldError(field: key.rawValue, expected: expected)
        }
    }

    /// A non-empty string, or nil when the key is absent or null.
    private static func string(_ container: Container, _ key: CodingKeys) throws(FieldError) -> String? {
        let text = try decode(String.self, container, key, expected: "a non-empty string")
        if text?.isEmpty == true { throw FieldError(field: key.rawValue, expected: "a non-empty string") }
        return text
    }

    /// An id written as a non-negative JSON number or a decimal string.
    private static func id(_ container: Container, _ key: CodingKeys) throws(FieldError) -> UInt64 {
        if let number = try? container.decode(UInt64.self, forKey: key) { return number }
        if let text = try? container.decode(String.self, forKey: key), let number = UInt64(text) { return number }
        throw FieldError(field: key.rawValue, expected: "a non-negative integer (number or decimal string)")
    }

    /// ECall's `callerId`, a JSON number (or a decimal string); older Conclave versions wrote a user
    /// name there, which is kept as the caller's name. Nil id and name when absent or null.
    private static func caller(_ container: Container) throws(FieldError) -> (id: UInt64?, name: String?) {
        guard container.contains(.callerId), (try? container.decodeNil(forKey: .callerId)) == false else {
            return (nil, nil)
        }
        if let number = try? container.decode(UInt64.self, forKey: .callerId) { return (number, nil) }
        guard let text = try? container.decode(String.self, forKey: .callerId) else {
            throw FieldError(
                field: CodingKeys.callerId.rawValue,
                expected: "a non-negative integer (number or decimal string) or a user name"
            )
        }
        // Older versions wrote "" for a caller without a display.
        guard !text.isEmpty else { return (nil, nil) }
        let digits = text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard digits else { return (nil, text) }
        guard let number = UInt64(text) else {
            throw FieldError(field: CodingKeys.callerId.rawValue, expected: "an id below 2^64")
        }
        return (number, nil)
    }

    private static func recipient(_ container: Container) throws(FieldError) -> Recipient? {
        guard container.contains(.recipient), (try? container.decodeNil(forKey: .recipient)) == false else {
            return nil
        }
        let fields: KeyedDecodingContainer<Recipient.CodingKeys>
        do {
            fields = try container.nestedContainer(keyedBy: Recipient.CodingKeys.self, forKey: .recipient)
        } catch {
            throw FieldError(field: CodingKeys.recipient.rawValue, expected: "an object")
        }
        func text(_ key: Recipient.CodingKeys) throws(FieldError) -> String? {
            do {
                return try fields.decodeIfPresent(String.self, forKey: key)
            } catch {
                throw FieldError(field: "recipient.\(key.stringValue)", expected: "a string")
            }
        }
        return Recipient(display: try text(.display), publicKeyHash: try text(.publicKeyHash))
    }
}
