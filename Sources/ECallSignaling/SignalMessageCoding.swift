import ConclaveE2EE
import Foundation

extension SignalMessage: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case type
        case callerId, callerDeviceId, calleeId, calleeDeviceId, participantId, participantDeviceId
        case callId, roomId, feedId, handleId, senderId, senderDeviceId
        case callerName, encryptedAESKey, participantName, sdp, transaction, status
        case isVideo, isVideoEnabled, isMuted, isOnGoing, candidate, keyRotationTimestamp
        case janusUrl, crypto, roster, epoch, sentAt, signature
    }

    /// The id fields, each with its key path, so decoding, encoding and signing list them once.
    static var idFields: [(CodingKeys, WritableKeyPath<SignalMessage, UInt64?>)] {
        [
            (.callerId, \.callerId), (.callerDeviceId, \.callerDeviceId), (.calleeId, \.calleeId),
            (.calleeDeviceId, \.calleeDeviceId), (.participantId, \.participantId),
            (.participantDeviceId, \.participantDeviceId), (.callId, \.callId), (.roomId, \.roomId),
            (.feedId, \.feedId), (.handleId, \.handleId), (.senderId, \.senderId), (.senderDeviceId, \.senderDeviceId),
            (.epoch, \.epoch),
        ]
    }

    static var stringFields: [(CodingKeys, WritableKeyPath<SignalMessage, String?>)] {
        [
            (.callerName, \.callerName), (.encryptedAESKey, \.encryptedAESKey), (.participantName, \.participantName),
            (.sdp, \.sdp), (.transaction, \.transaction), (.janusUrl, \.janusUrl), (.signature, \.signature),
        ]
    }

    static var boolFields: [(CodingKeys, WritableKeyPath<SignalMessage, Bool?>)] {
        [
            (.isVideo, \.isVideo), (.isVideoEnabled, \.isVideoEnabled), (.isMuted, \.isMuted),
            (.isOnGoing, \.isOnGoing),
        ]
    }

    static var timeFields: [(CodingKeys, WritableKeyPath<SignalMessage, Double?>)] {
        [
            (.keyRotationTimestamp, \.keyRotationTimestamp), (.sentAt, \.sentAt),
        ]
    }

    /// A field with the wrong JSON type, thrown out of `init(from:)` and turned into
    /// ``SignalMessageError/wrongType(field:expected:)`` by ``init(json:)``.
    struct FieldError: Error {
        var field: String
        var expected: String
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let typeName = try? container.decode(String.self, forKey: .type) else {
            throw SignalMessageError.missingType
        }
        self.init(type: SignalMessageType(rawValue: typeName))
        for (key, path) in Self.idFields { self[keyPath: path] = try Self.id(container, key) }
        for (key, path) in Self.stringFields {
            self[keyPath: path] = try Self.value(String.self, container, key, expected: "a string")
        }
        for (key, path) in Self.boolFields {
            self[keyPath: path] = try Self.value(Bool.self, container, key, expected: "true or false")
        }
        for (key, path) in Self.timeFields {
            let time = try Self.value(Double.self, container, key, expected: "a number")
            if let time, !time.isFinite { throw FieldError(field: key.rawValue, expected: "a finite number") }
            self[keyPath: path] = time
        }
        status = try Self.value(String.self, container, .status, expected: "a string").map(ParticipantStatus.init)
        candidate = try Self.value(Candidate.self, container, .candidate, expected: "a candidate object")
        if let name = try Self.value(String.self, container, .crypto, expected: "a string") {
            guard let format = FrameCryptoFormat(rawValue: name) else {
                throw FieldError(field: CodingKeys.crypto.rawValue, expected: "\"ecall\" or \"sframe\"")
            }
            crypto = format
        }
        do {
            roster = try container.decodeIfPresent([RosterEntry].self, forKey: .roster)
        } catch let error as RosterEntry.FieldError {
            throw FieldError(field: "roster.\(error.field)", expected: error.expected)
        } catch {
            throw FieldError(field: CodingKeys.roster.rawValue, expected: "a list of roster entries")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type.rawValue, forKey: .type)
        for (key, path) in Self.idFields { try container.encodeIfPresent(self[keyPath: path], forKey: key) }
        for (key, path) in Self.stringFields { try container.encodeIfPresent(self[keyPath: path], forKey: key) }
        for (key, path) in Self.boolFields { try container.encodeIfPresent(self[keyPath: path], forKey: key) }
        for (key, path) in Self.timeFields { try container.encodeIfPresent(self[keyPath: path], forKey: key) }
        try container.encodeIfPresent(status?.rawValue, forKey: .status)
        try container.encodeIfPresent(candidate, forKey: .candidate)
        try container.encodeIfPresent(crypto?.rawValue, forKey: .crypto)
        try container.encodeIfPresent(roster, forKey: .roster)
    }

    private typealias Container = KeyedDecodingContainer<CodingKeys>

    /// A value of `type`, nil when absent or null; a ``FieldError`` naming the field otherwise.
    private static func value<Value: Decodable>(
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

    /// An id: an unsigned JSON number (ECall's form) or a decimal string; nil when absent or null.
    private static func id(_ container: Container, _ key: CodingKeys) throws(FieldError) -> UInt64? {
        guard container.contains(key), (try? container.decodeNil(forKey: key)) == false else { return nil }
        if let number = try? container.decode(UInt64.self, forKey: key) { return number }
        if let text = try? container.decode(String.self, forKey: key), !text.isEmpty,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let number = UInt64(text)
        {
            return number
        }
        throw FieldError(field: key.rawValue, expected: "an unsigned integer (number or decimal string)")
    }
}

