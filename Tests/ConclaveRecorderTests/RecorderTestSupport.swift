import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import ConclaveRTP
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import Logging
import RecordingTestBed
import Testing

/// What a recorded file shows when decoded: pattern frame numbers, flashes and beeps, with times
/// on the call timeline (the file's start offset plus the packet's time in the file).
struct RecordedFileAnalysis {
    var frameNumbers: [Int] = []
    var flashTimes: [Double] = []
    var beepTimes: [Double] = []
    var audioPackets = 0

    init(path: String, startOffset: Double) throws {
        let demuxer = try MediaDemuxer(path: path)
        if let video = demuxer.firstStream(of: .video) {
            let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: video)
            var outputs: [MediaStreamDecoder.Output] = []
            while let packet = try demuxer.readPacket() {
                guard packet.streamIndex == video.index else { continue }
                outputs += try decoder.decode(packet)
            }
            outputs += try decoder.decode(nil)
            for case .video(let picture, let time) in outputs {
                guard let reading = PatternReader.read(picture) else {
                    frameNumbers.append(-1)
                    continue
                }
                frameNumbers.append(reading.frameNumber)
                if reading.isFlash { flashTimes.append(startOffset + seconds(time)) }
            }
        }
        try demuxer.rewind()
        if let audio = demuxer.firstStream(of: .audio) {
            let times = try FFmpeg.audioPacketTimes(path)
            let opus = try OpusAudioDecoder(channels: 1)
            var detector = BeepDetector()
            var index = 0
            var fed = 0
            var packetStarts: [(sample: Int, time: Double)] = []
            while let packet = try demuxer.readPacket() {
                guard packet.streamIndex == audio.index else { continue }
                let pcm = try opus.decode(
                    EncodedFrame(codec: .opus, data: packet.data, rtpTimestamp: 0, isKeyframe: true)
                )
                let time = index < times.count ? times[index] : 0
                packetStarts.append((fed, time))
                for onset in detector.feed(pcm.samples, channels: 1) {
                    // The decoder lags the encoder by its lookahead (312 samples of pre-skip): the
                    // onset is found in the output of one packet and happened 312 samples earlier.
                    let start = packetStarts.last { $0.sample <= onset } ?? packetStarts[0]
                    beepTimes.append(startOffset + start.time + Double(onset - start.sample - 312) / 48_000)
                }
                fed += pcm.samplesPerChannel
                index += 1
            }
            audioPackets = index
        }
    }
}

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
