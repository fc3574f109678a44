import ConclaveCore
import ConclaveOpenSSL
import ConclavePeerConnection
import ConclaveRTP
import ConclaveSDP
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Synchronization

/// One complete frame received from a publisher.
public struct SubscribedFrame: Sendable {
    /// The publisher's feed id.
    public var feedID: UInt64
    /// The publisher's mid for this stream (`0` audio, `1` video for Conclave and browsers).
    public var feedMid: String?
    /// The mid of the m-line in our subscriber PeerConnection.
    public var mid: String
    /// The frame, as the publisher sent it (still end-to-end encrypted if the call is).
    public var frame: EncodedFrame
    /// The RTP SSRC Janus uses towards us for this stream.
    public var ssrc: UInt32
    /// When the frame's last packet arrived (media clock, microseconds).
    public var arrival: MonotonicTime
    /// The epoch of the call key that decrypted the frame; set by the receive pipeline, nil
    /// before decryption and for frames that carried nothing encrypted.
    public var keyEpoch: UInt64? = nil
    /// Frames of this stream the jitter buffer gave up on just before this one (0: none lost, or
    /// the first frame); a recorder counts loss by it, and silence is not loss.
    public var framesLostBefore: Int = 0
}

/// A sender report received for a subscribed stream: the NTP/RTP mapping recordings use for sync.
public struct SubscribedSenderReport: Sendable {
    /// The publisher's feed id.
    public var feedID: UInt64
    /// Our mid for the stream.
    public var mid: String
    /// The report.
    public var report: RTCPSenderReport
    /// When it arrived (media clock).
    public var arrival: MonotonicTime
}

/// Janus now forwards another simulcast substream of a subscribed video stream (reported after the
/// keyframe it switched at).
public struct SubscribedLayerSwitch: Sendable, Hashable {
    /// The publisher's feed id.
    public var feedID: UInt64
    /// Our mid of the video stream.
    public var mid: String
    /// The substream now received.
    public var substream: VideoRoom.Substream
}

/// The multistream subscriber of a VideoRoom: one PeerConnection receiving every subscribed feed.
///
/// Each m-line gets a jitter buffer that reorders, asks for retransmissions (NACK) and keyframes
/// (PLI), and delivers complete frames on ``frames``. Feeds are added and removed with
/// ``add(feeds:)`` and ``remove(feeds:)``; Janus's renegotiation offers are answered on the same
/// transport, and ``restartICE()`` renews its ICE credentials after a media failure.
public final class Subscriber: Sendable {
    /// The VideoRoom handle of the subscription.
    public let handle: VideoRoomHandle
    /// The secure transport.
    public let transport: MediaTransport
    /// Complete frames from every subscribed stream (unless a frame handler takes them).
    public let frames: AsyncStream<SubscribedFrame>
    /// Sender reports of the subscribed streams.
    public let senderReports: AsyncStream<SubscribedSenderReport>
    /// Each simulcast substream switch Janus reports, in order (the newest 64 are kept unread).
    public let layerSwitches: AsyncStream<SubscribedLayerSwitch>

    private let layerContinuation: AsyncStream<SubscribedLayerSwitch>.Continuation
    private let frameContinuation: AsyncStream<SubscribedFrame>.Continuation
    private let reportContinuation: AsyncStream<SubscribedSenderReport>.Continuation
    private let logger: Logger
    /// Routing, jitter buffers, RTCP feedback and reports of the subscribed streams.
    private let rtp: RTPReceiveSession
    private let state = Mutex(NegotiationState())
    private let negotiation = NegotiationLock()
    private let tasks = Mutex<[Task<Void, Never>]>([])
    /// Janus's end of the PeerConnection: it relays nothing to us before it is up.
    private let webrtcUp = WebRTCUp()

    /// What the negotiations so far left behind (the receive side lives in `rtp`).
    private struct NegotiationState {
        var local: LocalTransportParameters?
        var sessionVersion: UInt64 = 1
        var layout: [VideoRoom.SubscribedStream] = []
        /// The substream received per simulcast video mid, as Janus last reported it.
        var substreams: [String: VideoRoom.Substream] = [:]
    }

