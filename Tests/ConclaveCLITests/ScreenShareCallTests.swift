import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End-to-end: `conclave join --video screen:...` shares an Xvfb display showing the moving test
/// pattern, through the encoder and Janus, end-to-end encrypted; the other participant records
/// the call, and the pattern's frame numbers are read from its decoded recording.
@Suite(.serialized) struct ScreenShareCallTests {
    @Test func aSharedScreenReachesTheOtherParticipantAndDecodes() async throws {
        let server = try TestXServer(width: 640, height: 480)
        defer { server.stop() }
        let (alice, bob, recording) = try Self.screenCall(on: server) { screen in
            ["--video", screen, "--fps", "30"]
        }
        let seen = await waitUntil(timeout: .seconds(25)) {
            bob.participant("alice")?["videoFrames"] as? Int ?? 0 > 90
        }
        #expect(seen != nil, "bob: \(bob.lastStatus ?? [:]) alice: \(alice.errorOutput)")
        #expect(bob.undecryptable(from: "alice") == 0)
        bob.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        alice.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")

        // Alice's recorded video, decoded: the pattern's numbers, moving forward.
        let (numbers, pictures) = try recordedNumbers(recording: recording, userID: "alice")
        let distinct = Set(numbers).count
        print("screen share: \(numbers.count) of \(pictures) recorded pictures readable, \(distinct) distinct")
        #expect(pictures >= 90, "\(pictures) pictures recorded")
        #expect(distinct >= 45, "distinct pattern frames: \(distinct) of \(pictures)")
        #expect(Double(numbers.count) >= Double(pictures) * 0.8, "\(numbers.count) of \(pictures) readable")
        let backwards = zip(numbers, numbers.dropFirst()).filter { $1 < $0 }.count
        #expect(backwards <= 2, "the pattern's numbers go forward (a loop aside): \(numbers)")
    }

    /// `--video pattern --video screen:...`: Alice's pattern goes out in her feed and the screen
    /// (showing the pattern from number 5000 on) in a feed of its own beside it. Bob records both
    /// as two participants, and each recording holds its own pictures; Alice never receives her
    /// own screen.
    @Test func aScreenSharedBesideTheVideoIsAStreamOfItsOwn() async throws {
        let server = try TestXServer(width: 640, height: 480)
        defer { server.stop() }
        let (alice, bob, recording) = try Self.screenCall(on: server, firstNumber: Self.screenNumbers) { screen in
            ["--video", "pattern", "--video", screen]
        }
        let seen = await waitUntil(timeout: .seconds(25)) {
            bob.participant("alice")?["videoFrames"] as? Int ?? 0 > 60
                && bob.participant("alice-screen")?["videoFrames"] as? Int ?? 0 > 60
        }
        #expect(seen != nil, "bob: \(bob.lastStatus ?? [:]) alice: \(alice.errorOutput)")
        #expect(bob.undecryptable(from: "alice") == 0)
        #expect(bob.undecryptable(from: "alice-screen") == 0)
        #expect(bob.participant("alice-screen")?["display"] as? String == "alice-screen:Alice (screen)")
        let screenFeed = (alice.lastStatus?["screenFeed"] as? NSNumber)?.uint64Value
        #expect(screenFeed != nil && screenFeed != (alice.lastStatus?["feed"] as? NSNumber)?.uint64Value)
        #expect(alice.participant("alice-screen") == nil, "Alice subscribed to her own screen")
        bob.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        alice.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")

        let camera = try recordedNumbers(recording: recording, userID: "alice").numbers
        let screen = try recordedNumbers(recording: recording, userID: "alice-screen").numbers
        print(
            "two streams: video \(camera.count) readable (\(camera.first ?? -1)...), screen \(screen.count) (\(screen.first ?? -1)...)"
        )
        // Bob saw more than 60 of each arrive at 15 frames a second; the few before the first
        // keyframe do not decode.
        #expect(camera.count >= 50 && camera.allSatisfy { $0 < Self.screenNumbers }, "video: \(camera)")
        #expect(screen.count >= 50 && screen.allSatisfy { $0 >= Self.screenNumbers }, "screen: \(screen)")
    }

