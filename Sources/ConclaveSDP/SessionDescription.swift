/// One `a=` line: a name and an optional value (`a=rtcp-mux` has none), with its source line.
public struct SDPAttribute: Sendable, Hashable {
    /// The attribute name, such as `rtpmap`.
    public var name: String
    /// The text after the first colon, or nil for a flag attribute.
    public var value: String?
    /// The 1-based line number in the parsed text, nil for attributes built in code.
    public var line: Int?

    /// Creates an attribute.
    public init(_ name: String, _ value: String? = nil, line: Int? = nil) {
        self.name = name
        self.value = value
        self.line = line
    }

    /// The attribute as written after `a=`.
    public var text: String { value.map { "\(name):\($0)" } ?? name }

    func error(_ field: String) -> SDPError {
        SDPError(.invalidField(field), line: line, text: "a=\(text)")
    }
}

/// A line this model has no field for (`i=`, `u=`, `e=`, `p=`, `r=`, `z=`, `k=`, or any other
/// letter), kept so that parsing then serializing loses nothing.
public struct SDPOtherLine: Sendable, Hashable {
    /// The line type letter.
    public var type: Character
    /// The text after `=`.
    public var value: String

    /// Creates a line.
    public init(type: Character, value: String) {
        self.type = type
        self.value = value
    }
}

/// `c=` connection data.
public struct SDPConnection: Sendable, Hashable {
    /// `IN`.
    public var networkType: String
    /// `IP4` or `IP6`.
    public var addressType: String
    /// The address.
    public var address: String

    /// Creates connection data.
    public init(networkType: String = "IN", addressType: String = "IP4", address: String = "0.0.0.0") {
        self.networkType = networkType
        self.addressType = addressType
        self.address = address
    }

    var text: String { "\(networkType) \(addressType) \(address)" }
}

/// `o=` origin.
public struct SDPOrigin: Sendable, Hashable {
    /// The user name (`-` in WebRTC).
    public var username: String
    /// The session id (digits; kept as text because browsers use 64-bit values).
    public var sessionID: String
    /// The session version, incremented on each renegotiation.
    public var sessionVersion: UInt64
    /// The connection data of the origin.
    public var connection: SDPConnection

    /// Creates an origin.
    public init(
        username: String = "-",
        sessionID: String,
        sessionVersion: UInt64,
        connection: SDPConnection = SDPConnection(address: "127.0.0.1")
    ) {
        self.username = username
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.connection = connection
    }
}

/// Shared access to the attributes of a session or a media section.
public protocol SDPAttributeContainer {
    /// The `a=` lines in order.
    var attributes: [SDPAttribute] { get set }
}

extension SDPAttributeContainer {
    /// The first attribute called `name`.
    public func attribute(_ name: String) -> SDPAttribute? {
        attributes.first { $0.name == name }
    }

    /// All attributes called `name`, in order.
    public func attributes(named name: String) -> [SDPAttribute] {
        attributes.filter { $0.name == name }
    }

    /// Whether an attribute called `name` is present.
    public func has(_ name: String) -> Bool {
        attributes.contains { $0.name == name }
    }

    /// Appends an attribute.
    public mutating func add(_ name: String, _ value: String? = nil) {
        attributes.append(SDPAttribute(name, value))
    }
}

/// One `m=` section.
public struct MediaDescription: Sendable, Hashable, SDPAttributeContainer {
    /// `audio`, `video`, `application`, ...
    public var type: String
    /// The port; 0 rejects or disables the section.
    public var port: Int
    /// The optional port count after `/`.
    public var portCount: Int?
    /// The transport protocol, such as `UDP/TLS/RTP/SAVPF`.
    public var proto: String
    /// The formats (payload types for RTP).
    public var formats: [String]
    /// `c=` of this section.
    public var connection: SDPConnection?
    /// `b=` lines as written after `b=`.
    public var bandwidths: [String]
    /// Lines without a field of their own.
    public var otherLines: [SDPOtherLine]
    public var attributes: [SDPAttribute]
    /// The line number of the `m=` line when parsed.
    public var line: Int?

