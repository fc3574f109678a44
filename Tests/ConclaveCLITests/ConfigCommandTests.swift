import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

@Suite struct ConfigCommandTests {
    @Test func theExampleIsValid() throws {
        let example = TestPaths.packageRoot.appendingPathComponent("config/conclave.example.json").path
        let result = try conclave(["config", "check", example])
        #expect(result.succeeded, "\(result.errorOutput)")
        #expect(result.output.contains("valid"))
    }

    @Test func problemsAreListedWithTheirKeysAndFailTheCheck() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-config")
        let file = directory.appendingPathComponent("bad.json")
        try Data(#"{"janus": {"url": "localhost:8188"}, "video": {"codec": "vp9"}, "crypto": "aes"}"#.utf8).write(
            to: file
        )
        let result = try conclave(["config", "check", file.path])
        #expect(result.status != 0)
        for key in ["janus.url", "video.codec", "crypto"] {
            #expect(result.errorOutput.contains("\(file.path): \(key):"), "\(result.errorOutput)")
        }
        let missing = try conclave(["config", "check", directory.appendingPathComponent("none.json").path])
        #expect(missing.status != 0)
        #expect(missing.errorOutput.contains("cannot read the file"))
    }

    @Test func joinRefusesAnInvalidConfiguration() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-config")
        let file = directory.appendingPathComponent("bad.json")
        try Data(#"{"ice": {"stun": "host:0"}}"#.utf8).write(to: file)
        let result = try conclave(["join", "--config", file.path, "--room", "1", "--call-id", "1", "--crypto", "none"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("ice.stun"), "\(result.errorOutput)")
    }

    @Test func joinWaitsForJanusAsLongAsTheConfigurationSays() throws {
        // A Janus that accepts the WebSocket and never answers: the failed request names the
        // configured limit (1.5 s), not the built-in 10 s.
        let script = TestPaths.packageRoot.appendingPathComponent("Tests/Interop/fake_janus.py").path
        let server = try BackgroundProcess(try TestPaths.python(), [script, "silent", "--lifetime", "20"])
        defer { server.stop() }
        let port = try server.readLine()
        let directory = try TestPaths.temporaryDirectory("conclave-config")
        let file = directory.appendingPathComponent("timeout.json")
        try Data(#"{"janus": {"url": "ws://127.0.0.1:\#(port)", "timeoutSeconds": 1.5}}"#.utf8).write(to: file)
        let result = try conclave(
            [
                "join", "--config", file.path, "--room", "1", "--call-id", "1", "--crypto", "none",
                "--display", "u1:test", "--audio", "none", "--video", "none", "--status", "none",
            ]
        )
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("within 1.5 seconds"), "\(result.errorOutput)")
    }

    @Test func recordRefusesARelayPolicyWithoutATURNServer() throws {
        let result = try conclave([
            "record", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "1", "--crypto", "none",
            "--ice-policy", "relay",
        ])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("--ice-policy relay needs a TURN server"), "\(result.errorOutput)")
    }

    @Test func recordTakesJanusICEAndItsFolderFromTheConfiguration() throws {
        let bed = try TestJanus.shared()
        let room = UInt64.random(in: 100_000...999_999)
        let created = try conclave(["rooms", "create", "--janus", bed.webSocketURL, "--room", "\(room)"])
        #expect(created.succeeded, "\(created.errorOutput)")
        defer { _ = try? conclave(["rooms", "destroy", "--janus", bed.webSocketURL, "--room", "\(room)"]) }
        let directory = try TestPaths.temporaryDirectory("conclave-config")
        let recordings = directory.appendingPathComponent("my-recordings").path
        let file = directory.appendingPathComponent("record.json")
        try Data(
            #"""
            {"janus": {"url": "\#(bed.webSocketURL)"}, "ice": {"addresses": ["\#(bed.hostAddress)"]},
             "recordingsDirectory": "\#(recordings)"}
            """#.utf8
        ).write(to: file)
        let result = try conclave([
            "record", "--config", file.path, "--room", "\(room)", "--call-id", "5", "--crypto", "none",
            "--duration", "1",
        ])
        #expect(result.succeeded, "\(result.errorOutput)")
        #expect(result.output.contains("into \(recordings)/call-5-"), "\(result.output)")
        let made = try FileManager.default.contentsOfDirectory(atPath: recordings)
        #expect(made.count == 1 && made[0].hasPrefix("call-5-"), "\(made)")
        let manifest = "\(recordings)/\(made.first ?? "")/manifest.json"
        #expect(FileManager.default.fileExists(atPath: manifest), "a finished recording has its manifest")
    }
}
