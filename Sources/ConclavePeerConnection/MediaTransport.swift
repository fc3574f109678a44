import ConclaveCore
import ConclaveICE
import ConclaveOpenSSL
import ConclaveSDP
import ConclaveSRTP
import Foundation
import Logging
import Synchronization

/// Why the media transport of a PeerConnection failed.
public struct MediaTransportError: Error, Sendable, CustomStringConvertible {
    /// What failed, for people.
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// Why a media transport failed for good.
public enum MediaTransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// ICE tried every candidate pair and none works.
    case iceFailed
    /// The DTLS handshake failed (or a DTLS record could not be handled).
    case dtls(String)
    /// DTLS agreed on an SRTP protection profile this build cannot use.
    case unsupportedSRTPProfile(String)
    /// The SRTP sessions could not be made from the exported keys.
    case srtp(String)

    public var description: String {
        switch self {
        case .iceFailed: "ICE failed: no candidate pair works"
        case .dtls(let error): "DTLS: \(error)"
        case .unsupportedSRTPProfile(let profile):
            "DTLS negotiated an SRTP profile this build cannot use (\(profile))"
        case .srtp(let error): "SRTP: \(error)"
        }
    }
}

/// Where a media transport stands.
public enum MediaTransportState: Sendable, Hashable, CustomStringConvertible {
    case new
    /// ICE is checking pairs.
    case connecting
    /// ICE works and DTLS is handshaking.
    case handshaking
    /// SRTP keys are in place: media flows.
    case connected
    /// ICE failed, or DTLS or SRTP failed (the failure says why).
    case failed(MediaTransportFailure)
    case closed

    public var description: String {
        switch self {
        case .new: "new"
        case .connecting: "connecting"
        case .handshaking: "handshaking"
        case .connected: "connected"
        case .failed(let reason): "failed: \(reason)"
        case .closed: "closed"
        }
    }
}

/// ICE, DTLS and SRTP for one bundled, rtcp-muxed PeerConnection: the secure datagram path that
/// RTP and RTCP travel on.
///
/// Inbound work runs synchronously on the ICE agent's loop thread as each datagram arrives: the
/// datagram is classified (RFC 7983), handed to DTLS during the handshake, or SRTP-unprotected in
/// place and passed to the handlers set with ``setHandlers(rtp:rtcp:)``. What that path uses per
/// packet (the inbound SRTP context, the handlers, the receive counters) is owned by the loop
/// thread (a `ConclaveICE.LoopBound`), so a received packet takes no lock and no task hop here.
///
/// Outbound packets are protected and sent from whatever thread calls ``sendRTP(_:)``: the
/// senders' tasks, and the loop for RTCP. The outbound SRTP context and the send counters are
/// therefore behind one lock, taken once per packet sent; posting each packet to the loop instead
/// would cost a thread wake-up per packet, far more than an uncontended lock (`bench/transport`
/// measures both).
public final class MediaTransport: Sendable {
    /// Settings for one transport.
    public struct Configuration: Sendable {
        /// Local addresses ICE gathers on (the test bed's veth address; empty: every interface).
        public var localAddresses: [String]
        /// A STUN server for a server-reflexive candidate.
        public var stunServer: STUNServer?
        /// TURN relays.
        public var turnServers: [TURNServer]
        /// `.relay` sends media only through the TURN relays (WebRTC's `iceTransportPolicy`).
        public var iceTransportPolicy: ICETransportPolicy
        /// Lets received datagrams gather before they are read: for receivers that play nothing
        /// back (`conclave record`), at the cost of up to 40 ms of latency.
        public var receiveBatching: ReceiveBatching?

        /// Creates a configuration.
        public init(
            localAddresses: [String] = [],
            stunServer: STUNServer? = nil,
            turnServers: [TURNServer] = [],
            iceTransportPolicy: ICETransportPolicy = .all,
            receiveBatching: ReceiveBatching? = nil
        ) {
            self.localAddresses = localAddresses
            self.stunServer = stunServer
            self.turnServers = turnServers
            self.iceTransportPolicy = iceTransportPolicy
            self.receiveBatching = receiveBatching
        }
    }

    /// Counters for status displays and tests.
    public struct Counters: Sendable, Hashable {
        public var rtpReceived = 0
        public var rtcpReceived = 0
        public var unprotectFailures = 0
        public var rtpSent = 0
        public var rtcpSent = 0
        public var sendFailures = 0
    }

