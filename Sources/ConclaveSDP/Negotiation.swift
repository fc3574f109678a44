import ConclaveCore

/// Our side of the transport, written into every description we produce.
public struct LocalTransportParameters: Sendable, Hashable {
    /// ICE username fragment.
    public var iceUfrag: String
    /// ICE password.
    public var icePwd: String
    /// The DTLS certificate fingerprint.
    public var fingerprint: SDPFingerprint
    /// Candidates known when the description is made (usually none: they are trickled).
    public var candidates: [ICECandidate]
    /// Whether gathering is already complete.
    public var endOfCandidates: Bool

    /// Creates parameters.
    public init(
        iceUfrag: String,
        icePwd: String,
        fingerprint: SDPFingerprint,
        candidates: [ICECandidate] = [],
        endOfCandidates: Bool = false
    ) {
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.fingerprint = fingerprint
        self.candidates = candidates
        self.endOfCandidates = endOfCandidates
    }
}

/// The peer's side of the transport, read from its description.
public struct RemoteTransportParameters: Sendable, Hashable {
    /// ICE username fragment.
    public var iceUfrag: String
    /// ICE password.
    public var icePwd: String
    /// The certificate fingerprint the DTLS peer must present.
    public var fingerprint: SDPFingerprint
    /// The peer's setup role.
    public var setup: SDPSetupRole
    /// Candidates in the description (from the first bundled section).
    public var candidates: [ICECandidate]
    /// Whether the peer declared end of candidates.
    public var endOfCandidates: Bool
    /// Whether the peer is ICE-lite (Janus can be).
    public var iceLite: Bool
}

/// What was agreed for one media section.
public struct NegotiatedMedia: Sendable, Hashable {
    /// The mid.
    public var mid: String
    /// The index of the m-line.
    public var index: Int
    /// Audio or video.
    public var kind: MediaKind
    /// The codec.
    public var codec: MediaCodec
    /// Its payload type.
    public var payloadType: UInt8
    /// Its clock rate.
    public var clockRate: UInt32
    /// Channels (2 for Opus, 1 for video).
    public var channels: Int
    /// Format parameters as agreed; for H264 offered without fmtp, `packetization-mode=1` is filled in.
    public var formatParameters: [SDPParameter]
    /// Extension URI → id.
    public var extensionIDs: [String: UInt8]
    /// Feedback both sides support.
    public var feedback: RTCPFeedbackSet
    /// Our direction for this section.
    public var direction: SDPDirection
    /// The peer's media SSRC, when it sends and announced one.
    public var remoteSSRC: UInt32?
    /// The peer's RTX SSRC (from `ssrc-group:FID`), if any.
    public var remoteRTXSSRC: UInt32?
    /// The peer's msid for this section.
    public var remoteMediaStreamID: SDPMediaStreamID?
    /// Our SSRC for this section, when we send.
    public var localSSRC: UInt32?

