/// What a datagram arriving on the ICE component is, from its first bytes (RFC 7983 section 7,
/// with RTP and RTCP told apart by payload type as in RFC 5761 section 4).
public enum MultiplexedPacketKind: Sendable, Hashable {
    /// First byte 0...3: a STUN message (libnice consumes these before we see them).
    case stun
    /// First byte 16...19: ZRTP (not used by WebRTC).
    case zrtp
    /// First byte 20...63: a DTLS record.
    case dtls
    /// First byte 64...79: TURN channel data.
    case turnChannel
    /// First byte 128...191 and payload type outside 192...223: SRTP.
    case rtp
    /// First byte 128...191 and second byte 192...223: SRTCP.
    case rtcp
    /// Anything else, including an empty datagram: counted and dropped.
    case unknown

    /// Classifies a datagram by its first two bytes. Never traps, whatever the input.
    public init(classifying datagram: some Collection<UInt8>) {
        guard let first = datagram.first else {
            self = .unknown
            return
        }
        switch first {
        case 0...3: self = .stun
        case 16...19: self = .zrtp
        case 20...63: self = .dtls
        case 64...79: self = .turnChannel
        case 128...191:
            let second = datagram.dropFirst().first
            if let second, (192...223).contains(second) {
                self = .rtcp
            } else if second == nil {
                self = .unknown
            } else {
                self = .rtp
            }
        default: self = .unknown
        }
    }

    /// Classifies a datagram held in raw memory.
    public init(classifying datagram: UnsafeRawBufferPointer) {
        self.init(classifying: datagram.bindMemory(to: UInt8.self))
    }
}
