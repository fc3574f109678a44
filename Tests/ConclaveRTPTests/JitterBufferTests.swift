import ConclaveCore
import ConclaveTestSupport
import Testing

@testable import ConclaveRTP

/// A sender and a receiver joined by a lossy, delaying network, driven in 1 ms steps.
struct LossySession {
    struct InFlight {
        var deliverAt: Int64
        var bytes: [UInt8]
    }

    var sender: RTPSender
    var packetizer = VP8Packetizer()
    var receiver = JitterBuffer(configuration: .video(.vp8))
    var random: SeededGenerator
    var lossRate: Double
    var oneWayDelayMs: Int64 = 10
    var toReceiver: [InFlight] = []
    var toSender: [InFlight] = []
    var delivered: [ReceivedFrame] = []
    var keyframeRequestsAtSender = 0
    var answerNACKs = true
    /// Sequence numbers of first transmissions to drop regardless of `lossRate`.
    var forcedDrops: Set<UInt16> = []
    /// Sequence numbers whose first transmission is never dropped. A receiver cannot know about
    /// packets sent before the first one it sees, so the stream's first frame is protected.
    var protected: Set<UInt16> = []
    /// Tick only when the receiver's `nextDeadline` has come (as `Subscriber` does) instead of
    /// every 10 ms.
    var tickOnDeadlines = false
    /// Ticks that ran.
    var ticks = 0

    init(seed: UInt64, lossRate: Double) {
        random = SeededGenerator(seed: seed)
        self.lossRate = lossRate
        sender = RTPSender(
            sequencer: RTPSequencer(
                ssrc: 0x1111,
                payloadType: 96,
                initialSequenceNumber: 65000,
                timestampOffset: 0xFFFF_0000
            ),
            clockRate: 90000
        )
        receiver.updateRoundTripTime(.milliseconds(2 * oneWayDelayMs))
    }

    mutating func transmit(_ packet: [UInt8], at now: Int64, firstTime: Bool) {
        let sequence = (try? RTPPacket(parsing: packet))?.sequenceNumber
        if firstTime, let sequence, forcedDrops.contains(sequence) { return }
        let isProtected = firstTime && sequence.map { protected.contains($0) } == true
        if !isProtected, Double.random(in: 0..<1, using: &random) < lossRate { return }
        let jitter = Int64.random(in: 0...4, using: &random)  // reorders packets a little
        toReceiver.append(InFlight(deliverAt: now + oneWayDelayMs + jitter, bytes: packet))
    }

    mutating func sendFrame(_ frame: [UInt8], mediaTimestamp: UInt32, at now: Int64, protect: Bool = false) {
        let payloads = packetizer.packetize(frame)
        if protect {
            for k in 0..<payloads.count { protected.insert(sender.sequencer.nextSequenceNumber &+ UInt16(k)) }
        }
        for packet in sender.send(
            payloads: payloads,
            mediaTimestamp: mediaTimestamp,
            markLast: true,
            now: .milliseconds(now)
        ) {
            transmit(packet, at: now, firstTime: true)
        }
    }

    mutating func handle(_ output: JitterBufferOutput, at now: Int64) {
        delivered += output.frames
        let feedback = output.feedbackPackets(senderSSRC: 0x2222, mediaSSRC: 0x1111)
        guard !feedback.isEmpty else { return }
        let bytes = RTCPCompound.serialize(feedback)
        if Double.random(in: 0..<1, using: &random) < lossRate { return }
        toSender.append(InFlight(deliverAt: now + oneWayDelayMs, bytes: bytes))
    }

    /// Sends `frames` 33 ms apart (the first one protected from loss: a receiver cannot ask for
    /// what came before the first packet it sees), then runs for `drainMilliseconds` more.
    mutating func play(_ frames: [[UInt8]], drainMilliseconds: Int64 = 2000) {
        var now: Int64 = 0
        for (i, frame) in frames.enumerated() {
            while now < Int64(i) * 33 {
                now += 1
                step(to: now)
            }
            sendFrame(frame, mediaTimestamp: UInt32(i * 3000), at: now, protect: i == 0)
        }
        for _ in 0..<drainMilliseconds {
            now += 1
            step(to: now)
        }
    }