    /// Subscribes to `feeds` in `room`; returns once media can flow (our DTLS done, and Janus's
    /// `webrtcup`: from then on it relays the feeds' packets).
    ///
    /// With `frameHandler`, complete frames are passed to it synchronously on the receive thread
    /// (where packets are handled; it must not block) and ``frames`` stays empty. That saves a
    /// thread hop per frame for consumers that only hand frames on, such as ``MediaReceiver``.
    public static func subscribe(
        on session: JanusSession,
        room: UInt64,
        feeds: [UInt64],
        substreams: [UInt64: VideoRoom.Substream] = [:],
        privateID: UInt64? = nil,
        transport configuration: MediaTransport.Configuration = .init(),
        frameHandler: (@Sendable (SubscribedFrame) -> Void)? = nil,
        logger: Logger = Logger(label: "conclave.subscriber")
    ) async throws -> Subscriber {
        let handle = try await VideoRoomHandle.attach(to: session)
        let transport = try MediaTransport(configuration: configuration, controlling: false, logger: logger)
        let subscriber = Subscriber(handle: handle, transport: transport, frameHandler: frameHandler, logger: logger)
        do {
            let (streams, offer) = try await handle.joinAsSubscriber(
                room: room,
                streams: feeds.map { VideoRoom.StreamSelection(feed: $0, substream: substreams[$0]) },
                privateID: privateID
            )
            try await subscriber.answer(offer, layout: streams)
            try await subscriber.connected(within: .seconds(10))
            return subscriber
        } catch {
            await subscriber.close()
            throw error
        }
    }

