import ConclaveFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The folder a service writes every recording under, and the only place a job may name.
///
/// A job's `output` is relative; it is resolved by walking the root component by component with
/// `openat(O_NOFOLLOW | O_DIRECTORY)`, so a symlink anywhere on the way (planted by whoever else
/// writes to shared storage, or left by an earlier job) is refused instead of followed out of the
/// root. The walk only reads: a refused job leaves nothing behind.
public struct StorageRoot: Sendable, Hashable {
    /// The root's canonical absolute path.
    public let path: String

    /// Creates `path` as a 0700 folder when missing (an existing one wider than 0700 is narrowed)
    /// and takes its canonical path, symlinks of the root itself resolved once here.
    public init(preparing path: String) throws(RecorderServiceError) {
        do {
            try PrivateFiles.ensurePrivateDirectory(path, createParents: true, policy: .narrow)
        } catch {
            throw RecorderServiceError("the storage root \(path): \(error)")
        }
        guard let resolved = realpath(path, nil) else {
            throw RecorderServiceError("the storage root \(path): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        self.path = String(cString: resolved)
    }

    /// The absolute folder for a job's `output`, checked: relative, no `.` or `..` component, and
    /// every component that exists a real folder (not a symlink) inside the root. Components that
    /// do not exist yet are fine: the recorder creates them 0700.
    public func resolve(_ output: String) throws(RecorderServiceError) -> String {
        guard !output.isEmpty, !output.hasPrefix("/") else {
            throw RecorderServiceError("output \"\(output)\" must be a relative path under the storage root")
        }
        let components = output.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty, !components.contains(where: { $0 == "." || $0 == ".." }) else {
            throw RecorderServiceError("output \"\(output)\" leaves the storage root (\".\" or \"..\")")
        }
        var descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw RecorderServiceError("the storage root \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var walked = path
        for component in components {
            let next = openat(descriptor, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 {
                let code = errno
                if code == ENOENT { break }
                if code == ELOOP || code == ENOTDIR {
                    throw RecorderServiceError(
                        "output \"\(output)\": \(walked)/\(component) is a symlink or not a folder; refusing to leave the storage root"
                    )
                }
                throw RecorderServiceError(
                    "output \"\(output)\": \(walked)/\(component): \(String(cString: strerror(code)))"
                )
            }
            close(descriptor)
            descriptor = next
            walked += "/" + component
        }
        return path + "/" + components.joined(separator: "/")
    }
}

/// Why the service refused or failed something, in one line.
public struct RecorderServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}
