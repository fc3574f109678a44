/// Hand-written descriptions in the shapes Janus 1.1.2 VideoRoom, Chrome and aiortc produce.
enum Fixtures {
    static let fingerprint =
        "sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08"

    /// Janus's answer to a publisher offer (audio mid 0 + VP8 mid 1), LF line ends.
    static let janusPublisherAnswer = """
        v=0
        o=- 4578902164598431 4578902164598432 IN IP4 198.18.200.1
        s=VideoRoom 1234
        t=0 0
        a=group:BUNDLE 0 1
        a=ice-options:trickle
        a=fingerprint:\(fingerprint)
        a=extmap-allow-mixed
        a=msid-semantic: WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 198.18.200.1
        a=recvonly
        a=mid:0
        a=rtcp-mux
        a=ice-ufrag:Kx7e
        a=ice-pwd:c3VwZXJzZWNyZXRwYXNzd29yZA
        a=ice-options:trickle
        a=setup:active
        a=rtpmap:111 opus/48000/2
        a=fmtp:111 useinbandfec=1
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=candidate:1 1 udp 2015363327 198.18.200.1 20042 typ host
        a=end-of-candidates
        m=video 9 UDP/TLS/RTP/SAVPF 96
        c=IN IP4 198.18.200.1
        a=recvonly
        a=mid:1
        a=rtcp-mux
        a=ice-ufrag:Kx7e
        a=ice-pwd:c3VwZXJzZWNyZXRwYXNzd29yZA
        a=ice-options:trickle
        a=setup:active
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=candidate:1 1 udp 2015363327 198.18.200.1 20042 typ host
        a=end-of-candidates

        """

    /// A multistream subscriber offer for three feeds: Opus+VP8 (with RTX), Opus+H264 without any
    /// fmtp line, a feed that left (disabled m-line), and a data channel. CRLF line ends.
    static let janusSubscriberOffer = """
        v=0
        o=- 1700000000512345 1 IN IP4 198.18.200.1
        s=VideoRoom 1234
        t=0 0
        a=group:BUNDLE 0 1 2 3 5
        a=ice-options:trickle
        a=fingerprint:\(fingerprint)
        a=extmap-allow-mixed
        a=msid-semantic: WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 198.18.200.1
        a=sendonly
        a=mid:0
        a=rtcp-mux
        a=ice-ufrag:Pq2w
        a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:111 opus/48000/2
        a=fmtp:111 minptime=10;useinbandfec=1;stereo=1
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:4 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=msid:janus janusa0
        a=ssrc:2784523881 cname:janus
        a=ssrc:2784523881 msid:janus janusa0
        a=candidate:1 1 udp 2015363327 198.18.200.1 20400 typ host
        a=candidate:2 1 tcp 1015037951 198.18.200.1 9 typ host tcptype active
        a=end-of-candidates
        m=video 9 UDP/TLS/RTP/SAVPF 96 97
        c=IN IP4 198.18.200.1
        a=sendonly
        a=mid:1
        a=rtcp-mux
        a=ice-ufrag:Pq2w
        a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:12 urn:3gpp:video-orientation
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=ssrc-group:FID 1509832510 4127812371
        a=msid:janus janusv1
        a=ssrc:1509832510 cname:janus
        a=ssrc:1509832510 msid:janus janusv1
        a=ssrc:4127812371 cname:janus
        a=ssrc:4127812371 msid:janus janusv1
        m=audio 9 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 198.18.200.1
        a=sendonly
        a=mid:2
        a=rtcp-mux
        a=ice-ufrag:Pq2w
        a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:111 opus/48000/2
        a=fmtp:111 minptime=10;useinbandfec=1
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=msid:janus janusa2
        a=ssrc:915667282 cname:janus
        m=video 9 UDP/TLS/RTP/SAVPF 107
        c=IN IP4 198.18.200.1
        a=sendonly
        a=mid:3
        a=rtcp-mux
        a=ice-ufrag:Pq2w
        a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:107 H264/90000
        a=rtcp-fb:107 ccm fir
        a=rtcp-fb:107 nack
        a=rtcp-fb:107 nack pli
        a=rtcp-fb:107 goog-remb
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=msid:janus janusv3
        a=ssrc:3387617243 cname:janus
        m=video 0 UDP/TLS/RTP/SAVPF 0
        c=IN IP4 198.18.200.1
        a=inactive
        a=mid:4
        m=application 9 UDP/DTLS/SCTP webrtc-datachannel
        c=IN IP4 198.18.200.1
        a=sendrecv
        a=mid:5
        a=sctp-port:5000
        a=ice-ufrag:Pq2w
        a=ice-pwd:anVzdGFub3RoZXJwYXNzd29yZA
        a=ice-options:trickle
        a=setup:actpass

        """.replacing("\n", with: "\r\n")

