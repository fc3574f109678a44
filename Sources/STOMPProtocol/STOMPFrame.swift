/// A STOMP 1.2 command: the first line of a frame.
public enum STOMPCommand: String, Sendable, Hashable, CaseIterable {
    // Client frames.
    case connect = "CONNECT"
    case stomp = "STOMP"
    case send = "SEND"
    case subscribe = "SUBSCRIBE"
    case unsubscribe = "UNSUBSCRIBE"
    case ack = "ACK"
    case nack = "NACK"
    case begin = "BEGIN"
    case commit = "COMMIT"
    case abort = "ABORT"
    case disconnect = "DISCONNECT"
    // Server frames.
    case connected = "CONNECTED"
    case message = "MESSAGE"
    case receipt = "RECEIPT"
    case error = "ERROR"

    /// CONNECT, STOMP and CONNECTED carry their headers unescaped: they are exchanged before the
    /// version (and so the escaping rules) is agreed.
    public var escapesHeaders: Bool { self != .connect && self != .connected && self != .stomp }
}

/// One header line, kept in the order it was written (STOMP allows repeats; the first one counts).
public struct STOMPHeader: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// One STOMP frame: a command, ordered headers and a body of bytes.
public struct STOMPFrame: Sendable, Hashable {
    public var command: STOMPCommand
    public var headers: [STOMPHeader]
    public var body: [UInt8]

    public init(_ command: STOMPCommand, headers: [STOMPHeader] = [], body: [UInt8] = []) {
        self.command = command
        self.headers = headers
        self.body = body
    }

    /// A frame whose body is UTF-8 text.
    public init(_ command: STOMPCommand, headers: [STOMPHeader] = [], text: String) {
        self.init(command, headers: headers, body: Array(text.utf8))
    }

    /// The value of the first header called `name` (STOMP 1.2: a repeated header's first entry wins).
    public subscript(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// The body read as UTF-8 (invalid sequences replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The frame's bytes, NUL included. Header names and values are escaped except for CONNECT and
    /// CONNECTED; a `content-length` header is added when the body holds a NUL (the reader would
    /// otherwise stop there) and none was given.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(command.rawValue.utf8.count + 64 * headers.count + body.count + 24)
        out.append(contentsOf: command.rawValue.utf8)
        out.append(STOMPByte.lineFeed)
        let escape = command.escapesHeaders
        for header in headers {
            Self.append(header.name, escaped: escape, to: &out)
            out.append(STOMPByte.colon)
            Self.append(header.value, escaped: escape, to: &out)
            out.append(STOMPByte.lineFeed)
        }
        if body.contains(0), !headers.contains(where: { $0.name == "content-length" }) {
            out.append(contentsOf: "content-length:\(body.count)\n".utf8)
        }
        out.append(STOMPByte.lineFeed)
        out.append(contentsOf: body)
        out.append(0)
        return out
    }

    /// The frame as one WebSocket text message.
    public var text: String { String(decoding: encoded(), as: UTF8.self) }

    private static func append(_ text: String, escaped: Bool, to out: inout [UInt8]) {
        guard escaped else {
            out.append(contentsOf: text.utf8)
            return
        }
        for byte in text.utf8 {
            switch byte {
            case STOMPByte.backslash: out.append(contentsOf: [STOMPByte.backslash, STOMPByte.backslash])
            case STOMPByte.lineFeed: out.append(contentsOf: [STOMPByte.backslash, UInt8(ascii: "n")])
            case STOMPByte.carriageReturn: out.append(contentsOf: [STOMPByte.backslash, UInt8(ascii: "r")])
            case STOMPByte.colon: out.append(contentsOf: [STOMPByte.backslash, UInt8(ascii: "c")])
            default: out.append(byte)
            }
        }
    }
}

/// A frame without its body, for logs: a SEND's or MESSAGE's body may be a call's key material,
/// and CONNECT's passcode never appears.
extension STOMPFrame: CustomStringConvertible {
    public var description: String {
        let shown = headers.map { header in
            header.name == "passcode" || header.name == "authorization"
                ? "\(header.name):***" : "\(header.name):\(header.value)"
        }
        return "\(command.rawValue) [\(shown.joined(separator: ", "))] \(body.count) bytes"
    }
}

enum STOMPByte {
    static let lineFeed = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let colon = UInt8(ascii: ":")
    static let backslash = UInt8(ascii: "\\")
}
