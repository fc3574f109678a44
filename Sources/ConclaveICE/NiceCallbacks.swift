internal import CNice
import ConclaveCore
import Logging
import Synchronization

/// What libnice's C callbacks reach through their `gpointer`: only Sendable state, because the
/// callbacks run on the loop thread while the owning actor is also reachable from elsewhere.
final class NiceCallbacks: Sendable {
    let logger: Logger
    let candidates: AsyncStream<ICECandidateEvent>.Continuation
    let states: AsyncStream<ICEConnectionState>.Continuation
    let datagrams: AsyncStream<[UInt8]>.Continuation
    /// When set, received datagrams go here, synchronously on the loop thread, instead of to
    /// `datagrams`: the per-packet path without a copy or a task hop.
    let datagramHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)?
    let state = Mutex(ICEConnectionState.disconnected)
    /// The pair libnice selected last, nil before one is.
    let selectedPair = Mutex<ICESelectedPair?>(nil)
    /// Receive batching, if on: datagrams are counted for its rate estimate (on the loop thread,
    /// which owns it), and the selected pair's socket gets its larger receive buffer.
    let receiveBatching: ReceiveBatchingPoll?
    /// Fires on each local candidate, at the end of gathering and on closing: what a wait for
    /// the candidates gathered so far wakes on (`localCandidates` has one reader, the trickle).
    let candidateChanges = ChangeSignal()
    /// When the last datagram arrived, in GLib's monotonic microseconds, `Int64.min` before the
    /// first (written on the loop thread for every datagram: one clock read, one relaxed store;
    /// converted only when a consent is lost).
    let lastInbound = Atomic<Int>(.min)
    /// Whether a lost consent is renewed on the pair in use (loop thread).
    let consent = Mutex(ConsentRenewal())
    /// True while libnice reselects the pair for a renewal: the state changes it signals on the
    /// way (connecting, connected, ready) are not the call's (loop thread).
    let renewingConsent = Atomic<Bool>(false)
    /// Consents renewed so far.
    let consentRenewals = Atomic<Int>(0)
    /// Fires on every state change and every consent renewal.
    let connectivityChanges = ChangeSignal()

    init(
        logger: Logger,
        candidates: AsyncStream<ICECandidateEvent>.Continuation,
        states: AsyncStream<ICEConnectionState>.Continuation,
        datagrams: AsyncStream<[UInt8]>.Continuation,
        datagramHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)?,
        receiveBatching: ReceiveBatchingPoll? = nil
    ) {
        self.receiveBatching = receiveBatching
        self.logger = logger
        self.candidates = candidates
        self.states = states
        self.datagrams = datagrams
        self.datagramHandler = datagramHandler
    }

    func update(_ newState: ICEConnectionState) {
        let changed = state.withLock { current in
            defer { current = newState }
            return current != newState
        }
        if changed {
            logger.debug("ICE state changed", metadata: ["state": "\(newState)"])
            states.yield(newState)
            connectivityChanges.notify()
        }
    }

    /// Notes a datagram from the peer (loop thread).
    func noteInbound() {
        lastInbound.store(g_get_monotonic_time(), ordering: .relaxed)
    }

    func finish() {
        update(.closed)
        candidates.finish()
        candidateChanges.notify()
        states.finish()
        datagrams.finish()
    }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> NiceCallbacks? {
        guard let pointer else { return nil }
        return Unmanaged<NiceCallbacks>.fromOpaque(pointer).takeUnretainedValue()
    }
}

/// Formats a libnice candidate as an SDP candidate value without `a=`.
func candidateLine(agent: OpaquePointer, candidate: UnsafeMutablePointer<NiceCandidate>) -> String? {
    guard let raw = nice_agent_generate_local_candidate_sdp(agent, candidate) else { return nil }
    defer { g_free(raw) }
    let line = String(cString: raw)
    return line.hasPrefix("a=") ? String(line.dropFirst(2)) : line
}

