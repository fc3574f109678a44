import ConclaveCore
import ConclaveFormats
import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ConfigurationTests {
    @Test func theExampleConfigurationIsValidAndReadsEveryKey() throws {
        let path = TestPaths.packageRoot.appendingPathComponent("config/conclave.example.json").path
        let configuration = try ConfigurationFile.load(path: path)
        #expect(configuration.janusURL == "ws://127.0.0.1:8188")
        #expect(configuration.stunServer?.port == 3478)
        #expect(configuration.turnServers.count == 1)
        #expect(configuration.iceTransportPolicy == .all)
        #expect(configuration.crypto == .ecall)
        #expect(configuration.videoCodec == .h264)
        #expect(configuration.videoFrameRate == 30)
        #expect(configuration.audioBitrate == 32000)
        #expect(configuration.signaling?.url == "ws://127.0.0.1:15674/ws")
        #expect(configuration.signaling?.virtualHost == "ecall")
        #expect(configuration.signaling?.login == "device-2001")
        #expect(configuration.signaling?.passcodeFile == "/var/lib/conclave/broker-passcode")
        #expect(configuration.signaling?.rotationSeconds == 300)
        #expect(configuration.signaling?.ecallCompatible == false)
    }

    @Test func theSignalingSectionHasDefaultsAndChecksItsValues() {
        let (defaults, none) = ConfigurationFile.parse(Data(#"{"signaling": {"url": "ws://127.0.0.1:15674/ws"}}"#.utf8))
        #expect(none.isEmpty, "\(none)")
        #expect(defaults.signaling?.virtualHost == "ecall")
        #expect(defaults.signaling?.login == nil)
        #expect(defaults.signaling?.rotationSeconds == 300)
        #expect(defaults.signaling?.ecallCompatible == false)
        let text = """
            {"signaling": {"url": "http://broker/ws", "rotationSeconds": 0.5, "ecallCompatible": "yes",
                           "passcode": "secret", "login": ""}}
            """
        let (_, issues) = ConfigurationFile.parse(Data(text.utf8))
        #expect(
            Set(issues.map(\.keyPath))
                == [
                    "signaling.url", "signaling.rotationSeconds", "signaling.ecallCompatible", "signaling.passcode",
                    "signaling.login",
                ],
            "\(issues)"
        )
        // A passcode in the file is refused by name: it belongs in passcodeFile.
        #expect(issues.first { $0.keyPath == "signaling.passcode" }?.problem.contains("passcodeFile") == true)
    }

    @Test func everyProblemIsReportedWithItsKeyPath() {
        let text = """
            {
              "janus": {"url": "http://example.org", "timeoutSeconds": -1, "apiSecert": "x"},
              "ice": {"addresses": ["198.18.0.2", "not-an-address"], "stun": "stun.example.org:99999",
                      "turn": [{"url": "turn:relay.example.org:3478"}, {"url": "relay.example.org"}]},
              "crypto": "rot13",
              "video": {"codec": "opus", "width": 641, "frameRate": "fast"},
              "audio": {"bitrate": 1},
              "extra": true
            }
            """
        let (_, issues) = ConfigurationFile.parse(Data(text.utf8))
        let paths = Set(issues.map(\.keyPath))
        for expected in [
            "janus.url", "janus.timeoutSeconds", "janus.apiSecert", "ice.addresses[1]", "ice.stun", "ice.turn[1].url",
            "crypto", "video.codec", "video.width", "video.frameRate", "audio.bitrate", "extra",
        ] {
            #expect(paths.contains(expected), "expected an issue at \(expected); got \(issues)")
        }
        #expect(!paths.contains("ice.turn[0].url"), "a TURN URL with no credentials is fine")
        #expect(
            issues.first { $0.keyPath == "janus.apiSecert" }?.problem.contains("apiSecret") == true,
            "typos get a suggestion"
        )
    }

    @Test func relayOnlyPolicyNeedsATurnServer() {
        let relay = #"{"ice": {"turn": [{"url": "turn:198.18.0.1:3478"}], "transportPolicy": "relay"}}"#
        let (configuration, issues) = ConfigurationFile.parse(Data(relay.utf8))
        #expect(issues.isEmpty, "\(issues)")
        #expect(configuration.iceTransportPolicy == .relay)
        let noServer = #"{"ice": {"transportPolicy": "relay"}}"#
        #expect(ConfigurationFile.parse(Data(noServer.utf8)).1.map(\.keyPath) == ["ice.transportPolicy"])
        let tls = #"{"ice": {"turn": [{"url": "turns:198.18.0.1:5349"}]}}"#
        let (tlsConfiguration, tlsIssues) = ConfigurationFile.parse(Data(tls.utf8))
        #expect(tlsIssues.map(\.keyPath) == ["ice.turn[0].url"], "TURN over TLS is refused, not sent as plain TCP")
        #expect(tlsConfiguration.turnServers.isEmpty)
        let unknown = #"{"ice": {"transportPolicy": "direct"}}"#
        let unknownIssues = ConfigurationFile.parse(Data(unknown.utf8)).1
        #expect(unknownIssues.map(\.keyPath) == ["ice.transportPolicy"])
        #expect(unknownIssues.first?.problem.contains("\"relay\"") == true)
    }

    @Test func wrongTypesAreIssuesAtTheirKeyPaths() {
        let text = """
            {
              "janus": {"url": 8188, "apiSecret": "", "timeoutSeconds": "10"},
              "ice": {"addresses": "127.0.0.1", "turn": [7, {"url": "turn:h", "username": false}], "stun": null},
              "video": {"bitrate": 600000.5, "height": true},
              "audio": [],
              "dataDirectory": {}
            }
            """
        let (configuration, issues) = ConfigurationFile.parse(Data(text.utf8))
        let problems = Dictionary(issues.map { ($0.keyPath, $0.problem) }, uniquingKeysWith: { first, _ in first })
        #expect(problems["janus.url"] == "must be a string")
        #expect(problems["janus.apiSecret"] == "must not be empty (leave the key out instead)")
        #expect(problems["janus.timeoutSeconds"] == "must be a number")
        #expect(problems["ice.addresses"] == "must be an array")
        #expect(problems["ice.turn[0]"] == "must be an object")
        #expect(problems["ice.turn[1].username"] == "must be a string")
        #expect(problems["ice.stun"] == nil, "null is the same as leaving the key out")
        #expect(problems["video.bitrate"] == "must be an integer")
        #expect(problems["video.height"] == "must be an integer")
        #expect(problems["audio"] == "must be an object")
        #expect(problems["dataDirectory"] == "must be a string")
        #expect(issues.count == 10, "\(issues)")
        // What is well-typed is still read.
        #expect(configuration.turnServers.map(\.address) == ["h"])
    }

    @Test func unknownKeysAreIssuesAtEveryLevelWithSuggestions() {
        let text = """
            {"$comment": "kept", "Crypto": "ecall", "janus": {"URL": "ws://h:1"}, "ice": {"turn": [{"url": "turn:h", "user": "u"}]},
             "video": {"fps": 30}, "audio": {"bitrate": 32000, "channels": 2}}
            """
        let (_, issues) = ConfigurationFile.parse(Data(text.utf8))
        #expect(
            issues.map(\.keyPath) == ["Crypto", "janus.URL", "ice.turn[0].user", "video.fps", "audio.channels"],
            "\(issues)"
        )
        #expect(issues.first { $0.keyPath == "Crypto" }?.problem == "unknown key (did you mean \"crypto\"?)")
        #expect(issues.first { $0.keyPath == "audio.channels" }?.problem == "unknown key; known keys: bitrate")
    }

    @Test func theTopLevelMustBeAnObject() {
        for text in ["[]", "3", "\"janus\"", "null"] {
            let issues = ConfigurationFile.parse(Data(text.utf8)).1
            #expect(
                issues == [ConfigurationIssue(keyPath: "", problem: "the top level must be a JSON object")],
                "\(text)"
            )
        }
    }

    @Test func brokenJSONIsOneIssueAtTheTop() {
        let (_, issues) = ConfigurationFile.parse(Data("{\"janus\": ".utf8))
        #expect(issues.count == 1)
        #expect(issues.first?.keyPath == "")
        #expect(issues.first?.problem.hasPrefix("not valid JSON") == true)
    }

    @Test func stunAndTurnServerText() throws {
        let stun = try ICEServerText.stun("stun:198.18.0.1:3479")
        #expect(stun.address == "198.18.0.1" && stun.port == 3479)
        let turn = try ICEServerText.turn("turn:relay:5000?transport=tcp", username: "u", password: "p")
        #expect(turn.address == "relay" && turn.port == 5000 && turn.transport == .tcp)
        #expect(try ICEServerText.turn("turns:relay", username: "u", password: "p").transport == .tls)
        #expect(throws: ICEServerTextError.self) { try ICEServerText.turn("stun:relay", username: "", password: "") }
        #expect(throws: ICEServerTextError.self) { try ICEServerText.stun("host:0") }
    }

    @Test func randomConfigurationsNeverCrash() {
        var random = SeededGenerator(seed: 0xC0_4F16)
        let fragments = [
            "{", "}", "[", "]", ",", ":", "\"janus\"", "\"url\"", "\"ice\"", "\"turn\"", "\"video\"", "1", "-3",
            "\"x\"", "null", "true", "\"ws://h:1\"", "\"width\"", "99999999999999999999",
        ]
        for _ in 0..<3000 {
            let text = (0..<Int.random(in: 0...30, using: &random)).map { _ in
                fragments[Int.random(in: 0..<fragments.count, using: &random)]
            }.joined()
            let (_, issues) = ConfigurationFile.parse(Data(text.utf8))
            for issue in issues { #expect(!issue.problem.isEmpty) }
        }
    }

    /// A FIFO would block a plain read until a writer came; a folder gave a framework error code.
    @Test(arguments: SpecialFile.allCases)
    func aConfigurationThatIsNotARegularFileIsRefusedAtOnce(kind: SpecialFile) throws {
        let directory = try TestPaths.temporaryDirectory("conclave-config")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("conclave.json").path
        try kind.make(path)
        let start = ContinuousClock.now
        do {
            _ = try ConfigurationFile.load(path: path)
            Issue.record("loaded a \(kind)")
        } catch {
            #expect(error.description.contains("refusing \(path): it is a \(kind.word), not a regular file"))
            #expect(!error.description.contains("\n"), "one line: \(error.description)")
        }
        #expect(ContinuousClock.now - start < .seconds(2))
    }

}
