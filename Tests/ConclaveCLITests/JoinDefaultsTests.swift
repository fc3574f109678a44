import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What `conclave join` does when it is told little: the display it takes and the frame rate it sends.
@Suite(.serialized) struct JoinDefaultsTests {
    /// A fresh room on the shared test bed, and a data directory.
    private func setUp() throws -> (bed: JanusTestBed, room: UInt64, directory: URL) {
        let bed = try TestJanus.shared()
        let room = TestJanus.uniqueRoomID()
        let created = try conclave([
            "rooms", "create", "--room", "\(room)", "--codec", "h264", "--janus", bed.webSocketURL,
        ])
        guard created.succeeded else { throw CLITestError(description: "rooms create: \(created.errorOutput)") }
        return (bed, room, try TestPaths.temporaryDirectory("conclave-join"))
    }

    private func join(_ setup: (bed: JanusTestBed, room: UInt64, directory: URL), data: String, _ extra: [String])
        throws -> CallProcess
    {
        try CallProcess(
            "join",
            arguments: [
                "join", "--room", "\(setup.room)", "--call-id", "1", "--crypto", "none", "--janus",
                setup.bed.webSocketURL,
                "--data-dir", data, "--status", "json", "--ice-address", setup.bed.hostAddress, "--audio", "none",
                "--width", "320", "--height", "240",
            ] + extra,
            in: setup.directory
        )
    }

    @Test func joinWithoutAnInvitationOrDisplayUsesTheLoginNameAndSaysSo() async throws {
        let setup = try setUp()
        let login = String(cString: getpwuid(geteuid()).pointee.pw_name)
        let process = try join(setup, data: setup.directory.appendingPathComponent("none").path, ["--duration", "2"])
        let code = await process.waitForExit(timeout: .seconds(30))
        #expect(code == 0, "\(process.errorOutput)")
        #expect(
            process.errorOutput.contains("joining as \"\(login):\(login)\" (the login name)"),
            "\(process.errorOutput)"
        )
        #expect(process.lastStatus?["display"] as? String == "\(login):\(login)")
    }

    @Test func joinWithoutAnInvitationOrDisplayUsesTheDeviceKeysDisplay() async throws {
        let setup = try setUp()
        let data = setup.directory.appendingPathComponent("keyed").path
        let created = try conclave(["keys", "init", "--type", "p256", "--display", "42:Zoe", "--data-dir", data])
        #expect(created.succeeded, "\(created.errorOutput)")
        let process = try join(setup, data: data, ["--duration", "2"])
        let code = await process.waitForExit(timeout: .seconds(30))
        #expect(code == 0, "\(process.errorOutput)")
        #expect(process.errorOutput.contains("joining as \"42:Zoe\" (the display stored with the device key)"))
        #expect(process.lastStatus?["display"] as? String == "42:Zoe")
    }

    /// The pattern is sent at 30 frames a second unless --fps says otherwise (it was 15).
    @Test func thePatternDefaultsToThirtyFramesASecond() async throws {
        let setup = try setUp()
        let process = try join(setup, data: setup.directory.appendingPathComponent("fps").path, ["--display", "9:Fps"])
        defer { process.signal(SIGTERM) }
        // Two status lines at least three seconds apart once live give the rate of frames sent.
        func live() -> [(ms: Int, sent: Int)] {
            process.statusLines.compactMap { line in
                guard line["state"] as? String == "live", let ms = line["elapsedMs"] as? Int,
                    let sent = line["framesSent"] as? Int, sent > 0
                else { return nil }
                return (ms, sent)
            }
        }
        let measured = await waitUntil(timeout: .seconds(30)) {
            guard let first = live().first, let last = live().last else { return false }
            return last.ms - first.ms >= 3000
        }
        #expect(measured != nil, "no live status lines: \(process.errorOutput)")
        let samples = live()
        let first = try #require(samples.first)
        let last = try #require(samples.last)
        let rate = Double(last.sent - first.sent) * 1000 / Double(last.ms - first.ms)
        #expect(rate > 25 && rate < 35, "sent \(rate) frames a second")
        process.signal(SIGTERM)
        #expect(await process.waitForExit() == 0)
    }
}
