import ConclaveE2EE
import ConclavePeerConnection
import JanusClient
import JanusProtocol
import Logging
import Synchronization

/// A participant that joins a room without publishing, so that its handle receives the room's
/// events (publishers arriving and leaving). This is how `conclave record` follows a call.
public final class RoomListener: Sendable {
    /// The handle joined to the room.
    public let handle: VideoRoomHandle
    /// What Janus answered to the join: our id and the publishers already there.
    public let joined: VideoRoom.Joined
    /// The room's events, in order.
    public let roomEvents: AsyncStream<VideoRoom.Event>
    private let task: Task<Void, Never>

    /// Joins `room` on `session` as a participant that never publishes.
    public static func join(on session: JanusSession, room: UInt64, display: String?) async throws -> RoomListener {
        let handle = try await VideoRoomHandle.attach(to: session)
        let joined = try await handle.joinAsPublisher(room: room, display: display)
        return RoomListener(handle: handle, joined: joined)
    }

    private init(handle: VideoRoomHandle, joined: VideoRoom.Joined) {
        self.handle = handle
        self.joined = joined
        let (events, continuation) = AsyncStream.makeStream(of: VideoRoom.Event.self)
        roomEvents = events
        let handleEvents = handle.events
        task = Task {
            for await event in handleEvents {
                guard case .plugin(let data, _) = event else { continue }
                for roomEvent in (try? VideoRoom.events(from: data)) ?? [] { continuation.yield(roomEvent) }
            }
            continuation.finish()
        }
    }

    /// Leaves the room and detaches.
    public func leave() async {
        try? await handle.leave()
        try? await handle.handle.detach()
        task.cancel()
    }
}

/// Follows a room and receives every other publisher: one multistream subscriber, extended and
/// reduced as publishers come and go, with each frame decrypted and handed to the observers.
///
/// Room events come from any handle joined to the room (our publisher's, or a ``RoomListener``'s).
/// Everything is fanned out from one task per stream, in order: participant changes, decrypted
/// frames and decryption failures, sender reports.
public final class RoomSubscription: Sendable {
    /// How to subscribe.
    public struct Configuration: Sendable {
        /// The room.
        public var room: UInt64
        /// Our own feed, never subscribed to (nil for a listener that does not publish).
        public var ownFeedID: UInt64?
        /// The call's frame crypto, or nil when the call is not end-to-end encrypted.
        public var crypto: CallFrameCrypto?
        /// ICE settings for the subscriber PeerConnection.
        public var transport: MediaTransport.Configuration
        /// The simulcast layer to receive per participant (by default everyone's highest).
        public var layers: LayerSelection
        /// How each feed's video is shown (the call window's tiles), which caps `auto`: a tile a
        /// quarter of the highest layer's size gets the lowest. Nil without a window.
        public var shownVideo: (@Sendable (UInt64) -> ShownVideo?)? = nil

        /// Creates a configuration.
        public init(
            room: UInt64,
            ownFeedID: UInt64?,
            crypto: CallFrameCrypto?,
            transport: MediaTransport.Configuration = .init(),
            layers: LayerSelection = LayerSelection(standard: .fixed(.high)),
            shownVideo: (@Sendable (UInt64) -> ShownVideo?)? = nil
        ) {
            self.room = room
            self.ownFeedID = ownFeedID
            self.crypto = crypto
            self.transport = transport
            self.layers = layers
            self.shownVideo = shownVideo
        }
    }

    private struct State {
        /// Feeds of ours besides `ownFeedID` (a screen share), never subscribed to.
        var ownFeeds: Set<UInt64> = []
        var subscriber: Subscriber?
        var receiver: MediaReceiver?
        var participants: [UInt64: String?] = [:]
        var tasks: [Task<Void, Never>] = []
        var closed = false
    }

    private let session: JanusSession
    private let configuration: Configuration
    private let observers: [any CallMediaObserver]
    private let logger: Logger
    private let state = Mutex(State())
    private let main: Mutex<Task<Void, Never>?> = Mutex(nil)
    private let failureContinuation: AsyncStream<MediaTransportFailure>.Continuation

