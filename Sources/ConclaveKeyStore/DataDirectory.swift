import Foundation

/// Where Conclave keeps device and call keys.
public enum DataDirectory {
    /// `override` (from `--data-dir`) if given, else `$CONCLAVE_HOME`, else `$XDG_DATA_HOME/conclave`,
    /// else `~/.local/share/conclave`. Empty variables count as unset, as the XDG specification says.
    public static func resolve(
        override: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KeyStoreError) -> URL {
        func nonEmpty(_ value: String?) -> String? {
            guard let value, !value.isEmpty else { return nil }
            return value
        }
        if let path = nonEmpty(override) { return URL(fileURLWithPath: path, isDirectory: true) }
        if let path = nonEmpty(environment["CONCLAVE_HOME"]) { return URL(fileURLWithPath: path, isDirectory: true) }
        if let path = nonEmpty(environment["XDG_DATA_HOME"]) {
            return URL(fileURLWithPath: path, isDirectory: true).appendingPathComponent("conclave", isDirectory: true)
        }
        guard let home = nonEmpty(environment["HOME"]) else { throw .noDataDirectory }
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".local/share/conclave", isDirectory: true)
    }
}
