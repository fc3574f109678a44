/// The fields of an SDP candidate attribute (RFC 8839 section 5.1) that decide whether libnice
/// can use it, checked before libnice sees the line so that bad input gives a precise error.
struct ICECandidateLine: Sendable, Hashable {
    var foundation: Substring
    var component: Int
    var transport: Substring
    var priority: UInt32
    var address: Substring
    var port: Int
    var type: Substring

    /// The line as libnice's parser wants it (`a=candidate:...`).
    let normalized: String

    /// Parses `candidate:...` (an `a=` prefix is tolerated).
    init(parsing line: String) throws(ICEError) {
        var text = Substring(line)
        while let last = text.last, last == "\r" || last == "\n" || last == " " { text = text.dropLast() }
        if text.hasPrefix("a=") { text = text.dropFirst(2) }
        guard text.hasPrefix("candidate:") else {
            throw .malformedCandidate(candidate: line, field: "prefix", reason: "does not start with \"candidate:\"")
        }
        let tokens = text.dropFirst("candidate:".count).split(separator: " ", omittingEmptySubsequences: true)
        guard tokens.count >= 8 else {
            throw .malformedCandidate(
                candidate: line,
                field: "fields",
                reason: "\(tokens.count) fields, at least 8 are required"
            )
        }
        let foundation = tokens[0]
        guard (1...32).contains(foundation.count), foundation.allSatisfy(Self.isICEChar) else {
            throw .malformedCandidate(candidate: line, field: "foundation", reason: "1 to 32 ice-chars expected")
        }
        guard let component = Int(tokens[1]), (1...256).contains(component) else {
            throw .malformedCandidate(candidate: line, field: "component-id", reason: "not a number in 1...256")
        }
        let transport = tokens[2]
        guard ["udp", "tcp"].contains(transport.lowercased()) else {
            throw .malformedCandidate(candidate: line, field: "transport", reason: "\"\(transport)\" is not UDP or TCP")
        }
        guard let priority = UInt32(tokens[3]) else {
            throw .malformedCandidate(candidate: line, field: "priority", reason: "not a 32-bit unsigned number")
        }
        let address = tokens[4]
        guard !address.isEmpty else {
            throw .malformedCandidate(candidate: line, field: "connection-address", reason: "empty")
        }
        guard let port = Int(tokens[5]), (0...65_535).contains(port) else {
            throw .malformedCandidate(candidate: line, field: "port", reason: "not a number in 0...65535")
        }
        guard tokens[6] == "typ" else {
            throw .malformedCandidate(candidate: line, field: "typ", reason: "expected \"typ\" as the 7th field")
        }
        let type = tokens[7]
        guard ["host", "srflx", "prflx", "relay"].contains(type) else {
            throw .malformedCandidate(
                candidate: line,
                field: "cand-type",
                reason: "\"\(type)\" is not a candidate type"
            )
        }
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
        self.normalized = "a=" + String(text)
    }

    /// ice-char = ALPHA / DIGIT / "+" / "/" (RFC 8839).
    static func isICEChar(_ character: Character) -> Bool {
        guard character.isASCII, let value = character.asciiValue else { return false }
        return (65...90).contains(value) || (97...122).contains(value) || (48...57).contains(value) || value == 43
            || value == 47
    }
}
