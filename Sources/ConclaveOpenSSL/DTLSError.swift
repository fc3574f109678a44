/// Why a DTLS operation failed. Each case says what was being done and carries the detail
/// needed to act on it; none carries key material.
public enum DTLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Making the self-signed certificate failed at `step`.
    case certificateGeneration(step: String, OpenSSLErrorStack)
    /// Setting up the OpenSSL context or connection failed at `step`.
    case setup(step: String, OpenSSLErrorStack)
    /// The SDP `a=fingerprint` value could not be parsed.
    case malformedFingerprint(value: String, reason: String)
    /// The SDP fingerprint uses a hash function this endpoint does not implement.
    case unsupportedFingerprintAlgorithm(String)
    /// The SDP `a=setup` value is not one of active, passive, actpass.
    case invalidSetupRole(String)
    /// The peer completed the handshake with a certificate whose digest is not the one its SDP
    /// announced: someone other than the signaled peer is on the path. The connection is aborted.
    case fingerprintMismatch(expected: String, received: String)
    /// The peer finished the handshake without presenting a certificate.
    case missingPeerCertificate
    /// The handshake failed in OpenSSL (`sslError` is the `SSL_get_error` value).
    case handshakeFailed(sslError: Int32, OpenSSLErrorStack)
    /// The peer did not agree to any of our SRTP protection profiles.
    case noSRTPProfileNegotiated
    /// `SSL_export_keying_material` failed.
    case keyingMaterialExport(OpenSSLErrorStack)
    /// The operation is not valid in the transport's current state.
    case invalidState(operation: String, state: String)

    public var description: String {
        switch self {
        case .certificateGeneration(let step, let stack): "DTLS certificate generation failed at \(step): \(stack)"
        case .setup(let step, let stack): "DTLS setup failed at \(step): \(stack)"
        case .malformedFingerprint(let value, let reason): "malformed DTLS fingerprint \"\(value)\": \(reason)"
        case .unsupportedFingerprintAlgorithm(let name): "unsupported DTLS fingerprint hash \"\(name)\""
        case .invalidSetupRole(let value): "invalid DTLS setup role \"\(value)\" (expected active, passive or actpass)"
        case .fingerprintMismatch(let expected, let received):
            "DTLS peer certificate does not match the SDP fingerprint (expected \(expected), received \(received)); "
                + "connection aborted"
        case .missingPeerCertificate: "DTLS peer presented no certificate"
        case .handshakeFailed(let sslError, let stack): "DTLS handshake failed (SSL_get_error \(sslError)): \(stack)"
        case .noSRTPProfileNegotiated: "DTLS peer agreed to none of the offered SRTP protection profiles"
        case .keyingMaterialExport(let stack): "DTLS-SRTP keying material export failed: \(stack)"
        case .invalidState(let operation, let state): "DTLS \(operation) is not valid in state \(state)"
        }
    }
}
