import JanusProtocol
import Logging

/// A Janus session: the scope of handles, kept alive by a keepalive every
/// ``JanusConnection/Options/keepaliveInterval`` until ``destroy()``.
public final class JanusSession: Sendable {
    /// What happens to the session as a whole.
    public enum Event: Sendable, Hashable {
        /// The session was claimed on a new WebSocket after a drop; its handles live on.
        case reclaimed
        /// Janus no longer knows the session (expired, destroyed, or Janus restarted): start over.
        case lost(JanusClientError)
    }

    /// Janus's session id.
    public let id: UInt64
    /// The connection the session lives on.
    public let connection: JanusConnection
    /// Session-level events.
    public let events: AsyncStream<Event>

    /// Keepalives are scheduled by the connection's core (one timer for all sessions), from now
    /// until ``destroy()`` or ``stopKeepalive()``.
    init(id: UInt64, connection: JanusConnection, events: AsyncStream<Event>) {
        self.id = id
        self.connection = connection
        self.events = events
    }

    deinit {
        connection.stopKeepalive(id)
    }

    /// Attaches a handle to `plugin` (`janus.plugin.videoroom`).
    nonisolated(nonsending) public func attach(plugin: String, opaqueID: String? = nil) async throws -> JanusHandle {
        let reply = try await connection.send(.attach(session: id, plugin: plugin, opaqueID: opaqueID))
        guard let handleID = reply.createdID else {
            throw JanusClientError(.unexpectedReply, "Janus's reply to attach has no handle id")
        }
        let events = connection.registerHandle(handleID)
        return JanusHandle(id: handleID, session: self, plugin: plugin, events: events)
    }

    /// Sends a keepalive now (the session sends them by itself; this is for checks and tests).
    nonisolated(nonsending) public func sendKeepalive() async throws {
        _ = try await connection.send(JanusRequest(.keepalive, session: id))
    }

    /// Destroys the session on Janus (detaching every handle) and stops its keepalive.
    nonisolated(nonsending) public func destroy() async throws {
        stopKeepalive()
        defer { connection.unregisterSession(id) }
        _ = try await connection.send(JanusRequest(.destroy, session: id))
    }

    /// Stops the keepalive without telling Janus (the session then expires on its own).
    public func stopKeepalive() {
        connection.stopKeepalive(id)
    }
}

/// A handle: one plugin instance (one PeerConnection) within a session.
public final class JanusHandle: Sendable {
    /// Janus's handle id.
    public let id: UInt64
    /// The session the handle belongs to.
    public let session: JanusSession
    /// The plugin it is attached to.
    public let plugin: String
    /// Messages for this handle that answer no request: plugin events, `webrtcup`, `media`,
    /// `slowlink`, `hangup`, `trickle`, `detached`. Read them with ``HandleEvent/init(_:)``.
    public let events: AsyncStream<JanusMessage>

    init(id: UInt64, session: JanusSession, plugin: String, events: AsyncStream<JanusMessage>) {
        self.id = id
        self.session = session
        self.plugin = plugin
        self.events = events
    }

    /// Sends a plugin request and returns Janus's answer (a synchronous `success` or the
    /// asynchronous `event` that follows the `ack`).
    nonisolated(nonsending) public func message(_ body: JSONValue, jsep: JSEP? = nil, timeout: Duration? = nil)
        async throws
        -> JanusMessage
    {
        try await session.connection.send(
            .message(session: session.id, handle: id, body: body, jsep: jsep),
            timeout: timeout
        )
    }

    /// Trickles one local ICE candidate (or the end marker) to Janus.
    nonisolated(nonsending) public func trickle(_ candidate: TrickleCandidate) async throws {
        _ = try await session.connection.send(.trickle(session: session.id, handle: id, candidate: candidate))
    }

    /// Closes the handle's PeerConnection, keeping the handle.
    nonisolated(nonsending) public func hangup() async throws {
        _ = try await session.connection.send(JanusRequest(.hangup, session: session.id, handle: id))
    }

    /// Detaches the handle from its plugin.
    nonisolated(nonsending) public func detach() async throws {
        defer { session.connection.unregisterHandle(id) }
        _ = try await session.connection.send(JanusRequest(.detach, session: session.id, handle: id))
    }
}
