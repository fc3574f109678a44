import Testing

@testable import ConclaveRTP

@Suite("RTCP")
struct RTCPTests {
    @Test func writesGenericNACKWithBitmaskEntries() throws {
        let nack = RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: [100, 101, 103, 117, 200])
        let bytes = RTCPCompound.serialize([.genericNACK(nack)])
        #expect(bytes == hex("81 CD 0005 00000001 00000002 0064 0005 0075 0000 00C8 0000"))
        let parsed = try RTCPCompound.parse(bytes)
        #expect(parsed == [.genericNACK(nack)])
    }

    @Test func nackEntriesWrapAroundSequenceZero() throws {
        let nack = RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: [65535, 0, 1])
        let bytes = RTCPCompound.serialize([.genericNACK(nack)])
        #expect(Array(bytes[12...]) == hex("FFFF 0003"))
        #expect(try RTCPCompound.parse(bytes) == [.genericNACK(nack)])
    }

    @Test func writesPLIFIRAndREMB() throws {
        let pli = RTCPPacket.pictureLossIndication(.init(senderSSRC: 1, mediaSSRC: 2))
        #expect(RTCPCompound.serialize([pli]) == hex("81 CE 0002 00000001 00000002"))
        let fir = RTCPPacket.fullIntraRequest(.init(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 7)]))
        #expect(RTCPCompound.serialize([fir]) == hex("84 CE 0004 00000001 00000000 00000002 07000000"))
        let remb = RTCPPacket.receiverEstimatedMaxBitrate(.init(senderSSRC: 1, bitrate: 1_000_000, ssrcs: [2]))
        let rembBytes = RTCPCompound.serialize([remb])
        #expect(rembBytes == hex("8F CE 0005 00000001 00000000 52454D42 01 0BD090 00000002"))
        #expect(try RTCPCompound.parse(rembBytes + RTCPCompound.serialize([pli, fir])) == [remb, pli, fir])
    }

    @Test func roundTripsSenderReportWithSDESAndBYE() throws {
        let block = RTCPReportBlock(
            ssrc: 0x1234,
            fractionLost: 25,
            cumulativeLost: -3,
            extendedHighestSequence: 0x1_0005,
            jitter: 90,
            lastSenderReport: 0xAABB_CCDD,
            delaySinceLastSenderReport: 65536
        )
        let sr = RTCPSenderReport(
            ssrc: 0xCAFE,
            ntpTimestamp: NTPTimestamp(seconds: 0xE000_0000, fraction: 0x8000_0000),
            rtpTimestamp: 90000,
            packetCount: 10,
            octetCount: 12000,
            reports: [block]
        )
        let packets: [RTCPPacket] = [
            .senderReport(sr), .sourceDescription(.cname("conclave-abc", ssrc: 0xCAFE)),
            .goodbye(.init(ssrcs: [0xCAFE], reason: Array("bye".utf8))),
        ]
        let bytes = RTCPCompound.serialize(packets)
        #expect(Array(bytes.prefix(8)) == hex("81 C8 000C 0000CAFE"))
        #expect(Array(bytes[28..<36]) == hex("00001234 19 FFFFFD"))
        #expect(bytes.count % 4 == 0)
        let parsed = try RTCPCompound.parse(bytes)
        #expect(parsed == packets)
        guard case .sourceDescription(let sdes) = parsed[1] else { Issue.record("no SDES"); return }
        #expect(sdes.chunks.first?.cname == "conclave-abc")
    }

    @Test func parsesReceiverReportAndComputesRoundTrip() throws {
        // LSR = middle 32 bits of the SR we sent; the peer held it for 0.5 s (DLSR 0x8000).
        let sent = NTPTimestamp(unixMicroseconds: 1_700_000_000_000_000)
        let arrival = NTPTimestamp(unixMicroseconds: 1_700_000_000_540_000)
        let block = RTCPReportBlock(
            ssrc: 9,
            fractionLost: 0,
            cumulativeLost: 0,
            extendedHighestSequence: 1,
            jitter: 0,
            lastSenderReport: sent.middle32,
            delaySinceLastSenderReport: 0x8000
        )
        let bytes = RTCPCompound.serialize([.receiverReport(.init(ssrc: 5, reports: [block]))])
        #expect(Array(bytes.prefix(4)) == hex("81 C9 0007"))
        let parsed = try RTCPCompound.parse(bytes)
        guard case .receiverReport(let rr) = parsed.first else { Issue.record("no RR"); return }
        let rtt = try #require(rr.reports.first?.roundTripTime(arrival: arrival))
        #expect(abs(rtt.microseconds - 40_000) < 100)
    }

    @Test func roundTripsTransportFeedback() throws {
        let fb = RTCPTransportFeedback(
            senderSSRC: 1,
            mediaSSRC: 2,
            referenceTime: -5,
            feedbackCount: 3,
            packets: [
                .init(sequenceNumber: 65534, receiveDelta: 4), .init(sequenceNumber: 65535, receiveDelta: nil),
                .init(sequenceNumber: 0, receiveDelta: 300), .init(sequenceNumber: 1, receiveDelta: -2),
            ]
        )
        let bytes = RTCPCompound.serialize([.transportFeedback(fb)])
        #expect(try RTCPCompound.parse(bytes) == [.transportFeedback(fb)])
    }

    @Test func parsesRunLengthTransportFeedbackChunks() throws {
        // base 10, 3 packets, run-length chunk "small delta" × 3, deltas 1, 2, 3.
        let bytes = hex("8F CD 0006 00000001 00000002 000A 0003 000001 00 2003 01 02 03 00 00000000")
        let parsed = try RTCPCompound.parse(Array(bytes.prefix(28)))
        guard case .transportFeedback(let fb) = parsed.first else { Issue.record("not parsed"); return }
        #expect(fb.packets.map(\.receiveDelta) == [1, 2, 3])
        #expect(fb.packets.map(\.sequenceNumber) == [10, 11, 12])
        #expect(fb.referenceTime == 1)
    }

    @Test func stripsPaddingAndKeepsUnknownPackets() throws {
        let bytes = hex("A1 CC 0002 41424344 00000002") + hex("80 C9 0001 00000005")
        let parsed = try RTCPCompound.parse(bytes)
        #expect(
            parsed == [
                .unknown(packetType: 204, count: 1, body: hex("41424344 0000")),
                .receiverReport(.init(ssrc: 5, reports: [])),
            ]
        )
    }

    @Test func rejectsMalformedCompounds() {
        #expect(throws: RTCPParseError.self) { try RTCPCompound.parse(hex("81 C9 0005 00000005")) }
        #expect(throws: RTCPParseError.self) { try RTCPCompound.parse(hex("41 C9 0001 00000005")) }
        #expect(throws: RTCPParseError.self) { try RTCPCompound.parse(hex("82 C9 0001 00000005")) }
        #expect(throws: RTCPParseError.self) { try RTCPCompound.parse(hex("A1 C9 0001 00000000")) }
    }

    @Test func senderReportClockMapsRTPToWallClock() {
        var clock = SenderReportClock(clockRate: 90000)
        #expect(clock.unixMicroseconds(forRTPTimestamp: 0) == nil)
        let ntp = NTPTimestamp(unixMicroseconds: 1_700_000_000_500_000)
        clock.update(
            with: RTCPSenderReport(ssrc: 1, ntpTimestamp: ntp, rtpTimestamp: 0xFFFF_0000, packetCount: 0, octetCount: 0)
        )
        #expect(clock.unixMicroseconds(forRTPTimestamp: 0xFFFF_0000) == 1_700_000_000_500_000)
        // 0x10000 + 45000 ticks later, across the 32-bit wrap.
        let later = UInt32(0xFFFF_0000) &+ 0x10000 &+ 45000
        let expectedLater: Int64 = 1_700_000_000_500_000 + Int64(0x10000 + 45000) * 1_000_000 / 90000
        #expect(clock.unixMicroseconds(forRTPTimestamp: later) == expectedLater)
        #expect(clock.unixMicroseconds(forRTPTimestamp: 0xFFFF_0000 &- 90000) == 1_699_999_999_500_000)
        let mapped = clock.ntpTimestamp(forRTPTimestamp: 0xFFFF_0000 &+ 45000)
        #expect(mapped.map { abs($0.unixMicroseconds - 1_700_000_001_000_000) <= 1 } == true)
    }
}
