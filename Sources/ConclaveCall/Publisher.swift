import ConclaveCore
import ConclaveOpenSSL
import ConclavePeerConnection
import ConclaveSDP
import JanusClient
import JanusProtocol
import Logging
import Synchronization

/// A publisher in a VideoRoom: one PeerConnection sending our audio and video to Janus.
///
/// ``send(_:)`` takes complete encoded frames (already end-to-end encrypted when the call is), turns
/// them into RTP, protects them with SRTP and sends them. NACKs are answered from the packet
/// history, keyframe requests (PLI, FIR) are passed on through ``keyframeRequests``, and REMB
/// bitrate limits through ``bitrateLimits``. Sender reports go out every second.
public final class Publisher: Sendable {
    /// What to publish.
    public struct Configuration: Sendable {
        /// The room to join.
        public var room: UInt64
        /// The display name (`"<userId>:<name>"` for ECall compatibility).
        public var display: String?
        /// The audio codec, or nil for no audio.
        public var audio: MediaCodec?
        /// The video codec, or nil for no video.
        public var video: MediaCodec?
        /// Whether the media is end-to-end encrypted (sets Janus's JSEP `e2ee` flag).
        public var endToEndEncrypted: Bool
        /// ICE settings.
        public var transport: MediaTransport.Configuration
        /// The simulcast layers of the video (1: no simulcast). Each layer goes out on an SSRC of
        /// its own; frames name theirs in ``EncodedFrame/simulcastLayer``.
        public var simulcastLayers: Int

        /// Creates a configuration: Opus and VP8 by default.
        public init(
            room: UInt64,
            display: String?,
            audio: MediaCodec? = .opus,
            video: MediaCodec? = .vp8,
            endToEndEncrypted: Bool = false,
            transport: MediaTransport.Configuration = .init(),
            simulcastLayers: Int = 1
        ) {
            self.room = room
            self.display = display
            self.audio = audio
            self.video = video
            self.endToEndEncrypted = endToEndEncrypted
            self.transport = transport
            self.simulcastLayers = simulcastLayers
        }
    }

    /// Our feed id in the room.
    public let feedID: UInt64
    /// The publishers already in the room when we joined.
    public let initialPublishers: [VideoRoom.Publisher]
    /// The VideoRoom handle (room events arrive on its event stream).
    public let handle: VideoRoomHandle
    /// The secure transport.
    public let transport: MediaTransport
    /// One element per keyframe request from Janus (PLI or FIR), throttled.
    public let keyframeRequests: AsyncStream<MediaCodec>
    /// Bitrate limits (bits per second) from the receiver's REMB.
    public let bitrateLimits: AsyncStream<UInt64>
    /// Room events seen by our handle: publishers arriving, leaving, unpublishing, talking.
    public let roomEvents: AsyncStream<VideoRoom.Event>
    private let roomEventContinuation: AsyncStream<VideoRoom.Event>.Continuation

    /// What the offers are built from, kept for renegotiations (ICE restart).
    private let offerParts: OfferParts
    private let offerVersion = Mutex<UInt64>(2)
    private let endToEndEncrypted: Bool

    private struct OfferParts: Sendable {
        var audio: PublisherTrack?
        var video: PublisherTrack?
        var cname: String
        var streamID: String
        var sessionID: String
    }

    private let keyframeContinuation: AsyncStream<MediaCodec>.Continuation
    private let bitrateContinuation: AsyncStream<UInt64>.Continuation
    private let logger: Logger
    /// Packetizing, numbering, NACK answers and sender reports.
    private let rtp: RTPSendSession
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let senderReportsStarted = Mutex(false)
    /// Janus's end of the PeerConnection: the room lists the feed once it is up.
    private let webrtcUp = WebRTCUp()

