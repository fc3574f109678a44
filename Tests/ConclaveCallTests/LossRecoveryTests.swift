import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclavePeerConnection
import ConclaveRTP
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import JanusClient
import JanusTestBed
import Logging
import Synchronization
import Testing

/// Wraps a source and keeps every frame it produced, to compare with what arrives.
final class RecordingSource: EncodedFrameSource {
    let inner: any EncodedFrameSource
    let frames = Mutex<[EncodedFrame]>([])
    init(_ inner: any EncodedFrameSource) { self.inner = inner }
    var codec: MediaCodec { inner.codec }
    func nextFrame() throws -> TimedFrame? {
        let next = try inner.nextFrame()
        if let next { frames.withLock { $0.append(next.frame) } }
        return next
    }
    func requestKeyframe() { inner.requestKeyframe() }
    func setBitrate(_ bitsPerSecond: Int) throws { try inner.setBitrate(bitsPerSecond) }
}

/// Packet loss on the test bed link (nftables in Janus's namespace, or the link taken down).
@Suite(.serialized) struct LossRecoveryTests {
    struct Call {
        let bed: JanusTestBed
        let connection: JanusConnection
        let publisher: Publisher
        let sender: MediaSender
        let source: RecordingSource
        let observer: CollectingObserver
        let subscription: RoomSubscription
        let listener: RoomListener
        let keyframes: Task<Void, Never>

        func close() async {
            keyframes.cancel()
            await subscription.close()
            await listener.leave()
            await publisher.leave()
            await connection.close()
            bed.stop()
        }
    }

