import ConclaveCapture
import Testing

/// The mode asked of a camera, from the modes typical UVC cameras list.
@Suite struct CameraNegotiationTests {
    /// A common webcam: YUYV at full rate only up to 640x480, MJPEG at full rate up to 1920x1080.
    let webcam = [
        CameraMode(pixelFormat: .yuyv, size: VideoSize(width: 640, height: 480), frameRates: [30, 15]),
        CameraMode(pixelFormat: .yuyv, size: VideoSize(width: 1280, height: 720), frameRates: [10, 5]),
        CameraMode(pixelFormat: .yuyv, size: VideoSize(width: 320, height: 240), frameRates: [30]),
        CameraMode(pixelFormat: .mjpeg, size: VideoSize(width: 640, height: 480), frameRates: [30]),
        CameraMode(pixelFormat: .mjpeg, size: VideoSize(width: 1280, height: 720), frameRates: [30, 15]),
        CameraMode(pixelFormat: .mjpeg, size: VideoSize(width: 1920, height: 1080), frameRates: [30]),
        CameraMode(pixelFormat: .other("H264"), size: VideoSize(width: 1280, height: 720), frameRates: [60]),
    ]

    @Test func exactSizeAtFullRatePrefersYUYV() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 640, height: 480), frameRate: 30)
        #expect(choice == CameraChoice(pixelFormat: .yuyv, size: VideoSize(width: 640, height: 480), frameRate: 30))
    }

    @Test func largeSizesAtFullRateNeedMJPEG() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 1280, height: 720), frameRate: 30)
        #expect(choice == CameraChoice(pixelFormat: .mjpeg, size: VideoSize(width: 1280, height: 720), frameRate: 30))
    }

    @Test func aSlowRateLetsYUYVServeLargeSizes() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 1280, height: 720), frameRate: 10)
        #expect(choice == CameraChoice(pixelFormat: .yuyv, size: VideoSize(width: 1280, height: 720), frameRate: 10))
    }

    @Test func anUnlistedSizeTakesTheSmallestLargerOne() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 960, height: 540), frameRate: 30)
        #expect(choice == CameraChoice(pixelFormat: .mjpeg, size: VideoSize(width: 1280, height: 720), frameRate: 30))
    }

    @Test func aSizeLargerThanAnyTakesTheLargest() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 3840, height: 2160), frameRate: 30)
        #expect(choice == CameraChoice(pixelFormat: .mjpeg, size: VideoSize(width: 1920, height: 1080), frameRate: 30))
    }

    @Test func anUnlistedRateTakesTheNextFasterOne() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 640, height: 480), frameRate: 20)
        #expect(choice == CameraChoice(pixelFormat: .yuyv, size: VideoSize(width: 640, height: 480), frameRate: 30))
    }

    @Test func aRateNoModeReachesTakesTheFastest() {
        let choice = CameraNegotiation.choose(from: webcam, size: VideoSize(width: 640, height: 480), frameRate: 60)
        #expect(choice?.frameRate == 30)
        #expect(choice?.size == VideoSize(width: 640, height: 480))
    }

    @Test func formatsConclaveCannotConvertAreNeverChosen() {
        let onlyH264 = [
            CameraMode(pixelFormat: .other("H264"), size: VideoSize(width: 640, height: 480), frameRates: [30])
        ]
        #expect(
            CameraNegotiation.choose(from: onlyH264, size: VideoSize(width: 640, height: 480), frameRate: 30) == nil
        )
        #expect(CameraNegotiation.choose(from: [], size: VideoSize(width: 640, height: 480), frameRate: 30) == nil)
    }

    @Test func modesWithoutRatesAreAskedForNoRate() {
        let modes = [CameraMode(pixelFormat: .mjpeg, size: VideoSize(width: 800, height: 600), frameRates: [])]
        let choice = CameraNegotiation.choose(from: modes, size: VideoSize(width: 640, height: 480), frameRate: 30)
        #expect(choice == CameraChoice(pixelFormat: .mjpeg, size: VideoSize(width: 800, height: 600), frameRate: nil))
    }

    @Test func fourccsNameTheirFormats() {
        #expect(CameraPixelFormat(fourcc: "MJPG") == .mjpeg)
        #expect(CameraPixelFormat(fourcc: "YUYV") == .yuyv)
        #expect(CameraPixelFormat(fourcc: "NV12") == .other("NV12"))
        #expect(CameraPixelFormat.yuyv.inputFormatName == "yuyv422")
        #expect(CameraPixelFormat.mjpeg.inputFormatName == "mjpeg")
    }

    @Test func nativeSizesAreMadeEvenAndFitTheLimit() {
        let limit = CaptureOutputSize.native(limit: VideoSize(width: 1920, height: 1080))
        #expect(limit.resolve(width: 1280, height: 720) == VideoSize(width: 1280, height: 720))
        #expect(limit.resolve(width: 1279, height: 719) == VideoSize(width: 1278, height: 718))
        #expect(limit.resolve(width: 3840, height: 2160) == VideoSize(width: 1920, height: 1080))
        #expect(limit.resolve(width: 2560, height: 1600) == VideoSize(width: 1728, height: 1080))
        #expect(limit.resolve(width: 5120, height: 1440) == VideoSize(width: 1920, height: 540))
        #expect(
            CaptureOutputSize.fixed(VideoSize(width: 320, height: 240)).resolve(width: 1920, height: 1080).width == 320
        )
    }
}

/// Sizes no driver should report never trap the ranking.
@Suite struct CameraNegotiationHostileTests {
    @Test func hugeAndNegativeSizesDoNotTrap() {
        let modes = [
            CameraMode(pixelFormat: .mjpeg, size: VideoSize(width: Int.max, height: Int.max), frameRates: [30]),
            CameraMode(pixelFormat: .yuyv, size: VideoSize(width: -4, height: 480), frameRates: [Int.max]),
            CameraMode(pixelFormat: .yuyv, size: VideoSize(width: 640, height: 480), frameRates: [30]),
        ]
        let choice = CameraNegotiation.choose(from: modes, size: VideoSize(width: 640, height: 480), frameRate: 30)
        #expect(choice?.size == VideoSize(width: 640, height: 480))
    }
}
