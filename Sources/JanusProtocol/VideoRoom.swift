/// The Janus VideoRoom plugin API: request bodies and typed replies and events.
///
/// Only what a call client and recorder need is modelled: room management, publishing and the
/// multistream subscriber of Janus 1.x (one subscriber PeerConnection for every feed).
public enum VideoRoom {
    /// The plugin's package name, for `attach`.
    public static let plugin = "janus.plugin.videoroom"

    // MARK: Room management (synchronous requests: the reply is a `success` with plugin data)

    /// Options for `create`.
    public struct RoomOptions: Sendable, Hashable {
        /// The room id, or nil to let Janus choose.
        public var room: UInt64?
        /// A human-readable description.
        public var description: String?
        /// Maximum number of concurrent publishers.
        public var publishers: Int?
        /// Allowed video codecs in order of preference (`vp8`, `h264`).
        public var videoCodecs: [String]
        /// Allowed audio codecs (`opus`).
        public var audioCodecs: [String]
        /// Whether every publisher must mark its media as end-to-end encrypted.
        public var requireE2EE: Bool
        /// Per-publisher bitrate cap, bits per second.
        public var bitrate: Int?
        /// Janus sends a keyframe request to publishers at least this often, seconds.
        public var firFrequency: Int?
        /// Whether the room is hidden from `list`.
        public var isPrivate: Bool
        /// A secret needed to edit or destroy the room.
        public var secret: String?

        /// Creates options; by default a room for 16 publishers with VP8 and H264 and Opus.
        public init(
            room: UInt64? = nil,
            description: String? = nil,
            publishers: Int? = 16,
            videoCodecs: [String] = ["vp8", "h264"],
            audioCodecs: [String] = ["opus"],
            requireE2EE: Bool = false,
            bitrate: Int? = nil,
            firFrequency: Int? = 10,
            isPrivate: Bool = false,
            secret: String? = nil
        ) {
            self.room = room
            self.description = description
            self.publishers = publishers
            self.videoCodecs = videoCodecs
            self.audioCodecs = audioCodecs
            self.requireE2EE = requireE2EE
            self.bitrate = bitrate
            self.firFrequency = firFrequency
            self.isPrivate = isPrivate
            self.secret = secret
        }
    }

    /// `create`: a new room.
    public static func create(_ options: RoomOptions) -> JSONValue {
        var body: [String: JSONValue] = ["request": "create", "permanent": false]
        if let room = options.room { body["room"] = .id(room) }
        if let description = options.description { body["description"] = .string(description) }
        if let publishers = options.publishers { body["publishers"] = .int(Int64(publishers)) }
        if !options.videoCodecs.isEmpty { body["videocodec"] = .string(options.videoCodecs.joined(separator: ",")) }
        if !options.audioCodecs.isEmpty { body["audiocodec"] = .string(options.audioCodecs.joined(separator: ",")) }
        if options.requireE2EE { body["require_e2ee"] = true }
        if let bitrate = options.bitrate { body["bitrate"] = .int(Int64(bitrate)) }
        if let fir = options.firFrequency { body["fir_freq"] = .int(Int64(fir)) }
        if options.isPrivate { body["is_private"] = true }
        if let secret = options.secret { body["secret"] = .string(secret) }
        return .object(body)
    }

    /// `destroy`: removes a room (everyone in it is kicked).
    public static func destroy(room: UInt64, secret: String? = nil) -> JSONValue {
        var body: [String: JSONValue] = ["request": "destroy", "room": .id(room), "permanent": false]
        if let secret { body["secret"] = .string(secret) }
        return .object(body)
    }

    /// `exists`: whether a room exists.
    public static func exists(room: UInt64) -> JSONValue { ["request": "exists", "room": .id(room)] }

    /// `list`: the public rooms.
    public static func list() -> JSONValue { ["request": "list"] }

    /// `listparticipants`: who is in a room.
    public static func listParticipants(room: UInt64) -> JSONValue {
        ["request": "listparticipants", "room": .id(room)]
    }

