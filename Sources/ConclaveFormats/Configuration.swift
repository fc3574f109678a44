import ConclaveCore
import ConclaveE2EE
import ConclaveFiles
import ConclaveICE
import Foundation

/// Conclave's configuration file (JSON; `config/conclave.example.json` documents every key).
///
/// Every key is optional: command-line flags override what the file says, and what neither says
/// takes the built-in default. Loading never stops at the first problem: ``ConfigurationFile/load(path:)``
/// collects every issue with the key path it concerns, so `conclave config check` can list them all.
public struct ConclaveConfiguration: Sendable, Hashable {
    public var janusURL: String?
    public var apiSecret: String?
    public var token: String?
    public var caFile: String?
    /// Seconds to wait for each Janus reply.
    public var requestTimeout: Double?
    /// Local addresses ICE gathers on.
    public var iceAddresses: [String] = []
    public var stunServer: STUNServer?
    public var turnServers: [TURNServer] = []
    /// `ice.transportPolicy`: `relay` sends media only through the TURN servers (nil: `all`).
    public var iceTransportPolicy: ICETransportPolicy?
    /// Where device and call keys live (`--data-dir`).
    public var dataDirectory: String?
    /// Where `--record` puts recordings when no folder is given.
    public var recordingsDirectory: String?
    /// The media crypto: ecall, sframe or none.
    public var crypto: CallCryptoChoice?
    public var videoCodec: MediaCodec?
    public var videoBitrate: Int?
    public var videoWidth: Int?
    public var videoHeight: Int?
    public var videoFrameRate: Int?
    public var audioBitrate: Int?
    /// The `signaling` section: the broker that carries invitations and key messages.
    public var signaling: SignalingSettings?

    public init() {}
}

/// The `signaling` section: where the STOMP broker is and how this device logs in. The passcode
/// itself is never in the file (it would sit beside everything else and end up in backups and
/// bug reports): `passcodeFile` names a file that holds it.
public struct SignalingSettings: Sendable, Hashable {
    /// `ws://host:port/ws` or `wss://...`.
    public var url: String?
    /// The broker's virtual host; ECall's is `ecall`.
    public var virtualHost: String = "ecall"
    /// The broker login; nil means ECall's `device-<device id>`.
    public var login: String?
    public var passcodeFile: String?
    /// How often the call's key host rotates the key.
    public var rotationSeconds: Double = 300
    /// Accept unsigned key messages from the roster's host, as ECall devices send them.
    public var ecallCompatible = false

    public init() {}

    /// The range `rotationSeconds` (and `--rotation`) accepts: a rotation needs its 10 s lead to
    /// reach everyone, and a day is longer than any call.
    public static let rotationRange: ClosedRange<Double> = 2...86_400
}

/// The media crypto of a call, `none` included (for calls without end-to-end encryption).
public enum CallCryptoChoice: String, Sendable, Hashable, CaseIterable {
    case ecall, sframe, none

    /// The frame format, or nil for `none`.
    public var format: FrameCryptoFormat? {
        switch self {
        case .ecall: .ecall
        case .sframe: .sframe
        case .none: nil
        }
    }
}

/// One problem in a configuration file, with the key path it concerns (`janus.url`, `ice.turn[1].url`).
public struct ConfigurationIssue: Sendable, Hashable, CustomStringConvertible {
    public var keyPath: String
    public var problem: String

    public init(keyPath: String, problem: String) {
        self.keyPath = keyPath
        self.problem = problem
    }

    public var description: String { keyPath.isEmpty ? problem : "\(keyPath): \(problem)" }
}

/// A configuration file that did not load, with every issue found.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var issues: [ConfigurationIssue]

    /// One line when there is one issue (an unreadable file, a single bad key), else one per issue.
    public var description: String {
        if issues.count == 1 { return "configuration \(path) is not valid: \(issues[0])" }
        return "configuration \(path) is not valid:\n" + issues.map { "  \($0)" }.joined(separator: "\n")
    }
}

/// Reading and checking configuration files.
public enum ConfigurationFile {
    /// The file used when none is named: `$CONCLAVE_CONFIG`, else `$XDG_CONFIG_HOME/conclave/conclave.json`,
    /// else `~/.config/conclave/conclave.json`; nil when there is no home to look in.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let path = environment["CONCLAVE_CONFIG"], !path.isEmpty { return path }
        if let base = environment["XDG_CONFIG_HOME"], !base.isEmpty { return base + "/conclave/conclave.json" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.config/conclave/conclave.json" }
        return nil
    }

