import ConclaveCapture
import ConclaveCore
import ConclaveMedia
import Logging
import Synchronization

/// The window's `v` and `s` for the video being sent: off (black pictures) and on again, and the
/// screen shared in place of the camera or pattern and back.
///
/// The stream is never renegotiated: the main source keeps its cadence and RTP timestamps, and
/// only the pixels change. So a receiver sees one continuous stream, and the screen is captured
/// at the stream's size (scaled, its aspect not kept) the first time `s` is pressed. Black is
/// sent rather than nothing because receivers (and recorders) treat a stream that stops as a
/// failure, and a black picture costs almost no bits.
final class VideoSwitch: VideoFrameSource, @unchecked Sendable {
    // @unchecked: `primary` and `black` are used only by the one sender that reads this source;
    // the switch's state is behind its Mutex.
    private let primary: any VideoFrameSource
    private let logger: Logger
    private let state = Mutex(State())
    private lazy var black: [UInt8] = {
        let luma = primary.width * primary.height
        let chroma = (primary.width / 2) * (primary.height / 2)
        return [UInt8](repeating: 16, count: luma) + [UInt8](repeating: 128, count: 2 * chroma)
    }()

    private struct State {
        var off = false
        var sharing = false
        var screen: SharedScreen?
    }

    /// The screen's capture, read only by the sender (as the main source is).
    private final class SharedScreen: @unchecked Sendable {
        let source: ScreenSource
        init(_ source: ScreenSource) { self.source = source }
    }

    init(_ primary: any VideoFrameSource, logger: Logger) {
        self.primary = primary
        self.logger = logger
    }

    var timeline: FrameTimeline { primary.timeline }
    var width: Int { primary.width }
    var height: Int { primary.height }

    func waitUntilReady() async throws { try await primary.waitUntilReady() }

    func nextFrame() throws -> VideoFrame? {
        guard let frame = try primary.nextFrame() else { return nil }
        let (off, screen) = state.withLock { ($0.off, $0.sharing ? $0.screen : nil) }
        if off {
            return try VideoFrame(width: width, height: height, data: black, rtpTimestamp: frame.rtpTimestamp)
        }
        if let screen, let picture = try screen.source.nextFrame() {
            return try VideoFrame(width: width, height: height, data: picture.data, rtpTimestamp: frame.rtpTimestamp)
        }
        return frame
    }

    /// `v`: the video off or on again; the status line.
    func toggleOff() -> String {
        let off = state.withLock {
            $0.off.toggle()
            return $0.off
        }
        return off ? "video off (black is sent)" : "video on"
    }

    /// `s`: the screen (`DISPLAY`) shared in place of the video, or the video back; the status
    /// line. A screen that cannot be captured is the line, and nothing changes.
    func toggleScreen(frameRate: Int) async -> String {
        if state.withLock({ $0.screen == nil }) {
            do {
                let screen = try await ScreenSource.open(
                    ScreenRequest(),
                    size: VideoSize(width: width, height: height),
                    frameRate: frameRate,
                    logger: logger
                )
                let shared = SharedScreen(screen)
                state.withLock { $0.screen = $0.screen ?? shared }
            } catch {
                return "screen sharing: \(error)"
            }
        }
        let sharing = state.withLock {
            $0.sharing.toggle()
            return $0.sharing
        }
        return sharing ? "sharing the screen in place of the video" : "screen sharing stopped"
    }
}
