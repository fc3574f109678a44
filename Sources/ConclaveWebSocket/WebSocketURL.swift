import Foundation

/// A WebSocket URL split into the parts libwebsockets wants.
public struct WebSocketURL: Sendable, Hashable, CustomStringConvertible {
    /// `wss` (TLS) or `ws`.
    public var isSecure: Bool
    /// Host name or address.
    public var host: String
    /// TCP port (default 80 / 443).
    public var port: Int
    /// Request path, starting with `/`.
    public var path: String

    /// Parses `ws://host[:port][/path]` or `wss://...`. Throws `.invalidURL` for anything else.
    public init(_ text: String) throws(WebSocketError) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "ws" || scheme == "wss",
            let host = url.host, !host.isEmpty
        else {
            throw WebSocketError(.invalidURL, url: text, "'\(text)' is not a ws:// or wss:// URL")
        }
        isSecure = scheme == "wss"
        self.host = host
        port = url.port ?? (isSecure ? 443 : 80)
        let path = url.path.isEmpty ? "/" : url.path
        self.path = url.query.map { "\(path)?\($0)" } ?? path
    }

    public var description: String { "\(isSecure ? "wss" : "ws")://\(host):\(port)\(path)" }
}

/// TLS settings for `wss://` connections.
public struct TLSOptions: Sendable, Hashable {
    /// A PEM file of certificate authorities to trust instead of the system's (a private CA).
    public var caFile: String?

    /// Creates options; by default the server certificate is verified against the system's CAs.
    public init(caFile: String? = nil) { self.caFile = caFile }
}
