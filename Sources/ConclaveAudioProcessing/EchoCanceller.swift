internal import CWebRTCAudioProcessingShims
public import ConclaveCore
import Synchronization

/// How hard the echo canceller's suppressor works on what its filter leaves of the echo: higher
/// removes more residual echo and cuts more of the near end's voice while both people talk.
public enum EchoSuppression: Int32, Sendable, Hashable {
    case low = 0
    case moderate = 1
    case high = 2
}

/// Which parts of webrtc-audio-processing run on the microphone.
public struct EchoCancellerOptions: Sendable, Hashable {
    /// Acoustic echo cancellation against what the speakers play (`analyzePlayback`).
    public var echoCancellation: Bool
    /// Noise suppression (high).
    public var noiseSuppression: Bool
    /// Automatic gain control, adaptive digital (there is no analog volume to steer).
    public var gainControl: Bool
    /// A high-pass filter against rumble and DC.
    public var highPassFilter: Bool
    /// The echo suppressor's level.
    public var suppression: EchoSuppression

    /// Everything on, as a desktop call with speakers and a microphone needs.
    public init(
        echoCancellation: Bool = true,
        noiseSuppression: Bool = true,
        gainControl: Bool = true,
        highPassFilter: Bool = true,
        suppression: EchoSuppression = .moderate
    ) {
        self.echoCancellation = echoCancellation
        self.noiseSuppression = noiseSuppression
        self.gainControl = gainControl
        self.highPassFilter = highPassFilter
        self.suppression = suppression
    }
}

/// A webrtc-audio-processing failure, with what was being done and the library's error code.
public struct AudioProcessingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `create`, `analyze playback`, `process capture`, `set delay`.
    public var operation: String
    /// The library's `AudioProcessing::Error` (negative), or 0 for a check made before calling it.
    public var code: Int32
    /// Why, in words.
    public var reason: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        self.reason = Self.reasons[code] ?? "error \(code)"
    }

    init(_ operation: String, reason: String) {
        self.operation = operation
        self.code = 0
        self.reason = reason
    }

    public var description: String { "audio processing: \(operation) failed: \(reason)" }

    /// `AudioProcessing::Error` in audio_processing.h (0.3).
    private static let reasons: [Int32: String] = [
        -1: "unspecified error", -2: "creation failed", -3: "unsupported component",
        -4: "unsupported function", -5: "null pointer", -6: "bad parameter", -7: "bad sample rate",
        -8: "bad data length", -9: "bad number of channels", -10: "file error", -11: "stream parameter not set",
        -12: "not enabled",
    ]
}

/// Echo cancellation, noise suppression and automatic gain for the microphone, through
/// webrtc-audio-processing (the library PulseAudio's own echo canceller uses), at 48 kHz mono.
///
/// Two threads use it: the output device's thread hands it what the speakers play
/// (`analyzePlayback`, the echo reference) and the microphone's thread processes what it captures
/// (`processCapture`). The library works on 10 ms frames, so each microphone block (normally
/// 20 ms) is split into 480-sample calls, and playback of any length is cut into frames with the
/// rest kept for the next call. One lock serialises the two directions, as the library's contract asks
/// (a stream's setters never run during its processing); it is held for one block's processing,
/// well under a millisecond.
///
/// The canceller finds the echo path's delay itself (the library's delay-agnostic mode and
/// extended filter), so `delay` is a hint: the device latencies PulseAudio reports.
public final class EchoCanceller: Sendable {
    /// Samples in one library frame: 10 ms at 48 kHz.
    public static let frameSamples = Int(CWAP_FRAME_SAMPLES)

    /// The options in force.
    public let options: EchoCancellerOptions
    private let processor: Processor
    /// Serialises the two directions' calls into the library.
    private let lock = Mutex(())

    /// Owns the C processor.
    ///
    /// `@unchecked Sendable`: the pointer and `pending` are only used under `lock`; the processor
    /// is destroyed with the last reference.
    private final class Processor: @unchecked Sendable {
        let pointer: OpaquePointer
        /// Playback samples short of a 10 ms frame, kept for the next `analyzePlayback`.
        var pending: [Int16] = []
        init(_ pointer: OpaquePointer) {
            self.pointer = pointer
            pending.reserveCapacity(EchoCanceller.frameSamples)
        }
        deinit { cwap_destroy(pointer) }
    }

