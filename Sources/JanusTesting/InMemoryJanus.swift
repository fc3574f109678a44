import Dispatch
import JanusClient
import JanusProtocol
import Synchronization

/// A small scripted Janus in memory, behind ``JanusTransport``: the client and the call layer can
/// be tested against it without a Janus process, a socket or a network namespace.
///
/// It answers the core requests (`create`, `attach`, `keepalive`, `claim`, `hangup`, `detach`,
/// `destroy`, `trickle`) and the VideoRoom requests a call makes (`exists`, `create`, `destroy`,
/// `list`, `listparticipants`, `join` as publisher or subscriber, `publish`, `configure`,
/// `subscribe`, `unsubscribe`, `update`, `start`, `pause`, `leave`, `unpublish`) the way Janus does: synchronous ones with `success`, the others with an
/// `ack` and then an `event` with the same transaction. Sessions outlive a dropped connection
/// and can be claimed on the next, as with Janus's `reclaim_session_timeout`.
///
/// ``inject(_:times:)`` makes it misbehave: refuse connections, drop the connection, answer with
/// an error code, send malformed JSON, never answer, hang a handle up. Replies go out on a serial
/// queue, as a real transport's thread would deliver them, never inside the client's `send`.
public final class InMemoryJanus: Sendable {
    /// What a fault reacts to.
    public enum Trigger: Sendable, Hashable {
        /// A core request (`create`, `attach`, `keepalive`, `claim`, ...).
        case request(JanusRequest.Verb)
        /// A VideoRoom request by its `request` field (`join`, `publish`, `exists`, ...).
        case videoRoom(String)
    }

    /// A way to misbehave.
    public enum Fault: Sendable, Hashable {
        /// Connection attempts fail as if nothing listened (`.unreachable`).
        case refuseConnections
        /// The connection drops when the trigger arrives; the request is not answered.
        case dropConnection(on: Trigger)
        /// Answer the trigger with this error: a core `error` for core requests, the plugin's
        /// `error_code` for VideoRoom requests.
        case error(on: Trigger, code: Int, reason: String)
        /// A text that is not JSON goes out before the real answer.
        case malformed(on: Trigger)
        /// The trigger is never answered.
        case silence(on: Trigger)
        /// The handle is hung up (a `hangup` event) instead of answering the trigger.
        case hangup(on: Trigger)
    }

    private struct Handle {
        var session: UInt64
        var plugin: String
        var feed: UInt64?
        var room: UInt64?
    }

    private struct Participant {
        var id: UInt64
        var display: String?
        var publishing: Bool
    }

    private struct State {
        var nextID: UInt64 = 1000
        var sessions: Set<UInt64> = []
        var handles: [UInt64: Handle] = [:]
        var rooms: [UInt64: [Participant]] = [:]
        var faults: [(fault: Fault, remaining: Int?)] = []
        var requests: [String] = []
        var connections: [InMemoryJanusTransport] = []
    }

    /// Janus's `api_secret`: requests without it are refused with 403, as Janus does.
    public let apiSecret: String?
    private let state = Mutex(State())
    let queue = DispatchQueue(label: "conclave.in-memory-janus")

    /// A Janus with `rooms` already created, and `apiSecret` required when given.
    public init(rooms: [UInt64] = [], apiSecret: String? = nil) {
        self.apiSecret = apiSecret
        state.withLock { state in
            for room in rooms { state.rooms[room] = [] }
        }
    }

    /// Makes a new transport to this Janus: pass it as ``JanusConnection/Options/transport``.
    public func makeTransport() -> any JanusTransport {
        InMemoryJanusTransport(janus: self)
    }

    /// Options whose transport leads here (no reconnect unless `reconnect` is given).
    public func options(
        requestTimeout: Duration = .seconds(5),
        reconnect: JanusConnection.ReconnectPolicy? = nil,
        apiSecret: String? = nil
    ) -> JanusConnection.Options {
        JanusConnection.Options(
            apiSecret: apiSecret,
            requestTimeout: requestTimeout,
            reconnect: reconnect,
            transport: { [self] _ in makeTransport() }
        )
    }

