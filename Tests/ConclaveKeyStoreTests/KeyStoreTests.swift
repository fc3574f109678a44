import ConclaveE2EE
import Foundation
import Testing

@testable import ConclaveKeyStore

#if canImport(Glibc)
    import Glibc
#endif

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "conclave-keystore-\(UUID().uuidString.prefix(8))"
    )
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func mode(_ url: URL) -> UInt32 {
    var info = stat()
    guard stat(url.path, &info) == 0 else { return 0xFFFF }
    return UInt32(info.st_mode) & 0o7777
}

@Suite("data directory")
struct DataDirectoryTests {
    @Test("--data-dir, then CONCLAVE_HOME, then XDG_DATA_HOME/conclave, then ~/.local/share/conclave")
    func precedence() throws {
        let all = ["CONCLAVE_HOME": "/c", "XDG_DATA_HOME": "/x", "HOME": "/h"]
        #expect(try DataDirectory.resolve(override: "/o", environment: all).path == "/o")
        #expect(try DataDirectory.resolve(environment: all).path == "/c")
        #expect(try DataDirectory.resolve(environment: ["XDG_DATA_HOME": "/x", "HOME": "/h"]).path == "/x/conclave")
        #expect(
            try DataDirectory.resolve(environment: ["CONCLAVE_HOME": "", "HOME": "/h"]).path
                == "/h/.local/share/conclave"
        )
        #expect(throws: KeyStoreError.noDataDirectory) { try DataDirectory.resolve(environment: [:]) }
    }
}

@Suite("device identity on disk")
struct DeviceIdentityStoreTests {
    @Test("created keys live in 0600 files inside 0700 directories and load back", arguments: DeviceKeyType.allCases)
    func createAndLoad(type: DeviceKeyType) throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root.appendingPathComponent("data"))
        let created = try store.createDeviceIdentity(type: type)
        #expect(mode(store.keysDirectory) == 0o700)
        #expect(mode(store.deviceKeyFile) == 0o600)
        let loaded = try store.loadDeviceIdentity()
        #expect(loaded.type == type)
        #expect(loaded.publicKeyString == created.publicKeyString)
        // The file never holds the private key in a form a log grep would show as the public key.
        let text = try String(contentsOf: store.deviceKeyFile, encoding: .utf8)
        #expect(text.contains("conclave.device-key"))
    }

    @Test("init refuses to replace a key unless asked")
    func noSilentReplace() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        let first = try store.createDeviceIdentity(type: .p256)
        #expect(throws: KeyStoreError.deviceKeyExists(path: store.deviceKeyFile.path)) {
            try store.createDeviceIdentity(type: .p256)
        }
        let second = try store.createDeviceIdentity(type: .p256, replacing: true)
        #expect(first.publicKeyString != second.publicKeyString)
        #expect(try store.loadDeviceIdentity().publicKeyString == second.publicKeyString)
    }

    @Test(
        "a world- or group-readable key file is refused with a clear message",
        arguments: [0o644, 0o640, 0o604, 0o660]
    )
    func insecureFileRefused(fileMode: Int) throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        try store.createDeviceIdentity(type: .p256)
        chmod(store.deviceKeyFile.path, mode_t(fileMode))
        do {
            _ = try store.loadDeviceIdentity()
            Issue.record("loaded a key file with mode \(String(fileMode, radix: 8))")
        } catch {
            #expect(error == .insecurePermissions(path: store.deviceKeyFile.path, mode: UInt32(0o100000 | fileMode)))
            #expect(error.description.contains("lets other users read it"))
            #expect(error.description.contains(store.deviceKeyFile.path))
        }
    }

    @Test("an open key directory is refused")
    func insecureDirectoryRefused() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        try store.createDeviceIdentity(type: .p256)
        chmod(store.keysDirectory.path, 0o755)
        #expect(throws: KeyStoreError.insecurePermissions(path: store.keysDirectory.path, mode: UInt32(0o040755))) {
            try store.loadDeviceIdentity()
        }
    }

    @Test("a symlinked key file is refused")
    func symlinkRefused() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        try store.createDeviceIdentity(type: .p256)
        let elsewhere = root.appendingPathComponent("elsewhere.json")
        try FileManager.default.moveItem(at: store.deviceKeyFile, to: elsewhere)
        try FileManager.default.createSymbolicLink(at: store.deviceKeyFile, withDestinationURL: elsewhere)
        #expect(throws: KeyStoreError.self) { try store.loadDeviceIdentity() }
    }

    @Test("missing, corrupt, foreign and newer files give distinct errors")
    func badFiles() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        let path = store.deviceKeyFile.path
        #expect(throws: KeyStoreError.noDeviceKey(path: path)) { try store.loadDeviceIdentity() }
        try store.prepare()

        func write(_ text: String) throws {
            try SecureFiles.writePrivateFileAtomically(Data(text.utf8), to: store.deviceKeyFile)
        }
        try write("{ not json")
        #expect(throws: KeyStoreError.corrupt(path: path, detail: "not JSON")) { try store.loadDeviceIdentity() }
        try write(#"{"kty":"EC","crv":"P-256"}"#)
        #expect(throws: KeyStoreError.foreign(path: path, found: "JSON without a format tag")) {
            try store.loadDeviceIdentity()
        }
        try write(#"{"format":"conclave.call-key","version":1,"record":{}}"#)
        #expect(throws: KeyStoreError.foreign(path: path, found: "format \"conclave.call-key\"")) {
            try store.loadDeviceIdentity()
        }
        try write(#"{"format":"conclave.device-key","version":9,"record":{}}"#)
        #expect(throws: KeyStoreError.unsupportedVersion(path: path, version: 9)) { try store.loadDeviceIdentity() }
        try write(#"{"format":"conclave.device-key","version":1,"record":{"type":"p256"}}"#)
        #expect(throws: KeyStoreError.corrupt(path: path, detail: "missing field privateKey")) {
            try store.loadDeviceIdentity()
        }

        // A valid file whose public key was edited no longer matches its private key.
        try store.createDeviceIdentity(type: .p256, replacing: true)
        var json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: store.deviceKeyFile)) as? [String: Any]
        )
        var record = try #require(json["record"] as? [String: Any])
        record["publicKey"] = try DeviceIdentity.generate(.p256).publicKeyString
        json["record"] = record
        try SecureFiles.writePrivateFileAtomically(
            try JSONSerialization.data(withJSONObject: json),
            to: store.deviceKeyFile
        )
        #expect(throws: KeyStoreError.corrupt(path: path, detail: "publicKey does not belong to privateKey")) {
            try store.loadDeviceIdentity()
        }
    }
}

