public import ConclaveCore
import ConclaveFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `manifest.json`: what a recording folder holds and how its files line up.
///
/// Times on the call timeline are seconds since the recording's start (`startTime`); a file's
/// `startOffset` is where its first frame sits on that timeline, so a player or editor that places
/// every file at its offset reproduces the call.
public struct RecordingManifest: Codable, Sendable, Hashable {
    /// Bumped when fields change meaning.
    public var formatVersion = 1
    public var callID: String
    public var room: UInt64?
    public var janusURL: String?
    public var recorderVersion: String
    /// `ecall`, `sframe` or `none`.
    public var cryptoFormat: String
    /// The key epochs the recorder held.
    public var keyEpochs: [UInt64]
    /// When each key epoch the recorder was given became (or becomes) current, in order: a
    /// rotation during the recording shows where the key changed. Nil in manifests of earlier
    /// versions.
    public var keyEpochTimes: [KeyEpochTime]? = nil
    /// ISO 8601 wall-clock start (the call timeline's zero) and end.
    public var startTime: String
    public var endTime: String?
    /// `recording` while running (or after a crash), `finished`, or `repaired`.
    public var status: String
    public var participants: [Participant]
    /// Participants with no media file, and why.
    public var notRecorded: [NotRecorded]
    /// Set when this folder continues a recording another recorder started (a recorder service
    /// that died or handed the call over): where that attempt is and how long nothing was
    /// recorded. Nil for a recording made in one go, and in manifests of earlier versions.
    public var continuation: Continuation? = nil

    /// How a recording continues an earlier attempt of the same job.
    public struct Continuation: Codable, Sendable, Hashable {
        /// This attempt's number (2 for the first takeover).
        public var attempt: Int
        /// The previous attempt's folder, relative to this one.
        public var previous: String
        /// ISO 8601 wall-clock time of the previous attempt's last written frame: where the outage
        /// starts (nil when that attempt wrote none).
        public var outageStart: String?
        /// ISO 8601 wall-clock time of this attempt's first written frame: where it ends (nil while
        /// none is written).
        public var outageEnd: String?
        /// The outage in seconds, when both ends are known.
        public var outageSeconds: Double?

        public init(
            attempt: Int,
            previous: String,
            outageStart: String?,
            outageEnd: String?,
            outageSeconds: Double?
        ) {
            self.attempt = attempt
            self.previous = previous
            self.outageStart = outageStart
            self.outageEnd = outageEnd
            self.outageSeconds = outageSeconds
        }
    }

    /// One call key epoch and when it took effect.
    public struct KeyEpochTime: Codable, Sendable, Hashable {
        public var epoch: UInt64
        /// ISO 8601 wall-clock time.
        public var time: String
        /// Seconds on the call timeline (negative: before the recording started).
        public var offset: Double

        public init(epoch: UInt64, time: String, offset: Double) {
            self.epoch = epoch
            self.time = time
            self.offset = offset
        }
    }

    public struct Participant: Codable, Sendable, Hashable {
        /// The user id when the display has ECall's `<userId>:<name>` form, else `feed-<id>`.
        public var key: String
        public var feedIDs: [UInt64]
        public var display: String?
        public var userID: String?
        public var recorded: Bool
        public var reason: String?
        public var framesUndecryptable: Int
        public var segments: [Segment]
    }

    public struct Segment: Codable, Sendable, Hashable {
        /// 1-based, in order of start.
        public var index: Int
        public var feedID: UInt64
        /// Why the segment started (`joined`, `rejoined`, `resolution 640x480 -> 320x240`, ...).
        public var startReason: String
        /// The container file name, nil when nothing could be written.
        public var file: String?
        public var startOffset: Double?
        public var endOffset: Double?
        /// A write error that stopped the segment's tracks.
        public var error: String?
        /// Journal files still beside the container (removed after a verified clean finish).
        public var journals: [String]
        public var tracks: [Track]
    }