    /// Loads and validates `path`; throws ``ConfigurationError`` listing every issue.
    public static func load(path: String) throws(ConfigurationError) -> ConclaveConfiguration {
        // A FIFO or a folder is refused at once, without blocking; a configuration is small.
        let data: Data
        do throws(FileError) {
            guard let contents = try PrivateFiles.readRegularFile(path, limit: 1 << 20) else {
                throw FileError(path: path, .system("open", ENOENT))
            }
            data = contents
        } catch {
            throw ConfigurationError(
                path: path,
                issues: [ConfigurationIssue(keyPath: "", problem: "cannot read the file: \(error.description)")]
            )
        }
        let (configuration, issues) = parse(data)
        guard issues.isEmpty else { throw ConfigurationError(path: path, issues: issues) }
        return configuration
    }

    /// Parses configuration bytes, returning what could be read and every issue found.
    public static func parse(_ data: Data) -> (ConclaveConfiguration, [ConfigurationIssue]) {
        var reader = Reader()
        let configuration = reader.read(data)
        return (configuration, reader.issues)
    }

    /// Checks the values of a decoded ``ConfigurationDocument``, collecting an issue for each key
    /// of the wrong type, each unknown key and each value out of its range.
    private struct Reader {
        var issues: [ConfigurationIssue] = []

        mutating func issue(_ keyPath: String, _ problem: String) {
            issues.append(ConfigurationIssue(keyPath: keyPath, problem: problem))
        }

        mutating func read(_ data: Data) -> ConclaveConfiguration {
            var configuration = ConclaveConfiguration()
            let document: ConfigurationDocument
            do {
                document = try JSONDecoder().decode(ConfigurationDocument.self, from: data)
            } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
                let detail = (context.underlyingError as NSError?)?.userInfo["NSDebugDescription"] as? String
                issue("", "not valid JSON" + (detail.map { ": \($0)" } ?? ""))
                return configuration
            } catch {
                // JSON, but a number, string, array or null at the top.
                issue("", "the top level must be a JSON object")
                return configuration
            }
            let root = document.root
            unknownKeys(root, at: "")
            let object = root.section

            if let janus = self.object(object.janus, at: "janus") {
                if let url = string(janus.url, at: "janus.url") {
                    if url.hasPrefix("ws://") || url.hasPrefix("wss://"), URL(string: url)?.host != nil {
                        configuration.janusURL = url
                    } else {
                        issue("janus.url", "must be a ws:// or wss:// URL with a host, got \"\(url)\"")
                    }
                }
                configuration.apiSecret = string(janus.apiSecret, at: "janus.apiSecret")
                configuration.token = string(janus.token, at: "janus.token")
                if let caFile = string(janus.caFile, at: "janus.caFile") {
                    if FileManager.default.isReadableFile(atPath: caFile) {
                        configuration.caFile = caFile
                    } else {
                        issue("janus.caFile", "no readable file at \(caFile)")
                    }
                }
                if let timeout = value(janus.timeoutSeconds, at: "janus.timeoutSeconds", "must be a number") {
                    if timeout > 0 && timeout <= 600 {
                        configuration.requestTimeout = timeout
                    } else {
                        issue("janus.timeoutSeconds", "must be between 0 and 600 seconds")
                    }
                }
            }

