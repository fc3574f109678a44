import ConclaveCore
import ConclaveTestSupport
import Testing

@testable import ConclaveRTP

/// RTP timestamps and sequence numbers as a broken or hostile sender could send them: jumps of
/// 2^31, wraps, repeats, reorders. The receive path must deliver or drop, never trap.
@Suite("Hostile RTP timestamps and sequence numbers")
struct HostileTimestampTests {
    /// One packet of a hostile stream: the next sequence number and timestamp after a random misstep.
    static func misstep(
        _ sequence: inout UInt16,
        _ timestamp: inout UInt32,
        step: UInt32,
        _ random: inout SeededGenerator
    ) {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: timestamp &+= 0x7FFF_FFFF
        case 1: timestamp &+= 0x8000_0000
        case 2: timestamp = UInt32.max &- UInt32.random(in: 0..<10_000, using: &random)
        case 3: sequence &+= UInt16.random(in: 1_000...40_000, using: &random)
        case 4: sequence = UInt16.max &- UInt16.random(in: 0..<5, using: &random)
        case 5: timestamp &-= UInt32.random(in: 0...(1 << 31), using: &random)
        case 6: sequence &-= UInt16.random(in: 1...3, using: &random)  // a reorder or repeat
        case 7: break  // a repeat of the previous packet
        default:
            sequence &+= 1
            timestamp &+= step
        }
    }

    @Test(
        "The jitter buffer takes timestamps that jump by 0x7fffffff, wrap, repeat and go back, with a wall-clock origin, without a trap",
        arguments: MediaCodec.allCases
    )
    func jitterBufferSurvivesTimestampJumps(codec: MediaCodec) {
        var random = SeededGenerator(seed: 0x7FFF_FFFF &+ UInt64(codec.clockRate))
        var buffer = JitterBuffer(configuration: codec == .opus ? .audio() : .video(codec))
        // A wall-clock-sized arrival origin (milliseconds since 1970).
        var now: Int64 = 1_763_000_000_000
        var sequence: UInt16 = 1
        var timestamp: UInt32 = 0xFFFF_0000
        var received = 0
        var delivered = 0
        let step: UInt32 = codec == .opus ? 960 : 3_000
        for _ in 0..<6_000 {
            Self.misstep(&sequence, &timestamp, step: step, &random)
            now += Int64.random(in: 0...25, using: &random)
            let header = RTPHeader(
                marker: true,
                payloadType: 96,
                sequenceNumber: sequence,
                timestamp: timestamp,
                ssrc: 0xBAD
            )
            // Payloads that depacketize: a VP8 keyframe start, a single H264 IDR NAL, Opus.
            let payload: [UInt8] =
                switch codec {
                case .vp8: [0x10, 0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00] + random.bytes(20)
                case .h264: [0x65] + random.bytes(20)
                default: [0xF8] + random.bytes(20)
                }
            guard let packet = try? RTPPacket(parsing: header.serialize(payload: payload)) else { continue }
            received += 1
            delivered += buffer.receive(packet, arrival: .milliseconds(now)).frames.count
            if Int.random(in: 0..<5, using: &random) == 0 {
                delivered += buffer.tick(now: .milliseconds(now)).frames.count
            }
        }
        delivered += buffer.tick(now: .milliseconds(now + 10_000)).frames.count
        let report = buffer.makeReportBlock(now: .milliseconds(now))
        #expect(delivered <= received)
        #expect(delivered > 0, "the normal stretches between missteps still deliver frames")
        #expect(buffer.statistics.jitter.isFinite && buffer.statistics.jitter >= 0)
        _ = report
    }

    @Test("The timestamp unwrapper follows wraps and repeats and holds 2^31 jumps without a trap")
    func timestampUnwrapperFollowsWrapsAndJumps() {
        var unwrapper = TimestampUnwrapper()
        #expect(unwrapper.unwrap(UInt32.max - 10) == Int64(UInt32.max) - 10)
        #expect(unwrapper.unwrap(5) == Int64(UInt32.max) + 6, "a wrap goes forward")
        #expect(unwrapper.unwrap(5) == Int64(UInt32.max) + 6, "a repeat stays")
        #expect(unwrapper.unwrap(UInt32.max - 20) == Int64(UInt32.max) - 20, "a reorder goes back")
        var value: UInt32 = 5
        var last = unwrapper.unwrap(value)
        for _ in 0..<10_000 {
            value &+= 0x7FFF_FFFF
            let next = unwrapper.unwrap(value)
            #expect(next == last + 0x7FFF_FFFF)
            last = next
        }
    }

    @Test("The frame pacer re-anchors on timestamps that jump by 0x7fffffff and wrap, sending each frame at once")
    func framePacerSurvivesTimestampJumps() {
        var pacer = FramePacer(clockRate: 90_000)
        var timestamp: UInt32 = 0
        var now = MonotonicTime.milliseconds(1_000)
        for index in 0..<10_000 {
            timestamp &+= index % 3 == 0 ? 3_000 : 0x7FFF_FFFF
            now = now.advanced(by: .milliseconds(33))
            let due = pacer.schedule(timestamp: timestamp, packetSizes: [1_000], now: now)
            #expect(due.count == 1)
            if let first = due.first {
                #expect(first.since(now) <= pacer.maxLead && now.since(first) <= pacer.maxLag)
            }
        }
    }
}
