import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import ConclavePeerConnection
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Synchronization

/// Taking part in a call: publishes our sources (end-to-end encrypted when the call is),
/// subscribes to every other participant through a ``RoomSubscription``, and recovers by itself.
///
/// Lifecycle: ``join()`` connects, checks the room, publishes and subscribes, or throws a
/// ``CallError`` that says what is wrong. While in the call:
/// - a dropped WebSocket is reconnected and the session `claim`ed by ``JanusConnection`` itself;
///   the call only records the outage;
/// - a lost session (Janus restarted, or the session expired: 458) starts a new session on the same
///   (or a new) connection, publishes again in the same room with the same key and subscribes
///   again; the new feed ids map to the same participants by their `"<userId>:"` display prefix.
///   If Janus lost the room too (rooms created by API do not survive a restart), it is created
///   again with the same id and codecs;
/// - media that failed (ICE or DTLS failed after an outage) first gets an ICE restart on both legs;
///   when that does not bring it back within 5 s, it is handled like a lost session, after leaving
///   and destroying the old one.
/// ``leave()`` unpublishes, leaves, destroys the session and closes the connection.
public actor CallSession {
    /// What to join.
    public struct Configuration: Sendable {
        public var janusURL: String
        public var connectionOptions: JanusConnection.Options
        public var room: UInt64
        public var callID: UInt64
        /// Our display, `"<userId>:<name>"`.
        public var display: String
        /// The call's frame crypto, nil for a call without end-to-end encryption.
        public var crypto: CallFrameCrypto?
        public var transport: MediaTransport.Configuration
        /// Accept a publisher with our user id already in the room (our own crashed instance, whose
        /// session Janus has not yet timed out): set by `rejoin`.
        public var allowEarlierInstance: Bool
        /// How to create the room again if Janus lost it during the call.
        public var roomOptions: VideoRoom.RoomOptions
        /// A keyframe at least this often. Subscribers that join later (or resubscribe after a
        /// recovery) cannot decode until the next keyframe, and a keyframe request does not always
        /// reach us, so keyframes are also sent periodically and whenever a participant arrives.
        public var keyframeInterval: Duration?
        /// The simulcast layer to receive per participant.
        public var layers: LayerSelection
        /// How each feed's video is shown (the call window), which caps `auto`; nil without one.
        public var shownVideo: (@Sendable (UInt64) -> ShownVideo?)? = nil

        public init(
            janusURL: String,
            connectionOptions: JanusConnection.Options = .init(),
            room: UInt64,
            callID: UInt64,
            display: String,
            crypto: CallFrameCrypto?,
            transport: MediaTransport.Configuration = .init(),
            allowEarlierInstance: Bool = false,
            roomOptions: VideoRoom.RoomOptions? = nil,
            keyframeInterval: Duration? = .seconds(3),
            layers: LayerSelection = LayerSelection(standard: .auto)
        ) {
            self.janusURL = janusURL
            self.connectionOptions = connectionOptions
            self.room = room
            self.callID = callID
            self.display = display
            self.crypto = crypto
            self.transport = transport
            self.allowEarlierInstance = allowEarlierInstance
            self.roomOptions = roomOptions ?? VideoRoom.RoomOptions(room: room, videoCodecs: ["h264", "vp8"])
            self.keyframeInterval = keyframeInterval
            self.layers = layers
        }
    }

    /// Where the call stands (the `state` of `--status json`, by its raw value).
    public enum Phase: String, Sendable, Codable, Hashable {
        case idle, connecting, live, recovering, leaving, left
    }

    /// One publisher of ours and what feeds it: the call's main feed (audio and video), or the
    /// screen shared beside it.
    private struct PublishedFeed {
        var publisher: Publisher
        var senders: [MediaSender]
        var senderTasks: [Task<Void, Never>]
        /// Keyframe requests, bitrate limits, periodic keyframes, the transport's watchdog.
        var tasks: [Task<Void, Never>]
    }

    /// One Janus session's worth of the call: what a lost session takes down and recovery rebuilds.
    private struct Leg {
        var generation: Int
        var session: JanusSession
        var main: PublishedFeed
        var screen: PublishedFeed?
        /// Session events and the subscriber's watchdog.
        var tasks: [Task<Void, Never>]
        var subscription: RoomSubscription

        var publisher: Publisher { main.publisher }
        var feeds: [PublishedFeed] { [main] + (screen.map { [$0] } ?? []) }
        var senders: [MediaSender] { feeds.flatMap(\.senders) }
    }

    public let configuration: Configuration
    /// The status counters (also one of the observers).
    public nonisolated let tracker: CallStatusTracker
    private let sources: [RebasingFrameSource]
    /// The screen shared beside the camera as a feed of its own, published again by every
    /// recovery; nil when the screen is not shared.
    private var screenSource: RebasingFrameSource?
    private let observers: [any CallMediaObserver]
    private let arrivals = ArrivalObserver()
    private let logger: Logger
    private var connection: JanusConnection?
    private var connectionTask: Task<Void, Never>?
    private var recoveryTask: Task<Void, Never>?
    private var leg: Leg?
    private var generation = 0
    private var phase: Phase = .idle
    private var janusState = JanusConnectionStatus.closed
    private var previousSent = 0
    private var previousEncryptionFailures = 0

    /// - Parameters:
    ///   - sources: what we send (at most one audio and one video source).
    ///   - screen: a screen to share from the start, beside `sources`' video (see
    ///     ``shareScreen(_:)``).
    ///   - observers: receive everything the call receives (a recorder, a test); the status
    ///     tracker is added in front.
    public init(
        configuration: Configuration,
        sources: [RebasingFrameSource],
        screen: RebasingFrameSource? = nil,
        observers: [any CallMediaObserver] = [],
        tracker: CallStatusTracker = CallStatusTracker(),
        logger: Logger
    ) {
        self.configuration = configuration
        self.sources = sources
        self.screenSource = screen
        self.tracker = tracker
        self.observers = [tracker, arrivals] + observers
        var logger = logger
        logger[metadataKey: "call"] = "\(configuration.callID)"
        self.logger = logger
    }

    /// The phase now.
    public var currentPhase: Phase { phase }

    /// Our feed id now (it changes when the call recovers with a new session).
    public var feedID: UInt64? { leg?.publisher.feedID }

    /// The feed of our screen share now, nil when the screen is not published.
    public var screenFeedID: UInt64? { leg?.screen?.publisher.feedID }

    /// Joins: connects, checks the room and that we are not already in it, publishes, subscribes.
    public func join() async throws(CallError) {
        phase = .connecting
        arrivals.setHandler { [weak self] in
            Task {
                await self?.requestKeyframes()
                try? await Task.sleep(for: .seconds(1))
                await self?.requestKeyframes()
            }
        }
        let url = configuration.janusURL
        let connection: JanusConnection
        do {
            connection = try await JanusConnection.connect(
                to: url,
                options: configuration.connectionOptions,
                logger: logger
            )
        } catch {
            phase = .left
            throw CallError.from(error, step: "connecting to Janus", url: url)
        }
        self.connection = connection
        janusState = .connected
        watch(connection)
        do {
            leg = try await openLeg(on: connection, initial: true)
        } catch {
            connectionTask?.cancel()
            await connection.close()
            self.connection = nil
            phase = .left
            throw CallError.from(error, step: "joining the call", url: url)
        }
        phase = .live
        await reconcileScreen()
        recheckMedia()
        logger.info("joined", metadata: ["room": "\(configuration.room)", "feed": "\(leg?.publisher.feedID ?? 0)"])
    }

    /// Leaves: stops sending, unpublishes and leaves the room, destroys the session, closes the
    /// connection. Bounded: a Janus that no longer answers does not hold the exit up for long.
    public func leave(within limit: Duration = .seconds(5)) async {
        guard phase != .left else { return }
        phase = .leaving
        connectionTask?.cancel()
        recoveryTask?.cancel()
        let leg = self.leg
        self.leg = nil
        let connection = self.connection
        let polite = Task {
            if let leg { await Self.close(leg, politely: true) }
            await connection?.close()
        }
        let deadline = Task {
            try? await Task.sleep(for: limit)
            polite.cancel()
        }
        await polite.value
        deadline.cancel()
        await connection?.close()
        self.connection = nil
        janusState = .closed
        phase = .left
        logger.info("left the call")
    }

    /// Asks the publisher of `feedID` for a video keyframe through the current subscription (see
    /// ``RoomSubscription/requestKeyframe(feedID:)``): what `join --record`'s recorder calls when
    /// it misses one.
    public func requestKeyframe(feedID: UInt64) async {
        await leg?.subscription.requestKeyframe(feedID: feedID)
    }

    /// Asks Janus to cap what this participant sends at `bitsPerSecond` (VideoRoom `configure`
    /// `bitrate`). Janus passes the cap on as its REMB estimate, and the video sender follows it:
    /// one encoder lowers its bitrate, a simulcast sender pauses the layers that no longer fit.
    /// Holds until a rejoin, which publishes afresh at the room's bitrate.
    public func limitSentBitrate(_ bitsPerSecond: Int) async throws {
        guard let leg else { throw CallError.janus(step: "limiting the sent bitrate", error: "not in the call") }
        do {
            _ = try await leg.publisher.handle.configure(VideoRoom.configure(bitrate: bitsPerSecond))
        } catch {
            throw CallError.janus(step: "limiting the sent bitrate", error: "\(error)")
        }
    }

    /// A status snapshot; rates cover the time since the previous snapshot.
    public func status() async -> CallStatus {
        var loss: [String: Double] = [:]
        if let subscriber = leg?.subscription.subscriber {
            let statistics = await subscriber.statistics
            var lost: [String: (Int64, UInt64)] = [:]
            for stream in subscriber.streams {
                guard let feed = stream.feedID, let numbers = statistics[stream.mid],
                    let key = tracker.key(forFeed: feed)
                else { continue }
                let sum = lost[key] ?? (0, 0)
                lost[key] = (sum.0 + max(0, numbers.lost), sum.1 + numbers.packets)
            }
            for (key, value) in lost where value.0 + Int64(value.1) > 0 {
                loss[key] = Double(value.0) / Double(value.0 + Int64(value.1))
            }
        }
        let snapshot = tracker.snapshot(loss: loss)
        let sent = leg?.senders.reduce(0) { $0 + $1.sent.frames } ?? 0
        let failures = leg?.senders.reduce(0) { $0 + $1.sent.encryptionFailures } ?? 0
        let layers = leg?.senders.map(\.sent).first { $0.simulcastLayers > 1 }
        return CallStatus(
            elapsedMs: tracker.milliseconds(.now),
            startedAtUnixMs: tracker.originUnixMs,
            callId: String(configuration.callID),
            room: String(configuration.room),
            display: configuration.display,
            state: phase,
            janus: janusState,
            feed: leg?.publisher.feedID,
            framesSent: previousSent + sent,
            encryptionFailures: previousEncryptionFailures + failures,
            videoLayers: layers?.simulcastLayers,
            videoLayersSent: layers?.simulcastLayersSent,
            screenFeed: screenFeedID,
            recording: snapshot.recording,
            participants: snapshot.participants,
            recoveries: snapshot.recoveries
        )
    }

    /// Drops the Janus WebSocket as a network failure would (fault drills and tests): the
    /// connection reconnects and claims the session.
    package func dropJanusConnectionForTesting() async {
        await connection?.dropConnectionForTesting()
    }

    // MARK: Joining

    private func openLeg(on connection: JanusConnection, initial: Bool) async throws -> Leg {
        let session = try await connection.createSession()
        do {
            try await checkRoom(on: session, initial: initial)
            let publisher = try await Publisher.publish(
                on: session,
                configuration: Publisher.Configuration(
                    room: configuration.room,
                    display: configuration.display,
                    audio: sources.first { $0.codec.kind == .audio }?.codec,
                    video: sources.first { $0.codec.kind == .video }?.codec,
                    endToEndEncrypted: configuration.crypto != nil,
                    transport: configuration.transport,
                    simulcastLayers: sources.first { $0.codec.kind == .video }?.simulcastLayers ?? 1
                ),
                waitingForMedia: false,
                logger: logger
            )
            // Subscribing starts while the publisher's ICE and DTLS connect: the first frames of
            // the others arrive about one handshake sooner than if the two ran one after the other.
            let subscription = RoomSubscription(
                session: session,
                configuration: RoomSubscription.Configuration(
                    room: configuration.room,
                    ownFeedID: publisher.feedID,
                    crypto: configuration.crypto,
                    transport: configuration.transport,
                    layers: configuration.layers,
                    shownVideo: configuration.shownVideo
                ),
                initialPublishers: publisher.initialPublishers,
                roomEvents: publisher.roomEvents,
                observers: observers,
                logger: logger
            )
            do {
                try await publisher.connected(within: .seconds(10))
            } catch {
                await subscription.close()
                await publisher.close()
                throw error
            }
            generation += 1
            let generation = self.generation
            let main = startSending(sources, through: publisher, generation: generation)
            var screen: PublishedFeed?
            if let screenSource {
                do {
                    screen = try await publishScreen(
                        screenSource,
                        on: session,
                        subscription: subscription,
                        generation: generation
                    )
                } catch {
                    await Self.close(main, politely: false)
                    await subscription.close()
                    throw error
                }
            }
            let events = Task { [weak self] in
                for await event in session.events {
                    await self?.sessionEvent(event, generation: generation)
                }
            }
            // The subscriber's watchdog; each publisher's is started with its senders.
            let subscriberWatchdog = Task { [weak self, subscription] in
                for await reason in subscription.mediaFailures {
                    await self?.mediaFailed(reason, generation: generation)
                }
            }
            return Leg(
                generation: generation,
                session: session,
                main: main,
                screen: screen,
                tasks: [subscriberWatchdog, events],
                subscription: subscription
            )
        } catch {
            try? await session.destroy()
            throw error
        }
    }

    /// Starts a sender per source on `publisher`, and the tasks that follow its keyframe requests,
    /// bitrate limits and transport.
    private func startSending(
        _ sources: [RebasingFrameSource],
        through publisher: Publisher,
        generation: Int
    ) -> PublishedFeed {
        var senders: [MediaSender] = []
        var senderTasks: [Task<Void, Never>] = []
        let logger = self.logger
        for source in sources {
            source.rebase()
            let sender = MediaSender(
                source: source,
                encryptor: configuration.crypto?.makeEncryptor(
                    codec: source.codec,
                    senderID: publisher.feedID,
                    cipher: OpenSSLFrameCipher.self
                ),
                publisher: publisher,
                logger: logger
            )
            senders.append(sender)
            senderTasks.append(
                Task {
                    do {
                        try await sender.run(pacer: MediaPacer(sending: source))
                    } catch is CancellationError {
                    } catch {
                        logger.error(
                            "sending stopped",
                            metadata: ["codec": "\(sender.codec)", "error": "\(error)"]
                        )
                    }
                }
            )
        }
        let requests = Task { [senders] in
            for await codec in publisher.keyframeRequests {
                logger.debug("keyframe requested by Janus", metadata: ["codec": "\(codec)"])
                senders.first { $0.codec == codec }?.requestKeyframe()
            }
        }
        let bitrates = Task { [senders] in
            for await limit in publisher.bitrateLimits {
                senders.first { $0.codec.kind == .video }?.setBitrate(Int(clamping: limit))
            }
        }
        let interval = configuration.keyframeInterval
        let periodic = Task { [senders] in
            guard let interval else { return }
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                for sender in senders where sender.codec.kind == .video { sender.requestKeyframe() }
            }
        }
        // ICE or DTLS failed for good (a long outage): the call restarts ICE on both
        // PeerConnections, and publishes and subscribes again on a new session if that does not
        // bring media back. Woken by the transports' state changes, not by a timer; a failure
        // seen while another recovery runs is looked at again when it ends (`recheckMedia`).
        let watchdog = Task { [weak self, publisher] in
            for await state in publisher.transport.states {
                if case .failed(let reason) = state { await self?.mediaFailed(reason, generation: generation) }
            }
        }
        return PublishedFeed(
            publisher: publisher,
            senders: senders,
            senderTasks: senderTasks,
            tasks: [requests, bitrates, periodic, watchdog]
        )
    }

    /// Publishes `source` as our screen share: a second publisher in the room, with the display
    /// ``ParticipantDisplay/screenShare`` of ours and video only, which `subscription` leaves alone.
    ///
    /// Why a feed of its own rather than a second video stream in our feed: every receiver
    /// (browsers, ECall, recorders, Conclave's window) already shows and records one video per
    /// feed, so the screen reaches all of them as one more tile or track, beside the camera.
    private func publishScreen(
        _ source: RebasingFrameSource,
        on session: JanusSession,
        subscription: RoomSubscription,
        generation: Int
    ) async throws -> PublishedFeed {
        let started = ContinuousClock.now
        let publisher = try await Publisher.publish(
            on: session,
            configuration: Publisher.Configuration(
                room: configuration.room,
                display: ParticipantDisplay(parsing: configuration.display).screenShare.description,
                audio: nil,
                video: source.codec,
                endToEndEncrypted: configuration.crypto != nil,
                transport: configuration.transport,
                simulcastLayers: source.simulcastLayers
            ),
            waitingForMedia: false,
            logger: logger,
            joined: { subscription.ignore(feedID: $0) }
        )
        do {
            try await publisher.connected(within: .seconds(10))
        } catch {
            await publisher.close()
            throw error
        }
        logger.info(
            "sharing the screen",
            metadata: ["screenFeed": "\(publisher.feedID)", "took": "\(ContinuousClock.now - started)"]
        )
        return startSending([source], through: publisher, generation: generation)
    }

    /// Shares `source` (a screen) beside the call's video, as a feed of its own (see
    /// ``init(configuration:sources:screen:observers:tracker:logger:)``); recoveries publish it
    /// again. Throws when the screen is already shared, or when Janus refuses the feed.
    public func shareScreen(_ source: RebasingFrameSource) async throws(CallError) {
        guard screenSource == nil else {
            throw CallError.janus(step: "sharing the screen", error: "the screen is already shared")
        }
        screenSource = source
        // Not in the call yet, or recovering: the next leg publishes it.
        guard phase == .live, let leg else { return }
        do {
            try await attachScreen(source, to: leg)
        } catch {
            if screenSource === source { screenSource = nil }
            throw CallError.janus(step: "sharing the screen", error: "\(error)")
        }
    }

    /// Stops sharing the screen: its feed leaves the room. Nothing when it is not shared.
    public func stopSharingScreen() async {
        screenSource = nil
        guard let screen = leg?.screen else { return }
        leg?.screen = nil
        let started = ContinuousClock.now
        await Self.close(screen, politely: true)
        previousSent += screen.senders.reduce(0) { $0 + $1.sent.frames }
        previousEncryptionFailures += screen.senders.reduce(0) { $0 + $1.sent.encryptionFailures }
        logger.info(
            "screen sharing stopped",
            metadata: ["screenFeed": "\(screen.publisher.feedID)", "took": "\(ContinuousClock.now - started)"]
        )
    }

    /// Publishes `source` as `leg`'s screen. A recovery (which publishes the screen itself) or a
    /// stop may come while Janus answers: the feed is then taken out of the room again.
    private func attachScreen(_ source: RebasingFrameSource, to leg: Leg) async throws {
        let screen = try await publishScreen(
            source,
            on: leg.session,
            subscription: leg.subscription,
            generation: leg.generation
        )
        guard self.leg?.generation == leg.generation, self.leg?.screen == nil, screenSource === source else {
            await Self.close(screen, politely: true)
            return
        }
        self.leg?.screen = screen
    }

    /// Brings the leg's screen feed in line with ``screenSource`` after a recovery: a share or a
    /// stop that came while the leg was being built (the actor runs them at its awaits) would
    /// otherwise leave a screen published that is no longer shared, or one shared but missing.
    private func reconcileScreen() async {
        guard let leg, phase == .live else { return }
        if let screen = leg.screen, screenSource == nil {
            self.leg?.screen = nil
            await Self.close(screen, politely: true)
        } else if leg.screen == nil, let source = screenSource {
            do {
                try await attachScreen(source, to: leg)
            } catch {
                logger.warning("could not share the screen again after the recovery", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Whether the screen is shared now (or will be once the call is live again).
    public var sharesScreen: Bool { screenSource != nil }

    /// Checks that the room exists (recreating it during recovery) and that our user id is not
    /// already publishing there.
    private func checkRoom(on session: JanusSession, initial: Bool) async throws {
        let probe = try await VideoRoomHandle.attach(to: session)
        defer { Task { try? await probe.handle.detach() } }
        if try await !probe.roomExists(configuration.room) {
            guard !initial else { throw CallError.roomNotFound(room: configuration.room, url: configuration.janusURL) }
            logger.notice("the room is gone from Janus; creating it again", metadata: ["room": "\(configuration.room)"])
            do {
                _ = try await probe.createRoom(configuration.roomOptions)
            } catch let error as JanusClientError where error.janusError?.code == JanusError.videoRoomRoomExists {
                // Another participant recreated it first.
            }
            return
        }
        guard initial, !configuration.allowEarlierInstance,
            let userID = ParticipantDisplay(parsing: configuration.display).userID
        else { return }
        let participants = try await probe.listParticipants(room: configuration.room)
        if let earlier = participants.first(where: {
            $0.isPublisher && $0.display.flatMap { ParticipantDisplay(parsing: $0).userID } == userID
        }) {
            throw CallError.participantAlreadyPresent(userID: userID, feed: earlier.id, room: configuration.room)
        }
    }

    /// Acts on a transport that is still failed once a recovery is over: its failure may have come
    /// while that recovery ran, when ``mediaFailed(_:generation:)`` ignores it, and the watchdogs
    /// see only changes.
    private func recheckMedia() {
        guard let leg else { return }
        for state in leg.feeds.map(\.publisher.transport.state) + [leg.subscription.subscriber?.transport.state] {
            if case .failed(let reason)? = state {
                mediaFailed(reason, generation: leg.generation)
                return
            }
        }
    }

    private func mediaFailed(_ reason: MediaTransportFailure, generation: Int) {
        guard generation == leg?.generation, phase == .live, recoveryTask == nil, let leg else { return }
        logger.warning("media transport failed; restarting ICE", metadata: ["reason": "\(reason)"])
        tracker.recoveryStarted(.iceRestart)
        let logger = self.logger
        recoveryTask = Task {
            let restarted = await Self.restartICE(of: leg, within: .seconds(5), logger: logger)
            self.recoveryFinished()
            if restarted, generation == self.leg?.generation {
                self.tracker.recoveryFinished(as: .iceRestart)
                logger.notice("media recovered by ICE restart")
                self.recheckMedia()
            } else {
                logger.warning("ICE restart did not bring media back; joining again on a new session")
                self.startRecovery(newConnection: false, sessionAlive: true)
            }
        }
    }

    /// Restarts ICE on the leg's publisher and subscriber (DTLS and SRTP stay) and waits until
    /// both carry media again.
    private static func restartICE(of leg: Leg, within limit: Duration, logger: Logger) async -> Bool {
        do {
            for feed in leg.feeds { try await feed.publisher.restartICE() }
            let subscriber = leg.subscription.subscriber
            try await subscriber?.restartICE()
            for feed in leg.feeds { try await feed.publisher.transport.waitUntilConnected(within: limit) }
            try await subscriber?.transport.waitUntilConnected(within: limit)
            return true
        } catch {
            logger.info("ICE restart failed", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Asks our video senders for a keyframe (someone new will subscribe to us).
    private func requestKeyframes() {
        for sender in leg?.senders ?? [] where sender.codec.kind == .video { sender.requestKeyframe() }
    }

    // MARK: Recovery

    private func watch(_ connection: JanusConnection) {
        connectionTask?.cancel()
        connectionTask = Task { [weak self] in
            for await state in connection.states {
                await self?.connectionState(state, of: connection)
            }
        }
    }

    private func connectionState(_ state: JanusConnection.State, of connection: JanusConnection) async {
        guard connection === self.connection, phase == .live || phase == .recovering else { return }
        switch state {
        case .connected:
            janusState = .connected
        case .reconnecting(let attempt):
            janusState = .reconnecting
            if attempt <= 1, !tracker.recoveryInProgress {
                logger.notice("Janus connection dropped; reconnecting")
                tracker.recoveryStarted(.claim)
            }
        case .reconnected:
            janusState = .connected
        case .closed(let error):
            janusState = .closed
            logger.warning("Janus connection closed", metadata: ["error": "\(error.map(\.message) ?? "none")"])
            startRecovery(newConnection: true)
        }
    }

    private func sessionEvent(_ event: JanusSession.Event, generation: Int) async {
        guard generation == leg?.generation, phase == .live else { return }
        switch event {
        case .reclaimed:
            logger.notice("Janus session claimed on the new connection")
            tracker.recoveryFinished(as: .claim)
        case .lost(let error):
            logger.warning("Janus session lost; starting a new one", metadata: ["error": "\(error.message)"])
            startRecovery(newConnection: false)
        }
    }

    /// Runs recovery in a task of its own: the tasks that notice faults belong to the leg that
    /// recovery tears down, and their cancellation must not cancel the recovery.
    private func startRecovery(newConnection: Bool, sessionAlive: Bool = false) {
        guard phase == .live, recoveryTask == nil else { return }
        recoveryTask = Task {
            await self.recoverWithNewSession(newConnection: newConnection, sessionAlive: sessionAlive)
            self.recoveryFinished()
            self.recheckMedia()
        }
    }

    private func recoveryFinished() { recoveryTask = nil }

    /// Rebuilds the call on a new session (and a new connection if the old one gave up), retrying
    /// with backoff until it works or the call is left.
    private func recoverWithNewSession(newConnection: Bool, sessionAlive: Bool) async {
        guard phase == .live else { return }
        phase = .recovering
        if !tracker.recoveryInProgress { tracker.recoveryStarted(sessionAlive ? .media : .newSession) }
        if let old = leg {
            leg = nil
            for task in old.feeds.flatMap(\.senderTasks) { task.cancel() }
            for task in old.feeds.flatMap(\.senderTasks) { await task.value }
            previousSent += old.senders.reduce(0) { $0 + $1.sent.frames }
            previousEncryptionFailures += old.senders.reduce(0) { $0 + $1.sent.encryptionFailures }
            // A lost session: close its transports without waiting on Janus. A session that is
            // still alive (its media failed): leave and destroy it, so that its feed goes.
            Task { await Self.close(old, politely: sessionAlive) }
        }
        var needsConnection = newConnection
        var delay = Duration.milliseconds(250)
        while phase == .recovering {
            do {
                if needsConnection || self.connection == nil {
                    let old = self.connection
                    self.connection = nil
                    if let old { Task { await old.close() } }
                    let fresh = try await JanusConnection.connect(
                        to: configuration.janusURL,
                        options: configuration.connectionOptions,
                        logger: logger
                    )
                    guard phase == .recovering else {
                        await fresh.close()
                        return
                    }
                    self.connection = fresh
                    janusState = .connected
                    watch(fresh)
                    needsConnection = false
                }
                guard let connection else { continue }
                let fresh = try await openLeg(on: connection, initial: false)
                guard phase == .recovering else {
                    await Self.close(fresh, politely: true)
                    return
                }
                leg = fresh
                phase = .live
                await reconcileScreen()
                tracker.recoveryFinished(as: sessionAlive ? .mediaRejoin : .newSession)
                logger.notice("call recovered with a new session", metadata: ["feed": "\(fresh.publisher.feedID)"])
                return
            } catch {
                logger.info("recovery attempt failed", metadata: ["error": "\(error)", "retry": "\(delay)"])
                if janusState == .closed { needsConnection = true }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(2))
            }
        }
    }

    private static func close(_ leg: Leg, politely: Bool) async {
        for task in leg.tasks { task.cancel() }
        if politely {
            for feed in leg.feeds { await close(feed, politely: true) }
            await leg.subscription.close()
            try? await leg.session.destroy()
        } else {
            await leg.subscription.close()
            for feed in leg.feeds { await close(feed, politely: false) }
            leg.session.stopKeepalive()
        }
    }

    /// Stops a feed's senders and its tasks, then leaves the room with it (`politely`) or just
    /// closes its PeerConnection.
    private static func close(_ feed: PublishedFeed, politely: Bool) async {
        for task in feed.senderTasks { task.cancel() }
        for task in feed.senderTasks { await task.value }
        for task in feed.tasks { task.cancel() }
        if politely { await feed.publisher.leave() } else { await feed.publisher.close() }
    }
}

/// Calls a handler when a participant arrives (the call then sends a keyframe for their new
/// subscription).
final class ArrivalObserver: CallMediaObserver {
    private let handler = Mutex<(@Sendable () -> Void)?>(nil)

    func setHandler(_ body: @escaping @Sendable () -> Void) { handler.withLock { $0 = body } }

    func participantJoined(feedID: UInt64, display: String?) { handler.withLock { $0 }?() }
    func participantLeft(feedID: UInt64) {}
    func received(_ media: ReceivedMedia) {}
    func senderReport(_ report: SubscribedSenderReport) {}
}
