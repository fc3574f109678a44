/// Why bytes from the server are not a STOMP frame. Every error says where and what, with a short
/// printable excerpt of the offending input, so that a log line is enough to see what the server sent.
public struct STOMPDecodeError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// The first line is not a STOMP 1.2 command.
        case unknownCommand
        /// A header line has no colon.
        case malformedHeader
        /// More header lines than ``STOMPDecoder/Limits/maximumHeaderCount``.
        case tooManyHeaders
        /// A command or header line longer than ``STOMPDecoder/Limits/maximumLineLength``.
        case lineTooLong
        /// A frame larger than ``STOMPDecoder/Limits/maximumFrameSize``.
        case frameTooLarge
        /// `content-length` is not a decimal byte count.
        case invalidContentLength
        /// The byte after a `content-length` body is not the NUL that ends the frame.
        case missingTerminator
    }

    public var code: Code
    /// The frame's command, when it was read.
    public var command: STOMPCommand?
    /// What went wrong, for people.
    public var message: String

    public init(_ code: Code, command: STOMPCommand? = nil, _ message: String) {
        self.code = code
        self.command = command
        self.message = message
    }

    public var description: String { message }

    /// Up to 40 bytes of `bytes`, control characters escaped, for messages.
    static func excerpt(_ bytes: ArraySlice<UInt8>) -> String {
        var text = ""
        for byte in bytes.prefix(40) {
            if byte >= 0x20 && byte < 0x7F {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "\\x" + String(byte, radix: 16)
            }
        }
        return bytes.count > 40 ? text + "..." : text
    }
}

/// Reads STOMP frames from the text messages of a WebSocket.
///
/// One message may hold a frame, several frames, or heart-beat EOLs; a frame may also be split
/// across messages (the rest waits in the decoder). Headers are read escaped (STOMP 1.2) or not
/// (ECall writes raw values): a backslash that does not start one of the four defined escapes is kept
/// as is instead of failing, since an unescaped value may contain one. A body ends at `content-length`
/// bytes when that header is present, else at the first NUL. Limits bound the memory a server can
/// make the client hold; breaking one is a typed error, after which the decoder starts afresh with
/// the next input.
public struct STOMPDecoder: Sendable {
    public struct Limits: Sendable, Hashable {
        /// The largest frame, headers and body together.
        public var maximumFrameSize: Int
        /// The most header lines in one frame.
        public var maximumHeaderCount: Int
        /// The longest command or header line.
        public var maximumLineLength: Int

        /// 1 MiB frames, 64 headers, 8 KiB lines: well above any signaling message.
        public init(maximumFrameSize: Int = 1 << 20, maximumHeaderCount: Int = 64, maximumLineLength: Int = 8192) {
            self.maximumFrameSize = maximumFrameSize
            self.maximumHeaderCount = maximumHeaderCount
            self.maximumLineLength = maximumLineLength
        }
    }

    /// What one input held.
    public struct Output: Sendable, Hashable {
        /// Complete frames, in order.
        public var frames: [STOMPFrame] = []
        /// EOLs between frames: heart-beats from the server.
        public var heartbeats = 0
    }

    public let limits: Limits
    private var buffer: [UInt8] = []

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes held for a frame not yet complete.
    public var pendingByteCount: Int { buffer.count }

    /// Reads one WebSocket text message.
    public mutating func decode(_ text: String) throws(STOMPDecodeError) -> Output {
        try decode(bytes: Array(text.utf8))
    }

    /// Reads more bytes; returns every frame they complete.
    public mutating func decode(bytes: [UInt8]) throws(STOMPDecodeError) -> Output {
        if buffer.isEmpty { buffer = bytes } else { buffer.append(contentsOf: bytes) }
        var output = Output()
        var start = 0
        do {
            while start < buffer.count {
                // EOLs between frames are heart-beats.
                if buffer[start] == STOMPByte.lineFeed {
                    output.heartbeats += 1
                    start += 1
                    continue
                }
                if buffer[start] == STOMPByte.carriageReturn {
                    guard start + 1 < buffer.count else { break }
                    if buffer[start + 1] == STOMPByte.lineFeed {
                        output.heartbeats += 1
                        start += 2
                        continue
                    }
                }
                guard let (frame, end) = try parseFrame(from: start) else { break }
                output.frames.append(frame)
                start = end
            }
        } catch {
            buffer.removeAll()
            throw error
        }
        if start >= buffer.count { buffer.removeAll(keepingCapacity: true) } else { buffer.removeFirst(start) }
        return output
    }