    /// The ICE agent (for local candidates and remote trickle).
    public let ice: ICEAgent
    /// Our DTLS certificate; its fingerprint goes into our SDP.
    public let certificate: DTLSCertificate
    /// State changes.
    public let states: AsyncStream<MediaTransportState>
    private let stateContinuation: AsyncStream<MediaTransportState>.Continuation
    /// Fires on every change of `Inner.state`, for `waitUntilConnected`.
    private let stateSignal = ChangeSignal()
    private let logger: Logger

    /// Negotiation and connection state: reached from tasks, the ICE state stream and (for DTLS
    /// records, during the handshake only) the loop thread; never per media packet.
    private struct Inner {
        var dtls: DTLSTransport?
        /// SRTP keys are installed (they survive an ICE restart).
        var keyed = false
        var state: MediaTransportState = .new
        /// Set by the one caller that starts the handshake (ICE "connected" and "ready", and
        /// `start(remote:)`, can all try from different threads).
        var handshakeStarted = false
        /// The peer's ICE ufrag last applied, to notice a restart in a renegotiation.
        var remoteUfrag: String?
        /// The peer's candidates so far (from descriptions and trickle): an ICE restart clears
        /// libnice's remote candidates, and a peer answering a restart may not repeat unchanged ones.
        var remoteCandidates: [String] = []
        /// Candidates trickled before the peer's credentials were known, and whether its end of
        /// candidates came too: applied with the credentials (see `addRemoteCandidate`).
        var heldCandidates: [String] = []
        var heldEndOfCandidates = false
    }

    /// What each received packet uses, owned by the ICE loop thread.
    private struct ReceivePath {
        /// Made on the loop thread when the DTLS handshake ends, used only there.
        var inbound: SRTPContext?
        var onRTP: (@Sendable ([UInt8]) -> Void)?
        var onRTCP: (@Sendable ([UInt8]) -> Void)?
        /// Only the receive fields are kept here; the send fields are in `SendPath`.
        var counters = Counters()
    }

    /// What each sent packet uses, shared by every sending thread.
    private struct SendPath {
        var outbound: SRTPContext?
        /// Only the send fields are kept here; the receive fields are in `ReceivePath`.
        var counters = Counters()
    }

    private let inner = Mutex(Inner())
    private let receivePath: LoopBound<ReceivePath>
    private let sendPath = Mutex(SendPath())
    private let timers = Mutex<[Task<Void, Never>]>([])

    /// Creates the transport and its ICE agent (`controlling` when we send the offer).
    public init(configuration: Configuration, controlling: Bool, logger: Logger) throws {
        let (states, continuation) = AsyncStream.makeStream(
            of: MediaTransportState.self,
            bufferingPolicy: .bufferingNewest(16)
        )
        self.states = states
        self.stateContinuation = continuation
        self.logger = logger
        certificate = try DTLSCertificate()
        let box = WeakBox<MediaTransport>()
        ice = try ICEAgent(
            configuration: ICEAgent.Configuration(
                role: controlling ? .controlling : .controlled,
                localAddresses: configuration.localAddresses,
                stunServer: configuration.stunServer,
                turnServers: configuration.turnServers,
                transportPolicy: configuration.iceTransportPolicy,
                receiveBatching: configuration.receiveBatching
            ),
            logger: logger,
            datagramHandler: { datagram in box.value?.receive(datagram) }
        )
        receivePath = LoopBound(ReceivePath(), on: ice)
        box.value = self
        let ice = self.ice
        track(
            Task { [weak self] in
                for await state in ice.stateChanges {
                    self?.iceStateChanged(state)
                }
            }
        )
    }

    /// Sets where decrypted RTP and RTCP go. Called on the ICE loop thread with one packet each,
    /// unprotected in place in the array that carries it on (one copy of the datagram in all).
    /// Posted to the loop: it takes effect before any packet the loop handles after it (packets
    /// flow only once DTLS, started later, has keyed SRTP).
    public func setHandlers(
        rtp: @escaping @Sendable ([UInt8]) -> Void,
        rtcp: @escaping @Sendable ([UInt8]) -> Void
    ) {
        receivePath.execute {
            $0.onRTP = rtp
            $0.onRTCP = rtcp
        }
    }