    /// Advances the network and both ends to `now`.
    mutating func step(to now: Int64) {
        let due = toReceiver.filter { $0.deliverAt <= now }.sorted { $0.deliverAt < $1.deliverAt }
        toReceiver.removeAll { $0.deliverAt <= now }
        for packet in due {
            guard let parsed = try? RTPPacket(parsing: packet.bytes) else { continue }
            let output = receiver.receive(parsed, arrival: .milliseconds(now))
            handle(output, at: now)
        }
        let tickDue =
            tickOnDeadlines ? receiver.nextDeadline.map { $0 <= .milliseconds(now) } ?? false : now % 10 == 0
        if tickDue {
            ticks += 1
            handle(receiver.tick(now: .milliseconds(now)), at: now)
        }
        let feedback = toSender.filter { $0.deliverAt <= now }
        toSender.removeAll { $0.deliverAt <= now }
        for rtcp in feedback {
            guard let packets = try? RTCPCompound.parse(rtcp.bytes) else { continue }
            for packet in packets {
                for action in sender.handle(
                    packet,
                    now: .milliseconds(now),
                    arrivalNTP: NTPTimestamp(unixMicroseconds: now * 1000)
                ) {
                    switch action {
                    case .retransmit(let resend) where answerNACKs:
                        for p in resend { transmit(p, at: now, firstTime: false) }
                    case .requestKeyframe: keyframeRequestsAtSender += 1
                    default: break
                    }
                }
            }
        }
    }
}

@Suite("Jitter buffer")
struct JitterBufferTests {
    static func makeFrames(count: Int, keyframeInterval: Int, seed: UInt64) -> [[UInt8]] {
        var random = SeededGenerator(seed: seed)
        return (0..<count).map { i in
            let size = Int.random(in: 300...5000, using: &random)
            let seedByte = UInt8(truncatingIfNeeded: i)
            return i % keyframeInterval == 0
                ? PayloadFormatTests.vp8Keyframe(size: size, seed: seedByte)
                : PayloadFormatTests.vp8Delta(size: size, seed: seedByte)
        }
    }

    @Test func recoversEveryFrameUnderFivePercentLossWithRetransmission() {
        let frames = Self.makeFrames(count: 300, keyframeInterval: 60, seed: 7)
        var session = LossySession(seed: 42, lossRate: 0.05)
        session.play(frames)
        let stats = session.receiver.statistics
        #expect(session.delivered.count == frames.count)
        let identical = session.delivered.map(\.frame.data) == frames
        #expect(identical, "delivered frames differ from the source")
        let inOrder =
            session.delivered.map(\.frame.rtpTimestamp) == (0..<frames.count).map { UInt32($0 * 3000) &+ 0xFFFF_0000 }
        #expect(inOrder)
        #expect(session.delivered.first?.frame.isKeyframe == true)
        // About 5% of roughly 800 packets are lost; reordering alone must not cause NACKs.
        #expect(stats.nackedPackets > 20 && stats.nackedPackets < 90)
        #expect(stats.recovered > 20)
        #expect(stats.framesDropped == 0)
        #expect(stats.lost == 0)
        #expect(stats.framesAssembled == UInt64(frames.count))
    }

    /// Ticking only at `nextDeadline` (no periodic tick) keeps NACK recovery whole, and a stream
    /// without loss needs no tick at all.
    @Test(arguments: [0.0, 0.05])
    func tickingOnlyAtDeadlinesRecoversEveryFrame(lossRate: Double) {
        let frames = Self.makeFrames(count: 300, keyframeInterval: 60, seed: 7)
        var session = LossySession(seed: 42, lossRate: lossRate)
        session.tickOnDeadlines = true
        session.play(frames)
        #expect(session.delivered.map(\.frame.data) == frames, "delivered frames differ from the source")
        #expect(session.receiver.statistics.framesDropped == 0)
        #expect(session.receiver.statistics.lost == 0)
        #expect(session.receiver.nextDeadline == nil, "an idle buffer has nothing to wait for")
        if lossRate == 0 {
            #expect(session.ticks == 0, "without loss every frame completes on its packets")
        } else {
            #expect(session.receiver.statistics.recovered > 20)
        }
    }

