internal import CNice
internal import CNiceShims
import Synchronization

/// Owns the `NiceAgent` and the callbacks its C side points to.
///
/// Everything here runs on the agent's loop thread except `send`, which libnice allows from any
/// thread (the agent serializes internally): it reads the agent's address under a lock that
/// `release()` clears first, so a send racing with close fails instead of touching freed memory.
final class NiceAgentHandle: @unchecked Sendable {
    // @unchecked: `agent` and `signalHandlers` are used on the loop thread only (see above).
    let agent: OpaquePointer  // NiceAgent *
    let streamID: guint
    let callbacks: NiceCallbacks
    private let sendableAgent: Mutex<UInt>
    private var signalHandlers: [gulong] = []
    private var released = false

    init(agent: OpaquePointer, streamID: guint, callbacks: NiceCallbacks) {
        self.agent = agent
        self.streamID = streamID
        self.callbacks = callbacks
        self.sendableAgent = Mutex(UInt(bitPattern: agent))
    }

    /// Connects the libnice signals; each connection holds one reference on `callbacks`,
    /// released by GLib when the handler is disconnected.
    func connectSignals() {
        let instance = UnsafeMutableRawPointer(agent)
        func connect(_ signal: String, _ handler: GCallback) {
            let data = Unmanaged.passRetained(callbacks).toOpaque()
            signalHandlers.append(cshim_g_signal_connect(instance, signal, handler, data, releaseCallbacks))
        }
        connect("new-candidate-full", unsafeBitCast(onNewCandidate, to: GCallback.self))
        connect("candidate-gathering-done", unsafeBitCast(onGatheringDone, to: GCallback.self))
        connect("component-state-changed", unsafeBitCast(onComponentStateChanged, to: GCallback.self))
        connect("new-selected-pair-full", unsafeBitCast(onSelectedPair, to: GCallback.self))
    }

    /// Sends one datagram on the selected pair. False when no pair is selected yet or the agent
    /// is closed. Any thread.
    func send(_ datagram: UnsafeRawBufferPointer) -> Bool {
        guard let base = datagram.baseAddress, datagram.count <= Int(guint.max) else { return false }
        let address = UInt(bitPattern: base)
        let count = guint(datagram.count)
        let stream = streamID
        let sent = sendableAgent.withLock { agentAddress -> Int32 in
            guard let agent = OpaquePointer(bitPattern: agentAddress) else { return -1 }
            return nice_agent_send(agent, stream, 1, count, UnsafePointer<CChar>(bitPattern: address))
        }
        return sent == Int32(count)
    }

    /// Frees the agent: stops sends, detaches the receive callback (which holds `callbacks`
    /// unretained), disconnects the signals, removes the stream, drops our reference, and ends
    /// the event streams. Loop thread only; idempotent.
    func release() {
        guard !released else { return }
        released = true
        sendableAgent.withLock { $0 = 0 }
        _ = nice_agent_attach_recv(agent, streamID, 1, nil, nil, nil)
        for handler in signalHandlers { g_signal_handler_disconnect(UnsafeMutableRawPointer(agent), handler) }
        signalHandlers.removeAll()
        nice_agent_remove_stream(agent, streamID)
        g_object_unref(UnsafeMutableRawPointer(agent))
        callbacks.finish()
    }
}
