import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Owner-only files and folders, and reads that never block or follow surprises.
///
/// Everything Conclave writes that another user must not read (device and call keys, decrypted
/// recordings, their journals and manifests) goes through here, so that the modes are 0600 and
/// 0700 whatever the process's umask: files are created with `open(..., 0600)` and then
/// `fchmod`ed (the umask can only narrow the mode given to `open`, and an existing file keeps its
/// old mode unless changed), folders with `mkdir(0700)` so that nobody ever sees one open, even
/// for an instant.
///
/// Reads refuse anything that is not a regular file (a FIFO, a folder, a device) with a clear
/// error instead of blocking on it or failing with a framework error code.
public enum PrivateFiles {
    /// The mode of every private file.
    public static let fileMode: mode_t = 0o600
    /// The mode of every private folder.
    public static let directoryMode: mode_t = 0o700

    // MARK: - Folders

    /// What to do with an existing folder whose mode lets others in.
    public enum ExistingFolderPolicy: Sendable {
        /// Narrow it to 0700 (ours) or refuse it (not ours).
        case narrow
        /// Refuse it: a key folder that was opened to others is a sign of tampering or a mistake
        /// the user must see.
        case refuse
    }

    /// Creates `path` as a 0700 folder if it does not exist (creating missing parents the same
    /// way when `createParents`), then checks that it is a folder owned by this user that nobody
    /// else can enter, narrowing or refusing a wider one as `policy` says.
    public static func ensurePrivateDirectory(
        _ path: String,
        createParents: Bool = true,
        policy: ExistingFolderPolicy = .narrow
    ) throws(FileError) {
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw FileError(path: path, .system("stat", errno)) }
            let parent = (path as NSString).deletingLastPathComponent
            if createParents, !parent.isEmpty, parent != path {
                var parentInfo = stat()
                if stat(parent, &parentInfo) != 0 {
                    try ensurePrivateDirectory(parent, createParents: true, policy: .narrow)
                }
            }
            // EEXIST: another process made it first, the same way; it is checked below.
            guard mkdir(path, directoryMode) == 0 || errno == EEXIST else {
                throw FileError(path: path, .system("create the folder", errno))
            }
            guard lstat(path, &info) == 0 else { throw FileError(path: path, .system("stat", errno)) }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw FileError(path: path, .wrongType(expected: "folder", found: fileTypeName(info.st_mode)))
        }
        guard info.st_uid == geteuid() else { throw FileError(path: path, .wrongOwner(uid: UInt32(info.st_uid))) }
        if info.st_mode & 0o077 != 0 {
            guard policy == .narrow else { throw FileError(path: path, .insecureMode(UInt32(info.st_mode))) }
            guard chmod(path, directoryMode) == 0 else {
                throw FileError(path: path, .system("narrow the folder to 0700", errno))
            }
        }
    }

    /// Creates a folder's missing parents (folders we may not own, such as a data directory's
    /// parent) with mode 0700, without checking existing ones.
    public static func ensureDirectoryExists(_ path: String) throws(FileError) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw FileError(path: path, .wrongType(expected: "folder", found: fileTypeName(info.st_mode)))
            }
            return
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try ensureDirectoryExists(parent) }
        guard mkdir(path, directoryMode) == 0 || errno == EEXIST else {
            throw FileError(path: path, .system("create the folder", errno))
        }
    }

    // MARK: - Writing

    /// Opens `path` for writing as an owner-only file: created 0600 if missing (with `exclusive`,
    /// refused if it exists), truncated if `truncate`, never through a symlink, and narrowed to
    /// 0600 if it existed with a wider mode. Returns the descriptor; the caller closes it.
    public static func openPrivateFile(_ path: String, truncate: Bool = true, exclusive: Bool = false)
        throws(FileError) -> Int32
    {
        var flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
        if truncate { flags |= O_TRUNC }
        if exclusive { flags |= O_EXCL }
        let descriptor = open(path, flags, fileMode)
        guard descriptor >= 0 else {
            if errno == ELOOP { throw FileError(path: path, .wrongType(expected: "regular file", found: "symlink")) }
            if errno == EEXIST { throw FileError(path: path, .exists) }
            if errno == ENXIO { throw FileError(path: path, .wrongType(expected: "regular file", found: "FIFO")) }
            throw FileError(path: path, .system("create", errno))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw FileError(path: path, .system("stat", code))
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw FileError(path: path, .wrongType(expected: "regular file", found: fileTypeName(info.st_mode)))
        }
        guard fchmod(descriptor, fileMode) == 0 else {
            let code = errno
            close(descriptor)
            throw FileError(path: path, .system("chmod", code))
        }
        // Back to blocking writes (O_NONBLOCK was only there so that a FIFO could not hang open).
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        return descriptor
    }

    /// Creates (or truncates) an owner-only file and closes it, so that a library that opens the
    /// path itself (libavformat) writes into a file that is already 0600.
    public static func createPrivateFile(_ path: String) throws(FileError) {
        close(try openPrivateFile(path))
    }

    /// Replaces `path` atomically with an owner-only file holding `data`: a 0600 temporary file
    /// beside it is written, synced and renamed over the target, then the folder is synced. A
    /// crash or a full disk leaves either the old or the new file, never a mix.
    public static func writeAtomically(_ data: some DataProtocol, to path: String) throws(FileError) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temporary =
            (directory.isEmpty ? "" : directory + "/") + ".\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let descriptor = try openPrivateFile(temporary, exclusive: true)
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        defer { close(descriptor) }
        try writeAll(Array(data), to: descriptor, path: temporary)
        guard fsync(descriptor) == 0 else { throw FileError(path: temporary, .system("sync", errno)) }
        guard rename(temporary, path) == 0 else { throw FileError(path: path, .system("rename", errno)) }
        committed = true
        try syncDirectory(directory.isEmpty ? "." : directory)
    }

    /// Writes every byte, retrying short writes and interruptions.
    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(FileError) {
        var written = 0
        var failure: Int32 = 0
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            while written < buffer.count {
                let count = write(descriptor, base + written, buffer.count - written)
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                written += count
            }
        }
        if failure != 0 { throw FileError(path: path, .system("write", failure)) }
    }

    /// Removes a file, durably. A missing file is fine.
    public static func removeFile(_ path: String) throws(FileError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw FileError(path: path, .system("remove", errno)) }
        let directory = (path as NSString).deletingLastPathComponent
        try syncDirectory(directory.isEmpty ? "." : directory)
    }

    /// Makes a folder's entries (creations, renames, removals) durable.
    public static func syncDirectory(_ path: String) throws(FileError) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileError(path: path, .system("open the folder", errno)) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw FileError(path: path, .system("sync the folder", errno)) }
    }

    // MARK: - Reading

    /// What a read requires of the file beyond being a regular file.
    public enum Privacy: Sendable {
        /// Any owner and mode (configuration, invitations, journals to repair).
        case any
        /// Owned by this user and closed to group and others (key files).
        case ownerOnly
    }

    /// The contents of the regular file at `path`, or nil if it does not exist.
    ///
    /// The file is opened without following a final symlink when `privacy` is `.ownerOnly`, and
    /// always with `O_NONBLOCK`, so a FIFO or a device is refused (by `fstat`) instead of blocking
    /// the process; a folder is refused likewise. Files larger than `limit` are refused.
    public static func readRegularFile(_ path: String, privacy: Privacy = .any, limit: Int = 64 << 20)
        throws(FileError) -> Data?
    {
        var flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK
        if privacy == .ownerOnly { flags |= O_NOFOLLOW }
        let descriptor = open(path, flags)
        guard descriptor >= 0 else {
            switch errno {
            case ENOENT: return nil
            case ELOOP: throw FileError(path: path, .wrongType(expected: "regular file", found: "symlink"))
            default: throw FileError(path: path, .system("open", errno))
            }
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileError(path: path, .system("stat", errno)) }
        try checkRegular(info, path: path, privacy: privacy)
        guard info.st_size <= limit else { throw FileError(path: path, .tooLarge(limit: limit)) }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        var data = Data()
        data.reserveCapacity(Int(info.st_size))
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, .system("read", errno))
            }
            if count == 0 { break }
            data.append(contentsOf: chunk[0..<count])
            guard data.count <= limit else { throw FileError(path: path, .tooLarge(limit: limit)) }
        }
        return data
    }

    /// Like ``readRegularFile(_:privacy:limit:)``, but a missing file is an error too.
    public static func readExistingRegularFile(_ path: String, privacy: Privacy = .any, limit: Int = 64 << 20)
        throws(FileError) -> Data
    {
        guard let data = try readRegularFile(path, privacy: privacy, limit: limit) else {
            throw FileError(path: path, .system("open", ENOENT))
        }
        return data
    }

    /// Checks that `info` describes a regular file and, for `.ownerOnly`, one of ours closed to others.
    public static func checkRegular(_ info: stat, path: String, privacy: Privacy) throws(FileError) {
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw FileError(path: path, .wrongType(expected: "regular file", found: fileTypeName(info.st_mode)))
        }
        guard privacy == .ownerOnly else { return }
        guard info.st_uid == geteuid() else { throw FileError(path: path, .wrongOwner(uid: UInt32(info.st_uid))) }
        guard info.st_mode & 0o077 == 0 else { throw FileError(path: path, .insecureMode(UInt32(info.st_mode))) }
    }

    /// Whether `path` names an existing regular file (no blocking, no symlink surprises).
    public static func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    /// A person's word for a file type.
    public static func fileTypeName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "regular file"
        case S_IFDIR: "folder"
        case S_IFIFO: "FIFO"
        case S_IFLNK: "symlink"
        case S_IFSOCK: "socket"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        default: "special file"
        }
    }

    // MARK: - Locking

    /// Runs `body` holding an advisory `flock` on `path` (created 0600 if missing): exclusive for
    /// changes, shared for reads. Locks belong to the open file description, so they also
    /// serialise threads of one process that each call this.
    public static func withLock<T, Failure: Error>(
        _ path: String,
        exclusive: Bool,
        _ body: () throws(Failure) -> T
    ) throws(LockError<Failure>) -> T {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard descriptor >= 0 else { throw .file(FileError(path: path, .system("open the lock", errno))) }
        defer { close(descriptor) }
        while flock(descriptor, exclusive ? LOCK_EX : LOCK_SH) != 0 {
            guard errno == EINTR else { throw .file(FileError(path: path, .system("lock", errno))) }
        }
        defer { flock(descriptor, LOCK_UN) }
        do {
            return try body()
        } catch {
            throw .body(error)
        }
    }

    /// Either the lock failed or the locked work did.
    public enum LockError<Failure: Error>: Error {
        case file(FileError)
        case body(Failure)
    }
}

