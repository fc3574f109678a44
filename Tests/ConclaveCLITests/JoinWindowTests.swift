import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import ConclaveWindow
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End-to-end: `conclave join --window` on a private Xvfb shows the other participant's pattern,
/// read from the screen, with frame numbers that advance; closing the window leaves the call.
@Suite(.serialized) struct JoinWindowTests {
    /// The pattern's frame number in the rectangle of the screen where a 320x240 picture is drawn.
    static func frameNumber(_ server: TestXServer, _ rect: TileRect) -> Int? {
        guard let luma = try? server.grabLuma(x: rect.x, y: rect.y, width: rect.width, height: rect.height) else {
            return nil
        }
        // Back to the picture's own size (nearest neighbour), where the code strip's cells are.
        let width = 320
        let height = 240
        var data = [UInt8](repeating: 128, count: VideoFrame.byteCount(width: width, height: height))
        for row in 0..<height {
            for column in 0..<width {
                data[row * width + column] =
                    luma[(row * rect.height / height) * rect.width + column * rect.width / width]
            }
        }
        guard let picture = try? VideoFrame(width: width, height: height, data: data, rtpTimestamp: 0) else {
            return nil
        }
        return PatternReader.read(picture)?.frameNumber
    }

    @Test func theWindowShowsTheOtherParticipantsPatternAndClosingItLeaves() async throws {
        let server = try TestXServer()
        defer { server.stop() }
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        let alice = try await server.withDisplay { try call.join("alice", ["--window", "--duration", "60"]) }
        let bob = try await server.withDisplay { try call.join("bob", ["--no-window", "--duration", "60"]) }

        // Alice's window (at the screen's top left, 960x540) holds one tile: Bob's 320x240 pattern.
        let tile = CallWindowLayout.tiles(count: 1, width: 960, height: 540)[0]
        let rect = CallWindowLayout.pictureRect(in: tile, pictureWidth: 320, pictureHeight: 240)
        var first: Int?
        var shownAt: Duration?
        let start = ContinuousClock.now
        while first == nil, ContinuousClock.now - start < .seconds(30), alice.isRunning {
            first = Self.frameNumber(server, rect)
            shownAt = start.duration(to: .now)
        }
        let firstNumber = try #require(first, "Bob's pattern on Alice's screen: \(alice.errorOutput)")
        print("window: Bob's frame \(firstNumber) read from the screen after \(shownAt ?? .zero)")
        // The pictures move on: a later grab reads a later frame.
        var later: Int?
        let again = ContinuousClock.now
        while ContinuousClock.now - again < .seconds(10) {
            if let number = Self.frameNumber(server, rect), number > firstNumber {
                later = number
                break
            }
        }
        #expect(later != nil, "frame numbers advance past \(firstNumber)")

        // Closing the window (as a window manager's close button does) leaves the call cleanly.
        try server.closeWindow(titled: "Conclave call \(call.callID)")
        #expect(await alice.waitForExit(timeout: .seconds(20)) == 0, "\(alice.errorOutput)")
        #expect(alice.lastStatus?["state"] as? String == "left")
        // The final status line: what the window showed was Bob's decrypted video.
        #expect(alice.framesDecrypted(from: "bob") > 0)
        let output = (try? String(contentsOf: alice.stdoutFile, encoding: .utf8)) ?? ""
        #expect(output.contains("window: leaving the call"))
        // Bob sees Alice go; he never opened a window.
        let noticed = await waitUntil(timeout: .seconds(10)) { bob.participant("alice")?["present"] as? Bool == false }
        #expect(noticed != nil)
        bob.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0)
    }

    @Test func aWindowWithoutADisplayIsOneLineAndTheCallGoesOn() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice"])
        let result = try await TestXServer.withDisplay(":4999") {
            try call.joinToCompletion("alice", ["--window", "--duration", "3"])
        }
        #expect(result.succeeded, "\(result.errorOutput)")
        let lines = result.output.split(separator: "\n").filter { $0.contains("call window") }
        #expect(lines.count == 1, "\(result.output)")
        #expect(lines.first?.contains("the call goes on without a window") == true)
    }

    @Test func vTurnsTheSentVideoBlackAndBackAndSSharesTheScreenBesideIt() async throws {
        let server = try TestXServer()
        defer { server.stop() }
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        let recording = call.directory.appendingPathComponent("bob-recording").path
        let alice = try await server.withDisplay {
            try call.join("alice", ["--window", "--duration", "60", "--log-level", "info"])
        }
        let bob = try call.join("bob", ["--no-window", "--video", "none", "--record", recording, "--duration", "60"])
        let title = "Conclave call \(call.callID)"
        func frames() -> Int { bob.participant("alice")?["videoFrames"] as? Int ?? 0 }
        func output() -> String { (try? String(contentsOf: alice.stdoutFile, encoding: .utf8)) ?? "" }
        func framesGrow(by count: Int) async -> Bool {
            let from = frames()
            return await waitUntil(timeout: .seconds(20)) { frames() >= from + count } != nil
        }
        #expect(await framesGrow(by: 30), "Bob got no video from Alice: \(alice.errorOutput)")

        try server.type("v", intoWindowTitled: title)
        let off = await waitUntil(timeout: .seconds(10)) { output().contains("window: video off") }
        #expect(off != nil, "\(output()) \(alice.errorOutput)")
        #expect(await framesGrow(by: 60), "Alice's video stopped while off")
        try server.type("v", intoWindowTitled: title)
        let on = await waitUntil(timeout: .seconds(10)) { output().contains("window: video on") }
        #expect(on != nil, "\(output())")
        #expect(await framesGrow(by: 30))
        // `s`: the screen goes out as a feed of its own beside Alice's video, and `s` again
        // takes it out of the room; her video goes on throughout.
        try server.type("s", intoWindowTitled: title)
        let sharing = await waitUntil(timeout: .seconds(10)) {
            output().contains("window: sharing the screen beside the video (feed ")
        }
        #expect(sharing != nil, "\(output()) \(alice.errorOutput)")
        let screenSeen = await waitUntil(timeout: .seconds(15)) {
            bob.participant("alice-screen")?["videoFrames"] as? Int ?? 0 >= 30
        }
        #expect(screenSeen != nil, "Bob got no screen from Alice: \(bob.lastStatus ?? [:])")
        #expect(bob.undecryptable(from: "alice-screen") == 0)
        #expect(bob.participant("alice-screen")?["display"] as? String == "alice-screen:Alice (screen)")
        #expect(await framesGrow(by: 30), "Alice's video stopped while sharing the screen")
        try server.type("s", intoWindowTitled: title)
        let stopped = await waitUntil(timeout: .seconds(10)) {
            output().contains("window: screen sharing stopped")
                && bob.participant("alice-screen")?["present"] as? Bool == false
        }
        #expect(stopped != nil, "\(output()) \(alice.errorOutput) \(bob.lastStatus ?? [:])")
        #expect(await framesGrow(by: 30), "Alice's video stopped after the screen sharing")

        bob.signal(SIGTERM)
        alice.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")

        // Bob's recording of Alice: the pattern, then black for about two seconds, then the
        // pattern again, in one stream (the same track throughout).
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recording + "/manifest.json")))
                as? [String: Any]
        )
        let participants = manifest["participants"] as? [[String: Any]] ?? []
        let entry = try #require(participants.first { ($0["userID"] as? String) == "alice" }, "\(participants)")
        let segment = try #require((entry["segments"] as? [[String: Any]])?.first)
        let file = recording + "/" + (try #require(segment["file"] as? String))
        let gray = call.directory.appendingPathComponent("alice.gray").path
        let decoded = try runProcess(
            "ffmpeg",
            [
                "-v", "error", "-y", "-i", file, "-map", "0:v:0", "-vf", "scale=64:48", "-pix_fmt", "gray", "-f",
                "rawvideo", gray,
            ]
        )
        #expect(decoded.succeeded, "\(decoded.errorOutput)")
        let pixels = [UInt8](try Data(contentsOf: URL(fileURLWithPath: gray)))
        let means = stride(from: 0, to: pixels.count - 3_071, by: 3_072).map { start in
            pixels[start..<(start + 3_072)].reduce(0) { $0 + Int($1) } / 3_072
        }
        let black = means.filter { $0 <= 20 }.count
        let firstBlack = try #require(means.firstIndex { $0 <= 20 }, "no black frame among \(means.count)")
        #expect(black >= 45, "\(black) black frames of \(means.count)")
        #expect(
            means[..<firstBlack].allSatisfy { $0 > 20 } && firstBlack >= 20,
            "frames before v: \(means.prefix(firstBlack))"
        )
        #expect(means[(firstBlack + black)...].contains { $0 > 20 }, "no picture after v again")
    }
}
