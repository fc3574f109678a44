public import ConclaveCore
public import ConclaveMedia
import Foundation
public import Logging

/// The sending side of a capture, shared by ``CameraSource`` and ``ScreenSource``.
///
/// The frame timeline is the nominal rate, not the device's: each `nextFrame()` (one per frame
/// slot of the sender's pacer) takes the newest picture there is. A device slower than the
/// nominal rate has its pictures repeated, a faster one has pictures skipped, so RTP timestamps
/// always advance by one frame duration per frame and match real time; a device's jitter never
/// reaches the timestamps. The cost is latency: `MediaSender` takes (and encodes) the next
/// picture right after sending the previous frame, one frame duration before it is due, and the
/// picture may have waited up to one more in the mailbox: 1 to 2 frame durations (33 to 67 ms at
/// 30 fps). Waiting in `waitUntilReady` for the slot's instant would save one of them at the
/// price of a second timer wake-up per frame.
struct CaptureFeed {
    let capture: DeviceCapture
    let timeline: FrameTimeline
    /// Sent before the first picture, should a caller not wait for readiness.
    private let blank: VideoFrame
    private var index = 0

    init(capture: DeviceCapture, frameRate: Int, initialTimestamp: UInt32) throws(CaptureError) {
        self.capture = capture
        self.timeline = .video(frameRate: frameRate, initialTimestamp: initialTimestamp)
        do {
            blank = try VideoFrame.blank(width: capture.size.width, height: capture.size.height)
        } catch {
            capture.stop()
            throw CaptureError(.unsupported, device: "", "cannot send \(capture.size) pictures: \(error)")
        }
    }

    /// The newest picture, stamped for the next frame slot.
    mutating func nextFrame() -> VideoFrame {
        var picture = capture.mailbox.latest ?? blank
        picture.rtpTimestamp = timeline.rtpTimestamp(forFrame: index)
        index += 1
        return picture
    }
}

/// A V4L2 camera through libavdevice, as a ``VideoFrameSource``.
///
/// The camera is asked for the mode ``CameraNegotiation`` picks from the modes it lists (MJPEG or
/// YUYV, the size and rate closest to the wanted ones); whatever it delivers is decoded and
/// converted to I420 at the wanted size. A camera unplugged mid-call logs one line and the source
/// keeps sending its last picture: the published track stays (removing it would mean publishing
/// again), and receivers see a still picture instead of a stream that stops.
public final class CameraSource: VideoFrameSource {
    public var timeline: FrameTimeline { feed.timeline }
    public var width: Int { feed.capture.size.width }
    public var height: Int { feed.capture.size.height }
    /// The camera.
    public let info: CameraInfo
    /// The mode asked of the camera; nil when it listed none Conclave converts.
    public let choice: CameraChoice?
    private var feed: CaptureFeed

    private init(info: CameraInfo, choice: CameraChoice?, feed: CaptureFeed) {
        self.info = info
        self.choice = choice
        self.feed = feed
    }

    deinit { feed.capture.stop() }

    /// Opens the camera of `request` for pictures of `size` at `frameRate`, on its capture thread.
    public static func open(
        _ request: CameraRequest,
        size: VideoSize,
        frameRate: Int,
        initialTimestamp: UInt32 = 0,
        logger: Logger
    ) async throws(CaptureError) -> CameraSource {
        let path = request.device
        try validate(size: size, frameRate: frameRate, device: path)
        let info = try V4L2Inspection.inspect(path)
        let wantedSize = request.size ?? size
        let wantedRate = request.frameRate ?? frameRate
        let choice = CameraNegotiation.choose(from: info.modes, size: wantedSize, frameRate: wantedRate)
        var options: [(String, String)] = [("video_size", "\(choice?.size ?? wantedSize)")]
        if let rate = choice == nil ? wantedRate : choice?.frameRate { options.append(("framerate", "\(rate)")) }
        if let name = choice?.pixelFormat.inputFormatName { options.append(("input_format", name)) }
        let input = CaptureInput(
            role: "camera",
            format: "v4l2",
            url: path,
            options: options,
            outputSize: .fixed(size),
            openError: { code in cameraOpenError(code, path: path) }
        )
        let capture = try await DeviceCapture.start(input, logger: logger)
        return CameraSource(
            info: info,
            choice: choice,
            feed: try CaptureFeed(capture: capture, frameRate: frameRate, initialTimestamp: initialTimestamp)
        )
    }

    /// Suspends until the camera's first picture is there.
    public func waitUntilReady() async throws { try await feed.capture.mailbox.waitForFirstPicture() }