    /// Misbehaves as `fault` says, `times` times (nil: until ``clearFaults()``).
    public func inject(_ fault: Fault, times: Int? = 1) {
        state.withLock { $0.faults.append((fault, times)) }
    }

    /// Behaves again.
    public func clearFaults() {
        state.withLock { $0.faults.removeAll() }
    }

    /// The verbs received so far, VideoRoom requests as `message:<request>` (`claim`, `message:join`).
    public var requests: [String] { state.withLock { $0.requests } }

    /// Whether the room exists.
    public func roomExists(_ room: UInt64) -> Bool { state.withLock { $0.rooms[room] != nil } }

    /// Forgets every session, as a restarted Janus would (claims and keepalives then get 458).
    public func forgetSessions() {
        state.withLock { state in
            state.sessions.removeAll()
            state.handles.removeAll()
        }
    }

    /// Drops every open connection, as a network failure would.
    public func dropConnections() {
        let connections = state.withLock { state in
            defer { state.connections.removeAll() }
            return state.connections
        }
        for connection in connections { connection.drop() }
    }

    /// Sends a `hangup` event for `handle` on every open connection.
    public func hangUp(handle: UInt64, reason: String = "Close PC") {
        let (connections, session) = state.withLock { ($0.connections, $0.handles[handle]?.session) }
        guard let session else { return }
        let event: JSONValue = [
            "janus": "hangup", "session_id": .id(session), "sender": .id(handle), "reason": .string(reason),
        ]
        for connection in connections { connection.deliver(event.serialized()) }
    }

    /// Sends Janus's `timeout` event for `session` and forgets it.
    public func expire(session: UInt64) {
        let connections = state.withLock { state in
            state.sessions.remove(session)
            return state.connections
        }
        let event: JSONValue = ["janus": "timeout", "session_id": .id(session)]
        for connection in connections { connection.deliver(event.serialized()) }
    }

    // MARK: Serving

    func connect(_ connection: InMemoryJanusTransport) -> Bool {
        state.withLock { state in
            if take(.refuseConnections, in: &state) { return false }
            state.connections.append(connection)
            return true
        }
    }

    func disconnect(_ connection: InMemoryJanusTransport) {
        state.withLock { $0.connections.removeAll { $0 === connection } }
    }

    /// What to send back for one request text.
    enum Response {
        case replies([String])
        case drop
    }

    func respond(to text: String) -> Response {
        guard let json = try? JSONValue.parse(text), let verbText = json["janus"]?.stringValue,
            let verb = JanusRequest.Verb(rawValue: verbText)
        else {
            return .replies([Self.error(code: JanusError.invalidJSON, reason: "invalid JSON", transaction: nil)])
        }
        let transaction = json["transaction"]?.stringValue
        let request = verb == .message ? json["body"]?["request"]?.stringValue : nil
        return state.withLock { state -> Response in
            state.requests.append(request.map { "message:\($0)" } ?? verb.rawValue)
            let trigger: Trigger = request.map(Trigger.videoRoom) ?? .request(verb)
            var prefix: [String] = []
            if take(.dropConnection(on: trigger), in: &state) { return .drop }
            if take(.silence(on: trigger), in: &state) { return .replies([]) }
            if take(.malformed(on: trigger), in: &state) { prefix.append("{\"janus\": \"success\", oops") }
            if let apiSecret, json["apisecret"]?.stringValue != apiSecret {
                return .replies(
                    prefix + [
                        Self.error(
                            code: JanusError.unauthorized,
                            reason: "Unauthorized request",
                            transaction: transaction
                        )
                    ]
                )
            }
            if request == nil, let (code, reason) = takeError(on: trigger, in: &state) {
                return .replies(prefix + [Self.error(code: code, reason: reason, transaction: transaction)])
            }
            return .replies(prefix + serve(verb, json: json, transaction: transaction, trigger: trigger, in: &state))
        }
    }