/// A file-system problem, naming the path. Its description is one line for a person.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// A system call failed (the operation in words, and `errno`).
        case system(String, Int32)
        /// Not the kind of file expected (a FIFO or folder where a regular file belongs).
        case wrongType(expected: String, found: String)
        /// Owned by another user.
        case wrongOwner(uid: UInt32)
        /// Open to the group or to others where only the owner may read (the whole `st_mode`).
        case insecureMode(UInt32)
        /// Larger than a sane limit for its kind.
        case tooLarge(limit: Int)
        /// Exists where a new file was to be created.
        case exists
    }

    public var path: String
    public var kind: Kind

    public init(path: String, _ kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// The `errno` of a failed system call, if that is what this is.
    public var errno: Int32? {
        if case .system(_, let code) = kind { return code }
        return nil
    }

    public var description: String {
        switch kind {
        case .system(let operation, let code):
            "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        case .wrongType(let expected, let found):
            "refusing \(path): it is a \(found), not a \(expected)"
        case .wrongOwner(let uid):
            "refusing \(path): owned by uid \(uid), not by this user"
        case .insecureMode(let mode):
            "refusing \(path): mode \(String(mode & 0o7777, radix: 8)) lets other users in (fix with chmod go-rwx)"
        case .tooLarge(let limit):
            "refusing \(path): larger than \(limit) bytes"
        case .exists:
            "\(path) already exists"
        }
    }
}