@Suite("replacing the device key")
struct DeviceKeyReplacementTests {
    @Test(
        "init --force keeps the old key in previous/ and stored call keys still open",
        arguments: DeviceKeyType.allCases
    )
    func storedCallKeysSurviveReplacement(type: DeviceKeyType) throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root.appendingPathComponent("data"))
        let first = try store.createDeviceIdentity(type: type)
        let callKey = CallKey.random()
        try store.calls.storeWrappedKey(try KeyWrapping.wrap(callKey, for: first.publicKey), for: 77)
        let oldBytes = try Data(contentsOf: store.deviceKeyFile)

        let created = try store.initializeDeviceIdentity(type: type, replacing: true)
        #expect(created.identity.publicKeyString != first.publicKeyString)
        let replaced = try #require(created.replaced)
        #expect(replaced.publicKey?.fingerprint == first.publicKey.fingerprint)
        #expect(replaced.backup.deletingLastPathComponent().path == store.previousKeysDirectory.path)
        #expect(replaced.backup.lastPathComponent.hasPrefix("device-"))
        #expect(try Data(contentsOf: replaced.backup) == oldBytes, "the backup is the old file, byte for byte")
        #expect(mode(replaced.backup) == 0o600)
        #expect(mode(store.previousKeysDirectory) == 0o700)

        // The stored call key was wrapped for the old key: the new one alone cannot open it, the store can.
        let wrapped = try #require(try store.calls.wrappedKey(for: 77))
        #expect(throws: KeyMaterialError.self) { try KeyWrapping.unwrap(wrapped, with: created.identity) }
        let opened = try store.openCallKey(wrapped, with: try store.loadDeviceIdentity())
        #expect(opened.hexString == callKey.hexString)

        // A second replacement keeps both earlier keys, and the first call still opens.
        let third = try store.initializeDeviceIdentity(type: type, replacing: true)
        #expect(try store.previousDeviceIdentities().count == 2)
        #expect(try store.openCallKey(wrapped, with: third.identity).hexString == callKey.hexString)
    }

    @Test("a key that no device key ever opened is still refused")
    func foreignKeyRefused() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        let identity = try store.createDeviceIdentity(type: .p256)
        try store.createDeviceIdentity(type: .p256, replacing: true)
        let stranger = try DeviceIdentity.generate(.p256)
        let wrapped = try KeyWrapping.wrap(CallKey.random(), for: stranger.publicKey)
        #expect(throws: KeyMaterialError.self) { try store.openCallKey(wrapped, with: identity) }
    }
}

@Suite("reading creates nothing")
struct ReadOnlyKeyStoreTests {
    @Test("loading, listing and reading calls on a missing data directory create nothing")
    func missingDataDirectoryStaysMissing() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("never-created")
        let store = KeyStore(dataDirectory: data)
        #expect(throws: KeyStoreError.noDeviceKey(path: store.deviceKeyFile.path)) { try store.loadDeviceIdentity() }
        #expect(try store.calls.callIDs().isEmpty)
        #expect(try store.calls.record(for: 1) == nil)
        #expect(try store.previousDeviceIdentities().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: data.path))
    }

    @Test("a FIFO as device.json is refused at once, as a FIFO")
    func fifoDeviceKeyRefused() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = KeyStore(dataDirectory: root)
        try store.prepare()
        #expect(mkfifo(store.deviceKeyFile.path, 0o600) == 0)
        #expect(
            throws: KeyStoreError.wrongKind(path: store.deviceKeyFile.path, found: "FIFO", expected: "regular file")
        ) {
            try store.loadDeviceIdentity()
        }
    }
}

