import ConclaveTestSupport
import Foundation
import Testing

/// Runs the built `conclave` binary.
func conclave(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
    let binary = TestPaths.productsDirectory.appendingPathComponent("conclave").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw SubprocessError(description: "no conclave binary at \(binary): run swift build first")
    }
    return try runProcess(binary, arguments, environment: environment, timeout: .seconds(60))
}

@Suite struct RoomsCommandTests {
    @Test func createListAndDestroyARoom() throws {
        let bed = try TestJanus.shared()
        let room = TestJanus.uniqueRoomID()
        let janus = ["--janus", bed.webSocketURL]

        let created = try conclave(["rooms", "create", "--room", "\(room)", "--codec", "h264", "--e2ee"] + janus)
        #expect(created.succeeded, "\(created.errorOutput)")
        #expect(created.output == "\(room)\n")

        let listed = try conclave(["rooms", "list", "--json"] + janus)
        #expect(listed.succeeded, "\(listed.errorOutput)")
        let rooms = try #require(try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]])
        let entry = try #require(rooms.first { ($0["room"] as? NSNumber)?.uint64Value == room })
        #expect(entry["videocodec"] as? String == "h264")
        #expect(entry["require_e2ee"] as? Bool == true)

        // The same id again is refused, with Janus's reason, and a non-zero exit.
        let again = try conclave(["rooms", "create", "--room", "\(room)"] + janus)
        #expect(again.status != 0)
        #expect(again.errorOutput.contains("room already exists"))

        let destroyed = try conclave(["rooms", "destroy", "--room", "\(room)"] + janus)
        #expect(destroyed.succeeded, "\(destroyed.errorOutput)")
        let table = try conclave(["rooms", "list"] + janus)
        #expect(!table.output.contains("\(room)"))
    }

    @Test func theURLCanComeFromTheEnvironment() throws {
        let bed = try TestJanus.shared()
        let result = try conclave(["rooms"], environment: ["CONCLAVE_JANUS_URL": bed.webSocketURL])
        #expect(result.succeeded, "\(result.errorOutput)")
        #expect(result.output.contains("1234"), "the configured room of the test bed is listed")
    }

    @Test func unreachableJanusIsOneClearLineAndAFailure() throws {
        let result = try conclave(["rooms", "list", "--janus", "ws://127.0.0.1:9"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("cannot connect to ws://127.0.0.1:9"))
    }

    @Test func badArgumentsAreRejectedBeforeConnecting() throws {
        let codec = try conclave(["rooms", "create", "--codec", "vp9", "--janus", "ws://127.0.0.1:9"])
        #expect(codec.status == 64, "usage errors exit with EX_USAGE")
        #expect(codec.errorOutput.contains("--codec takes vp8, h264 or vp8,h264"))

        let scheme = try conclave(["rooms", "list", "--janus", "http://127.0.0.1:9"])
        #expect(scheme.status != 0)
        #expect(scheme.errorOutput.contains("not a ws:// or wss:// URL"))
    }
}