/// "new-candidate-full": `void (NiceAgent *, NiceCandidate *, gpointer user_data)`.
let onNewCandidate: @convention(c) (OpaquePointer?, UnsafeMutablePointer<NiceCandidate>?, gpointer?) -> Void = {
    agent,
    candidate,
    data in
    guard let agent, let candidate, let callbacks = NiceCallbacks.from(data) else { return }
    guard let line = candidateLine(agent: agent, candidate: candidate) else { return }
    callbacks.candidates.yield(.candidate(line))
    callbacks.candidateChanges.notify()
}

/// "candidate-gathering-done": `void (NiceAgent *, guint stream_id, gpointer user_data)`.
let onGatheringDone: @convention(c) (OpaquePointer?, guint, gpointer?) -> Void = { _, _, data in
    guard let callbacks = NiceCallbacks.from(data) else { return }
    callbacks.logger.debug("ICE gathering done")
    callbacks.candidates.yield(.endOfCandidates)
    callbacks.candidateChanges.notify()
}

/// "component-state-changed": `void (NiceAgent *, guint stream_id, guint component_id,
/// guint state, gpointer user_data)`.
let onComponentStateChanged: @convention(c) (OpaquePointer?, guint, guint, guint, gpointer?) -> Void = {
    agent,
    stream,
    component,
    state,
    data in
    guard let callbacks = NiceCallbacks.from(data) else { return }
    if callbacks.renewingConsent.load(ordering: .relaxed) { return }
    if NiceComponentState(rawValue: state) == NICE_COMPONENT_STATE_FAILED, let agent,
        renewConsent(agent: agent, stream: stream, component: component, callbacks: callbacks)
    {
        return
    }
    let mapped: ICEConnectionState =
        switch NiceComponentState(rawValue: state) {
        case NICE_COMPONENT_STATE_GATHERING: .gathering
        case NICE_COMPONENT_STATE_CONNECTING: .connecting
        case NICE_COMPONENT_STATE_CONNECTED: .connected
        case NICE_COMPONENT_STATE_READY: .ready
        case NICE_COMPONENT_STATE_FAILED: .failed
        default: .disconnected
        }
    callbacks.update(mapped)
}

/// A consent lost on an established pair while media from the peer still arrives: reselects the
/// same pair, which grants consent afresh, and returns true when the pair in use is unchanged,
/// so the failure is not the call's (see `ConsentRenewal`). Called from the state signal, which
/// libnice emits with its lock released, so its API may be called here.
func renewConsent(agent: OpaquePointer, stream: guint, component: guint, callbacks: NiceCallbacks) -> Bool {
    let established = callbacks.state.withLock { $0 == .ready || $0 == .connected }
    guard established else { return false }
    var local: UnsafeMutablePointer<NiceCandidate>?
    var remote: UnsafeMutablePointer<NiceCandidate>?
    guard nice_agent_get_selected_pair(agent, stream, component, &local, &remote) != 0, let local, let remote else {
        return false
    }
    let lastInbound = callbacks.lastInbound.load(ordering: .relaxed)
    let decision = callbacks.consent.withLock { consent in
        consent.decide(
            at: .microseconds(g_get_monotonic_time()),
            lastInbound: lastInbound == .min ? nil : .microseconds(lastInbound),
            relayed: local.pointee.type == NICE_CANDIDATE_TYPE_RELAYED
        )
    }
    guard decision == .renew else {
        if case .fail(let refusal) = decision {
            callbacks.logger.debug("ICE consent lost, not renewed", metadata: ["why": "\(refusal)"])
        }
        return false
    }
    var localAddress = local.pointee.addr
    var remoteAddress = remote.pointee.addr
    let lfoundation = foundation(of: local)
    let rfoundation = foundation(of: remote)
    callbacks.renewingConsent.store(true, ordering: .relaxed)
    let selected = nice_agent_set_selected_pair(agent, stream, component, lfoundation, rfoundation) != 0
    callbacks.renewingConsent.store(false, ordering: .relaxed)
    // The pair is found again by its foundations: make sure it is the one that was in use.
    var newLocal: UnsafeMutablePointer<NiceCandidate>?
    var newRemote: UnsafeMutablePointer<NiceCandidate>?
    var same = false
    if selected, nice_agent_get_selected_pair(agent, stream, component, &newLocal, &newRemote) != 0,
        let newLocal, let newRemote
    {
        same =
            nice_address_equal(&localAddress, &newLocal.pointee.addr) != 0
            && nice_address_equal(&remoteAddress, &newRemote.pointee.addr) != 0
    }
    if same {
        callbacks.consentRenewals.add(1, ordering: .relaxed)
        callbacks.connectivityChanges.notify()
        callbacks.logger.notice(
            "ICE consent check unanswered while media still arrives; consent renewed on the same pair"
        )
    } else {
        callbacks.logger.warning(
            "ICE consent could not be renewed on the same pair",
            metadata: ["selected": "\(selected)"]
        )
    }
    return same
}