    public func nextFrame() throws -> VideoFrame? { feed.nextFrame() }

    /// Pictures the camera delivered so far.
    public var capturedPictures: Int { feed.capture.mailbox.posted }
}

/// An X display (whole, or a rectangle of it) through libavdevice's x11grab, as a
/// ``VideoFrameSource``. Timing as ``CameraSource``: the nominal rate, newest picture per slot.
public final class ScreenSource: VideoFrameSource {
    public var timeline: FrameTimeline { feed.timeline }
    public var width: Int { feed.capture.size.width }
    public var height: Int { feed.capture.size.height }
    /// The display captured.
    public let display: String
    private var feed: CaptureFeed

    /// The largest size a whole screen is sent at when no size is asked (scaled down, shape kept).
    public static let defaultSizeLimit = VideoSize(width: 1920, height: 1080)

    private init(display: String, feed: CaptureFeed) {
        self.display = display
        self.feed = feed
    }

    deinit { feed.capture.stop() }

    /// Opens the display of `request` (`DISPLAY` from `environment` when it names none) on its
    /// capture thread.
    ///
    /// - Parameter size: the size to send; nil for the captured area's own size (a whole screen
    ///   scaled down to fit ``defaultSizeLimit``).
    public static func open(
        _ request: ScreenRequest,
        size: VideoSize?,
        frameRate: Int,
        initialTimestamp: UInt32 = 0,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger
    ) async throws(CaptureError) -> ScreenSource {
        guard let display = request.display ?? environment["DISPLAY"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw CaptureError(
                .unreachableDisplay,
                device: "",
                "no X display to capture: DISPLAY is not set (use --video screen:DISPLAY)"
            )
        }
        try validate(size: size ?? defaultSizeLimit, frameRate: frameRate, device: display)
        var url = display
        var options: [(String, String)] = [("framerate", "\(frameRate)")]
        if let region = request.region {
            url += "+\(region.x),\(region.y)"
            options.append(("video_size", "\(region.size)"))
        }
        let outputSize: CaptureOutputSize =
            if let size { .fixed(size) } else { .native(limit: request.region?.size ?? defaultSizeLimit) }
        let region = request.region
        let input = CaptureInput(
            role: "screen",
            format: "x11grab",
            url: url,
            options: options,
            outputSize: outputSize,
            openError: { code in screenOpenError(code, display: display, region: region) }
        )
        let capture = try await DeviceCapture.start(input, logger: logger)
        return ScreenSource(
            display: display,
            feed: try CaptureFeed(capture: capture, frameRate: frameRate, initialTimestamp: initialTimestamp)
        )
    }

    /// Suspends until the first picture of the screen is there.
    public func waitUntilReady() async throws { try await feed.capture.mailbox.waitForFirstPicture() }

    public func nextFrame() throws -> VideoFrame? { feed.nextFrame() }

    /// Pictures captured so far.
    public var capturedPictures: Int { feed.capture.mailbox.posted }
}

/// Rejects sizes I420 cannot carry and rates outside 1 to 240 before any device is opened.
private func validate(size: VideoSize, frameRate: Int, device: String) throws(CaptureError) {
    guard (1...240).contains(frameRate) else {
        throw CaptureError(.unsupported, device: device, "frame rate \(frameRate) out of range (1 to 240)")
    }
    do {
        try VideoFrame.validate(width: size.width, height: size.height)
    } catch {
        throw CaptureError(.unsupported, device: device, "cannot send \(size) pictures: \(error)")
    }
}

/// The error line for a camera libavdevice could not open.
func cameraOpenError(_ code: Int32, path: String) -> CaptureError {
    switch -code {
    case EBUSY: CaptureError(.busy, device: path, "camera \(path) is busy: another program is using it")
    case ENOENT, ENODEV, ENXIO: CaptureError(.missingDevice, device: path, "no camera at \(path)")
    case EACCES, EPERM: CaptureError(.permissionDenied, device: path, "cannot open camera \(path): permission denied")
    default: CaptureError(.unsupported, device: path, "cannot start camera \(path): \(errorText(code))")
    }
}

/// The error line for a display x11grab could not open.
func screenOpenError(_ code: Int32, display: String, region: ScreenRegion?) -> CaptureError {
    if -code == EINVAL, let region {
        return CaptureError(
            .unsupported,
            device: display,
            "the region +\(region.x),\(region.y),\(region.size) does not fit on X display \(display)"
        )
    }
    return CaptureError(.unreachableDisplay, device: display, "cannot reach X display \(display): \(errorText(code))")
}
