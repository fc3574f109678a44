import Foundation

/// A key store problem, with the file it concerns. Never carries key bytes.
public enum KeyStoreError: Error, Equatable, CustomStringConvertible {
    /// A key file or key directory can be read (or written) by the group or by others.
    case insecurePermissions(path: String, mode: UInt32)
    /// A key file or key directory belongs to another user.
    case wrongOwner(path: String, owner: UInt32)
    /// A path that must be a regular file (or directory) is something else, such as a symlink.
    case wrongFileType(path: String, expected: String)
    /// A path that must be a regular file or folder is another kind of file (a FIFO, a folder),
    /// refused without blocking on it.
    case wrongKind(path: String, found: String, expected: String)
    /// A file that should be ours does not parse.
    case corrupt(path: String, detail: String)
    /// A file parses but is not a Conclave file of the expected kind.
    case foreign(path: String, found: String)
    /// A file written by a newer Conclave.
    case unsupportedVersion(path: String, version: Int)
    /// No device key yet.
    case noDeviceKey(path: String)
    /// `keys init` without `--force` over an existing device key.
    case deviceKeyExists(path: String)
    /// A system call failed.
    case io(path: String, operation: String, errno: Int32)
    /// The data directory cannot be determined (no `$HOME`).
    case noDataDirectory

    public var description: String {
        switch self {
        case .insecurePermissions(let path, let mode):
            "refusing \(path): mode \(String(mode & 0o7777, radix: 8)) lets other users read it; key files must be "
                + "0600 and key directories 0700 (fix with chmod go-rwx)"
        case .wrongOwner(let path, let owner):
            "refusing \(path): owned by uid \(owner), not by this user"
        case .wrongFileType(let path, let expected):
            "refusing \(path): not a \(expected)"
        case .wrongKind(let path, let found, let expected):
            "refusing \(path): it is a \(found), not a \(expected)"
        case .corrupt(let path, let detail):
            "\(path) is corrupt: \(detail)"
        case .foreign(let path, let found):
            "\(path) is not a Conclave key file (found \(found))"
        case .unsupportedVersion(let path, let version):
            "\(path) has format version \(version), newer than this conclave understands"
        case .noDeviceKey(let path):
            "no device key at \(path): run 'conclave keys init'"
        case .deviceKeyExists(let path):
            "a device key already exists at \(path); use --force to replace it (peers must then learn the new public key)"
        case .io(let path, let operation, let errno):
            "\(operation) \(path): \(String(cString: strerror(errno)))"
        case .noDataDirectory:
            "cannot find a data directory: set CONCLAVE_HOME, XDG_DATA_HOME or HOME, or pass --data-dir"
        }
    }
}
