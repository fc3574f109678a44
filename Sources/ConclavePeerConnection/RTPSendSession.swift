import ConclaveCore
import ConclaveRTP
import ConclaveSDP
import Synchronization

/// The send side of RTP on one PeerConnection: frames packetized (VP8, H264, Opus), numbered by
/// each track's ``RTPSender`` (which keeps the history NACKs are answered from), protected and
/// sent; RTCP feedback from the receiver answered; a sender report per track every second.
///
/// Frames come from the senders' tasks and RTCP from the ICE loop thread, so the tracks are
/// behind one lock, taken once per frame and once per RTCP packet. Unlike the receive side, the
/// tracks are not bound to the loop: posting each frame there would wake the loop thread once per
/// frame, which costs far more than an uncontended lock (`bench/transport` prints both). Sender
/// reports run on a timer of the ICE loop, the loop that runs the transport's other timers.
public final class RTPSendSession: Sendable {
    /// What the receiver asked for in one RTCP compound packet (NACKs are answered inside).
    public struct Feedback: Sendable, Hashable {
        /// The codec of the track a keyframe was asked for (PLI or FIR).
        public var keyframe: MediaCodec?
        /// The bitrate limit (bits per second) of the last REMB.
        public var bitrateLimit: UInt64?

        public init(keyframe: MediaCodec? = nil, bitrateLimit: UInt64? = nil) {
            self.keyframe = keyframe
            self.bitrateLimit = bitrateLimit
        }
    }

    /// Send-side counters of one track.
    public struct StreamStatistics: Sendable, Hashable {
        public var codec: MediaCodec
        public var packets: UInt32
        public var bytes: UInt32
        public var retransmitted: UInt64
        public var pliReceived: UInt64
        public var firReceived: UInt64
    }

    /// One RTP stream: a track, or one simulcast layer of the video track. Each has its own
    /// packetizer, because a VP8 picture id counts the frames of its own stream.
    private struct Track {
        var codec: MediaCodec
        var sender: RTPSender
        var vp8 = VP8Packetizer()
        var h264 = H264Packetizer()

        mutating func packetize(_ frame: EncodedFrame) -> [[UInt8]] {
            codec == .vp8 ? vp8.packetize(frame.data) : h264.packetize(frame.data)
        }
    }

    private struct State {
        var audio: Track?
        /// The video track's streams, one per simulcast layer, lowest first (one without simulcast).
        var video: [Track]

        var tracks: [Track] { (audio.map { [$0] } ?? []) + video }
    }

    private let state: Mutex<State>
    private let transport: MediaTransport

    /// A session sending `audio` and `video` (each nil when not published) on `transport`,
    /// starting at random sequence numbers and timestamps as RFC 3550 asks.
    /// A simulcast video track sends one stream per SSRC of ``PublisherTrack/layerSSRCs``.
    public init(audio: PublisherTrack?, video: PublisherTrack?, transport: MediaTransport) {
        func track(_ track: PublisherTrack, ssrc: UInt32) -> Track {
            Track(
                codec: track.codec,
                sender: RTPSender(
                    sequencer: RTPSequencer(
                        ssrc: ssrc,
                        payloadType: track.payloadType,
                        initialSequenceNumber: UInt16.random(in: 0...UInt16.max),
                        timestampOffset: UInt32.random(in: 0...UInt32.max)
                    ),
                    clockRate: track.codec.clockRate
                )
            )
        }
        state = Mutex(
            State(
                audio: audio.map { track($0, ssrc: $0.ssrc) },
                video: video.map { video in video.layerSSRCs.map { track(video, ssrc: $0) } } ?? []
            )
        )
        self.transport = transport
    }

