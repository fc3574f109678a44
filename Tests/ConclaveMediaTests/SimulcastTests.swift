import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveVPX
import Testing

/// The simulcast sender: its layers, how an estimate is divided among them, and the frames it
/// makes (decoded here to check each layer's size and that a resumed layer starts on a keyframe).
@Suite("Simulcast sending")
struct SimulcastTests {
    @Test func layersHalveTheSizeAndAThirdOfTheBitrateEachStepDown() throws {
        let layers = try SimulcastPlan.layers(count: 3, width: 640, height: 480, bitrate: 600_000)
        #expect(layers.map { "\($0.width)x\($0.height)" } == ["160x120", "320x240", "640x480"])
        #expect(layers.map(\.targetBitrate) == [66_666, 200_000, 600_000])
        #expect(layers.map(\.minimumBitrate) == [33_333, 100_000, 300_000])
        // Halving keeps sizes even: 1280x720 → 640x360 → 320x180, and 330x250 → 164x124.
        #expect(try SimulcastPlan.layers(count: 3, width: 1280, height: 720, bitrate: 1).first?.width == 320)
        #expect(try SimulcastPlan.layers(count: 2, width: 330, height: 250, bitrate: 1).first?.height == 124)
        #expect(throws: SimulcastError.layerCount(4)) {
            try SimulcastPlan.layers(count: 4, width: 640, height: 480, bitrate: 1)
        }
        #expect(throws: SimulcastError.tooSmall(width: 48, height: 48, layers: 3)) {
            try SimulcastPlan.layers(count: 3, width: 48, height: 48, bitrate: 1)
        }
    }

    @Test func aFallingEstimateThinsThenPausesTheTopLayerFirst() throws {
        let layers = try SimulcastPlan.layers(count: 3, width: 640, height: 480, bitrate: 600_000)
        // Plenty: every layer at its target, nothing above it.
        #expect(SimulcastPlan.allocate(5_000_000, among: layers) == [66_666, 200_000, 600_000])
        // Less: the top layer gets what is left, down to its minimum.
        #expect(SimulcastPlan.allocate(700_000, among: layers) == [66_666, 200_000, 433_334])
        #expect(SimulcastPlan.allocate(566_666, among: layers) == [66_666, 200_000, 300_000])
        // Below that, the top layer pauses and the medium one is the highest sent.
        #expect(SimulcastPlan.allocate(566_665, among: layers) == [66_666, 200_000, nil])
        #expect(SimulcastPlan.allocate(200_000, among: layers) == [66_666, 133_334, nil])
        #expect(SimulcastPlan.allocate(166_665, among: layers) == [66_666, nil, nil])
        // The lowest layer is always sent, below its target if need be.
        #expect(SimulcastPlan.allocate(20_000, among: layers) == [20_000, nil, nil])
        #expect(SimulcastPlan.allocate(0, among: layers) == [1, nil, nil])
        #expect(SimulcastPlan.allocate(1_000, among: []) == [])
    }

    @Test(arguments: [MediaCodec.vp8, .h264])
    func everyPictureIsSentInEveryLayerAndAResumedLayerStartsOnAKeyframe(codec: MediaCodec) throws {
        let pattern = try PatternSource(width: 640, height: 480, frameRate: 30, frameLimit: 40)
        let layers = try SimulcastPlan.layers(count: 3, width: 640, height: 480, bitrate: 600_000)
        let source = try SimulcastVideoSource(raw: pattern, codec: codec, layers: layers)
        #expect(source.simulcastLayers == 3)
        let decoders: [any VideoDecoding] =
            codec == .vp8 ? try (0..<3).map { _ in try VP8Decoder() } : try (0..<3).map { _ in try H264Decoder() }

        /// The next picture's frames, each decoded by its layer's decoder.
        func picture() throws -> [(frame: EncodedFrame, width: Int, height: Int, number: Int?)] {
            var frames: [EncodedFrame] = []
            repeat {
                frames.append(try #require(try source.nextFrame()).frame)
            } while frames.count < source.rates.compactMap({ $0 }).count
            #expect(Set(frames.map(\.rtpTimestamp)).count == 1, "one picture, one timestamp")
            return try frames.map { frame in
                let decoded = try #require(try decoders[frame.simulcastLayer].decode(frame))
                return (frame, decoded.width, decoded.height, PatternReader.read(decoded)?.frameNumber)
            }
        }

        let first = try picture()
        #expect(first.map(\.frame.simulcastLayer) == [0, 1, 2])
        #expect(first.map { "\($0.width)x\($0.height)" } == ["160x120", "320x240", "640x480"])
        #expect(first.allSatisfy { $0.frame.isKeyframe })
        #expect(first.last?.number == 0)
        for _ in 1..<10 { _ = try picture() }

        // An estimate below the top layer's minimum pauses it: the medium layer is the highest.
        try source.setBitrate(300_000)
        #expect(source.rates.map { $0 != nil } == [true, true, false])
        for _ in 0..<10 {
            let frames = try picture()
            #expect(frames.map(\.frame.simulcastLayer) == [0, 1])
            #expect(frames.allSatisfy { !$0.frame.isKeyframe })
        }
        // Back up: the top layer resumes on a keyframe, the others carry on.
        try source.setBitrate(1_000_000)
        let resumed = try picture()
        #expect(resumed.map(\.frame.simulcastLayer) == [0, 1, 2])
        #expect(resumed.map(\.frame.isKeyframe) == [false, false, true])
        #expect(resumed.last?.number == 20)

        // A keyframe request makes one in every layer.
        source.requestKeyframe()
        #expect(try picture().allSatisfy { $0.frame.isKeyframe })
        #expect(try picture().allSatisfy { !$0.frame.isKeyframe })
    }

    @Test func theScalerAveragesAndRefusesOddSizes() throws {
        // A picture of four flat quadrants scales to the same quadrants, a quarter of the size.
        let width = 64
        let height = 32
        var data = [UInt8](repeating: 128, count: VideoFrame.byteCount(width: width, height: height))
        for y in 0..<height {
            for x in 0..<width { data[y * width + x] = (x < width / 2 ? 40 : 200) &+ (y < height / 2 ? 0 : 10) }
        }
        let frame = try VideoFrame(width: width, height: height, data: data, rtpTimestamp: 77)
        let scaled = try VideoScaler(width: 32, height: 16).scale(frame)
        #expect(scaled.width == 32 && scaled.height == 16 && scaled.rtpTimestamp == 77)
        #expect(scaled.data[2 * 32 + 2] == 40 && scaled.data[2 * 32 + 29] == 200)
        #expect(scaled.data[13 * 32 + 2] == 50 && scaled.data[13 * 32 + 29] == 210)
        #expect(scaled.data[scaled.uOffset..<scaled.data.count].allSatisfy { $0 == 128 })
        #expect(throws: VideoScalerError.self) { try VideoScaler(width: 31, height: 16) }
    }
}