    /// Alice sharing `server`'s top left 320x240, where the pattern plays (numbered from
    /// `firstNumber`), with the `--video` arguments `video` makes of the screen's spelling; Bob
    /// recording the call into the returned folder. 30 s each.
    static func screenCall(
        on server: TestXServer,
        firstNumber: Int = 0,
        video: (String) -> [String]
    ) throws -> (alice: CallProcess, bob: CallProcess, recording: String) {
        let call = try CallFixture(bed: try TestJanus.shared(), names: ["alice", "bob"])
        let pattern = call.directory.appendingPathComponent("pattern.y4m").path
        try writePattern(path: pattern, width: 320, height: 240, frames: 300, from: firstNumber)
        try server.play(pattern, x: 0, y: 0)
        let alice = try call.join("alice", video("screen:\(server.display)+0,0,320x240") + ["--duration", "30"])
        let recording = call.directory.appendingPathComponent("bob-recording").path
        let bob = try call.join("bob", ["--video", "none", "--record", recording, "--duration", "30"])
        return (alice, bob, recording)
    }

    /// Where the pattern on the shared screen starts counting, far above what Alice's own
    /// pattern reaches in the call.
    static let screenNumbers = 5_000

    @Test func aMissingCameraAndAnUnreachableScreenAreOneLine() throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice"])
        let camera = try call.joinToCompletion("alice", ["--video", "camera:/dev/video-conclave-missing"])
        #expect(!camera.succeeded)
        #expect(
            camera.errorOutput.contains("cannot open the media to send: no camera at /dev/video-conclave-missing"),
            "\(camera.errorOutput)"
        )
        let screen = try call.joinToCompletion("alice", ["--video", "screen::65001"])
        #expect(!screen.succeeded)
        #expect(screen.errorOutput.contains("cannot reach X display :65001"), "\(screen.errorOutput)")
        let three = try call.joinToCompletion("alice", ["--video", "pattern", "--video", "screen", "--video", "none"])
        #expect(
            three.errorOutput.contains("at most two: a video and a screen shared beside it"),
            "\(three.errorOutput)"
        )
        let twoCameras = try call.joinToCompletion("alice", ["--video", "camera", "--video", "pattern"])
        #expect(
            twoCameras.errorOutput.contains("two streams are a video and a screen shared beside it"),
            "\(twoCameras.errorOutput)"
        )
        let spelling = try call.joinToCompletion("alice", ["--video", "camera@640x481"])
        #expect(
            spelling.errorOutput.contains("--video camera@640x481: the size must be WxH"),
            "\(spelling.errorOutput)"
        )
    }
}

/// The pattern numbers read from the decoded video of `userID`'s first segment in a
/// recording, in order, and how many pictures it holds.
private func recordedNumbers(recording: String, userID: String) throws -> (numbers: [Int], pictures: Int) {
    let manifest = try #require(
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recording + "/manifest.json")))
            as? [String: Any]
    )
    let participant = try #require(
        (manifest["participants"] as? [[String: Any]])?.first { $0["userID"] as? String == userID },
        "\(manifest)"
    )
    let file = try #require((participant["segments"] as? [[String: Any]])?.first?["file"] as? String)
    let pictures = try RecordedFileAnalysis(path: recording + "/" + file, startOffset: 0).frameNumbers
    return (pictures.filter { $0 >= 0 }, pictures.count)
}

/// Writes `frames` pictures of the test pattern at 30 frames a second as a Y4M file, numbered
/// from `first`.
private func writePattern(path: String, width: Int, height: Int, frames: Int, from first: Int = 0) throws {
    let layout = try PatternLayout(width: width, height: height)
    var bytes = Data("YUV4MPEG2 W\(width) H\(height) F30:1 Ip A1:1 C420jpeg\n".utf8)
    for index in 0..<frames {
        let picture = try PatternSource.render(
            layout: layout,
            frameNumber: first + index,
            flash: false,
            rtpTimestamp: 0
        )
        bytes.append(Data("FRAME\n".utf8))
        bytes.append(contentsOf: picture.data)
    }
    try bytes.write(to: URL(fileURLWithPath: path))
}