    // MARK: Publisher (asynchronous requests: `ack`, then an `event`)

    /// `join` as publisher. `display` follows ECall's `"<userId>:<name>"` convention when a user id
    /// is known (see ``ParticipantDisplay``).
    public static func joinPublisher(room: UInt64, id: UInt64? = nil, display: String?, token: String? = nil)
        -> JSONValue
    {
        var body: [String: JSONValue] = ["request": "join", "ptype": "publisher", "room": .id(room)]
        if let id { body["id"] = .id(id) }
        if let display { body["display"] = .string(display) }
        if let token { body["token"] = .string(token) }
        return .object(body)
    }

    /// `publish` (sent with the JSEP offer): start sending media.
    public static func publish(audioCodec: String? = nil, videoCodec: String? = nil, bitrate: Int? = nil)
        -> JSONValue
    {
        var body: [String: JSONValue] = ["request": "publish"]
        if let audioCodec { body["audiocodec"] = .string(audioCodec) }
        if let videoCodec { body["videocodec"] = .string(videoCodec) }
        if let bitrate { body["bitrate"] = .int(Int64(bitrate)) }
        return .object(body)
    }

    /// `configure` of a publisher: bitrate, keyframe request, or renegotiation with a new offer.
    public static func configure(
        audio: Bool? = nil,
        video: Bool? = nil,
        bitrate: Int? = nil,
        keyframe: Bool = false,
        videoCodec: String? = nil
    ) -> JSONValue {
        var body: [String: JSONValue] = ["request": "configure"]
        if let audio { body["audio"] = .bool(audio) }
        if let video { body["video"] = .bool(video) }
        if let bitrate { body["bitrate"] = .int(Int64(bitrate)) }
        if keyframe { body["keyframe"] = true }
        if let videoCodec { body["videocodec"] = .string(videoCodec) }
        return .object(body)
    }

    /// `unpublish`: stop sending media but stay in the room.
    public static func unpublish() -> JSONValue { ["request": "unpublish"] }

    /// `leave`: leave the room.
    public static func leave() -> JSONValue { ["request": "leave"] }

    // MARK: Multistream subscriber

    /// One stream to subscribe to: a publisher's feed, optionally a single one of its m-lines.
    public struct StreamSelection: Sendable, Hashable {
        /// The publisher's feed id.
        public var feed: UInt64
        /// The publisher's mid, or nil for all of the feed's streams.
        public var mid: String?
        /// The simulcast substream to start with (video only; Janus's default is the highest).
        public var substream: Substream?

        /// Selects `feed` (all its streams, or only `mid`), starting at `substream` if it simulcasts.
        public init(feed: UInt64, mid: String? = nil, substream: Substream? = nil) {
            self.feed = feed
            self.mid = mid
            self.substream = substream
        }

        var json: JSONValue {
            var members: [String: JSONValue] = ["feed": .id(feed)]
            if let mid { members["mid"] = .string(mid) }
            if let substream { members["substream"] = .int(Int64(substream.rawValue)) }
            return .object(members)
        }
    }

    /// `join` as subscriber: Janus answers `attached` with an offer for all the selected streams.
    public static func joinSubscriber(room: UInt64, streams: [StreamSelection], privateID: UInt64? = nil)
        -> JSONValue
    {
        var body: [String: JSONValue] = [
            "request": "join", "ptype": "subscriber", "room": .id(room), "use_msid": true,
            "streams": .array(streams.map(\.json)),
        ]
        if let privateID { body["private_id"] = .id(privateID) }
        return .object(body)
    }

    /// `subscribe`: add streams to the subscription (Janus sends an `updated` offer).
    public static func subscribe(_ streams: [StreamSelection]) -> JSONValue {
        ["request": "subscribe", "streams": .array(streams.map(\.json))]
    }

