import Foundation

/// A plugins folder with only what a node loads: links to the installed `rabbit`, the enabled
/// plugins and every application they depend on.
///
/// Debian installs about 80 plugins and libraries in one folder, and RabbitMQ puts each one's
/// `ebin` on the code path, before Erlang's own. At boot RabbitMQ looks for boot steps in every
/// module of every loaded application, loading some 1,000 modules, and the code server finds each
/// by trying the path's folders in turn: with 93 folders a boot took 7 s on a loaded machine, with
/// the 25 that the node loads 5 s. Those 25 (the enabled plugins and the closure of the
/// `applications` in their `.app` files, and in `rabbit`'s) give the same node.
enum PluginFolder {
    /// Makes `folder` with links to what `enabledPlugins` (the text of an `enabled_plugins` file)
    /// needs, and returns it; nil, and the installed folder is used as it is, when the installed
    /// plugins cannot be found or a dependency is missing.
    static func make(at folder: URL, enabledPlugins: String) -> URL? {
        guard let installed = installedFolder(),
            let entries = try? FileManager.default.contentsOfDirectory(atPath: installed.path)
        else { return nil }
        // `rabbit-3.10.8` → `rabbit`; `rabbitmq_web_stomp-3.10.8` → `rabbitmq_web_stomp`.
        var folders: [String: String] = [:]
        for entry in entries {
            folders[applicationName(of: entry)] = entry
        }
        let enabled = enabledPlugins.split(whereSeparator: { "[],. \n\t".contains($0) }).map(String.init)
        var needed = Set<String>()
        var pending = ["rabbit", "rabbitmq_prelaunch"] + enabled
        while let application = pending.popLast() {
            guard !needed.contains(application) else { continue }
            guard let entry = folders[application] else {
                // Erlang's own (kernel, mnesia, ssl…) are not in the plugins folder.
                if isErlangApplication(application) { continue }
                return nil
            }
            needed.insert(application)
            let appFile = installed.appendingPathComponent("\(entry)/ebin/\(application).app")
            guard let text = try? String(contentsOf: appFile, encoding: .utf8) else { return nil }
            pending += dependencies(inAppFile: text)
        }
        do {
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for application in needed {
                guard let entry = folders[application] else { continue }
                try FileManager.default.createSymbolicLink(
                    at: folder.appendingPathComponent(entry),
                    withDestinationURL: installed.appendingPathComponent(entry)
                )
            }
        } catch {
            return nil
        }
        return folder
    }

    /// Debian's `/usr/lib/rabbitmq/lib/rabbitmq_server-VERSION/plugins` (the newest, if several).
    static func installedFolder() -> URL? {
        let root = URL(fileURLWithPath: "/usr/lib/rabbitmq/lib")
        guard let versions = try? FileManager.default.contentsOfDirectory(atPath: root.path) else { return nil }
        guard let server = versions.filter({ $0.hasPrefix("rabbitmq_server-") }).sorted().last else { return nil }
        let plugins = root.appendingPathComponent(server).appendingPathComponent("plugins")
        return FileManager.default.fileExists(atPath: plugins.path) ? plugins : nil
    }

    /// The name of the application in folder `entry` (its version cut off).
    static func applicationName(of entry: String) -> String {
        guard let dash = entry.lastIndex(of: "-"), entry[entry.index(after: dash)...].first?.isNumber == true else {
            return entry
        }
        return String(entry[..<dash])
    }

    /// The `applications` and `included_applications` of an `.app` file.
    static func dependencies(inAppFile text: String) -> [String] {
        var names: [String] = []
        for key in ["{applications", "{included_applications"] {
            var rest = Substring(text)
            while let start = rest.range(of: key) {
                rest = rest[start.upperBound...]
                // `{applications, [kernel, stdlib, …]}`: the list follows the key.
                guard let open = rest.firstIndex(of: "["), rest[..<open].allSatisfy({ $0 == "," || $0.isWhitespace }),
                    let close = rest[open...].firstIndex(of: "]")
                else { continue }
                names += rest[rest.index(after: open)..<close].split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespacesAndNewlines)
                }.filter { !$0.isEmpty }
                rest = rest[close...]
            }
        }
        return names
    }

    /// An application of Erlang/OTP (in `/usr/lib/erlang/lib`), not of RabbitMQ's folder.
    static func isErlangApplication(_ name: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/erlang/lib") else {
            return false
        }
        return entries.contains { applicationName(of: $0) == name }
    }
}