    private init(
        handle: VideoRoomHandle,
        transport: MediaTransport,
        frameHandler: (@Sendable (SubscribedFrame) -> Void)?,
        logger: Logger
    ) {
        self.handle = handle
        self.transport = transport
        self.logger = logger
        let (frames, frameContinuation) = AsyncStream.makeStream(
            of: SubscribedFrame.self,
            bufferingPolicy: .unbounded
        )
        let (senderReports, reportContinuation) = AsyncStream.makeStream(
            of: SubscribedSenderReport.self,
            bufferingPolicy: .bufferingNewest(256)
        )
        (self.frames, self.frameContinuation) = (frames, frameContinuation)
        (self.senderReports, self.reportContinuation) = (senderReports, reportContinuation)
        (layerSwitches, layerContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        rtp = RTPReceiveSession(
            transport: transport,
            onFrame: { received in
                let frame = SubscribedFrame(
                    feedID: received.source.id,
                    feedMid: received.source.mid,
                    mid: received.mid,
                    frame: received.frame,
                    ssrc: received.ssrc,
                    arrival: received.arrival,
                    framesLostBefore: received.framesLostBefore
                )
                // To the synchronous handler, or else to `frames`.
                if let frameHandler { frameHandler(frame) } else { frameContinuation.yield(frame) }
            },
            onSenderReport: { report in
                reportContinuation.yield(
                    SubscribedSenderReport(
                        feedID: report.source.id,
                        mid: report.mid,
                        report: report.report,
                        arrival: report.arrival
                    )
                )
            }
        )
        startListening()
        let trickle = transport.trickleCandidates(to: handle.handle)
        tasks.withLock { $0.append(trickle) }
    }

    /// The streams currently subscribed, as Janus last described them.
    public var streams: [VideoRoom.SubscribedStream] { state.withLock { $0.layout } }

    /// Waits until media can flow: our ICE and DTLS connected, and Janus's end up (its
    /// `webrtcup`), after which it relays every packet of the subscribed feeds. Called by
    /// ``subscribe(on:room:feeds:substreams:privateID:transport:frameHandler:logger:)``.
    public func connected(within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        try await transport.waitUntilConnected(within: limit)
        try await webrtcUp.wait(until: deadline, limit: limit, role: "subscriber")
    }

    /// Receive statistics per mid (read on the receive thread, which owns them).
    public var statistics: [String: ReceiveStatistics] {
        get async { await rtp.statistics }
    }

    /// RTP packets that no subscribed stream took (see ``RTPReceiveSession/unroutedPackets``).
    public var unroutedPackets: Int {
        get async { await rtp.unroutedPackets }
    }

    /// Asks the publisher of `feedID` for a video keyframe: an RTCP PLI (or FIR, when that is how
    /// the stream's jitter buffer asks) about the feed's video stream, sent at once; returns
    /// whether one went out.
    ///
    /// For a consumer that loses decoder state the jitter buffer cannot see (a recorder whose
    /// frames did not decrypt, or that starts a new file): the jitter buffer asks only for what it
    /// sees missing (lost packets, no keyframe yet since the stream started). Requests are throttled per stream at the jitter buffer's
    /// `keyframeRequestInterval` (500 ms), so a caller asking in a loop cannot flood the sender.
    /// Callable from any task; it waits for the receive thread (which owns the streams), never on
    /// the network.
    @discardableResult
    public func requestKeyframe(feedID: UInt64) async -> Bool {
        await rtp.requestKeyframe(from: RTPReceiveSession.Source(id: feedID))
    }

    /// Adds every stream of `feeds` to the subscription, simulcast video starting at the feed's
    /// entry in `substreams` (Janus's default, the highest, without one).
    public func add(feeds: [UInt64], substreams: [UInt64: VideoRoom.Substream] = [:]) async throws {
        guard !feeds.isEmpty else { return }
        let (streams, offer) = try await handle.subscribe(
            feeds.map { VideoRoom.StreamSelection(feed: $0, substream: substreams[$0]) }
        )
        if let offer { try await answer(offer, layout: streams) }
    }

    /// Asks Janus for `substream` of the video of `feedID`; returns whether the feed has video in
    /// the subscription. The switch happens at the substream's next keyframe and is reported on
    /// ``layerSwitches``; for a feed that does not simulcast nothing changes.
    @discardableResult
    public func selectLayer(_ substream: VideoRoom.Substream, feedID: UInt64) async throws -> Bool {
        let mids = streams.filter { $0.feedID == feedID && $0.type == "video" && $0.isActive }.map(\.mid)
        guard !mids.isEmpty else { return false }
        try await handle.configureLayers(mids.map { VideoRoom.LayerChoice(mid: $0, substream: substream) })
        return true
    }

    /// The simulcast substream received of each feed's video, as Janus last reported it (feeds
    /// that do not simulcast, or have sent nothing yet, are absent).
    public var receivedLayers: [UInt64: VideoRoom.Substream] {
        state.withLock { state in
            var layers: [UInt64: VideoRoom.Substream] = [:]
            for stream in state.layout {
                if let feed = stream.feedID, let substream = state.substreams[stream.mid] { layers[feed] = substream }
            }
            return layers
        }
    }

    /// Removes every stream of `feeds` from the subscription.
    public func remove(feeds: [UInt64]) async throws {
        guard !feeds.isEmpty else { return }
        let (streams, offer) = try await handle.unsubscribe(feeds.map { VideoRoom.StreamSelection(feed: $0) })
        if let offer { try await answer(offer, layout: streams) }
    }

    /// Restarts ICE: new local credentials, then `configure` with `restart: true`, whose new offer
    /// from Janus is answered. DTLS and SRTP carry on.
    public func restartICE() async throws {
        let local = try await transport.restartICE()
        state.withLock { $0.local = local }
        let (data, jsep) = try await handle.request(VideoRoom.restartSubscriberICE(), name: "ICE restart")
        guard let jsep, jsep.type == .offer else { return }  // the offer then arrives as an event
        var layout = streams
        for event in (try? VideoRoom.events(from: data)) ?? [] {
            switch event {
            case .updated(_, let streams), .attached(_, let streams): layout = streams
            default: continue
            }
        }
        try await answer(jsep, layout: layout)
    }

    /// Leaves the subscription and closes the PeerConnection.
    public func close() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        try? await handle.leave()
        await transport.close()
        try? await handle.handle.detach()
        frameContinuation.finish()
        reportContinuation.finish()
        layerContinuation.finish()
    }

    // MARK: Negotiation

