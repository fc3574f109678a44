import ConclaveCore
import Foundation

/// Sequential, buffered reading of a file or an in-memory buffer for the raw-format readers.
///
/// Every read is bounds-checked and reports where in the input it failed, so a malformed or
/// truncated file turns into a `MediaFileError` with a byte offset instead of a trap.
final class ByteInput {
    private enum Backing {
        case file(FileHandle)
        case memory
    }

    /// The path used in error messages.
    let path: String
    private let backing: Backing
    private var buffer: [UInt8]
    private var position = 0
    private var atEnd = false
    /// Bytes consumed so far: the offset of the next byte.
    private(set) var offset = 0

    /// Opens a file for reading.
    init(path: String) throws(MediaFileError) {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw MediaFileError(path: path, kind: .unreadable, reason: "no such file")
        }
        guard !isDirectory.boolValue else {
            throw MediaFileError(path: path, kind: .unreadable, reason: "is a directory")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw MediaFileError(path: path, kind: .unreadable, reason: "permission denied or not a regular file")
        }
        backing = .file(handle)
        buffer = []
    }

    /// Reads from memory; `name` stands in for the path in errors.
    init(bytes: [UInt8], name: String) {
        path = name
        backing = .memory
        buffer = bytes
        atEnd = true
    }

    deinit {
        if case .file(let handle) = backing { try? handle.close() }
    }

    /// Makes at least `count` bytes available unless the input ends first.
    private func fill(_ count: Int) throws(MediaFileError) {
        while buffer.count - position < count, !atEnd {
            guard case .file(let handle) = backing else { return }
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: max(1 << 20, count))
            } catch {
                throw MediaFileError(path: path, kind: .unreadable, reason: "read failed: \(error)", byteOffset: offset)
            }
            guard let chunk, !chunk.isEmpty else {
                atEnd = true
                return
            }
            if position > 0 {
                buffer.removeFirst(position)
                position = 0
            }
            buffer.append(contentsOf: chunk)
        }
    }

    /// True when no byte is left.
    func isAtEnd() throws(MediaFileError) -> Bool {
        try fill(1)
        return position >= buffer.count
    }

    /// Reads exactly `count` bytes; returns nil if the input is already at its end, and throws
    /// `truncated` if it ends part-way.
    func read(_ count: Int, what: String) throws(MediaFileError) -> [UInt8]? {
        try fill(count)
        let available = buffer.count - position
        if available == 0 && count > 0 { return nil }
        guard available >= count else {
            throw MediaFileError(
                path: path,
                kind: .truncated,
                reason: "\(what) needs \(count) bytes, only \(available) left",
                byteOffset: offset
            )
        }
        let bytes = Array(buffer[position..<(position + count)])
        position += count
        offset += count
        return bytes
    }

    /// Reads up to `count` bytes: fewer only at the end of the input.
    func read(upTo count: Int) throws(MediaFileError) -> [UInt8] {
        try fill(count)
        let available = min(count, buffer.count - position)
        let bytes = Array(buffer[position..<(position + available)])
        position += available
        offset += available
        return bytes
    }

    /// Reads exactly `count` bytes or throws `truncated`.
    func require(_ count: Int, what: String) throws(MediaFileError) -> [UInt8] {
        guard let bytes = try read(count, what: what) else {
            throw MediaFileError(path: path, kind: .truncated, reason: "file ends before \(what)", byteOffset: offset)
        }
        return bytes
    }

    /// Skips `count` bytes (or to the end); returns how many were skipped.
    @discardableResult
    func skip(_ count: Int) throws(MediaFileError) -> Int {
        var remaining = count
        while remaining > 0 {
            try fill(min(remaining, 1 << 20))
            let step = min(remaining, buffer.count - position)
            guard step > 0 else { break }
            position += step
            offset += step
            remaining -= step
        }
        return count - remaining
    }

    /// Reads up to and excluding the next `\n`; nil at a clean end; throws when no newline comes
    /// within `maxLength` bytes.
    func readLine(maxLength: Int, what: String) throws(MediaFileError) -> [UInt8]? {
        var line: [UInt8] = []
        while true {
            try fill(1)
            guard position < buffer.count else {
                if line.isEmpty { return nil }
                throw MediaFileError(
                    path: path,
                    kind: .truncated,
                    reason: "\(what) has no line end",
                    byteOffset: offset
                )
            }
            let byte = buffer[position]
            position += 1
            offset += 1
            if byte == 0x0A { return line }
            line.append(byte)
            guard line.count <= maxLength else {
                throw MediaFileError(
                    path: path,
                    kind: .malformed,
                    reason: "\(what) longer than \(maxLength) bytes",
                    byteOffset: offset
                )
            }
        }
    }
}

/// Little-endian integer reads from a byte array, bounds-checked.
extension Array where Element == UInt8 {
    func littleEndian16(at index: Int) -> UInt16? {
        guard index >= 0, index + 2 <= count else { return nil }
        return UInt16(self[index]) | UInt16(self[index + 1]) << 8
    }

    func littleEndian32(at index: Int) -> UInt32? {
        guard let low = littleEndian16(at: index), let high = littleEndian16(at: index + 2) else { return nil }
        return UInt32(low) | UInt32(high) << 16
    }
}