            if let ice = self.object(object.ice, at: "ice") {
                if let addresses = value(ice.addresses, at: "ice.addresses", "must be an array") {
                    for (index, item) in addresses.enumerated() {
                        guard let address = string(item, at: "ice.addresses[\(index)]") else { continue }
                        if IPAddressText.isValid(address) {
                            configuration.iceAddresses.append(address)
                        } else {
                            issue("ice.addresses[\(index)]", "not an IP address: \"\(address)\"")
                        }
                    }
                }
                if let stun = string(ice.stun, at: "ice.stun") {
                    do {
                        configuration.stunServer = try ICEServerText.stun(stun)
                    } catch {
                        issue("ice.stun", error.description)
                    }
                }
                if let turns = value(ice.turn, at: "ice.turn", "must be an array") {
                    for (index, item) in turns.enumerated() {
                        let at = "ice.turn[\(index)]"
                        guard let turn = self.object(item, at: at) else { continue }
                        guard let url = string(turn.url, at: "\(at).url") else {
                            issue("\(at).url", "missing")
                            continue
                        }
                        let username = string(turn.username, at: "\(at).username") ?? ""
                        let password = string(turn.password, at: "\(at).password") ?? ""
                        do {
                            let server = try ICEServerText.turn(url, username: username, password: password)
                            if server.transport == .tls {
                                issue(
                                    "\(at).url",
                                    "TURN over TLS (turns:) is not supported: libnice would connect without TLS; "
                                        + "use turn:...?transport=tcp or udp"
                                )
                            } else {
                                configuration.turnServers.append(server)
                            }
                        } catch {
                            issue("\(at).url", error.description)
                        }
                    }
                }
                if let policy = string(ice.transportPolicy, at: "ice.transportPolicy") {
                    if let value = ICETransportPolicy(rawValue: policy) {
                        configuration.iceTransportPolicy = value
                        if value == .relay, configuration.turnServers.isEmpty {
                            issue("ice.transportPolicy", "\"relay\" needs at least one server in ice.turn")
                        }
                    } else {
                        issue("ice.transportPolicy", "must be \"all\" or \"relay\", not \"\(policy)\"")
                    }
                }
            }

            configuration.dataDirectory = string(object.dataDirectory, at: "dataDirectory")
            configuration.recordingsDirectory = string(object.recordingsDirectory, at: "recordingsDirectory")
            if let crypto = string(object.crypto, at: "crypto") {
                if let choice = CallCryptoChoice(rawValue: crypto) {
                    configuration.crypto = choice
                } else {
                    issue("crypto", "must be \"ecall\", \"sframe\" or \"none\", got \"\(crypto)\"")
                }
            }

            if let video = self.object(object.video, at: "video") {
                if let codec = string(video.codec, at: "video.codec") {
                    if let parsed = MediaCodec(rawValue: codec), parsed.kind == .video {
                        configuration.videoCodec = parsed
                    } else {
                        issue("video.codec", "must be \"vp8\" or \"h264\", got \"\(codec)\"")
                    }
                }
                configuration.videoBitrate = integer(video.bitrate, at: "video.bitrate", in: 50_000...20_000_000)
                configuration.videoWidth = integer(video.width, at: "video.width", in: 16...3840, even: true)
                configuration.videoHeight = integer(video.height, at: "video.height", in: 16...2160, even: true)
                configuration.videoFrameRate = integer(video.frameRate, at: "video.frameRate", in: 1...60)
            }
            if let audio = self.object(object.audio, at: "audio") {
                configuration.audioBitrate = integer(audio.bitrate, at: "audio.bitrate", in: 6_000...510_000)
            }
            if let signaling = self.object(object.signaling, at: "signaling") {
                configuration.signaling = read(signaling)
            }
            return configuration
        }

        mutating func read(_ section: ConfigurationDocument.Signaling) -> SignalingSettings {
            var settings = SignalingSettings()
            if let url = string(section.url, at: "signaling.url") {
                if url.hasPrefix("ws://") || url.hasPrefix("wss://"), URL(string: url)?.host != nil {
                    settings.url = url
                } else {
                    issue(
                        "signaling.url",
                        "must be a ws:// or wss:// URL with a host (ws://HOST:15674/ws), got \"\(url)\""
                    )
                }
            }
            if let host = string(section.virtualHost, at: "signaling.virtualHost") { settings.virtualHost = host }
            settings.login = string(section.login, at: "signaling.login")
            settings.passcodeFile = string(section.passcodeFile, at: "signaling.passcodeFile")
            if let seconds = value(section.rotationSeconds, at: "signaling.rotationSeconds", "must be a number") {
                let range = SignalingSettings.rotationRange
                if range.contains(seconds) {
                    settings.rotationSeconds = seconds
                } else {
                    issue(
                        "signaling.rotationSeconds",
                        "must be between \(Int(range.lowerBound)) and \(Int(range.upperBound)) seconds, got \(seconds)"
                    )
                }
            }
            if let compatible = value(section.ecallCompatible, at: "signaling.ecallCompatible", "must be true or false")
            {
                settings.ecallCompatible = compatible
            }
            return settings
        }

