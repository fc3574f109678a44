/// An SRTP protection profile negotiated through DTLS-SRTP (RFC 5764 section 4.1.2).
///
/// The raw value is the IANA "DTLS-SRTP Protection Profile" identifier, the same number
/// `ConclaveOpenSSL` reports, so the two modules agree without depending on each other.
public enum SRTPProfile: UInt16, Sendable, CaseIterable, CustomStringConvertible {
    /// AES-128 in counter mode with an 80-bit HMAC-SHA1 tag (RFC 3711). Every WebRTC stack has it.
    case aes128CMHMACSHA1_80 = 0x0001
    /// AES-128-GCM with a 16-byte tag (RFC 7714). Cheaper per packet on CPUs with AES-NI and CLMUL.
    case aeadAES128GCM = 0x0007

    /// Master key length in bytes.
    public var masterKeyLength: Int { 16 }

    /// Master salt length in bytes: 14 for AES-CM (RFC 3711), 12 for AEAD (RFC 7714).
    public var masterSaltLength: Int {
        switch self {
        case .aes128CMHMACSHA1_80: 14
        case .aeadAES128GCM: 12
        }
    }

    /// Bytes `srtp_protect` appends to an RTP packet (authentication tag).
    public var rtpTrailerLength: Int {
        switch self {
        case .aes128CMHMACSHA1_80: 10
        case .aeadAES128GCM: 16
        }
    }

    /// Bytes `srtp_protect_rtcp` appends to an RTCP packet (tag plus the 4-byte SRTCP index).
    public var rtcpTrailerLength: Int { rtpTrailerLength + 4 }

    public var description: String {
        switch self {
        case .aes128CMHMACSHA1_80: "SRTP_AES128_CM_SHA1_80"
        case .aeadAES128GCM: "SRTP_AEAD_AES_128_GCM"
        }
    }
}
