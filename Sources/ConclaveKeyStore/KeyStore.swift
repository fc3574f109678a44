import ConclaveE2EE
import Foundation

/// The on-disk key store under a data directory:
///
///     <data>/keys/             0700
///     <data>/keys/.lock        flock for processes sharing the store
///     <data>/keys/device.json  0600  this device's key pair
///     <data>/keys/calls/       0700
///     <data>/keys/calls/<call id>.json  0600  one call's wrapped keys and rejoin details
///
/// Every file is replaced atomically and read only if it is a regular file owned by this user with
/// no group or other permissions.
public struct KeyStore: Sendable {
    /// The data directory (`--data-dir`, `$CONCLAVE_HOME`, ...).
    public let dataDirectory: URL

    public init(dataDirectory: URL) {
        self.dataDirectory = dataDirectory
    }

    /// The directory holding every key file.
    public var keysDirectory: URL { dataDirectory.appendingPathComponent("keys", isDirectory: true) }
    /// The device key file.
    public var deviceKeyFile: URL { keysDirectory.appendingPathComponent("device.json") }
    var lockFile: URL { keysDirectory.appendingPathComponent(".lock") }

    /// The per-call key storage in this store.
    public var calls: CallKeyStorage { CallKeyStorage(store: self) }

    /// Creates the data and key directories as needed and checks the key directory's permissions.
    func prepare() throws(KeyStoreError) {
        try SecureFiles.ensureDirectory(dataDirectory)
        try SecureFiles.ensurePrivateDirectory(keysDirectory)
    }

    // MARK: Device identity

    /// Whether a device key file exists (it may still be unreadable or corrupt).
    public var hasDeviceIdentity: Bool { FileManager.default.fileExists(atPath: deviceKeyFile.path) }

    /// Generates and stores a new device key pair. Refuses to replace one unless `replacing` is true.
    @discardableResult
    public func createDeviceIdentity(type: DeviceKeyType, replacing: Bool = false) throws -> DeviceIdentity {
        try prepare()
        return try SecureFiles.withLock(lockFile, exclusive: true) { () throws(KeyStoreError) -> DeviceIdentity in
            if !replacing && hasDeviceIdentity { throw .deviceKeyExists(path: deviceKeyFile.path) }
            let identity: DeviceIdentity
            do {
                identity = try DeviceIdentity.generate(type)
            } catch {
                throw .io(path: deviceKeyFile.path, operation: "generate \(type) key for", errno: EIO)
            }
            let record = DeviceKeyFile(
                type: type,
                privateKey: Data(identity.privateKeyBytes).base64EncodedString(),
                publicKey: identity.publicKeyString,
                createdAt: Date()
            )
            try SecureFiles.writePrivateFileAtomically(try FileFormat.encode(record), to: deviceKeyFile)
            return identity
        }
    }

    /// Loads this device's key pair.
    public func loadDeviceIdentity() throws(KeyStoreError) -> DeviceIdentity {
        try prepare()
        let path = deviceKeyFile.path
        let data = try SecureFiles.withLock(lockFile, exclusive: false) { () throws(KeyStoreError) -> Data? in
            try SecureFiles.readPrivateFile(deviceKeyFile)
        }
        guard let data else { throw .noDeviceKey(path: path) }
        let record: DeviceKeyFile = try FileFormat.decode(data, path: path)
        guard let privateBytes = Data(base64Encoded: record.privateKey) else {
            throw .corrupt(path: path, detail: "privateKey is not base64")
        }
        let identity: DeviceIdentity
        do {
            identity = try DeviceIdentity(type: record.type, privateKeyBytes: Array(privateBytes))
        } catch {
            throw .corrupt(path: path, detail: "privateKey: \(error.description)")
        }
        guard identity.publicKeyString == record.publicKey else {
            throw .corrupt(path: path, detail: "publicKey does not belong to privateKey")
        }
        return identity
    }
}

/// The device key file's contents.
struct DeviceKeyFile: Codable, FileFormatRecord {
    static let formatName = "conclave.device-key"
    var type: DeviceKeyType
    /// Base64 of `DeviceIdentity.privateKeyBytes`.
    var privateKey: String
    /// The published public key string, kept for `keys show` and as an integrity check.
    var publicKey: String
    var createdAt: Date
}

/// A versioned JSON file with a `format` tag, so a foreign or newer file is told apart from a corrupt
/// one.
protocol FileFormatRecord: Codable {
    static var formatName: String { get }
}

enum FileFormat {
    static let version = 1

    private struct Envelope<Record: FileFormatRecord>: Codable {
        var format: String
        var version: Int
        var record: Record
    }

    private struct Header: Decodable {
        var format: String?
        var version: Int?
    }

    static func encode<Record: FileFormatRecord>(_ record: Record) throws(KeyStoreError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        do {
            var data = try encoder.encode(Envelope(format: Record.formatName, version: version, record: record))
            data.append(0x0A)
            return data
        } catch {
            throw .corrupt(path: Record.formatName, detail: "cannot encode")
        }
    }

    static func decode<Record: FileFormatRecord>(_ data: Data, path: String) throws(KeyStoreError) -> Record {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let header: Header
        do {
            header = try decoder.decode(Header.self, from: data)
        } catch {
            throw .corrupt(path: path, detail: "not JSON")
        }
        guard let format = header.format else { throw .foreign(path: path, found: "JSON without a format tag") }
        guard format == Record.formatName else { throw .foreign(path: path, found: "format \"\(format)\"") }
        guard let fileVersion = header.version else { throw .corrupt(path: path, detail: "no version") }
        guard fileVersion <= version else { throw .unsupportedVersion(path: path, version: fileVersion) }
        do {
            return try decoder.decode(Envelope<Record>.self, from: data).record
        } catch let DecodingError.keyNotFound(key, _) {
            throw .corrupt(path: path, detail: "missing field \(key.stringValue)")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw .corrupt(
                path: path,
                detail: "bad field \(context.codingPath.map(\.stringValue).joined(separator: "."))"
            )
        } catch let DecodingError.dataCorrupted(context) {
            throw .corrupt(
                path: path,
                detail: "bad field \(context.codingPath.map(\.stringValue).joined(separator: "."))"
            )
        } catch {
            throw .corrupt(path: path, detail: "unreadable record")
        }
    }
}
