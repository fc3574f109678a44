/// A media file that cannot be read or written, with the file and the reason.
///
/// Shared by the raw readers (Y4M, WAV), the libavformat demuxer and the muxer, so callers handle
/// one error type for "this file is no good" whatever layer noticed it.
public struct MediaFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What class of problem it is.
    public enum Kind: String, Sendable, Hashable {
        /// The file cannot be opened or read at all (missing, permissions, not a file).
        case unreadable
        /// The file ends in the middle of a header or frame.
        case truncated
        /// The bytes are not what the format requires.
        case malformed
        /// The file is valid but uses something we do not handle (codec, chroma, sample format).
        case unsupported
        /// Writing failed (disk full, I/O error, closed writer).
        case writeFailed = "write failed"
    }

    /// The file's path as given by the caller.
    public var path: String
    /// The class of problem.
    public var kind: Kind
    /// Why, in words.
    public var reason: String
    /// Where in the file, when known.
    public var byteOffset: Int?

    /// Creates an error.
    public init(path: String, kind: Kind, reason: String, byteOffset: Int? = nil) {
        self.path = path
        self.kind = kind
        self.reason = reason
        self.byteOffset = byteOffset
    }

    public var description: String {
        let location = byteOffset.map { " at byte \($0)" } ?? ""
        return "\(path): \(kind.rawValue)\(location): \(reason)"
    }
}
