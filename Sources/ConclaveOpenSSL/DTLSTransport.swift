import Logging
import Synchronization

/// A DTLS 1.2 endpoint for DTLS-SRTP over any datagram path (an ICE component in production,
/// memory in tests).
///
/// It is a state machine driven by three inputs: `start()`, `receive(_:)` for each inbound
/// datagram, and `handleTimeout()` when `retransmissionTimeout` elapses. Outbound datagrams go,
/// one per call, to the closure given at init, synchronously from within those calls. When the
/// handshake completes, the peer certificate is checked against the SDP fingerprint and the
/// SRTP keys are exported (RFC 5764).
///
/// Thread-safe: calls are serialized by a lock, so the ICE receive handler (on the ICE loop
/// thread) and a retransmission timer (anywhere) may drive the same transport. The `send`
/// closure runs with the lock held and must not call back into the transport.
public final class DTLSTransport: @unchecked Sendable {
    // @unchecked: `engine` is only touched while holding `lock`.
    private let lock = Mutex<Void>(())
    private let engine: DTLSEngine

    /// Settings given at init.
    public let configuration: Configuration

    /// - Parameter send: called with each datagram to put on the path. The bytes are only valid
    ///   during the call.
    public init(
        certificate: DTLSCertificate,
        configuration: Configuration,
        logger: Logger,
        send: @escaping @Sendable (UnsafeRawBufferPointer) -> Void
    ) throws(DTLSError) {
        self.configuration = configuration
        self.engine = try DTLSEngine(certificate: certificate, configuration: configuration, logger: logger, send: send)
    }

    /// Where the handshake stands.
    public var state: State { lock.withLock { _ in engine.state } }

    /// Set once the handshake completes and the peer is verified.
    public var keyingMaterial: SRTPKeyingMaterial? { lock.withLock { _ in engine.keyingMaterial } }

    /// Counters so far.
    public var statistics: Statistics { lock.withLock { _ in engine.statistics } }

    /// Begins the handshake: a client sends its ClientHello, a server waits for one.
    public func start() throws(DTLSError) {
        try lock.withLock { _ throws(DTLSError) in try engine.start() }
    }

    /// Begins the handshake unless it has begun already; returns whether this call began it.
    ///
    /// A server's handshake also begins when the peer's ClientHello arrives, on the thread that
    /// receives datagrams; checking ``state`` and then calling ``start()`` from another thread
    /// races with it (a join failed with "DTLS start is not valid in state handshaking"). The
    /// check and the start here are one step under the lock.
    @discardableResult
    public func startIfNew() throws(DTLSError) -> Bool {
        try lock.withLock { _ throws(DTLSError) in
            guard engine.state == .new else { return false }
            try engine.start()
            return true
        }
    }

    /// Feeds one datagram from the path. Returns an event when the datagram completed the
    /// handshake or closed the connection.
    ///
    /// Datagrams that are not DTLS, or that arrive after failure or close, are counted in
    /// `statistics.datagramsRejected`, logged, and otherwise ignored. Malformed DTLS records are
    /// discarded by OpenSSL, as RFC 6347 section 4.1.2.7 requires. Throws only when the handshake
    /// itself fails (including a fingerprint mismatch); the transport is then `failed`.
    @discardableResult
    public func receive(_ datagram: UnsafeRawBufferPointer) throws(DTLSError) -> Event? {
        try lock.withLock { _ throws(DTLSError) in try engine.receive(datagram) }
    }