@Suite("CallKeyStorage")
struct CallKeyStorageTests {
    @Test("store, get, history, rejoin details, list, remove, remove all")
    func lifecycle() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let calls = KeyStore(dataDirectory: root).calls
        let bigID: UInt64 = 18_000_000_000_000_000_123  // above 2^53: must survive JSON
        #expect(try calls.wrappedKey(for: bigID) == nil)
        try calls.storeWrappedKey("wrapped-0", for: bigID, epoch: 0)
        try calls.storeWrappedKey("wrapped-1", for: bigID, epoch: 1)
        try calls.storeWrappedKey("other", for: 7)
        #expect(try calls.wrappedKey(for: bigID) == "wrapped-1")
        let record = try #require(try calls.record(for: bigID))
        #expect(record.history.map(\.epoch) == [0, 1])
        #expect(record.history.map(\.wrappedKey) == ["wrapped-0", "wrapped-1"])
        #expect(record.room == nil)

        try calls.storeRejoinDetails(
            for: bigID,
            janusURL: "ws://127.0.0.1:8188",
            room: 1234,
            display: "7:Ann",
            cryptoFormat: .ecall
        )
        let updated = try #require(try calls.record(for: bigID))
        #expect(updated.janusURL == "ws://127.0.0.1:8188")
        #expect(updated.room == 1234)
        #expect(updated.display == "7:Ann")
        #expect(updated.cryptoFormat == .ecall)
        #expect(updated.history.count == 2)

        let file = calls.file(for: bigID)
        #expect(mode(file) == 0o600)
        #expect(mode(calls.directory) == 0o700)
        #expect(try String(contentsOf: file, encoding: .utf8).contains("\"18000000000000000123\""))

        #expect(try calls.callIDs() == [7, bigID])
        try calls.remove(7)
        #expect(try calls.callIDs() == [bigID])
        try calls.removeAll()
        #expect(try calls.callIDs().isEmpty)
        // No temporary files are left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: calls.directory.path).isEmpty)
    }

    @Test("each epoch is valid until the next; after the call only the last two are kept")
    func epochWindows() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let calls = KeyStore(dataDirectory: root).calls
        let start = Date(timeIntervalSince1970: 1_763_942_400)
        for epoch in UInt64(0)..<4 {
            try calls.storeWrappedKey(
                "wrapped-\(epoch)",
                for: 9,
                epoch: epoch,
                appliedAt: start.addingTimeInterval(Double(epoch) * 20)
            )
        }
        let record = try #require(try calls.record(for: 9))
        #expect(record.history.map(\.validUntil) == [20, 40, 60].map { start.addingTimeInterval($0) } + [nil])
        try calls.pruneHistory(for: 9)
        let pruned = try #require(try calls.record(for: 9))
        #expect(pruned.history.map(\.epoch) == [2, 3])
        #expect(pruned.wrappedKey == "wrapped-3")
        try calls.pruneHistory(for: 9, keepingLast: 5)
        #expect(try calls.record(for: 9)?.history.count == 2)
    }

    @Test("a call file holding another call is corrupt; a foreign file is refused")
    func mismatchedFile() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let calls = KeyStore(dataDirectory: root).calls
        try calls.storeWrappedKey("w", for: 1)
        try FileManager.default.copyItem(at: calls.file(for: 1), to: calls.file(for: 2))
        #expect(throws: KeyStoreError.corrupt(path: calls.file(for: 2).path, detail: "holds call 1, not 2")) {
            try calls.record(for: 2)
        }
        try SecureFiles.writePrivateFileAtomically(
            Data(#"{"format":"conclave.device-key","version":1}"#.utf8),
            to: calls.file(for: 3)
        )
        #expect(throws: KeyStoreError.self) { try calls.record(for: 3) }
    }

    @Test("concurrent writers with separate file descriptors lose no history entry")
    func concurrentWriters() async throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        // Each task opens its own lock file descriptor, exactly as a second process would: flock
        // locks belong to the open file description, so this exercises the cross-process path.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    let calls = KeyStore(dataDirectory: root).calls
                    for index in 0..<15 {
                        try calls.storeWrappedKey("w\(writer)-\(index)", for: 99, epoch: UInt64(writer * 100 + index))
                    }
                }
            }
            try await group.waitForAll()
        }
        let record = try #require(try KeyStore(dataDirectory: root).calls.record(for: 99))
        #expect(record.history.count == 60)
        #expect(Set(record.history.map(\.wrappedKey)).count == 60)
    }
}
