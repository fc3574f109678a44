/// An SRTP protection profile offered and negotiated in the DTLS `use_srtp` extension.
///
/// The raw value is the IANA identifier (RFC 5764 section 4.1.2), equal to `SRTPProfile`'s in
/// ConclaveSRTP.
public enum SRTPProtectionProfile: UInt16, Sendable, CaseIterable, CustomStringConvertible {
    /// AES-128 counter mode with HMAC-SHA1-80 (RFC 3711).
    case aes128CMSHA1_80 = 0x0001
    /// AES-128-GCM (RFC 7714).
    case aeadAES128GCM = 0x0007

    /// The name OpenSSL uses in `SSL_CTX_set_tlsext_use_srtp`.
    public var openSSLName: String {
        switch self {
        case .aes128CMSHA1_80: "SRTP_AES128_CM_SHA1_80"
        case .aeadAES128GCM: "SRTP_AEAD_AES_128_GCM"
        }
    }

    public var masterKeyLength: Int { 16 }

    public var masterSaltLength: Int {
        switch self {
        case .aes128CMSHA1_80: 14
        case .aeadAES128GCM: 12
        }
    }

    public var description: String { openSSLName }
}

/// The SRTP master keys derived from a finished DTLS handshake, already split by direction.
///
/// Each key is the master key followed by the master salt, the form libsrtp takes. Printing
/// this value never shows the keys.
public struct SRTPKeyingMaterial: Sendable, Hashable, CustomStringConvertible {
    public let profile: SRTPProtectionProfile
    /// Protects what we send.
    public let localKeyAndSalt: [UInt8]
    /// Unprotects what the peer sends.
    public let remoteKeyAndSalt: [UInt8]

    /// Splits exported material laid out as client key | server key | client salt | server salt
    /// (RFC 5764 section 4.2); the DTLS client's pieces protect the client's packets.
    init(profile: SRTPProtectionProfile, exported: [UInt8], isClient: Bool) {
        let keyLength = profile.masterKeyLength
        let saltLength = profile.masterSaltLength
        let clientKey = exported[0..<keyLength]
        let serverKey = exported[keyLength..<(2 * keyLength)]
        let clientSalt = exported[(2 * keyLength)..<(2 * keyLength + saltLength)]
        let serverSalt = exported[(2 * keyLength + saltLength)..<(2 * keyLength + 2 * saltLength)]
        let client = Array(clientKey) + Array(clientSalt)
        let server = Array(serverKey) + Array(serverSalt)
        self.profile = profile
        self.localKeyAndSalt = isClient ? client : server
        self.remoteKeyAndSalt = isClient ? server : client
    }

    public var description: String { "SRTPKeyingMaterial(\(profile), keys redacted)" }
}