/// A candidate's foundation, a NUL-terminated array inside libnice's struct (valid while the
/// candidate is: for the duration of the call that uses it).
private func foundation(of candidate: UnsafeMutablePointer<NiceCandidate>) -> String {
    withUnsafeBytes(of: &candidate.pointee.foundation) { bytes in
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}

/// "new-selected-pair-full": `void (NiceAgent *, guint stream_id, guint component_id,
/// NiceCandidate *local, NiceCandidate *remote, gpointer user_data)`. Kept for status, and the
/// moment the socket media will arrive on is known, so its receive buffer is grown here.
let onSelectedPair:
    @convention(c) (
        OpaquePointer?, guint, guint, UnsafeMutablePointer<NiceCandidate>?, UnsafeMutablePointer<NiceCandidate>?,
        gpointer?
    ) -> Void = { agent, stream, component, local, remote, data in
        guard let agent, let local, let remote, let callbacks = NiceCallbacks.from(data) else { return }
        let pair = ICESelectedPair(
            local: candidateLine(agent: agent, candidate: local) ?? "?",
            localType: ICECandidateType(local.pointee.type),
            remote: candidateLine(agent: agent, candidate: remote) ?? "?",
            remoteType: ICECandidateType(remote.pointee.type)
        )
        callbacks.selectedPair.withLock { $0 = pair }
        callbacks.logger.debug("ICE selected pair", metadata: ["local": "\(pair.local)", "remote": "\(pair.remote)"])
        if let batching = callbacks.receiveBatching {
            let bytes = Int32(clamping: batching.settings.receiveBufferBytes)
            let size = growReceiveBuffer(agent: agent, stream: stream, component: component, bytes: bytes) ?? -1
            callbacks.logger.debug("receive buffer", metadata: ["asked": "\(bytes)", "bytes": "\(size)"])
        }
    }

/// `NiceAgentRecvFunc`: `void (NiceAgent *, guint stream_id, guint component_id, guint len,
/// gchar *buf, gpointer user_data)`. Called on the loop thread for every non-STUN datagram.
let onReceive: NiceAgentRecvFunc = { _, _, _, length, buffer, data in
    guard let buffer, let callbacks = NiceCallbacks.from(data) else { return }
    let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(length))
    callbacks.noteInbound()
    callbacks.receiveBatching?.countDatagram()
    if let handler = callbacks.datagramHandler {
        handler(bytes)
    } else {
        callbacks.datagrams.yield(Array(bytes))
    }
}

/// `GClosureNotify`: drops the reference each signal connection holds on the callbacks.
let releaseCallbacks: GClosureNotify = { data, _ in
    guard let data else { return }
    Unmanaged<NiceCallbacks>.fromOpaque(data).release()
}

extension ICECandidateType {
    init(_ type: NiceCandidateType) {
        switch type {
        case NICE_CANDIDATE_TYPE_HOST: self = .host
        case NICE_CANDIDATE_TYPE_SERVER_REFLEXIVE: self = .serverReflexive
        case NICE_CANDIDATE_TYPE_PEER_REFLEXIVE: self = .peerReflexive
        default: self = .relayed
        }
    }
}
