import ConclaveAudio
import ConclaveCore
import ConclaveOpus
import Foundation
import Testing

@Suite struct PlayoutBufferTests {
    /// ±30 ms of uniform jitter on a 40 ms path: once the target has grown to the jitter, every
    /// packet is in time.
    @Test func jitterOfThirtyMillisecondsPlaysWithoutUnderrunOnceTheTargetAdapts() throws {
        let frames = try encodedVoice(count: 600)
        var random = SeededGenerator(seed: 1)
        let deliveries = frames.indices.map { index in
            Delivery(
                frame: frames[index],
                arrivalMilliseconds: Double(index) * 20 + 40 + .random(in: -30...30, using: &random)
            )
        }
        var driver = PlayoutDriver(buffer: try PlayoutBuffer(), deliveries: deliveries)
        driver.run(until: 3_000)
        let adapted = driver.buffer.statistics
        driver.run(until: 11_000)
        let end = driver.buffer.statistics
        #expect(end.underruns == adapted.underruns)
        #expect(end.late == adapted.late)
        #expect(end.fecRecovered == adapted.fecRecovered)
        #expect(end.played - adapted.played >= 390)
        #expect(milliseconds(end.targetDelay) >= 60)
        #expect(milliseconds(end.targetDelay) <= 100)
        #expect(milliseconds(end.jitter) > 10)
        #expect(milliseconds(end.currentDelay) >= milliseconds(end.targetDelay) - 20)
        #expect(milliseconds(end.currentDelay) <= milliseconds(end.targetDelay) + 60)
    }

