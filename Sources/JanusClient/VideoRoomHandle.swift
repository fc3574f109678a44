import JanusProtocol

/// A handle attached to the VideoRoom plugin, with its requests as typed async methods.
///
/// Every method throws ``JanusClientError``; plugin errors (`error_code` in the plugin data) become
/// `.janus` errors whose ``JanusClientError/janusError`` carries the VideoRoom code (426 no such
/// room, 436 id exists, ...).
public struct VideoRoomHandle: Sendable {
    /// The underlying Janus handle (its id, session and event stream).
    public let handle: JanusHandle

    /// Wraps a handle already attached to the VideoRoom plugin.
    public init(_ handle: JanusHandle) { self.handle = handle }

    /// Attaches a new VideoRoom handle on `session`.
    nonisolated(nonsending) public static func attach(to session: JanusSession) async throws -> VideoRoomHandle {
        VideoRoomHandle(try await session.attach(plugin: VideoRoom.plugin))
    }

    /// Events for this handle, classified.
    public var events: AsyncMapSequence<AsyncStream<JanusMessage>, HandleEvent> {
        handle.events.map(HandleEvent.init)
    }

    // MARK: Rooms

    /// Creates a room and returns its id.
    nonisolated(nonsending) public func createRoom(_ options: VideoRoom.RoomOptions) async throws -> UInt64 {
        let (data, _) = try await request(VideoRoom.create(options), name: "create room")
        guard let room = data["room"]?.uint64Value else {
            throw JanusClientError(.unexpectedReply, "VideoRoom create reply has no room id")
        }
        return room
    }

    /// Destroys a room.
    nonisolated(nonsending) public func destroyRoom(_ room: UInt64, secret: String? = nil) async throws {
        _ = try await request(VideoRoom.destroy(room: room, secret: secret), name: "destroy room \(room)")
    }

    /// Whether a room exists.
    nonisolated(nonsending) public func roomExists(_ room: UInt64) async throws -> Bool {
        let (data, _) = try await request(VideoRoom.exists(room: room), name: "exists \(room)")
        return data["exists"]?.boolValue ?? false
    }

    /// The public rooms.
    nonisolated(nonsending) public func listRooms() async throws -> [VideoRoom.Room] {
        let (data, _) = try await request(VideoRoom.list(), name: "list rooms")
        return try VideoRoom.rooms(from: data)
    }

    /// The participants of a room.
    nonisolated(nonsending) public func listParticipants(room: UInt64) async throws -> [VideoRoom.Participant] {
        let (data, _) = try await request(VideoRoom.listParticipants(room: room), name: "list participants of \(room)")
        return try VideoRoom.participants(from: data)
    }

    // MARK: Publisher

    /// Joins `room` as a publisher; returns our feed id and the publishers already there.
    nonisolated(nonsending) public func joinAsPublisher(room: UInt64, id: UInt64? = nil, display: String?) async throws
        -> VideoRoom.Joined
    {
        let (data, _) = try await request(
            VideoRoom.joinPublisher(room: room, id: id, display: display),
            name: "join room \(room)"
        )
        for event in try VideoRoom.events(from: data) {
            if case .joined(let joined) = event { return joined }
        }
        throw JanusClientError(.unexpectedReply, "VideoRoom join reply is not 'joined'")
    }

    /// Publishes with `offer` and returns Janus's answer.
    nonisolated(nonsending) public func publish(
        offer: JSEP,
        audioCodec: String? = nil,
        videoCodec: String? = nil,
        bitrate: Int? = nil
    )
        async throws -> JSEP
    {
        let (_, jsep) = try await request(
            VideoRoom.publish(audioCodec: audioCodec, videoCodec: videoCodec, bitrate: bitrate),
            jsep: offer,
            name: "publish"
        )
        guard let jsep, jsep.type == .answer else {
            throw JanusClientError(.unexpectedReply, "VideoRoom publish reply carries no SDP answer")
        }
        return jsep
    }

    /// Sends a publisher `configure` (optionally with a new offer, e.g. for an ICE restart);
    /// returns the answer when an offer was sent.
    @discardableResult
    nonisolated(nonsending) public func configure(_ body: JSONValue, offer: JSEP? = nil) async throws -> JSEP? {
        let (_, jsep) = try await request(body, jsep: offer, name: "configure")
        return jsep
    }

