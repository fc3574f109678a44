import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveOpus
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import Testing

/// Muxing and demuxing without transcoding, A/V sync of the synthetic sources through a file, and
/// file sources.
@Suite("Containers and file sources")
struct ContainerTests {
    /// Three seconds of pattern (VP8 or H264) and tone (Opus) with random-looking RTP bases.
    func writeCall(codec: MediaCodec, path: String) throws -> (video: [EncodedFrame], audio: [EncodedFrame]) {
        let video = EncodingVideoSource(
            raw: try PatternSource(
                width: 320,
                height: 240,
                frameRate: 30,
                frameLimit: 90,
                initialTimestamp: 0xFFFF_0000
            ),
            encoder: try VideoEncoderSettings(codec: codec, width: 320, height: 240, bitrate: 400_000).makeEncoder()
        )
        let opus = try OpusAudioEncoder()
        let audio = EncodingAudioSource(raw: try ToneSource(frameLimit: 150, initialTimestamp: 12_345), encoder: opus)
        let writer = try MediaFileWriter(
            path: path,
            tracks: [.video(codec, width: 320, height: 240), .opus(channels: 1, preSkip: opus.lookahead)]
        )
        var videoFrames: [EncodedFrame] = []
        var audioFrames: [EncodedFrame] = []
        var nextVideo = try video.nextFrame()
        var nextAudio = try audio.nextFrame()
        var timeline = EncoderTimeline()
        // Interleave by media time, as a live sender would.
        while nextVideo != nil || nextAudio != nil {
            if let v = nextVideo, nextAudio.map({ v.mediaTime <= $0.mediaTime }) ?? true {
                try writer.write(v.frame, track: 0, on: &timeline)
                videoFrames.append(v.frame)
                nextVideo = try video.nextFrame()
            } else if let a = nextAudio {
                try writer.write(a.frame, track: 1, on: &timeline)
                audioFrames.append(a.frame)
                nextAudio = try audio.nextFrame()
            }
        }
        try writer.close()
        return (videoFrames, audioFrames)
    }

