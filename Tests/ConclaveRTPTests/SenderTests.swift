import Testing

@testable import ConclaveRTP

@Suite("RTP sender")
struct SenderTests {
    func makeSender() -> RTPSender {
        RTPSender(
            sequencer: RTPSequencer(ssrc: 0xAAAA, payloadType: 96, initialSequenceNumber: 65535, timestampOffset: 1000),
            clockRate: 90000
        )
    }

    @Test func answersNACKsFromHistoryWithIdenticalBytes() throws {
        var sender = makeSender()
        let packets = sender.send(payloads: [[1], [2], [3]], mediaTimestamp: 0, markLast: true, now: .milliseconds(0))
        #expect(try packets.map { try RTPPacket(parsing: $0).sequenceNumber } == [65535, 0, 1])
        #expect(try packets.map { try RTPPacket(parsing: $0).marker } == [false, false, true])
        #expect(try RTPPacket(parsing: packets[0]).timestamp == 1000)
        let nack = RTCPPacket.genericNACK(.init(senderSSRC: 1, mediaSSRC: 0xAAAA, sequenceNumbers: [0, 1, 7]))
        let actions = sender.handle(nack, now: .milliseconds(30), arrivalNTP: NTPTimestamp(seconds: 0, fraction: 0))
        #expect(actions == [.retransmit([packets[1], packets[2]])])
        // The same NACK again within the retransmit interval is not answered twice.
        #expect(sender.handle(nack, now: .milliseconds(31), arrivalNTP: NTPTimestamp(seconds: 0, fraction: 0)).isEmpty)
        // Another stream's NACK is ignored.
        let other = RTCPPacket.genericNACK(.init(senderSSRC: 1, mediaSSRC: 5, sequenceNumbers: [0]))
        #expect(sender.handle(other, now: .milliseconds(60), arrivalNTP: NTPTimestamp(seconds: 0, fraction: 0)).isEmpty)
        // Too old.
        #expect(sender.handle(nack, now: .seconds(10), arrivalNTP: NTPTimestamp(seconds: 0, fraction: 0)).isEmpty)
    }

    @Test func throttlesKeyframeRequestsAndIgnoresRepeatedFIR() {
        var sender = makeSender()
        let zero = NTPTimestamp(seconds: 0, fraction: 0)
        let pli = RTCPPacket.pictureLossIndication(.init(senderSSRC: 1, mediaSSRC: 0xAAAA))
        #expect(sender.handle(pli, now: .milliseconds(0), arrivalNTP: zero) == [.requestKeyframe])
        #expect(sender.handle(pli, now: .milliseconds(100), arrivalNTP: zero).isEmpty)
        // The throttled request is deferred, not forgotten: it falls due once the interval has passed.
        let tooEarly = sender.dueKeyframeRequest(now: .milliseconds(200))
        let due = sender.dueKeyframeRequest(now: .milliseconds(300))
        let again = sender.dueKeyframeRequest(now: .milliseconds(700))
        #expect(!tooEarly && due && !again)
        let fir = RTCPPacket.fullIntraRequest(.init(senderSSRC: 1, entries: [.init(ssrc: 0xAAAA, sequenceNumber: 4)]))
        #expect(sender.handle(fir, now: .milliseconds(700), arrivalNTP: zero) == [.requestKeyframe])
        #expect(sender.handle(fir, now: .milliseconds(1100), arrivalNTP: zero).isEmpty)  // same FIR number
        let deferred = sender.dueKeyframeRequest(now: .milliseconds(1500))
        #expect(!deferred, "a repeated FIR defers nothing")
        #expect(sender.pliReceived == 2 && sender.firReceived == 1)
    }

    @Test func obeysREMBAndReportsRoundTrip() {
        var sender = makeSender()
        let remb = RTCPPacket.receiverEstimatedMaxBitrate(.init(senderSSRC: 1, bitrate: 300_000, ssrcs: [0xAAAA]))
        #expect(
            sender.handle(remb, now: .zero, arrivalNTP: NTPTimestamp(seconds: 0, fraction: 0)) == [
                .limitBitrate(300_000)
            ]
        )
        let block = RTCPReportBlock(
            ssrc: 0xAAAA,
            fractionLost: 0,
            cumulativeLost: 0,
            extendedHighestSequence: 0,
            jitter: 0,
            lastSenderReport: 0x0001_0000,
            delaySinceLastSenderReport: 0x0000_8000
        )
        let rr = RTCPPacket.receiverReport(.init(ssrc: 1, reports: [block]))
        // Arrival at NTP middle 0x0001_C000: 0.75 s after the SR, 0.5 s of which the peer held it.
        let actions = sender.handle(rr, now: .zero, arrivalNTP: NTPTimestamp(seconds: 1, fraction: 0xC000_0000))
        #expect(actions == [.roundTripTime(.milliseconds(250))])
    }

    @Test func senderReportExtrapolatesTheRTPTimestamp() throws {
        var sender = makeSender()
        _ = sender.send(payloads: [[1, 2, 3]], mediaTimestamp: 9000, markLast: true, now: .milliseconds(100))
        let report = try #require(
            sender.senderReport(now: .milliseconds(150), wallClock: NTPTimestamp(seconds: 5, fraction: 0))
        )
        #expect(report.rtpTimestamp == 1000 + 9000 + 4500)
        #expect(report.packetCount == 1 && report.octetCount == 3)
    }

    @Test func pacesFramesByTimestampAndBitrate() {
        var pacer = FramePacer(clockRate: 90000)
        let t0 = MonotonicTime.milliseconds(1000)
        #expect(pacer.schedule(timestamp: 0xFFFF_F000, packetSizes: [1000, 1000], now: t0) == [t0, t0])
        // The next frame 3000 ticks (33.3 ms) later, across the timestamp wrap.
        let next = pacer.schedule(timestamp: 0xFFFF_F000 &+ 3000, packetSizes: [1000], now: t0)
        #expect(next == [t0.advanced(by: .microseconds(33_333))])
        // With a 400 kbit/s limit the pacing rate is 1 Mbit/s: 1000-byte packets 8 ms apart.
        pacer.bitrateLimit = 400_000
        let limited = pacer.schedule(timestamp: 0xFFFF_F000 &+ 6000, packetSizes: [1000, 1000, 1000], now: t0)
        let start = t0.advanced(by: .microseconds(66_666))
        #expect(limited == [start, start.advanced(by: .milliseconds(8)), start.advanced(by: .milliseconds(16))])
        // A source that fell far behind is re-anchored to now.
        let late = MonotonicTime.milliseconds(5000)
        #expect(pacer.schedule(timestamp: 0xFFFF_F000 &+ 9000, packetSizes: [10], now: late) == [late])
    }
}