    /// Creates a processor with `options`.
    public init(options: EchoCancellerOptions = EchoCancellerOptions()) throws(AudioProcessingError) {
        var settings = cwap_options(
            echo_cancellation: options.echoCancellation ? 1 : 0,
            noise_suppression: options.noiseSuppression ? 1 : 0,
            gain_control: options.gainControl ? 1 : 0,
            high_pass_filter: options.highPassFilter ? 1 : 0,
            suppression_level: options.suppression.rawValue
        )
        guard let pointer = cwap_create(&settings) else {
            throw AudioProcessingError("create", reason: "webrtc-audio-processing refused the configuration")
        }
        self.options = options
        processor = Processor(pointer)
    }

    /// Takes what the speakers are about to play: any number of samples, 48 kHz mono (the output
    /// device asks for what it wants; less than a 10 ms frame waits for the next call).
    public func analyzePlayback(_ samples: UnsafeBufferPointer<Int16>) throws(AudioProcessingError) {
        guard options.echoCancellation, let base = samples.baseAddress else { return }
        let processor = processor
        let code: Int32 = lock.withLock { _ in
            var offset = 0
            if !processor.pending.isEmpty {
                let taken = min(Self.frameSamples - processor.pending.count, samples.count)
                processor.pending.append(contentsOf: UnsafeBufferPointer(start: base, count: taken))
                offset = taken
                guard processor.pending.count == Self.frameSamples else { return 0 }
                let code = processor.pending.withUnsafeBufferPointer { pending in
                    cwap_process_reverse(processor.pointer, pending.baseAddress, Self.frameSamples)
                }
                processor.pending.removeAll(keepingCapacity: true)
                if code != 0 { return code }
            }
            while samples.count - offset >= Self.frameSamples {
                let code = cwap_process_reverse(processor.pointer, base + offset, Self.frameSamples)
                if code != 0 { return code }
                offset += Self.frameSamples
            }
            processor.pending.append(
                contentsOf: UnsafeBufferPointer(start: base + offset, count: samples.count - offset)
            )
            return 0
        }
        if code != 0 { throw AudioProcessingError("analyze playback", code: code) }
    }

    /// Processes the microphone's samples in place (any multiple of 480, 48 kHz mono); `delay`
    /// is the estimated time from `analyzePlayback` to the echo reaching the microphone.
    public func processCapture(
        _ samples: UnsafeMutableBufferPointer<Int16>,
        delay: Duration = .milliseconds(50)
    ) throws(AudioProcessingError) {
        try checkLength(samples.count, "process capture")
        guard let base = samples.baseAddress else { return }
        let (seconds, attoseconds) = delay.components
        let whole = seconds.multipliedReportingOverflow(by: 1_000)
        let milliseconds = Int32(
            whole.overflow
                ? (seconds < 0 ? 0 : 500) : max(0, min(500, whole.partialValue + attoseconds / 1_000_000_000_000_000))
        )
        let echo = options.echoCancellation
        let result: (String, Int32) = lock.withLock { _ in
            var offset = 0
            while offset < samples.count {
                if echo {
                    let code = cwap_set_stream_delay_ms(processor.pointer, milliseconds)
                    // A delay outside the library's range is clamped by it and reported as a
                    // warning (positive); only errors (negative) stop processing.
                    if code < 0 { return ("set delay", code) }
                }
                let code = cwap_process(processor.pointer, base + offset, Self.frameSamples)
                if code < 0 { return ("process capture", code) }
                offset += Self.frameSamples
            }
            return ("", 0)
        }
        if result.1 != 0 { throw AudioProcessingError(result.0, code: result.1) }
    }

    /// Processes one captured block (mono, a multiple of 10 ms) and returns the cleaned block.
    public func processCapture(_ frame: AudioFrame, delay: Duration = .milliseconds(50)) throws(AudioProcessingError)
        -> AudioFrame
    {
        guard frame.channels == 1 else {
            throw AudioProcessingError("process capture", reason: "\(frame.channels) channels; only mono")
        }
        var samples = frame.samples
        try samples.withUnsafeMutableBufferPointer { (buffer) throws(AudioProcessingError) in
            try processCapture(buffer, delay: delay)
        }
        do throws(RawMediaError) {
            return try AudioFrame(channels: 1, samples: samples, rtpTimestamp: frame.rtpTimestamp)
        } catch {
            throw AudioProcessingError("process capture", reason: error.description)
        }
    }

    /// Whether the canceller found echo in the last microphone frame (false when it is off).
    public var echoDetected: Bool { lock.withLock { _ in cwap_stream_has_echo(processor.pointer) == 1 } }

    private func checkLength(_ count: Int, _ operation: String) throws(AudioProcessingError) {
        guard count % Self.frameSamples == 0 else {
            throw AudioProcessingError(
                operation,
                reason: "\(count) samples; a multiple of 480 (10 ms at 48 kHz) expected"
            )
        }
    }
}