    /// `unsubscribe`: remove streams from the subscription.
    public static func unsubscribe(_ streams: [StreamSelection]) -> JSONValue {
        ["request": "unsubscribe", "streams": .array(streams.map(\.json))]
    }

    /// `update`: add and remove streams in one renegotiation.
    public static func update(subscribe: [StreamSelection], unsubscribe: [StreamSelection]) -> JSONValue {
        [
            "request": "update", "subscribe": .array(subscribe.map(\.json)),
            "unsubscribe": .array(unsubscribe.map(\.json)),
        ]
    }

    /// `start` (sent with the JSEP answer): media starts flowing to the subscriber.
    public static func start() -> JSONValue { ["request": "start"] }

    /// `pause`: stop media to the subscriber without tearing the PeerConnection down.
    public static func pause() -> JSONValue { ["request": "pause"] }

    /// `configure` of a subscriber with `restart: true`: Janus sends an ICE-restart offer.
    public static func restartSubscriberICE() -> JSONValue { ["request": "configure", "restart": true] }
}

// MARK: - Replies and events

extension VideoRoom {
    /// A room as `list` reports it.
    public struct Room: Sendable, Hashable {
        public var id: UInt64
        public var description: String
        public var participantCount: Int
        public var maxPublishers: Int
        public var videoCodecs: [String]
        public var audioCodecs: [String]
        public var requiresE2EE: Bool

        init(json: JSONValue) throws(JanusProtocolError) {
            guard let id = json["room"]?.uint64Value else { throw .missingField("room", in: "VideoRoom list entry") }
            self.id = id
            description = json["description"]?.stringValue ?? ""
            participantCount = Int(json["num_participants"]?.intValue ?? 0)
            maxPublishers = Int(json["max_publishers"]?.intValue ?? 0)
            videoCodecs = json["videocodec"]?.stringValue?.split(separator: ",").map(String.init) ?? []
            audioCodecs = json["audiocodec"]?.stringValue?.split(separator: ",").map(String.init) ?? []
            requiresE2EE = json["require_e2ee"]?.boolValue ?? false
        }
    }

    /// A participant as `listparticipants` reports it.
    public struct Participant: Sendable, Hashable {
        public var id: UInt64
        public var display: String?
        public var isPublisher: Bool
        public var isTalking: Bool?

        init(json: JSONValue) throws(JanusProtocolError) {
            guard let id = json["id"]?.uint64Value else { throw .missingField("id", in: "VideoRoom participant") }
            self.id = id
            display = json["display"]?.stringValue
            isPublisher = json["publisher"]?.boolValue ?? false
            isTalking = json["talking"]?.boolValue
        }
    }

    /// One m-line of a publisher, as announced in `joined` and `publishers` events.
    public struct PublishedStream: Sendable, Hashable {
        public var type: String
        public var mindex: Int
        public var mid: String
        public var codec: String?
        public var isDisabled: Bool

        init(json: JSONValue) {
            type = json["type"]?.stringValue ?? ""
            mindex = Int(json["mindex"]?.intValue ?? 0)
            mid = json["mid"]?.stringValue ?? ""
            codec = json["codec"]?.stringValue
            isDisabled = json["disabled"]?.boolValue ?? false
        }
    }

    /// A publisher in the room.
    public struct Publisher: Sendable, Hashable {
        public var id: UInt64
        public var display: String?
        public var streams: [PublishedStream]

        init(json: JSONValue) throws(JanusProtocolError) {
            guard let id = json["id"]?.uint64Value else { throw .missingField("id", in: "VideoRoom publisher") }
            self.id = id
            display = json["display"]?.stringValue
            streams = json["streams"]?.arrayValue?.map(PublishedStream.init(json:)) ?? []
        }
    }

    /// One m-line of the subscriber PeerConnection, as `attached` and `updated` describe it.
    public struct SubscribedStream: Sendable, Hashable {
        public var mindex: Int
        public var mid: String
        public var type: String
        public var isActive: Bool
        public var feedID: UInt64?
        public var feedMid: String?
        public var feedDisplay: String?
        public var codec: String?
        /// The simulcast state, when the publisher sends simulcast on this m-line.
        public var simulcast: SimulcastState?

