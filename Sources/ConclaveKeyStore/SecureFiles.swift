import ConclaveFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The key store's use of ``PrivateFiles``: the same owner-only files and folders, with the key
/// store's stricter policy (a key folder opened to others is refused, not narrowed) and its errors.
enum SecureFiles {
    /// Creates `directory` (and missing parents) as 0700 if needed, then checks it is a directory
    /// owned by this user that nobody else can read.
    static func ensurePrivateDirectory(_ directory: URL) throws(KeyStoreError) {
        try mapped { () throws(FileError) in
            try PrivateFiles.ensureDirectoryExists(directory.deletingLastPathComponent().path)
            try PrivateFiles.ensurePrivateDirectory(directory.path, createParents: false, policy: .refuse)
        }
    }

    /// Ensures a directory we may not own (the data directory itself) exists.
    static func ensureDirectory(_ directory: URL) throws(KeyStoreError) {
        try mapped { () throws(FileError) in try PrivateFiles.ensureDirectoryExists(directory.path) }
    }

    /// For reads, which create nothing: false if `directory` does not exist; true if it is a folder
    /// owned by this user that nobody else can enter; an error otherwise.
    static func checkPrivateDirectoryIfPresent(_ directory: URL) throws(KeyStoreError) -> Bool {
        var info = stat()
        guard lstat(directory.path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return false }
            throw .io(path: directory.path, operation: "stat", errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .wrongKind(path: directory.path, found: PrivateFiles.fileTypeName(info.st_mode), expected: "folder")
        }
        guard info.st_uid == geteuid() else { throw .wrongOwner(path: directory.path, owner: UInt32(info.st_uid)) }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions(path: directory.path, mode: UInt32(info.st_mode))
        }
        return true
    }

    /// Whether `directory` exists (read-only commands create nothing).
    static func directoryExists(_ directory: URL) -> Bool {
        var info = stat()
        return stat(directory.path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// The contents of an owner-only regular file, or nil if it does not exist.
    static func readPrivateFile(_ url: URL) throws(KeyStoreError) -> Data? {
        try mapped { () throws(FileError) in
            try PrivateFiles.readRegularFile(url.path, privacy: .ownerOnly, limit: 4 << 20)
        }
    }

    /// Replaces `url` atomically with an owner-only file.
    static func writePrivateFileAtomically(_ data: Data, to url: URL) throws(KeyStoreError) {
        try mapped { () throws(FileError) in try PrivateFiles.writeAtomically(data, to: url.path) }
    }

    /// Removes a file, durably. Missing files are fine.
    static func removeFile(_ url: URL) throws(KeyStoreError) {
        try mapped { () throws(FileError) in try PrivateFiles.removeFile(url.path) }
    }

    /// Runs `body` holding an advisory `flock` on `lockFile`: exclusive for changes, shared for reads.
    static func withLock<T>(_ lockFile: URL, exclusive: Bool, _ body: () throws(KeyStoreError) -> T)
        throws(KeyStoreError) -> T
    {
        do {
            return try PrivateFiles.withLock(lockFile.path, exclusive: exclusive, body)
        } catch {
            switch error {
            case .file(let failure): throw KeyStoreError(failure)
            case .body(let failure): throw failure
            }
        }
    }

    private static func mapped<T>(_ body: () throws(FileError) -> T) throws(KeyStoreError) -> T {
        do {
            return try body()
        } catch {
            throw KeyStoreError(error)
        }
    }
}

extension KeyStoreError {
    /// The key store's words for a file-system problem.
    init(_ error: FileError) {
        switch error.kind {
        case .system(let operation, let code): self = .io(path: error.path, operation: operation, errno: code)
        case .wrongType(let expected, let found):
            self = .wrongKind(path: error.path, found: found, expected: expected)
        case .wrongOwner(let uid): self = .wrongOwner(path: error.path, owner: uid)
        case .insecureMode(let mode): self = .insecurePermissions(path: error.path, mode: mode)
        case .tooLarge(let limit): self = .corrupt(path: error.path, detail: "larger than \(limit) bytes")
        case .exists: self = .io(path: error.path, operation: "create", errno: EEXIST)
        }
    }
}
