import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclavePeerConnection
import ConclaveTestSupport
import JanusClient
import JanusProtocol
import Logging
import Synchronization
import Testing

/// Records everything a call fans out.
final class CollectingObserver: CallMediaObserver {
    struct Seen {
        var joined: [UInt64] = []
        var left: [UInt64] = []
        var frames: [UInt64: [MediaCodec: [[UInt8]]]] = [:]
        var undecryptable: [UInt64: [DecryptFailureReason]] = [:]
        var undecryptableCodecs: [UInt64: [MediaCodec]] = [:]
        var senderReports = 0
    }

    let seen = Mutex(Seen())

    /// Counts the changes to `seen`, and holds the waits to wake at the next one.
    private struct Changes {
        var count = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let changes = Mutex(Changes())

    func participantJoined(feedID: UInt64, display: String?) { update { $0.joined.append(feedID) } }
    func participantLeft(feedID: UInt64) { update { $0.left.append(feedID) } }
    func senderReport(_ report: SubscribedSenderReport) { update { $0.senderReports += 1 } }
    func received(_ media: ReceivedMedia) {
        update { seen in
            switch media {
            case .frame(let frame):
                seen.frames[frame.feedID, default: [:]][frame.frame.codec, default: []].append(frame.frame.data)
            case .undecryptable(let feed, _, let codec, let reason):
                seen.undecryptable[feed, default: []].append(reason)
                seen.undecryptableCodecs[feed, default: []].append(codec)
            }
        }
    }

    /// Waits until `condition` holds, at most `limit`. The condition is checked again each time
    /// the observer hears something (not on a timer), so the wait ends the moment it holds.
    func wait(for limit: Duration = .seconds(10), until condition: (Seen) -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let count = changes.withLock { $0.count }
            if seen.withLock({ condition($0) }) { return }
            await withDeadline(deadline - ContinuousClock.now) { await self.nextChange(after: count) }
            try Task.checkCancellation()
        }
    }

