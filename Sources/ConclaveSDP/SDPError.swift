/// Why an SDP could not be parsed or negotiated, with the line and the text that caused it.
public struct SDPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Hashable {
        /// The line is not `<letter>=<value>`.
        case malformedLine
        /// A field of a known line or attribute has the wrong form (names the field).
        case invalidField(String)
        /// A required attribute is absent (names it).
        case missingAttribute(String)
        /// The peer's description does not fit the offer/answer exchange (explains why).
        case negotiation(String)
    }

    /// What was wrong.
    public var reason: Reason
    /// The 1-based line number in the SDP text, or nil when the problem is not tied to a line.
    public var line: Int?
    /// The offending line (or the m-line of the section that lacks something).
    public var text: String

    /// Creates an error.
    public init(_ reason: Reason, line: Int?, text: String) {
        self.reason = reason
        self.line = line
        self.text = text
    }

    public var description: String {
        let location = line.map { "line \($0)" } ?? "SDP"
        return "\(location): \(reason): \(text)"
    }
}
