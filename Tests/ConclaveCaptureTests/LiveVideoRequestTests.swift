import ConclaveCapture
import Testing

@Suite struct LiveVideoRequestTests {
    @Test func cameraSpellings() throws {
        #expect(try LiveVideoRequest.parse("camera") == .camera(CameraRequest()))
        #expect(try LiveVideoRequest.parse("camera:/dev/video2") == .camera(CameraRequest(device: "/dev/video2")))
        #expect(
            try LiveVideoRequest.parse("camera@1280x720/15")
                == .camera(CameraRequest(size: VideoSize(width: 1280, height: 720), frameRate: 15))
        )
        #expect(
            try LiveVideoRequest.parse("camera:/dev/video1@640x480")
                == .camera(CameraRequest(device: "/dev/video1", size: VideoSize(width: 640, height: 480)))
        )
    }

    @Test func screenSpellings() throws {
        #expect(try LiveVideoRequest.parse("screen") == .screen(ScreenRequest()))
        #expect(try LiveVideoRequest.parse("screen::1") == .screen(ScreenRequest(display: ":1")))
        #expect(try LiveVideoRequest.parse("screen::0.1") == .screen(ScreenRequest(display: ":0.1")))
        #expect(
            try LiveVideoRequest.parse("screen::99+10,20,320x240")
                == .screen(
                    ScreenRequest(
                        display: ":99",
                        region: ScreenRegion(x: 10, y: 20, size: VideoSize(width: 320, height: 240))
                    )
                )
        )
        #expect(
            try LiveVideoRequest.parse("screen:+0,0,640x360")
                == .screen(ScreenRequest(region: ScreenRegion(x: 0, y: 0, size: VideoSize(width: 640, height: 360))))
        )
    }

    @Test func videoGivenTwiceIsAVideoAndAScreenBesideIt() throws {
        #expect(try VideoChoices(parsing: []) == VideoChoices(main: "pattern", screen: nil))
        #expect(try VideoChoices(parsing: ["camera"]) == VideoChoices(main: "camera", screen: nil))
        #expect(try VideoChoices(parsing: ["screen::1"]) == VideoChoices(main: "screen::1", screen: nil))
        #expect(
            try VideoChoices(parsing: ["camera:/dev/video2", "screen::1"])
                == VideoChoices(main: "camera:/dev/video2", screen: ScreenRequest(display: ":1"))
        )
        #expect(try VideoChoices(parsing: ["screen", "none"]) == VideoChoices(main: "none", screen: ScreenRequest()))
        for values in [["camera", "pattern"], ["screen", "screen::1"], ["pattern", "screen", "none"]] {
            #expect(throws: LiveVideoRequestError.self, "\(values)") { try VideoChoices(parsing: values) }
        }
        // A badly spelled screen is its own error, not "two streams".
        #expect(throws: LiveVideoRequestError.self) { try VideoChoices(parsing: ["camera", "screen:nowhere"]) }
    }

    @Test func otherTextIsNotALiveDevice() throws {
        for text in ["pattern", "none", "clip.mkv", "cameras.mkv", "screenshot.webm", "/tmp/camera", ""] {
            #expect(try LiveVideoRequest.parse(text) == nil, "\(text)")
        }
    }

    @Test(arguments: [
        ("camera:", "no device"),
        ("camera:video0", "device path"),
        ("camera@640x", "WxH"),
        ("camera@641x480", "WxH"),
        ("camera@0x480", "WxH"),
        ("camera@640x480/0", "frame rate"),
        ("camera@640x480/999", "frame rate"),
        ("camera@640x480/fast", "frame rate"),
        ("camera@99999x480", "WxH"),
        ("screen:", "no display"),
        ("screen:1", "not an X display"),
        ("screen::x", "not an X display"),
        ("screen::1+1,2", "+x,y,WxH"),
        ("screen::1+a,2,64x64", "corner"),
        ("screen::1+-1,2,64x64", "corner"),
        ("screen::1+1,2,63x64", "WxH"),
        ("screen::1+99999999,2,64x64", "corner"),
        ("screen@640x480", "expected screen"),
    ])
    func badSpellingsGetOneLine(text: String, mentions: String) {
        #expect {
            _ = try LiveVideoRequest.parse(text)
        } throws: { error in
            let line = "\(error)"
            return line.hasPrefix("--video \(text): ") && line.contains(mentions) && !line.contains("\n")
        }
    }

    /// Random bytes never trap the parser: it answers nil, a request or one error line.
    @Test func hostileInputNeverTraps() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("camerscn:@x/+,.0123456789-devideo ")
        for _ in 0..<5_000 {
            let length = Int.random(in: 0..<32, using: &generator)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "x" })
            for candidate in [text, "camera" + text, "screen" + text, "screen::1+" + text, "camera@" + text] {
                do {
                    _ = try LiveVideoRequest.parse(candidate)
                } catch {
                    #expect(!error.description.contains("\n"))
                }
            }
        }
    }
}
