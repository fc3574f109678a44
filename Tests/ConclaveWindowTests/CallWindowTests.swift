import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Testing

@testable import ConclaveWindow

/// The call window on a private Xvfb, read back through the renderer: what it shows is checked in
/// its pixels (the pattern's frame numbers, the indicator boxes), not in its model.
///
/// Serialized: SDL is one per process, and `DISPLAY` is the process's.
@Suite(.serialized)
struct CallWindowTests {
    static let pictureWidth = 320
    static let pictureHeight = 240
    /// The window's background, around and between the pictures.
    static let background = RGB(24, 24, 28)

    /// Pattern pictures with the given frame numbers.
    static func pictures(_ numbers: [Int]) throws -> [Int: VideoFrame] {
        let source = try PatternSource(width: pictureWidth, height: pictureHeight)
        var pictures: [Int: VideoFrame] = [:]
        while let frame = try source.nextFrame(), source.frameIndex <= (numbers.max() ?? 0) + 1 {
            if numbers.contains(source.frameIndex - 1) { pictures[source.frameIndex - 1] = frame }
        }
        return pictures
    }

    /// Opens a window on a new Xvfb.
    static func window() async throws -> (TestXServer, CallWindow) {
        let server = try TestXServer()
        let window = try await server.withDisplay {
            try await CallWindow.open(title: "conclave test", width: 960, height: 540)
        }
        return (server, window)
    }

    /// Runs `body` with `SDL_RENDER_DRIVER` set to `driver` (read when the window makes its
    /// renderer), then unsets it again.
    static func withRenderDriver<T>(_ driver: String, _ body: () async throws -> T) async rethrows -> T {
        setenv("SDL_RENDER_DRIVER", driver, 1)
        defer { unsetenv("SDL_RENDER_DRIVER") }
        return try await body()
    }

    /// The frame number of the pattern shown in a participant's tile; nil when none reads.
    static func frameNumber(_ snapshot: WindowSnapshot, _ id: UInt64) -> Int? {
        guard let picture = snapshot.tiles[id]?.picture,
            let luma = snapshot.luma(of: picture, width: pictureWidth, height: pictureHeight)
        else { return nil }
        return PatternReader.read(luma)?.frameNumber
    }

