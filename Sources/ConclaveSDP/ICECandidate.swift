/// An ICE candidate (RFC 8839 section 5.1): the one parser and formatter of `candidate:` lines, for
/// SDP `a=candidate` attributes, Janus trickle messages, the local candidates libnice gathers and
/// the remote ones the ICE agent hands to libnice.
///
/// Parsing checks every field of the grammar that decides whether an agent can use the candidate,
/// so bad input fails here with the field named, before libnice (whose parser only says "no")
/// sees it.
public struct ICECandidate: Sendable, Hashable {
    /// The foundation: 1 to 32 ice-chars.
    public var foundation: String
    /// The component (1 = RTP; with rtcp-mux the only one), 1...256.
    public var component: Int
    /// `udp` or `tcp`, in any case (as written).
    public var transport: String
    /// The priority.
    public var priority: UInt32
    /// The address (IP or mDNS name).
    public var address: String
    /// The port.
    public var port: UInt16
    /// `host`, `srflx`, `prflx` or `relay`.
    public var type: String
    /// `raddr`, if present.
    public var relatedAddress: String?
    /// `rport`, if present.
    public var relatedPort: UInt16?
    /// `tcptype`, if present.
    public var tcpType: String?
    /// Other name/value pairs in order (`generation`, `ufrag`, `network-id`, ...).
    public var extensions: [SDPParameter]

    /// Creates a candidate.
    public init(
        foundation: String,
        component: Int = 1,
        transport: String = "udp",
        priority: UInt32,
        address: String,
        port: UInt16,
        type: String,
        relatedAddress: String? = nil,
        relatedPort: UInt16? = nil,
        tcpType: String? = nil,
        extensions: [SDPParameter] = []
    ) {
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.tcpType = tcpType
        self.extensions = extensions
    }

    /// Why a candidate was refused: the field (named as in RFC 8839's grammar) and what was wrong.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The part of the line that was wrong.
        public enum Field: String, Sendable, Hashable {
            case prefix
            case fields
            case foundation
            case componentID = "component-id"
            case transport
            case priority
            case connectionAddress = "connection-address"
            case port
            case typ
            case candidateType = "cand-type"
            case relatedPort = "rel-port"
            case extensionAttribute = "extension-att"
        }

        /// The text as given.
        public var candidate: String
        /// The part of the line that was wrong.
        public var field: Field
        /// What was wrong with it.
        public var reason: String

        /// Creates an error.
        public init(candidate: String, field: Field, reason: String) {
            self.candidate = candidate
            self.field = field
            self.reason = reason
        }

        public var description: String { "candidate \(field.rawValue): \(reason): \(candidate)" }
    }

    /// Parses an `a=candidate` attribute value, with or without a leading `candidate:` (or
    /// `a=candidate:`).
    public init(parsing text: String) throws(ParseError) {
        try self.init(text, requiringPrefix: false)
    }

    /// Parses a candidate line as trickled or handed to an agent: `candidate:...`, an `a=` prefix
    /// and a trailing line break tolerated.
    public init(parsingLine line: String) throws(ParseError) {
        try self.init(line, requiringPrefix: true)
    }

    private init(_ text: String, requiringPrefix: Bool) throws(ParseError) {
        func bad(_ field: ParseError.Field, _ reason: String) -> ParseError {
            ParseError(candidate: text, field: field, reason: reason)
        }
        var body = Substring(text)
        while let first = body.first, first == " " || first == "\t" { body = body.dropFirst() }
        // `isNewline`, because a CR LF pair is one `Character`.
        while let last = body.last, last.isNewline || last == " " || last == "\t" {
            body = body.dropLast()
        }
        if body.hasPrefix("a=") { body = body.dropFirst(2) }
        if body.hasPrefix("candidate:") {
            body = body.dropFirst("candidate:".count)
        } else if requiringPrefix {
            throw bad(.prefix, "does not start with \"candidate:\"")
        }
        let f = body.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 8 else { throw bad(.fields, "\(f.count) fields, at least 8 are required") }
        guard (1...32).contains(f[0].count), f[0].allSatisfy(Self.isICEChar) else {
            throw bad(.foundation, "1 to 32 ice-chars expected")
        }
        guard let component = Int(f[1]), (1...256).contains(component) else {
            throw bad(.componentID, "not a number in 1...256")
        }
        guard ["udp", "tcp"].contains(f[2].lowercased()) else {
            throw bad(.transport, "\"\(f[2])\" is not UDP or TCP")
        }
        guard let priority = UInt32(f[3]) else { throw bad(.priority, "not a 32-bit unsigned number") }
        guard let port = UInt16(f[5]) else { throw bad(.port, "not a number in 0...65535") }
        guard f[6] == "typ" else { throw bad(.typ, "expected \"typ\" as the 7th field") }
        guard ["host", "srflx", "prflx", "relay"].contains(f[7]) else {
            throw bad(.candidateType, "\"\(f[7])\" is not a candidate type")
        }
        self.init(
            foundation: String(f[0]),
            component: component,
            transport: String(f[2]),
            priority: priority,
            address: String(f[4]),
            port: port,
            type: String(f[7])
        )
        var i = 8
        while i + 1 < f.count {
            let name = String(f[i])
            let value = String(f[i + 1])
            switch name {
            case "raddr": relatedAddress = value
            case "rport":
                guard let p = UInt16(value) else { throw bad(.relatedPort, "not a number in 0...65535") }
                relatedPort = p
            case "tcptype": tcpType = value
            default: extensions.append(SDPParameter(name, value))
            }
            i += 2
        }
        if i < f.count { throw bad(.extensionAttribute, "\"\(f[i])\" has no value") }
    }

    /// ice-char = ALPHA / DIGIT / "+" / "/" (RFC 8839): foundations, and ICE user fragments and
    /// passwords.
    public static func isICEChar(_ character: Character) -> Bool {
        guard let value = character.asciiValue else { return false }
        return (65...90).contains(value) || (97...122).contains(value) || (48...57).contains(value) || value == 43
            || value == 47
    }

    /// The value as written after `a=candidate:` (Janus trickle wants `candidate:` + this).
    public var value: String {
        var s = "\(foundation) \(component) \(transport) \(priority) \(address) \(port) typ \(type)"
        if let relatedAddress { s += " raddr \(relatedAddress)" }
        if let relatedPort { s += " rport \(relatedPort)" }
        if let tcpType { s += " tcptype \(tcpType)" }
        for e in extensions { s += " \(e.name) \(e.value)" }
        return s
    }

    /// `candidate:` + `value`, the form used in trickle messages.
    public var trickleString: String { "candidate:" + value }

    /// `a=candidate:` + `value`, the SDP attribute line (the form libnice's parser takes).
    public var attributeLine: String { "a=candidate:" + value }
}
