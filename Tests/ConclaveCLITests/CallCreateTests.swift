import ConclaveTestSupport
import Foundation
import Testing

/// `conclave call create` checks everything before it acts, and never overwrites silently.
@Suite struct CallCreateTests {
    /// A data directory with a device key, public key files for `names`, and an --out folder path.
    struct Setup {
        let directory: URL
        let data: String
        let out: String
        var keyFiles: [String: String] = [:]

        init(names: [String]) throws {
            directory = try TestPaths.temporaryDirectory("conclave-create")
            data = directory.appendingPathComponent("data").path
            out = directory.appendingPathComponent("invitations").path
            let created = try conclave(["keys", "init", "--type", "p256", "--data-dir", data])
            guard created.succeeded else { throw CLITestError(description: created.errorOutput) }
            let key = try conclave(["keys", "show", "--public", "--data-dir", data]).stdout
            for name in names {
                let file = directory.appendingPathComponent("\(name.count)-\(keyFiles.count).pub").path
                try key.write(to: URL(fileURLWithPath: file))
                keyFiles[name] = file
            }
        }

        func participants(_ specs: [String]) -> [String] {
            specs.flatMap { spec in ["--participant", "\(spec)=@\(keyFiles[spec, default: ""])"] }
        }

        /// `call create` against `janus` (by default a port nothing listens on: validation comes first).
        func create(_ specs: [String], janus: String = "ws://127.0.0.1:9", _ extra: [String] = []) throws
            -> ProcessResult
        {
            try conclave(
                ["call", "create", "--call-id", "424242", "--janus", janus, "--data-dir", data, "--out", out]
                    + participants(specs) + extra
            )
        }

        var storedCall: Bool { FileManager.default.fileExists(atPath: data + "/keys/calls/424242.json") }
        var outExists: Bool { FileManager.default.fileExists(atPath: out) }
    }

    @Test func aParticipantIdGivenTwiceIsRefusedBeforeAnythingIsCreated() throws {
        let setup = try Setup(names: ["bob:Bob", "bob:Bobby"])
        let result = try setup.create(["bob:Bob", "bob:Bobby"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("--participant bob is given twice"), "\(result.errorOutput)")
        #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
        #expect(!setup.outExists)
        #expect(!setup.storedCall)
    }

    @Test func inviteNeedsNumericIdsADeviceIdAndABrokerBeforeAnythingIsCreated() throws {
        // The file form still takes any user id, '@' included.
        let setup = try Setup(names: ["bob@example.org", "12:Bob@102", "12:Bob"])
        let ids = try conclave(["keys", "set", "--display", "11:Alice", "--device-id", "101", "--data-dir", setup.data])
        #expect(ids.succeeded, "\(ids.errorOutput)")
        let passcode = setup.directory.appendingPathComponent("passcode")
        try Data("unused".utf8).write(to: passcode)
        let broker = ["--broker", "ws://127.0.0.1:9/ws", "--passcode-file", passcode.path]
        for (specs, extra, message) in [
            (["12:Bob"], ["--invite"] + broker, "--invite needs USERID[:NAME]@DEVICEID=PUBLIC_KEY"),
            (["bob@example.org"], ["--invite"] + broker, "--invite needs USERID[:NAME]@DEVICEID=PUBLIC_KEY"),
            (["12:Bob@102"], ["--invite"], "no signaling broker"),
        ] {
            let result = try setup.create(specs, extra)
            #expect(result.status != 0)
            #expect(result.errorOutput.contains(message), "\(specs): \(result.errorOutput)")
            #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
            #expect(!setup.outExists)
            #expect(!setup.storedCall)
        }
    }

    @Test func idsThatShareAnInvitationFileAreRefused() throws {
        let setup = try Setup(names: ["a/b", "a_b", "a.b"])
        let result = try setup.create(["a/b", "a_b", "a.b"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("would share the invitation file a_b.json"), "\(result.errorOutput)")
        #expect(!setup.outExists)
        #expect(!setup.storedCall)
    }

    @Test func aThreeHundredCharacterIdFailsOnTheIdNotOnJanus() throws {
        let long = String(repeating: "x", count: 300)
        let setup = try Setup(names: [long, "carol"])
        let result = try setup.create(["carol", long])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("the user id has 300 characters"), "\(result.errorOutput)")
        #expect(!result.errorOutput.contains("cannot connect"))
        #expect(!result.errorOutput.contains("NSCocoaErrorDomain"))
        #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
        #expect(!setup.outExists, "no invitation written")
        #expect(!setup.storedCall, "no key store entry")
    }

    @Test func anOutThatIsAFileIsRefusedInOneLine() throws {
        let setup = try Setup(names: ["carol"])
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: setup.out))
        let result = try setup.create(["carol"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("it is a regular file, not a folder"), "\(result.errorOutput)")
        #expect(!result.errorOutput.contains("NSCocoaErrorDomain"))
        #expect(!result.errorOutput.contains("cannot connect"))
        #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
        #expect(!setup.storedCall)
    }

    @Test func anExistingInvitationIsKeptWithoutForceAndReplacedWithIt() throws {
        let bed = try TestJanus.shared()
        let setup = try Setup(names: ["carol", "dave"])
        try FileManager.default.createDirectory(atPath: setup.out, withIntermediateDirectories: true)
        let carol = setup.out + "/carol.json"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: carol))

        let refused = try setup.create(["carol", "dave"], janus: bed.webSocketURL)
        #expect(refused.status != 0)
        #expect(refused.errorOutput.contains("\(carol) already exists: pass --force"), "\(refused.errorOutput)")
        #expect(try String(contentsOfFile: carol, encoding: .utf8) == "keep me")
        #expect(!FileManager.default.fileExists(atPath: setup.out + "/dave.json"), "nothing half done")
        #expect(!setup.storedCall)

        let forced = try setup.create(["carol", "dave"], janus: bed.webSocketURL, ["--force"])
        #expect(forced.succeeded, "\(forced.errorOutput)")
        let invitation = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: carol)))
        #expect((invitation as? [String: Any])?["callId"] as? Int == 424242)
        #expect(FileManager.default.fileExists(atPath: setup.out + "/dave.json"))
        #expect(setup.storedCall)
    }
}
