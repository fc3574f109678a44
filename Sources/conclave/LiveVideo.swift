import ConclaveCall
import ConclaveCapture
import ConclaveMedia
import Logging

/// `--video camera...` and `--video screen...`: a live capture, encoded as the call's video.
enum LiveVideo {
    /// The source `options.video` asks for when it names a camera or a screen; nil for anything
    /// else (the pattern, a file, none), which ``CallMediaSources`` handles.
    ///
    /// Sizes: a camera's pictures are sent at its `@WxH/FPS` when given, else at the call's
    /// `--width`/`--height`/`--fps` (640x480/30 by default). A screen is sent at `--width`/`--height`
    /// when both are given, else at the size of the captured rectangle (a whole screen scaled
    /// down to fit 1920x1080).
    static func source(
        _ options: CallOptions,
        settings: CallVideoSettings,
        logger: Logger
    ) async throws -> RebasingFrameSource? {
        guard let request = try LiveVideoRequest.parse(options.video) else { return nil }
        let raw: any VideoFrameSource
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
        let encoder = VideoEncoderSettings(
            codec: settings.codec,
            width: raw.width,
            height: raw.height,
            frameRate: raw.timeline.rateNumerator,
            bitrate: settings.bitrate
        )
        return RebasingFrameSource(EncodingVideoSource(raw: raw, encoder: try encoder.makeEncoder()))
    }
}
