import Foundation

/// A job's output folder, relative to a service's storage root and unable to leave it.
///
/// The rules are lexical, so a service can refuse a path before touching the file system:
/// relative, no `..`, no empty or `.` components (which would make two spellings of one folder),
/// no NUL or other control characters, no backslash, and bounded in depth and length. Symbolic
/// links inside the root are the storage owner's business, not the submitter's.
public struct RecordJobPath: Sendable, Hashable, CustomStringConvertible {
    public static let maximumLength = 1024
    public static let maximumComponentLength = 255
    public static let maximumDepth = 16

    /// The folder names from the root down, at least one.
    public let components: [String]

    /// Checks `text`; the error's reason does not name the field (the caller does).
    public init(_ text: String) throws(RecordJobError) {
        let length = text.utf8.count
        guard length > 0 else { throw RecordJobError("empty path") }
        guard length <= Self.maximumLength else {
            throw RecordJobError("\(length) bytes, more than \(Self.maximumLength)")
        }
        guard !text.hasPrefix("/") else { throw RecordJobError("\(RecordJob.quoted(text)) is absolute") }
        for scalar in text.unicodeScalars {
            if scalar == "\0" { throw RecordJobError("NUL in the path") }
            if scalar.properties.generalCategory == .control {
                throw RecordJobError("control character in the path")
            }
            if scalar == "\\" { throw RecordJobError("backslash in the path") }
        }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count <= Self.maximumDepth else {
            throw RecordJobError("\(parts.count) components, more than \(Self.maximumDepth)")
        }
        for part in parts {
            switch part {
            case "": throw RecordJobError("\(RecordJob.quoted(text)) has an empty component")
            case ".": throw RecordJobError("\(RecordJob.quoted(text)) has a '.' component")
            case "..": throw RecordJobError("\(RecordJob.quoted(text)) leaves the storage root ('..')")
            default:
                guard part.utf8.count <= Self.maximumComponentLength else {
                    throw RecordJobError(
                        "a component of \(part.utf8.count) bytes, more than \(Self.maximumComponentLength)"
                    )
                }
            }
        }
        components = parts
    }

    /// The path as submitted.
    public var description: String { components.joined(separator: "/") }

    /// The folder under `root`.
    public func resolved(under root: URL) -> URL {
        components.reduce(root) { $0.appendingPathComponent($1, isDirectory: true) }
    }
}
