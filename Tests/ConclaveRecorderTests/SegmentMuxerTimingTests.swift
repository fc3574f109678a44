import ConclaveAV
import ConclaveCore
import ConclaveTestSupport
import Foundation
import Testing

@testable import ConclaveRecorder

/// The timing and gating the segment muxer decides before anything reaches a container, seen
/// through a fake writer that records what it is given (the real writer only writes it).
@Suite("SegmentMuxer timing and gating")
struct SegmentMuxerTimingTests {
    /// A writer that keeps what it is asked to write, as the muxer decided it.
    final class FakeWriter: SegmentFileWriter {
        struct Written: Equatable {
            var track: Int
            var pts: Int64
            var dts: Int64
            var isKeyframe: Bool
            var rtpTimestamp: UInt32
        }

        let tracks: [MediaFileWriter.Track]
        var written: [Written] = []
        var closed = false

        init(tracks: [MediaFileWriter.Track]) { self.tracks = tracks }

        func write(_ frame: EncodedFrame, track: Int, pts: Int64, dts: Int64?) throws(MediaFileError) {
            written.append(
                Written(
                    track: track,
                    pts: pts,
                    dts: dts ?? pts,
                    isKeyframe: frame.isKeyframe,
                    rtpTimestamp: frame.rtpTimestamp
                )
            )
        }

        func flush() throws(MediaFileError) {}

        func close() throws(MediaFileError) { closed = true }

        func pts(track: Int) -> [Int64] { written.filter { $0.track == track }.map(\.pts) }
    }

    /// A muxer writing through a fake writer in a temporary folder, with no waits (the layout is
    /// decided at the first frame a track can start from).
    final class Harness {
        let directory: URL
        let muxer: SegmentMuxer
        private let box: Box

        final class Box { var writer: FakeWriter? }

        init() throws {
            directory = try TestPaths.temporaryDirectory()
            let box = Box()
            self.box = box
            muxer = SegmentMuxer(
                basePath: directory.appendingPathComponent("segment").path,
                recordingStart: 0,
                timing: RecorderTiming(layoutWait: .zero, syncWait: .zero, keyframeWait: .zero),
                live: false,
                makeWriter: { _, _, tracks, _ in
                    let writer = FakeWriter(tracks: tracks)
                    box.writer = writer
                    return writer
                }
            )
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        var writer: FakeWriter? { box.writer }
    }

    static let second: Int64 = 1_000_000
    static let opus: [UInt8] = [0x78, 1, 2, 3]

    static func audio(_ rtp: UInt32) -> EncodedFrame {
        EncodedFrame(codec: .opus, data: opus, rtpTimestamp: rtp, isKeyframe: true)
    }

    static func video(_ rtp: UInt32, keyframe: Bool) -> EncodedFrame {
        EncodedFrame(codec: .vp8, data: [keyframe ? 0x10 : 0x11, 2, 3], rtpTimestamp: rtp, isKeyframe: keyframe)
    }

    @Test("Repeats and reordered frames are refused: the writer gets strictly increasing timestamps")
    func strictlyIncreasing() throws {
        let harness = try Harness()
        // 20 ms Opus frames, some repeated, some a frame or two late.
        let order: [UInt32] = [0, 1, 2, 2, 3, 1, 4, 5, 5, 5, 3, 6, 7]
        for (index, frame) in order.enumerated() {
            try harness.muxer.append(
                kind: .audio,
                frame: Self.audio(frame * 960),
                arrival: 1_000 + Int64(index) * 20_000
            )
        }
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        let pts = writer.pts(track: 0)
        #expect(pts == (0...7).map { Int64($0) * 960 })
        #expect(writer.written.allSatisfy { $0.dts == $0.pts })
        #expect(zip(pts, pts.dropFirst()).allSatisfy { $0 < $1 })
        let progress = try #require(harness.muxer.tracks[.audio])
        #expect(progress.framesReceived == order.count)
        #expect(progress.framesWritten == 8)
        #expect(progress.framesRejected == 5)
        #expect(progress.timestampJumps == 0)
        #expect(writer.closed)
    }

    @Test("An RTP timestamp that wraps at 2^32 keeps advancing in the file")
    func wrap() throws {
        let harness = try Harness()
        let first: UInt32 = 0xFFFF_FFFF - 3 * 3_000
        for index in 0..<8 {
            try harness.muxer.append(
                kind: .video,
                frame: Self.video(first &+ UInt32(index * 3_000), keyframe: index == 0),
                arrival: Int64(index) * 33_333
            )
        }
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        #expect(writer.pts(track: 0) == (0..<8).map { Int64($0) * 3_000 })
        #expect(writer.written.contains { $0.rtpTimestamp < first }, "the stream wrapped")
        #expect(harness.muxer.tracks[.video]?.timestampJumps == 0)
        #expect(harness.muxer.tracks[.video]?.framesWritten == 8)
    }

    @Test("A timestamp more than a second back is a jump: kept, placed by its arrival, counted")
    func backwardsJump() throws {
        let harness = try Harness()
        // 48 kHz: frames 20 ms apart, then the sender's clock goes back 5 s.
        var rtp: UInt32 = 480_000
        var arrival: Int64 = 0
        for _ in 0..<3 {
            try harness.muxer.append(kind: .audio, frame: Self.audio(rtp), arrival: arrival)
            rtp &+= 960
            arrival += 20_000
        }
        rtp &-= 5 * 48_000
        arrival += 40_000  // it arrives 60 ms after the previous frame
        for _ in 0..<3 {
            try harness.muxer.append(kind: .audio, frame: Self.audio(rtp), arrival: arrival)
            rtp &+= 960
            arrival += 20_000
        }
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        // 60 ms by arrival is 2880 ticks; later frames follow on from the jumped one.
        #expect(writer.pts(track: 0) == [0, 960, 1_920, 4_800, 5_760, 6_720])
        let progress = try #require(harness.muxer.tracks[.audio])
        #expect(progress.timestampJumps == 1)
        #expect(progress.framesWritten == 6)
        #expect(progress.framesRejected == 0)
    }