    /// Stops publishing (stays in the room).
    nonisolated(nonsending) public func unpublish() async throws {
        _ = try await request(VideoRoom.unpublish(), name: "unpublish")
    }

    /// Leaves the room.
    nonisolated(nonsending) public func leave() async throws {
        _ = try await request(VideoRoom.leave(), name: "leave")
    }

    // MARK: Subscriber

    /// Joins `room` as a multistream subscriber of `streams`; returns the stream layout and
    /// Janus's offer.
    nonisolated(nonsending) public func joinAsSubscriber(
        room: UInt64,
        streams: [VideoRoom.StreamSelection],
        privateID: UInt64? = nil
    )
        async throws -> (streams: [VideoRoom.SubscribedStream], offer: JSEP)
    {
        let (data, jsep) = try await request(
            VideoRoom.joinSubscriber(room: room, streams: streams, privateID: privateID),
            name: "subscribe in room \(room)"
        )
        guard let jsep, jsep.type == .offer else {
            throw JanusClientError(.unexpectedReply, "VideoRoom subscriber join reply carries no SDP offer")
        }
        return (Self.streams(in: data), jsep)
    }

    /// Adds streams; returns the new layout and the renegotiation offer, if Janus sent one now.
    nonisolated(nonsending) public func subscribe(_ streams: [VideoRoom.StreamSelection]) async throws
        -> (streams: [VideoRoom.SubscribedStream], offer: JSEP?)
    {
        let (data, jsep) = try await request(VideoRoom.subscribe(streams), name: "subscribe")
        return (Self.streams(in: data), jsep)
    }

    /// Removes streams; returns the new layout and the renegotiation offer, if any.
    nonisolated(nonsending) public func unsubscribe(_ streams: [VideoRoom.StreamSelection]) async throws
        -> (streams: [VideoRoom.SubscribedStream], offer: JSEP?)
    {
        let (data, jsep) = try await request(VideoRoom.unsubscribe(streams), name: "unsubscribe")
        return (Self.streams(in: data), jsep)
    }

    /// Adds and removes streams in one renegotiation.
    nonisolated(nonsending) public func update(
        subscribe: [VideoRoom.StreamSelection],
        unsubscribe: [VideoRoom.StreamSelection]
    )
        async throws -> (streams: [VideoRoom.SubscribedStream], offer: JSEP?)
    {
        let (data, jsep) = try await request(
            VideoRoom.update(subscribe: subscribe, unsubscribe: unsubscribe),
            name: "update subscription"
        )
        return (Self.streams(in: data), jsep)
    }

    /// Answers the subscriber offer; media starts flowing.
    nonisolated(nonsending) public func start(answer: JSEP) async throws {
        _ = try await request(VideoRoom.start(), jsep: answer, name: "start")
    }

    /// Pauses media to this subscriber.
    nonisolated(nonsending) public func pause() async throws {
        _ = try await request(VideoRoom.pause(), name: "pause")
    }

    // MARK: Plumbing

    /// Sends a request and returns its plugin data and JSEP, throwing plugin errors.
    /// `name` is only formed for an error, not for every request.
    nonisolated(nonsending) public func request(
        _ body: JSONValue,
        jsep: JSEP? = nil,
        name: @autoclosure () -> String
    ) async throws -> (JSONValue, JSEP?) {
        let reply = try await handle.message(body, jsep: jsep)
        guard let data = reply.pluginData else {
            throw JanusClientError(.unexpectedReply, "\(name()): Janus's reply has no plugin data")
        }
        if let code = data["error_code"]?.intValue {
            throw JanusClientError.janus(
                JanusError(code: Int(code), reason: data["error"]?.stringValue ?? ""),
                request: name()
            )
        }
        return (data, reply.jsep)
    }

    private static func streams(in data: JSONValue) -> [VideoRoom.SubscribedStream] {
        for event in (try? VideoRoom.events(from: data)) ?? [] {
            switch event {
            case .attached(_, let streams), .updated(_, let streams): return streams
            default: continue
            }
        }
        return []
    }
}
