/// Errors reading Janus messages. Each carries enough of the offending input to find the problem.
public enum JanusProtocolError: Error, Hashable, CustomStringConvertible {
    /// The text is not JSON (the first 200 characters are kept).
    case malformedJSON(String)
    /// A required field is missing or has the wrong type.
    case missingField(String, in: String)
    /// The message's `janus` field names a kind this client does not know.
    case unknownKind(String)

    public var description: String {
        switch self {
        case .malformedJSON(let text): "malformed JSON from Janus: \(text)"
        case .missingField(let field, let context): "Janus \(context) lacks a valid '\(field)' field"
        case .unknownKind(let kind): "unknown Janus message kind '\(kind)'"
        }
    }
}

/// A session description exchanged through Janus (`jsep`).
public struct JSEP: Sendable, Hashable {
    /// `offer` or `answer`.
    public enum Kind: String, Sendable, Hashable { case offer, answer }

    /// Offer or answer.
    public var type: Kind
    /// The SDP text.
    public var sdp: String
    /// Whether the media behind this description is end-to-end encrypted (Janus's `e2ee` flag).
    public var e2ee: Bool
    /// Whether the sender will trickle candidates (false when the SDP already holds them all).
    public var trickle: Bool?

    /// Creates a description.
    public init(type: Kind, sdp: String, e2ee: Bool = false, trickle: Bool? = nil) {
        self.type = type
        self.sdp = sdp
        self.e2ee = e2ee
        self.trickle = trickle
    }

    init?(json: JSONValue?) {
        guard let json, let type = json["type"]?.stringValue.flatMap(Kind.init(rawValue:)),
            let sdp = json["sdp"]?.stringValue
        else { return nil }
        self.init(type: type, sdp: sdp, e2ee: json["e2ee"]?.boolValue ?? false, trickle: json["trickle"]?.boolValue)
    }

    var json: JSONValue {
        var members: [String: JSONValue] = ["type": .string(type.rawValue), "sdp": .string(sdp)]
        if e2ee { members["e2ee"] = true }
        if let trickle { members["trickle"] = .bool(trickle) }
        return .object(members)
    }
}

/// One ICE candidate for Janus's `trickle` request, or the end-of-candidates marker.
public enum TrickleCandidate: Sendable, Hashable {
    /// A candidate line without the `a=` prefix (`candidate:1 1 udp ...`), with its m-line.
    case candidate(String, sdpMid: String, sdpMLineIndex: Int)
    /// No more candidates will follow.
    case completed

    var json: JSONValue {
        switch self {
        case .candidate(let candidate, let mid, let index):
            ["candidate": .string(candidate), "sdpMid": .string(mid), "sdpMLineIndex": .int(Int64(index))]
        case .completed:
            ["completed": true]
        }
    }

    init?(json: JSONValue?) {
        guard let json else { return nil }
        if json["completed"]?.boolValue == true {
            self = .completed
        } else if let candidate = json["candidate"]?.stringValue {
            self = .candidate(
                candidate,
                sdpMid: json["sdpMid"]?.stringValue ?? "",
                sdpMLineIndex: Int(json["sdpMLineIndex"]?.intValue ?? 0)
            )
        } else {
            return nil
        }
    }
}

/// A request to the Janus core (the `janus` field), ready to be sent once a transaction is assigned.
public struct JanusRequest: Sendable, Hashable {
    /// The request verb.
    public enum Verb: String, Sendable, Hashable {
        case info, create, attach, message, trickle, keepalive, claim, hangup, detach, destroy
    }

    /// What is asked.
    public var verb: Verb
    /// The session the request is for (all but `info` and `create`).
    public var sessionID: UInt64?
    /// The handle the request is for (`message`, `trickle`, `hangup`, `detach`).
    public var handleID: UInt64?
    /// Further top-level fields (`plugin`, `body`, `jsep`, `candidate`, ...).
    public var fields: [String: JSONValue]

    /// Creates a request.
    public init(_ verb: Verb, session: UInt64? = nil, handle: UInt64? = nil, fields: [String: JSONValue] = [:]) {
        self.verb = verb
        self.sessionID = session
        self.handleID = handle
        self.fields = fields
    }

    /// `create`: a new session.
    public static func create() -> JanusRequest { JanusRequest(.create) }

    /// `attach`: a handle to `plugin` on `session`.
    public static func attach(session: UInt64, plugin: String, opaqueID: String? = nil) -> JanusRequest {
        var fields: [String: JSONValue] = ["plugin": .string(plugin)]
        if let opaqueID { fields["opaque_id"] = .string(opaqueID) }
        return JanusRequest(.attach, session: session, fields: fields)
    }

    /// `message`: a plugin request with an optional JSEP.
    public static func message(session: UInt64, handle: UInt64, body: JSONValue, jsep: JSEP? = nil)
        -> JanusRequest
    {
        var fields: [String: JSONValue] = ["body": body]
        if let jsep { fields["jsep"] = jsep.json }
        return JanusRequest(.message, session: session, handle: handle, fields: fields)
    }

