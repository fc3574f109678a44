import ConclaveCore
import Testing

@testable import ConclaveSDP

@Suite("SDP parsing and writing")
struct SDPParsingTests {
    @Test(arguments: [
        ("janus publisher answer", Fixtures.janusPublisherAnswer),
        ("janus subscriber offer", Fixtures.janusSubscriberOffer),
        ("chrome offer", Fixtures.chromeOffer),
        ("aiortc offer", Fixtures.aiortcOffer),
    ])
    func roundTripsWithoutLosingLines(name: String, text: String) throws {
        let parsed = try SessionDescription(parsing: text)
        let written = parsed.text
        #expect(try SessionDescription(parsing: written).text == written, "\(name) is not stable")
        // Every non-empty input line survives (serialization only normalizes line ends and order).
        let inputLines = Set(text.replacing("\r\n", with: "\n").split(separator: "\n").map(String.init))
        let outputLines = Set(written.split(separator: "\r\n").map(String.init))
        #expect(inputLines.subtracting(outputLines).isEmpty, "\(name) lost \(inputLines.subtracting(outputLines))")
        #expect(written.hasSuffix("\r\n"))
    }

    @Test func readsTypedAttributesOfAChromeOffer() throws {
        let sdp = try SessionDescription(parsing: Fixtures.chromeOffer)
        #expect(sdp.bundleMids == ["0", "1"])
        #expect(sdp.origin?.sessionID == "7614219274584779017")
        let audio = sdp.media[0]
        #expect(audio.type == "audio" && audio.port == 51472 && audio.mid == "0")
        #expect(audio.direction == .sendrecv)
        #expect(audio.rtcpMux)
        #expect(audio.iceUfrag == "Fm3h" && audio.iceOptions == ["trickle"])
        #expect(try audio.setupRole() == .actpass)
        #expect(try audio.fingerprint()?.digest.count == 32)
        let opus = try audio.formatParameters().first { $0.payloadType == 111 }
        #expect(opus?["useinbandfec"] == "1" && opus?["minptime"] == "10")
        let candidates = try audio.candidates()
        #expect(candidates.count == 2)
        #expect(
            candidates[1].type == "srflx" && candidates[1].relatedAddress == "198.18.168.20"
                && candidates[1].relatedPort == 51472
        )
        #expect(candidates[0].extensions.first == SDPParameter("generation", "0"))
        let video = sdp.media[1]
        #expect(try video.ssrcGroups() == [SDPSSRCGroup(semantics: "FID", ssrcs: [2231627014, 632943048])])
        #expect(try video.extensionMaps().first { $0.uri == RTPHeaderExtensionURI.transportWideCC }?.id == 3)
        #expect(video.mediaStreamID?.trackID == "7f3c1b2a-9d8e-4f6a-b5c4-3e2d1c0b9a87")
        let h264 = try video.formatParameters().first { $0.payloadType == 106 }
        #expect(h264?["profile-level-id"] == "640c1f" && h264?["packetization-mode"] == "1")
        #expect(video.attribute("x-google-flag")?.value == "conference")
        let feedback = try video.rtcpFeedback().filter { $0.payloadType == 96 }.compactMap(\.kind)
        #expect(RTCPFeedbackSet(feedback) == .video)
    }

    @Test func acceptsLFAndCRLFAlike() throws {
        let crlf = Fixtures.janusPublisherAnswer.replacing("\n", with: "\r\n")
        #expect(
            try SessionDescription(parsing: crlf).text
                == SessionDescription(parsing: Fixtures.janusPublisherAnswer).text
        )
    }

    @Test func reportsTheLineAndTextOfMalformedInput() throws {
        do {
            _ = try SessionDescription(parsing: "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ngarbage\r\n")
            Issue.record("accepted a line without '='")
        } catch {
            #expect(error.line == 3 && error.text == "garbage" && error.reason == .malformedLine)
        }
        do {
            _ = try SessionDescription(parsing: "v=0\nm=video nine UDP/TLS/RTP/SAVPF 96\n")
            Issue.record("accepted a bad port")
        } catch {
            #expect(error.line == 2 && error.reason == .invalidField("port"))
        }
        let sdp = try SessionDescription(
            parsing: "v=0\nm=video 9 RTP/AVP 96\na=rtpmap:96 VP8\na=fingerprint:sha-256 ZZ:01\n"
        )
        do {
            _ = try sdp.media[0].rtpMaps()
            Issue.record("accepted an rtpmap without clock rate")
        } catch {
            #expect(error.line == 3 && error.text == "a=rtpmap:96 VP8")
        }
        #expect(throws: SDPError.self) { try sdp.media[0].fingerprint() }
    }

    @Test func writesFingerprintsAndAttributes() throws {
        let fp = SDPFingerprint(digest: [0x0A, 0xFF, 0x00])
        #expect(fp.value == "sha-256 0A:FF:00")
        #expect(try SDPFingerprint(SDPAttribute("fingerprint", "SHA-256 0a:ff:00")) == fp)
        #expect(
            SDPRTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2).value == "111 opus/48000/2"
        )
        #expect(SDPExtensionMap(id: 3, direction: .sendonly, uri: "urn:x").value == "3/sendonly urn:x")
        #expect(try SDPExtensionMap(SDPAttribute("extmap", "3/recvonly urn:x attr")).extensionAttributes == "attr")
        #expect(try SDPRTCPFeedback(SDPAttribute("rtcp-fb", "* ccm fir")).kind == .fir)
        #expect(try SDPSSRCAttribute(SDPAttribute("ssrc", "42 msid:s t")).value == "s t")
    }
}
