/// Simulcast in the VideoRoom (Janus 1.1.2): a publisher that sends several encodings of its video
/// (rids `h`/`m`/`l`, or an `a=ssrc-group:SIM`) is forwarded to each subscriber one substream at a
/// time, and the subscriber chooses which per m-line.
///
/// Janus numbers substreams from 0 (the lowest resolution) to 2 (the highest) and VP8 temporal
/// layers from 0 (the base frame rate) to 2 (every frame). It switches only when the wanted
/// substream sends a keyframe (it asks the publisher for one), and then tells the subscriber in an
/// event `{"videoroom":"event","mid":M,"substream":N}` (or `"temporal":N`); the same event answers
/// a `configure` that asks for what is already being received.
extension VideoRoom {
    /// A simulcast substream, in Janus's numbering.
    public enum Substream: Int, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
        case low = 0
        case medium = 1
        case high = 2

        public static func < (lhs: Substream, rhs: Substream) -> Bool { lhs.rawValue < rhs.rawValue }

        /// `low`, `medium` or `high`.
        public var description: String {
            switch self {
            case .low: "low"
            case .medium: "medium"
            case .high: "high"
            }
        }

        /// The substream one step lower, or nil at the lowest.
        public var lower: Substream? { Substream(rawValue: rawValue - 1) }
        /// The substream one step higher, or nil at the highest.
        public var higher: Substream? { Substream(rawValue: rawValue + 1) }
    }

    /// Which layers to receive on one m-line of the subscriber (its own mid, not the publisher's).
    public struct LayerChoice: Sendable, Hashable {
        /// Our mid of the video m-line.
        public var mid: String
        /// The substream wanted, or nil to leave it as it is.
        public var substream: Substream?
        /// The highest temporal layer wanted (0...2), or nil to leave it as it is.
        public var temporal: Int?

        /// Chooses `substream` (and optionally `temporal`) for `mid`.
        public init(mid: String, substream: Substream?, temporal: Int? = nil) {
            self.mid = mid
            self.substream = substream
            self.temporal = temporal.map { min(max($0, 0), 2) }
        }

        var json: JSONValue {
            var members: [String: JSONValue] = ["mid": .string(mid)]
            if let substream { members["substream"] = .int(Int64(substream.rawValue)) }
            if let temporal { members["temporal"] = .int(Int64(temporal)) }
            return .object(members)
        }
    }

    /// `configure` of a multistream subscriber: the substream and temporal layer per m-line.
    /// Janus replies `configured`, and reports each switch later in a ``Event/layerSwitched(mid:substream:temporal:)``.
    public static func configureSubscriber(layers: [LayerChoice]) -> JSONValue {
        ["request": "configure", "streams": .array(layers.map(\.json))]
    }

    /// The simulcast state of one subscribed m-line, as `attached` and `updated` describe it
    /// (`"simulcast":{"substream":0,"substream-target":2,"temporal-layer":0,"temporal-layer-target":2}`);
    /// present only when the publisher sends simulcast.
    public struct SimulcastState: Sendable, Hashable {
        /// The substream being forwarded now, nil before the first packet.
        public var substream: Substream?
        /// The substream asked for.
        public var target: Substream?
        /// The temporal layer being forwarded now.
        public var temporal: Int?
        /// The temporal layer asked for.
        public var temporalTarget: Int?

        /// Creates a state (Janus's is read from the streams of `attached`/`updated`).
        public init(substream: Substream?, target: Substream?, temporal: Int? = nil, temporalTarget: Int? = nil) {
            self.substream = substream
            self.target = target
            self.temporal = temporal
            self.temporalTarget = temporalTarget
        }

        init(json: JSONValue) {
            substream = json["substream"].flatMap(VideoRoom.substreamIndex(of:))
            target = json["substream-target"].flatMap(VideoRoom.substreamIndex(of:))
            temporal = json["temporal-layer"].flatMap(VideoRoom.layer(of:))
            temporalTarget = json["temporal-layer-target"].flatMap(VideoRoom.layer(of:))
        }
    }

    /// Reads a simulcast switch event: `mid` and `substream` and/or `temporal`; nil when `data`
    /// is not one. A switch event whose values are out of Janus's range (0...2) is an error.
    static func layerSwitch(in data: JSONValue) throws(JanusProtocolError) -> Event? {
        let substreamValue = data["substream"]
        let temporalValue = data["temporal"]
        guard substreamValue != nil || temporalValue != nil else { return nil }
        guard let mid = data["mid"]?.stringValue else { throw .missingField("mid", in: "VideoRoom simulcast event") }
        var substream: Substream?
        if let substreamValue {
            guard let value = substreamIndex(of: substreamValue) else {
                throw .missingField("substream", in: "VideoRoom simulcast event")
            }
            substream = value
        }
        var temporal: Int?
        if let temporalValue {
            guard let value = layer(of: temporalValue) else {
                throw .missingField("temporal", in: "VideoRoom simulcast event")
            }
            temporal = value
        }
        return .layerSwitched(mid: mid, substream: substream, temporal: temporal)
    }

    private static func substreamIndex(of value: JSONValue) -> Substream? {
        layer(of: value).flatMap(Substream.init(rawValue:))
    }

    /// A layer index 0...2, or nil for anything else (Janus reports -1 before the first packet).
    private static func layer(of value: JSONValue) -> Int? {
        guard let number = value.intValue, (0...2).contains(number) else { return nil }
        return Int(number)
    }
}
