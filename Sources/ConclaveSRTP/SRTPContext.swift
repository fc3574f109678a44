internal import CSRTP
internal import CSRTPShims

/// `srtp_init` must run exactly once per process before any session is created; a global's
/// initializer runs once, thread-safely, on first use.
private let libraryStatus: UInt32 = srtp_init().rawValue

/// One direction of SRTP for one DTLS-SRTP association, without a lock: for a single owner, such
/// as the receive path bound to the ICE loop thread, which unprotects every packet on that one
/// thread. It is deliberately not `Sendable`; ``SRTPSession`` is the same context behind a lock,
/// for directions several threads use (the senders' tasks and the loop's RTCP).
///
/// Packets are transformed in place in the caller's buffer, so the hot path allocates nothing.
public final class SRTPContext {
    /// Which way packets flow through this context.
    public enum Direction: Sendable {
        /// Packets we send: `protect` and `protectRTCP`.
        case outbound
        /// Packets we receive: `unprotect` and `unprotectRTCP`, with replay protection.
        case inbound
    }

    /// Room a buffer must have after the packet for `protect` (libsrtp may write up to
    /// `SRTP_MAX_TRAILER_LEN` bytes past the packet, even if the actual tag is shorter).
    public static let trailerCapacity = Int(cshim_SRTP_MAX_TRAILER_LEN)

    /// Size of the replay window, in packets (the largest libsrtp 2 supports is 32768; 1024 is
    /// what browsers use and covers NACK retransmissions arriving late).
    public static let replayWindow = 1024

    public let profile: SRTPProfile
    public let direction: Direction
    private let handle: OpaquePointer  // srtp_t

    /// Creates a context from a master key followed by its master salt, as laid out by
    /// `SRTPKeyingMaterial` in ConclaveOpenSSL (key ‖ salt, RFC 5764 section 4.2).
    public init(profile: SRTPProfile, direction: Direction, keyAndSalt: [UInt8]) throws(SRTPError) {
        guard libraryStatus == srtp_err_status_ok.rawValue else {
            throw SRTPError(operation: "srtp_init", code: .other(status: Int32(bitPattern: libraryStatus)))
        }
        let expected = profile.masterKeyLength + profile.masterSaltLength
        guard keyAndSalt.count == expected else {
            throw SRTPError(
                operation: "srtp_create",
                code: .wrongKeyLength(expected: expected, actual: keyAndSalt.count)
            )
        }
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CMHMACSHA1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAES128GCM:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = UInt(Self.replayWindow)
        // Outbound only: answering a NACK without RTX resends the identical packet.
        policy.allow_repeat_tx = direction == .outbound ? 1 : 0
        policy.next = nil

        var key = keyAndSalt
        var created: srtp_t?
        // libsrtp copies the key during srtp_create, so the pointer only has to live for the call.
        let status = key.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        // Do not leave a copy of the key in memory longer than needed.
        for index in key.indices { key[index] = 0 }
        guard status == srtp_err_status_ok, let created else {
            throw SRTPError(operation: "srtp_create", status: status)
        }
        self.profile = profile
        self.direction = direction
        self.handle = created
    }

    deinit { srtp_dealloc(handle) }

    // MARK: In place on a caller buffer (hot path)