    /// Parses the frame at `start`: nil when more bytes are needed.
    private func parseFrame(from start: Int) throws(STOMPDecodeError) -> (STOMPFrame, Int)? {
        let available = buffer.count - start
        guard let (commandLine, afterCommand) = try line(from: start, command: nil) else {
            if available > limits.maximumFrameSize { throw tooLarge(nil) }
            return nil
        }
        guard let command = STOMPCommand(rawValue: String(decoding: commandLine, as: UTF8.self)) else {
            throw STOMPDecodeError(
                .unknownCommand,
                "unknown STOMP command '\(STOMPDecodeError.excerpt(commandLine))'"
            )
        }
        var headers: [STOMPHeader] = []
        var position = afterCommand
        while true {
            guard let (headerLine, next) = try line(from: position, command: command) else {
                if buffer.count - start > limits.maximumFrameSize { throw tooLarge(command) }
                return nil
            }
            position = next
            if headerLine.isEmpty { break }
            guard headers.count < limits.maximumHeaderCount else {
                throw STOMPDecodeError(
                    .tooManyHeaders,
                    command: command,
                    "\(command.rawValue) frame has more than \(limits.maximumHeaderCount) headers"
                )
            }
            guard let colon = headerLine.firstIndex(of: STOMPByte.colon) else {
                throw STOMPDecodeError(
                    .malformedHeader,
                    command: command,
                    "\(command.rawValue) header line \(headers.count + 1) has no colon: '\(STOMPDecodeError.excerpt(headerLine))'"
                )
            }
            let escaped = command.escapesHeaders
            headers.append(
                STOMPHeader(
                    Self.text(headerLine[headerLine.startIndex..<colon], unescape: escaped),
                    Self.text(headerLine[(colon + 1)...], unescape: escaped)
                )
            )
        }
        let headerSize = position - start
        if let lengthText = headers.first(where: { $0.name == "content-length" })?.value {
            guard let length = Int(lengthText), length >= 0, lengthText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else {
                throw STOMPDecodeError(
                    .invalidContentLength,
                    command: command,
                    "\(command.rawValue) frame has content-length '\(lengthText.prefix(40))'"
                )
            }
            let (total, overflow) = headerSize.addingReportingOverflow(length)
            guard !overflow, total < limits.maximumFrameSize else { throw tooLarge(command) }
            let end = position + length
            guard end < buffer.count else { return nil }
            guard buffer[end] == 0 else {
                throw STOMPDecodeError(
                    .missingTerminator,
                    command: command,
                    "\(command.rawValue) frame's \(length)-byte body is not followed by NUL"
                )
            }
            return (STOMPFrame(command, headers: headers, body: Array(buffer[position..<end])), end + 1)
        }
        guard let end = buffer[position...].firstIndex(of: 0) else {
            if buffer.count - start > limits.maximumFrameSize { throw tooLarge(command) }
            return nil
        }
        guard end - start <= limits.maximumFrameSize else { throw tooLarge(command) }
        return (STOMPFrame(command, headers: headers, body: Array(buffer[position..<end])), end + 1)
    }

    /// The line at `start` without its EOL, and where the next one starts; nil when incomplete.
    private func line(from start: Int, command: STOMPCommand?) throws(STOMPDecodeError) -> (ArraySlice<UInt8>, Int)? {
        let limit = min(buffer.count, start + limits.maximumLineLength + 2)
        var index = start
        while index < limit {
            if buffer[index] == STOMPByte.lineFeed {
                var end = index
                if end > start, buffer[end - 1] == STOMPByte.carriageReturn { end -= 1 }
                return (buffer[start..<end], index + 1)
            }
            index += 1
        }
        if limit - start > limits.maximumLineLength + 1 {
            let what = command.map { "a \($0.rawValue) header line" } ?? "the command line"
            throw STOMPDecodeError(
                .lineTooLong,
                command: command,
                "\(what) is longer than \(limits.maximumLineLength) bytes: '\(STOMPDecodeError.excerpt(buffer[start..<limit]))'"
            )
        }
        return nil
    }

    private func tooLarge(_ command: STOMPCommand?) -> STOMPDecodeError {
        STOMPDecodeError(
            .frameTooLarge,
            command: command,
            "\(command?.rawValue ?? "a") frame is larger than \(limits.maximumFrameSize) bytes"
        )
    }

    /// Header bytes as text, with STOMP 1.2's escapes undone when `unescape` is set.
    static func text(_ bytes: ArraySlice<UInt8>, unescape: Bool) -> String {
        guard unescape, bytes.contains(STOMPByte.backslash) else { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == STOMPByte.backslash, index + 1 < bytes.endIndex {
                let replacement: UInt8? =
                    switch bytes[index + 1] {
                    case UInt8(ascii: "n"): STOMPByte.lineFeed
                    case UInt8(ascii: "r"): STOMPByte.carriageReturn
                    case UInt8(ascii: "c"): STOMPByte.colon
                    case STOMPByte.backslash: STOMPByte.backslash
                    default: nil
                    }
                if let replacement {
                    out.append(replacement)
                    index += 2
                    continue
                }
            }
            out.append(byte)
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
