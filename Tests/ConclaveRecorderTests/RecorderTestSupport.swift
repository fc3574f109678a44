import ConclaveAV
import ConclaveCore
import ConclaveRTP
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import Logging
import RecordingTestBed
import Testing

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func testLogger() -> Logger {
    var logger = Logger(label: "recorder-test")
    logger.logLevel = .critical
    return logger
}

func makeRecorder(
    directory: URL,
    start: Int64,
    timing: RecorderTiming = RecorderTiming()
) throws -> CallRecorder {
    try CallRecorder(
        configuration: .init(
            directory: directory.path,
            callID: "4242",
            room: 1234,
            janusURL: "ws://127.0.0.1:8188",
            recorderVersion: "test",
            cryptoFormat: "ecall",
            keyEpochs: [0],
            timing: timing
        ),
        startTime: start,
        logger: testLogger()
    )
}

/// A value handed from one thread to another.
private final class ThreadResult<T>: @unchecked Sendable {
    let lock = NSLock()
    var value: T?
}

/// What a call made on another thread returned, or nil when it had not returned after `limit`
/// (it blocked: on a FIFO, say). The thread is left behind; the caller unblocks it.
func returnsPromptly<T: Sendable>(within limit: Duration, _ body: @escaping @Sendable () -> T) -> T? {
    let result = ThreadResult<T>()
    let done = DispatchSemaphore(value: 0)
    Thread {
        let value = body()
        result.lock.withLock { result.value = value }
        done.signal()
    }.start()
    let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
    guard done.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success else { return nil }
    return result.lock.withLock { result.value }
}

/// Opens a FIFO for writing and closes it, so that a reader blocked opening it gets end of file.
func unblockFIFO(_ path: String) {
    let descriptor = open(path, O_WRONLY | O_NONBLOCK)
    if descriptor >= 0 { close(descriptor) }
}

/// `seconds` of real Opus frames of one participant, with their arrival times.
func opusFrames(seconds: Int, start: Int64) throws -> [(frame: EncodedFrame, arrival: Int64)] {
    let publisher = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: seconds, withVideo: false)
    return try publisher.events(recordingStart: start).compactMap { event in
        guard case .frame(_, .audio, let frame, let arrival) = event else { return nil }
        return (frame, arrival)
    }
}

/// The packets of a media file per kind, and the time from the first to the last.
func mediaContents(_ path: String) throws -> (packets: Int, span: Double) {
    let demuxer = try MediaDemuxer(path: path)
    var count = 0
    var first: Duration?
    var last: Duration?
    while let packet = try demuxer.readPacket() {
        count += 1
        first = min(first ?? packet.presentationTime, packet.presentationTime)
        last = max(last ?? packet.presentationTime, packet.presentationTime)
    }
    guard let first, let last else { return (count, 0) }
    return (count, seconds(last - first))
}