    /// Creates a section.
    public init(
        type: String,
        port: Int = 9,
        proto: String = "UDP/TLS/RTP/SAVPF",
        formats: [String],
        connection: SDPConnection? = SDPConnection(),
        attributes: [SDPAttribute] = []
    ) {
        self.type = type
        self.port = port
        self.portCount = nil
        self.proto = proto
        self.formats = formats
        self.connection = connection
        self.bandwidths = []
        self.otherLines = []
        self.attributes = attributes
        self.line = nil
    }

    /// The `m=` line value.
    public var mediaLine: String {
        let p = portCount.map { "\(port)/\($0)" } ?? "\(port)"
        return ([type, p, proto] + formats).joined(separator: " ")
    }

    /// The payload types among `formats` (those that are numbers 0...127).
    public var payloadTypes: [UInt8] {
        formats.compactMap { UInt8($0) }.filter { $0 < 128 }
    }

    func missing(_ name: String) -> SDPError {
        SDPError(.missingAttribute(name), line: line, text: "m=\(mediaLine)")
    }
}

/// A session description (RFC 8866), parsed liberally and serialized canonically.
///
/// Parsing accepts CRLF or LF line ends, keeps attributes and lines it does not know, and checks
/// only the lines it needs to understand (`m=`, `c=`, `o=`); typed attribute accessors check the
/// attribute they read and report its line. Serializing writes CRLF and the RFC's line order.
public struct SessionDescription: Sendable, Hashable, SDPAttributeContainer {
    /// `v=`.
    public var version: Int = 0
    /// `o=`.
    public var origin: SDPOrigin?
    /// `s=`.
    public var sessionName: String = "-"
    /// `t=` as written.
    public var timing: String = "0 0"
    /// Session-level `c=`.
    public var connection: SDPConnection?
    /// Session-level `b=` lines.
    public var bandwidths: [String] = []
    /// Session-level lines without a field of their own.
    public var otherLines: [SDPOtherLine] = []
    public var attributes: [SDPAttribute] = []
    /// The media sections in order.
    public var media: [MediaDescription] = []

    /// Creates an empty description.
    public init(origin: SDPOrigin? = nil) {
        self.origin = origin
    }

