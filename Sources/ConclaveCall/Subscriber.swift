import ConclaveCore
import ConclaveDTLS
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

/// The multistream subscriber of a VideoRoom: one PeerConnection receiving every subscribed feed.
///
/// Each m-line gets a jitter buffer that reorders, asks for retransmissions (NACK) and keyframes
/// (PLI), and delivers complete frames on ``frames``. Feeds are added and removed with
/// ``add(feeds:)`` and ``remove(feeds:)``; Janus's renegotiation offers are answered on the same
/// transport (no ICE restart).
public final class Subscriber: Sendable {
    /// The VideoRoom handle of the subscription.
    public let handle: VideoRoomHandle
    /// The secure transport.
    public let transport: MediaTransport
    /// Complete frames from every subscribed stream (unless a frame handler takes them).
    public let frames: AsyncStream<SubscribedFrame>
    /// Sender reports of the subscribed streams.
    public let senderReports: AsyncStream<SubscribedSenderReport>

    private let frameContinuation: AsyncStream<SubscribedFrame>.Continuation
    private let reportContinuation: AsyncStream<SubscribedSenderReport>.Continuation
    private let logger: Logger
    private let state = Mutex(ReceiveState())
    private let negotiation = NegotiationLock()
    private let tasks = Mutex<[Task<Void, Never>]>([])

    private struct Stream {
        var media: NegotiatedMedia
        var feedID: UInt64
        var feedMid: String?
        var buffer: JitterBuffer
        /// The SSRC Janus sends this stream with, from the offer or learned from its packets; the
        /// target of our NACKs and keyframe requests.
        var ssrc: UInt32?
        /// When ``Subscriber/requestKeyframe(feedID:)`` last sent a request for this stream: those
        /// requests are throttled on their own, as the jitter buffer throttles its own.
        var lastRequestedKeyframe: MonotonicTime?
        /// The command sequence number of our last FIR sent by `requestKeyframe(feedID:)` (FIR
        /// only, for a stream whose jitter buffer asks by FIR).
        var firSequence: UInt8 = 0
    }

    private struct ReceiveState {
        var streams: [String: Stream] = [:]
        var midBySSRC: [UInt32: String] = [:]
        var midExtensionID: UInt8?
        var localSSRC = UInt32.random(in: 1...UInt32.max)
        var local: LocalTransportParameters?
        var sessionVersion: UInt64 = 1
        var layout: [VideoRoom.SubscribedStream] = []
        var unknownPackets = 0
        /// The jitter-buffer timer (see `armTimer`): when it is due, nil while none is armed.
        var timerDeadline: MonotonicTime?
        /// Identifies the armed timer; a timer superseded by an earlier one finds a newer number
        /// here when it fires, and does nothing.
        var timerGeneration: UInt64 = 0
        /// Where complete frames go instead of `frames`, if set (see `subscribe`).
        var frameHandler: (@Sendable (SubscribedFrame) -> Void)?
    }

