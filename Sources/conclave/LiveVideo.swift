import ConclaveCall
import ConclaveCapture
import ConclaveMedia
import Logging
import Synchronization

/// `--video camera...` and `--video screen...`: a live capture, encoded as the call's video.
enum LiveVideo {
    /// The source `video` (our feed's `--video`) asks for when it names a camera or a screen; nil
    /// for anything else (the pattern, a file, none), which ``CallMediaSources`` handles.
    ///
    /// Sizes: a camera's pictures are sent at its `@WxH/FPS` when given, else at the call's
    /// `--width`/`--height`/`--fps` (640x480/30 by default). A screen is sent at `--width`/`--height`
    /// when both are given, else at the size of the captured rectangle (a whole screen scaled
    /// down to fit 1920x1080).
    ///
    /// With `switchable` (a call window, whose `v` turns the video off and on), the pattern is
    /// made here too, and the source goes through a ``VideoSwitch``.
    static func source(
        _ video: String,
        options: CallOptions,
        settings: CallVideoSettings,
        switchable: Bool = false,
        logger: Logger
    ) async throws -> RebasingFrameSource? {
        var raw: any VideoFrameSource
        guard let request = try LiveVideoRequest.parse(video) else {
            guard switchable, video == "pattern" else { return nil }
            raw = try PatternSource(width: settings.width, height: settings.height, frameRate: settings.frameRate)
            return try CallMediaSources.encoded(Self.switched(raw), settings: settings)
        }
        switch request {
        case .camera(let camera):
            let size = camera.size ?? VideoSize(width: settings.width, height: settings.height)
            let source = try await CameraSource.open(
                camera,
                size: size,
                frameRate: camera.frameRate ?? settings.frameRate,
                initialTimestamp: UInt32.random(in: .min ... .max),
                logger: logger
            )
            logger.info(
                "camera open",
                metadata: [
                    "device": "\(source.info.path)", "name": "\(source.info.name)",
                    "mode":
                        "\(source.choice.map { "\($0.pixelFormat) \($0.size)@\($0.frameRate ?? 0)" } ?? "device's")",
                ]
            )
            raw = source
        case .screen(let screen):
            var size: VideoSize?
            if let width = options.width, let height = options.height { size = VideoSize(width: width, height: height) }
            raw = try await openScreen(screen, size: size, frameRate: settings.frameRate, logger: logger)
        }
        if switchable { raw = switched(raw) }
        return try CallMediaSources.encoded(raw, settings: settings)
    }

    /// The screen shared beside our feed's video as a stream of its own (`--video camera --video
    /// screen`, or the window's `s`), encoded like the video but at the captured rectangle's size
    /// (a whole screen scaled down to fit 1920x1080), without simulcast, and at the video's
    /// bitrate scaled by its pixel count, within 2.5 Mbit/s: text on a screen needs the bits.
    static func screenBeside(
        _ screen: ScreenRequest,
        settings: CallVideoSettings,
        logger: Logger
    ) async throws -> RebasingFrameSource {
        let raw = try await openScreen(screen, size: nil, frameRate: settings.frameRate, logger: logger)
        var screenSettings = settings
        screenSettings.simulcastLayers = 1
        let scale = Double(raw.width * raw.height) / Double(max(1, settings.width * settings.height))
        screenSettings.bitrate = max(
            settings.bitrate,
            min(Self.screenBitrateCap, Int(Double(settings.bitrate) * scale))
        )
        return try CallMediaSources.encoded(raw, settings: screenSettings)
    }

    /// The most bitrate ``screenBeside(_:settings:logger:)`` gives a screen, bits per second.
    static let screenBitrateCap = 2_500_000

    private static func openScreen(
        _ screen: ScreenRequest,
        size: VideoSize?,
        frameRate: Int,
        logger: Logger
    ) async throws -> ScreenSource {
        let started = ContinuousClock.now
        let source = try await ScreenSource.open(
            screen,
            size: size,
            frameRate: frameRate,
            initialTimestamp: UInt32.random(in: .min ... .max),
            logger: logger
        )
        logger.info(
            "screen open",
            metadata: [
                "display": "\(source.display)", "size": "\(source.width)x\(source.height)",
                "took": "\(ContinuousClock.now - started)",
            ]
        )
        return source
    }

    /// The window's `s`: the screen (`$DISPLAY`) shared beside the video as a stream of its own,
    /// or no longer shared; the status line. A screen that cannot be captured, or a feed Janus
    /// refuses, is the line, and the call goes on as it was.
    static func toggleScreenShare(in session: CallSession, settings: CallVideoSettings, logger: Logger) async -> String
    {
        if await session.sharesScreen {
            await session.stopSharingScreen()
            return "screen sharing stopped"
        }
        do {
            let screen = try await screenBeside(ScreenRequest(), settings: settings, logger: logger)
            try await session.shareScreen(screen)
            let feed = await session.screenFeedID
            return "sharing the screen beside the video" + (feed.map { " (feed \($0))" } ?? "")
        } catch {
            return "screen sharing: \(error)"
        }
    }

    /// Wraps `raw` in the switch that the window's keys reach.
    private static func switched(_ raw: any VideoFrameSource) -> any VideoFrameSource {
        let video = VideoSwitch(raw)
        current.withLock { $0 = video }
        return video
    }

    /// The window's `v`: the sent video off or on again.
    static func toggleOff() -> String {
        current.withLock { $0 }?.toggleOff() ?? "no video to turn off (--video none or a file)"
    }

    /// The video the window's keys act on (one per process: one call per process).
    private static let current = Mutex<VideoSwitch?>(nil)
}