        mutating func unknownKeys<Section>(_ object: ConfigurationObject<Section>, at path: String) {
            let known = ConfigurationObject<Section>.knownKeys
            for key in object.unknownKeys {
                let suggestion = known.first { $0.lowercased() == key.lowercased() }
                issue(
                    path.isEmpty ? key : "\(path).\(key)",
                    "unknown key"
                        + (suggestion.map { " (did you mean \"\($0)\"?)" }
                            ?? "; known keys: \(known.joined(separator: ", "))")
                )
            }
        }

        /// A present value of the right type; an issue saying `problem` for one of the wrong type.
        mutating func value<Value>(_ value: ConfigurationValue<Value>?, at path: String, _ problem: String) -> Value? {
            switch value {
            case nil, .null?: return nil
            case .value(let value)?: return value
            case .wrongType?:
                issue(path, problem)
                return nil
            }
        }

        /// The section of an object, after an issue for each key it does not know.
        mutating func object<Section>(_ value: ConfigurationValue<ConfigurationObject<Section>>?, at path: String)
            -> Section?
        {
            guard let object = self.value(value, at: path, "must be an object") else { return nil }
            unknownKeys(object, at: path)
            return object.section
        }

        mutating func string(_ value: ConfigurationValue<String>?, at path: String) -> String? {
            guard let text = self.value(value, at: path, "must be a string") else { return nil }
            if text.isEmpty {
                issue(path, "must not be empty (leave the key out instead)")
                return nil
            }
            return text
        }

        mutating func integer(
            _ value: ConfigurationValue<Int>?,
            at path: String,
            in range: ClosedRange<Int>,
            even: Bool = false
        )
            -> Int?
        {
            guard let number = self.value(value, at: path, "must be an integer") else { return nil }
            guard range.contains(number) else {
                issue(path, "must be between \(range.lowerBound) and \(range.upperBound), got \(number)")
                return nil
            }
            if even && number % 2 != 0 {
                issue(path, "must be even, got \(number)")
                return nil
            }
            return number
        }
    }
}

/// A problem in a STUN or TURN server description.
public struct ICEServerTextError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
}

/// STUN and TURN servers written as text, in the forms flags and configuration files use.
public enum ICEServerText {
    /// `host[:port]` or `stun:host[:port]` (port 3478 by default).
    public static func stun(_ text: String) throws(ICEServerTextError) -> STUNServer {
        var rest = Substring(text)
        if rest.hasPrefix("stun:") { rest = rest.dropFirst(5) }
        let (host, port) = try hostAndPort(rest, in: text)
        return STUNServer(address: host, port: port)
    }

    /// `turn:host[:port][?transport=udp|tcp]` or `turns:host[:port]` (TLS).
    public static func turn(_ text: String, username: String, password: String) throws(ICEServerTextError) -> TURNServer
    {
        var rest = Substring(text)
        var transport = TURNServer.Transport.udp
        if rest.hasPrefix("turns:") {
            rest = rest.dropFirst(6)
            transport = .tls
        } else if rest.hasPrefix("turn:") {
            rest = rest.dropFirst(5)
        } else {
            throw ICEServerTextError(description: "\"\(text)\" is not a turn: or turns: URL")
        }
        if let query = rest.firstIndex(of: "?") {
            let parameter = rest[rest.index(after: query)...]
            rest = rest[..<query]
            switch parameter {
            case "transport=udp": transport = transport == .tls ? .tls : .udp
            case "transport=tcp": transport = transport == .tls ? .tls : .tcp
            default: throw ICEServerTextError(description: "\"\(text)\": unknown parameter \"\(parameter)\"")
            }
        }
        let (host, port) = try hostAndPort(rest, in: text)
        return TURNServer(address: host, port: port, transport: transport, username: username, password: password)
    }

    private static func hostAndPort(_ text: Substring, in whole: String) throws(ICEServerTextError) -> (String, UInt16)
    {
        var host = text
        var port: UInt16 = 3478
        if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            guard let parsed = UInt16(text[text.index(after: colon)...]), parsed > 0 else {
                throw ICEServerTextError(description: "\"\(whole)\": the port must be 1 to 65535")
            }
            port = parsed
        }
        guard !host.isEmpty, !host.contains("/"), !host.contains("@") else {
            throw ICEServerTextError(description: "\"\(whole)\": expected host or host:port")
        }
        return (String(host), port)
    }
}

/// IP address syntax checks.
enum IPAddressText {
    static func isValid(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