    /// Parses SDP text.
    public init(parsing text: String) throws(SDPError) {
        var current: MediaDescription? = nil
        var lineNumber = 0
        // Split on LF bytes: in Swift "\r\n" is one Character, so a Character split would miss it.
        for rawLine in text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            var bytes = rawLine[...]
            if bytes.last == 0x0D { bytes = bytes.dropLast() }
            let line = Substring(String(decoding: bytes, as: UTF8.self))
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            guard let type = line.first, line.dropFirst().first == "=" else {
                throw SDPError(.malformedLine, line: lineNumber, text: String(line))
            }
            let value = String(line.dropFirst(2))
            switch type {
            case "m":
                if let current { media.append(current) }
                current = try Self.parseMediaLine(value, line: lineNumber)
            case "a":
                let attribute: SDPAttribute
                if let colon = value.firstIndex(of: ":") {
                    attribute = SDPAttribute(
                        String(value[..<colon]),
                        String(value[value.index(after: colon)...]),
                        line: lineNumber
                    )
                } else {
                    attribute = SDPAttribute(value, nil, line: lineNumber)
                }
                if current != nil { current!.attributes.append(attribute) } else { attributes.append(attribute) }
            case "c":
                let connection = try Self.parseConnection(value, line: lineNumber)
                if current != nil { current!.connection = connection } else { self.connection = connection }
            case "b":
                if current != nil { current!.bandwidths.append(value) } else { bandwidths.append(value) }
            case "v" where current == nil:
                guard let v = Int(value) else {
                    throw SDPError(.invalidField("version"), line: lineNumber, text: String(line))
                }
                version = v
            case "o" where current == nil:
                origin = try Self.parseOrigin(value, line: lineNumber)
            case "s" where current == nil:
                sessionName = value
            case "t" where current == nil:
                timing = value
            default:
                let other = SDPOtherLine(type: type, value: value)
                if current != nil { current!.otherLines.append(other) } else { otherLines.append(other) }
            }
        }
        if let current { media.append(current) }
    }

    private static func parseMediaLine(_ value: String, line: Int) throws(SDPError) -> MediaDescription {
        let fields = value.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 3 else { throw SDPError(.invalidField("media"), line: line, text: "m=\(value)") }
        let portField = fields[1].split(separator: "/", maxSplits: 1)
        guard let port = portField.first.flatMap({ Int($0) }), (0...65535).contains(port) else {
            throw SDPError(.invalidField("port"), line: line, text: "m=\(value)")
        }
        var section = MediaDescription(
            type: String(fields[0]),
            port: port,
            proto: String(fields[2]),
            formats: fields.dropFirst(3).map(String.init),
            connection: nil
        )
        if portField.count == 2 {
            guard let count = Int(portField[1]) else {
                throw SDPError(.invalidField("port"), line: line, text: "m=\(value)")
            }
            section.portCount = count
        }
        section.line = line
        return section
    }

    private static func parseConnection(_ value: String, line: Int) throws(SDPError) -> SDPConnection {
        let fields = value.split(separator: " ")
        guard fields.count == 3 else { throw SDPError(.invalidField("connection"), line: line, text: "c=\(value)") }
        return SDPConnection(networkType: String(fields[0]), addressType: String(fields[1]), address: String(fields[2]))
    }

    private static func parseOrigin(_ value: String, line: Int) throws(SDPError) -> SDPOrigin {
        let fields = value.split(separator: " ")
        guard fields.count == 6, let version = UInt64(fields[2]) else {
            throw SDPError(.invalidField("origin"), line: line, text: "o=\(value)")
        }
        return SDPOrigin(
            username: String(fields[0]),
            sessionID: String(fields[1]),
            sessionVersion: version,
            connection: SDPConnection(
                networkType: String(fields[3]),
                addressType: String(fields[4]),
                address: String(fields[5])
            )
        )
    }

    /// The SDP text, CRLF-terminated lines in RFC 8866 order.
    public var text: String {
        var out = ""
        func line(_ type: Character, _ value: String) {
            out.append(type)
            out.append("=")
            out.append(value)
            out.append("\r\n")
        }
        line("v", "\(version)")
        let o = origin ?? SDPOrigin(sessionID: "0", sessionVersion: 0)
        line("o", "\(o.username) \(o.sessionID) \(o.sessionVersion) \(o.connection.text)")
        line("s", sessionName)
        for other in otherLines where "iuep".contains(other.type) { line(other.type, other.value) }
        if let connection { line("c", connection.text) }
        for b in bandwidths { line("b", b) }
        line("t", timing)
        for other in otherLines where !"iuep".contains(other.type) { line(other.type, other.value) }
        for a in attributes { line("a", a.text) }
        for m in media {
            line("m", m.mediaLine)
            for other in m.otherLines where other.type == "i" { line(other.type, other.value) }
            if let c = m.connection { line("c", c.text) }
            for b in m.bandwidths { line("b", b) }
            for other in m.otherLines where other.type != "i" { line(other.type, other.value) }
            for a in m.attributes { line("a", a.text) }
        }
        return out
    }

    /// The section whose `a=mid` is `mid`.
    public func media(withMid mid: String) -> MediaDescription? {
        media.first { $0.mid == mid }
    }

    /// The mids of the first `a=group:BUNDLE`, empty if none.
    public var bundleMids: [String] {
        for group in attributes(named: "group") {
            let fields = (group.value ?? "").split(separator: " ").map(String.init)
            if fields.first == "BUNDLE" { return Array(fields.dropFirst()) }
        }
        return []
    }
}