    /// `trickle`: one candidate (or the end marker).
    public static func trickle(session: UInt64, handle: UInt64, candidate: TrickleCandidate) -> JanusRequest {
        JanusRequest(.trickle, session: session, handle: handle, fields: ["candidate": candidate.json])
    }

    /// `trickle`: several candidates at once.
    public static func trickle(session: UInt64, handle: UInt64, candidates: [TrickleCandidate]) -> JanusRequest {
        JanusRequest(.trickle, session: session, handle: handle, fields: ["candidates": .array(candidates.map(\.json))])
    }

    /// Serializes the request with its transaction and credentials.
    public func json(transaction: String, apiSecret: String? = nil, token: String? = nil) -> JSONValue {
        var members = fields
        members["janus"] = .string(verb.rawValue)
        members["transaction"] = .string(transaction)
        if let sessionID { members["session_id"] = .id(sessionID) }
        if let handleID { members["handle_id"] = .id(handleID) }
        if let apiSecret { members["apisecret"] = .string(apiSecret) }
        if let token { members["token"] = .string(token) }
        return .object(members)
    }
}

/// A message received from Janus, parsed into its routing fields and payload.
public struct JanusMessage: Sendable, Hashable {
    /// The `janus` field.
    public enum Kind: String, Sendable, Hashable {
        case ack, success, error, event, webrtcup, media, slowlink, hangup, detached, trickle, timeout
        case serverInfo = "server_info"
        case keepalive
    }

    /// What kind of message this is.
    public var kind: Kind
    /// The transaction of the request this answers, if any.
    public var transaction: String?
    /// The session it belongs to.
    public var sessionID: UInt64?
    /// The handle it comes from (absent on `ack`, which is routed by transaction).
    public var sender: UInt64?
    /// `data` of a `success` (the new session or handle id lives in `data.id`).
    public var data: JSONValue?
    /// The Janus core error of an `error` message.
    public var error: JanusError?
    /// `plugindata.plugin` of a plugin reply or event.
    public var plugin: String?
    /// `plugindata.data` of a plugin reply or event.
    public var pluginData: JSONValue?
    /// The session description carried by an event.
    public var jsep: JSEP?
    /// The whole message, for fields not modelled here (`media` and `slowlink` details, `reason`).
    public var raw: JSONValue

    /// Parses one text frame from Janus.
    public init(text: some StringProtocol) throws(JanusProtocolError) {
        try self.init(json: JSONValue.parse(text))
    }

    /// Reads a parsed JSON message.
    public init(json: JSONValue) throws(JanusProtocolError) {
        guard case .object = json else { throw .missingField("janus", in: "message (not an object)") }
        guard let kindText = json["janus"]?.stringValue else { throw .missingField("janus", in: "message") }
        guard let kind = Kind(rawValue: kindText) else { throw .unknownKind(kindText) }
        self.kind = kind
        self.raw = json
        self.transaction = json["transaction"]?.stringValue
        self.sessionID = json["session_id"]?.uint64Value
        self.sender = json["sender"]?.uint64Value
        self.data = json["data"]
        self.jsep = JSEP(json: json["jsep"])
        if let plugindata = json["plugindata"] {
            self.plugin = plugindata["plugin"]?.stringValue
            self.pluginData = plugindata["data"]
        }
        if kind == .error {
            guard let error = json["error"], let code = error["code"]?.intValue else {
                throw .missingField("error.code", in: "error message")
            }
            self.error = JanusError(code: Int(code), reason: error["reason"]?.stringValue ?? "")
        }
    }

    /// The id in `data.id` of a `create`, `attach` or `claim` success.
    public var createdID: UInt64? { data?["id"]?.uint64Value }

    /// The reason of a `hangup` or the `media`/`slowlink` details, when present.
    public var reason: String? { raw["reason"]?.stringValue }
}

