import ConclaveCore
import Testing

@Suite struct MediaCodecTests {
    @Test func clockRatesFollowTheRTPProfiles() {
        #expect(MediaCodec.opus.clockRate == 48_000)
        #expect(MediaCodec.vp8.clockRate == 90_000)
        #expect(MediaCodec.h264.clockRate == 90_000)
    }

    @Test func sdpNamesRoundTripCaseInsensitively() {
        for codec in MediaCodec.allCases {
            #expect(MediaCodec(sdpName: codec.sdpName) == codec)
            #expect(MediaCodec(sdpName: codec.sdpName.uppercased()) == codec)
        }
        #expect(MediaCodec(sdpName: "VP9") == nil)
    }
}