    /// A private Janus with one VP8 publisher (the pattern, really encoded) and a subscriber.
    func makeCall(frames: Int) async throws -> Call {
        let bed = try TestJanus.start()
        var logger = Logger(label: "test")
        logger.logLevel =
            ProcessInfo.processInfo.environment["CONCLAVE_TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .error
        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: 99, videoCodecs: ["vp8"]))
        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(room: room, display: "1:Sender", audio: nil, video: .vp8, transport: transport),
            logger: logger
        )
        let source = RecordingSource(
            EncodingVideoSource(
                raw: try PatternSource(width: 640, height: 480, frameRate: 30, frameLimit: frames),
                encoder: try VideoEncoderSettings(codec: .vp8, bitrate: 1_000_000).makeEncoder()
            )
        )
        let sender = MediaSender(source: source, encryptor: nil, publisher: publisher, logger: logger)
        let keyframes = Task { for await _ in publisher.keyframeRequests { sender.requestKeyframe() } }
        let (listener, subscription, observer) = try await followRoom(
            room,
            on: connection,
            transport: transport,
            crypto: nil,
            logger: logger
        )
        try await observer.wait { $0.joined.count == 1 }
        try await #require(subscription.subscriber).transport.waitUntilConnected(within: .seconds(10))
        return Call(
            bed: bed,
            connection: connection,
            publisher: publisher,
            sender: sender,
            source: source,
            observer: observer,
            subscription: subscription,
            listener: listener,
            keyframes: keyframes
        )
    }

    /// 5% of the packets arriving at Janus are lost: publisher media (Janus NACKs the publisher)
    /// and our NACKs to Janus (we retry). Loss in both directions at once exceeds what Janus 1.1.2
    /// recovers (it NACKs a publisher at most twice and retransmits to a subscriber at most once per
    /// 200 ms), so that case is measured by bench/transport instead.
    ///
    /// What is measured is 240 frames of a stream that is already flowing: the loss starts once
    /// the subscriber has video and ends once the 240 frames after the first 30 are sent; 30 more
    /// follow without loss. Recovery needs packets around a loss, on both sides:
    /// - At the start, a packet lost before Janus has seen any packet of the stream is never known
    ///   to be missing (neither Janus nor we know where the stream begins); the subscriber asks for
    ///   a keyframe instead, which costs the frames until it arrives (about 9 when this happened
    ///   with the loss on from the first packet).
    /// - At the end, Janus sends its retransmission requests to a publisher as later packets of
    ///   the stream arrive (the second about 155 ms after the first), so a packet lost in the
    ///   stream's last frames gets one request at most. With the loss running to the end, 1 run
    ///   in 8 lost a tail packet this way, and one CI run lost 3.
    /// A packet is lost for good only when it and both of Janus's requests for it are lost
    /// (0.05³ of about 1200 packets: 0.15 a run), hence at most one.
    @Test func nackRecoversVideoUnderFivePercentRandomLoss() async throws {
        let head = 30
        let measuredFrames = 240
        let call = try await makeCall(frames: head + measuredFrames + 30)
        let sender = call.sender
        async let sending: Void = sender.run(pacer: MediaPacer(mode: .realTime))
        try await call.observer.wait { ($0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0) > 0 }
        try call.bed.dropPackets(percent: 5, direction: .toJanus)
        // The loss ends once the measured frames are sent, so that the tail's packets keep
        // revealing gaps to Janus, which asks the publisher again only as later packets arrive.
        let lossEnds = ContinuousClock.now + .seconds(20)
        while call.source.frames.withLock({ $0.count }) < head + measuredFrames {
            guard ContinuousClock.now < lossEnds else {
                try call.bed.clearImpairment()
                Issue.record("the measured frames were not sent within 20 s")
                return await call.close()
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        try call.bed.clearImpairment()
        try await sending
        try await Task.sleep(for: .seconds(1))  // last retransmissions

        let sent = call.source.frames.withLock { $0.map(\.data) }
        let received = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8] ?? [] }
        let sentSet = Set(sent)
        let receivedSet = Set(received)
        let measured = Array(sent[head..<(head + measuredFrames)])
        let missingFrames = measured.indices.filter { !receivedSet.contains(measured[$0]) }.map { $0 + head }
        let missingAnywhere = sent.indices.filter { !receivedSet.contains(sent[$0]) }
        let statistics = try await #require(call.subscription.subscriber).statistics.values.first
        print(
            "5% loss: \(measured.count - missingFrames.count) of \(measured.count) frames; "
                + "lost \(statistics?.lost ?? -1), NACKed \(statistics?.nackedPackets ?? 0), "
                + "recovered \(statistics?.recovered ?? 0), frames not delivered: \(missingFrames) "
                + "(of all \(sent.count) sent: \(missingAnywhere))"
        )
        let unrecovered = statistics?.lost ?? Int64.max
        #expect(
            unrecovered <= 1,
            "NACK recovers every lost packet but one whose two requests were lost too (\(unrecovered) lost)"
        )
        #expect(
            Double(measured.count - missingFrames.count) >= 0.99 * Double(measured.count),
            "at least 99% of the frames arrive; missing: \(missingFrames)"
        )
        #expect(received.allSatisfy { sentSet.contains($0) }, "every delivered frame is one that was sent")
        #expect((statistics?.nackedPackets ?? 0) > 0, "loss was really there and NACKed")
        await call.close()
    }

    @Test func keyframeRequestRestoresVideoAfterAnOutage() async throws {
        let call = try await makeCall(frames: 180)
        let sender = call.sender
        async let sending: Void = sender.run(pacer: MediaPacer(mode: .realTime))
        try await Task.sleep(for: .seconds(2))
        try call.bed.setLink(up: false)
        try await Task.sleep(for: .seconds(1))  // ~30 frames lost: beyond what NACK history serves
        let before = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0 }
        try call.bed.setLink(up: true)
        let restored = ContinuousClock.now

        // The first frame after the outage is a keyframe (delta frames are held back until one
        // arrives), and everything from it decodes.
        try await call.observer.wait { ($0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0) > before }
        let recovery = ContinuousClock.now - restored
        try await sending
        let frames = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8] ?? [] }
        let resumed = Array(frames[before...])
        print("outage: video back \(recovery) after the link returned; \(resumed.count) frames after it")
        #expect(VP8Frame.isKeyframe(try #require(resumed.first)), "video resumes at a keyframe")
        #expect(recovery < .seconds(3), "a keyframe request brings video back promptly (took \(recovery))")
        let decoder = try VP8Decoder()
        for (index, data) in resumed.enumerated() {
            let picture = try decoder.decode(
                EncodedFrame(codec: .vp8, data: data, rtpTimestamp: UInt32(index * 3000), isKeyframe: index == 0)
            )
            #expect(picture != nil, "frame \(index) after the outage decodes")
        }
        #expect(call.sender.sent.keyframeRequests > 0, "the publisher was asked for a keyframe")
        await call.close()
    }

    /// libnice checks consent (RFC 7675) with one binding request every 4 to 6 s, never
    /// retransmitted, and declares it lost 10 s after the last answer; at 5% loss one lost request
    /// failed ICE about half the time, and the call restarted ICE with half a second of silence.
    /// Here every binding request toward Janus is dropped (media and DTLS pass) until both
    /// PeerConnections have lost consent once: each renews it on the same pair, since media from
    /// Janus still arrives, and none fails. Once the requests pass again consent is answered,
    /// and the video arrives whole.
    @Test func consentLostWhileMediaFlowsIsRenewedWithoutAnInterruption() async throws {
        let call = try await makeCall(frames: 540)
        let sender = call.sender
        async let sending: Void = sender.run(pacer: MediaPacer(mode: .realTime))
        try await call.observer.wait { ($0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0) >= 30 }
        let subscriber = try #require(call.subscription.subscriber)
        let agents = [call.publisher.transport.ice, subscriber.transport.ice]

        try call.bed.dropSTUNBindingRequests(direction: .toJanus)
        let blocked = ContinuousClock.now
        // Consent is lost 10 s after the last answer, which came at most 6 s before the block.
        let deadline = blocked + .seconds(20)
        for agent in agents {
            while ContinuousClock.now < deadline {
                let generation = agent.connectivityChanges.generation
                if agent.consentRenewals > 0 || agent.state == .failed { break }
                _ = try await agent.connectivityChanges.wait(after: generation, until: deadline)
            }
        }
        try call.bed.clearImpairment()
        let renewals = agents.map(\.consentRenewals)
        print("consent: renewed \(renewals) (publisher, subscriber) \(ContinuousClock.now - blocked) into the block")
        #expect(renewals.allSatisfy { $0 >= 1 }, "both PeerConnections renewed their lost consent: \(renewals)")

        try await sending
        let sent = call.source.frames.withLock { $0.count }
        try await call.observer.wait { ($0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0) >= sent - 5 }
        let received = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0 }
        #expect(received >= sent - 5, "video arrives whole: \(received) of \(sent) frames")
        #expect(call.publisher.transport.state == .connected)
        #expect(subscriber.transport.state == .connected)
        await call.close()
    }

    @Test func iceRestartAfterAnOutageResumesMediaOnNewCredentials() async throws {
        // 8 s of video: 4.5 s of it after the link returns, so that the 60 frames asked for below
        // still come when the two restarts and the keyframe take 2 s on a loaded machine.
        let call = try await makeCall(frames: 240)
        let sender = call.sender
        async let sending: Void = sender.run(pacer: MediaPacer(mode: .realTime))
        try await Task.sleep(for: .seconds(1.5))
        let subscriber = try #require(call.subscription.subscriber)
        let publisherBefore = try await call.publisher.transport.ice.localCredentials()
        let subscriberBefore = try await subscriber.transport.ice.localCredentials()

        try call.bed.setLink(up: false)
        try await Task.sleep(for: .seconds(2))
        try call.bed.setLink(up: true)
        let restarted = ContinuousClock.now
        try await call.publisher.restartICE()
        try await subscriber.restartICE()
        let atRestart = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0 }

        try await call.observer.wait { ($0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0) > atRestart }
        let resumed = ContinuousClock.now - restarted
        try await sending
        let total = call.observer.seen.withLock { $0.frames[call.publisher.feedID]?[.vp8]?.count ?? 0 }
        print("ICE restart: media again \(resumed) after the link returned; \(total - atRestart) frames after it")
        let publisherCounters = await call.publisher.transport.counters
        let subscriberCounters = await subscriber.transport.counters
        print("ICE restart counters: publisher \(publisherCounters), subscriber \(subscriberCounters)")

        #expect(try await call.publisher.transport.ice.localCredentials().ufrag != publisherBefore.ufrag)
        #expect(try await subscriber.transport.ice.localCredentials().ufrag != subscriberBefore.ufrag)
        #expect(call.publisher.transport.state == .connected)
        #expect(subscriber.transport.state == .connected)
        #expect(total - atRestart >= 60, "media keeps flowing after the restart (\(total - atRestart) frames)")
        await call.close()
    }
}
