import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave keys ...` run as a user runs it: the built binary with `--data-dir` in a temp directory.
@Suite("conclave keys")
struct KeysCommandTests {
    static var binary: String { TestPaths.productsDirectory.appendingPathComponent("conclave").path }

    func conclave(_ arguments: [String], dataDir: URL) throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw CLITestError(description: "\(Self.binary) is missing: run swift build --build-tests first")
        }
        return try runProcess(Self.binary, arguments + ["--data-dir", dataDir.path], timeout: .seconds(60))
    }

    func randomKeyHex() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    @Test("init, show, show --public, export", arguments: ["rsa", "p256"])
    func initAndShow(type: String) throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let created = try conclave(["keys", "init", "--type", type], dataDir: dir)
        #expect(created.succeeded, "\(created.errorOutput)")

        let publicOnly = try conclave(["keys", "show", "--public"], dataDir: dir)
        #expect(publicOnly.succeeded)
        let lines = publicOnly.output.split(separator: "\n")
        #expect(lines.count == 1)
        let publicKey = String(lines[0])
        let der = try #require(Data(base64Encoded: publicKey))
        #expect(type == "rsa" ? der.count > 256 && publicKey.count >= 150 : der.count == 64)

        let shown = try conclave(["keys", "show"], dataDir: dir)
        #expect(shown.output.contains(publicKey))
        #expect(shown.output.contains("Fingerprint:"))
        #expect(created.output.contains(publicKey))

        let exported = try conclave(["keys", "export"], dataDir: dir)
        let json = try #require(try JSONSerialization.jsonObject(with: exported.stdout) as? [String: String])
        #expect(json["type"] == type)
        #expect(json["publicKey"] == publicKey)
        #expect(json["privateKey"] != nil)

        var info = stat()
        stat(dir.appendingPathComponent("keys/device.json").path, &info)
        #expect(info.st_mode & 0o777 == 0o600)
        stat(dir.appendingPathComponent("keys").path, &info)
        #expect(info.st_mode & 0o777 == 0o700)
    }

    @Test("init --device-id and keys set store the broker ids; signaling without them is one clear error")
    func deviceIDs() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try conclave(["keys", "init", "--type", "p256", "--display", "Alice"], dataDir: dir).succeeded)
        // A display without a numeric user id and no device id: the broker cannot address us.
        let environment = ["CONCLAVE_BROKER_PASSCODE": "unused"]
        let noIDs = try runProcess(
            Self.binary,
            ["listen", "--broker", "ws://127.0.0.1:9/ws", "--data-dir", dir.path],
            environment: environment,
            timeout: .seconds(60)
        )
        #expect(noIDs.status != 0)
        #expect(noIDs.errorOutput.contains("keys set --display USERID:NAME"), "\(noIDs.errorOutput)")
        #expect(try conclave(["keys", "set", "--display", "1001:Alice"], dataDir: dir).succeeded)
        let noDevice = try runProcess(
            Self.binary,
            ["listen", "--broker", "ws://127.0.0.1:9/ws", "--data-dir", dir.path],
            environment: environment,
            timeout: .seconds(60)
        )
        #expect(noDevice.errorOutput.contains("keys set --device-id N"), "\(noDevice.errorOutput)")
        let set = try conclave(["keys", "set", "--device-id", "2001"], dataDir: dir)
        #expect(set.succeeded, "\(set.errorOutput)")
        let shown = try conclave(["keys", "show"], dataDir: dir).output
        #expect(shown.contains("Display:     1001:Alice"), "\(shown)")
        #expect(shown.contains("Device id:   2001"), "\(shown)")
        // Replacing the key keeps the ids; init can also set them at once.
        #expect(
            try conclave(["keys", "init", "--force", "--type", "p256"], dataDir: dir).output.contains(
                "Device id:   2001"
            )
        )
        let other = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: other) }
        let created = try conclave(
            ["keys", "init", "--type", "p256", "--display", "1002:Bob", "--device-id", "2002"],
            dataDir: other
        )
        #expect(created.output.contains("Device id:   2002"), "\(created.output)")
    }

    @Test("init twice fails without --force and succeeds with it")
    func initTwice() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try conclave(["keys", "init", "--type", "p256"], dataDir: dir).succeeded)
        let again = try conclave(["keys", "init", "--type", "p256"], dataDir: dir)
        #expect(!again.succeeded)
        #expect(again.errorOutput.contains("--force"))
        #expect(try conclave(["keys", "init", "--type", "p256", "--force"], dataDir: dir).succeeded)
    }

    @Test("wrap for a peer, unwrap on the peer: the same 64 hex characters", arguments: ["rsa", "p256"])
    func wrapUnwrap(type: String) throws {
        let sender = try TestPaths.temporaryDirectory()
        let recipient = try TestPaths.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: sender)
            try? FileManager.default.removeItem(at: recipient)
        }
        #expect(try conclave(["keys", "init", "--type", type], dataDir: recipient).succeeded)
        let publicKey = try conclave(["keys", "show", "--public"], dataDir: recipient).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let key = randomKeyHex()
        // Wrapping needs no device key of our own.
        let wrapped = try conclave(["keys", "wrap", "--for", publicKey, "--key", key.uppercased()], dataDir: sender)
        #expect(wrapped.succeeded, "\(wrapped.errorOutput)")
        let wrappedString = wrapped.output.trimmingCharacters(in: .newlines)
        #expect(!wrappedString.contains("\n"))
        #expect(wrappedString.contains(":") == (type == "p256"))
        let unwrapped = try conclave(["keys", "unwrap", wrappedString], dataDir: recipient)
        #expect(unwrapped.succeeded, "\(unwrapped.errorOutput)")
        #expect(unwrapped.output == key + "\n")

        // A different device cannot unwrap it, and says so in one line without key material.
        #expect(try conclave(["keys", "init", "--type", type], dataDir: sender).succeeded)
        let wrong = try conclave(["keys", "unwrap", wrappedString], dataDir: sender)
        #expect(!wrong.succeeded)
        #expect(wrong.errorOutput.contains("did not open"))
        #expect(!wrong.errorOutput.contains(key))
        #expect(wrong.errorOutput.split(separator: "\n").count == 1)
    }

    @Test("bad input fails with one clear line")
    func badInput() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let noKey = try conclave(["keys", "show"], dataDir: dir)
        #expect(!noKey.succeeded)
        #expect(noKey.errorOutput.contains("conclave keys init"))
        let shortKey = try conclave(["keys", "wrap", "--for", "AAAA", "--key", "abcd"], dataDir: dir)
        #expect(!shortKey.succeeded)
        #expect(shortKey.errorOutput.contains("call key"))
    }

    @Test("a world-readable key file is refused")
    func worldReadable() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try conclave(["keys", "init", "--type", "p256"], dataDir: dir).succeeded)
        chmod(dir.appendingPathComponent("keys/device.json").path, 0o644)
        let result = try conclave(["keys", "show", "--public"], dataDir: dir)
        #expect(!result.succeeded)
        #expect(result.output.isEmpty)
        #expect(result.errorOutput.contains("lets other users read it"))
    }

    @Test("init --force keeps the old key, says which it was and where it is, and its call keys still open")
    func forceKeepsThePreviousKey() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try conclave(["keys", "init", "--type", "p256"], dataDir: dir).succeeded)
        let oldShown = try conclave(["keys", "show"], dataDir: dir).output
        let oldFingerprint = try #require(
            oldShown.split(separator: "\n").first { $0.hasPrefix("Fingerprint:") }?.dropFirst("Fingerprint:".count)
                .trimmingCharacters(in: .whitespaces)
        )
        let oldPublic = try conclave(["keys", "show", "--public"], dataDir: dir).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // A call key wrapped for the old key, as an invitation or the call key store holds it.
        let key = randomKeyHex()
        let wrapped = try conclave(["keys", "wrap", "--for", oldPublic, "--key", key], dataDir: dir).output
            .trimmingCharacters(in: .newlines)

        let replaced = try conclave(["keys", "init", "--type", "p256", "--force"], dataDir: dir)
        #expect(replaced.succeeded, "\(replaced.errorOutput)")
        #expect(replaced.output.contains("fingerprint \(oldFingerprint)"), "\(replaced.output)")
        let previous = dir.appendingPathComponent("keys/previous")
        let backups = try FileManager.default.contentsOfDirectory(atPath: previous.path)
        #expect(backups.count == 1 && backups[0].hasPrefix("device-"), "\(backups)")
        #expect(replaced.output.contains(previous.appendingPathComponent(backups[0]).path), "\(replaced.output)")
        var info = stat()
        stat(previous.appendingPathComponent(backups[0]).path, &info)
        #expect(info.st_mode & 0o777 == 0o600)
        stat(previous.path, &info)
        #expect(info.st_mode & 0o777 == 0o700)

        let opened = try conclave(["keys", "unwrap", wrapped], dataDir: dir)
        #expect(opened.succeeded, "\(opened.errorOutput)")
        #expect(opened.output == key + "\n")
    }

    @Test("read-only commands on a missing data directory create nothing and say there is no device key")
    func readOnlyCommandsCreateNothing() throws {
        let parent = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let dir = parent.appendingPathComponent("missing")
        for command in [
            ["keys", "unwrap", "c2VjcmV0"], ["keys", "show"], ["keys", "show", "--public"], ["keys", "export"],
        ] {
            let result = try conclave(command, dataDir: dir)
            #expect(!result.succeeded)
            #expect(result.errorOutput.contains("no device key"), "\(command): \(result.errorOutput)")
            #expect(!FileManager.default.fileExists(atPath: dir.path), "\(command) created \(dir.path)")
        }
        let calls = try conclave(["keys", "calls"], dataDir: dir)
        #expect(calls.succeeded, "\(calls.errorOutput)")
        #expect(!FileManager.default.fileExists(atPath: dir.path), "keys calls created \(dir.path)")
    }

    @Test("keys calls lists stored calls without keys")
    func calls() throws {
        let dir = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let empty = try conclave(["keys", "calls"], dataDir: dir)
        #expect(empty.succeeded)
        #expect(empty.output.isEmpty)

        // A call record as CallKeyStorage writes it.
        let secret = "c2VjcmV0LXdyYXBwZWQta2V5"
        let record = """
            {"format":"conclave.call-key","version":1,"record":{"callId":"123456789012","wrappedKey":"\(secret)",
            "history":[{"epoch":0,"wrappedKey":"\(secret)","appliedAt":"2026-01-01T00:00:00Z"}],
            "room":"4321","cryptoFormat":"ecall","updatedAt":"2026-01-01T00:00:00Z"}}
            """
        // Listing created nothing, so the folders are made here as the key store makes them.
        let callsFolder = dir.appendingPathComponent("keys/calls")
        try FileManager.default.createDirectory(at: callsFolder, withIntermediateDirectories: true)
        chmod(dir.appendingPathComponent("keys").path, 0o700)
        chmod(callsFolder.path, 0o700)
        let file = callsFolder.appendingPathComponent("123456789012.json")
        try Data(record.utf8).write(to: file)
        chmod(file.path, 0o600)
        let listed = try conclave(["keys", "calls"], dataDir: dir)
        #expect(listed.succeeded, "\(listed.errorOutput)")
        #expect(listed.output == "123456789012 keys=1 room=4321 format=ecall\n")
        #expect(!listed.output.contains(secret))
    }
}

struct CLITestError: Error, CustomStringConvertible {
    var description: String
}
