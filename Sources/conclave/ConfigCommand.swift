import ArgumentParser
import ConclaveFormats
import Foundation

/// `conclave config`: the configuration file.
struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check Conclave's configuration file.",
        subcommands: [Check.self]
    )

    /// `config check [FILE]`: every problem, with the key it concerns.
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a configuration file and say what is wrong and where.",
            discussion: "FILE defaults to $CONCLAVE_CONFIG, else ~/.config/conclave/conclave.json."
        )

        @Argument(help: "The configuration file.")
        var file: String?

        func run() throws {
            guard let path = file ?? ConfigurationFile.defaultPath() else {
                throw CallCommandError(
                    "no configuration file named and no default location (set HOME or CONCLAVE_CONFIG)"
                )
            }
            do {
                let configuration = try ConfigurationFile.load(path: path)
                print("\(path): valid")
                var set: [String] = []
                if let url = configuration.janusURL { set.append("janus \(url)") }
                if configuration.apiSecret != nil { set.append("API secret set") }
                if configuration.token != nil { set.append("token set") }
                if let stun = configuration.stunServer { set.append("STUN \(stun.address):\(stun.port)") }
                if !configuration.turnServers.isEmpty {
                    set.append("\(configuration.turnServers.count) TURN server(s)")
                }
                if configuration.iceTransportPolicy == .relay { set.append("relay only") }
                if let crypto = configuration.crypto { set.append("crypto \(crypto.rawValue)") }
                if let codec = configuration.videoCodec { set.append("video \(codec)") }
                if let signaling = configuration.signaling {
                    set.append("broker \(signaling.url ?? "(no url)") vhost \(signaling.virtualHost)")
                    if signaling.passcodeFile != nil { set.append("broker passcode file set") }
                    set.append("key rotation every \(Int(signaling.rotationSeconds)) s")
                    if signaling.ecallCompatible { set.append("ECall-compatible signaling") }
                }
                if !set.isEmpty { print("  " + set.joined(separator: ", ")) }
            } catch {
                let lines = error.issues.map { "\(path): \($0)\n" }.joined()
                FileHandle.standardError.write(Data(lines.utf8))
                throw ExitCode.failure
            }
        }
    }
}