    /// A Chrome offer (sendrecv, many codecs, unknown attributes).
    static let chromeOffer = """
        v=0
        o=- 7614219274584779017 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS 5a1e3c0d-2b7e-4f0e-9b5e-0c6f4d2f8c11
        m=audio 51472 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 198.18.168.20
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:3348148302 1 udp 2122260223 198.18.168.20 51472 typ host generation 0 network-id 1 network-cost 10
        a=candidate:1510613869 1 udp 1686052607 203.0.113.7 51472 typ srflx raddr 198.18.168.20 rport 51472 generation 0 network-id 1
        a=ice-ufrag:Fm3h
        a=ice-pwd:1Zp0Ll5cJ0Ra4eMtpDzSaiDj
        a=ice-options:trickle
        a=fingerprint:sha-256 49:66:12:17:0D:1C:91:AE:57:4C:C6:36:DD:D5:97:D2:7D:62:C9:9A:7F:B9:A3:F4:70:03:E7:43:91:73:23:5E
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendrecv
        a=msid:5a1e3c0d-2b7e-4f0e-9b5e-0c6f4d2f8c11 0b8f7d8e-5d3a-4c4e-8e5b-8b8f6e1d2c3a
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:3917171711 cname:Hq0cLBX8fNc3nbH6
        a=ssrc:3917171711 msid:5a1e3c0d-2b7e-4f0e-9b5e-0c6f4d2f8c11 0b8f7d8e-5d3a-4c4e-8e5b-8b8f6e1d2c3a
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 104 105 106 107
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Fm3h
        a=ice-pwd:1Zp0Ll5cJ0Ra4eMtpDzSaiDj
        a=ice-options:trickle
        a=fingerprint:sha-256 49:66:12:17:0D:1C:91:AE:57:4C:C6:36:DD:D5:97:D2:7D:62:C9:9A:7F:B9:A3:F4:70:03:E7:43:91:73:23:5E
        a=setup:actpass
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendrecv
        a=msid:5a1e3c0d-2b7e-4f0e-9b5e-0c6f4d2f8c11 7f3c1b2a-9d8e-4f6a-b5c4-3e2d1c0b9a87
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:104 H264/90000
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:105 rtx/90000
        a=fmtp:105 apt=104
        a=rtpmap:106 H264/90000
        a=rtcp-fb:106 nack
        a=fmtp:106 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=640c1f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=106
        a=ssrc-group:FID 2231627014 632943048
        a=ssrc:2231627014 cname:Hq0cLBX8fNc3nbH6
        a=ssrc:2231627014 msid:5a1e3c0d-2b7e-4f0e-9b5e-0c6f4d2f8c11 7f3c1b2a-9d8e-4f6a-b5c4-3e2d1c0b9a87
        a=ssrc:632943048 cname:Hq0cLBX8fNc3nbH6
        a=x-google-flag:conference

        """.replacing("\n", with: "\r\n")

    /// An aiortc offer: all candidates gathered, real ports, sha-256 and sha-384 fingerprints.
    static let aiortcOffer = """
        v=0
        o=- 3913446213 3913446213 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=msid-semantic:WMS *
        m=audio 49874 UDP/TLS/RTP/SAVPF 96 0 8
        c=IN IP4 198.18.200.2
        a=sendonly
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=mid:0
        a=msid:6d1f2d8a-7d4c-4a8e-8c53-2a0e6f0c9b1e 3c9f8a7e-1b2d-4e5f-9a0b-7c6d5e4f3a2b
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc:1357924680 cname:f8e7d6c5-b4a3-4210-9f8e-7d6c5b4a3f21
        a=rtpmap:96 opus/48000/2
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=candidate:5d9ac0e2b1a7f4c3e6d8b9a0f1e2d3c4 1 udp 2130706431 198.18.200.2 49874 typ host
        a=end-of-candidates
        a=ice-ufrag:ZbQ1
        a=ice-pwd:rT8yK2mN5pQ7sV0wX3zA6cE9
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=fingerprint:sha-384 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass
        m=video 49874 UDP/TLS/RTP/SAVPF 97 98 99 100 101 102
        c=IN IP4 198.18.200.2
        a=sendonly
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=mid:1
        a=msid:6d1f2d8a-7d4c-4a8e-8c53-2a0e6f0c9b1e 9e8d7c6b-5a4f-4e3d-2c1b-0a9f8e7d6c5b
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc-group:FID 2468013579 1122334455
        a=ssrc:2468013579 cname:f8e7d6c5-b4a3-4210-9f8e-7d6c5b4a3f21
        a=ssrc:1122334455 cname:f8e7d6c5-b4a3-4210-9f8e-7d6c5b4a3f21
        a=rtpmap:97 VP8/90000
        a=rtcp-fb:97 nack
        a=rtcp-fb:97 nack pli
        a=rtcp-fb:97 goog-remb
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=97
        a=rtpmap:99 H264/90000
        a=rtcp-fb:99 nack
        a=rtcp-fb:99 nack pli
        a=rtcp-fb:99 goog-remb
        a=fmtp:99 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:100 rtx/90000
        a=fmtp:100 apt=99
        a=rtpmap:101 H264/90000
        a=rtcp-fb:101 nack
        a=rtcp-fb:101 nack pli
        a=rtcp-fb:101 goog-remb
        a=fmtp:101 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:102 rtx/90000
        a=fmtp:102 apt=101
        a=candidate:5d9ac0e2b1a7f4c3e6d8b9a0f1e2d3c4 1 udp 2130706431 198.18.200.2 49874 typ host
        a=end-of-candidates
        a=ice-ufrag:ZbQ1
        a=ice-pwd:rT8yK2mN5pQ7sV0wX3zA6cE9
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass

        """.replacing("\n", with: "\r\n")
}
