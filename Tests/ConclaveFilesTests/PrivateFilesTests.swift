import ConclaveFiles
import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Private files")
struct PrivateFilesTests {
    @Test("Folders are 0700 and files 0600 whatever the umask", arguments: [mode_t(0o000), 0o022])
    func modesIgnoreUmask(mask: mode_t) throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/a/b"
        try FilePrivacy.withUmask(mask) {
            try PrivateFiles.ensurePrivateDirectory(folder)
            try PrivateFiles.createPrivateFile(folder + "/created")
            try PrivateFiles.writeAtomically(Data("secret".utf8), to: folder + "/written")
            let descriptor = try PrivateFiles.openPrivateFile(folder + "/opened")
            close(descriptor)
        }
        #expect(FilePrivacy.nonPrivateEntries(under: root + "/a") == [])
    }

    @Test("An existing folder of ours that is open to others is narrowed, or refused for keys")
    func widerFolder() throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/wide"
        mkdir(folder, 0o755)
        chmod(folder, 0o755)
        #expect(throws: FileError(path: folder, .insecureMode(UInt32(S_IFDIR | 0o755)))) {
            try PrivateFiles.ensurePrivateDirectory(folder, policy: .refuse)
        }
        try PrivateFiles.ensurePrivateDirectory(folder)
        #expect(FilePrivacy.mode(folder) == 0o700)
    }

    @Test("An existing file with a wider mode is narrowed when opened for writing")
    func widerFile() throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = root + "/file"
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        chmod(file, 0o666)
        close(try PrivateFiles.openPrivateFile(file, truncate: false))
        #expect(FilePrivacy.mode(file) == 0o600)
    }

    @Test("Another user cannot read a private file, and can read an ordinary one")
    func nobodyCannotRead() throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FilePrivacy.withUmask(0) {
            try PrivateFiles.ensurePrivateDirectory(root + "/private")
            try PrivateFiles.writeAtomically(Data("secret".utf8), to: root + "/private/file")
        }
        // The control: the same user reads a world-readable file, so a refusal below is the modes'.
        _ = FileManager.default.createFile(atPath: root + "/public", contents: Data("open".utf8))
        chmod(root + "/public", 0o644)
        #expect(try FilePrivacy.readAsNobody(root + "/public") == Data("open".utf8))
        #expect(try FilePrivacy.readAsNobody(root + "/private/file") == nil)
        #expect(try FilePrivacy.listAsNobody(root + "/private") == nil)
    }

    @Test("A FIFO or a folder is refused at once with a clear error, never read")
    func specialFiles() throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fifo = root + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Without O_NONBLOCK this open would wait for a writer forever.
        #expect(throws: FileError(path: fifo, .wrongType(expected: "regular file", found: "FIFO"))) {
            _ = try PrivateFiles.readRegularFile(fifo)
        }
        #expect(throws: FileError(path: fifo, .wrongType(expected: "regular file", found: "FIFO"))) {
            _ = try PrivateFiles.openPrivateFile(fifo)
        }
        #expect(throws: FileError(path: root, .wrongType(expected: "regular file", found: "folder"))) {
            _ = try PrivateFiles.readRegularFile(root)
        }
        let error = FileError(path: fifo, .wrongType(expected: "regular file", found: "FIFO"))
        #expect(error.description == "refusing \(fifo): it is a FIFO, not a regular file")
        #expect(try PrivateFiles.readRegularFile(root + "/missing") == nil)
    }

    @Test("An atomic write replaces the whole file and leaves no temporary file behind")
    func atomicWrite() throws {
        let root = try FilePrivacy.openTemporaryFolder("private-files")
        defer { try? FileManager.default.removeItem(atPath: root) }
        try PrivateFiles.writeAtomically(Data("first".utf8), to: root + "/file")
        try PrivateFiles.writeAtomically(Data("second".utf8), to: root + "/file")
        #expect(try PrivateFiles.readRegularFile(root + "/file") == Data("second".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["file"])
    }
}