    @Test("two participants' patterns show in their own tiles, the newest picture wins, a leave removes the tile")
    func patternsInTiles() async throws {
        let (server, window) = try await Self.window()
        defer { server.stop() }
        let pictures = try Self.pictures([5, 6, 42])
        window.participantJoined(id: 1, display: "alice")
        window.participantJoined(id: 2, display: "bob")
        window.show(picture: try #require(pictures[5]), for: 1)
        window.show(picture: try #require(pictures[42]), for: 2)
        let first = try #require(await window.snapshot())
        // Xvfb has no GPU: SDL's software renderer, pictures converted to the window's format.
        #expect(first.renderer == "software")
        #expect(first.pictureFormat == "SDL_PIXELFORMAT_RGB888")
        #expect(first.order == [1, 2])
        #expect(Self.frameNumber(first, 1) == 5)
        #expect(Self.frameNumber(first, 2) == 42)
        // Side by side: alice's tile left of bob's.
        let left = try #require(first.tiles[1]?.tile)
        let right = try #require(first.tiles[2]?.tile)
        #expect(left.x < right.x)
        // The software renderer names each tile's picture box, for decoders to scale down to.
        #expect(window.pictureBox(for: 1) == PictureSize(width: 472, height: 532))
        #expect(window.pictureBox(for: 2) == PictureSize(width: 472, height: 532))

        // Two pictures before the window draws: only the newest is shown.
        window.show(picture: try #require(pictures[42]), for: 1)
        window.show(picture: try #require(pictures[6]), for: 1)
        let second = try #require(await window.snapshot())
        #expect(Self.frameNumber(second, 1) == 6)
        #expect(Self.frameNumber(second, 2) == 42)

        window.participantLeft(id: 2)
        let third = try #require(await window.snapshot())
        #expect(third.order == [1])
        #expect(third.tiles[2] == nil)
        #expect(third.tiles[1]?.tile == TileRect(x: 0, y: 0, width: 960, height: 540))
        #expect(Self.frameNumber(third, 1) == 6)
        // Only what no picture covers is painted as background: where bob's picture was, right
        // of alice's wider one now, no pixel of his is left.
        let alice = try #require(third.tiles[1]?.picture)
        var stale: [String] = []
        for x in alice.x + alice.width..<960 {
            for y in 0..<540 where third.pixel(x: x, y: y) != Self.background { stale.append("(\(x), \(y))") }
        }
        #expect(stale.count == 0, "\(stale.count) pixels right of alice's are not background: \(stale.prefix(3))")
        await window.close()
        #expect(await window.snapshot() == nil)
    }

    @Test("with an OpenGL renderer (a GPU's path: IYUV textures converted by the renderer) the patterns read the same")
    func patternsThroughOpenGL() async throws {
        let server = try TestXServer()
        defer { server.stop() }
        // SDL_RENDER_DRIVER keeps OpenGL even on Mesa's software rasteriser, which the window
        // would otherwise replace with SDL's software renderer (and its window-format textures).
        let window = try await Self.withRenderDriver("opengl") {
            try await server.withDisplay { try await CallWindow.open(title: "conclave test", width: 960, height: 540) }
        }
        let pictures = try Self.pictures([7, 33])
        window.participantJoined(id: 1, display: "alice")
        window.participantJoined(id: 2, display: "bob")
        window.show(picture: try #require(pictures[7]), for: 1)
        window.show(picture: try #require(pictures[33]), for: 2)
        let snapshot = try #require(await window.snapshot())
        #expect(snapshot.renderer == "opengl")
        #expect(snapshot.pictureFormat == "SDL_PIXELFORMAT_IYUV")
        // A GPU scales for free, and more smoothly: pictures come at their decoded size.
        #expect(window.pictureBox(for: 1) == nil)
        #expect(Self.frameNumber(snapshot, 1) == 7)
        #expect(Self.frameNumber(snapshot, 2) == 33)
        await window.close()
    }

    @Test("a picture scaled down to its box is copied 1:1, reads the same, and reports its decoded size")
    func pictureScaledToItsBox() async throws {
        let (server, window) = try await Self.window()
        defer { server.stop() }
        let source = try PatternSource(width: 640, height: 480)
        var frames: [VideoFrame] = []
        while frames.count < 13, let frame = try source.nextFrame() { frames.append(frame) }
        window.participantJoined(id: 1, display: "alice")
        window.participantJoined(id: 2, display: "bob")
        window.participantJoined(id: 3, display: "carol")
        _ = await window.snapshot()
        // Three tiles of 480x270 in the 960x540 window: boxes of 472x262, a 640x480 picture
        // scaled to 348x262 (349 wide keeps 4:3; even sizes).
        let box = try #require(window.pictureBox(for: 1))
        #expect(box == PictureSize(width: 472, height: 262))
        let size = try #require(PictureFit.downscaledSize(width: 640, height: 480, for: box))
        #expect(size == PictureSize(width: 348, height: 262))
        let decodedSize = PictureSize(width: 640, height: 480)
        window.show(DecodedPicture(try PictureFit.scaled(frames[12], to: size), decodedSize: decodedSize), for: 1)
        window.show(picture: frames[3], for: 2)
        let snapshot = try #require(await window.snapshot())
        let scaled = try #require(snapshot.tiles[1]?.picture)
        let full = try #require(snapshot.tiles[2]?.picture)
        // Drawn at its own size, where the full picture is stretched to 349 wide.
        #expect(scaled.width == 348 && scaled.height == 262)
        #expect(full.width == 349 && full.height == 262)
        #expect(Self.frameNumber(snapshot, 1) == 12)
        #expect(Self.frameNumber(snapshot, 2) == 3)
        // Layer selection compares the drawn height with the decoded one, not the scaled one.
        let shown = try #require(window.shownPictures()[1])
        #expect(shown == ShownPicture(pictureWidth: 640, pictureHeight: 480, drawnWidth: 348, drawnHeight: 262))
        await window.close()
    }

    @Test("an undecryptable participant gets the key-problem box, drawn in its colour; the others do not")
    func keyProblemIndicator() async throws {
        let (server, window) = try await Self.window()
        defer { server.stop() }
        let pictures = try Self.pictures([1])
        window.participantJoined(id: 7, display: "carol")
        window.participantJoined(id: 8, display: "dave")
        window.show(picture: try #require(pictures[1]), for: 8)
        window.setState(.undecryptable, for: 7)
        window.activeSpeaker(id: 8)
        let snapshot = try #require(await window.snapshot())
        let box = try #require(snapshot.tiles[7]?.indicators[.keyProblem])
        #expect(snapshot.tiles[8]?.indicators.isEmpty == true)
        let colour = Indicator.keyProblem.color
        // The box's corner (the text is in its middle) has the box's colour.
        #expect(snapshot.pixel(x: box.x + 2, y: box.y + 2) == colour)
        // The same place in the other tile shows no such box.
        let other = try #require(snapshot.tiles[8]?.tile)
        let tile = try #require(snapshot.tiles[7]?.tile)
        let elsewhere = snapshot.pixel(x: box.x - tile.x + other.x + 2, y: box.y + 2)
        #expect(elsewhere != colour)
        // The active speaker's border.
        #expect(snapshot.pixel(x: other.x + 1, y: other.y + 1) == RGB.speaker)
        #expect(snapshot.pixel(x: tile.x + 1, y: tile.y + 1) != RGB.speaker)
        // Cleared: the box goes.
        window.setState([], for: 7)
        let cleared = try #require(await window.snapshot())
        #expect(cleared.tiles[7]?.indicators.isEmpty == true)
        #expect(cleared.pixel(x: box.x + 2, y: box.y + 2) != colour)
        await window.close()
    }

    @Test("m, v, s and q pressed in the window come out as commands, q as leave; the stream ends at close")
    func keysBecomeCommands() async throws {
        let (server, window) = try await Self.window()
        defer { server.stop() }
        for key in [WindowKey.m, .v, .s, .q, .q] { window.press(key) }
        // Pressed keys go into SDL's queue while the first snapshot is taken; the second one's
        // wake-up event comes after them, so once it is back every key has been handled.
        _ = await window.snapshot()
        _ = await window.snapshot()
        await window.close()
        var received: [WindowCommand] = []
        for await command in window.commands { received.append(command) }
        // `q` twice: one leave; the stream ends with the window.
        #expect(received == [.toggleMute, .toggleCamera, .toggleScreenShare, .leave])
    }

    @Test("the status table shows while Tab is held, over the tiles, and goes when it is released")
    func statusOverlay() async throws {
        let (server, window) = try await Self.window()
        defer { server.stop() }
        window.participantJoined(id: 1, display: "alice")
        window.statusText(["call 1  room 2  as bob", "PARTICIPANT           CODECS", "alice                 h264"])
        let before = try #require(await window.snapshot())
        window.press(.tab)
        let held = try #require(await window.snapshot())
        window.release(.tab)
        let after = try #require(await window.snapshot())
        // White text on a dark box at the top left: bright pixels there only while Tab is held.
        func brightPixels(_ snapshot: WindowSnapshot) -> Int {
            var count = 0
            for y in 8..<80 {
                for x in 8..<400 where snapshot.pixel(x: x, y: y).red > 200 { count += 1 }
            }
            return count
        }
        #expect(brightPixels(before) == 0)
        #expect(brightPixels(held) > 100)
        #expect(brightPixels(after) == 0)
        await window.close()
    }

    @Test("no display: one clear error, no trap")
    func noDisplay() async {
        await TestXServer.withDisplay(":4999") {
            do {
                _ = try await CallWindow.open(title: "conclave test")
                Issue.record("a window opened without a display")
            } catch {
                #expect("\(error)".hasPrefix("call window: cannot open the display"), "\(error)")
            }
        }
    }

    @Test("the grid is the composite's: tiles and aspect-kept pictures")
    func geometry() {
        let tiles = CallWindowLayout.tiles(count: 2, width: 960, height: 540)
        #expect(
            tiles == [TileRect(x: 0, y: 0, width: 480, height: 540), TileRect(x: 480, y: 0, width: 480, height: 540)]
        )
        let picture = CallWindowLayout.pictureRect(in: tiles[1], pictureWidth: 320, pictureHeight: 240)
        #expect(picture == TileRect(x: 484, y: 93, width: 472, height: 354))
        // A picture within two pixels of its fit (scaled to it, rounded to even) keeps its size;
        // one further off is fitted.
        let box = CallWindowLayout.pictureBox(in: tiles[1])
        #expect(box == PictureSize(width: 472, height: 532))
        #expect(CallWindowLayout.pictureRect(in: tiles[1], pictureWidth: 470, pictureHeight: 352).width == 470)
        #expect(CallWindowLayout.pictureRect(in: tiles[1], pictureWidth: 466, pictureHeight: 350).width == 472)
    }

    @Test("the background is painted exactly where no picture is: every pixel once, none under a picture")
    func uncoveredBackground() {
        for count in 0...10 {
            for (width, height) in [(960, 540), (1280, 720), (641, 479), (200, 900)] {
                let pictures = CallWindowLayout.tiles(count: count, width: width, height: height).enumerated().map {
                    CallWindowLayout.pictureRect(in: $1, pictureWidth: $0 % 2 == 0 ? 640 : 480, pictureHeight: 480)
                }
                let gaps = CallWindowLayout.uncovered(width: width, height: height, by: pictures)
                var painted = [Int](repeating: 0, count: width * height)
                for rect in gaps + pictures {
                    for y in rect.y..<rect.y + rect.height {
                        for x in rect.x..<rect.x + rect.width { painted[y * width + x] += 1 }
                    }
                }
                let wrong = painted.filter { $0 != 1 }.count
                #expect(wrong == 0, "\(count) tiles in \(width)x\(height): \(wrong) pixels not painted once")
            }
        }
        // Rectangles reaching out of the window are clipped to it; an empty window has nothing.
        let out = CallWindowLayout.uncovered(
            width: 100,
            height: 50,
            by: [TileRect(x: -10, y: -10, width: 60, height: 30), TileRect(x: 90, y: 40, width: 50, height: 50)]
        )
        let area = out.reduce(0) { $0 + $1.width * $1.height }
        #expect(area == 100 * 50 - 50 * 20 - 10 * 10)
        #expect(out.allSatisfy { $0.x >= 0 && $0.y >= 0 && $0.x + $0.width <= 100 && $0.y + $0.height <= 50 })
        #expect(CallWindowLayout.uncovered(width: 0, height: 50, by: []).isEmpty)
        let whole = CallWindowLayout.uncovered(width: 100, height: 50, by: [])
        #expect(whole == [TileRect(x: 0, y: 0, width: 100, height: 50)])
    }
}
