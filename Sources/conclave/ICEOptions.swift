import ArgumentParser
import ConclaveFormats
import ConclaveICE
import ConclavePeerConnection
import Foundation

/// `--config`: the configuration file `join`, `rejoin` and `record` take their defaults from.
struct ConfigFileOption: ParsableArguments {
    @Option(help: "Configuration file (default: $CONCLAVE_CONFIG or ~/.config/conclave/conclave.json if present).")
    var config: String?

    /// The file named by `--config`, or the default one if it exists; an empty configuration
    /// when there is none. A file that does not load is an error listing every problem.
    func load() throws -> ConclaveConfiguration {
        let path: String
        if let config {
            path = config
        } else if let defaultPath = ConfigurationFile.defaultPath(), FileManager.default.fileExists(atPath: defaultPath)
        {
            path = defaultPath
        } else {
            return ConclaveConfiguration()
        }
        do {
            return try ConfigurationFile.load(path: path)
        } catch {
            throw CallCommandError(error.description)
        }
    }
}

/// How ICE gathers and which candidates it uses: the options every command that carries media
/// shares. Each falls back to the configuration file's `ice` section.
struct ICEOptions: ParsableArguments {
    @Option(
        name: .customLong("ice-address"),
        help: "Local address to gather ICE candidates on (repeat; default $CONCLAVE_ICE_ADDRESS, else every interface)."
    )
    var iceAddresses: [String] = []

    @Option(help: "STUN server, host[:port].")
    var stun: String?

    @Option(help: "TURN server, turn:host[:port][?transport=udp|tcp] (repeat; turns: is refused, libnice has no TLS).")
    var turn: [String] = []

    @Option(name: .customLong("turn-credentials"), help: "TURN username:password for every --turn.")
    var turnCredentials: String?

    @Option(
        name: .customLong("ice-policy"),
        help: "Candidates to use: all, or relay (media only through the TURN servers; needs --turn or ice.turn)."
    )
    var policy: ICETransportPolicy?

    /// The transport configuration: flags first, then `$CONCLAVE_ICE_ADDRESS`, then `settings`.
    func transport(_ settings: ConclaveConfiguration) throws -> MediaTransport.Configuration {
        var addresses = iceAddresses
        if addresses.isEmpty, let address = ProcessInfo.processInfo.environment["CONCLAVE_ICE_ADDRESS"],
            !address.isEmpty
        {
            addresses = [address]
        }
        if addresses.isEmpty { addresses = settings.iceAddresses }
        var configuration = MediaTransport.Configuration(
            localAddresses: addresses,
            stunServer: settings.stunServer,
            turnServers: settings.turnServers,
            iceTransportPolicy: policy ?? settings.iceTransportPolicy ?? .all
        )
        do {
            if let stun { configuration.stunServer = try ICEServerText.stun(stun) }
            if !turn.isEmpty {
                let parts = turnCredentials?.split(separator: ":", maxSplits: 1).map(String.init) ?? []
                configuration.turnServers = try turn.map {
                    try ICEServerText.turn($0, username: parts.first ?? "", password: parts.count > 1 ? parts[1] : "")
                }
            }
        } catch {
            throw ValidationError("\(error)")
        }
        if configuration.turnServers.contains(where: { $0.transport == .tls }) {
            throw ValidationError(
                "--turn turns:... is not supported: libnice would connect without TLS; use turn:...?transport=tcp"
            )
        }
        if configuration.iceTransportPolicy == .relay, configuration.turnServers.isEmpty {
            throw ValidationError("--ice-policy relay needs a TURN server (--turn, or ice.turn in the configuration)")
        }
        return configuration
    }
}

extension ICETransportPolicy: ExpressibleByArgument {}
