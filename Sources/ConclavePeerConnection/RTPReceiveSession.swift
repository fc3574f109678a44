import ConclaveCore
import ConclaveICE
import ConclaveRTP
import ConclaveSDP

/// The receive side of RTP on one PeerConnection: each packet routed to its stream (by SSRC,
/// else by the mid header extension, with ``RTPStreamRouter``), reordered and depacketized by the
/// stream's ``JitterBuffer``, which also asks for retransmissions (NACK) and keyframes (PLI or
/// FIR); receiver reports every second; sender reports passed on for synchronization.
///
/// A ``Source`` says who sends a stream (for a VideoRoom subscription, the publisher's feed); the
/// session only carries it to the frames and reports it delivers. It is a concrete type, not a
/// generic parameter, so that the per-packet path is compiled for it (a generic class from
/// another module runs unspecialized).
///
/// Packets, the jitter-buffer timer and receiver reports all run on the ICE loop thread, which
/// owns the streams (a `ConclaveICE.LoopBound`): a received packet takes no lock. Negotiation
/// (a task), keyframe requests (a recorder thread) and statistics (a status task) post their
/// work to the loop and await it, one hop each, none of them per packet.
public final class RTPReceiveSession: Sendable {
    /// Who sends a stream: an id (a VideoRoom feed) and the stream's mid at the sender. Two
    /// sources are the same sender when their ids are: a sender's mid described anew does not
    /// restart its stream.
    public struct Source: Sendable, Equatable {
        public var id: UInt64
        public var mid: String?

        public init(id: UInt64, mid: String? = nil) {
            self.id = id
            self.mid = mid
        }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
    }

    /// One complete frame of a stream.
    public struct Frame: Sendable {
        public var source: Source
        /// The mid of the stream's m-line in our PeerConnection.
        public var mid: String
        /// The frame, as the sender sent it.
        public var frame: EncodedFrame
        /// The SSRC the stream arrives with.
        public var ssrc: UInt32
        /// When the frame's last packet arrived (media clock).
        public var arrival: MonotonicTime
        /// Frames of this stream the jitter buffer gave up on just before this one.
        public var framesLostBefore: Int
    }

    /// A sender report about a received stream: the NTP/RTP mapping recordings use for sync.
    public struct SenderReport: Sendable {
        public var source: Source
        public var mid: String
        public var report: RTCPSenderReport
        /// When it arrived (media clock).
        public var arrival: MonotonicTime
    }

    private struct Stream {
        var media: NegotiatedMedia
        var source: Source
        var buffer: JitterBuffer
        /// The SSRC the stream arrives with, from the offer or learned from its packets; the
        /// target of our NACKs and keyframe requests.
        var ssrc: UInt32?
        /// When ``RTPReceiveSession/requestKeyframe(from:)`` last sent a request for this stream:
        /// those requests are throttled on their own, as the jitter buffer throttles its own.
        var lastRequestedKeyframe: MonotonicTime?
        /// The command sequence number of our last FIR sent by `requestKeyframe(from:)` (FIR only,
        /// for a stream whose jitter buffer asks by FIR).
        var firSequence: UInt8 = 0
    }

    private struct State {
        var streams: [String: Stream] = [:]
        var router = RTPStreamRouter(midExtensionID: nil)
        var midExtensionID: UInt8?
        var unknownPackets = 0
        /// The jitter-buffer timer (see `armTimer`): when it is due, nil while none is armed.
        var timerDeadline: MonotonicTime?
        /// Identifies the armed timer; a timer superseded by an earlier one finds a newer number
        /// here when it fires, and does nothing.
        var timerGeneration: UInt64 = 0
    }

    /// Our SSRC in RTCP feedback and receiver reports.
    public let localSSRC = UInt32.random(in: 1...UInt32.max)
    private let state: LoopBound<State>
    private let transport: MediaTransport
    private let onFrame: @Sendable (Frame) -> Void
    private let onSenderReport: @Sendable (SenderReport) -> Void

