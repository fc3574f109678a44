import ConclaveE2EE
import Foundation

/// The on-disk key store under a data directory:
///
///     <data>/keys/             0700
///     <data>/keys/.lock        flock for processes sharing the store
///     <data>/keys/device.json  0600  this device's key pair
///     <data>/keys/previous/    0700  key pairs `keys init --force` replaced (device-<time>.json, 0600)
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

    /// The folder keeping every device key that `keys init --force` replaced.
    public var previousKeysDirectory: URL { keysDirectory.appendingPathComponent("previous", isDirectory: true) }

    /// Creates the data and key directories as needed and checks the key directory's permissions.
    func prepare() throws(KeyStoreError) {
        try SecureFiles.ensureDirectory(dataDirectory)
        try SecureFiles.ensurePrivateDirectory(keysDirectory)
    }

    /// For commands that only read: checks the key directory if it exists and creates nothing.
    /// Returns false when there is no key directory (so nothing to read).
    ///
    /// Reads take no lock: every file is replaced by an atomic rename, so a reader sees the old
    /// or the new file whole; the lock only orders writers' read-modify-write cycles.
    func prepareForReading() throws(KeyStoreError) -> Bool {
        try SecureFiles.checkPrivateDirectoryIfPresent(keysDirectory)
    }

    // MARK: Device identity

    /// Whether a device key file exists (it may still be unreadable or corrupt).
    public var hasDeviceIdentity: Bool { FileManager.default.fileExists(atPath: deviceKeyFile.path) }

    /// Generates and stores a new device key pair. Refuses to replace one unless `replacing` is true;
    /// a replaced key is kept in ``previousKeysDirectory`` (see ``initializeDeviceIdentity(type:replacing:display:deviceID:)``).
    @discardableResult
    public func createDeviceIdentity(type: DeviceKeyType, replacing: Bool = false) throws -> DeviceIdentity {
        try initializeDeviceIdentity(type: type, replacing: replacing).identity
    }

    /// Generates and stores a new device key pair, with an optional display (`USERID:NAME`) that
    /// `join` uses when nothing else names us.
    ///
    /// Refuses to replace an existing key unless `replacing` is true. A replaced key file is first
    /// copied, byte for byte, to `previous/device-<UTC time>.json` (0600 in a 0700 folder): call
    /// keys stored for the old key still open with it (``openCallKey(_:with:)``), and a user who
    /// replaced the key by mistake can put it back. A replaced key's display and device id carry
    /// over unless new ones are given.
    ///
    /// - Parameter deviceID: the device's id on the signaling broker (ECall's `deviceId`), which
    ///   key messages are addressed to; the user id is the display's.
    public func initializeDeviceIdentity(
        type: DeviceKeyType,
        replacing: Bool = false,
        display: String? = nil,
        deviceID: UInt64? = nil
    ) throws(KeyStoreError) -> DeviceKeyCreation {
        try prepare()
        return try SecureFiles.withLock(lockFile, exclusive: true) { () throws(KeyStoreError) -> DeviceKeyCreation in
            let existing = try SecureFiles.readPrivateFile(deviceKeyFile)
            if !replacing && existing != nil { throw .deviceKeyExists(path: deviceKeyFile.path) }
            var replaced: ReplacedDeviceKey?
            var keptDisplay = display
            var keptDeviceID = deviceID
            if let existing {
                let backup = try backUp(existing)
                let old = try? decodeDeviceKey(existing, path: backup.path)
                if keptDisplay == nil { keptDisplay = old?.display }
                if keptDeviceID == nil { keptDeviceID = old?.deviceID }
                replaced = ReplacedDeviceKey(publicKey: old?.identity.publicKey, backup: backup)
            }
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
                createdAt: Date(),
                display: keptDisplay,
                deviceID: keptDeviceID
            )
            try SecureFiles.writePrivateFileAtomically(try FileFormat.encode(record), to: deviceKeyFile)
            return DeviceKeyCreation(
                identity: identity,
                display: keptDisplay,
                deviceID: keptDeviceID,
                replaced: replaced
            )
        }
    }

    /// Writes `data` (a device key file about to be replaced) to a new file in `previous/`.
    private func backUp(_ data: Data) throws(KeyStoreError) -> URL {
        try SecureFiles.ensurePrivateDirectory(previousKeysDirectory)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stamp = formatter.string(from: Date())
        var candidate = previousKeysDirectory.appendingPathComponent("device-\(stamp).json")
        var counter = 1
        while FileManager.default.fileExists(atPath: candidate.path) {
            counter += 1
            candidate = previousKeysDirectory.appendingPathComponent("device-\(stamp)-\(counter).json")
        }
        try SecureFiles.writePrivateFileAtomically(data, to: candidate)
        return candidate
    }

    /// Loads this device's key pair. Creates nothing: a missing data directory is "no device key".
    public func loadDeviceIdentity() throws(KeyStoreError) -> DeviceIdentity {
        try loadDeviceKey().identity
    }

    /// The display (`USERID:NAME`) stored with the device key by `keys init --display`, if any.
    public func deviceDisplay() throws(KeyStoreError) -> String? {
        try loadDeviceKey().display
    }

    /// The broker device id stored with the device key by `keys init --device-id`, if any.
    public func deviceID() throws(KeyStoreError) -> UInt64? {
        try loadDeviceKey().deviceID
    }

    /// Sets the display and device id of the existing device key without replacing the key (nil
    /// leaves a field as it is): ids are assigned by the service, often after the key was made.
    public func updateDeviceDetails(display: String?, deviceID: UInt64?) throws(KeyStoreError) {
        try prepare()
        try SecureFiles.withLock(lockFile, exclusive: true) { () throws(KeyStoreError) in
            guard let data = try SecureFiles.readPrivateFile(deviceKeyFile) else {
                throw .noDeviceKey(path: deviceKeyFile.path)
            }
            var record: DeviceKeyFile = try FileFormat.decode(data, path: deviceKeyFile.path)
            if let display { record.display = display }
            if let deviceID { record.deviceID = deviceID }
            try SecureFiles.writePrivateFileAtomically(try FileFormat.encode(record), to: deviceKeyFile)
        }
    }

    private func loadDeviceKey() throws(KeyStoreError) -> (
        identity: DeviceIdentity, display: String?, deviceID: UInt64?
    ) {
        let path = deviceKeyFile.path
        guard try prepareForReading(), let data = try SecureFiles.readPrivateFile(deviceKeyFile) else {
            throw .noDeviceKey(path: path)
        }
        return try decodeDeviceKey(data, path: path)
    }

    private func decodeDeviceKey(_ data: Data, path: String) throws(KeyStoreError)
        -> (identity: DeviceIdentity, display: String?, deviceID: UInt64?)
    {
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
        return (identity, record.display, record.deviceID)
    }

    /// The device keys `keys init --force` replaced, newest first. Files that do not load (corrupt,
    /// foreign, open to others) are skipped: they cannot open anything.
    public func previousDeviceIdentities() throws(KeyStoreError) -> [DeviceIdentity] {
        guard try prepareForReading(), try SecureFiles.checkPrivateDirectoryIfPresent(previousKeysDirectory) else {
            return []
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: previousKeysDirectory.path)) ?? []
        return names.filter { $0.hasPrefix("device-") && $0.hasSuffix(".json") }.sorted(by: >).compactMap { name in
            let url = previousKeysDirectory.appendingPathComponent(name)
            guard let data = try? SecureFiles.readPrivateFile(url) else { return nil }
            return try? decodeDeviceKey(data, path: url.path).identity
        }
    }

    /// Opens a stored wrapped call key with `identity` (this device's current key) or, if that
    /// fails, with each key `keys init --force` replaced, newest first: a call stored before the
    /// device key was replaced can still be rejoined. Throws the current key's failure if none opens.
    public func openCallKey(_ wrapped: String, with identity: DeviceIdentity) throws -> CallKey {
        let failure: KeyMaterialError
        do {
            return try KeyWrapping.unwrap(wrapped, with: identity)
        } catch {
            failure = error
        }
        for previous in try previousDeviceIdentities() {
            if let key = try? KeyWrapping.unwrap(wrapped, with: previous) { return key }
        }
        throw failure
    }
}

/// What ``KeyStore/initializeDeviceIdentity(type:replacing:display:deviceID:)`` did.
public struct DeviceKeyCreation {
    /// The new key pair.
    public var identity: DeviceIdentity
    /// The display stored with it.
    public var display: String?
    /// The broker device id stored with it.
    public var deviceID: UInt64?
    /// The key it replaced, if any.
    public var replaced: ReplacedDeviceKey?
}

/// A device key that was replaced, and where its copy is.
public struct ReplacedDeviceKey {
    /// The old public key; nil if the old file did not load (it is kept all the same).
    public var publicKey: DevicePublicKey?
    /// The copy in `keys/previous/`.
    public var backup: URL
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
    /// Our `USERID:NAME` for calls, if given to `keys init --display`. Older files lack it.
    var display: String?
    /// Our device id on the signaling broker, if given to `keys init --device-id`.
    var deviceID: UInt64?
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