        init(json: JSONValue) {
            mindex = Int(json["mindex"]?.intValue ?? 0)
            mid = json["mid"]?.stringValue ?? ""
            type = json["type"]?.stringValue ?? ""
            isActive = json["active"]?.boolValue ?? true
            feedID = json["feed_id"]?.uint64Value
            feedMid = json["feed_mid"]?.stringValue
            feedDisplay = json["feed_display"]?.stringValue
            codec = json["codec"]?.stringValue
            simulcast = json["simulcast"].map(SimulcastState.init(json:))
        }
    }

    /// What `join` as publisher returns.
    public struct Joined: Sendable, Hashable {
        public var room: UInt64
        public var id: UInt64
        public var privateID: UInt64?
        public var publishers: [Publisher]

        /// Creates the value (Janus's reply is read with ``VideoRoom/events(from:)``).
        public init(room: UInt64, id: UInt64, privateID: UInt64?, publishers: [Publisher]) {
            self.room = room
            self.id = id
            self.privateID = privateID
            self.publishers = publishers
        }
    }

    /// Something that happened in the room, from a plugin reply or event.
    public enum Event: Sendable, Hashable {
        /// This handle joined as publisher.
        case joined(Joined)
        /// New publishers (or new streams of existing ones).
        case publishers([Publisher])
        /// A publisher stopped publishing (`nil`: this handle did).
        case unpublished(UInt64?)
        /// A participant left (`nil`: this handle did).
        case leaving(UInt64?)
        /// This publisher's `publish`/`configure` was applied.
        case configured
        /// The subscriber was created; its offer is in the message's JSEP.
        case attached(room: UInt64, streams: [SubscribedStream])
        /// The subscription changed; a new offer is in the message's JSEP (if renegotiation is needed).
        case updated(room: UInt64, streams: [SubscribedStream])
        /// Janus postponed an update until the current negotiation completes.
        case updating
        /// The subscriber's `start` was applied.
        case started
        /// The subscriber's `pause` was applied.
        case paused
        /// A publisher started or stopped talking (audio level detection).
        case talking(feed: UInt64, isTalking: Bool)
        /// Janus now forwards another simulcast substream or temporal layer on the subscriber's
        /// m-line `mid` (at a keyframe), or confirms the one asked for is already forwarded.
        case layerSwitched(mid: String, substream: Substream?, temporal: Int?)
        /// The room was destroyed.
        case destroyed(room: UInt64)
        /// A plugin error (`error_code`, `error`).
        case error(JanusError)
        /// A plugin event this client does not model, kept whole.
        case other(JSONValue)
    }

    /// Reads every event carried by a VideoRoom plugin payload (one payload can carry several, e.g.
    /// `publishers` and `leaving` in the same event).
    public static func events(from data: JSONValue) throws(JanusProtocolError) -> [Event] {
        if let code = data["error_code"]?.intValue {
            return [.error(JanusError(code: Int(code), reason: data["error"]?.stringValue ?? ""))]
        }
        let kind = data["videoroom"]?.stringValue ?? ""
        let room = data["room"]?.uint64Value ?? 0
        switch kind {
        case "joined":
            guard let id = data["id"]?.uint64Value else { throw .missingField("id", in: "VideoRoom joined") }
            return [
                .joined(
                    Joined(
                        room: room,
                        id: id,
                        privateID: data["private_id"]?.uint64Value,
                        publishers: try publishers(in: data)
                    )
                )
            ]
        case "attached":
            return [.attached(room: room, streams: subscribedStreams(in: data))]
        case "updated":
            return [.updated(room: room, streams: subscribedStreams(in: data))]
        case "updating":
            return [.updating]
        case "destroyed":
            return [.destroyed(room: room)]
        case "talking", "stopped-talking":
            guard let feed = data["id"]?.uint64Value else { throw .missingField("id", in: "VideoRoom talking") }
            return [.talking(feed: feed, isTalking: kind == "talking")]
        case "event":
            var events: [Event] = []
            if data["publishers"] != nil { events.append(.publishers(try publishers(in: data))) }
            if let value = data["unpublished"] {
                events.append(.unpublished(value.stringValue == "ok" ? nil : value.uint64Value))
            }
            if let value = data["leaving"] {
                events.append(.leaving(value.stringValue == "ok" ? nil : value.uint64Value))
            }
            if data["configured"]?.stringValue == "ok" { events.append(.configured) }
            if data["started"]?.stringValue == "ok" { events.append(.started) }
            if data["paused"]?.stringValue == "ok" { events.append(.paused) }
            if let layerSwitch = try layerSwitch(in: data) { events.append(layerSwitch) }
            return events.isEmpty ? [.other(data)] : events
        default:
            return [.other(data)]
        }
    }

