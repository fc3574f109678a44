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
        }
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
    _,
    _,
    _,
    state,
    data in
    guard let callbacks = NiceCallbacks.from(data) else { return }
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
