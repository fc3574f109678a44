import ConclaveCapture
import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Logging
import Testing

/// The screen path against a real X server: Xvfb shows the moving test pattern (ffplay playing
/// a Y4M file of it), and `ScreenSource` captures it; the pattern's frame numbers are read back
/// from the captured I420 pictures.
@Suite(.serialized) struct ScreenCaptureTests {
    let logger = Logger(label: "screen-test")

    @Test func capturedPicturesCarryThePatternsFrameNumbers() async throws {
        let server = try TestXServer(width: 640, height: 480)
        defer { server.stop() }
        let directory = try TestPaths.temporaryDirectory("screen")
        defer { try? FileManager.default.removeItem(at: directory) }
        let video = directory.appendingPathComponent("pattern.y4m").path
        try writePatternY4M(path: video, width: 320, height: 240, frames: 150)
        try server.play(video, x: 0, y: 0)

        let source = try await ScreenSource.open(
            ScreenRequest(
                display: server.display,
                region: ScreenRegion(x: 0, y: 0, size: VideoSize(width: 320, height: 240))
            ),
            size: nil,
            frameRate: 30,
            initialTimestamp: 1_000,
            logger: logger
        )
        #expect(source.width == 320 && source.height == 240)
        try await source.waitUntilReady()

        // Paced as a call sends: one picture per frame slot of the nominal rate.
        var pacer = MediaPacer(mode: .realTime)
        var numbers: [Int] = []
        var timestamps: [UInt32] = []
        for index in 0..<150 {
            try await pacer.wait(until: source.timeline.mediaTime(forFrame: index))
            let picture = try #require(try source.nextFrame())
            timestamps.append(picture.rtpTimestamp)
            if let reading = PatternReader.read(picture) { numbers.append(reading.frameNumber) }
            if Set(numbers).count >= 40 { break }
        }
        let distinct = Set(numbers)
        #expect(distinct.count >= 40, "pattern frames read from the screen: \(numbers)")
        // The newest picture per slot: numbers never go back, except where the file loops.
        let backwards = zip(numbers, numbers.dropFirst()).filter { $1 < $0 }.count
        #expect(backwards <= 1, "\(numbers)")
        // RTP timestamps follow the nominal rate exactly, whatever the screen delivered.
        #expect(timestamps.first == 1_000)
        #expect(zip(timestamps, timestamps.dropFirst()).allSatisfy { $1 &- $0 == 3_000 })
        #expect(source.capturedPictures >= distinct.count)
    }

    @Test func aWholeScreenIsCapturedAtItsOwnSize() async throws {
        let server = try TestXServer(width: 800, height: 600)
        defer { server.stop() }
        let source = try await ScreenSource.open(
            ScreenRequest(),
            size: nil,
            frameRate: 10,
            environment: ["DISPLAY": server.display],
            logger: logger
        )
        #expect(source.width == 800 && source.height == 600)
        #expect(source.display == server.display)
        try await source.waitUntilReady()
        #expect(captureThreadNames().contains("capture-screen"), "\(captureThreadNames())")
        let picture = try #require(try source.nextFrame())
        #expect(picture.width == 800 && picture.data.count == VideoFrame.byteCount(width: 800, height: 600))

        let scaled = try await ScreenSource.open(
            ScreenRequest(display: server.display),
            size: VideoSize(width: 320, height: 240),
            frameRate: 10,
            logger: logger
        )
        try await scaled.waitUntilReady()
        #expect(try scaled.nextFrame()?.width == 320)
    }

    @Test func theCatalogListsTheDisplayWithItsSize() throws {
        let server = try TestXServer(width: 1024, height: 768)
        defer { server.stop() }
        let screens = VideoDeviceCatalog.screens(environment: ["DISPLAY": server.display])
        let listed = try #require(screens.first)
        #expect(listed.display == server.display && listed.size == "1024x768" && listed.problem == nil)
        let list = VideoDeviceList(cameras: [], screens: screens)
        #expect(list.textLines.contains("screen \(server.display)  1024x768"), "\(list.textLines)")
        let json = String(decoding: try JSONEncoder().encode(list), as: UTF8.self)
        #expect(json.contains("\"size\":\"1024x768\""), "\(json)")
        #expect(json.contains("\"cameras\":[]"), "\(json)")
    }

    @Test func anUnreachableDisplayIsOneLine() async throws {
        do {
            _ = try await ScreenSource.open(
                ScreenRequest(display: ":65000"),
                size: nil,
                frameRate: 30,
                logger: logger
            )
            Issue.record("display :65000 opened")
        } catch {
            #expect(error.kind == .unreachableDisplay)
            #expect(error.message.hasPrefix("cannot reach X display :65000"), "\(error)")
        }
        do {
            _ = try await ScreenSource.open(ScreenRequest(), size: nil, frameRate: 30, environment: [:], logger: logger)
            Issue.record("no DISPLAY opened")
        } catch {
            #expect(error.message == "no X display to capture: DISPLAY is not set (use --video screen:DISPLAY)")
        }
    }

    @Test func aRegionOffTheScreenIsRefused() async throws {
        let server = try TestXServer(width: 320, height: 240)
        defer { server.stop() }
        do {
            _ = try await ScreenSource.open(
                ScreenRequest(
                    display: server.display,
                    region: ScreenRegion(x: 200, y: 0, size: VideoSize(width: 320, height: 240))
                ),
                size: nil,
                frameRate: 30,
                logger: logger
            )
            Issue.record("a region off the screen opened")
        } catch {
            #expect(
                error.message == "the region +200,0,320x240 does not fit on X display \(server.display)",
                "\(error)"
            )
        }
    }
}

/// The kernel's names of this process's threads (at most 15 characters each).
func captureThreadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Writes `frames` pictures of the test pattern at 30 frames a second as a Y4M file.
func writePatternY4M(path: String, width: Int, height: Int, frames: Int) throws {
    let layout = try PatternLayout(width: width, height: height)
    var bytes = Data("YUV4MPEG2 W\(width) H\(height) F30:1 Ip A1:1 C420jpeg\n".utf8)
    for index in 0..<frames {
        let picture = try PatternSource.render(layout: layout, frameNumber: index, flash: false, rtpTimestamp: 0)
        bytes.append(Data("FRAME\n".utf8))
        bytes.append(contentsOf: picture.data)
    }
    try bytes.write(to: URL(fileURLWithPath: path))
}