    /// Answers a Janus offer (the first one, or a renegotiation after the feeds changed).
    private func answer(_ offer: JSEP, layout: [VideoRoom.SubscribedStream]) async throws {
        try await negotiation.run {
            let description = try SessionDescription(parsing: offer.sdp)
            let (cachedLocal, version) = state.withLock { state -> (LocalTransportParameters?, UInt64) in
                state.sessionVersion += 1
                return (state.local, state.sessionVersion)
            }
            let isFirst = cachedLocal == nil
            let local: LocalTransportParameters
            if let cachedLocal {
                local = cachedLocal
            } else {
                local = try await transport.localParameters()
            }
            let (answer, result) = try SDPNegotiator.subscriberAnswer(
                to: description,
                local: local,
                sessionID: "\(rtp.localSSRC)",
                sessionVersion: version
            )
            state.withLock { state in
                state.local = local
                let previous = state.layout
                state.layout = layout.isEmpty ? state.layout : layout
                for stream in layout {
                    // A mid reused for another feed starts without a layer.
                    if previous.first(where: { $0.mid == stream.mid })?.feedID != stream.feedID {
                        state.substreams[stream.mid] = nil
                    }
                    if let substream = stream.simulcast?.substream { state.substreams[stream.mid] = substream }
                }
            }
            await rtp.configure(result.media) { media, previous in
                let described = layout.first { $0.mid == media.mid }
                return RTPReceiveSession.Source(
                    id: described?.feedID ?? previous?.id ?? 0,
                    mid: described == nil ? previous?.mid : described?.feedMid
                )
            }
            try await handle.start(answer: JSEP(type: .answer, sdp: answer.text, e2ee: offer.e2ee))
            if isFirst {
                try await transport.start(
                    remote: result.remote,
                    role: DTLSRole(answeringRemoteSetup: result.remote.setup.rawValue)
                )
            } else {
                // A renegotiation may carry new ICE credentials (an ICE restart, ours or Janus's).
                try await transport.updateRemote(result.remote)
            }
            logger.debug("subscription negotiated", metadata: ["streams": "\(result.media.count)"])
        }
    }

    private func startListening() {
        let transport = self.transport
        let events = handle.events
        track { [weak self] in
            for await event in events {
                switch event {
                case .webrtcUp:
                    self?.webrtcUp.reported()
                case .trickle(.candidate(let line, _, _)):
                    await transport.addRemoteCandidate(line)
                case .trickle(.completed):
                    await transport.remoteEndOfCandidates()
                case .plugin(let data, let jsep?) where jsep.type == .offer:
                    // A renegotiation Janus sent on its own (an update it had postponed).
                    var layout: [VideoRoom.SubscribedStream] = []
                    for event in (try? VideoRoom.events(from: data)) ?? [] {
                        if case .updated(_, let streams) = event { layout = streams }
                    }
                    do {
                        try await self?.answer(jsep, layout: layout)
                    } catch {
                        self?.logger.warning("renegotiation failed", metadata: ["error": "\(error)"])
                    }
                case .plugin(let data, .none):
                    self?.layerEvents(in: data)
                default:
                    break
                }
            }
        }
    }

    /// Notes the simulcast switches in a plugin event and passes them on.
    private func layerEvents(in data: JSONValue) {
        let events: [VideoRoom.Event]
        do {
            events = try VideoRoom.events(from: data)
        } catch {
            logger.warning("unreadable VideoRoom event", metadata: ["error": "\(error)"])
            return
        }
        for case .layerSwitched(let mid, let substream?, _) in events {
            let feed = state.withLock { state -> UInt64? in
                state.substreams[mid] = substream
                return state.layout.first { $0.mid == mid }?.feedID
            }
            guard let feed else { continue }
            logger.debug("simulcast layer", metadata: ["feed": "\(feed)", "substream": "\(substream)"])
            layerContinuation.yield(SubscribedLayerSwitch(feedID: feed, mid: mid, substream: substream))
        }
    }

    private func track(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        tasks.withLock { $0.append(task) }
    }
}

/// Serializes negotiations: Janus may send a new offer while an answer is still being prepared.
actor NegotiationLock {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        while busy {
            await withCheckedContinuation { waiters.append($0) }
        }
        busy = true
        defer {
            busy = false
            if !waiters.isEmpty { waiters.removeFirst().resume() }
        }
        return try await body()
    }
}