    /// Sends one encoded frame on the track of its kind (a video frame on the stream of its
    /// simulcast layer); frames of a codec or layer that is not sent are ignored. Returns the codec
    /// when a keyframe request the sender deferred is now due (the caller asks its encoder for one).
    public func send(_ frame: EncodedFrame) -> MediaCodec? {
        let now = MediaClock.now()
        var deferredKeyframe = false
        // Tracks are mutated in place: copying one out would copy its packet history.
        let packets = state.withLock { state -> [[UInt8]] in
            switch frame.codec.kind {
            case .audio:
                guard state.audio?.codec == frame.codec else { return [] }
                return state.audio?.sender.send(
                    payloads: OpusPayload.packetize(frame.data),
                    mediaTimestamp: frame.rtpTimestamp,
                    markLast: false,
                    now: now
                ) ?? []
            case .video:
                let layer = frame.simulcastLayer
                guard state.video.indices.contains(layer), state.video[layer].codec == frame.codec else { return [] }
                if state.video[layer].sender.dueKeyframeRequest(now: now) { deferredKeyframe = true }
                let payloads = state.video[layer].packetize(frame)
                return state.video[layer].sender.send(
                    payloads: payloads,
                    mediaTimestamp: frame.rtpTimestamp,
                    markLast: true,
                    now: now
                )
            }
        }
        for packet in packets { transport.sendRTP(packet) }
        return deferredKeyframe ? frame.codec : nil
    }

    /// Handles one RTCP compound packet from the receiver: NACKs are answered from the history at
    /// once, keyframe requests and bitrate limits are returned.
    public func receiveRTCP(_ packet: [UInt8]) -> Feedback {
        var feedback = Feedback()
        guard let packets = try? RTCPCompound.parse(packet) else { return feedback }
        let now = MediaClock.now()
        let arrival = MediaClock.wallClock()
        var retransmissions: [[UInt8]] = []
        state.withLock { state in
            for packet in packets {
                var actions =
                    (state.audio?.sender.handle(packet, now: now, arrivalNTP: arrival) ?? [])
                    .map { (state.audio?.codec, $0) }
                // A keyframe request for any layer asks the encoder for one (it makes every
                // layer's: Janus asks for all of them when a subscriber switches), and a REMB
                // naming any layer's SSRC limits the whole track, which the source divides.
                for layer in state.video.indices {
                    actions += state.video[layer].sender.handle(packet, now: now, arrivalNTP: arrival).map {
                        (state.video[layer].codec, $0)
                    }
                }
                for (codec, action) in actions {
                    switch action {
                    case .retransmit(let packets): retransmissions += packets
                    case .requestKeyframe: feedback.keyframe = codec
                    case .limitBitrate(let limit): feedback.bitrateLimit = limit
                    case .roundTripTime: break
                    }
                }
            }
        }
        // Each answer to a NACK goes out twice: Janus asks for a lost packet at most twice (after
        // 12 ms and 155 ms), so a retransmission lost on a lossy uplink would otherwise often be
        // lost for good, and with it every frame until the next keyframe. The duplicate costs a
        // few percent of bandwidth under loss and nothing without it; SRTP replay protection at
        // Janus drops whichever copy arrives second.
        for packet in retransmissions {
            transport.sendRTP(packet)
            transport.sendRTP(packet)
        }
        return feedback
    }

    /// Sends a sender report for each track every second, on the ICE loop, until the transport
    /// closes.
    public func startSenderReports() {
        let transport = self.transport
        transport.ice.repeatOnLoop(every: .seconds(1)) { [weak self] in
            guard let self, transport.state != .closed else { return false }
            self.sendSenderReports()
            return true
        }
    }

    /// Sends one sender report per track now.
    public func sendSenderReports() {
        let now = MediaClock.now()
        let wallClock = MediaClock.wallClock()
        let reports = state.withLock { state in
            state.tracks.compactMap { $0.sender.senderReport(now: now, wallClock: wallClock) }
        }
        for report in reports {
            transport.sendRTCP(RTCPCompound.serialize([.senderReport(report)]))
        }
    }

    /// Counters per stream: audio, then video (one per simulcast layer, lowest first).
    public var statistics: [StreamStatistics] {
        state.withLock { state in
            state.tracks.map {
                StreamStatistics(
                    codec: $0.codec,
                    packets: $0.sender.sequencer.packetCount,
                    bytes: $0.sender.sequencer.octetCount,
                    retransmitted: $0.sender.retransmitted,
                    pliReceived: $0.sender.pliReceived,
                    firReceived: $0.sender.firReceived
                )
            }
        }
    }
}
