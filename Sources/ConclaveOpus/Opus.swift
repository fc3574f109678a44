internal import COpus
internal import COpusShims
public import ConclaveCore

/// A libopus failure, with the operation that failed and libopus's own explanation.
public struct OpusCodecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What we were doing (`create encoder`, `set bitrate`, `decode`, ...).
    public var operation: String
    /// The libopus error code (negative), or 0 for a check made before calling libopus.
    public var code: Int32
    /// A human-readable reason.
    public var reason: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        self.reason = String(cString: opus_strerror(code))
    }

    init(_ operation: String, reason: String) {
        self.operation = operation
        self.code = 0
        self.reason = reason
    }

    public var description: String { "opus \(operation) failed: \(reason)" }
}

/// Settings for an Opus encoder as WebRTC uses it: 48 kHz, 20 ms frames.
public struct OpusEncoderConfiguration: Sendable, Hashable {
    /// 1 or 2.
    public var channels: Int
    /// Target bitrate in bits per second (6 000 ... 510 000).
    public var bitrate: Int
    /// In-band forward error correction (`useinbandfec=1`): each packet carries a low-bitrate copy
    /// of the previous one, so a receiver can recover a single lost packet.
    public var inbandFEC: Bool
    /// The packet loss the encoder should plan FEC for, in percent. FEC only kicks in above 0.
    public var expectedPacketLossPercent: Int
    /// Discontinuous transmission (`usedtx=1`): during silence the encoder emits tiny packets that
    /// need not be sent.
    public var dtx: Bool
    /// 0 (fastest) ... 10 (best).
    public var complexity: Int

    /// Creates a configuration; the defaults match a browser's voice call.
    public init(
        channels: Int = 1,
        bitrate: Int = 32_000,
        inbandFEC: Bool = true,
        expectedPacketLossPercent: Int = 10,
        dtx: Bool = false,
        complexity: Int = 9
    ) {
        self.channels = channels
        self.bitrate = bitrate
        self.inbandFEC = inbandFEC
        self.expectedPacketLossPercent = expectedPacketLossPercent
        self.dtx = dtx
        self.complexity = complexity
    }
}

/// Encodes 20 ms blocks of 48 kHz PCM into Opus packets.
///
/// Not thread-safe: one task owns an encoder.
public final class OpusAudioEncoder {
    /// Samples per channel in one 20 ms frame at 48 kHz.
    public static let samplesPerFrame = 960

    /// The settings in force.
    public private(set) var configuration: OpusEncoderConfiguration
    private let encoder: OpaquePointer
    private var output = [UInt8](repeating: 0, count: 4_000)

    /// Creates an encoder; fails with the libopus reason when a setting is out of range.
    public init(configuration: OpusEncoderConfiguration = OpusEncoderConfiguration()) throws(OpusCodecError) {
        guard configuration.channels == 1 || configuration.channels == 2 else {
            throw OpusCodecError("create encoder", reason: "\(configuration.channels) channels; only 1 or 2")
        }
        var error: Int32 = OPUS_OK
        guard
            let encoder = opus_encoder_create(
                Int32(AudioFrame.sampleRate),
                Int32(configuration.channels),
                OPUS_APPLICATION_VOIP,
                &error
            ),
            error == OPUS_OK
        else { throw OpusCodecError("create encoder", code: error) }
        self.encoder = encoder
        self.configuration = configuration
        // A failing setting throws with the object fully initialized, so deinit destroys the encoder.
        try check("set bitrate", cshim_opus_encoder_set_bitrate(encoder, Int32(clamping: configuration.bitrate)))
        try check("set in-band FEC", cshim_opus_encoder_set_inband_fec(encoder, configuration.inbandFEC ? 1 : 0))
        try check(
            "set packet loss",
            cshim_opus_encoder_set_packet_loss_perc(
                encoder,
                Int32(clamping: max(0, min(100, configuration.expectedPacketLossPercent)))
            )
        )
        try check("set DTX", cshim_opus_encoder_set_dtx(encoder, configuration.dtx ? 1 : 0))
        try check(
            "set complexity",
            cshim_opus_encoder_set_complexity(encoder, Int32(clamping: configuration.complexity))
        )
    }

    deinit { opus_encoder_destroy(encoder) }

    /// The encoder's delay in samples (the `pre-skip` an Ogg or Matroska file must announce).
    public var lookahead: Int {
        var samples: Int32 = 0
        _ = cshim_opus_encoder_get_lookahead(encoder, &samples)
        return Int(samples)
    }