    @Test("a rewound file reads every packet again, audio stamped before the first video keyframe included")
    func rewindReadsEverything() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("audio-first.webm").path
        // Audio from 0 s, video from 0.1 s: five Opus packets come before any keyframe.
        let made = try runProcess(
            try which("ffmpeg"),
            [
                "-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-itsoffset", "0.1", "-f",
                "lavfi", "-i", "testsrc=duration=1:size=160x120:rate=30", "-map", "1:v", "-map", "0:a", "-c:v",
                "libvpx", "-c:a", "libopus", path,
            ]
        )
        #expect(made.succeeded, "\(made.errorOutput)")
        let demuxer = try MediaDemuxer(path: path)
        func readAll() throws -> [DemuxedPacket] {
            var packets: [DemuxedPacket] = []
            while let packet = try demuxer.readPacket() { packets.append(packet) }
            return packets
        }
        let first = try readAll()
        let audio = try #require(demuxer.firstStream(of: .audio)).index
        #expect(first.prefix(5).allSatisfy { $0.streamIndex == audio })
        for _ in 0..<2 {
            try demuxer.rewind()
            let again = try readAll()
            #expect(again.count == first.count)
            let sameBytes = again.map(\.data) == first.map(\.data)
            #expect(sameBytes, "the packets read after the rewind differ")
            #expect(again.map(\.presentationTime) == first.map(\.presentationTime))
        }
    }

    @Test(
        "Pattern + tone through WebM and Matroska: frames intact, every number once, flashes within one frame of beeps",
        arguments: [MediaCodec.vp8, .h264]
    )
    func avSync(codec: MediaCodec) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(codec == .vp8 ? "call.webm" : "call.mkv").path
        let written = try writeCall(codec: codec, path: path)
        #expect(try FFmpeg.decodeErrors(path) == "")
        #expect(try FFmpeg.frameCount(path, stream: "v:0") == 90)
        #expect(try FFmpeg.packetCount(path, stream: "a:0") == 150)

        // Demux without transcoding: the very bytes that were written come back.
        let demuxer = try MediaDemuxer(path: path)
        let videoIndex = try #require(demuxer.firstStream(of: .video)).index
        let audioIndex = try #require(demuxer.firstStream(of: .audio)).index
        #expect(demuxer.streams[videoIndex].codec == codec)
        var videoPackets: [DemuxedPacket] = []
        var audioPackets: [DemuxedPacket] = []
        while let packet = try demuxer.readPacket() {
            if packet.streamIndex == videoIndex {
                videoPackets.append(packet)
            } else if packet.streamIndex == audioIndex {
                audioPackets.append(packet)
            }
        }
        #expect(videoPackets.map(\.data) == written.video.map(\.data))
        #expect(audioPackets.map(\.data) == written.audio.map(\.data))
        #expect(videoPackets.map(\.isKeyframe) == written.video.map(\.isKeyframe))

        // Decode both and line up flashes with beep onsets on the file's own timeline.
        let decoder: any VideoDecoding = codec == .vp8 ? try VP8Decoder() : try H264Decoder()
        var numbers: [Int] = []
        var flashTimes: [Double] = []
        for packet in videoPackets {
            let frame = EncodedFrame(codec: codec, data: packet.data, rtpTimestamp: 0, isKeyframe: packet.isKeyframe)
            guard let picture = try decoder.decode(frame) else { continue }
            let reading = try #require(PatternReader.read(picture))
            numbers.append(reading.frameNumber)
            if reading.isFlash { flashTimes.append(seconds(packet.presentationTime)) }
        }
        #expect(numbers == Array(0..<90))
        #expect(flashTimes.count == 3)

        let opus = try OpusAudioDecoder(channels: 1)
        var detector = BeepDetector()
        var onsets: [Double] = []
        var decodedSamples = 0
        for packet in audioPackets {
            let pcm = try opus.decode(EncodedFrame(codec: .opus, data: packet.data, rtpTimestamp: 0, isKeyframe: true))
            for onset in detector.feed(pcm.samples, channels: 1) {
                // Decoder output lags by the encoder's lookahead (pre-skip).
                onsets.append(Double(onset - 312) / 48_000)
            }
            decodedSamples += pcm.samplesPerChannel
        }
        #expect(onsets.count == 3, "beep onsets at \(onsets)")
        let frameDuration = 1.0 / 30
        for (flash, beep) in zip(flashTimes, onsets) {
            #expect(abs(flash - beep) <= frameDuration, "flash at \(flash) s, beep at \(beep) s")
        }
    }

    @Test("H264 before the first IDR is refused (the caller gates it), audio waits for the header")
    func joinMidStream() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("join.mkv").path
        let encoder = try H264Encoder(
            configuration: H264EncoderConfiguration(width: 160, height: 120, bitrate: 200_000)
        )
        let pattern = try PatternSource(width: 160, height: 120, frameRate: 30, frameLimit: 30)
        var video: [EncodedFrame] = []
        var index = 0
        while let picture = try pattern.nextFrame() {
            video += try encoder.encode(picture, forceKeyframe: index == 10)
            index += 1
        }
        let opus = try OpusAudioEncoder()
        let tone = try ToneSource(frameLimit: 50)
        var audio: [EncodedFrame] = []
        while let block = try tone.nextFrame() { audio.append(try #require(try opus.encode(block))) }

        let writer = try MediaFileWriter(
            path: path,
            tracks: [.video(.h264, width: 160, height: 120), .opus(channels: 1)]
        )
        // Frames from after the first IDR: video starts at frame 1 (a P frame). Which frames a
        // file may start from is the caller's to decide (the recorder's SegmentMuxer drops them);
        // the writer refuses H264 before the SPS and PPS its header needs, and holds the audio.
        var timeline = EncoderTimeline()
        for frame in audio.prefix(10) { try writer.write(frame, track: 1, on: &timeline) }
        var refused = 0
        for frame in video[1...] {
            do throws(MediaFileError) {
                try writer.write(frame, track: 0, on: &timeline)
            } catch {
                let kind: MediaFileError.Kind = error.kind
                #expect(kind == MediaFileError.Kind.malformed)
                refused += 1
            }
        }
        for frame in audio.dropFirst(10) { try writer.write(frame, track: 1, on: &timeline) }
        try writer.close()
        #expect(refused == 9)
        #expect(try FFmpeg.decodeErrors(path) == "")
        #expect(try FFmpeg.frameCount(path, stream: "v:0") == 20)
        #expect(try FFmpeg.packetCount(path, stream: "a:0") == 50)
    }

    @Test("File source passes a matching codec through and transcodes another, looping on request")
    func fileSource() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("call.webm").path
        let written = try writeCall(codec: .vp8, path: path)

        let passThrough = try FileMediaSource(path: path, codec: .vp8, loop: true, initialTimestamp: 1_000)
        #expect(passThrough.isPassThrough)
        var frames: [TimedFrame] = []
        while frames.count < 180, let frame = try passThrough.nextFrame() { frames.append(frame) }
        #expect(frames.count == 180)
        #expect(frames.prefix(90).map(\.frame.data) == written.video.map(\.data))
        #expect(frames.suffix(90).map(\.frame.data) == written.video.map(\.data))
        // 90 kHz timestamps advance by 3000 per frame, straight across the loop.
        let steps = zip(frames.dropFirst(), frames).map { $0.frame.rtpTimestamp &- $1.frame.rtpTimestamp }
        #expect(steps.allSatisfy { $0 == 3_000 }, "timestamp steps \(Set(steps))")
        #expect(frames.first?.frame.rtpTimestamp == 1_000)

        let transcoded = try FileMediaSource(path: path, codec: .h264)
        #expect(!transcoded.isPassThrough)
        let decoder = try H264Decoder()
        var numbers: [Int] = []
        while let timed = try transcoded.nextFrame() {
            #expect(timed.frame.codec == .h264)
            if let picture = try decoder.decode(timed.frame), let reading = PatternReader.read(picture) {
                numbers.append(reading.frameNumber)
            }
        }
        #expect(numbers == Array(0..<90))

        // Transcoding loops too, with the timeline running on across the seam.
        let looped = try FileMediaSource(path: path, codec: .h264, loop: true)
        let loopDecoder = try H264Decoder()
        var loopNumbers: [Int] = []
        var loopTimestamps: [UInt32] = []
        while loopNumbers.count < 180, let timed = try looped.nextFrame() {
            loopTimestamps.append(timed.frame.rtpTimestamp)
            if let picture = try loopDecoder.decode(timed.frame), let reading = PatternReader.read(picture) {
                loopNumbers.append(reading.frameNumber)
            }
        }
        #expect(loopNumbers == Array(0..<90) + Array(0..<90))
        let loopSteps = Set(zip(loopTimestamps.dropFirst(), loopTimestamps).map { $0 &- $1 })
        #expect(loopSteps == [3_000], "timestamp steps \(loopSteps)")

        let audio = try FileMediaSource(path: path, codec: .opus)
        #expect(audio.isPassThrough)
        var audioCount = 0
        var lastTimestamp: UInt32?
        while let timed = try audio.nextFrame() {
            if let lastTimestamp { #expect(timed.frame.rtpTimestamp &- lastTimestamp == 960) }
            lastTimestamp = timed.frame.rtpTimestamp
            audioCount += 1
        }
        #expect(audioCount == 150)
    }

    @Test("A WAV file is transcoded to Opus through libavcodec at the right pace")
    func wavTranscode() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let wav = directory.appendingPathComponent("tone.wav").path
        let tone = try ToneSource(channels: 2, frameLimit: 50)
        let writer = try WAVWriter(path: wav, channels: 2)
        while let block = try tone.nextFrame() { try writer.write(block) }
        try writer.close()
        let source = try FileMediaSource(path: wav, codec: .opus)
        #expect(!source.isPassThrough)
        var count = 0
        while let timed = try source.nextFrame() {
            #expect(timed.frame.rtpTimestamp == UInt32(count * 960))
            count += 1
        }
        #expect(count == 50)
    }

    func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