    /// 5 % random loss: isolated losses come back from the next packet's FEC, the rest is
    /// concealed, and the sound never stops.
    @Test func randomLossIsRecoveredFromFECAndTheOutputStaysContinuous() throws {
        let frames = try encodedVoice(count: 500)
        #expect(frames.allSatisfy { $0.data[0] >> 3 < 16 }, "the test signal must be coded with SILK or hybrid")
        var random = SeededGenerator(seed: 5)
        var lost = Set<Int>()
        let deliveries = frames.indices.map { index in
            let isLost = index > 0 && index < 499 && Double.random(in: 0..<1, using: &random) < 0.05
            if isLost { lost.insert(index) }
            return Delivery(
                frame: frames[index],
                arrivalMilliseconds: isLost ? nil : Double(index) * 20 + 40 + .random(in: -2...2, using: &random)
            )
        }
        let isolated = lost.filter { !lost.contains($0 - 1) && !lost.contains($0 + 1) }
        #expect(lost.count >= 15)
        var driver = PlayoutDriver(buffer: try PlayoutBuffer(), deliveries: deliveries)
        driver.run(untilPlayed: 500 - lost.count, limit: 10_400)
        let statistics = driver.buffer.statistics
        print("lost \(lost.count) (\(isolated.count) alone): \(statistics)")
        #expect(statistics.fecRecovered >= isolated.count)
        #expect(statistics.fecRecovered + statistics.concealed >= lost.count)
        #expect(statistics.late == 0)
        #expect(statistics.underruns == 0)
        #expect(statistics.played == 500 - lost.count - statistics.dropped)
        let first = try #require(driver.output.firstIndex { rms($0) > 0 })
        for block in driver.output[(first + 1)...] { #expect(rms(block) > 300) }
    }

    /// Packets swapped in flight are put back in order: with a delay longer than the swap,
    /// the output is exactly the in-order decode.
    @Test func reorderedPacketsArePlayedInOrder() throws {
        let frames = try encodedVoice(count: 300)
        let deliveries = frames.indices.map { index in
            // Every 7th packet arrives 5 ms after the one that follows it.
            let late = index % 7 == 3 ? 25.0 : 0
            return Delivery(frame: frames[index], arrivalMilliseconds: Double(index) * 20 + 40 + late)
        }
        let buffer = try PlayoutBuffer(configuration: PlayoutConfiguration(minimumDelay: .milliseconds(60)))
        var driver = PlayoutDriver(buffer: buffer, deliveries: deliveries)
        driver.run(untilPlayed: 300, limit: 6_400)
        let statistics = buffer.statistics
        #expect(statistics.played == 300)
        #expect(statistics.late == 0)
        #expect(statistics.concealed == 0)
        #expect(statistics.fecRecovered == 0)
        let decoder = try OpusAudioDecoder()
        let reference = try frames.flatMap { try decoder.decode($0).samples }
        let first = try #require(driver.output.firstIndex { rms($0) > 0 })
        let played = Array(driver.output[first...].joined().prefix(reference.count))
        #expect(played == reference)
    }

    /// Two seconds with no packets (an outage: the timestamps run on), then the stream again:
    /// playback restarts at the target delay, not two seconds behind.
    @Test func afterATwoSecondGapTheDelayReturnsToTheTarget() throws {
        let frames = try encodedVoice(count: 700)
        var random = SeededGenerator(seed: 9)
        let deliveries = frames.indices.map { index in
            let inGap = (250..<350).contains(index)
            return Delivery(
                frame: frames[index],
                arrivalMilliseconds: inGap ? nil : Double(index) * 20 + 40 + .random(in: -10...10, using: &random)
            )
        }
        var driver = PlayoutDriver(buffer: try PlayoutBuffer(), deliveries: deliveries)
        driver.run(until: 5_000)
        let before = driver.buffer.statistics
        driver.run(until: 12_100)
        let after = driver.buffer.statistics
        #expect(after.resyncs == before.resyncs + 1)
        #expect(after.underruns == before.underruns)
        #expect(milliseconds(after.currentDelay) <= milliseconds(after.targetDelay) + 60)
        #expect(milliseconds(after.currentDelay) >= milliseconds(after.targetDelay) - 20)
        #expect(milliseconds(after.currentDelay) <= milliseconds(before.currentDelay) + 60)
        // Silence in the outage once concealment has faded out, sound again after it.
        for block in driver.output[270..<340] { #expect(rms(block) == 0) }
        for block in driver.output[360..<590] { #expect(rms(block) > 300) }
    }

    /// The same outage, but the network held the packets and delivers them in one burst: the
    /// stale ones are skipped and the delay comes back down instead of staying two seconds.
    @Test func aBurstAfterAnOutageDoesNotKeepTheGrownDelay() throws {
        let frames = try encodedVoice(count: 700)
        let deliveries = frames.indices.map { index in
            let arrival = (250..<350).contains(index) ? 7_000 + Double(index - 250) * 0.1 : Double(index) * 20 + 40
            return Delivery(frame: frames[index], arrivalMilliseconds: arrival)
        }
        var driver = PlayoutDriver(buffer: try PlayoutBuffer(), deliveries: deliveries)
        driver.run(until: 12_100)
        let statistics = driver.buffer.statistics
        #expect(milliseconds(statistics.targetDelay) <= 200)
        #expect(milliseconds(statistics.currentDelay) <= milliseconds(statistics.targetDelay) + 60)
        #expect(statistics.late + statistics.dropped >= 80)
    }

    /// One packet in the middle of a beep comes 50 ms late: it is rebuilt from the next one's FEC,
    /// the target delay jumps by the spike and concealed frames grow the delay to it. As the
    /// target decays, frames were dropped only while the delay was two frames above it, so it
    /// stayed 20-40 ms above the target for the rest of the call (`bench/devices/loss` heard a
    /// lossless call at 45 ms against a target of 22). Now, 10 s after the last frame found
    /// missing (until then the frame is room for the next loss's FEC) and once the delay has been
    /// more than a frame above the target for a second, a frame of silence in the next pause is
    /// left out: it ends within a frame of the target, and nothing clicks.
    @Test func aDelayGrownByALatePacketComesBackInAPause() throws {
        let frames = try BeepTrack.encoded(count: 800)
        // Packet 53 is 2,880 samples into the 3rd beep.
        let late = 53
        let deliveries = frames.indices.map { index in
            Delivery(frame: frames[index], arrivalMilliseconds: Double(index) * 20 + 40 + (index == late ? 50 : 0))
        }
        let buffer = try PlayoutBuffer()
        var driver = PlayoutDriver(buffer: buffer, deliveries: deliveries)
        driver.run(until: Double(late) * 20 + 400)
        let grown = buffer.statistics
        #expect(milliseconds(grown.currentDelay) >= 60, "\(grown)")
        driver.run(untilPlayed: frames.count - 4, limit: Double(frames.count) * 20 + 200)
        let statistics = buffer.statistics
        #expect(statistics.dropped >= 2, "\(statistics)")
        #expect(milliseconds(statistics.currentDelay) <= milliseconds(statistics.targetDelay) + 20, "\(statistics)")
        let analysis = BeepAnalysis(Array(driver.output.joined()))
        #expect(analysis.jumps.isEmpty, "\(statistics)")
        #expect(analysis.gaps.isEmpty, "\(statistics)")
    }

    /// Timestamps that wrap past 2³² are just the next ones.
    @Test func timestampsWrapAroundWithoutALoss() throws {
        let frames = try encodedVoice(count: 200, firstTimestamp: UInt32.max - 960 * 50 + 1)
        let deliveries = frames.indices.map { Delivery(frame: frames[$0], arrivalMilliseconds: Double($0) * 20 + 40) }
        var driver = PlayoutDriver(buffer: try PlayoutBuffer(), deliveries: deliveries)
        driver.run(untilPlayed: 200, limit: 4_400)
        let statistics = driver.buffer.statistics
        #expect(statistics.played == 200)
        #expect(statistics.late == 0)
        #expect(statistics.concealed == 0)
        #expect(statistics.resyncs == 1)
    }

    /// Hostile timestamps, arrival instants and payloads: jumps both ways, wraps, duplicates,
    /// garbage packets, clocks going backwards. Nothing traps and the figures stay sane.
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func hostileTimestampsAndPayloadsNeverTrap(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let pool = try encodedVoice(count: 20)
        let buffer = try PlayoutBuffer()
        let origin = ContinuousClock.now
        var clock = 0.0
        var timestamp = UInt32.random(in: 0...UInt32.max, using: &random)
        var block = [Int16](repeating: 0, count: 960)
        for _ in 0..<20_000 {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<50: timestamp &+= 960
            case 50..<60: timestamp = .random(in: 0...UInt32.max, using: &random)
            case 60..<65: timestamp = UInt32.max &- .random(in: 0...3_000, using: &random)
            case 65..<75: timestamp &-= UInt32.random(in: 0...100_000, using: &random)
            case 75..<80: timestamp &+= UInt32.random(in: 0...(1 << 31), using: &random)
            default: break
            }
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<80: clock += .random(in: 0...30, using: &random)
            case 80..<85: clock -= .random(in: 0...5_000, using: &random)
            case 85..<88: clock += .random(in: 0...4e9, using: &random)
            default: break
            }
            let instant = origin + .microseconds(Int64(clock * 1_000))
            var frame = pool[Int.random(in: 0..<pool.count, using: &random)]
            frame.rtpTimestamp = timestamp
            if Int.random(in: 0..<10, using: &random) == 0 {
                frame.data = (0..<Int.random(in: 0...1_500, using: &random)).map { _ in
                    .random(in: 0...255, using: &random)
                }
            }
            buffer.insert(frame, arrival: instant)
            if Bool.random(using: &random) {
                block.withUnsafeMutableBufferPointer { buffer.pull(now: instant, into: $0) }
            }
        }
        let statistics = buffer.statistics
        #expect(statistics.targetDelay <= .milliseconds(200))
        #expect(statistics.played + statistics.concealed + statistics.fecRecovered > 0)
        #expect(statistics.currentDelay >= .zero)
    }

    @Test func otherCodecsAndEmptyPacketsAreIgnored() throws {
        let buffer = try PlayoutBuffer()
        buffer.insert(EncodedFrame(codec: .vp8, data: [1, 2, 3], rtpTimestamp: 0, isKeyframe: true), arrival: .now)
        buffer.insert(EncodedFrame(codec: .opus, data: [], rtpTimestamp: 0, isKeyframe: true), arrival: .now)
        var block = [Int16](repeating: 1, count: 960)
        block.withUnsafeMutableBufferPointer { buffer.pull(now: .now + .seconds(1), into: $0) }
        #expect(block.allSatisfy { $0 == 0 })
        #expect(buffer.statistics.resyncs == 0)
    }
}

@Suite struct PlayoutLookaheadTests {
    /// Renders 12 s of packets that arrive exactly on time, in device callbacks of `callback`
    /// milliseconds (blocks after the first in a callback are mixed ahead of their instant, with
    /// the packets that had arrived by the callback), the packets in `lost` never arriving.
    private func play(callback: Int, lost: Set<Int>) throws -> PlayoutStatistics {
        let frames = try encodedVoice(count: 600)
        let playout = CallAudioPlayout()
        let origin = ContinuousClock.now
        func instant(_ milliseconds: Int) -> ContinuousClock.Instant { origin + .milliseconds(milliseconds) }
        var output = [Int16](repeating: 0, count: callback * 48)
        var sent = 0
        for index in 0..<(12_000 / callback) {
            let now = index * callback + 7
            while sent < frames.count, sent * 20 + 40 <= now {
                if !lost.contains(sent) {
                    playout.received(feedID: 1, frame: frames[sent], at: instant(sent * 20 + 40))
                }
                sent += 1
            }
            output.withUnsafeMutableBufferPointer { playout.render(into: $0, now: instant(now)) }
        }
        return try #require(playout.participants[1]).statistics
    }

