import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import ConclaveOpus
import Foundation
import JanusClient
import Logging
import Synchronization

/// A test-bed participant of a call: pattern video and tone audio, encrypted with the call key,
/// sent in real time from a task until ``stop()`` or the end of its frames.
///
/// Every frame is encoded before the first is sent, and with `sealAhead` encrypted too, so that
/// sending costs only the transport: a test with many participants spends its cores on what it
/// tests. A call whose key rotates encrypts each frame as it goes out, under the key current then.
final class CallPublisher: Sendable {
    let publisher: Publisher
    /// The video and audio frames it sends in all.
    let videoFrames: Int
    let audioFrames: Int
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    private init(publisher: Publisher, videoFrames: Int, audioFrames: Int) {
        self.publisher = publisher
        self.videoFrames = videoFrames
        self.audioFrames = audioFrames
    }

    static func start(
        on connection: JanusConnection,
        room: UInt64,
        display: String,
        crypto: CallFrameCrypto?,
        seconds: Int,
        address: String,
        frameRate: Int = 15,
        sealAhead: Bool = true,
        logger: Logger
    ) async throws -> CallPublisher {
        let codec = MediaCodec.h264
        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: display,
                video: codec,
                endToEndEncrypted: crypto != nil,
                transport: .init(localAddresses: [address])
            ),
            logger: logger
        )
        let video = EncodingVideoSource(
            raw: try PatternSource(width: 160, height: 120, frameRate: frameRate, frameLimit: seconds * frameRate),
            encoder: try VideoEncoderSettings(codec: codec, width: 160, height: 120, bitrate: 150_000).makeEncoder()
        )
        var frames: [TimedFrame] = []
        var index = 0
        let videoFrames: Int
        while true {
            // A keyframe every second: a recorder that joins (or takes over) late waits little.
            if index % frameRate == 0 { video.requestKeyframe() }
            guard let timed = try video.nextFrame() else { break }
            frames.append(timed)
            index += 1
        }
        videoFrames = frames.count
        let audio = EncodingAudioSource(raw: try ToneSource(frameLimit: seconds * 50), encoder: try OpusAudioEncoder())
        while let timed = try audio.nextFrame() { frames.append(timed) }
        frames.sort { $0.mediaTime < $1.mediaTime }
        let videoEncryptor = crypto?.makeEncryptor(
            codec: codec,
            senderID: publisher.feedID,
            cipher: OpenSSLFrameCipher.self
        )
        let audioEncryptor = crypto?.makeEncryptor(
            codec: .opus,
            senderID: publisher.feedID,
            cipher: OpenSSLFrameCipher.self
        )
        let seal = { @Sendable (frame: EncodedFrame) -> EncodedFrame? in
            let encryptor = frame.codec == .opus ? audioEncryptor : videoEncryptor
            return try? encryptor?.encrypt(frame) ?? frame
        }
        let prepared = frames.compactMap { timed -> (time: Duration, frame: EncodedFrame)? in
            guard sealAhead else { return (timed.mediaTime, timed.frame) }
            return seal(timed.frame).map { (timed.mediaTime, $0) }
        }
        let result = CallPublisher(
            publisher: publisher,
            videoFrames: videoFrames,
            audioFrames: frames.count - videoFrames
        )
        let sender = Task {
            let clock = ContinuousClock()
            let start = clock.now
            for (time, frame) in prepared {
                // Pacing, not synchronisation: a frame goes out when its capture time comes.
                do {
                    try await clock.sleep(until: start.advanced(by: time), tolerance: .milliseconds(2))
                } catch {
                    return
                }
                if sealAhead {
                    publisher.send(frame)
                } else if let sealed = seal(frame) {
                    publisher.send(sealed)
                }
            }
        }
        result.task.withLock { $0 = sender }
        return result
    }

    /// Returns once the last frame has been sent (or sending was stopped).
    func waitUntilSent() async {
        await task.withLock { $0 }?.value
    }

    /// Stops sending and leaves the room.
    func stop() async {
        task.withLock { $0?.cancel() }
        await publisher.leave()
    }
}
