public import ConclaveCore

/// A source of raw pictures, such as the test pattern or a Y4M file.
public protocol VideoFrameSource: AnyObject {
    /// The frame timing and RTP timestamps this source uses.
    var timeline: FrameTimeline { get }
    /// Picture width.
    var width: Int { get }
    /// Picture height.
    var height: Int { get }
    /// The next picture, or nil at the end.
    func nextFrame() throws -> VideoFrame?
    /// Suspends until `nextFrame()` can answer without blocking.
    ///
    /// Generators and files are always ready (the default). A live capture (a camera, a screen)
    /// waits here for its device, so that a sending task never blocks a thread of the shared
    /// pool while a picture is on its way.
    func waitUntilReady() async throws
}

extension VideoFrameSource {
    public func waitUntilReady() async throws {}
}

/// A source of 20 ms PCM blocks at 48 kHz, such as the tone or a WAV file.
public protocol AudioFrameSource: AnyObject {
    /// The frame timing and RTP timestamps this source uses.
    var timeline: FrameTimeline { get }
    /// 1 or 2.
    var channels: Int { get }
    /// The next 20 ms block, or nil at the end.
    func nextFrame() throws -> AudioFrame?
    /// Suspends until `nextFrame()` can answer without blocking (see
    /// ``VideoFrameSource/waitUntilReady()``); a microphone waits here for its next block.
    func waitUntilReady() async throws
    /// Whether the source's device paces it: ``waitUntilReady()`` returns as each block is
    /// captured (a microphone), so a sender sends each one as soon as it has it rather than on
    /// the wall clock. False by default: tones and files are paced by their sender.
    var pacedByDevice: Bool { get }
}

extension AudioFrameSource {
    public func waitUntilReady() async throws {}

    public var pacedByDevice: Bool { false }
}

/// The timing of a stream of equally spaced frames: when frame `n` is due and what RTP timestamp
/// it carries.
///
/// Timestamps are computed from the frame index (never accumulated), so rates such as 30000/1001
/// do not drift.
public struct FrameTimeline: Sendable, Hashable {
    /// The RTP clock: 90 000 for video, 48 000 for audio.
    public var clockRate: Int
    /// Frames per second as a fraction: `rateNumerator / rateDenominator`.
    public var rateNumerator: Int
    /// See `rateNumerator`.
    public var rateDenominator: Int
    /// The RTP timestamp of frame 0 (random in a real call, so streams are not predictable).
    public var initialTimestamp: UInt32

    /// Creates a timeline.
    public init(clockRate: Int, rateNumerator: Int, rateDenominator: Int = 1, initialTimestamp: UInt32 = 0) {
        self.clockRate = clockRate
        self.rateNumerator = max(1, rateNumerator)
        self.rateDenominator = max(1, rateDenominator)
        self.initialTimestamp = initialTimestamp
    }

    /// A video timeline at a whole frame rate.
    public static func video(frameRate: Int, initialTimestamp: UInt32 = 0) -> FrameTimeline {
        FrameTimeline(clockRate: 90_000, rateNumerator: frameRate, initialTimestamp: initialTimestamp)
    }

    /// The 20 ms (50 frames per second) Opus timeline.
    public static func audio(initialTimestamp: UInt32 = 0) -> FrameTimeline {
        FrameTimeline(clockRate: 48_000, rateNumerator: 50, initialTimestamp: initialTimestamp)
    }

    /// Clock ticks from frame 0 to frame `index`.
    public func ticks(forFrame index: Int) -> Int64 {
        Int64(index) * Int64(clockRate) * Int64(rateDenominator) / Int64(rateNumerator)
    }

    /// The RTP timestamp of frame `index`.
    public func rtpTimestamp(forFrame index: Int) -> UInt32 {
        initialTimestamp &+ UInt32(truncatingIfNeeded: ticks(forFrame: index))
    }

    /// When frame `index` is due, measured from frame 0.
    public func mediaTime(forFrame index: Int) -> Duration {
        let nanoseconds = Int64(index) * 1_000_000_000 * Int64(rateDenominator) / Int64(rateNumerator)
        return .nanoseconds(nanoseconds)
    }

    /// True for the first frame at or after each whole second (frame 0 included): the frames that
    /// carry the sync flash or beep.
    public func startsSecond(frame index: Int) -> Bool {
        guard index > 0 else { return true }
        let denominator = Int64(rateNumerator)
        let now = Int64(index) * Int64(rateDenominator) / denominator
        let before = Int64(index - 1) * Int64(rateDenominator) / denominator
        return now != before
    }
}

/// Paces frames on a media clock: a frame due at media time `t` is released at `start + t`.
///
/// Deadlines are computed from the start instant, not from the previous wake-up, so scheduling
/// jitter never accumulates. In `.unpaced` mode nothing waits, which lets tests push minutes of
/// media through in a second.
public struct MediaPacer: Sendable {
    /// Whether to wait for real time.
    public enum Mode: Sendable, Hashable {
        /// Release each frame at its real-time instant.
        case realTime
        /// Release frames as fast as they are asked for: a source whose device paces it (see
        /// ``AudioFrameSource/pacedByDevice``), and tests that push media through unpaced.
        case unpaced
    }

    /// The pacing mode.
    public let mode: Mode
    private var start: ContinuousClock.Instant?

    /// Creates a pacer; the clock starts at the first `wait`.
    public init(mode: Mode) { self.mode = mode }

    /// The pacer for sending `source` live: none for a source its device paces (a microphone),
    /// real time for generators and files.
    public init(sending source: any EncodedFrameSource) {
        self.init(mode: source.pacedByDevice ? .unpaced : .realTime)
    }

    /// Suspends until `mediaTime` after the first call's instant (no-op when unpaced).
    public mutating func wait(until mediaTime: Duration) async throws {
        guard mode == .realTime else { return }
        let clock = ContinuousClock()
        let start = self.start ?? clock.now
        self.start = start
        let deadline = start.advanced(by: mediaTime)
        if deadline > clock.now { try await clock.sleep(until: deadline, tolerance: .milliseconds(1)) }
    }
}
