import Foundation

/// JSON decoding whose failures are one line naming the field, for jobs and events alike.
enum JSONFields {
    /// Any key, to list what an object holds.
    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static func decode<Value: Decodable>(
        _ type: Value.Type,
        from body: [UInt8],
        what: String
    ) throws(RecordJobError) -> Value {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch let error as RecordJobError {
            throw error
        } catch let error as DecodingError {
            throw RecordJobError(describe(error, what: what))
        } catch {
            throw RecordJobError("\(what): \(error)")
        }
    }

    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(value))
        } catch {
            // Only non-finite doubles fail to encode, and no valid value holds one.
            preconditionFailure("a recorder message could not be encoded: \(error)")
        }
    }

    /// Fails on a key the type does not know: a misspelt optional field must not vanish silently.
    static func rejectUnknownKeys(in decoder: any Decoder, allowed: [String]) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        for key in container.allKeys where !allowed.contains(key.stringValue) {
            let field = path(decoder.codingPath + [key])
            throw RecordJobError("\(field): unknown field")
        }
    }

    /// Runs `body`, giving a decoding error that does not say where it happened `key`'s path.
    static func naming<Value>(
        _ key: some CodingKey,
        under codingPath: [any CodingKey],
        _ body: () throws -> Value
    ) throws -> Value {
        do {
            return try body()
        } catch let error as DecodingError {
            switch error {
            case .dataCorrupted(let context) where context.codingPath.isEmpty:
                throw RecordJobError("\(path(codingPath + [key])): \(context.debugDescription)")
            case .typeMismatch(let type, let context) where context.codingPath.isEmpty:
                throw RecordJobError("\(path(codingPath + [key])): expected \(typeName(type))")
            default:
                throw error
            }
        } catch let error as RecordJobError {
            throw error
        } catch {
            // Foundation's own parse errors (a number out of the type's range) carry no path.
            let expected =
                Value.self == UInt64.self || Value.self == UInt64?.self
                ? "a whole number from 0 to \(UInt64.max)" : Value.self == Int.self ? "a whole number" : "another value"
            throw RecordJobError("\(path(codingPath + [key])): expected \(expected)")
        }
    }

    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + key.stringValue
            }
        }
        return text
    }

    static func describe(_ error: DecodingError, what: String) -> String {
        func name(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? what : path(codingPath)
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(name(context.codingPath + [key])): missing"
        case .valueNotFound(_, let context):
            return "\(name(context.codingPath)): null is not allowed"
        case .typeMismatch(let type, let context):
            return "\(name(context.codingPath)): expected \(typeName(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "\(what): not valid JSON" }
            return "\(name(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(what): \(error)"
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is UInt64.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        default:
            String(describing: type).hasPrefix("Array") ? "an array" : "an object"
        }
    }
}
