import ConclaveE2EE
import Foundation

/// One rotation of a call's key, as it was received (still wrapped for this device).
public struct CallKeyHistoryEntry: Codable, Sendable, Hashable {
    /// The rotation count, 0 for the key of the invitation.
    public var epoch: UInt64
    /// The wrapped key string exactly as received (ECall's `encryptedAESKey`).
    public var wrappedKey: String
    /// When the key became (or becomes) current.
    public var appliedAt: Date
    /// When the next epoch replaced it; nil while it is the latest (and in older files).
    public var validUntil: Date?

    public init(epoch: UInt64, wrappedKey: String, appliedAt: Date, validUntil: Date? = nil) {
        self.epoch = epoch
        self.wrappedKey = wrappedKey
        self.appliedAt = appliedAt
        self.validUntil = validUntil
    }
}

/// Everything stored for one call: the wrapped key ECall's `CallKeyStorage` keeps, the rotation
/// history ECall forgets, and what `conclave rejoin` needs to find the room again.
public struct CallKeyRecord: Codable, Sendable, Hashable {
    public var callID: UInt64
    /// The latest wrapped key string.
    public var wrappedKey: String
    /// Every wrapped key of the call, oldest first.
    public var history: [CallKeyHistoryEntry]
    public var janusURL: String?
    public var room: UInt64?
    public var display: String?
    public var cryptoFormat: FrameCryptoFormat?
    /// The signed `call_invitation` this device received (or, for the caller, addressed to
    /// itself), as JSON: its roster tells who may send key messages, for a later join or rejoin.
    public var invitation: String?
    public var updatedAt: Date

    public init(
        callID: UInt64,
        wrappedKey: String,
        history: [CallKeyHistoryEntry] = [],
        janusURL: String? = nil,
        room: UInt64? = nil,
        display: String? = nil,
        cryptoFormat: FrameCryptoFormat? = nil,
        updatedAt: Date = Date()
    ) {
        self.callID = callID
        self.wrappedKey = wrappedKey
        self.history = history
        self.janusURL = janusURL
        self.room = room
        self.display = display
        self.cryptoFormat = cryptoFormat
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case callID = "callId", wrappedKey, history, janusURL = "janusUrl", room, display, cryptoFormat, invitation
        case updatedAt
    }

