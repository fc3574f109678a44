import ArgumentParser
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The `conclave` command: joins, records and manages end-to-end encrypted Janus VideoRoom calls.
///
/// Each subcommand lives in its own file and is listed here.
@main
struct ConclaveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conclave",
        abstract: "End-to-end encrypted group calls through a Janus VideoRoom, and their recording.",
        version: conclaveVersion,
        subcommands: [
            RoomsCommand.self, KeysCommand.self, CallCommand.self, JoinCommand.self, RejoinCommand.self,
            RecordCommand.self, RecordingsCommand.self, ConfigCommand.self, ListenCommand.self, RecorderCommand.self,
            DevicesCommand.self,
        ]
    )

    /// Runs the command line, after making sure SIGINT and SIGTERM can reach us.
    ///
    /// A process inherits its parent's blocked signals, and parents built on Foundation's `Process`
    /// spawn children from threads that block them; such a child would never see SIGTERM and could
    /// not leave its call cleanly. Unblocking them on the main thread is enough for delivery.
    static func main() async {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// The version printed by `conclave --version` and written into recording manifests.
let conclaveVersion = "0.1.0"

/// Options every subcommand accepts.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help: ArgumentHelp(
            "Where device keys and call keys live.",
            discussion: "Default: $CONCLAVE_HOME, else $XDG_DATA_HOME/conclave, else ~/.local/share/conclave.",
            valueName: "path"
        )
    )
    var dataDirectory: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .notice

    /// A logger writing to standard error at the chosen level; libraries receive it as a parameter.
    func makeLogger(label: String = "conclave") -> Logger {
        LoggingBootstrap.once()
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Sends swift-log output to standard error, once per process.
enum LoggingBootstrap {
    private static let bootstrapped: Void = LoggingSystem.bootstrap(StreamLogHandler.standardError)

    static func once() { _ = bootstrapped }
}