    /// Our ICE credentials, DTLS fingerprint and the candidates gathered so far.
    public func localParameters(waitForCandidates limit: Duration = .seconds(2)) async throws
        -> LocalTransportParameters
    {
        try await ice.gatherCandidates()
        let credentials = try await ice.localCredentials()
        // Host candidates on the given addresses arrive at once; wait briefly for gathering to end
        // so the first description already carries them (the rest are trickled).
        // Relay only: wait for the relayed candidate (a TURN allocation takes a round trip), so
        // that the description carries it and checks against the peer's candidates include it.
        // Each check runs when the agent reports a candidate (or the end of gathering), not on a
        // timer: the description goes out the moment it can.
        var candidates: [ICECandidate] = []
        var complete = false
        let changes = ice.localCandidateChanges
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let generation = changes.generation
            let lines = try await ice.currentLocalCandidates()
            candidates = lines.filter(admitsLocalCandidate).compactMap { try? ICECandidate(parsing: $0) }
            if !candidates.isEmpty {
                complete = true
                break
            }
            _ = try await changes.wait(after: generation, until: deadline)
        }
        return LocalTransportParameters(
            iceUfrag: credentials.ufrag,
            icePwd: credentials.password,
            fingerprint: SDPFingerprint(digest: certificate.fingerprint.digest),
            candidates: candidates,
            endOfCandidates: complete && configurationHasNoServers
        )
    }

    /// Whether a local candidate may be signalled: every one, or only relayed ones under the
    /// relay-only policy (libnice's force-relay keeps others out of its checks, but the peer
    /// must not learn or try our own addresses either).
    public func admitsLocalCandidate(_ line: String) -> Bool {
        guard ice.configuration.transportPolicy == .relay else { return true }
        return (try? ICECandidate(parsing: line))?.type == "relay"
    }

    private var configurationHasNoServers: Bool {
        ice.configuration.stunServer == nil && ice.configuration.turnServers.isEmpty
    }

    /// The first DTLS retransmission timeout (RFC 6347 suggests 1 s, doubling). Our first flight
    /// often leaves as soon as our side of ICE works, before Janus's side has selected the pair and
    /// accepts DTLS, so it is dropped; with 1 s the retransmission added a second to about half of
    /// all joins. Browsers start at a few tens of milliseconds; 100 ms, doubling, costs a handful of
    /// extra datagrams at most.
    static let dtlsInitialRetransmissionTimeout = Duration.milliseconds(100)

    /// Applies the peer's ICE parameters and prepares DTLS in `role` against its fingerprint.
    public func start(remote: RemoteTransportParameters, role: DTLSRole) async throws {
        try await updateRemote(remote)
        let fingerprint = DTLSFingerprint(algorithm: .sha256, digest: remote.fingerprint.digest)
        let dtls = try DTLSTransport(
            certificate: certificate,
            configuration: DTLSTransport.Configuration(
                role: role,
                remoteFingerprint: fingerprint,
                initialRetransmissionTimeout: Self.dtlsInitialRetransmissionTimeout
            ),
            logger: logger,
            send: { [ice] datagram in _ = ice.send(datagram) }
        )
        inner.withLock { $0.dtls = dtls }
        if ice.state == .connected || ice.state == .ready { beginHandshake() }
    }

    /// Restarts ICE with new local credentials (after an outage, or when the path changed),
    /// keeping DTLS and SRTP: the peer learns the new credentials from a renegotiation, and media
    /// resumes on the same keys once a candidate pair works again. Returns the new local parameters.
    public func restartICE() async throws -> LocalTransportParameters {
        let credentials = try await ice.restart()
        inner.withLock { inner in
            inner.remoteUfrag = nil
            if inner.state != .closed { inner.state = .connecting }
        }
        stateSignal.notify()
        stateContinuation.yield(.connecting)
        let candidates = try await ice.currentLocalCandidates().filter(admitsLocalCandidate).compactMap {
            try? ICECandidate(parsing: $0)
        }
        logger.notice("ICE restarted", metadata: ["candidates": "\(candidates.count)"])
        return LocalTransportParameters(
            iceUfrag: credentials.ufrag,
            icePwd: credentials.password,
            fingerprint: SDPFingerprint(digest: certificate.fingerprint.digest),
            candidates: candidates,
            endOfCandidates: !candidates.isEmpty && configurationHasNoServers
        )
    }

    /// Applies the peer's ICE parameters from a renegotiation when they changed (an ICE restart,
    /// ours or the peer's); unchanged parameters are left alone.
    public func updateRemote(_ remote: RemoteTransportParameters) async throws {
        let (changed, known) = inner.withLock { ($0.remoteUfrag != remote.iceUfrag, $0.remoteCandidates) }
        guard changed else { return }
        try await ice.setRemoteCredentials(ICECredentials(ufrag: remote.iceUfrag, password: remote.icePwd))
        let described = remote.candidates.isEmpty ? known : remote.candidates.map(\.trickleString)
        let (lines, heldEnd) = inner.withLock { inner -> ([String], Bool) in
            inner.remoteUfrag = remote.iceUfrag
            let lines = described + inner.heldCandidates.filter { !described.contains($0) }
            let heldEnd = inner.heldEndOfCandidates
            inner.remoteCandidates = lines
            inner.heldCandidates = []
            inner.heldEndOfCandidates = false
            return (lines, heldEnd)
        }
        for line in lines {
            do {
                try await ice.addRemoteCandidate(line)
            } catch {
                logger.debug("skipping remote candidate", metadata: ["error": "\(error)"])
            }
        }
        if remote.endOfCandidates || heldEnd || remote.candidates.isEmpty && !known.isEmpty {
            try await ice.addRemoteEndOfCandidates()
        }
    }

    /// Adds a candidate the peer trickled (`candidate:...`).
    ///
    /// A candidate that arrives before the peer's description (Janus trickles its own right after
    /// sending a subscriber offer, while the answer is still being made) is held until the
    /// credentials are known: libnice checks a pair at once, and a check without the peer's
    /// password fails the pair for good. With host candidates the peer's own check rescued that
    /// pair; through a TURN relay nothing can, since the relay admits the peer's checks only
    /// after ours have created a permission.
    public func addRemoteCandidate(_ line: String) async {
        let ready = inner.withLock { inner -> Bool in
            guard inner.remoteUfrag != nil else {
                inner.heldCandidates.append(line)
                return false
            }
            inner.remoteCandidates.append(line)
            return true
        }
        guard ready else { return }
        do {
            try await ice.addRemoteCandidate(line)
        } catch {
            logger.debug("ignoring remote candidate", metadata: ["candidate": "\(line)", "error": "\(error)"])
        }
    }

    /// The peer has no more candidates (held, like candidates, until its credentials are known).
    public func remoteEndOfCandidates() async {
        let ready = inner.withLock { inner -> Bool in
            if inner.remoteUfrag == nil { inner.heldEndOfCandidates = true }
            return inner.remoteUfrag != nil
        }
        if ready { try? await ice.addRemoteEndOfCandidates() }
    }

    /// Protects and sends one RTP packet (the buffer needs room for the SRTP trailer).
    public func sendRTP(_ packet: [UInt8]) {
        send(packet, rtcp: false)
    }

    /// Protects and sends one RTCP compound packet.
    public func sendRTCP(_ packet: [UInt8]) {
        send(packet, rtcp: true)
    }

    /// The counters so far. The receive counters belong to the ICE loop thread, so reading them
    /// is one hop there and back.
    public var counters: Counters {
        get async {
            let received = await receivePath.run { $0.counters }
            var counters = sendPath.withLock { $0.counters }
            counters.rtpReceived = received.rtpReceived
            counters.rtcpReceived = received.rtcpReceived
            counters.unprotectFailures = received.unprotectFailures
            return counters
        }
    }

    /// The current state.
    public var state: MediaTransportState { inner.withLock { $0.state } }

    /// Waits until SRTP keys are in place, or throws when the transport fails or `limit` passes.
    ///
    /// Wakes on each state change (not on a timer), so a connection is seen the moment it
    /// happens and a long wait costs nothing. It does not read ``states``: that stream has one
    /// reader, which belongs to the caller.
    public func waitUntilConnected(within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let generation = stateSignal.generation
            switch state {
            case .connected: return
            case .failed(let reason): throw MediaTransportError("media transport failed: \(reason)")
            case .closed: throw MediaTransportError("media transport closed")
            default: _ = try await stateSignal.wait(after: generation, until: deadline)
            }
        }
        throw MediaTransportError("media transport not connected within \(limit) (state \(state))")
    }

    /// Closes DTLS (close_notify) and ICE.
    public func close() async {
        let dtls = inner.withLock { inner -> DTLSTransport? in
            inner.state = .closed
            return inner.dtls
        }
        receivePath.execute {
            $0.onRTP = nil
            $0.onRTCP = nil
        }
        dtls?.close()
        for task in timers.withLock({ $0 }) { task.cancel() }
        stateSignal.notify()
        stateContinuation.yield(.closed)
        stateContinuation.finish()
        await ice.close()
    }

    // MARK: Internals

    /// What the send lock's one acquisition found for a packet.
    private enum Protection {
        /// No SRTP keys yet: nothing can be sent.
        case notKeyed
        case failed(SRTPError)
        /// Protected in place and counted as sent.
        case protected
    }

    /// Protects under the send lock (libsrtp's context is not thread-safe), counting the packet
    /// as sent in the same acquisition, and sends outside it; a datagram ICE refuses (no pair
    /// selected yet) is moved to the failures, a second acquisition on that rare path only.
    private func send(_ packet: [UInt8], rtcp: Bool) {
        var buffer = packet
        // Outside the lock: the one allocation, the copy with room for the SRTP trailer.
        buffer.reserveCapacity(packet.count + SRTPContext.trailerCapacity)
        let protection = sendPath.withLock { path -> Protection in
            guard let outbound = path.outbound else { return .notKeyed }
            do throws(SRTPError) {
                if rtcp { try outbound.protectRTCP(&buffer) } else { try outbound.protect(&buffer) }
            } catch {
                path.counters.sendFailures += 1
                return .failed(error)
            }
            if rtcp { path.counters.rtcpSent += 1 } else { path.counters.rtpSent += 1 }
            return .protected
        }
        switch protection {
        case .notKeyed: return
        case .failed(let error):
            logger.debug("SRTP protect failed", metadata: ["error": "\(error)"])
            return
        case .protected: break
        }
        guard !ice.send(buffer) else { return }
        sendPath.withLock { path in
            if rtcp { path.counters.rtcpSent -= 1 } else { path.counters.rtpSent -= 1 }
            path.counters.sendFailures += 1
        }
    }

    private func iceStateChanged(_ state: ICEConnectionState) {
        logger.debug("ICE state", metadata: ["state": "\(state)"])
        switch state {
        case .connecting: setState(.connecting, onlyFrom: [.new])
        case .connected, .ready:
            // After an ICE restart the DTLS session and SRTP keys are still in place.
            let keyed = inner.withLock { $0.keyed && $0.state == .connecting }
            if keyed { setState(.connected, onlyFrom: [.connecting]) } else { beginHandshake() }
        case .failed: setState(.failed(.iceFailed), onlyFrom: nil)
        default: break
        }
    }

    /// Starts DTLS once ICE has a working pair and the remote fingerprint is known.
    private func beginHandshake() {
        let dtls = inner.withLock { inner -> DTLSTransport? in
            guard let dtls = inner.dtls, !inner.handshakeStarted else { return nil }
            inner.handshakeStarted = true
            return dtls
        }
        guard let dtls else { return }
        setState(.handshaking, onlyFrom: [.new, .connecting])
        // As the DTLS server, the peer's ClientHello may already have arrived (its ICE can finish
        // before ours reports it), or arrive on the ICE thread right now, and start the handshake;
        // then there is nothing to start.
        do {
            try dtls.startIfNew()
        } catch {
            setState(.failed(.dtls("\(error)")), onlyFrom: nil)
            return
        }
        scheduleRetransmission(of: dtls)
    }

    /// Drives DTLS retransmissions until the handshake ends: one one-shot timer at a time on the
    /// ICE loop, the thread that handles DTLS records and the jitter buffers' timers too (one timer
    /// system per loop; no Swift concurrency timer and no thread hop per retransmission).
    private func scheduleRetransmission(of dtls: DTLSTransport) {
        guard dtls.state == .handshaking || dtls.state == .new else { return }
        ice.repeatOnLoop(every: dtls.retransmissionTimeout ?? .milliseconds(50)) { [weak self] in
            guard let self, self.state != .closed, dtls.state == .handshaking || dtls.state == .new else {
                return false
            }
            do {
                try dtls.handleTimeout()
            } catch {
                self.setState(.failed(.dtls("\(error)")), onlyFrom: nil)
                return false
            }
            self.scheduleRetransmission(of: dtls)
            return false
        }
    }

    /// One datagram from ICE, on the loop thread.
    private func receive(_ datagram: UnsafeRawBufferPointer) {
        switch MultiplexedPacketKind(classifying: datagram) {
        case .dtls:
            guard let dtls = inner.withLock({ $0.dtls }) else { return }
            do {
                if case .connected(let keys) = try dtls.receive(datagram) { installKeys(keys) }
            } catch {
                setState(.failed(.dtls("\(error)")), onlyFrom: nil)
            }
        case .rtp:
            receiveSRTP(datagram, isRTCP: false)
        case .rtcp:
            receiveSRTP(datagram, isRTCP: true)
        default:
            break
        }
    }

    /// Unprotects one SRTP or SRTCP packet with the loop's own context and counts it, without a
    /// lock; the handler is called after the loop-bound state is released, so that it may post
    /// to or read other loop-bound state.
    private func receiveSRTP(_ datagram: UnsafeRawBufferPointer, isRTCP: Bool) {
        let delivery = receivePath.withValue { path -> ([UInt8], @Sendable ([UInt8]) -> Void)? in
            guard let inbound = path.inbound else { return nil }
            var packet = Array(datagram)
            do throws(SRTPError) {
                // In place: the packet shrinks to the plain RTP or RTCP.
                if isRTCP { try inbound.unprotectRTCP(&packet) } else { try inbound.unprotect(&packet) }
            } catch {
                path.counters.unprotectFailures += 1
                return nil
            }
            if isRTCP { path.counters.rtcpReceived += 1 } else { path.counters.rtpReceived += 1 }
            guard let handler = isRTCP ? path.onRTCP : path.onRTP else { return nil }
            return (packet, handler)
        }
        if let (packet, handler) = delivery { handler(packet) }
    }

    /// Called on the loop thread, where the DTLS record that ended the handshake was handled: the
    /// inbound context stays on the loop, the outbound one goes behind the send lock.
    private func installKeys(_ keys: SRTPKeyingMaterial) {
        guard let profile = SRTPProfile(rawValue: keys.profile.rawValue) else {
            setState(.failed(.unsupportedSRTPProfile("\(keys.profile)")), onlyFrom: nil)
            return
        }
        do throws(SRTPError) {
            let inbound = try SRTPContext(profile: profile, direction: .inbound, keyAndSalt: keys.remoteKeyAndSalt)
            // Made inside the lock it goes behind: a context is not Sendable, so it cannot be
            // handed to the lock from outside.
            try sendPath.withLock { path throws(SRTPError) in
                path.outbound = try SRTPContext(
                    profile: profile,
                    direction: .outbound,
                    keyAndSalt: keys.localKeyAndSalt
                )
            }
            receivePath.withValue { $0.inbound = inbound }
            inner.withLock { $0.keyed = true }
            logger.debug("DTLS-SRTP connected", metadata: ["profile": "\(profile)"])
            setState(.connected, onlyFrom: nil)
        } catch {
            setState(.failed(.srtp("\(error)")), onlyFrom: nil)
        }
    }

    private func setState(_ state: MediaTransportState, onlyFrom allowed: [MediaTransportState]?) {
        let changed = inner.withLock { inner -> Bool in
            if inner.state == .closed { return false }
            if case .failed = inner.state { return false }
            if let allowed, !allowed.contains(inner.state) { return false }
            guard inner.state != state else { return false }
            inner.state = state
            return true
        }
        if changed {
            stateSignal.notify()
            if case .failed(let reason) = state {
                logger.warning("media transport failed", metadata: ["reason": "\(reason)"])
            }
            stateContinuation.yield(state)
        }
    }

    private func track(_ task: Task<Void, Never>) {
        timers.withLock { $0.append(task) }
    }
}

/// A weak reference that can be captured before the object exists (the ICE agent's datagram
/// handler is created before the transport that owns the agent).
final class WeakBox<T: AnyObject & Sendable>: @unchecked Sendable {
    // @unchecked: `value` is set once during init, before any datagram can arrive, and then read only.
    weak var value: T?
}