    /// Each time the subscriber's PeerConnection fails for good (ICE or DTLS), why: the event a
    /// call recovers on. Keeps the latest failure only; read by one task.
    public let mediaFailures: AsyncStream<MediaTransportFailure>

    /// Starts following the room: subscribes to `initialPublishers` at once, then follows
    /// `roomEvents`.
    public init(
        session: JanusSession,
        configuration: Configuration,
        initialPublishers: [VideoRoom.Publisher],
        roomEvents: AsyncStream<VideoRoom.Event>,
        observers: [any CallMediaObserver],
        logger: Logger
    ) {
        self.session = session
        self.configuration = configuration
        self.observers = observers
        self.logger = logger
        (mediaFailures, failureContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task { [weak self] in
            await self?.arrived(initialPublishers)
            for await event in roomEvents {
                guard let self else { return }
                switch event {
                case .publishers(let publishers): await self.arrived(publishers)
                case .unpublished(let feed?), .leaving(let feed?): await self.departed(feed)
                default: break
                }
            }
        }
        main.withLock { $0 = task }
    }

    /// The participants currently subscribed (feed id and display).
    public var participants: [UInt64: String?] { state.withLock { $0.participants } }

    /// The subscriber, once there has been someone to subscribe to.
    public var subscriber: Subscriber? { state.withLock { $0.subscriber } }

    /// Asks the publisher of `feedID` for a video keyframe: an RTCP PLI about the feed's video
    /// stream, through the subscriber that receives it (Janus passes it on to the publisher).
    /// Returns whether a request went out: not before the feed's video has an SSRC, not after
    /// ``close()``, and not within the subscriber's per-stream throttle (500 ms) of the last one.
    ///
    /// A recorder needs this when it loses decoder state the jitter buffer cannot see (frames that
    /// did not decrypt, a new file): senders that send keyframes only when asked would otherwise
    /// leave it without video. Callable from any task: it waits for the subscriber's receive
    /// thread, which owns the streams and sends the datagram, never for the network. A recorder's
    /// thread, which must not wait, calls it from a task.
    @discardableResult
    public func requestKeyframe(feedID: UInt64) async -> Bool {
        guard let subscriber = state.withLock({ $0.closed ? nil : $0.subscriber }) else { return false }
        let sent = await subscriber.requestKeyframe(feedID: feedID)
        if sent { logger.debug("asked for a keyframe", metadata: ["feed": "\(feedID)"]) }
        return sent
    }

    /// Asks for `layer` of the video of `feedID` from now on (see ``Subscriber/selectLayer(_:feedID:)``);
    /// returns whether the feed has video in the subscription.
    @discardableResult
    public func selectLayer(_ layer: VideoRoom.Substream, feedID: UInt64) async throws -> Bool {
        guard let subscriber = state.withLock({ $0.closed ? nil : $0.subscriber }) else { return false }
        return try await subscriber.selectLayer(layer, feedID: feedID)
    }

    /// Never subscribes to `feedID`, another feed of ours (a screen share published beside the
    /// camera): call it before Janus announces the feed (``Publisher/publish(on:configuration:waitingForMedia:logger:joined:)``'s
    /// `joined`).
    public func ignore(feedID: UInt64) {
        state.withLock { _ = $0.ownFeeds.insert(feedID) }
    }

    /// Stops following the room and closes the subscriber.
    public func close() async {
        main.withLock { $0?.cancel() }
        let (subscriber, receiver, tasks) = state.withLock { state in
            state.closed = true
            return (state.subscriber, state.receiver, state.tasks)
        }
        receiver?.stop()
        for task in tasks { task.cancel() }
        failureContinuation.finish()
        await subscriber?.close()
    }

    // MARK: Internals

    /// The layer asked for the feed's participant, nil for a feed not subscribed.
    private func layer(ofFeed feed: UInt64) -> VideoLayer? {
        guard let display = state.withLock({ $0.participants[feed] }) else { return nil }
        return configuration.layers.layer(forDisplay: display)
    }

    private func arrived(_ publishers: [VideoRoom.Publisher]) async {
        let fresh = state.withLock { state in
            publishers.filter {
                $0.id != configuration.ownFeedID && !state.ownFeeds.contains($0.id)
                    && state.participants[$0.id] == nil
                    && $0.streams.contains { !$0.isDisabled }
            }
        }
        guard !fresh.isEmpty else { return }
        let feeds = fresh.map(\.id)
        var substreams: [UInt64: VideoRoom.Substream] = [:]
        for publisher in fresh {
            substreams[publisher.id] = configuration.layers.layer(forDisplay: publisher.display).initialSubstream
        }
        do {
            if let subscriber = state.withLock({ $0.subscriber }) {
                try await subscriber.add(feeds: feeds, substreams: substreams)
            } else {
                // Frames are decrypted and handed to the observers on the receive thread as they
                // complete: a task reading them from a stream would cost a thread wakeup per frame.
                let observers = self.observers
                let receiver = MediaReceiver(crypto: configuration.crypto) { item in
                    for observer in observers { observer.received(item) }
                }
                let subscriber = try await Subscriber.subscribe(
                    on: session,
                    room: configuration.room,
                    feeds: feeds,
                    substreams: substreams,
                    transport: configuration.transport,
                    frameHandler: receiver.handle,
                    logger: logger
                )
                start(subscriber, receiver: receiver)
            }
        } catch {
            logger.warning("could not subscribe", metadata: ["feeds": "\(feeds)", "error": "\(error)"])
            return
        }
        state.withLock { state in
            for publisher in fresh { state.participants[publisher.id] = publisher.display }
        }
        for publisher in fresh {
            for observer in observers { observer.participantJoined(feedID: publisher.id, display: publisher.display) }
        }
    }

    private func departed(_ feed: UInt64) async {
        let (known, subscriber) = state.withLock { state in
            (state.participants.removeValue(forKey: feed) != nil, state.subscriber)
        }
        guard known else { return }
        for observer in observers { observer.participantLeft(feedID: feed) }
        // Janus removes a departed feed's streams by itself (autoupdate) and sends a new offer,
        // which the subscriber answers; an explicit unsubscribe may then find nothing to remove.
        do {
            try await subscriber?.remove(feeds: [feed])
        } catch {
            logger.debug("unsubscribe after departure", metadata: ["feed": "\(feed)", "error": "\(error)"])
        }
    }

    private func start(_ subscriber: Subscriber, receiver: MediaReceiver) {
        let observers = self.observers
        let reports = Task {
            for await report in subscriber.senderReports {
                for observer in observers { observer.senderReport(report) }
            }
        }
        let layers = Task {
            for await change in subscriber.layerSwitches {
                for observer in observers { observer.layerReceived(feedID: change.feedID, substream: change.substream) }
            }
        }
        let adapting =
            configuration.layers.standard == .auto || configuration.layers.perParticipant.values.contains(.auto)
        let layerOfFeed: @Sendable (UInt64) -> VideoLayer? = { [weak self] in self?.layer(ofFeed: $0) }
        let shownVideo = configuration.shownVideo
        let adaptation = Task { [logger] in
            guard adapting else { return }
            await AutoLayers(subscriber: subscriber, layer: layerOfFeed, shown: shownVideo, logger: logger).run()
        }
        let failures = failureContinuation
        let watch = Task {
            for await state in subscriber.transport.states {
                if case .failed(let reason) = state { failures.yield(reason) }
            }
        }
        let closed = state.withLock { state -> Bool in
            state.subscriber = subscriber
            state.receiver = receiver
            state.tasks += [reports, watch, layers, adaptation]
            return state.closed
        }
        if closed {
            receiver.stop()
            reports.cancel()
            watch.cancel()
            layers.cancel()
            adaptation.cancel()
            Task { await subscriber.close() }
        }
    }
}