    /// Reads the rooms of a `list` reply.
    public static func rooms(from data: JSONValue) throws(JanusProtocolError) -> [Room] {
        guard let list = data["list"]?.arrayValue else { throw .missingField("list", in: "VideoRoom list reply") }
        var rooms: [Room] = []
        for entry in list { rooms.append(try Room(json: entry)) }
        return rooms
    }

    /// Reads the participants of a `listparticipants` reply.
    public static func participants(from data: JSONValue) throws(JanusProtocolError) -> [Participant] {
        guard let list = data["participants"]?.arrayValue else {
            throw .missingField("participants", in: "VideoRoom listparticipants reply")
        }
        var participants: [Participant] = []
        for entry in list { participants.append(try Participant(json: entry)) }
        return participants
    }

    private static func publishers(in data: JSONValue) throws(JanusProtocolError) -> [Publisher] {
        var result: [Publisher] = []
        for entry in data["publishers"]?.arrayValue ?? [] { result.append(try Publisher(json: entry)) }
        return result
    }

    private static func subscribedStreams(in data: JSONValue) -> [SubscribedStream] {
        data["streams"]?.arrayValue?.map(SubscribedStream.init(json:)) ?? []
    }
}

/// A VideoRoom display name in ECall's `"<userId>:<name>"` convention.
///
/// ECall clients map feeds to users by the text before the first `:`; Conclave uses the same
/// convention so that a participant who rejoins (new feed id) is recognised as the same person.
public struct ParticipantDisplay: Sendable, Hashable, CustomStringConvertible {
    /// The user id, when the display follows the convention.
    public var userID: String?
    /// The human-readable name.
    public var name: String

    /// Creates a display from its parts.
    public init(userID: String?, name: String) {
        self.userID = userID
        self.name = name
    }

    /// Parses a display: `"42:Alice"` has user id `42` and name `Alice`; a display without a
    /// non-empty prefix before `:` is a plain name.
    public init(parsing display: String) {
        if let colon = display.firstIndex(of: ":"), colon != display.startIndex {
            userID = String(display[..<colon])
            name = String(display[display.index(after: colon)...])
        } else {
            userID = nil
            name = display
        }
    }

    /// The wire form.
    public var description: String { userID.map { "\($0):\(name)" } ?? name }

    /// The display of this participant's screen share, which is published as a feed of its own
    /// beside the camera: `"42:Alice"` shares as `"42-screen:Alice (screen)"`.
    ///
    /// Why another user id: receivers map feeds to participants by the user id (a recorder
    /// continues a participant's tracks when a feed with the same id returns), so the screen must
    /// not look like the camera's feed coming back. ECall clients, which map feeds to users by a
    /// numeric id, do not take it for the user's device either: keys are never sent to it.
    public var screenShare: ParticipantDisplay {
        ParticipantDisplay(userID: userID.map { $0 + Self.screenShareSuffix }, name: "\(name) (screen)")
    }

    private static let screenShareSuffix = "-screen"
}
