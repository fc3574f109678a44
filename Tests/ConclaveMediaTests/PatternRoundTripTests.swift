import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveVPX
import Testing

/// Encodes the `pattern` source, decodes it with our own decoders and reads every frame number back.
@Suite("Pattern round trip")
struct PatternRoundTripTests {
    static let width = 320
    static let height = 240
    static let frameRate = 30
    static let frameCount = 75

    func roundTrip(encoder: any VideoEncoding, decoder: any VideoDecoding) throws -> [PatternReading] {
        let source = try PatternSource(
            width: Self.width,
            height: Self.height,
            frameRate: Self.frameRate,
            frameLimit: Self.frameCount,
            initialTimestamp: 4_000_000_000
        )
        var readings: [PatternReading] = []
        while let picture = try source.nextFrame() {
            for encoded in try encoder.encode(picture, forceKeyframe: false) {
                #expect(encoded.rtpTimestamp == picture.rtpTimestamp)
                if let decoded = try decoder.decode(encoded) {
                    let reading = try #require(
                        PatternReader.read(decoded),
                        "unreadable frame at \(encoded.rtpTimestamp)"
                    )
                    readings.append(reading)
                }
            }
        }
        return readings
    }

    func checkSequence(_ readings: [PatternReading]) {
        #expect(readings.map(\.frameNumber) == Array(0..<Self.frameCount))
        let flashes = readings.filter(\.isFlash).map(\.frameNumber)
        #expect(flashes == [0, 30, 60])
    }

    @Test("VP8: every frame number decodes exactly once, flashes on whole seconds")
    func vp8() throws {
        let encoder = try VP8Encoder(
            configuration: VP8EncoderConfiguration(
                width: Self.width,
                height: Self.height,
                frameRate: Self.frameRate,
                bitrate: 300_000
            )
        )
        checkSequence(try roundTrip(encoder: encoder, decoder: try VP8Decoder()))
    }

    @Test("H264: every frame number decodes exactly once, flashes on whole seconds")
    func h264() throws {
        let encoder = try H264Encoder(
            configuration: H264EncoderConfiguration(
                width: Self.width,
                height: Self.height,
                frameRate: Self.frameRate,
                bitrate: 300_000
            )
        )
        checkSequence(try roundTrip(encoder: encoder, decoder: try H264Decoder()))
    }

    @Test("The reader rejects a picture without a code strip")
    func rejectsBlank() throws {
        let blank = try VideoFrame.blank(width: Self.width, height: Self.height)
        #expect(PatternReader.read(blank) == nil)
    }
}