    public struct Track: Codable, Sendable, Hashable {
        public var kind: MediaKind
        public var codec: MediaCodec
        public var width: Int?
        public var height: Int?
        public var firstTimestamp: Double?
        public var lastTimestamp: Double?
        public var framesReceived: Int
        public var framesWritten: Int
        public var framesLost: Int
        public var framesUndecryptable: Int
        /// The epochs of the call keys the written frames were decrypted with (empty for a call
        /// without end-to-end encryption; nil in manifests of earlier versions and after a repair
        /// that had no manifest to take them from).
        public var keyEpochs: [UInt64]?
        public var framesDroppedBeforeKeyframe: Int
        public var gaps: Int
        public var gapSeconds: Double
        /// Frames refused: a repeated or reordered timestamp, an empty or malformed frame (nil in
        /// manifests of earlier versions).
        public var framesRejected: Int? = nil
        /// Timestamps that jumped far from the arrival times (a hostile or broken sender): those
        /// frames were kept and placed by their arrival (nil in manifests of earlier versions).
        public var timestampJumps: Int? = nil
        public var error: String?
    }

    public struct NotRecorded: Codable, Sendable, Hashable {
        public var key: String
        public var feedIDs: [UInt64]
        public var display: String?
        public var reason: String
    }

    /// The manifest's file name in a recording folder.
    public static let fileName = "manifest.json"

    /// A manifest larger than this is not one (a call of hundreds of participants and segments
    /// is well under a megabyte).
    static let maximumSize = 16 << 20

    /// What is at a folder's `manifest.json`.
    enum Loaded {
        /// Nothing.
        case missing
        /// A manifest.
        case loaded(RecordingManifest)
        /// A regular file that is not a manifest (empty, cut, not JSON, not ours), and why.
        case unparseable(String)
    }

    /// Reads `manifest.json` from `directory`, telling a missing file and an unparseable one
    /// apart; throws when it cannot be read at all (permissions, a FIFO or folder, I/O).
    static func load(from directory: String) throws(FileError) -> Loaded {
        let path = directory + "/" + fileName
        guard let data = try PrivateFiles.readRegularFile(path, limit: maximumSize) else { return .missing }
        do {
            return .loaded(try JSONDecoder().decode(RecordingManifest.self, from: data))
        } catch {
            return .unparseable(describe(error, of: data))
        }
    }

    /// Reads `manifest.json` from `directory`.
    public static func read(from directory: String) throws(RecordingError) -> RecordingManifest {
        let path = directory + "/" + fileName
        let loaded: Loaded
        do {
            loaded = try load(from: directory)
        } catch {
            throw RecordingError(path: path, reason: "cannot read the manifest: \(error.reasonWithoutPath)")
        }
        switch loaded {
        case .loaded(let manifest): return manifest
        case .missing:
            throw RecordingError(path: path, reason: "cannot read the manifest: \(String(cString: strerror(ENOENT)))")
        case .unparseable(let reason): throw RecordingError(path: path, reason: "cannot read the manifest: \(reason)")
        }
    }