extension SignalMessage {
    /// Parses a message body as received from the broker.
    public init(json body: some StringProtocol) throws(SignalMessageError) {
        do {
            self = try JSONDecoder().decode(SignalMessage.self, from: Data(body.utf8))
        } catch let error as SignalMessageError {
            throw error
        } catch let error as FieldError {
            throw .wrongType(field: error.field, expected: error.expected)
        } catch {
            throw .notJSON
        }
    }

    /// The message as the JSON body ECall expects: camelCase keys, nil fields left out, ids as
    /// numbers.
    public func jsonBody() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every field is a string, number, boolean or a struct of those: encoding cannot fail.
        let data = (try? encoder.encode(self)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

extension RosterEntry: Codable {
    enum CodingKeys: String, CodingKey {
        case userId, deviceId, displayName, publicKey, isHost
    }

    struct FieldError: Error {
        var field: String
        var expected: String
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func id(_ key: CodingKeys) throws(FieldError) -> UInt64 {
            if let number = try? container.decode(UInt64.self, forKey: key) { return number }
            if let text = try? container.decode(String.self, forKey: key), let number = UInt64(text),
                text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            {
                return number
            }
            throw FieldError(field: key.rawValue, expected: "an unsigned integer")
        }
        func text(_ key: CodingKeys) throws(FieldError) -> String {
            guard let value = try? container.decode(String.self, forKey: key) else {
                throw FieldError(field: key.rawValue, expected: "a string")
            }
            return value
        }
        userId = try id(.userId)
        deviceId = try id(.deviceId)
        displayName = (try? container.decodeIfPresent(String.self, forKey: .displayName)) ?? ""
        publicKey = try text(.publicKey)
        guard let host = try? container.decodeIfPresent(Bool.self, forKey: .isHost) else {
            if container.contains(.isHost), (try? container.decodeNil(forKey: .isHost)) == false {
                throw FieldError(field: CodingKeys.isHost.rawValue, expected: "true or false")
            }
            isHost = false
            return
        }
        isHost = host
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userId, forKey: .userId)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(displayName, forKey: .displayName)
        try container.encode(publicKey, forKey: .publicKey)
        try container.encode(isHost, forKey: .isHost)
    }
}