    /// Callbacks of 60 ms mix their third block 40 ms ahead, and every 25th packet is lost. After
    /// the first loss the target delay counts the lookahead, so the packet after each later lost
    /// one is there when the lost frame is mixed, and its FEC rebuilds the frame. (Without it a
    /// lost frame mixed ahead found no successor: it was concealed twice, the delay grew by a
    /// frame each time and was dropped back inside the sound, over and over.)
    @Test func aBlockMixedAheadStillFindsTheFECAfterALoss() throws {
        let lost = Set(stride(from: 50, to: 575, by: 25))
        let statistics = try play(callback: 60, lost: lost)
        print("lost \(lost.count): \(statistics)")
        #expect(statistics.fecRecovered >= lost.count - 1, "lost frames rebuilt from FEC: \(statistics)")
        // The start (before the lookahead is known), the first loss, and the frame inserted
        // once to grow the delay by the lookahead.
        #expect(statistics.concealed <= 4, "\(statistics)")
        #expect(statistics.dropped == 0, "\(statistics)")
        #expect(statistics.underruns <= 1, "at the start only: \(statistics)")
        #expect(milliseconds(statistics.targetDelay) >= 60, "\(statistics)")
    }

    /// Without a loss the part of the lookahead within the frame of margin costs nothing: with
    /// callbacks of 40 ms the delay is that of callbacks of one block, and nothing is concealed.
    @Test func withoutALossTheLookaheadAddsNoDelay() throws {
        let ahead = try play(callback: 40, lost: [])
        let single = try play(callback: 20, lost: [])
        #expect(ahead.targetDelay == single.targetDelay, "\(ahead) against \(single)")
        #expect(milliseconds(ahead.targetDelay) <= 21)
        #expect(ahead.concealed == 0 && ahead.dropped == 0 && ahead.underruns == 0, "\(ahead)")
    }
}