/// An error reported by Janus: the core's (`error.code`) or a plugin's (`error_code` in plugin data).
public struct JanusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The numeric code, as in Janus's `apierror.h` or the plugin's table.
    public var code: Int
    /// Janus's own explanation.
    public var reason: String

    /// Creates an error.
    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// A short name for the code (`no such session`, `no such room`, ...).
    public var meaning: String { Self.meanings[code] ?? "Janus error" }

    public var description: String {
        reason.isEmpty ? "\(meaning) (Janus \(code))" : "\(meaning) (Janus \(code): \(reason))"
    }

    // Janus core codes (apierror.h).
    public static let unauthorized = 403
    public static let unauthorizedPlugin = 405
    public static let unknown = 490
    public static let transportSpecific = 450
    public static let missingRequest = 452
    public static let unknownRequest = 453
    public static let invalidJSON = 454
    public static let invalidJSONObject = 455
    public static let missingMandatoryElement = 456
    public static let invalidRequestPath = 457
    public static let sessionNotFound = 458
    public static let handleNotFound = 459
    public static let pluginNotFound = 460
    public static let pluginAttach = 461
    public static let pluginMessage = 462
    public static let pluginDetach = 463
    public static let jsepUnknownType = 464
    public static let jsepInvalidSDP = 465
    public static let tricklePending = 466
    public static let invalidElementType = 467
    public static let sessionConflict = 468
    public static let unexpectedAnswer = 469
    public static let tokenNotFound = 470
    public static let webrtcState = 471
    public static let notAcceptingSessions = 472

    // VideoRoom plugin codes (janus_videoroom.c).
    public static let videoRoomUnknown = 499
    public static let videoRoomNoMessage = 421
    public static let videoRoomInvalidJSON = 422
    public static let videoRoomInvalidRequest = 423
    public static let videoRoomJoinFirst = 424
    public static let videoRoomAlreadyJoined = 425
    public static let videoRoomNoSuchRoom = 426
    public static let videoRoomRoomExists = 427
    public static let videoRoomNoSuchFeed = 428
    public static let videoRoomMissingElement = 429
    public static let videoRoomInvalidElement = 430
    public static let videoRoomInvalidSDPType = 431
    public static let videoRoomPublishersFull = 432
    public static let videoRoomUnauthorized = 433
    public static let videoRoomAlreadyPublished = 434
    public static let videoRoomNotPublished = 435
    public static let videoRoomIDExists = 436
    public static let videoRoomInvalidSDP = 437
    public static let videoRoomInvalidFeed = 438

    static let meanings: [Int: String] = [
        403: "unauthorized (wrong or missing API secret or token)",
        405: "unauthorized to use this plugin",
        450: "transport error",
        452: "missing request",
        453: "unknown request",
        454: "invalid JSON",
        455: "invalid JSON object",
        456: "missing mandatory element",
        457: "invalid request path",
        458: "no such session",
        459: "no such handle",
        460: "no such plugin",
        461: "plugin attach error",
        462: "plugin message error",
        463: "plugin detach error",
        464: "unknown JSEP type",
        465: "invalid SDP",
        466: "trickle pending",
        467: "invalid element type",
        468: "session id in use",
        469: "unexpected answer",
        470: "token not found",
        471: "wrong WebRTC state",
        472: "server not accepting new sessions",
        490: "unknown Janus error",
        499: "unknown VideoRoom error",
        421: "no message",
        422: "invalid JSON",
        423: "invalid request",
        424: "join the room first",
        425: "already joined (use a new handle)",
        426: "no such room",
        427: "room already exists",
        428: "no such feed",
        429: "missing element",
        430: "invalid element",
        431: "invalid SDP type",
        432: "room is full",
        433: "unauthorized",
        434: "already publishing",
        435: "not publishing",
        436: "participant id already in the room",
        437: "invalid SDP",
        438: "invalid feed",
    ]
}

/// An asynchronous event for one handle, from a message that answers no pending request.
public enum HandleEvent: Sendable, Hashable {
    /// A plugin event (`plugindata.data`), with the session description it carries, if any.
    case plugin(data: JSONValue, jsep: JSEP?)
    /// The PeerConnection of this handle is up (ICE and DTLS done).
    case webrtcUp
    /// Janus started or stopped receiving media of `type` (`audio`/`video`) on `mid`.
    case media(type: String, mid: String?, receiving: Bool)
    /// Janus sees loss on this PeerConnection (`uplink`: from us to Janus).
    case slowLink(mid: String?, uplink: Bool, lost: Int)
    /// The PeerConnection was closed, with Janus's reason.
    case hangup(reason: String)
    /// The handle is gone.
    case detached
    /// Janus trickled an ICE candidate.
    case trickle(TrickleCandidate)
    /// Anything else, kept whole.
    case other(JanusMessage)

    /// Classifies a message addressed to a handle.
    public init(_ message: JanusMessage) {
        switch message.kind {
        case .event:
            self = .plugin(data: message.pluginData ?? .null, jsep: message.jsep)
        case .webrtcup:
            self = .webrtcUp
        case .media:
            self = .media(
                type: message.raw["type"]?.stringValue ?? "",
                mid: message.raw["mid"]?.stringValue,
                receiving: message.raw["receiving"]?.boolValue ?? false
            )
        case .slowlink:
            self = .slowLink(
                mid: message.raw["mid"]?.stringValue,
                uplink: message.raw["uplink"]?.boolValue ?? false,
                lost: Int(message.raw["lost"]?.intValue ?? 0)
            )
        case .hangup:
            self = .hangup(reason: message.reason ?? "")
        case .detached:
            self = .detached
        case .trickle:
            if let candidate = TrickleCandidate(json: message.raw["candidate"]) {
                self = .trickle(candidate)
            } else {
                self = .other(message)
            }
        default:
            self = .other(message)
        }
    }
}
