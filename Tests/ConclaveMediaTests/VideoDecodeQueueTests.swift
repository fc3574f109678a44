import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Synchronization
import Testing

/// The shared decoding of received video (ConclaveAV): the bounded admission that drops to the
/// next keyframe, the decoder that restarts at a keyframe, and the queue that decodes on its own
/// thread for the call window.
struct VideoDecodeQueueTests {
    static func frames(_ codec: MediaCodec, count: Int) throws -> [EncodedFrame] {
        let source = EncodingVideoSource(
            raw: try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: count),
            encoder: try VideoEncoderSettings(codec: codec, width: 320, height: 240, bitrate: 400_000).makeEncoder()
        )
        var frames: [EncodedFrame] = []
        while let next = try source.nextFrame() { frames.append(next.frame) }
        return frames
    }

    @Test("a full queue drops a feed's frames up to its next keyframe, without holding back other feeds")
    func keyframeGate() {
        var gate = KeyframeGate(limit: 2)
        func admit(_ feedID: UInt64, keyframe: Bool) -> Bool { gate.admit(feedID: feedID, isKeyframe: keyframe) }
        #expect(admit(1, keyframe: true))
        #expect(admit(1, keyframe: false))
        #expect(!admit(1, keyframe: false))
        gate.drained()
        // Feed 1 lost a frame: its next delta frames are useless.
        #expect(!admit(1, keyframe: false))
        #expect(admit(2, keyframe: false))
        #expect(admit(1, keyframe: true))
        #expect(gate.queued == 2)
        // Full: even a keyframe waits.
        #expect(!admit(2, keyframe: true))
        gate.drained()
        #expect(!admit(2, keyframe: false))
        gate.forget(feedID: 2)
        #expect(admit(2, keyframe: false))
    }

    @Test(
        "the decoder starts at a keyframe, and after a broken frame resumes at the next one",
        arguments: [MediaCodec.vp8, .h264]
    )
    func decoderRestartsAtKeyframes(codec: MediaCodec) throws {
        let frames = try Self.frames(codec, count: 3)
        #expect(frames[0].isKeyframe && !frames[1].isKeyframe)
        let decoder = ReceivedVideoDecoder()
        // A delta frame first: skipped, not decoded into garbage.
        #expect(try decoder.decode(frames[1]) == nil)
        let first = try #require(try decoder.decode(frames[0]))
        #expect(PatternReader.read(first)?.frameNumber == 0)
        let second = try #require(try decoder.decode(frames[1]))
        #expect(PatternReader.read(second)?.frameNumber == 1)
        // A frame that does not decode: thrown once, then frames wait for the next keyframe.
        let broken = EncodedFrame(
            codec: codec,
            data: [UInt8](repeating: 0xFF, count: 64),
            rtpTimestamp: 1,
            isKeyframe: false
        )
        #expect(throws: MediaFileError.self) { try decoder.decode(broken) }
        #expect(try decoder.decode(frames[2]) == nil)
        #expect(PatternReader.read(try #require(try decoder.decode(frames[0])))?.frameNumber == 0)
        // A changed codec restarts the decoder at a keyframe too.
        let other = try Self.frames(codec == .vp8 ? .h264 : .vp8, count: 2)
        #expect(try decoder.decode(other[1]) == nil)
        #expect(PatternReader.read(try #require(try decoder.decode(other[0])))?.frameNumber == 0)
    }

    @Test("the queue hands on each feed's pictures, decoded on its thread, the newest last")
    func queueDecodes() async throws {
        let frames = try Self.frames(.vp8, count: 30)
        let seen = Mutex<[UInt64: [Int]]>([:])
        let queue = VideoDecodeQueue(name: "test-decode") { feedID, decoded in
            let number = PatternReader.read(decoded.picture)?.frameNumber ?? -1
            seen.withLock { $0[feedID, default: []].append(number) }
        }
        for frame in frames {
            queue.add(feedID: 1, frame: frame)
            queue.add(feedID: 2, frame: frame)
        }
        await queue.finish()
        let numbers = seen.withLock { $0 }
        #expect(queue.framesDropped == 0)
        for feed: UInt64 in [1, 2] {
            let shown = try #require(numbers[feed])
            // A backlog is skipped to its newest picture: numbers only go up, and end at the last frame.
            #expect(shown == shown.sorted() && Set(shown).count == shown.count, "\(shown)")
            #expect(shown.last == 29)
        }
    }

    @Test(
        "pictures decoded for a box come scaled down to fit it: the nearest pixels of the full decode",
        arguments: [MediaCodec.vp8, .h264]
    )
    func decoderScalesDownToTheBox(codec: MediaCodec) throws {
        let frames = try Self.frames(codec, count: 3)
        let reference = ReceivedVideoDecoder()
        let fitted = ReceivedVideoDecoder()
        // A 180x130 box: 173x130 keeps 4:3, 172x130 once even.
        let box = PictureSize(width: 180, height: 130)
        for (index, frame) in frames.enumerated() {
            let full = try #require(try reference.decode(frame))
            let decoded = try #require(try fitted.decode(frame, fitting: box))
            #expect(decoded.decodedSize == PictureSize(width: 320, height: 240))
            #expect(decoded.picture.width == 172 && decoded.picture.height == 130)
            #expect(
                decoded.picture.data == (try PictureFit.scaled(full, to: PictureSize(width: 172, height: 130))).data,
                "frame \(index)"
            )
        }
        // A box larger than the picture leaves it as decoded.
        let large = try #require(
            try ReceivedVideoDecoder().decode(frames[0], fitting: PictureSize(width: 640, height: 480))
        )
        #expect(large.picture.width == 320 && large.picture.height == 240)
    }

    @Test("the queue asks for each feed's box and hands on pictures scaled to it, with their decoded size")
    func queueScalesDownPerFeed() async throws {
        let frames = try Self.frames(.h264, count: 3)
        let reference = ReceivedVideoDecoder()
        var last: VideoFrame?
        for frame in frames { last = try reference.decode(frame) }
        let expected = try PictureFit.scaled(try #require(last), to: PictureSize(width: 172, height: 130))
        let seen = Mutex<[UInt64: DecodedPicture]>([:])
        let queue = VideoDecodeQueue(
            name: "test-decode",
            fitting: { $0 == 1 ? PictureSize(width: 180, height: 130) : nil },
            pictures: { feedID, decoded in seen.withLock { $0[feedID] = decoded } }
        )
        for frame in frames {
            queue.add(feedID: 1, frame: frame)
            queue.add(feedID: 2, frame: frame)
        }
        await queue.finish()
        let newest = seen.withLock { $0 }
        // The newest picture of each feed is handed on last.
        let scaled = try #require(newest[1])
        #expect(scaled.picture.data == expected.data)
        #expect(scaled.decodedSize == PictureSize(width: 320, height: 240))
        let full = try #require(newest[2])
        #expect(full.picture.width == 320 && full.decodedSize == PictureSize(width: 320, height: 240))
        #expect(PatternReader.read(full.picture)?.frameNumber == 2)
    }
}