    private func serve(
        _ verb: JanusRequest.Verb,
        json: JSONValue,
        transaction: String?,
        trigger: Trigger,
        in state: inout State
    ) -> [String] {
        let session = json["session_id"]?.uint64Value
        let handle = json["handle_id"]?.uint64Value
        func reply(_ kind: String, _ fields: [String: JSONValue] = [:]) -> String {
            var members = fields
            members["janus"] = .string(kind)
            if let transaction { members["transaction"] = .string(transaction) }
            if let session { members["session_id"] = .id(session) }
            return JSONValue.object(members).serialized()
        }
        if verb != .create, verb != .info {
            guard let session, state.sessions.contains(session) else {
                return [
                    Self.error(code: JanusError.sessionNotFound, reason: "No such session", transaction: transaction)
                ]
            }
        }
        if [.message, .trickle, .hangup, .detach].contains(verb) {
            guard let handle, state.handles[handle] != nil else {
                return [Self.error(code: JanusError.handleNotFound, reason: "No such handle", transaction: transaction)]
            }
        }
        switch verb {
        case .info:
            return [reply("server_info", ["name": "in-memory Janus"])]
        case .create:
            state.nextID += 1
            state.sessions.insert(state.nextID)
            return [reply("success", ["data": ["id": .id(state.nextID)]])]
        case .attach:
            state.nextID += 1
            let plugin = json["plugin"]?.stringValue ?? ""
            state.handles[state.nextID] = Handle(session: session!, plugin: plugin)
            return [reply("success", ["data": ["id": .id(state.nextID)]])]
        case .keepalive, .trickle:
            return [reply("ack")]
        case .claim, .hangup:
            return [reply("success")]
        case .detach:
            leave(handle!, in: &state)
            state.handles.removeValue(forKey: handle!)
            return [reply("success")]
        case .destroy:
            for (id, entry) in state.handles where entry.session == session {
                leave(id, in: &state)
                state.handles.removeValue(forKey: id)
            }
            state.sessions.remove(session!)
            return [reply("success")]
        case .message:
            if take(.hangup(on: trigger), in: &state) {
                // Janus's hangup names the handle, not the request: the request stays unanswered.
                let hangup: JSONValue = [
                    "janus": "hangup", "session_id": .id(session!), "sender": .id(handle!), "reason": "Close PC",
                ]
                return [reply("ack"), hangup.serialized()]
            }
            let answer = videoRoom(
                json["body"] ?? [:],
                jsep: json["jsep"],
                handle: handle!,
                trigger: trigger,
                in: &state
            )
            let plugindata: JSONValue = ["plugin": "janus.plugin.videoroom", "data": answer.data]
            var fields: [String: JSONValue] = ["sender": .id(handle!), "plugindata": plugindata]
            if let jsep = answer.jsep { fields["jsep"] = jsep }
            return answer.synchronous ? [reply("success", fields)] : [reply("ack"), reply("event", fields)]
        }
    }

    private struct PluginAnswer {
        var data: JSONValue
        var jsep: JSONValue? = nil
        var synchronous: Bool
    }

