import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import Logging
import Synchronization

/// Counters of one sent stream.
public struct SendStatistics: Sendable, Hashable {
    /// Frames handed to the publisher.
    public var frames = 0
    /// Bytes of those frames (after encryption).
    public var bytes = 0
    /// Keyframes produced on request.
    public var keyframeRequests = 0
    /// Frames not sent because encryption failed (no key, say).
    public var encryptionFailures = 0
    /// Simulcast layers of the video (1 without simulcast) and how many are sent now.
    public var simulcastLayers = 1
    public var simulcastLayersSent = 1
}

/// Sends one stream: frames from a source, paced on the media clock, through the end-to-end
/// encryptor (when the call is encrypted) to the publisher.
///
/// Encoders are single-threaded, so keyframe and bitrate requests from the transport (PLI, FIR,
/// REMB arrive on other threads) are recorded in atomics and applied by the sending loop before it
/// asks the source for the next frame.
public final class MediaSender: @unchecked Sendable {
    // @unchecked: `source` is only touched by `run`, which runs once; other state is atomic or locked.
    private let source: any EncodedFrameSource
    private let encryptor: FrameEncryptor?
    private let publisher: Publisher
    private let logger: Logger
    private let keyframeRequested = Atomic<Bool>(false)
    private let requestedBitrate = Atomic<Int>(0)
    private let statistics = Mutex(SendStatistics())

    /// The codec sent.
    public var codec: MediaCodec { source.codec }

    /// Creates a sender; `encryptor` nil sends frames as they are (calls without end-to-end encryption).
    public init(source: any EncodedFrameSource, encryptor: FrameEncryptor?, publisher: Publisher, logger: Logger) {
        self.source = source
        self.encryptor = encryptor
        self.publisher = publisher
        self.logger = logger
        statistics.withLock {
            $0.simulcastLayers = source.simulcastLayers
            $0.simulcastLayersSent = source.simulcastLayersSent
        }
    }

    /// Asks the source for a keyframe before its next frame (thread-safe).
    public func requestKeyframe() { keyframeRequested.store(true, ordering: .relaxed) }

    /// Asks the source to change its bitrate (thread-safe; pass-through sources ignore it).
    public func setBitrate(_ bitsPerSecond: Int) { requestedBitrate.store(bitsPerSecond, ordering: .relaxed) }

    /// The counters so far.
    public var sent: SendStatistics { statistics.withLock { $0 } }

    /// Sends until the source ends or the task is cancelled.
    public func run(pacer: MediaPacer) async throws {
        var pacer = pacer
        while !Task.isCancelled {
            applyRequests()
            try await source.waitUntilReady()
            guard let timed = try source.nextFrame() else { return }
            try await pacer.wait(until: timed.mediaTime)
            send(timed.frame)
        }
    }

    private func applyRequests() {
        if keyframeRequested.exchange(false, ordering: .relaxed) {
            source.requestKeyframe()
            statistics.withLock { $0.keyframeRequests += 1 }
        }
        let bitrate = requestedBitrate.exchange(0, ordering: .relaxed)
        if bitrate > 0 {
            do {
                try source.setBitrate(bitrate)
            } catch {
                logger.debug("bitrate change refused", metadata: ["bitrate": "\(bitrate)", "error": "\(error)"])
            }
            let sent = source.simulcastLayersSent
            let before = statistics.withLock { statistics in
                defer { statistics.simulcastLayersSent = sent }
                return statistics.simulcastLayersSent
            }
            if sent != before {
                logger.info(
                    "simulcast layers sent",
                    metadata: [
                        "sent": "\(sent) of \(source.simulcastLayers)", "estimate": "\(bitrate / 1000) kbit/s",
                    ]
                )
            }
        }
    }

    private func send(_ frame: EncodedFrame) {
        var outgoing = frame
        if let encryptor {
            do {
                outgoing = try encryptor.encrypt(frame)
            } catch {
                statistics.withLock { $0.encryptionFailures += 1 }
                logger.debug(
                    "frame not sent: encryption failed",
                    metadata: ["codec": "\(frame.codec)", "error": "\(error)"]
                )
                return
            }
        }
        publisher.send(outgoing)
        statistics.withLock {
            $0.frames += 1
            $0.bytes += outgoing.data.count
        }
    }
}