    /// Receives on `transport` (it becomes the transport's RTP and RTCP handler): complete frames
    /// go to `onFrame` and sender reports to `onSenderReport`, synchronously on the ICE loop
    /// thread (they must not block).
    public init(
        transport: MediaTransport,
        onFrame: @escaping @Sendable (Frame) -> Void,
        onSenderReport: @escaping @Sendable (SenderReport) -> Void
    ) {
        self.transport = transport
        self.onFrame = onFrame
        self.onSenderReport = onSenderReport
        state = LoopBound(State(), on: transport.ice)
        transport.setHandlers(
            rtp: { [weak self] packet in self?.receiveRTP(packet) },
            rtcp: { [weak self] packet in self?.receiveRTCP(packet) }
        )
        startReporting()
    }

    /// Sets the streams after a negotiation. A stream whose codec, SSRC and source did not change
    /// keeps its jitter buffer (and so its state); the others start afresh. `source` names the
    /// sender of a negotiated stream, given the source it had before, if any; it runs on the ICE
    /// loop thread, which this awaits.
    public func configure(
        _ media: [NegotiatedMedia],
        source: @escaping @Sendable (NegotiatedMedia, Source?) -> Source
    ) async {
        await state.run { state in
            var kept: [String: Stream] = [:]
            for media in media {
                let existing = state.streams[media.mid]
                let source = source(media, existing?.source)
                if var existing, existing.media.codec == media.codec, existing.media.remoteSSRC == media.remoteSSRC,
                    existing.source == source
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
                        source: source,
                        buffer: JitterBuffer(configuration: configuration),
                        ssrc: media.remoteSSRC
                    )
                }
                if let id = RTPHeaderExtensionMap(ids: media.extensionIDs).mid { state.midExtensionID = id }
            }
            state.streams = kept
            state.router = RTPStreamRouter(midExtensionID: state.midExtensionID)
            for (mid, stream) in kept {
                if let ssrc = stream.media.remoteSSRC { state.router.bind(ssrc: ssrc, to: mid) }
            }
        }
    }

    /// Receive statistics per mid, read on the ICE loop thread.
    public var statistics: [String: ReceiveStatistics] {
        get async { await state.run { $0.streams.mapValues { $0.buffer.statistics } } }
    }

    /// RTP packets dropped because no negotiated stream takes them (an SSRC not announced and no
    /// mid extension, or a payload type the stream does not use), read on the ICE loop thread.
    public var unroutedPackets: Int {
        get async { await state.run { $0.unknownPackets } }
    }

    /// Asks the sender of every video stream of `source` for a keyframe: an RTCP PLI (or FIR,
    /// when that is how the stream's jitter buffer asks), sent at once from the ICE loop thread;
    /// returns whether one went out. Throttled per stream at the jitter buffer's
    /// `keyframeRequestInterval`. Callable from any task; it waits for the loop (one hop), never
    /// for the network.
    @discardableResult
    public func requestKeyframe(from source: Source) async -> Bool {
        let localSSRC = self.localSSRC
        let transport = self.transport
        return await state.run { state in
            let packets = Self.keyframeRequests(from: source, localSSRC: localSSRC, now: MediaClock.now(), in: &state)
            for packet in packets { transport.sendRTCP(packet) }
            return !packets.isEmpty
        }
    }

    /// The RTCP feedback that asks for a keyframe of each video stream of `source`, led by a
    /// receiver report (see `requestKeyframe(from:)`); notes each request for the throttle.
    private static func keyframeRequests(
        from source: Source,
        localSSRC: UInt32,
        now: MonotonicTime,
        in state: inout State
    ) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        for mid in Array(state.streams.keys) {
            // Fields only, never the whole stream: a copy of it alive across the mutations
            // below would copy its jitter buffer's storage.
            guard state.streams[mid]?.source == source, state.streams[mid]?.media.kind == .video,
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
            case .pli: request = .pictureLossIndication(.init(senderSSRC: localSSRC, mediaSSRC: mediaSSRC))
            case .fir:
                state.streams[mid]?.firSequence &+= 1
                let sequence = state.streams[mid]?.firSequence ?? 0
                request = .fullIntraRequest(
                    .init(senderSSRC: localSSRC, entries: [.init(ssrc: mediaSSRC, sequenceNumber: sequence)])
                )
            }
            state.streams[mid]?.lastRequestedKeyframe = now
            // Led by a receiver report with a block about the stream, as the jitter buffer's
            // own feedback is (`JitterBufferOutput.feedbackPackets`): Janus finds the stream a
            // compound packet is about from that block, not from the PLI or FIR.
            var block =
                state.streams[mid]?.buffer.makeReportBlock(now: now)
                ?? .nothingReceived(ssrc: mediaSSRC)
            block.ssrc = mediaSSRC
            let feedback: [RTCPPacket] = [
                .receiverReport(RTCPReceiverReport(ssrc: localSSRC, reports: [block])), request,
            ]
            packets.append(RTCPCompound.serialize(feedback))
        }
        return packets
    }

    // MARK: Receive path (ICE loop thread)

    /// One plain RTP packet, on the ICE loop thread (internal for tests, which feed packets
    /// without SRTP).
    func receiveRTP(_ bytes: [UInt8]) {
        guard let packet = try? RTPPacket(parsing: bytes) else { return }
        let now = MediaClock.now()
        var timer: (generation: UInt64, deadline: MonotonicTime)?
        let localSSRC = self.localSSRC
        let (frames, feedback) = state.withValue { state -> ([Frame], [[UInt8]]) in
            guard let mid = state.router.route(packet), state.streams[mid]?.media.payloadType == packet.payloadType
            else {
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
            return Self.deliver(output, stream: stream, mid: mid, localSSRC: localSSRC)
        }
        if let timer { schedule(timer) }
        for frame in frames { onFrame(frame) }
        for packet in feedback { transport.sendRTCP(packet) }
    }

    private func receiveRTCP(_ bytes: [UInt8]) {
        guard let packets = try? RTCPCompound.parse(bytes) else { return }
        let now = MediaClock.now()
        for case .senderReport(let report) in packets {
            let target = state.withValue { state -> (String, Source)? in
                // Sender reports come once a second per stream: a scan of the streams is cheap.
                guard let mid = state.streams.first(where: { $0.value.ssrc == report.ssrc })?.key,
                    let source = state.streams[mid]?.source
                else { return nil }
                state.streams[mid]?.buffer.noteSenderReport(report, arrival: now)
                return (mid, source)
            }
            if let (mid, source) = target {
                onSenderReport(SenderReport(source: source, mid: mid, report: report, arrival: now))
            }
        }
    }

    private static func deliver(_ output: JitterBufferOutput, stream: Stream, mid: String, localSSRC: UInt32)
        -> ([Frame], [[UInt8]])
    {
        let frames = output.frames.map {
            Frame(
                source: stream.source,
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
        let localSSRC = self.localSSRC
        let report = state.withValue { state -> [UInt8]? in
            var blocks: [RTCPReportBlock] = []
            // Over a copy of the keys: iterating the dictionary's own key view keeps a second
            // reference to its storage, so the first mutation below would copy the whole
            // dictionary (and then each jitter buffer's packet ring).
            for mid in Array(state.streams.keys) {
                if let block = state.streams[mid]?.buffer.makeReportBlock(now: now) { blocks.append(block) }
            }
            guard !blocks.isEmpty else { return nil }
            return RTCPCompound.serialize([.receiverReport(RTCPReceiverReport(ssrc: localSSRC, reports: blocks))])
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
    private static func armTimer(for deadline: MonotonicTime?, in state: inout State) -> (
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
        let localSSRC = self.localSSRC
        var next: (generation: UInt64, deadline: MonotonicTime)?
        let (frames, feedback) = state.withValue { state -> ([Frame], [[UInt8]]) in
            guard state.timerGeneration == generation else { return ([], []) }
            state.timerDeadline = nil
            var frames: [Frame] = []
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
                let (f, b) = Self.deliver(output, stream: stream, mid: mid, localSSRC: localSSRC)
                frames += f
                feedback += b
            }
            next = Self.armTimer(for: earliest, in: &state)
            return (frames, feedback)
        }
        if let next { schedule(next) }
        for frame in frames { onFrame(frame) }
        for packet in feedback { transport.sendRTCP(packet) }
    }
}
