import ArgumentParser
import ConclaveFiles
import ConclaveFormats
import Foundation
import JanusClient

/// How to reach Janus: the options every command that talks to Janus shares.
struct JanusOptions: ParsableArguments {
    @Option(
        name: .customLong("janus"),
        help: ArgumentHelp("Janus WebSocket URL (ws://host:8188 or wss://...).", valueName: "url")
    )
    var url: String?

    @Option(
        name: .customLong("api-secret"),
        help: "Janus API secret. Visible to other users in the process list: prefer --api-secret-file."
    )
    var apiSecret: String?

    @Option(
        name: .customLong("api-secret-file"),
        help: ArgumentHelp(
            "Read the Janus API secret from this file, or from standard input if '-' (preferred; or set $CONCLAVE_JANUS_API_SECRET).",
            valueName: "file"
        )
    )
    var apiSecretFile: String?

    @Option(
        name: .customLong("token"),
        help: "Janus auth token. Visible to other users in the process list: prefer --token-file."
    )
    var token: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp(
            "Read the Janus auth token from this file, or from standard input if '-' (preferred; or set $CONCLAVE_JANUS_TOKEN).",
            valueName: "file"
        )
    )
    var tokenFile: String?

    @Option(name: .customLong("ca-file"), help: "PEM file of CAs to trust for wss:// (a private CA).")
    var caFile: String?

    @Option(
        name: .customLong("timeout"),
        help: "Seconds to wait for each Janus reply (default: the configuration's janus.timeoutSeconds, else 10)."
    )
    var timeout: Double?

    /// Checks the timeout and reads the secret files, once: the file forms are replaced by the
    /// secrets they hold, so that ``connectionOptions(settings:)`` needs no file access.
    mutating func validate() throws {
        if let timeout, !(timeout > 0 && timeout <= 600) {
            throw ValidationError("--timeout: expected seconds between 0 and 600, got \(timeout)")
        }
        try SecretInput.checkSingleStandardInput([("--api-secret-file", apiSecretFile), ("--token-file", tokenFile)])
        apiSecret = try SecretInput.resolve(
            value: apiSecret,
            file: apiSecretFile,
            flag: "--api-secret",
            fileFlag: "--api-secret-file"
        )
        apiSecretFile = nil
        token = try SecretInput.resolve(value: token, file: tokenFile, flag: "--token", fileFlag: "--token-file")
        tokenFile = nil
        // The TLS library opens the CA file itself, and would block on a FIFO.
        if let caFile {
            do {
                _ = try PrivateFiles.readExistingRegularFile(caFile, limit: 16 << 20)
            } catch {
                throw CallCommandError("--ca-file: \(error.description)")
            }
        }
    }

    /// The URL from `--janus` or `$CONCLAVE_JANUS_URL`.
    func resolvedURL() throws -> String {
        if let url { return url }
        if let url = ProcessInfo.processInfo.environment["CONCLAVE_JANUS_URL"] { return url }
        throw ValidationError("no Janus URL: pass --janus ws://HOST:8188 (or set CONCLAVE_JANUS_URL)")
    }

    /// Connection options from the flags and environment, then the configuration file's `janus`
    /// section (`settings`) for what neither gives, then the defaults (10 s timeout).
    func connectionOptions(settings: ConclaveConfiguration = ConclaveConfiguration()) -> JanusConnection.Options {
        let environment = ProcessInfo.processInfo.environment
        let seconds = timeout ?? settings.requestTimeout ?? 10
        return JanusConnection.Options(
            apiSecret: apiSecret ?? environment["CONCLAVE_JANUS_API_SECRET"] ?? settings.apiSecret,
            token: token ?? environment["CONCLAVE_JANUS_TOKEN"] ?? settings.token,
            tls: TLSOptions(caFile: caFile ?? settings.caFile),
            requestTimeout: .milliseconds(Int(seconds * 1000))
        )
    }
}