    private func update(_ body: (inout Seen) -> Void) {
        seen.withLock { body(&$0) }
        let waiters = changes.withLock { changes in
            changes.count += 1
            defer { changes.waiters = [:] }
            return changes.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns after the first change past `count`, or when the task is cancelled (by
    /// `withDeadline`).
    private func nextChange(after count: Int) async {
        let id = changes.withLock { changes in
            changes.nextWaiter += 1
            return changes.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Under the lock `update` takes: a change or a cancellation before this point ends
                // the wait here, one after it finds the continuation registered.
                let waiting = changes.withLock { changes -> Bool in
                    guard changes.count == count, !Task.isCancelled else { return false }
                    changes.waiters[id] = continuation
                    return true
                }
                if !waiting { continuation.resume() }
            }
        } onCancel: {
            changes.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// Joins `room` as a listener that does not publish, and follows it with a subscription whose
/// observer collects everything that arrives.
func followRoom(
    _ room: UInt64,
    on connection: JanusConnection,
    transport: MediaTransport.Configuration,
    crypto: CallFrameCrypto?,
    logger: Logger
) async throws -> (RoomListener, RoomSubscription, CollectingObserver) {
    let listener = try await RoomListener.join(on: try await connection.createSession(), room: room, display: nil)
    let observer = CollectingObserver()
    let subscription = RoomSubscription(
        session: try await connection.createSession(),
        configuration: .init(room: room, ownFeedID: listener.joined.id, crypto: crypto, transport: transport),
        initialPublishers: listener.joined.publishers,
        roomEvents: listener.roomEvents,
        observers: [observer],
        logger: logger
    )
    return (listener, subscription, observer)
}

@Suite(.serialized) struct RoomSubscriptionTests {
    /// One encrypted publisher and what it sent.
    struct Sender {
        let publisher: Publisher
        let crypto: CallFrameCrypto
        let video: MediaCodec
        var sent: [MediaCodec: [[UInt8]]] = [:]

        /// Sends `count` audio and video frames numbered from `start` (a keyframe every 30th);
        /// `counted` false leaves them out of ``sent``, `keyframes` makes every video frame one.
        mutating func send(
            frames count: Int,
            from start: Int,
            using random: inout some RandomNumberGenerator,
            counted: Bool = true,
            keyframes: Bool = false
        ) {
            let audio = crypto.makeEncryptor(codec: .opus, senderID: publisher.feedID)
            let videoEncryptor = crypto.makeEncryptor(codec: video, senderID: publisher.feedID)
            for index in start..<(start + count) {
                let opus = SyntheticFrames.opus(using: &random)
                let shape = keyframes ? 0 : index
                let frame =
                    video == .vp8
                    ? SyntheticFrames.vp8(shape, size: 2000, using: &random)
                    : SyntheticFrames.h264(shape, size: 2000, using: &random)
                let clearAudio = EncodedFrame(
                    codec: .opus,
                    data: opus,
                    rtpTimestamp: UInt32(index * 960),
                    isKeyframe: true
                )
                let clearVideo = EncodedFrame(
                    codec: video,
                    data: frame,
                    rtpTimestamp: UInt32(index * 3000),
                    isKeyframe: shape % 30 == 0
                )
                publisher.send(try! audio.encrypt(clearAudio))
                publisher.send(try! videoEncryptor.encrypt(clearVideo))
                guard counted else { continue }
                sent[.opus, default: []].append(opus)
                sent[video, default: []].append(frame)
            }
        }
    }

    @Test func followsPublishersDecryptsAndRejectsForeignKeys() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))

        let callKey = CallKey.random()
        func crypto(_ key: CallKey) -> CallFrameCrypto {
            let crypto = CallFrameCrypto(callID: 7, format: .ecall, logger: logger)
            crypto.keyRing.install(key, epoch: 0)
            return crypto
        }
        func publish(_ display: String, video: MediaCodec, key: CallKey) async throws -> Sender {
            let publisher = try await Publisher.publish(
                on: try await connection.createSession(),
                configuration: .init(
                    room: room,
                    display: display,
                    video: video,
                    endToEndEncrypted: true,
                    transport: transport
                ),
                logger: logger
            )
            return Sender(publisher: publisher, crypto: crypto(key), video: video)
        }

        var alice = try await publish("1:Alice", video: .h264, key: callKey)
        var bob = try await publish("2:Bob", video: .vp8, key: callKey)

        // The recorder's view: a listener that does not publish, holding the call key.
        let (listener, subscription, observer) = try await followRoom(
            room,
            on: connection,
            transport: transport,
            crypto: crypto(callKey),
            logger: logger
        )
        try await observer.wait { $0.joined.count == 2 }
        #expect(Set(observer.seen.withLock { $0.joined }) == [alice.publisher.feedID, bob.publisher.feedID])
        // Frames sent before the subscriber's DTLS completes would be lost: wait for its keys.
        let subscriber = try #require(subscription.subscriber)
        try await subscriber.transport.waitUntilConnected(within: .seconds(10))

        var random = SystemRandomNumberGenerator()
        alice.send(frames: 30, from: 0, using: &random)
        bob.send(frames: 30, from: 0, using: &random)

        // Someone joins later with a key the listener does not hold: the subscription grows
        // (a renegotiation), and that publisher's encrypted frames are reported, never delivered.
        var mallory = try await publish("3:Mallory", video: .h264, key: CallKey.random())
        try await observer.wait { $0.joined.count == 3 }
        // A participant is reported joined only once Janus has accepted the renegotiated answer
        // (`Subscriber.add`), which then carries Mallory's streams. Still connected, over the
        // same transport.
        #expect(subscriber.streams.contains { $0.feedID == mallory.publisher.feedID })
        try await subscriber.transport.waitUntilConnected(within: .seconds(10))
        // Janus starts relaying streams that a renegotiation added a moment after it accepted the
        // answer, and says nothing when (under load, Mallory's first audio packet and keyframe did
        // not come). So Mallory first sends uncounted keyframes, one per 20 ms, until the listener
        // reports both her audio and her video; the counted frames come after.
        func malloryRelayed(_ seen: CollectingObserver.Seen) -> Bool {
            Set(seen.undecryptableCodecs[mallory.publisher.feedID] ?? []).isSuperset(of: [.opus, .h264])
        }
        var warmUp = 0
        while !observer.seen.withLock({ malloryRelayed($0) }) {
            try #require(warmUp < 250, "Janus never relayed Mallory's audio and video")
            mallory.send(frames: 1, from: warmUp, using: &random, counted: false, keyframes: true)
            warmUp += 1
            try await observer.wait(for: .milliseconds(20)) { malloryRelayed($0) }
        }
        let reportedBefore = observer.seen.withLock { $0.undecryptable[mallory.publisher.feedID]?.count ?? 0 }
        mallory.send(frames: 30, from: warmUp, using: &random)
        alice.send(frames: 30, from: 30, using: &random)

        try await observer.wait {
            // Audio and video are separate streams with jitter buffers of their own: wait for both.
            $0.frames[alice.publisher.feedID]?[.h264]?.count == 60
                && $0.frames[alice.publisher.feedID]?[.opus]?.count == 60
                && $0.frames[bob.publisher.feedID]?[.vp8]?.count == 30
                && $0.frames[bob.publisher.feedID]?[.opus]?.count == 30
                && ($0.undecryptable[mallory.publisher.feedID]?.count ?? 0) >= reportedBefore + 60
        }

        // Bob leaves: the observer hears it.
        await bob.publisher.leave()
        try await observer.wait { $0.left.contains(bob.publisher.feedID) }

        let seen = observer.seen.withLock { $0 }
        let received = await subscriber.statistics
        let unrouted = await subscriber.unroutedPackets
        let counters = await subscriber.transport.counters
        for sender in [alice, bob] {
            for (codec, frames) in sender.sent {
                let got = seen.frames[sender.publisher.feedID]?[codec] ?? []
                #expect(
                    got == frames,
                    """
                    \(codec) of \(sender.publisher.feedID): \(got.count) of \(frames.count) frames, \
                    missing \(frames.indices.filter { !got.contains(frames[$0]) }); sent \(sender.publisher.statistics); \
                    received \(received)
                    """
                )
            }
        }
        #expect(seen.frames[mallory.publisher.feedID] == nil, "nothing of a foreign key's ciphertext is delivered")
        #expect(
            // Every counted frame, and no more than the warm-up's that may still have been on
            // their way when the count started.
            (60...60 + 2 * warmUp).contains(
                (seen.undecryptable[mallory.publisher.feedID]?.count ?? 0) - reportedBefore
            ),
            "\(seen.undecryptableCodecs[mallory.publisher.feedID] ?? []); sent \(mallory.publisher.statistics); received \(received); unrouted \(unrouted); \(counters)"
        )
        #expect(seen.undecryptable[alice.publisher.feedID] == nil)
        #expect(seen.left == [bob.publisher.feedID])

        await subscription.close()
        await listener.leave()
        await alice.publisher.leave()
        await mallory.publisher.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
