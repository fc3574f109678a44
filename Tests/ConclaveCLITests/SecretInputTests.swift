import ConclaveTestSupport
import Foundation
import Testing

/// Secrets from files and standard input, so that they stay out of the process list.
@Suite struct SecretInputTests {
    static var binary: String { TestPaths.productsDirectory.appendingPathComponent("conclave").path }

    func run(_ arguments: [String], input: Data? = nil) throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw CLITestError(description: "\(Self.binary) is missing: run swift build --build-tests first")
        }
        return try runProcess(Self.binary, arguments, input: input, timeout: .seconds(60))
    }

    /// A recipient's data directory and public key.
    func recipient() throws -> (data: String, publicKey: String, directory: URL) {
        let directory = try TestPaths.temporaryDirectory("conclave-secret")
        let data = directory.appendingPathComponent("data").path
        let created = try run(["keys", "init", "--type", "p256", "--data-dir", data])
        guard created.succeeded else { throw CLITestError(description: created.errorOutput) }
        let key = try run(["keys", "show", "--public", "--data-dir", data]).output
        return (data, key.trimmingCharacters(in: .whitespacesAndNewlines), directory)
    }

    func randomKeyHex() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    @Test func keysWrapReadsTheKeyFromAFileAndFromStandardInput() throws {
        let peer = try recipient()
        defer { try? FileManager.default.removeItem(at: peer.directory) }

        let fromFile = randomKeyHex()
        let file = peer.directory.appendingPathComponent("call.key")
        try Data((fromFile + "\n").utf8).write(to: file)
        let wrappedFromFile = try run(["keys", "wrap", "--for", peer.publicKey, "--key-file", file.path])
        #expect(wrappedFromFile.succeeded, "\(wrappedFromFile.errorOutput)")
        let opened = try run([
            "keys", "unwrap", wrappedFromFile.output.trimmingCharacters(in: .newlines), "--data-dir", peer.data,
        ])
        #expect(opened.output == fromFile + "\n", "\(opened.errorOutput)")

        let fromInput = randomKeyHex()
        let wrappedFromInput = try run(
            ["keys", "wrap", "--for", peer.publicKey, "--key-file", "-"],
            input: Data((fromInput + "\n").utf8)
        )
        #expect(wrappedFromInput.succeeded, "\(wrappedFromInput.errorOutput)")
        let openedInput = try run([
            "keys", "unwrap", wrappedFromInput.output.trimmingCharacters(in: .newlines), "--data-dir", peer.data,
        ])
        #expect(openedInput.output == fromInput + "\n", "\(openedInput.errorOutput)")
    }

    @Test func bothFormsOfASecretAreRefused() throws {
        let peer = try recipient()
        defer { try? FileManager.default.removeItem(at: peer.directory) }
        let file = peer.directory.appendingPathComponent("secret")
        try Data("x\n".utf8).write(to: file)

        let key = try run(["keys", "wrap", "--for", peer.publicKey, "--key", randomKeyHex(), "--key-file", file.path])
        #expect(!key.succeeded)
        #expect(key.errorOutput.contains("give --key or --key-file, not both"), "\(key.errorOutput)")

        let janus = "ws://127.0.0.1:9"
        let secret = try run(["rooms", "list", "--janus", janus, "--api-secret", "x", "--api-secret-file", file.path])
        #expect(!secret.succeeded)
        #expect(
            secret.errorOutput.contains("give --api-secret or --api-secret-file, not both"),
            "\(secret.errorOutput)"
        )
        #expect(!secret.errorOutput.contains("cannot connect"), "refused before connecting")

        let token = try run(["rooms", "list", "--janus", janus, "--token", "x", "--token-file", file.path])
        #expect(!token.succeeded)
        #expect(token.errorOutput.contains("give --token or --token-file, not both"), "\(token.errorOutput)")

        let twice = try run(["rooms", "list", "--janus", janus, "--api-secret-file", "-", "--token-file", "-"])
        #expect(!twice.succeeded)
        #expect(twice.errorOutput.contains("both read standard input"), "\(twice.errorOutput)")

        let missing = try run(["rooms", "list", "--janus", janus, "--token-file", file.path + ".missing"])
        #expect(!missing.succeeded)
        #expect(missing.errorOutput.contains("--token-file: cannot open"), "\(missing.errorOutput)")
    }

    /// The API secret from a file and from standard input reaches Janus: a Janus with an API secret
    /// lists its rooms for the right one and refuses a wrong one.
    @Test func theAPISecretFileReachesJanus() throws {
        let bed = try TestJanus.start(.init(apiSecret: "the-file-secret"))
        defer { bed.stop() }
        let directory = try TestPaths.temporaryDirectory("conclave-secret")
        defer { try? FileManager.default.removeItem(at: directory) }
        let right = directory.appendingPathComponent("right")
        let wrong = directory.appendingPathComponent("wrong")
        try Data("the-file-secret\n".utf8).write(to: right)
        try Data("not-the-secret\n".utf8).write(to: wrong)
        let janus = ["rooms", "list", "--janus", bed.webSocketURL]

        let fromFile = try run(janus + ["--api-secret-file", right.path])
        #expect(fromFile.succeeded, "\(fromFile.errorOutput)")
        let fromInput = try run(janus + ["--api-secret-file", "-"], input: Data("the-file-secret\n".utf8))
        #expect(fromInput.succeeded, "\(fromInput.errorOutput)")
        let refused = try run(janus + ["--api-secret-file", wrong.path])
        #expect(!refused.succeeded)
        #expect(refused.errorOutput.contains("API secret"), "\(refused.errorOutput)")
        #expect(!refused.errorOutput.contains("not-the-secret"))
    }

    @Test func helpPrefersTheFileForms() throws {
        let wrap = try run(["keys", "wrap", "--help"])
        #expect(wrap.output.contains("--key-file"))
        #expect(wrap.output.contains("prefer --key-file"))
        let rooms = try run(["rooms", "list", "--help"])
        #expect(rooms.output.contains("prefer --api-secret-file"))
        #expect(rooms.output.contains("prefer --token-file"))
    }
}