    /// Encrypts and authenticates the RTP packet in the first `length` bytes of `buffer`, in place.
    ///
    /// - Returns: the length of the SRTP packet (longer by the profile's RTP trailer).
    /// - Throws: `bufferTooSmall` unless `buffer.count >= length + trailerCapacity`.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try transform(buffer, length: length, operation: .protectRTP)
    }

    /// Verifies and decrypts the SRTP packet in the first `length` bytes of `buffer`, in place.
    ///
    /// - Returns: the length of the plain RTP packet.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try transform(buffer, length: length, operation: .unprotectRTP)
    }

    /// Encrypts and authenticates the RTCP (compound) packet in place; see `protect`.
    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try transform(buffer, length: length, operation: .protectRTCP)
    }

    /// Verifies and decrypts the SRTCP packet in place; see `unprotect`.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        try transform(buffer, length: length, operation: .unprotectRTCP)
    }

    // MARK: Arrays (convenience; allocation only when the array lacks capacity)

    /// Protects the RTP packet held in `packet`, replacing it with the SRTP packet.
    public func protect(_ packet: inout [UInt8]) throws(SRTPError) {
        try withGrownArray(&packet) { buffer, length throws(SRTPError) in try protect(buffer, length: length) }
    }

    /// Unprotects the SRTP packet held in `packet`, replacing it with the RTP packet.
    public func unprotect(_ packet: inout [UInt8]) throws(SRTPError) {
        try withArray(&packet) { buffer, length throws(SRTPError) in try unprotect(buffer, length: length) }
    }

    /// Protects the RTCP packet held in `packet`, replacing it with the SRTCP packet.
    public func protectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try withGrownArray(&packet) { buffer, length throws(SRTPError) in try protectRTCP(buffer, length: length) }
    }

    /// Unprotects the SRTCP packet held in `packet`, replacing it with the RTCP packet.
    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try withArray(&packet) { buffer, length throws(SRTPError) in try unprotectRTCP(buffer, length: length) }
    }

    // MARK: Internals

    /// The four libsrtp calls.
    private enum Operation {
        case protectRTP, unprotectRTP, protectRTCP, unprotectRTCP

        var name: String {
            switch self {
            case .protectRTP: "srtp_protect"
            case .unprotectRTP: "srtp_unprotect"
            case .protectRTCP: "srtp_protect_rtcp"
            case .unprotectRTCP: "srtp_unprotect_rtcp"
            }
        }
        /// Smallest packet worth handing to libsrtp: an RTP fixed header, or an RTCP header plus SSRC.
        var minimumLength: Int {
            switch self {
            case .protectRTP, .unprotectRTP: 12
            case .protectRTCP, .unprotectRTCP: 8
            }
        }
        var grows: Bool { self == .protectRTP || self == .protectRTCP }
    }

    private func transform(
        _ buffer: UnsafeMutableRawBufferPointer,
        length: Int,
        operation: Operation
    ) throws(SRTPError) -> Int {
        guard length >= operation.minimumLength, length <= buffer.count, let base = buffer.baseAddress else {
            throw SRTPError(operation: operation.name, code: .packetTooShort(length: length))
        }
        if operation.grows, buffer.count - length < Self.trailerCapacity {
            throw SRTPError(
                operation: operation.name,
                code: .bufferTooSmall(needed: length + Self.trailerCapacity, available: buffer.count)
            )
        }
        var cLength = Int32(clamping: length)
        let status =
            switch operation {
            case .protectRTP: srtp_protect(handle, base, &cLength)
            case .unprotectRTP: srtp_unprotect(handle, base, &cLength)
            case .protectRTCP: srtp_protect_rtcp(handle, base, &cLength)
            case .unprotectRTCP: srtp_unprotect_rtcp(handle, base, &cLength)
            }
        guard status == srtp_err_status_ok else { throw SRTPError(operation: operation.name, status: status) }
        return Int(cLength)
    }

    private func withGrownArray(
        _ packet: inout [UInt8],
        _ body: (UnsafeMutableRawBufferPointer, Int) throws(SRTPError) -> Int
    ) throws(SRTPError) {
        let length = packet.count
        packet.append(contentsOf: repeatElement(0, count: Self.trailerCapacity))
        let result: Result<Int, SRTPError> = packet.withUnsafeMutableBytes { buffer in
            do throws(SRTPError) { return .success(try body(buffer, length)) } catch { return .failure(error) }
        }
        switch result {
        case .success(let newLength): packet.removeLast(packet.count - newLength)
        case .failure(let error):
            packet.removeLast(packet.count - length)
            throw error
        }
    }

    private func withArray(
        _ packet: inout [UInt8],
        _ body: (UnsafeMutableRawBufferPointer, Int) throws(SRTPError) -> Int
    ) throws(SRTPError) {
        let length = packet.count
        let result: Result<Int, SRTPError> = packet.withUnsafeMutableBytes { buffer in
            do throws(SRTPError) { return .success(try body(buffer, length)) } catch { return .failure(error) }
        }
        let newLength = try result.get()
        packet.removeLast(packet.count - newLength)
    }
}

/// A context has one owner at a time: share one between threads through ``SRTPSession``.
@available(*, unavailable)
extension SRTPContext: Sendable {}