    private func videoRoom(
        _ body: JSONValue,
        jsep: JSONValue?,
        handle: UInt64,
        trigger: Trigger,
        in state: inout State
    ) -> PluginAnswer {
        let request = body["request"]?.stringValue ?? ""
        let synchronous = ["exists", "create", "destroy", "list", "listparticipants", "edit"].contains(request)
        if let (code, reason) = takeError(on: trigger, in: &state) {
            return PluginAnswer(data: Self.pluginError(code, reason), synchronous: synchronous)
        }
        let room = body["room"]?.uint64Value
        func missing() -> PluginAnswer {
            PluginAnswer(
                data: Self.pluginError(JanusError.videoRoomNoSuchRoom, "No such room"),
                synchronous: synchronous
            )
        }
        switch request {
        case "exists":
            let data: JSONValue = [
                "videoroom": "success", "room": .id(room ?? 0), "exists": .bool(state.rooms[room ?? 0] != nil),
            ]
            return PluginAnswer(data: data, synchronous: true)
        case "create":
            state.nextID += 1
            let id = room ?? state.nextID
            if state.rooms[id] != nil {
                return PluginAnswer(
                    data: Self.pluginError(JanusError.videoRoomRoomExists, "Room exists"),
                    synchronous: true
                )
            }
            state.rooms[id] = []
            return PluginAnswer(data: ["videoroom": "created", "room": .id(id)], synchronous: true)
        case "destroy":
            guard let room, state.rooms.removeValue(forKey: room) != nil else { return missing() }
            return PluginAnswer(data: ["videoroom": "destroyed", "room": .id(room)], synchronous: true)
        case "list":
            let list = state.rooms.keys.sorted().map { id -> JSONValue in
                [
                    "room": .id(id), "description": .string("Room \(id)"),
                    "num_participants": .int(Int64(state.rooms[id]!.count)),
                ]
            }
            return PluginAnswer(data: ["videoroom": "success", "list": .array(list)], synchronous: true)
        case "listparticipants":
            guard let room, let participants = state.rooms[room] else { return missing() }
            let list = participants.map { participant -> JSONValue in
                var entry: [String: JSONValue] = [
                    "id": .id(participant.id), "publisher": .bool(participant.publishing),
                ]
                if let display = participant.display { entry["display"] = .string(display) }
                return .object(entry)
            }
            return PluginAnswer(
                data: ["videoroom": "participants", "room": .id(room), "participants": .array(list)],
                synchronous: true
            )
        case "join":
            guard let room, state.rooms[room] != nil else { return missing() }
            if body["ptype"]?.stringValue == "subscriber" {
                state.handles[handle]?.room = room
                return PluginAnswer(
                    data: ["videoroom": "attached", "room": .id(room), "streams": []],
                    synchronous: false
                )
            }
            state.nextID += 1
            let feed = body["id"]?.uint64Value ?? state.nextID
            let publishers = state.rooms[room]!.filter(\.publishing).map { participant -> JSONValue in
                var entry: [String: JSONValue] = ["id": .id(participant.id), "streams": []]
                if let display = participant.display { entry["display"] = .string(display) }
                return .object(entry)
            }
            state.rooms[room]!.append(Participant(id: feed, display: body["display"]?.stringValue, publishing: false))
            state.handles[handle]?.feed = feed
            state.handles[handle]?.room = room
            let data: JSONValue = [
                "videoroom": "joined", "room": .id(room), "id": .id(feed), "private_id": .id(feed &* 7),
                "publishers": .array(publishers),
            ]
            return PluginAnswer(data: data, synchronous: false)
        case "publish", "configure":
            if let entry = state.handles[handle], let room = entry.room, let feed = entry.feed {
                if let index = state.rooms[room]?.firstIndex(where: { $0.id == feed }) {
                    state.rooms[room]?[index].publishing = true
                }
            }
            // No media server here: the answer has no SDP a PeerConnection could use.
            let answer: JSONValue? = jsep.map { _ in ["type": "answer", "sdp": "v=0\r\n"] }
            return PluginAnswer(data: ["videoroom": "event", "configured": "ok"], jsep: answer, synchronous: false)
        case "subscribe", "unsubscribe", "update":
            return PluginAnswer(
                data: ["videoroom": "updated", "room": .id(room ?? 0), "streams": []],
                synchronous: false
            )
        case "pause":
            return PluginAnswer(data: ["videoroom": "event", "paused": "ok"], synchronous: false)
        case "start":
            return PluginAnswer(data: ["videoroom": "event", "started": "ok"], synchronous: false)
        case "leave", "unpublish":
            leave(handle, in: &state)
            let key = request == "leave" ? "leaving" : "unpublished"
            return PluginAnswer(data: ["videoroom": "event", .init(stringLiteral: key): "ok"], synchronous: false)
        default:
            return PluginAnswer(
                data: Self.pluginError(JanusError.videoRoomInvalidRequest, "Unknown request '\(request)'"),
                synchronous: synchronous
            )
        }
    }