    /// The value of format parameter `name`.
    public func formatParameter(_ name: String) -> String? {
        formatParameters.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// The outcome of an offer/answer exchange.
public struct NegotiationResult: Sendable, Hashable {
    /// The peer's transport.
    public var remote: RemoteTransportParameters
    /// Accepted media sections in m-line order.
    public var media: [NegotiatedMedia]
    /// Mids of sections that were rejected or disabled.
    public var rejectedMids: [String]
    /// The mids bundled on the one transport.
    public var bundleMids: [String]
}

/// One sending track of a publisher offer.
public struct PublisherTrack: Sendable, Hashable {
    /// The codec; the offer lists only this one for the track's m-line.
    public var codec: MediaCodec
    /// The payload type to offer (Janus's defaults: Opus 111, VP8 96, H264 107).
    public var payloadType: UInt8
    /// Our SSRC (with simulcast, the lowest layer's).
    public var ssrc: UInt32
    /// With simulcast, the SSRCs of the layers above the lowest, in rising order; empty without.
    public var upperLayerSSRCs: [UInt32]
    /// The msid track id.
    public var trackID: String
    /// H264 `profile-level-id` (42e01f constrained baseline 3.1, 640c1f constrained high 3.1).
    public var h264ProfileLevelID: String

    /// Creates a track.
    public init(
        codec: MediaCodec,
        payloadType: UInt8? = nil,
        ssrc: UInt32,
        upperLayerSSRCs: [UInt32] = [],
        trackID: String,
        h264ProfileLevelID: String = "42e01f"
    ) {
        self.codec = codec
        self.payloadType = payloadType ?? Self.defaultPayloadType(codec)
        self.ssrc = ssrc
        self.upperLayerSSRCs = upperLayerSSRCs
        self.trackID = trackID
        self.h264ProfileLevelID = h264ProfileLevelID
    }

    /// The SSRC of every layer, lowest first (one without simulcast). Janus numbers its
    /// substreams in this order, the order of the offer's `a=ssrc-group:SIM`.
    public var layerSSRCs: [UInt32] { [ssrc] + upperLayerSSRCs }

    /// Janus's default payload type for `codec`.
    public static func defaultPayloadType(_ codec: MediaCodec) -> UInt8 {
        switch codec {
        case .opus: 111
        case .vp8: 96
        case .h264: 107
        }
    }
}

/// Builds and reads offers and answers for the two PeerConnections Conclave has with Janus.
public enum SDPNegotiator {
    /// Extension ids Conclave offers, as Chrome numbers them.
    public static let offeredExtensions: [(id: UInt8, uri: String, kinds: Set<MediaKind>)] = [
        (1, RTPHeaderExtensionURI.audioLevel, [.audio]),
        (2, RTPHeaderExtensionURI.absSendTime, [.audio, .video]),
        (3, RTPHeaderExtensionURI.transportWideCC, [.audio, .video]),
        (4, RTPHeaderExtensionURI.mid, [.audio, .video]),
    ]

    /// A publisher offer shaped like a browser's: one sendonly m-line per track (audio mid 0,
    /// video mid 1), BUNDLE, rtcp-mux, trickle ICE, `setup:actpass`, one codec per m-line.
    public static func publisherOffer(
        audio: PublisherTrack?,
        video: PublisherTrack?,
        local: LocalTransportParameters,
        cname: String,
        streamID: String,
        sessionID: String,
        sessionVersion: UInt64 = 2
    ) -> SessionDescription {
        var sdp = SessionDescription(origin: SDPOrigin(sessionID: sessionID, sessionVersion: sessionVersion))
        let tracks = [audio, video].compactMap { $0 }
        sdp.add("group", (["BUNDLE"] + tracks.indices.map(String.init)).joined(separator: " "))
        sdp.add("extmap-allow-mixed")
        sdp.add("msid-semantic", " WMS \(streamID)")
        for (index, track) in tracks.enumerated() {
            let kind = track.codec.kind
            var m = MediaDescription(type: kind.rawValue, formats: [String(track.payloadType)])
            m.add("rtcp", "9 IN IP4 0.0.0.0")
            addTransport(local, setup: .actpass, to: &m, includeCandidates: index == 0)
            m.add("mid", String(index))
            for ext in offeredExtensions where ext.kinds.contains(kind) {
                m.add("extmap", SDPExtensionMap(id: ext.id, uri: ext.uri).value)
            }
            m.add(SDPDirection.sendonly.rawValue)
            m.add("msid", "\(streamID) \(track.trackID)")
            m.add("rtcp-mux")
            if kind == .video { m.add("rtcp-rsize") }
            let channels: Int? = track.codec == .opus ? 2 : nil
            m.add(
                "rtpmap",
                SDPRTPMap(
                    payloadType: track.payloadType,
                    encodingName: track.codec.sdpName,
                    clockRate: track.codec.clockRate,
                    channels: channels
                ).value
            )
            let feedback: RTCPFeedbackSet = kind == .video ? .video : [.transportCC]
            for line in feedback.lines(payloadType: track.payloadType) { m.add("rtcp-fb", line.value) }
            switch track.codec {
            case .opus:
                m.add("fmtp", "\(track.payloadType) minptime=10;useinbandfec=1")
            case .h264:
                m.add(
                    "fmtp",
                    "\(track.payloadType) level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=\(track.h264ProfileLevelID)"
                )
            case .vp8:
                break
            }
            // Simulcast the way libwebrtc first offered it (and Janus reads): one SSRC per layer,
            // grouped as `SIM` lowest first. Rids would need the rid header extension on every
            // packet for the same result.
            if track.layerSSRCs.count > 1 {
                m.add("ssrc-group", SDPSSRCGroup(semantics: "SIM", ssrcs: track.layerSSRCs).value)
            }
            for ssrc in track.layerSSRCs {
                m.add("ssrc", SDPSSRCAttribute(ssrc: ssrc, name: "cname", value: cname).text)
                m.add("ssrc", SDPSSRCAttribute(ssrc: ssrc, name: "msid", value: "\(streamID) \(track.trackID)").text)
            }
            sdp.media.append(m)
        }
        return sdp
    }

    /// Reads Janus's answer to our publisher offer.
    public static func acceptPublisherAnswer(
        _ answer: SessionDescription,
        offer: SessionDescription
    ) throws(SDPError) -> NegotiationResult {
        var media: [NegotiatedMedia] = []
        var rejected: [String] = []
        for (index, offered) in offer.media.enumerated() {
            let mid = offered.mid ?? String(index)
            let section = answer.media(withMid: mid) ?? (index < answer.media.count ? answer.media[index] : nil)
            guard let section, section.port != 0 else {
                rejected.append(mid)
                continue
            }
            let offeredMaps = (try? offered.rtpMaps()) ?? []
            let answerMaps = (try? section.rtpMaps()) ?? []
            guard let pt = section.payloadTypes.first(where: { p in offeredMaps.contains { $0.payloadType == p } }),
                let map = answerMaps.first(where: { $0.payloadType == pt })
                    ?? offeredMaps.first(where: { $0.payloadType == pt }),
                let codec = MediaCodec(sdpName: map.encodingName)
            else {
                throw SDPError(
                    .negotiation("no offered codec in the answer for mid \(mid)"),
                    line: section.line,
                    text: "m=\(section.mediaLine)"
                )
            }
            let localSSRC = ((try? offered.ssrcAttributes()) ?? []).first?.ssrc
            let peerDirection = section.direction ?? .sendrecv
            var negotiated = describe(
                section,
                index: index,
                mid: mid,
                codec: codec,
                map: map,
                direction: peerDirection == .recvonly || peerDirection == .sendrecv ? .sendonly : .inactive,
                supportedExtensions: Set(offeredExtensions.map(\.uri))
            )
            negotiated.localSSRC = localSSRC
            negotiated.remoteSSRC = nil
            negotiated.remoteRTXSSRC = nil
            media.append(negotiated)
        }
        let remote = try remoteTransport(answer, firstAccepted: media.first?.index)
        return NegotiationResult(remote: remote, media: media, rejectedMids: rejected, bundleMids: answer.bundleMids)
    }

    /// Answers a Janus subscriber offer: every audio/video m-line is received (recvonly) with the
    /// first offered codec in `supportedCodecs`; other sections (data channels, disabled feeds,
    /// sections without a usable codec) are rejected with port 0. `setup:active` makes us the
    /// DTLS client. Liberal where Janus is loose: H264 without fmtp is taken as packetization-mode 1.
    public static func subscriberAnswer(
        to offer: SessionDescription,
        local: LocalTransportParameters,
        supportedCodecs: Set<MediaCodec> = Set(MediaCodec.allCases),
        sessionID: String,
        sessionVersion: UInt64 = 1
    ) throws(SDPError) -> (answer: SessionDescription, result: NegotiationResult) {
        var answer = SessionDescription(origin: SDPOrigin(sessionID: sessionID, sessionVersion: sessionVersion))
        var media: [NegotiatedMedia] = []
        var rejected: [String] = []
        var firstAccepted = true
        for (index, offered) in offer.media.enumerated() {
            let mid = offered.mid ?? String(index)
            let choice = offered.port == 0 ? nil : chooseCodec(in: offered, supported: supportedCodecs)
            guard let (codec, map) = choice else {
                var m = MediaDescription(type: offered.type, port: 0, proto: offered.proto, formats: offered.formats)
                m.add("mid", mid)
                if offered.type == "audio" || offered.type == "video" { m.add(SDPDirection.inactive.rawValue) }
                answer.media.append(m)
                rejected.append(mid)
                continue
            }
            let direction = (offered.direction ?? .sendrecv).receiveOnlyAnswer
            var negotiated = describe(
                offered,
                index: index,
                mid: mid,
                codec: codec,
                map: map,
                direction: direction,
                supportedExtensions: Set(RTPHeaderExtensionURI.supported)
            )
            if codec == .h264, negotiated.formatParameter("packetization-mode") == nil {
                negotiated.formatParameters.append(SDPParameter("packetization-mode", "1"))
            }
            var m = MediaDescription(type: offered.type, formats: [String(map.payloadType)])
            m.add("rtcp", "9 IN IP4 0.0.0.0")
            addTransport(local, setup: .active, to: &m, includeCandidates: firstAccepted)
            firstAccepted = false
            m.add("mid", mid)
            for ext in ((try? offered.extensionMaps()) ?? []) where negotiated.extensionIDs[ext.uri] == ext.id {
                m.add("extmap", SDPExtensionMap(id: ext.id, uri: ext.uri).value)
            }
            m.add(direction.rawValue)
            m.add("rtcp-mux")
            if offered.has("rtcp-rsize") { m.add("rtcp-rsize") }
            m.add("rtpmap", map.value)
            for line in negotiated.feedback.lines(payloadType: map.payloadType) { m.add("rtcp-fb", line.value) }
            if let fmtp = ((try? offered.formatParameters()) ?? []).first(where: { $0.payloadType == map.payloadType })
            {
                m.add("fmtp", fmtp.value)
            }
            answer.media.append(m)
            media.append(negotiated)
        }
        let accepted = media.map(\.mid)
        if !accepted.isEmpty {
            answer.attributes.insert(SDPAttribute("group", (["BUNDLE"] + accepted).joined(separator: " ")), at: 0)
        }
        answer.add("msid-semantic", " WMS")
        let remote = try remoteTransport(offer, firstAccepted: media.first?.index)
        let result = NegotiationResult(
            remote: remote,
            media: media,
            rejectedMids: rejected,
            bundleMids: offer.bundleMids
        )
        return (answer, result)
    }

    // MARK: - Helpers

    private static func addTransport(
        _ local: LocalTransportParameters,
        setup: SDPSetupRole,
        to m: inout MediaDescription,
        includeCandidates: Bool
    ) {
        m.add("ice-ufrag", local.iceUfrag)
        m.add("ice-pwd", local.icePwd)
        m.add("ice-options", "trickle")
        m.add("fingerprint", local.fingerprint.value)
        m.add("setup", setup.rawValue)
        guard includeCandidates else { return }
        for c in local.candidates { m.add("candidate", c.value) }
        if local.endOfCandidates { m.add("end-of-candidates") }
    }

    /// The first offered format we can receive, in the offer's preference order.
    static func chooseCodec(in section: MediaDescription, supported: Set<MediaCodec>) -> (MediaCodec, SDPRTPMap)? {
        guard section.type == "audio" || section.type == "video" else { return nil }
        let maps = (try? section.rtpMaps()) ?? []
        let fmtps = (try? section.formatParameters()) ?? []
        for pt in section.payloadTypes {
            guard let map = maps.first(where: { $0.payloadType == pt }),
                let codec = MediaCodec(sdpName: map.encodingName),
                supported.contains(codec), codec.kind.rawValue == section.type, map.clockRate == codec.clockRate
            else { continue }
            if codec == .opus, let channels = map.channels, channels != 2 { continue }
            if codec == .h264, let mode = fmtps.first(where: { $0.payloadType == pt })?["packetization-mode"],
                mode != "0", mode != "1"
            {
                continue  // mode 2 (interleaved) is not supported
            }
            return (codec, map)
        }
        return nil
    }

    private static func describe(
        _ section: MediaDescription,
        index: Int,
        mid: String,
        codec: MediaCodec,
        map: SDPRTPMap,
        direction: SDPDirection,
        supportedExtensions: Set<String>
    ) -> NegotiatedMedia {
        let pt = map.payloadType
        var feedback: RTCPFeedbackSet = []
        for line in (try? section.rtcpFeedback()) ?? [] where line.payloadType == pt || line.payloadType == nil {
            if let kind = line.kind { feedback.insert(kind) }
        }
        if codec.kind == .audio { feedback.subtract([.nack, .pli, .fir]) }
        var extensions: [String: UInt8] = [:]
        for ext in (try? section.extensionMaps()) ?? [] where supportedExtensions.contains(ext.uri) {
            if extensions[ext.uri] == nil { extensions[ext.uri] = ext.id }
        }
        let fmtp = ((try? section.formatParameters()) ?? []).first { $0.payloadType == pt }?.parameters ?? []
        let ssrcs = (try? section.ssrcAttributes()) ?? []
        let fid = ((try? section.ssrcGroups()) ?? []).first { $0.semantics == "FID" }
        return NegotiatedMedia(
            mid: mid,
            index: index,
            kind: codec.kind,
            codec: codec,
            payloadType: pt,
            clockRate: map.clockRate,
            channels: map.channels ?? 1,
            formatParameters: fmtp,
            extensionIDs: extensions,
            feedback: feedback,
            direction: direction,
            remoteSSRC: fid?.ssrcs.first ?? ssrcs.first?.ssrc,
            remoteRTXSSRC: fid.flatMap { $0.ssrcs.count > 1 ? $0.ssrcs[1] : nil },
            remoteMediaStreamID: section.mediaStreamID,
            localSSRC: nil
        )
    }

    /// The peer's transport parameters, from its first accepted section with session-level fallback.
    static func remoteTransport(_ sdp: SessionDescription, firstAccepted: Int?) throws(SDPError)
        -> RemoteTransportParameters
    {
        guard let index = firstAccepted, index < sdp.media.count else {
            throw SDPError(.negotiation("no media section was accepted"), line: nil, text: "")
        }
        let section = sdp.media[index]
        guard let ufrag = section.iceUfrag ?? sdp.iceUfrag else { throw section.missing("ice-ufrag") }
        guard let pwd = section.icePwd ?? sdp.icePwd else { throw section.missing("ice-pwd") }
        var fingerprint = try section.fingerprint()
        if fingerprint == nil { fingerprint = try sdp.fingerprint() }
        guard let fingerprint else { throw section.missing("fingerprint") }
        var setup = try section.setupRole()
        if setup == nil { setup = try sdp.setupRole() }
        return RemoteTransportParameters(
            iceUfrag: ufrag,
            icePwd: pwd,
            fingerprint: fingerprint,
            setup: setup ?? .actpass,
            candidates: try section.candidates(),
            endOfCandidates: section.endOfCandidates || sdp.endOfCandidates,
            iceLite: sdp.has("ice-lite")
        )
    }
}