    /// Joins the room as publisher and publishes; returns once media can flow (DTLS-SRTP connected)
    /// and Janus has the feed up (its `webrtcup`), so that others can subscribe to it at once.
    ///
    /// With `waitingForMedia` false it returns as soon as Janus's answer is applied and ICE and
    /// DTLS have started, so that the caller can subscribe to the room while they connect (a call
    /// joins about one handshake sooner); ``connected(within:)`` then waits for media to flow.
    ///
    /// `joined` is called with our feed id once the room is joined and before anything is
    /// published, that is before Janus tells the room about the feed: a call that publishes a
    /// second feed (a screen share) tells its subscription to leave that feed alone there.
    public static func publish(
        on session: JanusSession,
        configuration: Configuration,
        waitingForMedia: Bool = true,
        logger: Logger = Logger(label: "conclave.publisher"),
        joined joinedFeed: (@Sendable (UInt64) -> Void)? = nil
    ) async throws -> Publisher {
        let handle = try await VideoRoomHandle.attach(to: session)
        let joined = try await handle.joinAsPublisher(room: configuration.room, display: configuration.display)
        joinedFeed?(joined.id)
        let transport = try MediaTransport(configuration: configuration.transport, controlling: true, logger: logger)
        do {
            return try await Publisher(
                handle: handle,
                joined: joined,
                transport: transport,
                configuration: configuration,
                waitingForMedia: waitingForMedia,
                logger: logger
            )
        } catch {
            await transport.close()
            try? await handle.handle.detach()
            throw error
        }
    }

    private init(
        handle: VideoRoomHandle,
        joined: VideoRoom.Joined,
        transport: MediaTransport,
        configuration: Configuration,
        waitingForMedia: Bool,
        logger: Logger
    ) async throws {
        self.handle = handle
        self.transport = transport
        self.feedID = joined.id
        self.initialPublishers = joined.publishers
        var logger = logger
        logger[metadataKey: "feed"] = "\(joined.id)"
        self.logger = logger
        (keyframeRequests, keyframeContinuation) = AsyncStream.makeStream(
            of: MediaCodec.self,
            bufferingPolicy: .bufferingNewest(4)
        )
        (bitrateLimits, bitrateContinuation) = AsyncStream.makeStream(
            of: UInt64.self,
            bufferingPolicy: .bufferingNewest(1)
        )
        (roomEvents, roomEventContinuation) = AsyncStream.makeStream(of: VideoRoom.Event.self)

        let audioTrack = configuration.audio.map {
            PublisherTrack(codec: $0, ssrc: UInt32.random(in: 1...UInt32.max), trackID: "audio0")
        }
        let videoTrack = configuration.video.map {
            PublisherTrack(
                codec: $0,
                ssrc: UInt32.random(in: 1...UInt32.max),
                upperLayerSSRCs: (1..<max(configuration.simulcastLayers, 1)).map { _ in
                    UInt32.random(in: 1...UInt32.max)
                },
                trackID: "video0"
            )
        }
        rtp = RTPSendSession(audio: audioTrack, video: videoTrack, transport: transport)

        offerParts = OfferParts(
            audio: audioTrack,
            video: videoTrack,
            cname: "conclave-\(joined.id)",
            streamID: "conclave-\(joined.id)",
            sessionID: "\(UInt64.random(in: 1...UInt64(Int64.max)))"
        )
        endToEndEncrypted = configuration.endToEndEncrypted
        let local = try await transport.localParameters()
        let offer = SDPNegotiator.publisherOffer(
            audio: offerParts.audio,
            video: offerParts.video,
            local: local,
            cname: offerParts.cname,
            streamID: offerParts.streamID,
            sessionID: offerParts.sessionID
        )
        startTrickling()
        let answerJSEP = try await handle.publish(
            offer: JSEP(type: .offer, sdp: offer.text, e2ee: configuration.endToEndEncrypted),
            audioCodec: configuration.audio?.rawValue,
            videoCodec: configuration.video?.rawValue
        )
        let answer = try SessionDescription(parsing: answerJSEP.sdp)
        let result = try SDPNegotiator.acceptPublisherAnswer(answer, offer: offer)
        transport.setHandlers(rtp: { _ in }, rtcp: { [weak self] packet in self?.receiveRTCP(packet) })
        startListening()
        try await transport.start(
            remote: result.remote,
            role: DTLSRole(offeredActpassAndRemoteAnswered: result.remote.setup.rawValue)
        )
        if waitingForMedia { try await connected(within: .seconds(10)) }
    }

