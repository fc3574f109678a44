import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveOpus
import ConclaveVPX
import Testing

/// Bitrate changes on the fly, keyframe requests, Opus FEC and DTX, and configuration errors.
@Suite("Encoder controls")
struct EncoderControlTests {
    /// Encodes 60 pattern frames, lowering the bitrate 8x after frame 30; returns bytes per half.
    func halves(_ encoder: any VideoEncoding, low: Int) throws -> (Int, Int) {
        let source = try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: 90)
        var first = 0
        var second = 0
        var index = 0
        while let picture = try source.nextFrame() {
            if index == 30 { try encoder.setBitrate(low) }
            let bytes = try encoder.encode(picture, forceKeyframe: false).reduce(0) { $0 + $1.data.count }
            if index >= 10 && index < 30 { first += bytes }
            if index >= 70 { second += bytes }
            index += 1
        }
        return (first, second)
    }

    @Test("VP8 bitrate change takes effect without a new encoder")
    func vp8Bitrate() throws {
        let encoder = try VP8Encoder(
            configuration: VP8EncoderConfiguration(width: 320, height: 240, bitrate: 1_200_000)
        )
        let (high, low) = try halves(encoder, low: 150_000)
        #expect(low * 3 < high, "bytes per 20 frames: \(high) before, \(low) after")
        #expect(encoder.configuration.bitrate == 150_000)
    }

    @Test("H264 bitrate change takes effect without a new encoder")
    func h264Bitrate() throws {
        let encoder = try H264Encoder(
            configuration: H264EncoderConfiguration(width: 320, height: 240, bitrate: 1_200_000)
        )
        let (high, low) = try halves(encoder, low: 150_000)
        #expect(low * 3 < high, "bytes per 20 frames: \(high) before, \(low) after")
    }

    @Test("VP8 keyframe on demand arrives on the next frame")
    func vp8Keyframe() throws {
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240))
        let source = try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: 30)
        var keys: [Int] = []
        var index = 0
        while let picture = try source.nextFrame() {
            for frame in try encoder.encode(picture, forceKeyframe: index == 12) where frame.isKeyframe {
                keys.append(index)
                // VP8 key frames have bit 0 of the first byte clear (RFC 6386 9.1).
                #expect(frame.data.first.map { $0 & 1 } == 0)
            }
            index += 1
        }
        #expect(keys == [0, 12])
    }

    @Test("Opus: bitrate change shrinks packets, DTX suppresses silence, FEC recovers a lost packet")
    func opus() throws {
        let encoder = try OpusAudioEncoder(configuration: OpusEncoderConfiguration(channels: 1, bitrate: 64_000))
        let tone = try ToneSource(frameLimit: 100)
        var before = 0
        var after = 0
        var packets: [EncodedFrame] = []
        var index = 0
        while let block = try tone.nextFrame() {
            if index == 50 { try encoder.setBitrate(12_000) }
            let packet = try #require(try encoder.encode(block))
            if index >= 10 && index < 50 { before += packet.data.count }
            if index >= 60 { after += packet.data.count }
            packets.append(packet)
            index += 1
        }
        #expect(after * 2 < before, "bytes: \(before) at 64k, \(after) at 12k")

        // FEC: drop packet 30, recover it from packet 31.
        let decoder = try OpusAudioDecoder(channels: 1)
        for packet in packets[0..<30] { _ = try decoder.decode(packet) }
        let recovered = try decoder.recoverLost(before: packets[31])
        #expect(recovered.samplesPerChannel == 960)
        #expect(recovered.rtpTimestamp == packets[30].rtpTimestamp)
        let energy = recovered.samples.reduce(0.0) { $0 + Double($1) * Double($1) }
        #expect(energy > 0, "FEC data should reconstruct the tone, not silence")

        let dtxEncoder = try OpusAudioEncoder(configuration: OpusEncoderConfiguration(dtx: true))
        var suppressed = 0
        for block in 0..<100 {
            let silence = try AudioFrame(
                channels: 1,
                samples: [Int16](repeating: 0, count: 960),
                rtpTimestamp: UInt32(block * 960)
            )
            if try dtxEncoder.encode(silence) == nil { suppressed += 1 }
        }
        #expect(suppressed > 50, "DTX suppressed only \(suppressed) of 100 silent packets")
    }

    @Test("Odd and out-of-range configurations are rejected with the reason")
    func badConfigurations() {
        #expect(throws: VPXCodecError.self) {
            try VP8Encoder(configuration: VP8EncoderConfiguration(width: 321, height: 240))
        }
        do {
            _ = try H264Encoder(configuration: H264EncoderConfiguration(width: 320, height: 239))
            Issue.record("odd height accepted")
        } catch {
            #expect(error.description.contains("320x239") && error.description.contains("even"))
        }
        #expect(throws: OpusCodecError.self) {
            try OpusAudioEncoder(configuration: OpusEncoderConfiguration(channels: 3))
        }
        #expect(throws: RawMediaError.self) { try PatternSource(width: 100, height: 75, frameRate: 30) }
        // Settings the libraries reject after the codec exists: the error surfaces and the
        // half-built encoder is released exactly once.
        #expect(throws: OpusCodecError.self) {
            try OpusAudioEncoder(configuration: OpusEncoderConfiguration(bitrate: -5))
        }
        #expect(throws: VPXCodecError.self) {
            try VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240, threads: 1_000))
        }
        #expect(throws: VPXCodecError.self) {
            try VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240, speed: 100))
        }
        let encoder = try? VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240))
        let wrongSize = try? VideoFrame.blank(width: 160, height: 120)
        if let encoder, let wrongSize {
            #expect(throws: VPXCodecError.self) { try encoder.encode(wrongSize, forceKeyframe: false) }
        }
    }
}
