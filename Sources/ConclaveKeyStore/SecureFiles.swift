import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Owner-only files and directories: checked reads, atomic durable writes, and an advisory lock so
/// two `conclave` processes can share one data directory.
enum SecureFiles {
    static let fileMode: mode_t = 0o600
    static let directoryMode: mode_t = 0o700

    /// Creates `directory` (and missing parents) as 0700 if needed, then checks it is a directory
    /// owned by this user that nobody else can read.
    static func ensurePrivateDirectory(_ directory: URL) throws(KeyStoreError) {
        let path = directory.path
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw .io(path: path, operation: "stat", errno: errno) }
            try ensureDirectory(directory.deletingLastPathComponent())
            // mkdir with the mode, not FileManager (which creates with the default mode and sets
            // the permissions afterwards): another process must never see the directory open to
            // others, even for an instant. The umask can only narrow 0700. EEXIST: another
            // process made it first, the same way.
            guard mkdir(path, directoryMode) == 0 || errno == EEXIST else {
                throw .io(path: path, operation: "create directory", errno: errno)
            }
            guard lstat(path, &info) == 0 else { throw .io(path: path, operation: "stat", errno: errno) }
        }
        try checkPrivate(info, path: path, directory: true)
    }

    /// Ensures a directory we may not own (the data directory itself) exists.
    static func ensureDirectory(_ directory: URL) throws(KeyStoreError) {
        var info = stat()
        if stat(directory.path, &info) == 0 { return }
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: Int(directoryMode)]
            )
        } catch {
            throw .io(path: directory.path, operation: "create directory", errno: EACCES)
        }
    }

    static func checkPrivate(_ info: stat, path: String, directory: Bool) throws(KeyStoreError) {
        let type = info.st_mode & S_IFMT
        guard type == (directory ? S_IFDIR : S_IFREG) else {
            throw .wrongFileType(path: path, expected: directory ? "directory" : "regular file")
        }
        guard info.st_uid == geteuid() else { throw .wrongOwner(path: path, owner: UInt32(info.st_uid)) }
        guard info.st_mode & 0o077 == 0 else { throw .insecurePermissions(path: path, mode: UInt32(info.st_mode)) }
    }

    /// The contents of an owner-only regular file, or nil if it does not exist.
    static func readPrivateFile(_ url: URL) throws(KeyStoreError) -> Data? {
        let path = url.path
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw .wrongFileType(path: path, expected: "regular file (it is a symlink)") }
            throw .io(path: path, operation: "open", errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io(path: path, operation: "stat", errno: errno) }
        try checkPrivate(info, path: path, directory: false)
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(path: path, operation: "read", errno: errno)
            }
            if count == 0 { break }
            data.append(contentsOf: chunk[0..<count])
            guard data.count <= 4 << 20 else { throw .corrupt(path: path, detail: "larger than 4 MiB") }
        }
        return data
    }

    /// Replaces `url` atomically: write a 0600 temporary file beside it, fsync it, rename it over the
    /// target, fsync the directory. A crash leaves either the old or the new file, never a mix.
    static func writePrivateFileAtomically(_ data: Data, to url: URL) throws(KeyStoreError) {
        let directory = url.deletingLastPathComponent().path
        let temporary = "\(directory)/.\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else { throw .io(path: temporary, operation: "create", errno: errno) }
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            guard fchmod(fd, fileMode) == 0 else {
                throw KeyStoreError.io(path: temporary, operation: "chmod", errno: errno)
            }
            var written = 0
            while written < data.count {
                let count = data.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw KeyStoreError.io(path: temporary, operation: "write", errno: errno)
                }
                written += count
            }
            guard fsync(fd) == 0 else { throw KeyStoreError.io(path: temporary, operation: "fsync", errno: errno) }
        } catch let error as KeyStoreError {
            throw error
        } catch {
            throw .io(path: temporary, operation: "write", errno: EIO)
        }
        guard rename(temporary, url.path) == 0 else { throw .io(path: url.path, operation: "rename", errno: errno) }
        committed = true
        try syncDirectory(directory)
    }

    /// Removes a file, durably. Missing files are fine.
    static func removeFile(_ url: URL) throws(KeyStoreError) {
        guard unlink(url.path) == 0 || errno == ENOENT else {
            throw .io(path: url.path, operation: "remove", errno: errno)
        }
        try syncDirectory(url.deletingLastPathComponent().path)
    }

    static func syncDirectory(_ path: String) throws(KeyStoreError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(path: path, operation: "open directory", errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io(path: path, operation: "fsync directory", errno: errno) }
    }

    /// Runs `body` holding an advisory `flock` on `lockFile`: exclusive for changes, shared for reads.
    /// Locks are per open file description, so they also serialize threads of one process that each
    /// call this.
    static func withLock<T>(_ lockFile: URL, exclusive: Bool, _ body: () throws(KeyStoreError) -> T)
        throws(KeyStoreError) -> T
    {
        let path = lockFile.path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else { throw .io(path: path, operation: "open lock", errno: errno) }
        defer { close(fd) }
        while flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0 {
            guard errno == EINTR else { throw .io(path: path, operation: "lock", errno: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}
