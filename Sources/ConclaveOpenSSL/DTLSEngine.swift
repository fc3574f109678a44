internal import COpenSSL
internal import COpenSSLShims
import Logging

/// The OpenSSL side of `DTLSTransport`: not thread-safe, always used under the transport's lock.
final class DTLSEngine {
    typealias State = DTLSTransport.State
    typealias Event = DTLSTransport.Event
    typealias Configuration = DTLSTransport.Configuration
    typealias Statistics = DTLSTransport.Statistics

    let configuration: Configuration
    private(set) var state: State = .new
    /// Set once the handshake completes and the peer is verified.
    private(set) var keyingMaterial: SRTPKeyingMaterial?
    private var counters = Statistics()
    private let logger: Logger
    private let certificate: DTLSCertificate
    private let context: OpaquePointer  // SSL_CTX *
    private let ssl: OpaquePointer  // SSL *, owns both BIOs
    private let readBIO: OpaquePointer  // BIO_s_mem fed by receive(_:)
    private let connection: DTLSConnectionContext

    /// - Parameter send: called with each datagram to put on the path, synchronously from
    ///   `start`, `receive`, `handleTimeout` and `close`. The bytes are only valid during the call.
    init(
        certificate: DTLSCertificate,
        configuration: Configuration,
        logger: Logger,
        send: @escaping @Sendable (UnsafeRawBufferPointer) -> Void
    ) throws(DTLSError) {
        ERR_clear_error()
        guard !configuration.srtpProfiles.isEmpty else { throw .noSRTPProfileNegotiated }
        guard let method = datagramBIOMethod else { throw .setup(step: "BIO_meth_new", .drain()) }
        guard let context = SSL_CTX_new(DTLS_method()) else { throw .setup(step: "SSL_CTX_new", .drain()) }
        let microseconds = configuration.initialRetransmissionTimeout.components
        let initialMicroseconds = UInt32(
            clamping: microseconds.seconds * 1_000_000 + microseconds.attoseconds / 1_000_000_000_000
        )
        let connection = DTLSConnectionContext(
            mtu: configuration.mtu,
            initialTimeoutMicroseconds: max(initialMicroseconds, 1_000),
            send: send
        )

        // Every failure below frees what was made so far.
        func fail(_ step: String, ssl: OpaquePointer? = nil) -> DTLSError {
            let error = DTLSError.setup(step: step, .drain())
            if let ssl { SSL_free(ssl) }
            SSL_CTX_free(context)
            return error
        }
        guard SSL_CTX_use_certificate(context, certificate.certificate) == 1 else {
            throw fail("SSL_CTX_use_certificate")
        }
        guard SSL_CTX_use_PrivateKey(context, certificate.key) == 1 else { throw fail("SSL_CTX_use_PrivateKey") }
        guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(DTLS1_2_VERSION), nil) == 1 else {
            throw fail("SSL_CTX_set_min_proto_version")
        }
        // Peers use self-signed certificates: accept any chain here, then compare the digest with
        // the SDP fingerprint once the handshake completes. Both sides must send a certificate.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT) { _, _ in 1 }
        let profiles = configuration.srtpProfiles.map(\.openSSLName).joined(separator: ":")
        guard SSL_CTX_set_tlsext_use_srtp(context, profiles) == 0 else {  // 0 is success here
            throw fail("SSL_CTX_set_tlsext_use_srtp")
        }
        guard let ssl = SSL_new(context) else { throw fail("SSL_new") }
        guard let readBIO = BIO_new(BIO_s_mem()) else { throw fail("BIO_new(mem)", ssl: ssl) }
        guard let writeBIO = BIO_new(method) else {
            BIO_free(readBIO)
            throw fail("BIO_new(datagram)", ssl: ssl)
        }
        _ = cshim_BIO_set_mem_eof_return(readBIO, -1)  // empty means "want read", not end of file
        BIO_set_data(writeBIO, Unmanaged.passUnretained(connection).toOpaque())
        SSL_set_bio(ssl, readBIO, writeBIO)
        _ = SSL_set_ex_data(ssl, connectionContextIndex, Unmanaged.passUnretained(connection).toOpaque())
        _ = SSL_set_options(ssl, cshim_SSL_OP_NO_QUERY_MTU())
        _ = cshim_DTLS_set_link_mtu(ssl, configuration.mtu)
        DTLS_set_timer_cb(ssl, dtlsTimer)
        if configuration.role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }

        self.certificate = certificate
        self.configuration = configuration
        self.logger = logger
        self.context = context
        self.ssl = ssl
        self.readBIO = readBIO
        self.connection = connection
    }

    deinit {
        SSL_free(ssl)  // frees both BIOs; the connection context outlives it as a stored property
        SSL_CTX_free(context)
    }

    /// Counters so far.
    var statistics: Statistics {
        var result = counters
        result.datagramsSent = connection.datagramsSent
        return result
    }

    /// Begins the handshake: a client sends its ClientHello, a server waits for one.
    func start() throws(DTLSError) {
        guard state == .new else { throw .invalidState(operation: "start", state: state.description) }
        state = .handshaking
        logger.debug("DTLS handshake starting", metadata: ["role": "\(configuration.role)"])
        if configuration.role == .client { _ = try advanceHandshake() }
    }

    /// Feeds one datagram from the path. Returns an event when the datagram completed the
    /// handshake or closed the connection.
    ///
    /// Datagrams that are not DTLS, or that arrive after failure or close, are counted in
    /// `statistics.datagramsRejected`, logged, and otherwise ignored. Malformed DTLS records are
    /// discarded by OpenSSL, as RFC 6347 section 4.1.2.7 requires. Throws only when the handshake
    /// itself fails (including a fingerprint mismatch); the transport is then `failed`.
    @discardableResult
    func receive(_ datagram: UnsafeRawBufferPointer) throws(DTLSError) -> Event? {
        counters.datagramsReceived += 1
        let kind = MultiplexedPacketKind(classifying: datagram)
        guard kind == .dtls, datagram.count <= Int(Int32.max) else {
            reject(datagram, reason: "not a DTLS record (\(kind))")
            return nil
        }
        switch state {
        case .new:
            // A server may see the ClientHello before its owner called start().
            guard configuration.role == .server else {
                reject(datagram, reason: "client not started")
                return nil
            }
            state = .handshaking
        case .failed, .closed:
            reject(datagram, reason: "transport \(state)")
            return nil
        case .handshaking, .connected:
            break
        }
        guard BIO_write(readBIO, datagram.baseAddress, Int32(datagram.count)) == Int32(datagram.count) else {
            reject(datagram, reason: "read BIO refused the datagram")
            return nil
        }
        if state == .handshaking { return try advanceHandshake() }
        return readApplicationRecords()
    }

    /// Time left until a flight must be retransmitted, or nil when no timer runs (not
    /// handshaking, or waiting for nothing). The owner calls `handleTimeout()` when it elapses.
    var retransmissionTimeout: Duration? {
        guard state == .handshaking else { return nil }
        var remaining = timeval()
        guard cshim_DTLSv1_get_timeout(ssl, &remaining) == 1 else { return nil }
        return .seconds(Int64(remaining.tv_sec)) + .microseconds(Int64(remaining.tv_usec))
    }

    /// Retransmits the last flight if its timer has expired (OpenSSL checks the clock itself, so
    /// an early call does nothing). Throws when OpenSSL gives up after too many attempts.
    func handleTimeout() throws(DTLSError) {
        guard state == .handshaking else { return }
        ERR_clear_error()
        let result = cshim_DTLSv1_handle_timeout(ssl)
        if result > 0 {
            counters.retransmissions += 1
            logger.debug("DTLS flight retransmitted", metadata: ["retransmissions": "\(counters.retransmissions)"])
        } else if result < 0 {
            state = .failed
            let error = DTLSError.handshakeFailed(sslError: SSL_get_error(ssl, Int32(result)), .drain())
            logger.warning("DTLS handshake timed out", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Sends close_notify (if a handshake was under way or done) and stops processing input.
    func close() {
        switch state {
        case .handshaking, .connected:
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        case .new, .failed, .closed:
            break
        }
        state = .closed
    }

    // MARK: Internals

    private func reject(_ datagram: UnsafeRawBufferPointer, reason: String) {
        counters.datagramsRejected += 1
        logger.debug(
            "DTLS datagram dropped",
            metadata: [
                "reason": "\(reason)", "length": "\(datagram.count)",
                "firstByte": "\(datagram.first.map(String.init) ?? "none")",
                "rejected": "\(counters.datagramsRejected)",
            ]
        )
    }

    private func advanceHandshake() throws(DTLSError) -> Event? {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            return try finishHandshake()
        }
        let sslError = SSL_get_error(ssl, result)
        switch sslError {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return nil
        default:
            state = .failed
            let error = DTLSError.handshakeFailed(sslError: sslError, .drain())
            logger.warning("DTLS handshake failed", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Checks the peer against the SDP fingerprint, then exports the SRTP keys.
    private func finishHandshake() throws(DTLSError) -> Event {
        do throws(DTLSError) {
            try verifyPeer()
            let keys = try exportKeys()
            keyingMaterial = keys
            state = .connected
            logger.debug("DTLS connected", metadata: ["srtpProfile": "\(keys.profile)"])
            return .connected(keys)
        } catch {
            state = .failed
            ERR_clear_error()
            _ = SSL_shutdown(ssl)  // tell the peer we are leaving rather than let it time out
            ERR_clear_error()
            logger.error("DTLS peer rejected", metadata: ["error": "\(error)"])
            throw error
        }
    }

    private func verifyPeer() throws(DTLSError) {
        guard let peer = SSL_get1_peer_certificate(ssl) else { throw .missingPeerCertificate }
        defer { X509_free(peer) }
        let expected = configuration.remoteFingerprint
        guard let actual = DTLSFingerprint.of(certificate: peer, algorithm: expected.algorithm) else {
            throw .setup(step: "X509_digest", .drain())
        }
        guard actual.digest == expected.digest else {
            throw .fingerprintMismatch(expected: expected.sdpValue, received: actual.sdpValue)
        }
    }

    private func exportKeys() throws(DTLSError) -> SRTPKeyingMaterial {
        guard let selected = SSL_get_selected_srtp_profile(ssl),
            let profile = SRTPProtectionProfile(rawValue: UInt16(truncatingIfNeeded: selected.pointee.id))
        else { throw .noSRTPProfileNegotiated }
        let length = 2 * (profile.masterKeyLength + profile.masterSaltLength)
        var exported = [UInt8](repeating: 0, count: length)
        let label = "EXTRACTOR-dtls_srtp"
        guard SSL_export_keying_material(ssl, &exported, length, label, label.utf8.count, nil, 0, 0) == 1 else {
            throw .keyingMaterialExport(.drain())
        }
        defer { for index in exported.indices { exported[index] = 0 } }
        return SRTPKeyingMaterial(profile: profile, exported: exported, isClient: configuration.role == .client)
    }

    /// After the handshake, the only records we expect are alerts (WebRTC media does not travel
    /// in DTLS). Reading processes them; close_notify closes the transport.
    private func readApplicationRecords() -> Event? {
        var scratch = [UInt8](repeating: 0, count: 2048)
        while true {
            ERR_clear_error()
            let count = SSL_read(ssl, &scratch, Int32(scratch.count))
            if count > 0 {
                logger.debug("DTLS application data ignored", metadata: ["length": "\(count)"])
                continue
            }
            let sslError = SSL_get_error(ssl, count)
            switch sslError {
            case SSL_ERROR_ZERO_RETURN:
                state = .closed
                logger.debug("DTLS peer sent close_notify")
                return .closedByPeer
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return nil
            default:
                let stack = OpenSSLErrorStack.drain()
                logger.debug("DTLS record dropped after handshake", metadata: ["error": "\(stack)"])
                return nil
            }
        }
    }
}