    @Test func requestsAKeyframeAfterAnUnrecoverableBurstAndResumesOnIt() {
        let frames = Self.makeFrames(count: 120, keyframeInterval: 1000, seed: 9)
        var session = LossySession(seed: 1, lossRate: 0)
        session.answerNACKs = false
        var now: Int64 = 0
        var requestsSeen = 0
        var keyframesSent: [Int] = []
        for (i, frame) in frames.enumerated() {
            let due = Int64(i) * 33
            while now < due {
                now += 1
                session.step(to: now)
            }
            if i == 20 {  // lose every packet of frames 20...22
                let first = session.sender.sequencer.nextSequenceNumber
                var counter = VP8Packetizer()
                let count = (20...22).reduce(0) { n, k in n + counter.packetize(frames[k]).count }
                for k in 0..<count { session.forcedDrops.insert(first &+ UInt16(k)) }
            }
            var data = frame
            if session.keyframeRequestsAtSender > requestsSeen {  // the source answers with a keyframe
                requestsSeen = session.keyframeRequestsAtSender
                keyframesSent.append(i)
                data = PayloadFormatTests.vp8Keyframe(size: 2000, seed: UInt8(truncatingIfNeeded: i))
            }
            session.sendFrame(data, mediaTimestamp: UInt32(i * 3000), at: now)
        }
        for _ in 0..<1500 {
            now += 1
            session.step(to: now)
        }
        let stats = session.receiver.statistics
        guard let recovery = keyframesSent.first else {
            Issue.record("the sender never saw a keyframe request")
            return
        }
        #expect(recovery > 22)
        let indices = session.delivered.map { Int(($0.frame.rtpTimestamp &- 0xFFFF_0000) / 3000) }
        // Everything before the burst, nothing from the burst to the keyframe, everything after.
        #expect(indices == Array(0..<20) + Array(recovery..<frames.count))
        #expect(
            session.delivered.first {
                $0.firstSequenceNumber > 0 && Int(($0.frame.rtpTimestamp &- 0xFFFF_0000) / 3000) == recovery
            }?.frame.isKeyframe == true
        )
        // The keyframe says how many frames were lost before it: the undecodable deltas one by
        // one, and the wholly lost frames 20...22 (no packet of them arrived) by the timestamp
        // step over the frame interval.
        let lostBefore = session.delivered.map(\.framesLostBefore)
        let recoveryPosition = 20
        #expect(lostBefore[recoveryPosition] == recovery - 20)
        #expect(lostBefore.enumerated().allSatisfy { $0.offset == recoveryPosition || $0.element == 0 })
        #expect(stats.pliSent >= 1)
        #expect(stats.pliSent <= 3, "keyframe requests are throttled")
        #expect(stats.framesDropped >= UInt64(recovery - 22), "each undecodable frame after the burst is counted")
        // NACK gives up after 10 tries 1.5 RTT (30 ms) apart; the PLI goes out then, and the keyframe
        // follows one round trip later.
        #expect(recovery - 20 < 15, "video resumes within about half a second of the burst")
    }

    @Test func reordersPacketsAndCountsDuplicates() throws {
        let frames = Self.makeFrames(count: 20, keyframeInterval: 10, seed: 3)
        var sender = RTPSender(
            sequencer: RTPSequencer(ssrc: 5, payloadType: 96, initialSequenceNumber: 100, timestampOffset: 0),
            clockRate: 90000
        )
        var packetizer = VP8Packetizer()
        var packets: [[UInt8]] = []
        for (i, frame) in frames.enumerated() {
            packets += sender.send(
                payloads: packetizer.packetize(frame),
                mediaTimestamp: UInt32(i * 3000),
                markLast: true,
                now: .milliseconds(0)
            )
        }
        // Reverse each window of 4 packets, and send one packet twice.
        var shuffled: [[UInt8]] = []
        var i = 0
        while i < packets.count {
            shuffled += packets[i..<min(i + 4, packets.count)].reversed()
            i += 4
        }
        shuffled.insert(packets[10], at: 20)
        var buffer = JitterBuffer(configuration: .video(.vp8))
        var delivered: [[UInt8]] = []
        for (n, bytes) in shuffled.enumerated() {
            let output = buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(Int64(n)))
            delivered += output.frames.map(\.frame.data)
        }
        #expect(delivered.count == frames.count)
        let identical = delivered == frames
        #expect(identical)
        #expect(buffer.statistics.duplicates + buffer.statistics.late == 1)
        #expect(buffer.statistics.framesDropped == 0)
    }

    @Test func stepsOverPaddingOnlyPackets() throws {
        let frames = Self.makeFrames(count: 10, keyframeInterval: 10, seed: 5)
        var packetizer = VP8Packetizer()
        var seq: UInt16 = 0
        var buffer = JitterBuffer(configuration: .video(.vp8))
        var delivered: [[UInt8]] = []
        for (i, frame) in frames.enumerated() {
            let payloads = packetizer.packetize(frame)
            for (k, payload) in payloads.enumerated() {
                let bytes = RTPHeader(
                    marker: k == payloads.count - 1,
                    payloadType: 96,
                    sequenceNumber: seq,
                    timestamp: UInt32(i * 3000),
                    ssrc: 1
                )
                .serialize(payload: payload)
                seq &+= 1
                delivered += buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(Int64(i * 33))).frames
                    .map(\.frame.data)
            }
            // A probing packet: padding only, previous frame's timestamp, no marker.
            let padding = RTPHeader(payloadType: 96, sequenceNumber: seq, timestamp: UInt32(i * 3000), ssrc: 1)
                .serialize(payload: [], paddingLength: 200)
            seq &+= 1
            delivered += buffer.receive(try RTPPacket(parsing: padding), arrival: .milliseconds(Int64(i * 33 + 5)))
                .frames.map(\.frame.data)
        }
        let identical = delivered == frames
        #expect(identical)
        #expect(buffer.statistics.framesDropped == 0 && buffer.statistics.pliSent == 0)
    }

    @Test func assemblesH264AccessUnitsThroughFUA() throws {
        let idr = [0x65] + (0..<4000).map { UInt8(truncatingIfNeeded: $0 % 253 + 1) }
        let sps = hex("67 42 E0 1F DA"), pps = hex("68 CE 3C 80")
        let keyframe = [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 0, 1] + idr
        let delta = [0, 0, 0, 1, 0x41] + (0..<2500).map { UInt8(truncatingIfNeeded: $0 % 249 + 1) }
        var sequencer = RTPSequencer(ssrc: 7, payloadType: 107, initialSequenceNumber: 65530, timestampOffset: 0)
        var buffer = JitterBuffer(configuration: .video(.h264))
        var delivered: [EncodedFrame] = []
        for (i, au) in [keyframe, delta, delta].enumerated() {
            for bytes in sequencer.packets(
                for: H264Packetizer().packetize(au),
                mediaTimestamp: UInt32(i * 3000),
                markLast: true
            ) {
                delivered += buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(Int64(i))).frames.map(
                    \.frame
                )
            }
        }
        let identical = delivered.map(\.data) == [keyframe, delta, delta]
        #expect(identical)
        #expect(delivered.map(\.isKeyframe) == [true, false, false])
        #expect(delivered.allSatisfy { $0.codec == .h264 })
    }

    @Test func h264ResumesAtTheNextKeyframeAfterALostFrame() throws {
        let keyframe =
            [0, 0, 0, 1, 0x67, 0x42, 0, 0, 0, 1, 0x68, 0xCE, 0, 0, 0, 1, 0x65] + (0..<3000).map { UInt8($0 % 200 + 1) }
        func delta(_ i: Int) -> [UInt8] { [0, 0, 0, 1, 0x41, UInt8(i), 0x9A] }
        var sequencer = RTPSequencer(ssrc: 7, payloadType: 107, initialSequenceNumber: 100, timestampOffset: 0)
        var config = JitterBufferConfiguration.video(.h264)
        config.nackEnabled = false
        config.maxWaitForMissing = .milliseconds(100)
        var buffer = JitterBuffer(configuration: config)
        var delivered: [Int] = []
        var lostBefore: [Int] = []
        var pli = 0
        for i in 0..<14 {
            let au = i == 0 || i == 10 ? keyframe : delta(i)
            let packets = sequencer.packets(
                for: H264Packetizer().packetize(au),
                mediaTimestamp: UInt32(i * 3000),
                markLast: true
            )
            if i == 5 { continue }  // the whole frame is lost
            for bytes in packets {
                let now = MonotonicTime.milliseconds(Int64(i * 33))
                var output = buffer.receive(try RTPPacket(parsing: bytes), arrival: now)
                let ticked = buffer.tick(now: now)
                output.frames += ticked.frames
                if output.keyframeRequest != nil || ticked.keyframeRequest != nil { pli += 1 }
                delivered += output.frames.map { Int($0.frame.rtpTimestamp / 3000) }
                lostBefore += output.frames.map(\.framesLostBefore)
            }
        }
        #expect(delivered == [0, 1, 2, 3, 4, 10, 11, 12, 13])
        // Frame 5 lost, 6...9 undecodable without it: the keyframe that resumes counts all five.
        #expect(lostBefore == [0, 0, 0, 0, 0, 5, 0, 0, 0])
        #expect(pli >= 1)
        #expect(buffer.statistics.framesDropped >= 4)
        #expect(buffer.statistics.lost == 1)
    }

    @Test func audioSkipsALostPacketAfterTheWaitAndReportsLoss() throws {
        var buffer = JitterBuffer(configuration: .audio())
        var delivered: [UInt32] = []
        var lostBefore: [Int] = []
        for seq in 0..<10 where seq != 3 {
            let bytes = RTPHeader(payloadType: 111, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 960), ssrc: 9)
                .serialize(payload: [0xFC, UInt8(seq)])
            let output = buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(Int64(seq)))
            #expect(output.nack.isEmpty)
            delivered += output.frames.map(\.frame.rtpTimestamp)
            lostBefore += output.frames.map(\.framesLostBefore)
        }
        #expect(delivered == [0, 960, 1920])  // 4...9 wait for 3 for up to 10 ms
        let late = buffer.tick(now: .milliseconds(200)).frames
        delivered += late.map(\.frame.rtpTimestamp)
        lostBefore += late.map(\.framesLostBefore)
        #expect(delivered == [0, 1, 2, 4, 5, 6, 7, 8, 9].map { UInt32($0 * 960) })
        #expect(lostBefore == [0, 0, 0, 1, 0, 0, 0, 0, 0], "the frame after the lost packet says one was lost")
        #expect(buffer.statistics.framesDropped == 1)
        #expect(buffer.statistics.lost == 1)
        let maybeBlock = buffer.makeReportBlock(now: .milliseconds(200))
        let block = try #require(maybeBlock)
        #expect(block.cumulativeLost == 1)
        #expect(block.fractionLost == UInt8(256 / 10))
        #expect(block.extendedHighestSequence == 9)
        #expect(block.ssrc == 9)
    }

    /// Audio at its real pace, 20 ms a packet: a lost packet holds its successor back no longer
    /// than the reorder wait (the playout's delay would grow by the hold after every loss), and a
    /// packet swapped with its successor by a few milliseconds is still put back in order.
    @Test func audioHoldsALostPacketsSuccessorOnlyForTheReorderWait() throws {
        var buffer = JitterBuffer(configuration: .audio())
        func packet(_ seq: Int) throws -> RTPPacket {
            try RTPPacket(
                parsing: RTPHeader(payloadType: 111, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 960), ssrc: 9)
                    .serialize(payload: [0xFC, UInt8(seq)])
            )
        }
        var delivered: [(sequence: UInt32, at: Int64)] = []
        func take(_ output: JitterBufferOutput, at milliseconds: Int64) {
            delivered += output.frames.map { (sequence: $0.frame.rtpTimestamp / 960, at: milliseconds) }
        }
        // 0, 1, 2; 3 lost; 4 and 5; 7 arrives 4 ms before 6.
        let arrivals: [(Int, Int64)] = [(0, 0), (1, 20), (2, 40), (4, 80), (5, 100), (7, 136), (6, 140), (8, 160)]
        for (seq, at) in arrivals {
            // The receive session ticks the buffer at its deadline before the next packet.
            while let deadline = buffer.nextDeadline, deadline <= .milliseconds(at) {
                take(buffer.tick(now: deadline), at: deadline.microseconds / 1_000)
            }
            take(buffer.receive(try packet(seq), arrival: .milliseconds(at)), at: at)
        }
        #expect(delivered.map(\.sequence) == [0, 1, 2, 4, 5, 6, 7, 8])
        let four = try #require(delivered.first { $0.sequence == 4 })
        #expect(Duration.milliseconds(four.at - 80) <= .milliseconds(10))
        #expect(delivered.first { $0.sequence == 6 }?.at == 140, "the swapped packet is delivered on arrival")
        #expect(buffer.statistics.lost == 1)
        #expect(buffer.statistics.late == 0)
    }

    @Test func silenceIsNotLoss() throws {
        // DTX or a muted sender: the timestamps jump, the sequence numbers do not.
        var buffer = JitterBuffer(configuration: .audio())
        var frames: [ReceivedFrame] = []
        let timestamps = [0, 960, 1920, 48000, 48960, 96000]
        for (seq, timestamp) in timestamps.enumerated() {
            let bytes = RTPHeader(payloadType: 111, sequenceNumber: UInt16(seq), timestamp: UInt32(timestamp), ssrc: 9)
                .serialize(payload: [0xFC, UInt8(seq)])
            frames +=
                buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(Int64(timestamp / 48))).frames
        }
        #expect(frames.map(\.frame.rtpTimestamp) == timestamps.map(UInt32.init))
        #expect(frames.map(\.framesLostBefore) == Array(repeating: 0, count: timestamps.count))
    }

    /// A VP8 keyframe (sequence 0) and a delta frame (sequence 2) at time 0: packet 1 is missing.
    /// Returns the NACKs asked for on arrival.
    static func receiveKeyframeThenGap(into buffer: inout JitterBuffer) throws -> [UInt16] {
        var nacked: [UInt16] = []
        for seq: UInt16 in [0, 2] {
            let payload =
                seq == 0 ? [0x90, 0x80, 0x00] + PayloadFormatTests.vp8Keyframe(size: 20) : [0x90, 0x80, 0x02, 0x31, 0]
            let bytes = RTPHeader(
                marker: true,
                payloadType: 96,
                sequenceNumber: seq,
                timestamp: UInt32(seq) * 3000,
                ssrc: 1
            )
            .serialize(payload: payload)
            nacked += buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(0)).nack
        }
        return nacked
    }

    @Test func nackRetriesAreLimited() throws {
        var config = JitterBufferConfiguration.video(.vp8)
        config.maxNackRetries = 3
        var buffer = JitterBuffer(configuration: config)
        buffer.updateRoundTripTime(.milliseconds(20))
        var nacked = try Self.receiveKeyframeThenGap(into: &buffer)
        #expect(nacked.isEmpty, "a gap younger than the reorder tolerance is not NACKed yet")
        for t in stride(from: 10, through: 300, by: 10) {
            nacked += buffer.tick(now: .milliseconds(Int64(t))).nack
        }
        #expect(nacked == [1, 1, 1])
        #expect(buffer.statistics.nackRequests == 3)
        #expect(buffer.statistics.nackedPackets == 1)
        #expect(buffer.nextDeadline == nil, "the gap was given up and the head dropped")
    }

    /// `nextDeadline` names the instants a tick acts at: the first NACK after the reorder
    /// tolerance, each retry 1.5 RTT later, and the give-up after the last retry.
    @Test func nextDeadlineNamesWhenEachNackIsDue() throws {
        var config = JitterBufferConfiguration.video(.vp8)
        config.maxNackRetries = 2
        var buffer = JitterBuffer(configuration: config)
        buffer.updateRoundTripTime(.milliseconds(20))
        _ = try Self.receiveKeyframeThenGap(into: &buffer)
        var fired: [(Int64, [UInt16])] = []
        while let deadline = buffer.nextDeadline, fired.count < 10 {
            fired.append((deadline.microseconds / 1000, buffer.tick(now: deadline).nack))
        }
        #expect(fired.map(\.0) == [5, 35, 35], "first NACK at 5 ms, retry at 5 + 30 ms, then give up")
        #expect(fired.map(\.1) == [[1], [1], []])
        #expect(buffer.nextDeadline == nil)
    }

    /// A PLI for a delta frame at the start must travel in a compound packet that starts with a
    /// receiver report about the stream: an SFU routes feedback from a receive-only peer by the
    /// SSRC of that report block (Janus drops a PLI sent on its own).
    @Test func keyframeRequestsLeadWithAReceiverReportAboutTheStream() throws {
        var buffer = JitterBuffer(configuration: .video(.vp8))
        let delta = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 7, timestamp: 3000, ssrc: 0x1111)
            .serialize(payload: [0x90, 0x80, 0x02, 0x31, 0])
        let output = buffer.receive(try RTPPacket(parsing: delta), arrival: .milliseconds(0))
        #expect(output.frames.isEmpty, "a delta frame before any keyframe is not delivered")
        #expect(output.keyframeRequest == .pli)
        let compound = RTCPCompound.serialize(output.feedbackPackets(senderSSRC: 0x2222, mediaSSRC: 0x1111))
        let parsed = try RTCPCompound.parse(compound)
        guard case .receiverReport(let report) = parsed.first else {
            Issue.record("the compound starts with \(String(describing: parsed.first))")
            return
        }
        #expect(report.ssrc == 0x2222)
        #expect(report.reports.map(\.ssrc) == [0x1111])
        #expect(report.reports.first?.extendedHighestSequence == 7)
        #expect(parsed.dropFirst() == [.pictureLossIndication(.init(senderSSRC: 0x2222, mediaSSRC: 0x1111))])
        #expect(buffer.tick(now: .milliseconds(10)).feedbackPackets(senderSSRC: 0x2222, mediaSSRC: 0x1111).isEmpty)
    }

    @Test func computesInterarrivalJitter() throws {
        var buffer = JitterBuffer(configuration: .audio())
        for seq in 0..<400 {
            // Transit alternates between 0 and 10 ms: |D| is 480 ticks at 48 kHz every packet.
            let arrivalMs = Int64(seq * 20 + (seq % 2 == 0 ? 0 : 10))
            let bytes = RTPHeader(payloadType: 111, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 960), ssrc: 9)
                .serialize(payload: [0xFC])
            _ = buffer.receive(try RTPPacket(parsing: bytes), arrival: .milliseconds(arrivalMs))
        }
        #expect(abs(buffer.statistics.jitter - 480) < 1)
        #expect(buffer.statistics.framesAssembled == 400)
    }

    @Test func acceptsWallClockSizedArrivalTimes() throws {
        // A Unix-epoch origin in microseconds times 90 kHz would overflow a naive product.
        var buffer = JitterBuffer(configuration: .video(.vp8))
        let origin: Int64 = 1_700_000_000_000_000
        var delivered = 0
        for i in 0..<10 {
            var packetizer = VP8Packetizer()
            let frame = i == 0 ? PayloadFormatTests.vp8Keyframe(size: 100) : PayloadFormatTests.vp8Delta(size: 100)
            let bytes = RTPHeader(
                marker: true,
                payloadType: 96,
                sequenceNumber: UInt16(i),
                timestamp: UInt32(i * 3000),
                ssrc: 1
            )
            .serialize(payload: packetizer.packetize(frame)[0])
            let arrival = MonotonicTime(microseconds: origin + Int64(i) * 33_333)
            delivered += buffer.receive(try RTPPacket(parsing: bytes), arrival: arrival).frames.count
        }
        #expect(delivered == 10)
        #expect(buffer.statistics.jitter < 10)
    }
}
