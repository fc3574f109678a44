/// An ICE candidate line (RFC 8839 §5.1), as in `a=candidate:` and Janus trickle messages.
public struct ICECandidate: Sendable, Hashable {
    /// The foundation.
    public var foundation: String
    /// The component (1 = RTP; with rtcp-mux the only one).
    public var component: Int
    /// `udp` or `tcp` (as written).
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

    /// Parses the value, with or without a leading `candidate:` (or `a=candidate:`).
    public init(parsing text: String) throws(SDPError) {
        var body = Substring(text).trimmingSpaces
        if body.hasPrefix("a=") { body = body.dropFirst(2) }
        if body.hasPrefix("candidate:") { body = body.dropFirst("candidate:".count) }
        let f = body.split(separator: " ", omittingEmptySubsequences: true)
        func bad(_ field: String) -> SDPError { SDPError(.invalidField("candidate \(field)"), line: nil, text: text) }
        guard f.count >= 8 else { throw bad("field count") }
        guard let component = Int(f[1]) else { throw bad("component") }
        guard let priority = UInt32(f[3]) else { throw bad("priority") }
        guard let port = UInt16(f[5]) else { throw bad("port") }
        guard f[6] == "typ" else { throw bad("typ") }
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
                guard let p = UInt16(value) else { throw bad("rport") }
                relatedPort = p
            case "tcptype": tcpType = value
            default: extensions.append(SDPParameter(name, value))
            }
            i += 2
        }
        if i < f.count { throw bad("trailing \(f[i])") }
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
}
