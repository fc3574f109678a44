import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Helpers for tests that check what another local user can see of Conclave's files.
public enum FilePrivacy {
    /// Runs `body` with the process umask set to `mask`, then restores the previous one.
    ///
    /// The umask is process-wide: the test suite runs serially (`--no-parallel`), and the body
    /// should not suspend for long.
    public static func withUmask<T>(_ mask: mode_t, _ body: () throws -> T) rethrows -> T {
        let previous = umask(mask)
        defer { umask(previous) }
        return try body()
    }

    /// Like ``withUmask(_:_:)`` for async work.
    public static func withUmask<T>(_ mask: mode_t, _ body: () async throws -> T) async rethrows -> T {
        let previous = umask(mask)
        defer { umask(previous) }
        return try await body()
    }

    /// The permission bits of `path` (without following a final symlink).
    public static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// Every entry under `root` (itself included) whose mode is not 0700 (folders) or 0600 (files),
    /// as "path mode" lines; empty when everything is private.
    public static func nonPrivateEntries(under root: String) -> [String] {
        var found: [String] = []
        func visit(_ path: String) {
            var info = stat()
            guard lstat(path, &info) == 0 else { return }
            let mode = info.st_mode & 0o7777
            let isDirectory = info.st_mode & S_IFMT == S_IFDIR
            if mode != (isDirectory ? 0o700 : 0o600) { found.append("\(path) \(String(mode, radix: 8))") }
            if isDirectory, let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
                for name in names.sorted() { visit(path + "/" + name) }
            }
        }
        visit(root)
        return found
    }

    /// Tries to read `path` as the unprivileged user `nobody` (through `runuser`); returns what
    /// `cat` printed, or nil when the read was refused. Needs root, as the test bed does.
    public static func readAsNobody(_ path: String) throws -> Data? {
        let result = try runProcess("runuser", ["-u", "nobody", "--", "cat", path], timeout: .seconds(20))
        return result.succeeded ? result.stdout : nil
    }

    /// Tries to list `path` as `nobody`; nil when refused.
    public static func listAsNobody(_ path: String) throws -> String? {
        let result = try runProcess("runuser", ["-u", "nobody", "--", "ls", "-A", path], timeout: .seconds(20))
        return result.succeeded ? result.output : nil
    }

    /// A fresh folder in the system's temporary folder that `nobody` can enter (0755), so that
    /// only the modes under test decide what it can read.
    public static func openTemporaryFolder(_ prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "/\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }
}

/// A file that is not a regular file, made where a program expects one: a FIFO (a plain read
/// would block on it) or a folder.
public enum SpecialFile: String, CaseIterable, Sendable {
    case fifo, folder

    /// How Conclave's errors name it.
    public var word: String { self == .fifo ? "FIFO" : "folder" }

    /// Makes it at `path`.
    public func make(_ path: String) throws {
        switch self {
        case .fifo:
            guard mkfifo(path, 0o600) == 0 else { throw SubprocessError(description: "mkfifo \(path) failed") }
        case .folder:
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
    }
}
