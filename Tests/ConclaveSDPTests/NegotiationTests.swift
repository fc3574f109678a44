import ConclaveCore
import Testing

@testable import ConclaveSDP

@Suite("Offer/answer negotiation")
struct NegotiationTests {
    static let local = LocalTransportParameters(
        iceUfrag: "loCl",
        icePwd: "bG9jYWxwYXNzd29yZGxvY2Fs",
        fingerprint: SDPFingerprint(digest: Array(repeating: 0xAB, count: 32)),
        candidates: [
            ICECandidate(foundation: "1", priority: 2130706431, address: "198.18.200.3", port: 40000, type: "host")
        ]
    )

    @Test func publisherOfferLooksLikeABrowsersAndReadsJanusAnswer() throws {
        let offer = SDPNegotiator.publisherOffer(
            audio: PublisherTrack(codec: .opus, ssrc: 1111, trackID: "audio0"),
            video: PublisherTrack(codec: .h264, ssrc: 2222, trackID: "video0"),
            local: Self.local,
            cname: "conclave",
            streamID: "stream0",
            sessionID: "123"
        )
        let text = offer.text
        let parsed = try SessionDescription(parsing: text)
        #expect(parsed.bundleMids == ["0", "1"])
        #expect(parsed.media.map(\.mid) == ["0", "1"])
        #expect(parsed.media.allSatisfy { $0.direction == .sendonly && $0.rtcpMux && $0.iceOptions == ["trickle"] })
        #expect(try parsed.media.allSatisfy { try $0.setupRole() == .actpass })
        #expect(text.contains("a=rtpmap:111 opus/48000/2\r\n"))
        #expect(text.contains("a=fmtp:111 minptime=10;useinbandfec=1\r\n"))
        #expect(text.contains("a=rtpmap:107 H264/90000\r\n"))
        #expect(text.contains("a=fmtp:107 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n"))
        #expect(text.contains("a=ssrc:2222 cname:conclave\r\n"))
        #expect(text.contains("a=msid:stream0 video0\r\n"))
        #expect(text.contains("a=rtcp-fb:107 nack pli\r\n"))
        #expect(text.contains("a=candidate:1 1 udp 2130706431 198.18.200.3 40000 typ host\r\n"))

        // Janus answers the VP8 variant of the offer.
        let vp8Offer = SDPNegotiator.publisherOffer(
            audio: PublisherTrack(codec: .opus, ssrc: 1111, trackID: "audio0"),
            video: PublisherTrack(codec: .vp8, ssrc: 2222, trackID: "video0"),
            local: Self.local,
            cname: "conclave",
            streamID: "stream0",
            sessionID: "123"
        )
        let answer = try SessionDescription(parsing: Fixtures.janusPublisherAnswer)
        let result = try SDPNegotiator.acceptPublisherAnswer(answer, offer: vp8Offer)
        #expect(result.media.map(\.mid) == ["0", "1"])
        #expect(result.media.map(\.codec) == [.opus, .vp8])
        #expect(result.media.map(\.payloadType) == [111, 96])
        #expect(result.media.map(\.direction) == [.sendonly, .sendonly])
        #expect(result.media.map(\.localSSRC) == [1111, 2222])
        #expect(result.media[0].extensionIDs == [RTPHeaderExtensionURI.audioLevel: 1, RTPHeaderExtensionURI.mid: 4])
        #expect(
            result.media[1].extensionIDs == [RTPHeaderExtensionURI.transportWideCC: 3, RTPHeaderExtensionURI.mid: 4]
        )
        #expect(result.media[1].feedback == .video)
        #expect(result.media[0].feedback.isEmpty)
        #expect(result.remote.iceUfrag == "Kx7e" && result.remote.setup == .active)
        #expect(result.remote.fingerprint.value == Fixtures.fingerprint)
        #expect(result.remote.candidates.map(\.port) == [20042] && result.remote.endOfCandidates)
    }

    /// Simulcast is offered as libwebrtc first did and Janus reads: an SSRC per layer, grouped
    /// `SIM` lowest first, each with its cname and msid (Janus's substream 0 is the first).
    @Test func aSimulcastOfferGroupsOneSSRCPerLayerLowestFirst() throws {
        let offer = SDPNegotiator.publisherOffer(
            audio: nil,
            video: PublisherTrack(codec: .vp8, ssrc: 10, upperLayerSSRCs: [20, 30], trackID: "video0"),
            local: Self.local,
            cname: "conclave",
            streamID: "stream0",
            sessionID: "123"
        )
        let parsed = try SessionDescription(parsing: offer.text)
        let video = try #require(parsed.media.first)
        #expect(try video.ssrcGroups() == [SDPSSRCGroup(semantics: "SIM", ssrcs: [10, 20, 30])])
        for ssrc in [10, 20, 30] {
            #expect(offer.text.contains("a=ssrc:\(ssrc) cname:conclave\r\n"))
            #expect(offer.text.contains("a=ssrc:\(ssrc) msid:stream0 video0\r\n"))
        }
        let single = SDPNegotiator.publisherOffer(
            audio: nil,
            video: PublisherTrack(codec: .vp8, ssrc: 10, trackID: "video0"),
            local: Self.local,
            cname: "conclave",
            streamID: "stream0",
            sessionID: "123"
        )
        #expect(!single.text.contains("ssrc-group"))
    }

    @Test func answersAJanusMultistreamSubscriberOffer() throws {
        let offer = try SessionDescription(parsing: Fixtures.janusSubscriberOffer)
        let (answer, result) = try SDPNegotiator.subscriberAnswer(to: offer, local: Self.local, sessionID: "99")
        #expect(result.media.map(\.mid) == ["0", "1", "2", "3"])
        #expect(result.rejectedMids == ["4", "5"])
        #expect(result.media.map(\.codec) == [.opus, .vp8, .opus, .h264])
        #expect(result.media.map(\.payloadType) == [111, 96, 111, 107])
        #expect(result.media.allSatisfy { $0.direction == .recvonly })
        #expect(result.media.map(\.remoteSSRC) == [2784523881, 1509832510, 915667282, 3387617243])
        #expect(result.media[1].remoteRTXSSRC == 4127812371)
        #expect(result.media[0].formatParameter("stereo") == "1")
        #expect(result.media[0].channels == 2 && result.media[0].clockRate == 48000)
        // H264 offered with no fmtp at all is taken as packetization-mode 1.
        #expect(result.media[3].formatParameter("packetization-mode") == "1")
        #expect(result.media[3].feedback == [.nack, .pli, .fir, .remb])
        #expect(result.media[1].feedback == .video)
        #expect(
            result.media[1].extensionIDs == [RTPHeaderExtensionURI.mid: 1, RTPHeaderExtensionURI.transportWideCC: 3]
        )
        #expect(result.media[1].remoteMediaStreamID == SDPMediaStreamID(streamID: "janus", trackID: "janusv1"))
        #expect(result.remote.iceUfrag == "Pq2w" && result.remote.setup == .actpass)
        #expect(result.remote.candidates.count == 2)

        let text = answer.text
        let parsed = try SessionDescription(parsing: text)
        #expect(parsed.bundleMids == ["0", "1", "2", "3"])
        #expect(parsed.media.count == offer.media.count, "an answer has one m-line per offered m-line")
        #expect(parsed.media.map(\.mid) == offer.media.map(\.mid))
        #expect(parsed.media.map(\.port) == [9, 9, 9, 9, 0, 0])
        for section in parsed.media.prefix(4) {
            #expect(section.direction == .recvonly)
            #expect(try section.setupRole() == .active)
            #expect(section.iceUfrag == "loCl" && section.rtcpMux)
            #expect(try section.fingerprint() == Self.local.fingerprint)
            #expect(section.payloadTypes.count == 1)
            #expect(try section.rtpMaps().map(\.payloadType) == section.payloadTypes)
        }
        #expect(parsed.media[4].type == "video" && parsed.media[4].direction == .inactive)
        #expect(parsed.media[5].type == "application" && parsed.media[5].formats == ["webrtc-datachannel"])
        #expect(text.contains("a=rtcp-fb:107 nack pli\r\n"))
        #expect(!text.contains("a=rtcp-fb:107 transport-cc"), "feedback the offer lacks is not answered")
        #expect(!text.contains("video-orientation"), "unsupported extensions are not answered")
        #expect(text.contains("a=fmtp:111 minptime=10;useinbandfec=1;stereo=1\r\n"))
        #expect(try parsed.media[0].candidates().count == 1)
    }

    @Test func picksTheFirstSupportedCodecOfEachSection() throws {
        let chrome = try SessionDescription(parsing: Fixtures.chromeOffer)
        let (_, vp8First) = try SDPNegotiator.subscriberAnswer(to: chrome, local: Self.local, sessionID: "1")
        #expect(vp8First.media.map(\.codec) == [.opus, .vp8])
        let (answer, h264Only) = try SDPNegotiator.subscriberAnswer(
            to: chrome,
            local: Self.local,
            supportedCodecs: [.opus, .h264],
            sessionID: "1"
        )
        #expect(h264Only.media[1].payloadType == 102)
        #expect(h264Only.media[1].formatParameter("profile-level-id") == "42001f")
        #expect(answer.media[1].formats == ["102"])

        let aiortc = try SessionDescription(parsing: Fixtures.aiortcOffer)
        let (_, fromAiortc) = try SDPNegotiator.subscriberAnswer(to: aiortc, local: Self.local, sessionID: "1")
        #expect(fromAiortc.media.map(\.payloadType) == [96, 97])
        #expect(fromAiortc.media[1].feedback == [.nack, .pli, .remb])
        #expect(fromAiortc.media[1].remoteSSRC == 2468013579 && fromAiortc.media[1].remoteRTXSSRC == 1122334455)
        #expect(fromAiortc.media[1].extensionIDs[RTPHeaderExtensionURI.absSendTime] == 3)
        #expect(fromAiortc.remote.candidates.first?.port == 49874 && fromAiortc.remote.endOfCandidates)
    }

    @Test func answersARenegotiatedOfferWhenFeedsComeAndGo() throws {
        // Feed 2 (mids 2 and 3) left: Janus disables its m-lines; a new feed arrives on mids 6 and 7.
        var text = Fixtures.janusSubscriberOffer
        text = text.replacing(
            "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 198.18.200.1\r\na=sendonly\r\na=mid:2",
            with: "m=audio 0 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 198.18.200.1\r\na=inactive\r\na=mid:2"
        )
        text = text.replacing(
            "m=video 9 UDP/TLS/RTP/SAVPF 107\r\nc=IN IP4 198.18.200.1\r\na=sendonly\r\na=mid:3",
            with: "m=video 0 UDP/TLS/RTP/SAVPF 107\r\nc=IN IP4 198.18.200.1\r\na=inactive\r\na=mid:3"
        )
        text = text.replacing("a=group:BUNDLE 0 1 2 3 5", with: "a=group:BUNDLE 0 1 5 6 7")
        text += [
            "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 198.18.200.1", "a=sendonly", "a=mid:6", "a=rtcp-mux",
            "a=ice-ufrag:Pq2w", "a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA", "a=setup:actpass", "a=rtpmap:111 opus/48000/2",
            "a=ssrc:5550001 cname:janus",
            "m=video 9 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 198.18.200.1", "a=sendonly", "a=mid:7", "a=rtcp-mux",
            "a=ice-ufrag:Pq2w", "a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA", "a=setup:actpass", "a=rtpmap:96 VP8/90000",
            "a=rtcp-fb:96 nack", "a=rtcp-fb:96 nack pli", "a=ssrc:5550002 cname:janus", "",
        ].joined(separator: "\r\n")
        let offer = try SessionDescription(parsing: text)
        let (answer, result) = try SDPNegotiator.subscriberAnswer(
            to: offer,
            local: Self.local,
            sessionID: "99",
            sessionVersion: 2
        )
        #expect(result.media.map(\.mid) == ["0", "1", "6", "7"])
        #expect(result.rejectedMids == ["2", "3", "4", "5"])
        #expect(result.media.map(\.remoteSSRC) == [2784523881, 1509832510, 5550001, 5550002])
        #expect(result.media[3].feedback == [.nack, .pli])
        #expect(answer.bundleMids == ["0", "1", "6", "7"])
        #expect(answer.media.map(\.port) == [9, 9, 0, 0, 0, 0, 9, 9])
        #expect(answer.origin?.sessionVersion == 2)
    }

    @Test func rejectsAnOfferWithoutTransportCredentials() throws {
        let text = Fixtures.janusSubscriberOffer.replacing("a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA\r\n", with: "")
        let offer = try SessionDescription(parsing: text)
        do {
            _ = try SDPNegotiator.subscriberAnswer(to: offer, local: Self.local, sessionID: "1")
            Issue.record("answered an offer without ice-pwd")
        } catch {
            #expect(error.reason == .missingAttribute("ice-pwd"))
            #expect(error.line == 10 && error.text.hasPrefix("m=audio 9"))
        }
    }
}
