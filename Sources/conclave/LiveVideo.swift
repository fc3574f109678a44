import ConclaveCall
import ConclaveCapture
import ConclaveMedia
import Logging
import Synchronization

/// `--video camera...` and `--video screen...`: a live capture, encoded as the call's video.
enum LiveVideo {
    /// The source `options.video` asks for when it names a camera or a screen; nil for anything
    /// else (the pattern, a file, none), which ``CallMediaSources`` handles.
    ///
    /// Sizes: a camera's pictures are sent at its `@WxH/FPS` when given, else at the call's
    /// `--width`/`--height`/`--fps` (640x480/30 by default). A screen is sent at `--width`/`--height`
    /// when both are given, else at the size of the captured rectangle (a whole screen scaled
    /// down to fit 1920x1080).
    ///
    /// With `switchable` (a call window, whose `v` and `s` turn the video off and share the
    /// screen), the pattern is made here too, and the source goes through a ``VideoSwitch``.
    static func source(
        _ options: CallOptions,
        settings: CallVideoSettings,
        switchable: Bool = false,
        logger: Logger
    ) async throws -> RebasingFrameSource? {
        var raw: any VideoFrameSource
        guard let request = try LiveVideoRequest.parse(options.video) else {
            guard switchable, options.video == "pattern" else { return nil }
            raw = try PatternSource(width: settings.width, height: settings.height, frameRate: settings.frameRate)
            return try CallMediaSources.encoded(Self.switched(raw, logger: logger), settings: settings)
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
            let source = try await ScreenSource.open(
                screen,
                size: size,
                frameRate: settings.frameRate,
                initialTimestamp: UInt32.random(in: .min ... .max),
                logger: logger
            )
            logger.info(
                "screen open",
                metadata: ["display": "\(source.display)", "size": "\(source.width)x\(source.height)"]
            )
            raw = source
        }
        if switchable { raw = switched(raw, logger: logger) }
        return try CallMediaSources.encoded(raw, settings: settings)
    }

    /// Wraps `raw` in the switch that the window's keys reach.
    private static func switched(_ raw: any VideoFrameSource, logger: Logger) -> any VideoFrameSource {
        let video = VideoSwitch(raw, logger: logger)
        current.withLock { $0 = video }
        return video
    }

    /// The window's `v`: the sent video off or on again.
    static func toggleOff() -> String {
        current.withLock { $0 }?.toggleOff() ?? "no video to turn off (--video none or a file)"
    }

    /// The window's `s`: the screen shared in place of the video, or the video back.
    static func toggleScreen(frameRate: Int) async -> String {
        guard let video = current.withLock({ $0 }) else { return "no video stream to share the screen in" }
        return await video.toggleScreen(frameRate: frameRate)
    }

    /// The video the window's keys act on (one per process: one call per process).
    private static let current = Mutex<VideoSwitch?>(nil)
}