    /// Why `data` did not decode as a manifest, in one line.
    static func describe(_ error: any Error, of data: Data) -> String {
        if data.isEmpty { return "the file is empty" }
        guard let error = error as? DecodingError else { return oneLine("\(error)") }
        func place(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return path.isEmpty ? "the top level" : String(path.drop { $0 == "." })
        }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return syntaxError(in: data) ?? oneLine("not valid JSON (\(context.debugDescription))")
        case .dataCorrupted(let context):
            return oneLine("not a recording manifest: \(place(context)) is not valid (\(context.debugDescription))")
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.isEmpty ? "" : " in \(place(context))"
            return "not a recording manifest: \"\(key.stringValue)\" is missing\(parent)"
        case .typeMismatch(let type, let context):
            return "not a recording manifest: \(place(context)) is not a \(type)"
        case .valueNotFound(let type, let context):
            return "not a recording manifest: \(place(context)) is null, not a \(type)"
        @unknown default:
            return oneLine("\(error)")
        }
    }

    /// Where the JSON in `data` breaks, as "not valid JSON at line L, column C (why)".
    ///
    /// `JSONDecoder` on Linux says only that the data is not valid JSON; `JSONSerialization`
    /// gives the character where parsing stopped ("Invalid value around character 17."), which
    /// is turned into a line and column a person can go to.
    private static func syntaxError(in data: Data) -> String? {
        let detail: String
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return nil
        } catch {
            guard let text = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String else { return nil }
            detail = text
        }
        if detail.localizedCaseInsensitiveContains("end of file") {
            return "not valid JSON: it ends in the middle (cut short?)"
        }
        let why = detail.split(separator: " around ").first.map(String.init)?.lowercased() ?? "invalid"
        guard let range = detail.range(of: #"character (\d+)"#, options: .regularExpression),
            let offset = Int(detail[range].dropFirst("character ".count)), offset >= 0, offset <= data.count
        else {
            return oneLine("not valid JSON (\(detail))")
        }
        let before = data.prefix(offset)
        let line = before.reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? before.startIndex
        let column = offset - (lineStart - data.startIndex) + 1
        return "not valid JSON at line \(line), column \(column) (\(why))"
    }

    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    /// Writes `manifest.json` into `directory` atomically (a temporary file renamed over it), so a
    /// crash or a full disk leaves the previous version intact; owner-only whatever the umask,
    /// since it names the call's participants.
    public func write(to directory: String) throws(RecordingError) {
        let path = directory + "/" + Self.fileName
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw RecordingError(path: path, reason: "cannot encode the manifest: \(error)")
        }
        do {
            try PrivateFiles.writeAtomically(data, to: path)
        } catch {
            throw RecordingError(path: path, reason: "cannot write the manifest: \(error.reasonWithoutPath)")
        }
    }
}

/// A recording-level failure (manifest, folder), naming the file.
public struct RecordingError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

extension FileError {
    /// The description without the path, for errors that name the path themselves.
    var reasonWithoutPath: String {
        switch kind {
        case .system(let operation, let code): "cannot \(operation) it: \(String(cString: strerror(code)))"
        case .wrongType(let expected, let found): "it is a \(found), not a \(expected)"
        case .wrongOwner(let uid): "refusing it: owned by uid \(uid), not by this user"
        case .insecureMode(let mode):
            "refusing it: mode \(String(mode & 0o7777, radix: 8)) lets other users in (fix with chmod go-rwx)"
        case .tooLarge(let limit): "refusing it: larger than \(limit) bytes"
        case .exists: "it already exists"
        }
    }
}

/// Who a display name says a participant is.
public struct ParticipantIdentity: Sendable, Hashable {
    public var key: String
    public var userID: String?
    public var name: String?

    /// ECall publishes `<userId>:<name>` as the display; other clients a plain name or nothing.
    public init(feedID: UInt64, display: String?) {
        if let display, let colon = display.firstIndex(of: ":"), colon != display.startIndex {
            let user = String(display[..<colon])
            userID = user
            name = String(display[display.index(after: colon)...])
            key = user
        } else {
            userID = nil
            name = display
            key = "feed-\(feedID)"
        }
    }

    /// The key reduced to characters safe in a file name.
    public var fileSafeKey: String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        let mapped = String(key.map { allowed.contains($0) ? $0 : "_" }.prefix(64))
        return mapped.hasPrefix(".") ? "_" + mapped : mapped
    }
}

extension Int64 {
    /// Microseconds as seconds.
    var seconds: Double { Double(self) / 1_000_000 }
}

/// ISO 8601 for manifest times.
func iso8601(unixMicroseconds: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: Date(timeIntervalSince1970: Double(unixMicroseconds) / 1_000_000))
}
