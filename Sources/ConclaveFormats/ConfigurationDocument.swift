/// The configuration file as written, before its values are checked: every key of
/// `config/conclave.example.json`, decoded with `Codable` but without stopping at the first
/// problem, so that `conclave config check` can list them all.
///
/// Each value is a ``ConfigurationValue``: a value of the wrong JSON type does not fail the
/// decoding, it is kept as `.wrongType` for ``ConfigurationFile`` to report at its key path. Each
/// object is a ``ConfigurationObject`` that also remembers the keys its type does not declare.
struct ConfigurationDocument: Codable, Sendable, Hashable {
    struct Janus: ConfigurationSection {
        var url: ConfigurationValue<String>?
        var apiSecret: ConfigurationValue<String>?
        var token: ConfigurationValue<String>?
        var caFile: ConfigurationValue<String>?
        var timeoutSeconds: ConfigurationValue<Double>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url, apiSecret, token, caFile, timeoutSeconds
        }
    }

    struct TURN: ConfigurationSection {
        var url: ConfigurationValue<String>?
        var username: ConfigurationValue<String>?
        var password: ConfigurationValue<String>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url, username, password
        }
    }

    struct ICE: ConfigurationSection {
        var addresses: ConfigurationValue<[ConfigurationValue<String>]>?
        var stun: ConfigurationValue<String>?
        var turn: ConfigurationValue<[ConfigurationValue<ConfigurationObject<TURN>>]>?
        var transportPolicy: ConfigurationValue<String>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case addresses, stun, turn, transportPolicy
        }
    }

    struct Video: ConfigurationSection {
        var codec: ConfigurationValue<String>?
        var bitrate: ConfigurationValue<Int>?
        var width: ConfigurationValue<Int>?
        var height: ConfigurationValue<Int>?
        var frameRate: ConfigurationValue<Int>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case codec, bitrate, width, height, frameRate
        }
    }

    struct Audio: ConfigurationSection {
        var bitrate: ConfigurationValue<Int>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case bitrate
        }
    }

    struct Signaling: ConfigurationSection {
        var url: ConfigurationValue<String>?
        var virtualHost: ConfigurationValue<String>?
        var login: ConfigurationValue<String>?
        var passcodeFile: ConfigurationValue<String>?
        var rotationSeconds: ConfigurationValue<Double>?
        var ecallCompatible: ConfigurationValue<Bool>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url, virtualHost, login, passcodeFile, rotationSeconds, ecallCompatible
        }
    }

    struct Root: ConfigurationSection {
        var janus: ConfigurationValue<ConfigurationObject<Janus>>?
        var ice: ConfigurationValue<ConfigurationObject<ICE>>?
        var dataDirectory: ConfigurationValue<String>?
        var recordingsDirectory: ConfigurationValue<String>?
        var crypto: ConfigurationValue<String>?
        var video: ConfigurationValue<ConfigurationObject<Video>>?
        var audio: ConfigurationValue<ConfigurationObject<Audio>>?
        var signaling: ConfigurationValue<ConfigurationObject<Signaling>>?
        /// Free text for people, of any type; never read.
        var comment: ConfigurationValue<String>?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case janus, ice, dataDirectory, recordingsDirectory, crypto, video, audio, signaling
            case comment = "$comment"
        }
    }

    var root: ConfigurationObject<Root>

    init(root: ConfigurationObject<Root>) { self.root = root }

    /// Decodes the document; throws only when the text is not JSON or its top level is not an object.
    init(from decoder: any Decoder) throws {
        root = try ConfigurationObject(from: decoder)
    }

    func encode(to encoder: any Encoder) throws { try root.encode(to: encoder) }
}

/// An object of the configuration file whose keys are its `CodingKeys`.
protocol ConfigurationSection: Codable, Sendable, Hashable {
    associatedtype CodingKeys: CodingKey, CaseIterable
}

/// One object of the file: the keys its section declares, decoded, and the ones it does not.
struct ConfigurationObject<Section: ConfigurationSection>: Codable, Sendable, Hashable {
    var section: Section
    /// Keys of the object that the section does not declare, sorted.
    var unknownKeys: [String]

    init(section: Section, unknownKeys: [String] = []) {
        self.section = section
        self.unknownKeys = unknownKeys
    }

    init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: AnyCodingKey.self).allKeys.map(\.stringValue)
        section = try Section(from: decoder)
        let known = Set(Section.CodingKeys.allCases.map(\.stringValue))
        unknownKeys = keys.filter { !known.contains($0) }.sorted()
    }

    func encode(to encoder: any Encoder) throws { try section.encode(to: encoder) }

    /// The keys the section declares, in declaration order (for "known keys: ..." messages).
    static var knownKeys: [String] { Section.CodingKeys.allCases.map(\.stringValue) }
}

/// A value of the configuration file that may have the wrong JSON type.
enum ConfigurationValue<Value: Codable & Sendable & Hashable>: Codable, Sendable, Hashable {
    /// `null`: the same as leaving the key out.
    case null
    case value(Value)
    /// Present, but not of the type the key takes (a string where a number belongs...).
    case wrongType

    init(from decoder: any Decoder) throws {
        if try decoder.singleValueContainer().decodeNil() {
            self = .null
            return
        }
        do {
            self = .value(try Value(from: decoder))
        } catch {
            // Only this level can fail: values nested below catch their own errors.
            self = .wrongType
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .value(let value): try container.encode(value)
        case .null, .wrongType: try container.encodeNil()
        }
    }
}

/// Any key of a JSON object, to list the keys a section does not declare.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }

    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
