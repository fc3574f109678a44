import JanusProtocol

/// Which simulcast layer to receive of a participant's video.
///
/// Only publishers that send simulcast have layers; for the others the choice has no effect
/// (Janus forwards their one stream whatever is asked).
public enum VideoLayer: Sendable, Hashable, CustomStringConvertible {
    /// Always this substream (Janus falls back to a lower one by itself only while the wanted one
    /// sends nothing).
    case fixed(VideoRoom.Substream)
    /// Starts at the highest and follows the receive side (``LayerAdaptation``).
    case auto

    /// Reads `high`, `medium`, `low` or `auto`.
    public init(parsing text: String) throws(LayerSelectionError) {
        switch text.lowercased() {
        case "high": self = .fixed(.high)
        case "medium": self = .fixed(.medium)
        case "low": self = .fixed(.low)
        case "auto": self = .auto
        default: throw LayerSelectionError(text: text, reason: "not a layer: use high, medium, low or auto")
        }
    }

    /// The substream to subscribe with: the fixed one, or the highest for `auto` (it steps down
    /// when the receive side shows it cannot take it).
    public var initialSubstream: VideoRoom.Substream {
        switch self {
        case .fixed(let substream): substream
        case .auto: .high
        }
    }

    public var description: String {
        switch self {
        case .fixed(let substream): substream.description
        case .auto: "auto"
        }
    }
}

/// A `--layer` value that does not parse.
public struct LayerSelectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text given.
    public var text: String
    /// Why it is refused.
    public var reason: String

    public var description: String { "--layer '\(text)': \(reason)" }
}

/// The layer per participant: one for everyone, and exceptions by user id or name.
public struct LayerSelection: Sendable, Hashable {
    /// The layer of participants without an exception.
    public var standard: VideoLayer
    /// Exceptions, keyed by the user id of an ECall display (`42` of `42:Alice`) or by the name.
    public var perParticipant: [String: VideoLayer]

    /// Everyone at `standard`, with `perParticipant` exceptions.
    public init(standard: VideoLayer, perParticipant: [String: VideoLayer] = [:]) {
        self.standard = standard
        self.perParticipant = perParticipant
    }

    /// Reads `--layer` options: `LAYER` sets everyone's layer (the last one given wins), and
    /// `WHO=LAYER` one participant's, WHO being a user id or a name; `standard` applies when no
    /// plain `LAYER` is given.
    public init(parsing options: [String], standard: VideoLayer) throws(LayerSelectionError) {
        self.init(standard: standard)
        for option in options {
            guard let equals = option.lastIndex(of: "=") else {
                self.standard = try VideoLayer(parsing: option)
                continue
            }
            let who = String(option[..<equals])
            guard !who.isEmpty else {
                throw LayerSelectionError(text: option, reason: "no participant before '=': use USERID=LAYER")
            }
            perParticipant[who] = try VideoLayer(parsing: String(option[option.index(after: equals)...]))
        }
    }

    /// The layer for the participant whose VideoRoom display is `display`.
    public func layer(forDisplay display: String?) -> VideoLayer {
        guard let display, !perParticipant.isEmpty else { return standard }
        let parsed = ParticipantDisplay(parsing: display)
        for key in [parsed.userID, parsed.name, display].compactMap({ $0 }) {
            if let layer = perParticipant[key] { return layer }
        }
        return standard
    }
}
