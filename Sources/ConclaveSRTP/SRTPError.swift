internal import CSRTP

/// A failure of libsrtp, with the operation that failed and libsrtp's status code.
///
/// The code distinguishes what a receiver must count separately: forged or corrupted packets
/// (`authenticationFailed`), replays (`replayed`, `tooOld`), and caller mistakes (`badParameter`,
/// `bufferTooSmall`, `packetTooShort`).
public struct SRTPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, independent of the operation.
    public enum Code: Sendable, Hashable {
        /// The authentication tag did not verify: a corrupted, tampered, or wrongly keyed packet.
        case authenticationFailed
        /// The packet index was already seen within the replay window.
        case replayed
        /// The packet index is older than the replay window.
        case tooOld
        /// libsrtp rejected a parameter (key length, policy, malformed header).
        case badParameter
        /// The caller's buffer does not have room for the trailer `protect` appends.
        case bufferTooSmall(needed: Int, available: Int)
        /// The packet is shorter than the smallest valid packet of its kind.
        case packetTooShort(length: Int)
        /// The key handed in does not have the profile's key plus salt length.
        case wrongKeyLength(expected: Int, actual: Int)
        /// Any other libsrtp status (the raw `srtp_err_status_t` value).
        case other(status: Int32)
    }

    /// The operation that failed, such as `"srtp_unprotect"`.
    public let operation: String
    /// The kind of failure.
    public let code: Code

    public init(operation: String, code: Code) {
        self.operation = operation
        self.code = code
    }

    init(operation: String, status: srtp_err_status_t) {
        let code: Code =
            switch status {
            case srtp_err_status_auth_fail: .authenticationFailed
            case srtp_err_status_replay_fail: .replayed
            case srtp_err_status_replay_old: .tooOld
            case srtp_err_status_bad_param: .badParameter
            default: .other(status: Int32(bitPattern: status.rawValue))
            }
        self.init(operation: operation, code: code)
    }

    public var description: String {
        switch code {
        case .authenticationFailed: "\(operation): authentication tag mismatch (tampered or wrongly keyed packet)"
        case .replayed: "\(operation): replayed packet (index already received)"
        case .tooOld: "\(operation): packet index older than the replay window"
        case .badParameter: "\(operation): libsrtp rejected a parameter"
        case .bufferTooSmall(let needed, let available):
            "\(operation): buffer holds \(available) bytes, \(needed) needed for the SRTP trailer"
        case .packetTooShort(let length): "\(operation): packet of \(length) bytes is too short"
        case .wrongKeyLength(let expected, let actual):
            "\(operation): key material is \(actual) bytes, the profile needs \(expected)"
        case .other(let status): "\(operation): libsrtp status \(status)"
        }
    }
}
