import ConclaveCore
import ConclaveTestSupport
import Testing

@testable import ConclaveRTP

/// Bounded, seeded fuzzing: random and mutated inputs must give a value or a typed error, never a trap.
@Suite("Fuzzing the RTP-side parsers")
struct FuzzTests {
    static let iterations = 4000

    @Test func rtpParserSurvivesRandomAndMutatedPackets() {
        var random = SeededGenerator(seed: 0xF00D)
        let valid = RTPHeader(
            marker: true,
            payloadType: 96,
            sequenceNumber: 7,
            timestamp: 8,
            ssrc: 9,
            csrcs: [1],
            extensions: [.init(id: 1, value: [1]), .init(id: 2, value: [1, 2, 3])]
        ).serialize(payload: [1, 2, 3, 4], paddingLength: 3)
        let twoByte = RTPHeader(
            payloadType: 96,
            sequenceNumber: 7,
            timestamp: 8,
            ssrc: 9,
            extensions: [.init(id: 200, value: [])]
        )
        .serialize(payload: [1])
        var parsed = 0
        for i in 0..<Self.iterations {
            let input: [UInt8]
            switch i % 3 {
            case 0: input = random.bytes(Int.random(in: 0...64, using: &random))
            case 1: input = random.mutate(valid)
            default: input = random.mutate(twoByte)
            }
            do {
                let packet = try RTPPacket(parsing: input)
                parsed += 1
                _ = packet.extensionElements
                _ = packet.csrcs
                #expect(packet.payloadRange.upperBound <= input.count)
            } catch {
                _ = error.description
            }
        }
        #expect(parsed > 100)  // the mutations keep many packets valid, so element walking is exercised
    }

    @Test func rtcpParserSurvivesRandomAndMutatedCompounds() {
        var random = SeededGenerator(seed: 0xBEEF)
        let seeds: [[UInt8]] = [
            RTCPCompound.serialize([
                .senderReport(
                    .init(
                        ssrc: 1,
                        ntpTimestamp: .init(seconds: 1, fraction: 2),
                        rtpTimestamp: 3,
                        packetCount: 4,
                        octetCount: 5,
                        reports: [
                            .init(
                                ssrc: 2,
                                fractionLost: 1,
                                cumulativeLost: 2,
                                extendedHighestSequence: 3,
                                jitter: 4,
                                lastSenderReport: 5,
                                delaySinceLastSenderReport: 6
                            )
                        ]
                    )
                ),
                .sourceDescription(.cname("x", ssrc: 1)), .goodbye(.init(ssrcs: [1], reason: [65])),
            ]),
            RTCPCompound.serialize([
                .genericNACK(.init(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: [1, 2, 40])),
                .pictureLossIndication(.init(senderSSRC: 1, mediaSSRC: 2)),
                .fullIntraRequest(.init(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 1)])),
                .receiverEstimatedMaxBitrate(.init(senderSSRC: 1, bitrate: 123_456, ssrcs: [2, 3])),
                .transportFeedback(
                    .init(
                        senderSSRC: 1,
                        mediaSSRC: 2,
                        referenceTime: 1,
                        feedbackCount: 1,
                        packets: [
                            .init(sequenceNumber: 1, receiveDelta: 3), .init(sequenceNumber: 2, receiveDelta: 400),
                        ]
                    )
                ),
            ]),
        ]
        var parsed = 0
        for i in 0..<Self.iterations {
            let input = i % 4 == 0 ? random.bytes(Int.random(in: 0...80, using: &random)) : random.mutate(seeds[i % 2])
            do {
                let packets = try RTCPCompound.parse(input)
                parsed += 1
                _ = RTCPCompound.serialize(packets)
            } catch {
                _ = error.description
            }
        }
        #expect(parsed > 50)
    }

    @Test func depacketizersSurviveRandomPayloads() {
        var random = SeededGenerator(seed: 0xC0DE)
        var vp8 = VP8Packetizer()
        let vp8Payloads = vp8.packetize(PayloadFormatTests.vp8Keyframe(size: 2500))
        let h264Payloads = H264Packetizer().packetize(
            [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 1, 0x65] + random.bytes(2500)
        )
        for i in 0..<Self.iterations {
            let codec = MediaCodec.allCases[i % 3]
            let base: [[UInt8]] =
                switch codec {
                case .vp8: vp8Payloads
                case .h264: h264Payloads
                case .opus: [[0xFC, 1, 2]]
                }
            var payloads = base.map { random.mutate($0) }
            if i % 5 == 0 {
                payloads = (0..<Int.random(in: 0...4, using: &random)).map { _ in
                    random.bytes(Int.random(in: 0...20, using: &random))
                }
            }
            do {
                let frame = try PayloadFormat.depacketize(codec: codec, payloads: payloads.map { $0[...] })
                #expect(!frame.data.isEmpty)
            } catch {
                _ = error.description
            }
            for p in payloads { _ = PayloadFormat.beginsFrame(codec: codec, payload: p[...]) }
            _ = OpusPayload.sampleCount(payloads.first ?? [])
            _ = H264AnnexB.nalUnitRanges(payloads.first ?? [])
        }
    }

    @Test func jitterBufferSurvivesHostileSequences() {
        var random = SeededGenerator(seed: 0xABCD)
        for codec in MediaCodec.allCases {
            var buffer = JitterBuffer(configuration: codec == .opus ? .audio() : .video(codec))
            var now: Int64 = 0
            for _ in 0..<Self.iterations {
                now += Int64.random(in: 0...30, using: &random)
                let header = RTPHeader(
                    marker: Bool.random(using: &random),
                    payloadType: 96,
                    sequenceNumber: UInt16.random(in: 0...40, using: &random)
                        &* (Bool.random(using: &random) ? 1 : 1700),
                    timestamp: UInt32.random(in: 0...5, using: &random) * 3000,
                    ssrc: 1
                )
                let payload = random.bytes(Int.random(in: 0...30, using: &random))
                guard let packet = try? RTPPacket(parsing: header.serialize(payload: payload)) else { continue }
                _ = buffer.receive(packet, arrival: .milliseconds(now))
                if Int.random(in: 0..<10, using: &random) == 0 { _ = buffer.tick(now: .milliseconds(now)) }
            }
            _ = buffer.makeReportBlock(now: .milliseconds(now))
            #expect(buffer.statistics.packets > 0)
        }
    }
}
