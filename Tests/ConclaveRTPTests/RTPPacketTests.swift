import ConclaveCore
import Testing

@testable import ConclaveRTP

@Suite("RTP packets")
struct RTPPacketTests {
    @Test func parsesFixedHeader() throws {
        let bytes = hex("80 E0 12 34 00 00 56 78 9A BC DE F0 01 02 03")
        let packet = try RTPPacket(parsing: bytes)
        #expect(packet.marker)
        #expect(packet.payloadType == 96)
        #expect(packet.sequenceNumber == 0x1234)
        #expect(packet.timestamp == 0x5678)
        #expect(packet.ssrc == 0x9ABC_DEF0)
        #expect(Array(packet.payload) == [1, 2, 3])
        #expect(packet.extensionProfile == nil)
    }

    @Test func writesOneByteExtensionsAsRFC8285() throws {
        let header = RTPHeader(
            payloadType: 111,
            sequenceNumber: 1,
            timestamp: 2,
            ssrc: 3,
            extensions: [.init(id: 1, value: [0xAA]), .init(id: 2, value: [0xBB, 0xCC])]
        )
        let bytes = header.serialize(payload: [0x55])
        #expect(bytes == hex("90 6F 0001 00000002 00000003 BEDE 0002 10AA 21BBCC 000000 55"))
        let parsed = try RTPPacket(parsing: bytes)
        #expect(parsed.extensionValue(id: 1).map(Array.init) == [0xAA])
        #expect(parsed.extensionValue(id: 2).map(Array.init) == [0xBB, 0xCC])
        #expect(parsed.extensionValue(id: 3) == nil)
        #expect(Array(parsed.payload) == [0x55])
    }

    @Test func writesTwoByteFormForLargeIDs() throws {
        let header = RTPHeader(
            payloadType: 96,
            sequenceNumber: 0,
            timestamp: 0,
            ssrc: 0,
            extensions: [.init(id: 20, value: [0xAA])]
        )
        let bytes = header.serialize(payload: [])
        #expect(Array(bytes[12...]) == hex("1000 0001 14 01 AA 00"))
        let parsed = try RTPPacket(parsing: bytes)
        #expect(parsed.extensionElements == [.init(id: 20, value: [0xAA])])
    }

    @Test func roundTripsCSRCsAndPadding() throws {
        let header = RTPHeader(
            marker: true,
            payloadType: 100,
            sequenceNumber: 65535,
            timestamp: 0xFFFF_FFFF,
            ssrc: 42,
            csrcs: [7, 8],
            extensions: [.init(id: 3, value: Array("video1".utf8))]
        )
        let bytes = header.serialize(payload: [9, 9, 9], paddingLength: 5)
        let parsed = try RTPPacket(parsing: bytes)
        #expect(parsed.csrcs == [7, 8])
        #expect(parsed.paddingLength == 5)
        #expect(Array(parsed.payload) == [9, 9, 9])
        #expect(RTPHeaderExtensionMap(mid: 3).mid(in: parsed) == "video1")
        #expect(bytes.count == header.byteCount + 3 + 5)
    }

    @Test func readsNegotiatedExtensions() throws {
        let map = RTPHeaderExtensionMap(ids: [
            RTPHeaderExtensionURI.audioLevel: 1, RTPHeaderExtensionURI.absSendTime: 2,
            RTPHeaderExtensionURI.transportWideCC: 3,
        ])
        let header = RTPHeader(
            payloadType: 111,
            sequenceNumber: 0,
            timestamp: 0,
            ssrc: 0,
            extensions: [
                .init(id: 1, value: [AudioLevel(voiceActivity: true, level: 30).byte]),
                .init(id: 2, value: RTPHeaderExtensionValue.absSendTime(.milliseconds(1500))),
                .init(id: 3, value: RTPHeaderExtensionValue.transportSequenceNumber(0xBEEF)),
            ]
        )
        let packet = try RTPPacket(parsing: header.serialize(payload: [1]))
        #expect(map.audioLevel(in: packet) == AudioLevel(voiceActivity: true, level: 30))
        #expect(map.absSendTime(in: packet) == 0x06_0000)  // 1.5 s in 6.18 fixed point
        #expect(map.transportSequenceNumber(in: packet) == 0xBEEF)
    }