/// What the receive pipeline delivers.
public enum ReceivedMedia: Sendable {
    /// A frame in the clear (decrypted, or from a call without end-to-end encryption).
    case frame(SubscribedFrame)
    /// A frame that did not decrypt; it is dropped, and reported with the reason.
    case undecryptable(feedID: UInt64, mid: String, codec: MediaCodec, reason: DecryptFailureReason)
}

/// Receives every subscribed stream and decrypts it: one decryptor per stream, so failures are
/// counted per sender. Frames that do not decrypt never leave this stage as media.
public final class MediaReceiver: Sendable {
    /// Decrypted frames and decryption failures, in arrival order (stays empty for a receiver
    /// created with a `deliver` closure).
    public let media: AsyncStream<ReceivedMedia>
    private let continuation: AsyncStream<ReceivedMedia>.Continuation
    private let direct: DirectDecryption

    /// Creates a receiver fed by ``handle(_:)``: pass that as the subscriber's frame handler
    /// (`Subscriber.subscribe(frameHandler:)`), so frames are decrypted on the receive thread and
    /// reach ``media`` without the extra hop through `Subscriber.frames`.
    public convenience init(crypto: CallFrameCrypto?) {
        self.init(crypto: crypto, deliver: nil)
    }

    /// Creates a receiver that passes every decrypted frame (or decryption failure) to `deliver`
    /// synchronously, on the thread that calls ``handle(_:)`` (the subscriber's receive thread),
    /// until ``stop()``; ``media`` stays empty. `deliver` must return quickly.
    ///
    /// This saves the hop per frame that reading ``media`` from a task costs: a wakeup of a
    /// cooperative thread for every audio and video frame, a fixed cost of every received feed.
    public init(crypto: CallFrameCrypto?, deliver: (@Sendable (ReceivedMedia) -> Void)?) {
        (media, continuation) = AsyncStream.makeStream(of: ReceivedMedia.self, bufferingPolicy: .unbounded)
        direct = DirectDecryption(crypto: crypto, continuation: continuation, deliver: deliver)
    }

    /// Decrypts one frame and passes it on (thread-safe; for the subscriber's frame handler).
    @Sendable public func handle(_ received: SubscribedFrame) {
        direct.handle(received)
    }

    /// Stops decrypting and delivering.
    public func stop() {
        direct.stop()
        continuation.finish()
    }
}

/// The synchronous path of ``MediaReceiver``: one decryptor per stream, called on the receive thread.
private final class DirectDecryption: Sendable {
    private let crypto: CallFrameCrypto?
    private let continuation: AsyncStream<ReceivedMedia>.Continuation
    /// Where media goes instead of `continuation`, if set.
    private let deliver: (@Sendable (ReceivedMedia) -> Void)?
    private let decryptors = Mutex<[StreamKey: FrameDecryptor]>([:])

    /// One decryptor per sender stream. A struct key, not an interpolated string: this lookup
    /// runs for every received frame.
    private struct StreamKey: Hashable {
        var feedID: UInt64
        var mid: String
        var codec: MediaCodec
    }
    /// Set by `stop`: `deliver` is not called afterwards (a finished continuation drops by itself).
    private let stopped = Atomic<Bool>(false)

    init(
        crypto: CallFrameCrypto?,
        continuation: AsyncStream<ReceivedMedia>.Continuation,
        deliver: (@Sendable (ReceivedMedia) -> Void)?
    ) {
        self.crypto = crypto
        self.continuation = continuation
        self.deliver = deliver
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
    }

    private func emit(_ media: ReceivedMedia) {
        guard let deliver else {
            continuation.yield(media)
            return
        }
        guard !stopped.load(ordering: .acquiring) else { return }
        deliver(media)
    }

    func handle(_ received: SubscribedFrame) {
        guard let crypto else {
            emit(.frame(received))
            return
        }
        let key = StreamKey(feedID: received.feedID, mid: received.mid, codec: received.frame.codec)
        let decryptor = decryptors.withLock { decryptors in
            if let existing = decryptors[key] { return existing }
            let made = crypto.makeDecryptor(
                codec: received.frame.codec,
                senderID: received.feedID,
                cipher: OpenSSLFrameCipher.self
            )
            decryptors[key] = made
            return made
        }
        do throws(FrameDecryptionError) {
            var clear = received
            (clear.frame, clear.keyEpoch) = try decryptor.decryptReportingEpoch(received.frame)
            emit(.frame(clear))
        } catch {
            emit(
                .undecryptable(
                    feedID: received.feedID,
                    mid: received.mid,
                    codec: received.frame.codec,
                    reason: error.reason
                )
            )
        }
    }
}