    @Test("A timestamp far ahead of the arrival times is a jump: kept, placed by its arrival, counted")
    func forwardJump() throws {
        let harness = try Harness()
        try harness.muxer.append(kind: .audio, frame: Self.audio(0), arrival: 0)
        try harness.muxer.append(kind: .audio, frame: Self.audio(960), arrival: 20_000)
        // An hour ahead, 20 ms later.
        try harness.muxer.append(kind: .audio, frame: Self.audio(960 + 3_600 * 48_000), arrival: 40_000)
        try harness.muxer.append(kind: .audio, frame: Self.audio(1_920 + 3_600 * 48_000), arrival: 60_000)
        // A real gap: 2 s of silence by both the timestamps and the arrival times is kept as is.
        try harness.muxer.append(kind: .audio, frame: Self.audio(97_920 + 3_600 * 48_000), arrival: 2_060_000)
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        #expect(writer.pts(track: 0) == [0, 960, 1_920, 2_880, 98_880])
        let progress = try #require(harness.muxer.tracks[.audio])
        #expect(progress.timestampJumps == 1)
        #expect(progress.gaps == 1)
    }

    @Test("Video before its first keyframe is dropped, and the file starts at the keyframe")
    func keyframeGate() throws {
        let harness = try Harness()
        for index in 0..<3 {
            try harness.muxer.append(
                kind: .video,
                frame: Self.video(UInt32(index * 3_000), keyframe: false),
                arrival: Int64(index) * 33_333
            )
        }
        #expect(harness.muxer.isWaitingForKeyframe)
        #expect(harness.writer == nil)
        for index in 3..<6 {
            try harness.muxer.append(
                kind: .video,
                frame: Self.video(UInt32(index * 3_000), keyframe: index == 3),
                arrival: Int64(index) * 33_333
            )
        }
        #expect(!harness.muxer.isWaitingForKeyframe)
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        #expect(writer.written.map(\.isKeyframe) == [true, false, false])
        #expect(writer.pts(track: 0) == [0, 3_000, 6_000])
        let progress = try #require(harness.muxer.tracks[.video])
        #expect(progress.framesDroppedBeforeKeyframe == 3)
        #expect(progress.framesWritten == 3)
    }

    @Test("An H264 keyframe without SPS and PPS does not open the gate: the container needs them")
    func h264KeyframeGate() throws {
        let harness = try Harness()
        let idr: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84]
        let parameterSets: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xC0, 0x1E, 0, 0, 0, 1, 0x68, 0xCE, 0x3C, 0x80]
        let bare = EncodedFrame(codec: .h264, data: idr, rtpTimestamp: 0, isKeyframe: true)
        let complete = EncodedFrame(codec: .h264, data: parameterSets + idr, rtpTimestamp: 3_000, isKeyframe: true)
        #expect(!SegmentMuxer.startsDecoding(bare))
        #expect(SegmentMuxer.startsDecoding(complete))
        try harness.muxer.append(kind: .video, frame: bare, arrival: 0)
        #expect(harness.muxer.isWaitingForKeyframe)
        try harness.muxer.append(kind: .video, frame: complete, arrival: 33_333)
        try harness.muxer.finish()
        let writer = try #require(harness.writer)
        #expect(writer.written.map(\.rtpTimestamp) == [3_000])
        #expect(harness.muxer.tracks[.video]?.framesDroppedBeforeKeyframe == 1)
        #expect(harness.muxer.path?.hasSuffix(".mkv") == true)
    }

    @Test("Audio waits for the first video keyframe; each track's first frame is at its start offset")
    func audioWaitsForVideo() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let box = Harness.Box()
        let muxer = SegmentMuxer(
            basePath: directory.appendingPathComponent("segment").path,
            recordingStart: 0,
            timing: RecorderTiming(layoutWait: .seconds(3), syncWait: .zero, keyframeWait: .seconds(15)),
            live: false,
            makeWriter: { _, _, tracks, _ in
                let writer = FakeWriter(tracks: tracks)
                box.writer = writer
                return writer
            }
        )
        // Audio from 0 s, video delta frames from 0 s, the first keyframe at 4 s.
        for index in 0..<250 {
            let arrival = Int64(index) * 20_000
            try muxer.append(kind: .audio, frame: Self.audio(UInt32(index) * 960), arrival: arrival)
            if index % 2 == 0 {
                let frame = Self.video(UInt32(index / 2) * 3_000, keyframe: index == 200)
                try muxer.append(kind: .video, frame: frame, arrival: arrival)
            }
        }
        try muxer.finish()
        let writer = try #require(box.writer)
        #expect(writer.tracks.map(\.codec) == [.vp8, .opus])
        #expect(muxer.tracks[.video]?.framesDroppedBeforeKeyframe == 100)
        // No sender reports: placed by arrival, video 4 s after the audio.
        let audioStart: Int64? = writer.pts(track: 1).first
        let videoStart: Int64? = writer.pts(track: 0).first
        #expect(audioStart == 0)
        #expect(videoStart == 360_000)
        #expect(writer.written.first { $0.track == 0 }?.isKeyframe == true)
        #expect(muxer.fileStart == 0)
    }
}