    private func leave(_ handle: UInt64, in state: inout State) {
        guard let entry = state.handles[handle], let room = entry.room, let feed = entry.feed else { return }
        state.rooms[room]?.removeAll { $0.id == feed }
    }

    /// Takes one use of `fault` if it is armed.
    private func take(_ fault: Fault, in state: inout State) -> Bool {
        guard let index = state.faults.firstIndex(where: { $0.fault == fault }) else { return false }
        if let remaining = state.faults[index].remaining {
            if remaining <= 1 { state.faults.remove(at: index) } else { state.faults[index].remaining = remaining - 1 }
        }
        return true
    }

    private func takeError(on trigger: Trigger, in state: inout State) -> (Int, String)? {
        for entry in state.faults {
            if case .error(trigger, let code, let reason) = entry.fault, take(entry.fault, in: &state) {
                return (code, reason)
            }
        }
        return nil
    }

    private static func error(code: Int, reason: String, transaction: String?) -> String {
        var members: [String: JSONValue] = [
            "janus": "error", "error": ["code": .int(Int64(code)), "reason": .string(reason)],
        ]
        if let transaction { members["transaction"] = .string(transaction) }
        return JSONValue.object(members).serialized()
    }

    private static func pluginError(_ code: Int, _ reason: String) -> JSONValue {
        ["videoroom": "event", "error_code": .int(Int64(code)), "error": .string(reason)]
    }
}

/// One connection to an ``InMemoryJanus``.
final class InMemoryJanusTransport: JanusTransport {
    private let janus: InMemoryJanus
    /// The client's handler while open; nil before and after.
    private let handler = Mutex<(@Sendable (JanusTransportEvent) -> Void)?>(nil)

    init(janus: InMemoryJanus) { self.janus = janus }

    func open(handler: @escaping @Sendable (JanusTransportEvent) -> Void) async throws(JanusClientError) {
        guard janus.connect(self) else {
            throw JanusClientError(.unreachable, "cannot connect to the in-memory Janus: connection refused")
        }
        self.handler.withLock { $0 = handler }
    }

    func send(_ text: String) {
        janus.queue.async { [self] in
            switch janus.respond(to: text) {
            case .replies(let replies):
                let handler = self.handler.withLock { $0 }
                for reply in replies { handler?(.message(reply)) }
            case .drop:
                drop()
            }
        }
    }

    func close() async {
        await withCheckedContinuation { continuation in end(nil) { continuation.resume() } }
    }

    func abort() async {
        await withCheckedContinuation { continuation in end(Self.dropped) { continuation.resume() } }
    }

    /// Ends the connection as a network failure would.
    func drop() {
        end(Self.dropped) {}
    }

    private static let dropped = JanusClientError(
        .connectionClosed,
        "the connection to the in-memory Janus was dropped"
    )

    /// Delivers a server-initiated message, in order with the replies.
    func deliver(_ text: String) {
        janus.queue.async { [self] in
            handler.withLock { $0 }?(.message(text))
        }
    }

    /// Reports the end once, after every reply already queued, then calls `done`.
    private func end(_ error: JanusClientError?, then done: @escaping @Sendable () -> Void) {
        janus.disconnect(self)
        janus.queue.async { [self] in
            let handler = self.handler.withLock { handler in
                defer { handler = nil }
                return handler
            }
            handler?(.closed(error))
            done()
        }
    }
}