    // Call and room ids are written as decimal strings: JSON numbers lose precision above 2^53.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func id(_ key: CodingKeys) throws -> UInt64? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let value = UInt64(text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not a decimal id")
            }
            return value
        }
        guard let callID = try id(.callID) else {
            throw DecodingError.keyNotFound(CodingKeys.callID, .init(codingPath: [], debugDescription: "callId"))
        }
        self.callID = callID
        wrappedKey = try container.decode(String.self, forKey: .wrappedKey)
        history = try container.decodeIfPresent([CallKeyHistoryEntry].self, forKey: .history) ?? []
        janusURL = try container.decodeIfPresent(String.self, forKey: .janusURL)
        room = try id(.room)
        display = try container.decodeIfPresent(String.self, forKey: .display)
        cryptoFormat = try container.decodeIfPresent(FrameCryptoFormat.self, forKey: .cryptoFormat)
        invitation = try container.decodeIfPresent(String.self, forKey: .invitation)
        updatedAt = try container.decode(Date.self, forKey: .updatedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(String(callID), forKey: .callID)
        try container.encode(wrappedKey, forKey: .wrappedKey)
        try container.encode(history, forKey: .history)
        try container.encodeIfPresent(janusURL, forKey: .janusURL)
        try container.encodeIfPresent(room.map(String.init), forKey: .room)
        try container.encodeIfPresent(display, forKey: .display)
        try container.encodeIfPresent(cryptoFormat, forKey: .cryptoFormat)
        try container.encodeIfPresent(invitation, forKey: .invitation)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

extension CallKeyRecord: FileFormatRecord {
    static let formatName = "conclave.call-key"
}

/// The per-call store of wrapped call keys, keyed by call id, on disk so a call can be rejoined after
/// a crash. ECall's `CallKeyStorage` API plus the key history and rejoin details.
///
/// Each operation takes the store's file lock, so two processes can use it at once; updates are
/// read-modify-write under the exclusive lock.
public struct CallKeyStorage: Sendable {
    let store: KeyStore

    var directory: URL { store.keysDirectory.appendingPathComponent("calls", isDirectory: true) }

    func file(for callID: UInt64) -> URL { directory.appendingPathComponent("\(callID).json") }

    func prepare() throws(KeyStoreError) {
        try store.prepare()
        try SecureFiles.ensurePrivateDirectory(directory)
    }

    /// Stores `wrappedKey` as the call's key and appends it to the history with `epoch`; the entry
    /// before it is valid until `appliedAt`.
    public func storeWrappedKey(_ wrappedKey: String, for callID: UInt64, epoch: UInt64 = 0, appliedAt: Date = Date())
        throws(KeyStoreError)
    {
        try update(callID) { record in
            let entry = CallKeyHistoryEntry(epoch: epoch, wrappedKey: wrappedKey, appliedAt: appliedAt)
            if var existing = record {
                existing.wrappedKey = wrappedKey
                if existing.history.last != entry {
                    if let last = existing.history.indices.last, existing.history[last].validUntil == nil {
                        existing.history[last].validUntil = appliedAt
                    }
                    existing.history.append(entry)
                }
                existing.updatedAt = Date()
                record = existing
            } else {
                record = CallKeyRecord(callID: callID, wrappedKey: wrappedKey, history: [entry])
            }
        }
    }

    /// Sets the rejoin details of a call that already has a key; nil arguments leave fields alone.
    public func storeRejoinDetails(
        for callID: UInt64,
        janusURL: String? = nil,
        room: UInt64? = nil,
        display: String? = nil,
        cryptoFormat: FrameCryptoFormat? = nil,
        invitation: String? = nil
    ) throws(KeyStoreError) {
        try update(callID) { record in
            guard var existing = record else { return }
            if let invitation { existing.invitation = invitation }
            if let janusURL { existing.janusURL = janusURL }
            if let room { existing.room = room }
            if let display { existing.display = display }
            if let cryptoFormat { existing.cryptoFormat = cryptoFormat }
            existing.updatedAt = Date()
            record = existing
        }
    }

    /// Forgets all but the last `count` epochs of a call's history (at the end of a call the current
    /// and previous keys are enough to repair a recording; older ones only widen what a stolen key
    /// store reveals).
    public func pruneHistory(for callID: UInt64, keepingLast count: Int = 2) throws(KeyStoreError) {
        try update(callID) { record in
            guard var existing = record, existing.history.count > count else { return }
            existing.history.removeFirst(existing.history.count - max(count, 0))
            existing.updatedAt = Date()
            record = existing
        }
    }

    /// The latest wrapped key of a call.
    public func wrappedKey(for callID: UInt64) throws(KeyStoreError) -> String? {
        try record(for: callID)?.wrappedKey
    }

    /// Everything stored for a call. Creates nothing (see ``KeyStore/prepareForReading()``).
    public func record(for callID: UInt64) throws(KeyStoreError) -> CallKeyRecord? {
        guard try readable() else { return nil }
        return try read(callID)
    }

    /// Forgets a call's keys (every epoch) but keeps where and with whom the call is: what a
    /// device that lost its keys still knows, and rejoins from by asking the participants.
    public func forgetKeys(for callID: UInt64) throws(KeyStoreError) {
        try update(callID) { record in
            guard var existing = record else { return }
            existing.wrappedKey = ""
            existing.history = []
            existing.updatedAt = Date()
            record = existing
        }
    }

    /// Forgets a call.
    public func remove(_ callID: UInt64) throws(KeyStoreError) {
        try prepare()
        try SecureFiles.withLock(store.lockFile, exclusive: true) { () throws(KeyStoreError) in
            try SecureFiles.removeFile(file(for: callID))
        }
    }

    /// The ids of every stored call, ascending. Files that are not `<decimal id>.json` are ignored.
    /// Creates nothing.
    public func callIDs() throws(KeyStoreError) -> [UInt64] {
        guard try readable() else { return [] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw .io(path: directory.path, operation: "list", errno: EIO)
        }
        return names.compactMap { name in
            guard name.hasSuffix(".json") else { return nil }
            return UInt64(name.dropLast(5))
        }.sorted()
    }

    /// Whether the key and call folders exist (checked, never created): reads need both.
    private func readable() throws(KeyStoreError) -> Bool {
        guard try store.prepareForReading() else { return false }
        return try SecureFiles.checkPrivateDirectoryIfPresent(directory)
    }

    /// Forgets every call.
    public func removeAll() throws(KeyStoreError) {
        for callID in try callIDs() { try remove(callID) }
    }

    private func read(_ callID: UInt64) throws(KeyStoreError) -> CallKeyRecord? {
        let url = file(for: callID)
        guard let data = try SecureFiles.readPrivateFile(url) else { return nil }
        let record: CallKeyRecord = try FileFormat.decode(data, path: url.path)
        guard record.callID == callID else {
            throw .corrupt(path: url.path, detail: "holds call \(record.callID), not \(callID)")
        }
        return record
    }

    private func update(_ callID: UInt64, _ change: (inout CallKeyRecord?) -> Void) throws(KeyStoreError) {
        try prepare()
        try SecureFiles.withLock(store.lockFile, exclusive: true) { () throws(KeyStoreError) in
            var record = try read(callID)
            change(&record)
            guard let record else { return }
            try SecureFiles.writePrivateFileAtomically(try FileFormat.encode(record), to: file(for: callID))
        }
    }
}
