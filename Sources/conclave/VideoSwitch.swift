import ConclaveCore
import ConclaveMedia
import Logging
import Synchronization

/// The window's `v` for the video being sent: off (black pictures) and on again.
///
/// The stream is never renegotiated: the main source keeps its cadence and RTP timestamps, and
/// only the pixels change. So a receiver sees one continuous stream. Black is sent rather than
/// nothing because receivers (and recorders) treat a stream that stops as a failure, and a black
/// picture costs almost no bits. (The window's `s` shares the screen as a stream of its own
/// instead: see ``LiveVideo/toggleScreenShare(in:settings:logger:)``.)
final class VideoSwitch: VideoFrameSource, @unchecked Sendable {
    // @unchecked: `primary` and `black` are used only by the one sender that reads this source;
    // the switch's state is an atomic flag behind its Mutex.
    private let primary: any VideoFrameSource
    private let off = Mutex(false)
    private lazy var black: [UInt8] = {
        let luma = primary.width * primary.height
        let chroma = (primary.width / 2) * (primary.height / 2)
        return [UInt8](repeating: 16, count: luma) + [UInt8](repeating: 128, count: 2 * chroma)
    }()

    init(_ primary: any VideoFrameSource) {
        self.primary = primary
    }

    var timeline: FrameTimeline { primary.timeline }
    var width: Int { primary.width }
    var height: Int { primary.height }

    func waitUntilReady() async throws { try await primary.waitUntilReady() }

    func nextFrame() throws -> VideoFrame? {
        guard let frame = try primary.nextFrame() else { return nil }
        guard off.withLock({ $0 }) else { return frame }
        return try VideoFrame(width: width, height: height, data: black, rtpTimestamp: frame.rtpTimestamp)
    }

    /// `v`: the video off or on again; the status line.
    func toggleOff() -> String {
        let off = off.withLock {
            $0.toggle()
            return $0
        }
        return off ? "video off (black is sent)" : "video on"
    }
}