    /// Subscribes to `feeds` in `room`; returns once media can flow.
    ///
    /// With `frameHandler`, complete frames are passed to it synchronously on the receive thread
    /// (where packets are handled; it must not block) and ``frames`` stays empty. That saves a
    /// thread hop per frame for consumers that only hand frames on, such as ``MediaReceiver``.
    public static func subscribe(
        on session: JanusSession,
        room: UInt64,
        feeds: [UInt64],
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
                streams: feeds.map { VideoRoom.StreamSelection(feed: $0) },
                privateID: privateID
            )
            try await subscriber.answer(offer, layout: streams)
            try await transport.waitUntilConnected(within: .seconds(10))
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
        state.withLock { $0.frameHandler = frameHandler }
        (frames, frameContinuation) = AsyncStream.makeStream(of: SubscribedFrame.self, bufferingPolicy: .unbounded)
        (senderReports, reportContinuation) = AsyncStream.makeStream(
            of: SubscribedSenderReport.self,
            bufferingPolicy: .bufferingNewest(256)
        )
        transport.setHandlers(
            rtp: { [weak self] packet in self?.receiveRTP(packet) },
            rtcp: { [weak self] packet in self?.receiveRTCP(packet) }
        )
        startListening()
        startReporting()
        let trickle = transport.trickleCandidates(to: handle.handle)
        tasks.withLock { $0.append(trickle) }
    }

    /// The streams currently subscribed, as Janus last described them.
    public var streams: [VideoRoom.SubscribedStream] { state.withLock { $0.layout } }

    /// Receive statistics per mid.
    public var statistics: [String: ReceiveStatistics] {
        state.withLock { $0.streams.mapValues { $0.buffer.statistics } }
    }

    /// Asks the publisher of `feedID` for a video keyframe: an RTCP PLI (or FIR, when that is how
    /// the stream's jitter buffer asks) about the feed's video stream, sent at once; returns
    /// whether one went out.
    ///
    /// For a consumer that loses decoder state the jitter buffer cannot see (a recorder whose
    /// frames did not decrypt, or that starts a new file): the jitter buffer asks only for what it
    /// sees missing (lost packets, no keyframe yet since the stream started). Requests are throttled per stream at the jitter buffer's
    /// `keyframeRequestInterval` (500 ms), so a caller asking in a loop cannot flood the sender.
    /// Callable from any thread; it takes the receive lock briefly and never waits on the network.
    @discardableResult
    public func requestKeyframe(feedID: UInt64) -> Bool {
        let now = MediaClock.now()
        let packets = state.withLock { state -> [[UInt8]] in
            var packets: [[UInt8]] = []
            for mid in Array(state.streams.keys) {
                // Fields only, never the whole stream: a copy of it alive across the mutations
                // below would copy its jitter buffer's storage.
                guard state.streams[mid]?.feedID == feedID, state.streams[mid]?.media.kind == .video,
                    let mediaSSRC = state.streams[mid]?.ssrc,
                    let configuration = state.streams[mid]?.buffer.configuration
                else { continue }
                if let last = state.streams[mid]?.lastRequestedKeyframe,
                    now.since(last) < configuration.keyframeRequestInterval
                {
                    continue
                }
                let request: RTCPPacket
                switch configuration.keyframeRequestMethod {
                case .none: continue
                case .pli: request = .pictureLossIndication(.init(senderSSRC: state.localSSRC, mediaSSRC: mediaSSRC))
                case .fir:
                    state.streams[mid]?.firSequence &+= 1
                    let sequence = state.streams[mid]?.firSequence ?? 0
                    request = .fullIntraRequest(
                        .init(senderSSRC: state.localSSRC, entries: [.init(ssrc: mediaSSRC, sequenceNumber: sequence)])
                    )
                }
                state.streams[mid]?.lastRequestedKeyframe = now
                // Led by a receiver report with a block about the stream, as the jitter buffer's
                // own feedback is (`JitterBufferOutput.feedbackPackets`): Janus finds the stream a
                // compound packet is about from that block, not from the PLI or FIR.
                var block =
                    state.streams[mid]?.buffer.makeReportBlock(now: now)
                    ?? RTCPReportBlock(
                        ssrc: mediaSSRC,
                        fractionLost: 0,
                        cumulativeLost: 0,
                        extendedHighestSequence: 0,
                        jitter: 0,
                        lastSenderReport: 0,
                        delaySinceLastSenderReport: 0
                    )
                block.ssrc = mediaSSRC
                let feedback: [RTCPPacket] = [
                    .receiverReport(RTCPReceiverReport(ssrc: state.localSSRC, reports: [block])), request,
                ]
                packets.append(RTCPCompound.serialize(feedback))
            }
            return packets
        }
        for packet in packets { transport.sendRTCP(packet) }
        return !packets.isEmpty
    }

    /// Adds every stream of `feeds` to the subscription.
    public func add(feeds: [UInt64]) async throws {
        guard !feeds.isEmpty else { return }
        let (streams, offer) = try await handle.subscribe(feeds.map { VideoRoom.StreamSelection(feed: $0) })
        if let offer { try await answer(offer, layout: streams) }
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
                sessionID: "\(state.withLock { $0.localSSRC })",
                sessionVersion: version
            )
            state.withLock { state in
                state.local = local
                state.layout = layout.isEmpty ? state.layout : layout
                var kept: [String: Stream] = [:]
                for media in result.media {
                    let described = layout.first { $0.mid == media.mid }
                    let feedID = described?.feedID ?? state.streams[media.mid]?.feedID ?? 0
                    if var existing = state.streams[media.mid], existing.media.codec == media.codec,
                        existing.media.remoteSSRC == media.remoteSSRC, existing.feedID == feedID
                    {
                        existing.media = media
                        kept[media.mid] = existing
                    } else {
                        let configuration =
                            media.kind == .audio
                            ? JitterBufferConfiguration.audio(media.codec)
                            : JitterBufferConfiguration.video(media.codec)
                        kept[media.mid] = Stream(
                            media: media,
                            feedID: feedID,
                            feedMid: described?.feedMid,
                            buffer: JitterBuffer(configuration: configuration),
                            ssrc: media.remoteSSRC
                        )
                    }
                    if let id = media.extensionIDs[RTPHeaderExtensionURI.mid] { state.midExtensionID = id }
                }
                state.streams = kept
                state.midBySSRC = [:]
                for (mid, stream) in kept {
                    if let ssrc = stream.media.remoteSSRC { state.midBySSRC[ssrc] = mid }
                }
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
                default:
                    break
                }
            }
        }
    }

    // MARK: Receive path (ICE loop thread)

    private func receiveRTP(_ bytes: [UInt8]) {
        guard let packet = try? RTPPacket(parsing: bytes) else { return }
        let now = MediaClock.now()
        var handler: (@Sendable (SubscribedFrame) -> Void)?
        var timer: (generation: UInt64, deadline: MonotonicTime)?
        let (frames, feedback) = state.withLock { state -> ([SubscribedFrame], [[UInt8]]) in
            handler = state.frameHandler
            var mid = state.midBySSRC[packet.ssrc]
            if mid == nil, let id = state.midExtensionID, let value = packet.extensionValue(id: id) {
                let candidate = String(decoding: value, as: UTF8.self)
                if state.streams[candidate] != nil {
                    mid = candidate
                    state.midBySSRC[packet.ssrc] = candidate
                }
            }
            guard let mid, state.streams[mid]?.media.payloadType == packet.payloadType else {
                state.unknownPackets += 1
                return ([], [])
            }
            // Mutate the stream in place: copying it out would copy its jitter buffer's storage.
            if state.streams[mid]?.ssrc != packet.ssrc { state.streams[mid]?.ssrc = packet.ssrc }
            let output = state.streams[mid]?.buffer.receive(packet, arrival: now)
            // Only this stream changed: a loss or a partly received frame may need the timer sooner.
            timer = Self.armTimer(for: state.streams[mid]?.buffer.nextDeadline, in: &state)
            // Most packets complete nothing and ask for nothing: then the stream is not copied out.
            guard let output, !output.isEmpty, let stream = state.streams[mid] else { return ([], []) }
            return Self.deliver(output, stream: stream, mid: mid, localSSRC: state.localSSRC)
        }
        if let timer { schedule(timer) }
        hand(frames, to: handler)
        for packet in feedback { transport.sendRTCP(packet) }
    }

    /// Passes frames to the synchronous handler, or else to `frames`.
    private func hand(_ frames: [SubscribedFrame], to handler: (@Sendable (SubscribedFrame) -> Void)?) {
        guard !frames.isEmpty else { return }
        if let handler {
            for frame in frames { handler(frame) }
        } else {
            for frame in frames { frameContinuation.yield(frame) }
        }
    }

    private func receiveRTCP(_ bytes: [UInt8]) {
        guard let packets = try? RTCPCompound.parse(bytes) else { return }
        let now = MediaClock.now()
        for case .senderReport(let report) in packets {
            let target = state.withLock { state -> (String, UInt64)? in
                guard let mid = state.midBySSRC[report.ssrc], let feedID = state.streams[mid]?.feedID else {
                    return nil
                }
                state.streams[mid]?.buffer.noteSenderReport(report, arrival: now)
                return (mid, feedID)
            }
            if let (mid, feedID) = target {
                reportContinuation.yield(
                    SubscribedSenderReport(feedID: feedID, mid: mid, report: report, arrival: now)
                )
            }
        }
    }

    private static func deliver(_ output: JitterBufferOutput, stream: Stream, mid: String, localSSRC: UInt32)
        -> ([SubscribedFrame], [[UInt8]])
    {
        let frames = output.frames.map {
            SubscribedFrame(
                feedID: stream.feedID,
                feedMid: stream.feedMid,
                mid: mid,
                frame: $0.frame,
                ssrc: $0.ssrc,
                arrival: $0.completionTime,
                framesLostBefore: $0.framesLostBefore
            )
        }
        guard let mediaSSRC = stream.ssrc ?? output.frames.first?.ssrc else { return (frames, []) }
        let feedback = output.feedbackPackets(senderSSRC: localSSRC, mediaSSRC: mediaSSRC)
        return (frames, feedback.isEmpty ? [] : [RTCPCompound.serialize(feedback)])
    }

    /// Receiver reports for every stream once a second, on the ICE loop thread beside the
    /// receive path (a Swift task sleeping in a loop would cost a timer thread hop each time).
    private func startReporting() {
        transport.ice.repeatOnLoop(every: .seconds(1)) { [weak self] in
            guard let self else { return false }
            self.sendReceiverReports()
            return true
        }
    }

    private func sendReceiverReports() {
        let now = MediaClock.now()
        let report = state.withLock { state -> [UInt8]? in
            var blocks: [RTCPReportBlock] = []
            // Over a copy of the keys: iterating the dictionary's own key view keeps a second
            // reference to its storage, so the first mutation below would copy the whole
            // dictionary (and then each jitter buffer's packet ring).
            for mid in Array(state.streams.keys) {
                if let block = state.streams[mid]?.buffer.makeReportBlock(now: now) { blocks.append(block) }
            }
            guard !blocks.isEmpty else { return nil }
            return RTCPCompound.serialize(
                [.receiverReport(RTCPReceiverReport(ssrc: state.localSSRC, reports: blocks))]
            )
        }
        if let report { transport.sendRTCP(report) }
    }

    // MARK: Jitter-buffer timer (ICE loop thread)
    //
    // The jitter buffers need time to pass only while they wait for something: a NACK to send or
    // retry, a missing packet to give up on, an incomplete frame to drop. Instead of ticking every
    // buffer every 20 ms (50 wakeups a second even for a loss-free stream, the largest fixed cost
    // of receiving one feed), one one-shot timer on the loop thread is armed for the earliest
    // deadline any buffer reports (`JitterBuffer.nextDeadline`) and none while no buffer waits.
    // The receive path arms it when a packet creates an earlier deadline; when it fires it ticks
    // every buffer and arms itself again for the next deadline, if any.

    /// Arms the timer for `deadline` unless one is already armed for that instant or earlier;
    /// returns the timer to schedule (outside the lock), or nil.
    private static func armTimer(for deadline: MonotonicTime?, in state: inout ReceiveState) -> (
        generation: UInt64, deadline: MonotonicTime
    )? {
        guard let deadline else { return nil }
        if let armed = state.timerDeadline, armed <= deadline { return nil }
        // A later timer still pending is superseded: it finds a newer generation and does nothing.
        state.timerGeneration &+= 1
        state.timerDeadline = deadline
        return (state.timerGeneration, deadline)
    }

    /// Starts a one-shot GLib timeout on the loop thread for an armed timer.
    private func schedule(_ timer: (generation: UInt64, deadline: MonotonicTime)) {
        // Whole milliseconds, rounded up: a timer that fired early would only arm itself again.
        let microseconds = max(timer.deadline.microseconds - MediaClock.now().microseconds, 0)
        let milliseconds = max((microseconds + 999) / 1000, 1)
        transport.ice.repeatOnLoop(every: .milliseconds(milliseconds)) { [weak self] in
            self?.timerFired(generation: timer.generation)
            return false
        }
    }

    private func timerFired(generation: UInt64) {
        let now = MediaClock.now()
        var handler: (@Sendable (SubscribedFrame) -> Void)?
        var next: (generation: UInt64, deadline: MonotonicTime)?
        let (frames, feedback) = state.withLock { state -> ([SubscribedFrame], [[UInt8]]) in
            guard state.timerGeneration == generation else { return ([], []) }
            state.timerDeadline = nil
            handler = state.frameHandler
            var frames: [SubscribedFrame] = []
            var feedback: [[UInt8]] = []
            var earliest: MonotonicTime?
            // Over a copy of the keys, as in `sendReceiverReports`.
            for mid in Array(state.streams.keys) {
                // In place, as in receiveRTP: no copy of the jitter buffer.
                guard let output = state.streams[mid]?.buffer.tick(now: now) else { continue }
                if let deadline = state.streams[mid]?.buffer.nextDeadline, earliest.map({ deadline < $0 }) ?? true {
                    earliest = deadline
                }
                guard !output.isEmpty, let stream = state.streams[mid] else { continue }
                let (f, b) = Self.deliver(output, stream: stream, mid: mid, localSSRC: state.localSSRC)
                frames += f
                feedback += b
            }
            next = Self.armTimer(for: earliest, in: &state)
            return (frames, feedback)
        }
        if let next { schedule(next) }
        hand(frames, to: handler)
        for packet in feedback { transport.sendRTCP(packet) }
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