    @Test func rejectsMalformedPackets() {
        #expect(throws: RTPParseError.self) { try RTPPacket(parsing: [0x80, 0x60]) }
        do {
            _ = try RTPPacket(parsing: hex("40 60 0000 00000000 00000000"))
            Issue.record("version 1 accepted")
        } catch {
            #expect(error.reason == .unsupportedVersion(1))
        }
        do {
            _ = try RTPPacket(parsing: hex("A0 60 0000 00000000 00000000 01 20"))
            Issue.record("padding longer than packet accepted")
        } catch {
            #expect(error.reason == .invalidPadding(0x20))
        }
        do {
            _ = try RTPPacket(parsing: hex("90 60 0000 00000000 00000000 BEDE 0004 1000"))
            Issue.record("extension overrun accepted")
        } catch {
            #expect(error.reason == .truncated)
            #expect(error.offset == 14)
        }
    }

    @Test func unwrapsSequenceNumbers() {
        var u = SequenceNumberUnwrapper()
        #expect(u.unwrap(65534) == 65534)
        #expect(u.unwrap(65535) == 65535)
        #expect(u.unwrap(0) == 65536)
        #expect(u.unwrap(65535) == 65535)  // reordered across the wrap
        #expect(u.unwrap(2) == 65538)
        #expect(u.unwrap(30000) == 30000 + 65536)
        #expect(u.unwrap(40000) == 40000 + 65536)
        var t = TimestampUnwrapper()
        #expect(t.unwrap(0xFFFF_FF00) == 0xFFFF_FF00)
        #expect(t.unwrap(0x100) == 0x1_0000_0100)
    }
}

@Suite("Stream routing")
struct StreamRouterTests {
    func packet(ssrc: UInt32, pt: UInt8, mid: String? = nil) throws -> RTPPacket {
        let ext = mid.map { [RTPHeaderExtensionElement(id: 4, value: RTPHeaderExtensionValue.mid($0))] } ?? []
        return try RTPPacket(
            parsing: RTPHeader(payloadType: pt, sequenceNumber: 0, timestamp: 0, ssrc: ssrc, extensions: ext).serialize(
                payload: [1])
        )
    }

    @Test func routesBySSRCThenMidThenUniquePayloadType() throws {
        var router = RTPStreamRouter(midExtensionID: 4)
        router.bind(ssrc: 10, to: "0")
        router.bind(payloadType: 111, to: "0")
        router.bind(payloadType: 111, to: "2")
        router.bind(payloadType: 107, to: "3")
        #expect(router.route(try packet(ssrc: 10, pt: 111)) == "0")
        #expect(router.route(try packet(ssrc: 20, pt: 96, mid: "1")) == "1")
        #expect(router.route(try packet(ssrc: 20, pt: 96)) == "1", "the mid extension bound the SSRC")
        #expect(router.route(try packet(ssrc: 30, pt: 111)) == nil, "111 is used by two sections")
        #expect(router.route(try packet(ssrc: 40, pt: 107)) == "3")
        router.remove(mid: "1")
        #expect(router.route(try packet(ssrc: 20, pt: 96)) == nil)
        let negotiated = JitterBufferConfiguration.negotiated(codec: .h264, nack: true, pli: false, fir: true)
        #expect(negotiated.nackEnabled && negotiated.keyframeRequestMethod == .fir)
        #expect(!JitterBufferConfiguration.negotiated(codec: .opus, nack: true, pli: true, fir: true).nackEnabled)
    }
}
