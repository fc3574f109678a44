import ConclaveCore
import Testing

@testable import ConclaveRTP

@Suite("Payload formats")
struct PayloadFormatTests {
    static func vp8Keyframe(size: Int, seed: UInt8 = 1) -> [UInt8] {
        var frame: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01]
        frame += (0..<(size - frame.count)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) }
        return frame
    }

    static func vp8Delta(size: Int, seed: UInt8 = 1) -> [UInt8] {
        [0x31] + (1..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ Int(seed)) }
    }

    @Test func parsesVP8DescriptorsFromRFC7741Layouts() throws {
        let short = try #require(VP8PayloadDescriptor(parsing: hex("90 80 05 AA")[...]))
        #expect(short.startOfPartition && short.partitionIndex == 0)
        #expect(short.pictureID == 5 && !short.pictureIDIs15Bit && short.length == 3)

        let long = try #require(VP8PayloadDescriptor(parsing: hex("90 F0 81 23 11 A3 FF")[...]))
        #expect(long.pictureID == 0x123 && long.pictureIDIs15Bit)
        #expect(long.tl0PictureIndex == 0x11)
        #expect(long.temporalLayer == 2 && long.layerSync && long.keyIndex == 3)
        #expect(long.length == 6)
        #expect(long.serialized == hex("90 F0 81 23 11 A3"))

        let minimal = try #require(VP8PayloadDescriptor(parsing: hex("10 9D")[...]))
        #expect(minimal.pictureID == nil && minimal.length == 1)
        #expect(VP8PayloadDescriptor(parsing: hex("90 80")[...]) == nil)
    }

    @Test func packetizesVP8AtTheMTUAndRebuildsTheFrame() throws {
        let frame = Self.vp8Keyframe(size: 3000)
        var packetizer = VP8Packetizer(initialPictureID: 0x7FFF)
        let payloads = packetizer.packetize(frame)
        #expect(payloads.count == 3)
        #expect(payloads.allSatisfy { $0.count <= RTPPacketization.defaultMaxPayloadSize })
        #expect(payloads.map(\.count) == [1004, 1004, 1004])
        #expect(Array(payloads[0].prefix(4)) == hex("90 80 FF FF"))
        #expect(Array(payloads[1].prefix(4)) == hex("80 80 FF FF"))
        #expect(packetizer.pictureID == 0)  // wrapped at 15 bits
        let rebuilt = try VP8Depacketizer.depacketize(payloads.map { $0[...] })
        #expect(rebuilt.data == frame)
        #expect(rebuilt.isKeyframe)
        let delta = try VP8Depacketizer.depacketize(packetizer.packetize(Self.vp8Delta(size: 500)).map { $0[...] })
        #expect(!delta.isKeyframe)
    }

    @Test func rejectsVP8FrameWithoutItsStart() {
        var packetizer = VP8Packetizer()
        let payloads = packetizer.packetize(Self.vp8Keyframe(size: 3000))
        #expect {
            try VP8Depacketizer.depacketize(payloads.dropFirst().map { $0[...] })
        } throws: { ($0 as? DepacketizationError)?.reason == .missingFrameStart }
    }

    @Test func depacketizesH264FUAAndSTAPAVectors() throws {
        let fu = try H264Depacketizer.depacketize([hex("7C 85 AA BB")[...], hex("7C 45 CC")[...]])
        #expect(fu.data == hex("00000001 65 AA BB CC"))
        #expect(fu.isKeyframe)

        let stap = try H264Depacketizer.depacketize([hex("78 0002 6742 0002 68CE 0000")[...]])
        #expect(stap.data == hex("00000001 6742 00000001 68CE"))
        #expect(!stap.isKeyframe)

        let single = try H264Depacketizer.depacketize([hex("41 9A 00")[...]])
        #expect(single.data == hex("00000001 41 9A 00"))
    }

    @Test func toleratesStartCodesInsideSingleNALPayloads() throws {
        let frame = try H264Depacketizer.depacketize([hex("00000001 65 11 22")[...], hex("000001 41 33")[...]])
        #expect(frame.data == hex("00000001 65 11 22 00000001 41 33"))
        #expect(frame.isKeyframe)
    }

    @Test func rejectsUnsupportedAndOrphanH264Packets() {
        #expect {
            try H264Depacketizer.depacketize([hex("7C 05 AA")[...]])
        } throws: { ($0 as? DepacketizationError)?.reason == .fragmentWithoutStart }
        #expect {
            try H264Depacketizer.depacketize([hex("19 0000 0002 6742")[...]])
        } throws: { ($0 as? DepacketizationError)?.reason == .unsupportedNALType(25) }
        #expect {
            try H264Depacketizer.depacketize([hex("78 0005 67")[...]])
        } throws: { ($0 as? DepacketizationError)?.reason == .truncated }
    }

    @Test func packetizesH264AccessUnitsWithSTAPAAndFUA() throws {
        let sps = hex("67 42 E0 1F DA 02 80")
        let pps = hex("68 CE 3C 80")
        let idr = [0x65] + (0..<3000).map { UInt8(truncatingIfNeeded: $0 % 251 + 2) }
        let au = [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 1] + idr
        let payloads = H264Packetizer().packetize(au)
        #expect(payloads.count == 4)
        #expect(payloads[0] == [0x78, 0x00, 0x07] + sps + [0x00, 0x04] + pps)
        #expect(Array(payloads[1].prefix(2)) == [0x7C, 0x85])
        #expect(Array(payloads[2].prefix(2)) == [0x7C, 0x05])
        #expect(Array(payloads[3].prefix(2)) == [0x7C, 0x45])
        #expect(payloads.allSatisfy { $0.count <= RTPPacketization.defaultMaxPayloadSize })
        let rebuilt = try H264Depacketizer.depacketize(payloads.map { $0[...] })
        #expect(rebuilt.data == [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 0, 1] + idr)
        #expect(rebuilt.isKeyframe)
        #expect(H264AnnexB.units(in: rebuilt.data).map(\.type) == [.sps, .pps, .idrSlice])
    }

    @Test func splitsAnnexBOnThreeAndFourByteStartCodes() {
        let data = hex("00000001 67 AA 000001 68 BB 00000001 65 CC")
        #expect(H264AnnexB.nalUnitRanges(data) == [4..<6, 9..<11, 15..<17])
        #expect(H264AnnexB.nalUnitRanges(hex("65 CC")) == [0..<2])
    }

    @Test func countsOpusSamplesFromTheTOC() {
        #expect(OpusPayload.sampleCount(hex("FC FF FE")) == 960)  // CELT 20 ms, one frame
        #expect(OpusPayload.sampleCount(hex("78 00")) == 960)  // hybrid FB 20 ms
        #expect(OpusPayload.sampleCount(hex("09 00")) == 1920)  // SILK 40 ms, two frames
        #expect(OpusPayload.sampleCount(hex("FB 03 00")) == 2880)  // code 3, three 20 ms frames
        #expect(OpusPayload.sampleCount(hex("FB")) == nil)
        #expect(OpusPayload.sampleCount(hex("FB 3F")) == nil)  // 63 × 20 ms is over 120 ms
        #expect(OpusPayload.packetize([1, 2]) == [[1, 2]])
    }
}
