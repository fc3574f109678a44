internal import CNice
internal import CNiceShims
import ConclaveCore
internal import ConclaveSDP
import Logging
import Synchronization

/// A full ICE agent (RFC 8445, libnice) with one stream of one component: BUNDLE and rtcp-mux
/// put all media of a PeerConnection on a single 5-tuple.
///
/// The actor runs on its own GLib loop thread (see `GLibEventLoop`), so its methods call
/// libnice on the thread libnice emits its signals on. Local candidates, state changes and
/// received datagrams arrive as `AsyncStream`s; `send` may be called from any thread without
/// awaiting. Receiving can instead go through a synchronous handler given at init, which the
/// DTLS/SRTP layer uses to process each packet in place on the loop thread.
///
/// Trickle ICE is on in both directions: local candidates are delivered as gathered, remote
/// ones may be added at any time, and `addRemoteEndOfCandidates()` lets checks conclude. Consent
/// freshness (RFC 7675) is on: libnice re-checks the selected pair and reports `failed` when the
/// peer stops answering, except that a consent lost while media from the peer still arrives is
/// renewed on the same pair, once in 30 s (`ConsentRenewal` says why).
///
/// Call `close()` when done: it releases TURN allocations, frees the agent and joins the thread.
public actor ICEAgent {
    /// Settings fixed for the life of the agent.
    public struct Configuration: Sendable {
        /// Which side nominates pairs (RFC 8445 section 6.1.1). The offerer is usually controlling;
        /// Janus is controlled when it answers and controlling when it offers (subscribers).
        public enum Role: Sendable, Hashable { case controlling, controlled }

        public var role: Role
        /// Numeric IP addresses to gather host candidates on; empty means every interface.
        /// Tests and the test bed restrict ICE to one address so nothing else is touched.
        public var localAddresses: [String]
        public var stunServer: STUNServer?
        public var turnServers: [TURNServer]
        /// ICE-TCP host candidates (RFC 6544); off, since Janus has it off by default.
        public var iceTCP: Bool
        /// Local UDP ports to bind, if restricted (firewalls, test beds).
        public var portRange: ClosedRange<UInt16>?
        /// Regular nomination (what browsers and Janus use) rather than aggressive.
        public var regularNomination: Bool
        /// `.relay` uses relayed candidates only (libnice's "force-relay"); needs a TURN server.
        public var transportPolicy: ICETransportPolicy
        /// Lets datagrams gather before the thread reads them (recorders); nil reads each at once.
        public var receiveBatching: ReceiveBatching?

        public init(
            role: Role,
            localAddresses: [String] = [],
            stunServer: STUNServer? = nil,
            turnServers: [TURNServer] = [],
            iceTCP: Bool = false,
            portRange: ClosedRange<UInt16>? = nil,
            regularNomination: Bool = true,
            transportPolicy: ICETransportPolicy = .all,
            receiveBatching: ReceiveBatching? = nil
        ) {
            self.role = role
            self.localAddresses = localAddresses
            self.stunServer = stunServer
            self.turnServers = turnServers
            self.iceTCP = iceTCP
            self.portRange = portRange
            self.regularNomination = regularNomination
            self.transportPolicy = transportPolicy
            self.receiveBatching = receiveBatching
        }
    }

    public nonisolated let configuration: Configuration
    /// Local candidates as gathered (and `.endOfCandidates`), for trickling to the peer.
    public nonisolated let localCandidates: AsyncStream<ICECandidateEvent>
    /// Each change of the component's state; ends with `.closed`.
    public nonisolated let stateChanges: AsyncStream<ICEConnectionState>
    /// Received datagrams (DTLS, SRTP, SRTCP), unless a datagram handler was given at init.
    /// Holds at most 1024 unread datagrams; beyond that the oldest are dropped, as a socket would.
    public nonisolated let receivedDatagrams: AsyncStream<[UInt8]>

    private let logger: Logger
    /// Internal for tests, which check that closing ends the thread.
    nonisolated let loop: GLibEventLoop
    private let executor: GLibExecutor
    private let handle: NiceAgentHandle
    private let isClosed = Atomic<Bool>(false)

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Creates the agent, its stream and its loop thread. Gathering starts with
    /// `gatherCandidates()`.
    ///
    /// - Parameter datagramHandler: if given, called synchronously on the loop thread with each
    ///   received datagram (valid only during the call), and `receivedDatagrams` stays empty.
    public init(
        configuration: Configuration,
        logger: Logger,
        datagramHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil
    ) throws(ICEError) {
        // Validate every address before creating anything.
        var localAddresses = try configuration.localAddresses.map { address throws(ICEError) in
            try Self.niceAddress(address, field: "local address")
        }
        if let stun = configuration.stunServer { _ = try Self.niceAddress(stun.address, field: "STUN server") }
        for turn in configuration.turnServers { _ = try Self.niceAddress(turn.address, field: "TURN server") }
        if let tls = configuration.turnServers.first(where: { $0.transport == .tls }) {
            // libnice opens NICE_RELAY_TYPE_TURN_TLS as a plain TCP connection in RFC 5245 mode
            // (TLS framing exists only for Google and Microsoft compatibility), so accepting it
            // would send what the user asked to be encrypted in the clear.
            throw .invalidConfiguration(
                field: "TURN server \(tls.address):\(tls.port)",
                reason: "TURN over TLS (turns:) is not supported: libnice would connect without TLS; "
                    + "use turn:...?transport=tcp or udp"
            )
        }
        if configuration.transportPolicy == .relay, configuration.turnServers.isEmpty {
            throw .invalidConfiguration(field: "transport policy", reason: "relay only, but no TURN server is given")
        }

        let (candidates, candidatesContinuation) = AsyncStream.makeStream(of: ICECandidateEvent.self)
        let (states, statesContinuation) = AsyncStream.makeStream(of: ICEConnectionState.self)
        let (datagrams, datagramsContinuation) = AsyncStream.makeStream(
            of: [UInt8].self,
            bufferingPolicy: .bufferingNewest(1024)
        )
        let batching = configuration.receiveBatching.map(ReceiveBatchingPoll.init)
        let callbacks = NiceCallbacks(
            logger: logger,
            candidates: candidatesContinuation,
            states: statesContinuation,
            datagrams: datagramsContinuation,
            datagramHandler: datagramHandler,
            receiveBatching: batching
        )

        let loop = try GLibEventLoop(name: "conclave.ice")
        if let batching {
            loop.batchReceives(batching)
        }
        var options = NICE_AGENT_OPTION_ICE_TRICKLE.rawValue | NICE_AGENT_OPTION_CONSENT_FRESHNESS.rawValue
        if configuration.regularNomination { options |= NICE_AGENT_OPTION_REGULAR_NOMINATION.rawValue }
        guard
            let agent = nice_agent_new_full(
                loop.context,
                NICE_COMPATIBILITY_RFC5245,
                NiceAgentOption(rawValue: options)
            )
        else {
            loop.shutdown { quit in quit() }
            loop.detachThread()
            throw .agentCreationFailed(step: "nice_agent_new_full")
        }
        let object = UnsafeMutableRawPointer(agent)
        cshim_g_object_set_boolean(object, "controlling-mode", configuration.role == .controlling ? 1 : 0)
        cshim_g_object_set_boolean(object, "ice-tcp", configuration.iceTCP ? 1 : 0)
        cshim_g_object_set_boolean(object, "ice-udp", 1)
        // No UPnP: Debian's libnice is built with gupnp-igd and, left on, multicasts SSDP
        // searches to the LAN while gathering, to ask a router for port mappings. Conclave never
        // sends to an address nobody configured; TURN is the way out of a NAT that needs help.
        cshim_g_object_set_boolean(object, "upnp", 0)
        // Keepalives as binding requests (not indications), which consent freshness relies on.
        cshim_g_object_set_boolean(object, "keepalive-conncheck", 1)
        // Relay only: host and server-reflexive candidates are neither signalled nor paired.
        cshim_g_object_set_boolean(object, "force-relay", configuration.transportPolicy == .relay ? 1 : 0)
        if let stun = configuration.stunServer {
            cshim_g_object_set_string(object, "stun-server", stun.address)
            cshim_g_object_set_uint(object, "stun-server-port", guint(stun.port))
        }
        for index in localAddresses.indices { _ = nice_agent_add_local_address(agent, &localAddresses[index]) }
        let streamID = nice_agent_add_stream(agent, 1)
        let handle = NiceAgentHandle(agent: agent, streamID: streamID, callbacks: callbacks)

        // From here on, failures release the agent on its loop thread.
        func abandon(_ step: String) -> ICEError {
            loop.shutdown { quit in
                handle.release()
                quit()
            }
            loop.detachThread()
            return .agentCreationFailed(step: step)
        }
        guard streamID != 0 else { throw abandon("nice_agent_add_stream") }
        _ = nice_agent_set_stream_name(agent, streamID, "audio")
        if let range = configuration.portRange {
            nice_agent_set_port_range(agent, streamID, 1, guint(range.lowerBound), guint(range.upperBound))
        }
        for turn in configuration.turnServers {
            let type: NiceRelayType =
                switch turn.transport {
                case .udp: NICE_RELAY_TYPE_TURN_UDP
                case .tcp: NICE_RELAY_TYPE_TURN_TCP
                case .tls: NICE_RELAY_TYPE_TURN_TLS
                }
            guard
                nice_agent_set_relay_info(
                    agent,
                    streamID,
                    1,
                    turn.address,
                    guint(turn.port),
                    turn.username,
                    turn.password,
                    type
                ) != 0
            else { throw abandon("nice_agent_set_relay_info \(turn)") }
        }
        handle.connectSignals()
        guard
            nice_agent_attach_recv(
                agent,
                streamID,
                1,
                loop.context,
                onReceive,
                Unmanaged.passUnretained(callbacks).toOpaque()
            )
                != 0
        else { throw abandon("nice_agent_attach_recv") }

        self.configuration = configuration
        self.logger = logger
        self.loop = loop
        self.executor = GLibExecutor(loop: loop)
        self.handle = handle
        self.localCandidates = candidates
        self.stateChanges = states
        self.receivedDatagrams = datagrams
    }

    deinit {
        // Not closed by its owner: free the agent on its thread and let the thread end by itself.
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let handle = handle
        loop.shutdown { quit in
            handle.release()
            quit()
        }
        loop.detachThread()
    }

    // MARK: Credentials and candidates

    /// Our ufrag and password for `a=ice-ufrag` / `a=ice-pwd` (new after each `restart()`).
    public func localCredentials() throws(ICEError) -> ICECredentials {
        try checkOpen()
        var ufrag: UnsafeMutablePointer<gchar>?
        var password: UnsafeMutablePointer<gchar>?
        guard nice_agent_get_local_credentials(handle.agent, handle.streamID, &ufrag, &password) != 0,
            let ufrag, let password
        else { throw .operationFailed(step: "nice_agent_get_local_credentials") }
        defer {
            g_free(ufrag)
            g_free(password)
        }
        return ICECredentials(ufrag: String(cString: ufrag), password: String(cString: password))
    }

    /// Starts gathering; candidates then arrive on `localCandidates`.
    public func gatherCandidates() throws(ICEError) {
        try checkOpen()
        guard nice_agent_gather_candidates(handle.agent, handle.streamID) != 0 else {
            throw .operationFailed(step: "nice_agent_gather_candidates")
        }
    }

    /// The local candidates gathered so far, as SDP candidate values (for a new offer, for
    /// example after `restart()`, which keeps the candidates).
    public func currentLocalCandidates() throws(ICEError) -> [String] {
        try checkOpen()
        guard let list = nice_agent_get_local_candidates(handle.agent, handle.streamID, 1) else { return [] }
        defer { g_slist_free_full(list) { nice_candidate_free($0?.assumingMemoryBound(to: NiceCandidate.self)) } }
        var lines: [String] = []
        var node: UnsafeMutablePointer<GSList>? = list
        while let current = node {
            if let data = current.pointee.data,
                let line = candidateLine(
                    agent: handle.agent,
                    candidate: data.assumingMemoryBound(to: NiceCandidate.self)
                )
            {
                lines.append(line)
            }
            node = current.pointee.next
        }
        return lines
    }

    /// Fires whenever a local candidate is gathered, gathering ends or the agent closes: a caller
    /// that needs the candidates gathered so far (`currentLocalCandidates()`) to include one it
    /// is waiting for checks again then, instead of polling. `localCandidates` cannot serve for
    /// that: an `AsyncStream` has one reader, the trickle to the peer.
    package nonisolated var localCandidateChanges: ChangeSignal { handle.callbacks.candidateChanges }

    /// How many times a consent lost while media from the peer still arrived was renewed on the
    /// pair in use instead of failing (see `ConsentRenewal`).
    public nonisolated var consentRenewals: Int { handle.callbacks.consentRenewals.load(ordering: .relaxed) }

    /// Fires on every state change and every consent renewal.
    package nonisolated var connectivityChanges: ChangeSignal { handle.callbacks.connectivityChanges }

    /// The peer's `a=ice-ufrag` and `a=ice-pwd`.
    public func setRemoteCredentials(_ credentials: ICECredentials) throws(ICEError) {
        try checkOpen()
        try Self.validate(credentials.ufrag, field: "ufrag")
        try Self.validate(credentials.password, field: "password")
        guard
            nice_agent_set_remote_credentials(handle.agent, handle.streamID, credentials.ufrag, credentials.password)
                != 0
        else { throw .operationFailed(step: "nice_agent_set_remote_credentials") }
    }

    /// Adds one remote candidate, trickled or from the SDP (`candidate:...`, `a=` tolerated).
    public func addRemoteCandidate(_ line: String) throws(ICEError) {
        try checkOpen()
        let parsed: ICECandidate
        do {
            parsed = try ICECandidate(parsingLine: line)
        } catch {
            throw .malformedCandidate(candidate: line, field: error.field.rawValue, reason: error.reason)
        }
        guard parsed.component == 1 else {
            throw .unsupportedCandidate(candidate: line, reason: "component \(parsed.component) (rtcp-mux uses 1 only)")
        }
        if parsed.transport.lowercased() == "tcp", !configuration.iceTCP {
            throw .unsupportedCandidate(candidate: line, reason: "TCP candidate while ICE-TCP is off")
        }
        var probe = NiceAddress()
        nice_address_init(&probe)
        guard nice_address_set_from_string(&probe, parsed.address) != 0 else {
            throw .unsupportedCandidate(candidate: line, reason: "address is a host name (mDNS?), not an IP address")
        }
        guard let candidate = nice_agent_parse_remote_candidate_sdp(handle.agent, handle.streamID, parsed.attributeLine)
        else { throw .malformedCandidate(candidate: line, field: "line", reason: "rejected by libnice's parser") }
        defer { nice_candidate_free(candidate) }
        let list = g_slist_append(nil, candidate)
        defer { g_slist_free(list) }
        guard nice_agent_set_remote_candidates(handle.agent, handle.streamID, 1, list) >= 0 else {
            throw .operationFailed(step: "nice_agent_set_remote_candidates")
        }
    }

    /// The peer has sent all its candidates: checks may now conclude, including as `failed`.
    public func addRemoteEndOfCandidates() throws(ICEError) {
        try checkOpen()
        guard nice_agent_peer_candidate_gathering_done(handle.agent, handle.streamID) != 0 else {
            throw .operationFailed(step: "nice_agent_peer_candidate_gathering_done")
        }
    }

    /// ICE restart (RFC 8445 section 9): new local credentials, remote credentials and
    /// candidates cleared, local candidates kept. Signal the returned credentials with the
    /// current candidates, then set the peer's new credentials and candidates. The peer calls it
    /// too when it sees our credentials change.
    public func restart() throws(ICEError) -> ICECredentials {
        try checkOpen()
        guard nice_agent_restart_stream(handle.agent, handle.streamID) != 0 else {
            throw .operationFailed(step: "nice_agent_restart_stream")
        }
        logger.debug("ICE restarted")
        return try localCredentials()
    }

    /// The current state of the component.
    public nonisolated var state: ICEConnectionState { handle.callbacks.state.withLock { $0 } }

    /// Calls `body` on the agent's loop thread (where datagrams are handled) every `interval`,
    /// until it returns false or the agent closes. For per-stream timers such as NACK retries:
    /// they then share the thread that is awake for packets anyway.
    public nonisolated func repeatOnLoop(every interval: Duration, _ body: @escaping @Sendable () -> Bool) {
        let parts = interval.components
        let milliseconds = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
        loop.repeatEvery(milliseconds: UInt32(clamping: max(milliseconds, 1)), body)
    }

    /// The candidate pair media uses, nil until ICE selects one.
    public nonisolated var selectedPair: ICESelectedPair? { handle.callbacks.selectedPair.withLock { $0 } }

    // MARK: Data

    /// Sends one datagram on the selected pair, from any thread, without awaiting. Returns false
    /// when no pair is selected yet or the agent is closed; the datagram is then dropped (UDP).
    @discardableResult
    public nonisolated func send(_ datagram: UnsafeRawBufferPointer) -> Bool {
        handle.send(datagram)
    }

    /// Sends one datagram held in an array; see `send(_:)`.
    @discardableResult
    public nonisolated func send(_ datagram: [UInt8]) -> Bool {
        datagram.withUnsafeBytes { handle.send($0) }
    }

    // MARK: Closing

    /// Releases TURN allocations, frees the agent (receive callback detached first), ends the
    /// streams, stops the loop and joins its thread. Idempotent; do not call from the datagram
    /// handler.
    public nonisolated func close() async {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else {
            await loop.waitForExit()
            return
        }
        // A wait on the candidates re-checks now, and learns that the agent is closed.
        handle.callbacks.candidateChanges.notify()
        await releaseRemoteResources()
        let handle = handle
        loop.shutdown { quit in
            handle.release()
            quit()
        }
        await loop.waitForExit()
        logger.debug("ICE agent closed")
    }

    /// `nice_agent_close_async`, awaited: deallocates TURN relays while the loop still runs.
    private func releaseRemoteResources() async {
        let agent = handle.agent
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let box = Unmanaged.passRetained(ContinuationBox(continuation)).toOpaque()
            nice_agent_close_async(
                agent,
                { _, _, data in
                    guard let data else { return }
                    Unmanaged<ContinuationBox>.fromOpaque(data).takeRetainedValue().continuation.resume()
                },
                box
            )
        }
    }

    // MARK: Helpers

    private func checkOpen() throws(ICEError) {
        if isClosed.load(ordering: .acquiring) { throw .closed }
    }

    private static func niceAddress(_ text: String, field: String) throws(ICEError) -> NiceAddress {
        var address = NiceAddress()
        nice_address_init(&address)
        guard nice_address_set_from_string(&address, text) != 0 else {
            throw .invalidAddress(field: field, value: text)
        }
        return address
    }

    private static func validate(_ value: String, field: String) throws(ICEError) {
        guard !value.isEmpty else { throw .invalidCredentials(field: field, reason: "empty") }
        guard value.count <= 256 else { throw .invalidCredentials(field: field, reason: "longer than 256 characters") }
        guard value.allSatisfy(ICECandidate.isICEChar) else {
            throw .invalidCredentials(field: field, reason: "characters outside ALPHA / DIGIT / + / /")
        }
    }
}

/// A continuation in a class, so it can travel through a `gpointer`.
private final class ContinuationBox: Sendable {
    let continuation: CheckedContinuation<Void, Never>
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
}
