internal import CFFmpeg
internal import CFFmpegShims
import ConclaveCore

/// FFmpeg writes its diagnostics straight to stderr. Library code must not print, and every failure
/// already reaches the caller as a typed error, so the log is silenced once, before first use.
enum FFmpegLogging {
    static let silenced: Void = av_log_set_level(AV_LOG_QUIET)
}

/// FFmpeg's text for an error code (`av_strerror`).
func averrorText(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    _ = av_strerror(code, &buffer, buffer.count)
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}

/// The decoder for `id`: libopus for Opus, libavcodec's first choice for everything else.
///
/// `avcodec_find_decoder` picks FFmpeg's own Opus decoder, which is not the reference: on some
/// tone endings in Conclave's microphone stream it adds a 5 ms burst (RMS above 2,000) right
/// after the tone, heard as a click and read as a second beep, where libopus (what Conclave's
/// playout and every browser decode with) ends cleanly (Tests/Vectors/opus-tone-endings.webm).
func decoder(for id: AVCodecID) -> UnsafePointer<AVCodec>? {
    if id == AV_CODEC_ID_OPUS, let libopus = avcodec_find_decoder_by_name("libopus") { return libopus }
    return avcodec_find_decoder(id)
}

/// The `MediaCodec` an FFmpeg codec id carries, if Conclave sends that codec.
func mediaCodec(for id: AVCodecID) -> MediaCodec? {
    switch id {
    case AV_CODEC_ID_OPUS: .opus
    case AV_CODEC_ID_VP8: .vp8
    case AV_CODEC_ID_H264: .h264
    default: nil
    }
}

/// FFmpeg's codec id for a `MediaCodec`.
func avCodecID(for codec: MediaCodec) -> AVCodecID {
    switch codec {
    case .opus: AV_CODEC_ID_OPUS
    case .vp8: AV_CODEC_ID_VP8
    case .h264: AV_CODEC_ID_H264
    }
}

/// Opus packet timing from the TOC byte (RFC 6716 section 3.1), so muxers get packet durations
/// without a decoder.
public enum OpusPacketTiming {
    /// Samples at 48 kHz that `packet` covers, or nil when the packet is malformed.
    public static func sampleCount(of packet: [UInt8]) -> Int? {
        guard let toc = packet.first else { return nil }
        let configuration = Int(toc >> 3)
        let frameSamples: Int
        switch configuration {
        case 0...11: frameSamples = [480, 960, 1_920, 2_880][configuration % 4]
        case 12...15: frameSamples = configuration % 2 == 0 ? 480 : 960
        default: frameSamples = [120, 240, 480, 960][configuration % 4]
        }
        let frames: Int
        switch toc & 0x03 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default:
            guard packet.count >= 2 else { return nil }
            frames = Int(packet[1] & 0x3F)
        }
        let total = frames * frameSamples
        guard frames > 0, total <= 5_760 else { return nil }
        return total
    }

    /// The longest frame an Opus packet may hold (RFC 6716 section 3.2.1).
    static let maximumFrameSize = 1_275

    /// Whether `packet` meets the requirements of RFC 6716 section 3.4 (R1 to R7): the frame
    /// lengths it states fit the bytes it has. Readers (FFmpeg's Opus parser among them) drop a
    /// packet that does not, so a file holding one would not hold what was written.
    public static func isWellFormed(_ packet: [UInt8]) -> Bool {
        guard let toc = packet.first, sampleCount(of: packet) != nil else { return false }
        let count = packet.count
        switch toc & 0x03 {
        case 0:
            return count - 1 <= maximumFrameSize
        case 1:
            return (count - 1) % 2 == 0 && (count - 1) / 2 <= maximumFrameSize
        case 2:
            guard let (first, used) = frameLength(packet, at: 1) else { return false }
            let second = count - 1 - used - first
            return first <= maximumFrameSize && second >= 0 && second <= maximumFrameSize
        default:
            let frames = Int(packet[1] & 0x3F)
            let variable = packet[1] & 0x80 != 0
            var index = 2
            var padding = 0
            if packet[1] & 0x40 != 0 {
                while true {
                    guard index < count else { return false }
                    let byte = Int(packet[index])
                    index += 1
                    padding += byte == 255 ? 254 : byte
                    if byte != 255 { break }
                }
            }
            var remaining = count - index - padding
            guard remaining >= 0 else { return false }
            if !variable { return remaining % frames == 0 && remaining / frames <= maximumFrameSize }
            for _ in 0..<(frames - 1) {
                guard let (length, used) = frameLength(packet, at: index) else { return false }
                index += used
                remaining -= used + length
                guard length <= maximumFrameSize, remaining >= 0 else { return false }
            }
            return remaining <= maximumFrameSize
        }
    }

    /// A frame length of one or two bytes at `index` (RFC 6716 section 3.2.1), and the bytes it took.
    private static func frameLength(_ packet: [UInt8], at index: Int) -> (Int, Int)? {
        guard index < packet.count else { return nil }
        let first = Int(packet[index])
        if first < 252 { return (first, 1) }
        guard index + 1 < packet.count else { return nil }
        return (Int(packet[index + 1]) * 4 + first, 2)
    }
}
