import Foundation

/// A snapshot shown once a second by `join` and `record`: one JSON line for scripts and
/// services, or a small table redrawn on a terminal.
public protocol StatusReport: Encodable {
    /// The snapshot as a table for a terminal.
    func terminalText() -> String
}

extension StatusReport {
    /// The snapshot as one line of JSON, keys sorted so that lines diff cleanly.
    public func jsonLine() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// `text` cut or padded to a table column of `width` characters.
    func pad(_ text: String, _ width: Int) -> String {
        text.count >= width
            ? String(text.prefix(width - 1)) + " " : text + String(repeating: " ", count: width - text.count)
    }
}