    /// Waits until media can flow (ICE and DTLS-SRTP connected) and Janus reports the
    /// PeerConnection up, then starts the sender reports. Called by
    /// ``publish(on:configuration:waitingForMedia:logger:)`` unless told not to; once is enough,
    /// and a failure leaves the publisher to be closed by its owner.
    public func connected(within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        try await transport.waitUntilConnected(within: limit)
        try await webrtcUp.wait(until: deadline, limit: limit, role: "publisher")
        let first = senderReportsStarted.withLock { started in
            defer { started = true }
            return !started
        }
        guard first else { return }
        rtp.startSenderReports()
        logger.debug(
            "publishing",
            metadata: [
                "audio": "\(offerParts.audio.map(\.codec.rawValue) ?? "none")",
                "video": "\(offerParts.video.map(\.codec.rawValue) ?? "none")",
            ]
        )
    }

    /// Sends one encoded frame on the track of its kind. Frames of a codec that is not published
    /// are ignored.
    public func send(_ frame: EncodedFrame) {
        if let codec = rtp.send(frame) { keyframeContinuation.yield(codec) }
    }

    /// Restarts ICE: new local credentials, a new offer through `configure`, Janus's new answer
    /// applied. DTLS and SRTP carry on, so media resumes as soon as a candidate pair works.
    public func restartICE() async throws {
        let local = try await transport.restartICE()
        let version = offerVersion.withLock {
            $0 += 1
            return $0
        }
        let offer = SDPNegotiator.publisherOffer(
            audio: offerParts.audio,
            video: offerParts.video,
            local: local,
            cname: offerParts.cname,
            streamID: offerParts.streamID,
            sessionID: offerParts.sessionID,
            sessionVersion: version
        )
        guard
            let answer = try await handle.configure(
                VideoRoom.configure(),
                offer: JSEP(type: .offer, sdp: offer.text, e2ee: endToEndEncrypted)
            )
        else {
            throw MediaTransportError("Janus answered the ICE restart offer without an SDP answer")
        }
        let result = try SDPNegotiator.acceptPublisherAnswer(try SessionDescription(parsing: answer.sdp), offer: offer)
        try await transport.updateRemote(result.remote)
        // Receivers almost certainly lost packets while the path was broken: start them off again.
        if let video = offerParts.video { keyframeContinuation.yield(video.codec) }
    }

    /// Send-side counters of one published stream.
    public typealias StreamStatistics = RTPSendSession.StreamStatistics

    /// Counters per published stream (audio, video).
    public var statistics: [StreamStatistics] { rtp.statistics }

    /// Stops publishing and leaves the room, then closes the PeerConnection.
    public func leave() async {
        try? await handle.unpublish()
        try? await handle.leave()
        await close()
    }

    /// Closes the PeerConnection and the handle without telling the room first.
    public func close() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        keyframeContinuation.finish()
        bitrateContinuation.finish()
        roomEventContinuation.finish()
        await transport.close()
        try? await handle.handle.detach()
    }

    // MARK: Internals

    private func receiveRTCP(_ packet: [UInt8]) {
        let feedback = rtp.receiveRTCP(packet)
        if let keyframe = feedback.keyframe { keyframeContinuation.yield(keyframe) }
        if let bitrate = feedback.bitrateLimit { bitrateContinuation.yield(bitrate) }
    }

    private func startTrickling() {
        let task = transport.trickleCandidates(to: handle.handle)
        tasks.withLock { $0.append(task) }
    }

    private func startListening() {
        let transport = self.transport
        let events = handle.events
        let roomEvents = roomEventContinuation
        track { [weak self] in
            for await event in events {
                switch event {
                case .webrtcUp:
                    self?.webrtcUp.reported()
                case .trickle(.candidate(let line, _, _)): await transport.addRemoteCandidate(line)
                case .trickle(.completed): await transport.remoteEndOfCandidates()
                case .plugin(let data, _):
                    for roomEvent in (try? VideoRoom.events(from: data)) ?? [] { roomEvents.yield(roomEvent) }
                default: break
                }
            }
            roomEvents.finish()
        }
    }

    private func track(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        tasks.withLock { $0.append(task) }
    }
}
