import ArgumentParser
import ConclaveFiles
import Foundation

/// Secrets (call keys, the Janus API secret, auth tokens) read from a file or from standard input.
///
/// A secret given as a flag's value is visible to every user of the machine in `/proc/PID/cmdline`
/// and `ps` for as long as the process runs; a file (ideally 0600) or standard input is not. The
/// flag forms stay for scripts that already use them, but `--help` points to these.
enum SecretInput {
    /// The largest secret file read: a secret is a line, not a document.
    static let limit = 64 << 10

    /// The secret in `path`, or on standard input when `path` is `-`, with one trailing line
    /// break (`\n` or `\r\n`) removed. `flag` names the option in errors.
    static func read(_ path: String, flag: String) throws -> String {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
            guard data.count <= limit else {
                throw CallCommandError("\(flag) -: standard input holds more than a secret")
            }
        } else {
            do {
                data = try PrivateFiles.readExistingRegularFile(path, limit: limit)
            } catch {
                throw CallCommandError("\(flag): \(error.description)")
            }
        }
        var text = String(decoding: data, as: UTF8.self)
        if text.hasSuffix("\r\n") {
            text.removeLast(2)
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        guard !text.isEmpty else {
            throw CallCommandError("\(flag) \(path): \(path == "-" ? "standard input" : "the file") is empty")
        }
        return text
    }

    /// The secret from `value` (the flag form) or `file` (the file or `-` form), refusing both at once.
    static func resolve(value: String?, file: String?, flag: String, fileFlag: String) throws -> String? {
        if value != nil, file != nil {
            throw CallCommandError("give \(flag) or \(fileFlag), not both")
        }
        if let file { return try read(file, flag: fileFlag) }
        return value
    }

    /// Refuses two options that both want standard input: it can be read only once.
    static func checkSingleStandardInput(_ options: [(flag: String, path: String?)]) throws {
        let readers = options.filter { $0.path == "-" }.map(\.flag)
        guard readers.count <= 1 else {
            throw CallCommandError(
                "\(readers.joined(separator: " and ")) both read standard input: give at most one of them as '-'"
            )
        }
    }
}
