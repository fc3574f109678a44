import ConclaveCore
import ConclaveTestSupport
import Logging
import Synchronization

@testable import ConclaveE2EE

func hex(_ text: String) -> [UInt8] {
    HexCoding.decode(text.filter { !$0.isWhitespace })!
}

/// A plausible H264 NAL unit: 4-byte start code, header byte, payload without zero bytes.
func nalUnit(header: UInt8, size: Int, using rng: inout SeededGenerator) -> [UInt8] {
    [0, 0, 0, 1, header] + (0..<size).map { _ in UInt8.random(in: 1...255, using: &rng) }
}

/// An IDR access unit: SPS, PPS, one IDR slice.
func idrFrame(_ rng: inout SeededGenerator, sliceSize: Int = 2_000) -> [UInt8] {
    nalUnit(header: 0x67, size: 12, using: &rng) + nalUnit(header: 0x68, size: 4, using: &rng)
        + nalUnit(header: 0x65, size: sliceSize, using: &rng)
}

/// A P frame: one non-IDR slice.
func pFrame(_ rng: inout SeededGenerator, size: Int = 600) -> [UInt8] {
    nalUnit(header: 0x41, size: size, using: &rng)
}

/// Log messages captured for assertions.
final class LogCapture: Sendable {
    let messages = Mutex<[(Logger.Level, String)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in CapturingHandler(capture: self) }
    }

    func count(level: Logger.Level, containing text: String) -> Int {
        messages.withLock { $0.filter { $0.0 == level && $0.1.contains(text) }.count }
    }

    var all: String { messages.withLock { $0.map { "\($0.1)" }.joined(separator: "\n") } }
}

struct CapturingHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let extra = (event.metadata ?? [:]).map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        capture.messages.withLock { $0.append((event.level, "\(event.message) \(extra)")) }
    }
}

/// A call with a manual clock and a key installed at epoch 0.
func makeCall(
    format: FrameCryptoFormat,
    key: CallKey? = CallKey.random(),
    clock: ManualTimeSource = ManualTimeSource(),
    logger: Logger = Logger(label: "test"),
    onKeyNeeded: (@Sendable (KeyNeededEvent) -> Void)? = nil
) -> CallFrameCrypto {
    let ring = CallKeyRing(clock: clock)
    if let key { ring.install(key, epoch: 0) }
    return CallFrameCrypto(callID: 42, format: format, keyRing: ring, logger: logger, onKeyNeeded: onKeyNeeded)
}

func frame(_ codec: MediaCodec, _ data: [UInt8], keyframe: Bool = false) -> EncodedFrame {
    EncodedFrame(codec: codec, data: data, rtpTimestamp: 1234, isKeyframe: keyframe)
}
