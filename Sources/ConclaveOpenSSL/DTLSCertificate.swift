internal import COpenSSL
internal import COpenSSLShims

/// A fresh ECDSA P-256 key and self-signed certificate for DTLS-SRTP.
///
/// WebRTC peers authenticate each other by the certificate digest carried in signaling, not by a
/// certificate authority, so the certificate only has to be new and self-signed; it may be made
/// per connection or once per process.
public final class DTLSCertificate: @unchecked Sendable {
    // @unchecked: the key and certificate are never modified after init; OpenSSL reference counts
    // them atomically and only reads them when they are installed into an SSL_CTX.
    let key: OpaquePointer  // EVP_PKEY *
    let certificate: OpaquePointer  // X509 *

    /// The SHA-256 fingerprint to announce in SDP (`a=fingerprint:sha-256 ...`).
    public let fingerprint: DTLSFingerprint

    /// Generates a key pair and a certificate valid from one day ago for `validDays` days.
    public init(commonName: String = "conclave", validDays: Int = 30) throws(DTLSError) {
        ERR_clear_error()
        guard let key = cshim_EVP_EC_gen("P-256") else {
            throw .certificateGeneration(step: "EVP_EC_gen", .drain())
        }
        guard let certificate = X509_new() else {
            EVP_PKEY_free(key)
            throw .certificateGeneration(step: "X509_new", .drain())
        }
        var serial = [UInt8](repeating: 0, count: 8)
        _ = RAND_bytes(&serial, Int32(serial.count))
        let serialNumber = serial.reduce(0) { ($0 << 8) | Int($1 & 0x7F) }
        let name = X509_get_subject_name(certificate)
        let built =
            X509_set_version(certificate, 2) == 1
            && ASN1_INTEGER_set(X509_get_serialNumber(certificate), serialNumber) == 1
            && X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil
            && X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86_400) != nil
            && X509_set_pubkey(certificate, key) == 1
            && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1
            && X509_set_issuer_name(certificate, name) == 1
            && X509_sign(certificate, key, EVP_sha256()) > 0
        guard built, let fingerprint = DTLSFingerprint.of(certificate: certificate, algorithm: .sha256) else {
            X509_free(certificate)
            EVP_PKEY_free(key)
            throw .certificateGeneration(step: "X509 build and sign", .drain())
        }
        self.key = key
        self.certificate = certificate
        self.fingerprint = fingerprint
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }
}