    /// Changes the target bitrate from the next packet on.
    public func setBitrate(_ bitsPerSecond: Int) throws(OpusCodecError) {
        try check("set bitrate", cshim_opus_encoder_set_bitrate(encoder, Int32(clamping: bitsPerSecond)))
        configuration.bitrate = bitsPerSecond
    }

    /// Encodes one 20 ms frame.
    ///
    /// Returns nil when DTX decided the packet need not be sent (libopus returns 2 bytes or fewer
    /// during silence). The packet's RTP timestamp is the frame's.
    public func encode(_ frame: AudioFrame) throws(OpusCodecError) -> EncodedFrame? {
        guard frame.channels == configuration.channels else {
            throw OpusCodecError(
                "encode",
                reason: "frame has \(frame.channels) channels, encoder \(configuration.channels)"
            )
        }
        guard frame.samplesPerChannel == Self.samplesPerFrame else {
            throw OpusCodecError(
                "encode",
                reason: "frame has \(frame.samplesPerChannel) samples per channel, expected 960 (20 ms)"
            )
        }
        let capacity = Int32(output.count)
        let count = opus_encode(encoder, frame.samples, Int32(Self.samplesPerFrame), &output, capacity)
        guard count >= 0 else { throw OpusCodecError("encode", code: count) }
        if configuration.dtx && count <= 2 { return nil }
        return EncodedFrame(
            codec: .opus,
            data: Array(output[0..<Int(count)]),
            rtpTimestamp: frame.rtpTimestamp,
            isKeyframe: true
        )
    }

    private func check(_ operation: String, _ code: Int32) throws(OpusCodecError) {
        guard code == OPUS_OK else { throw OpusCodecError(operation, code: code) }
    }
}

/// Decodes Opus packets to 48 kHz PCM, with loss concealment and FEC recovery.
///
/// Not thread-safe: one task owns a decoder.
public final class OpusAudioDecoder {
    /// 1 or 2: the layout of the PCM this decoder produces (any Opus packet decodes to it).
    public let channels: Int
    private let decoder: OpaquePointer
    /// Room for the longest Opus packet, 120 ms.
    private var pcm: [Int16]

    /// Creates a decoder producing `channels` channels.
    public init(channels: Int = 1) throws(OpusCodecError) {
        guard channels == 1 || channels == 2 else {
            throw OpusCodecError("create decoder", reason: "\(channels) channels; only 1 or 2")
        }
        var error: Int32 = OPUS_OK
        guard let decoder = opus_decoder_create(Int32(AudioFrame.sampleRate), Int32(channels), &error),
            error == OPUS_OK
        else { throw OpusCodecError("create decoder", code: error) }
        self.decoder = decoder
        self.channels = channels
        self.pcm = [Int16](repeating: 0, count: 5_760 * channels)
    }

    deinit { opus_decoder_destroy(decoder) }

    /// Decodes one packet.
    public func decode(_ frame: EncodedFrame) throws(OpusCodecError) -> AudioFrame {
        try run(frame.data, fec: false, samples: 5_760, timestamp: frame.rtpTimestamp)
    }

    /// Recovers the packet *before* `next` from the FEC data `next` carries (or conceals it when
    /// `next` has none). `samples` is the duration of the lost packet, normally 960.
    public func recoverLost(before next: EncodedFrame, samples: Int = 960) throws(OpusCodecError) -> AudioFrame {
        try run(next.data, fec: true, samples: samples, timestamp: next.rtpTimestamp &- UInt32(samples))
    }

    /// Packet loss concealment for a lost packet when nothing later is known yet.
    public func conceal(samples: Int = 960, rtpTimestamp: UInt32) throws(OpusCodecError) -> AudioFrame {
        try run([], fec: false, samples: samples, timestamp: rtpTimestamp)
    }

    private func run(_ data: [UInt8], fec: Bool, samples: Int, timestamp: UInt32) throws(OpusCodecError) -> AudioFrame {
        guard samples > 0, samples <= 5_760 else {
            throw OpusCodecError("decode", reason: "\(samples) samples requested; at most 5760 (120 ms)")
        }
        let frameSize = Int32(samples)
        let count: Int32
        if data.isEmpty {
            count = opus_decode(decoder, nil, 0, &pcm, frameSize, 0)
        } else {
            count = opus_decode(decoder, data, Int32(data.count), &pcm, frameSize, fec ? 1 : 0)
        }
        guard count >= 0 else { throw OpusCodecError("decode", code: count) }
        let samples = Array(pcm[0..<(Int(count) * channels)])
        do throws(RawMediaError) {
            return try AudioFrame(channels: channels, samples: samples, rtpTimestamp: timestamp)
        } catch {
            throw OpusCodecError("decode", reason: error.description)
        }
    }
}
