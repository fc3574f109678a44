internal import COpenSSL

/// The OpenSSL error queue of the current thread, drained into a value when an operation fails,
/// so that the reason (for example "sslv3 alert bad certificate") reaches the caller and the log.
public struct OpenSSLErrorStack: Sendable, Hashable, CustomStringConvertible {
    /// Each entry as formatted by `ERR_error_string_n`, oldest first.
    public let entries: [String]

    public init(entries: [String]) { self.entries = entries }

    /// Empties the calling thread's queue into a value.
    static func drain() -> OpenSSLErrorStack {
        var entries: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            entries.append(String(decoding: bytes, as: UTF8.self))
        }
        return OpenSSLErrorStack(entries: entries)
    }

    public var description: String { entries.isEmpty ? "no OpenSSL error recorded" : entries.joined(separator: "; ") }
}
