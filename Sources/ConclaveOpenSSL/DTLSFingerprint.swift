internal import COpenSSL

/// A certificate fingerprint as carried by SDP `a=fingerprint` (RFC 8122), such as
/// `sha-256 4A:AD:...`. Comparison is on the digest bytes, so case in the hex does not matter.
public struct DTLSFingerprint: Sendable, Hashable, CustomStringConvertible {
    /// The hash functions we can verify.
    public enum Algorithm: String, Sendable, CaseIterable {
        case sha256 = "sha-256"
        case sha384 = "sha-384"
        case sha512 = "sha-512"

        var digestLength: Int {
            switch self {
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }

        var evp: OpaquePointer? {
            switch self {
            case .sha256: EVP_sha256()
            case .sha384: EVP_sha384()
            case .sha512: EVP_sha512()
            }
        }
    }

    public let algorithm: Algorithm
    public let digest: [UInt8]

    public init(algorithm: Algorithm, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    /// Parses the value of an `a=fingerprint:` attribute: the hash name, a space, then colon hex.
    public init(sdpValue: String) throws(DTLSError) {
        let parts = sdpValue.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else {
            throw .malformedFingerprint(value: sdpValue, reason: "expected \"<hash> <hex>\"")
        }
        guard let algorithm = Algorithm(rawValue: parts[0].lowercased()) else {
            throw .unsupportedFingerprintAlgorithm(String(parts[0]))
        }
        try self.init(algorithm: algorithm, hex: String(parts[1]))
    }

    /// Parses colon-separated hex such as `4A:AD:B9`.
    public init(algorithm: Algorithm, hex: String) throws(DTLSError) {
        var digest: [UInt8] = []
        for (index, pair) in hex.split(separator: ":", omittingEmptySubsequences: false).enumerated() {
            guard pair.count == 2, let byte = UInt8(pair, radix: 16) else {
                throw .malformedFingerprint(value: hex, reason: "byte \(index) is not two hex digits")
            }
            digest.append(byte)
        }
        guard digest.count == algorithm.digestLength else {
            throw .malformedFingerprint(
                value: hex,
                reason: "\(digest.count) bytes, \(algorithm.rawValue) has \(algorithm.digestLength)"
            )
        }
        self.init(algorithm: algorithm, digest: digest)
    }

    /// The digest as uppercase colon hex, as SDP carries it.
    public var hex: String {
        digest.map { byte in
            let text = String(byte, radix: 16, uppercase: true)
            return byte < 16 ? "0" + text : text
        }.joined(separator: ":")
    }

    /// The full attribute value: `sha-256 4A:AD:...`.
    public var sdpValue: String { "\(algorithm.rawValue) \(hex)" }

    public var description: String { sdpValue }

    /// Digest of a DER certificate held by OpenSSL.
    static func of(certificate: OpaquePointer, algorithm: Algorithm) -> DTLSFingerprint? {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, algorithm.evp, &digest, &length) == 1 else { return nil }
        return DTLSFingerprint(algorithm: algorithm, digest: Array(digest.prefix(Int(length))))
    }
}