    /// Convenience for datagrams held in an array.
    @discardableResult
    public func receive(_ datagram: [UInt8]) throws(DTLSError) -> Event? {
        let result: Result<Event?, DTLSError> = datagram.withUnsafeBytes { bytes in
            do throws(DTLSError) { return .success(try receive(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Time left until a flight must be retransmitted, or nil when no timer runs. The owner
    /// calls `handleTimeout()` when it elapses.
    public var retransmissionTimeout: Duration? { lock.withLock { _ in engine.retransmissionTimeout } }

    /// Retransmits the last flight if its timer has expired (OpenSSL checks the clock itself, so
    /// an early call does nothing). Throws when OpenSSL gives up after too many attempts.
    public func handleTimeout() throws(DTLSError) {
        try lock.withLock { _ throws(DTLSError) in try engine.handleTimeout() }
    }

    /// Sends close_notify (if a handshake was under way or done) and stops processing input.
    public func close() {
        lock.withLock { _ in engine.close() }
    }
}

/// Which side of the DTLS handshake we play, from the SDP `a=setup` negotiation (RFC 8842).
public enum DTLSRole: Sendable, Hashable {
    /// `a=setup:active`: we send the ClientHello.
    case client
    /// `a=setup:passive`: we wait for the ClientHello.
    case server

    /// Our role when answering an offer whose `a=setup` is `remoteSetup`: a remote `actpass` is
    /// answered with `active`, as browsers do, so that we start the handshake at once.
    public init(answeringRemoteSetup remoteSetup: String) throws(DTLSError) {
        switch remoteSetup.lowercased() {
        case "active": self = .server
        case "passive", "actpass": self = .client
        default: throw .invalidSetupRole(remoteSetup)
        }
    }

    /// Our role after our offer said `actpass` and the answer said `remoteSetup`.
    public init(offeredActpassAndRemoteAnswered remoteSetup: String) throws(DTLSError) {
        switch remoteSetup.lowercased() {
        case "active": self = .server
        case "passive": self = .client
        default: throw .invalidSetupRole(remoteSetup)
        }
    }

    /// The `a=setup` value announcing this role.
    public var sdpSetup: String { self == .client ? "active" : "passive" }
}

extension DTLSTransport {
    /// Where the handshake stands.
    public enum State: Sendable, Hashable, CustomStringConvertible {
        case new, handshaking, connected, failed, closed
        public var description: String {
            switch self {
            case .new: "new"
            case .handshaking: "handshaking"
            case .connected: "connected"
            case .failed: "failed"
            case .closed: "closed"
            }
        }
    }

    /// What an inbound datagram changed.
    public enum Event: Sendable, Hashable {
        /// The handshake finished, the peer is who the SDP said, and these are the SRTP keys.
        case connected(SRTPKeyingMaterial)
        /// The peer sent close_notify.
        case closedByPeer
    }

    /// Settings fixed for the life of the connection.
    public struct Configuration: Sendable {
        public var role: DTLSRole
        /// The peer's `a=fingerprint` from SDP.
        public var remoteFingerprint: DTLSFingerprint
        /// Offered SRTP profiles, most preferred first.
        public var srtpProfiles: [SRTPProtectionProfile]
        /// Largest datagram we send (ICE over a 1500-byte path leaves room for 1200 safely).
        public var mtu: Int
        /// First retransmission timer; doubles on each retransmission (RFC 6347 default 1 s).
        public var initialRetransmissionTimeout: Duration

        public init(
            role: DTLSRole,
            remoteFingerprint: DTLSFingerprint,
            srtpProfiles: [SRTPProtectionProfile] = [.aeadAES128GCM, .aes128CMSHA1_80],
            mtu: Int = 1200,
            initialRetransmissionTimeout: Duration = .seconds(1)
        ) {
            self.role = role
            self.remoteFingerprint = remoteFingerprint
            self.srtpProfiles = srtpProfiles
            self.mtu = mtu
            self.initialRetransmissionTimeout = initialRetransmissionTimeout
        }
    }

    /// Counters for logs and statistics.
    public struct Statistics: Sendable, Hashable {
        /// Datagrams handed to `receive`.
        public var datagramsReceived = 0
        /// Datagrams dropped without reaching OpenSSL: not DTLS by their first byte, or arriving
        /// after the transport failed or closed.
        public var datagramsRejected = 0
        /// Datagrams written to the path.
        public var datagramsSent = 0
        /// Timer expiries that made OpenSSL resend a flight.
        public var retransmissions = 0
    }
}
