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
        var status: Int32 = 0
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            status = exitCode(for: error).rawValue
            let message = fullMessage(for: error)
            if !message.isEmpty {
                let handle = status == 0 ? FileHandle.standardOutput : FileHandle.standardError
                handle.write(Data((message + "\n").utf8))
            }
        }
        leave(status: status)
    }

    /// Ends the process without running `atexit` handlers and library destructors.
    ///
    /// Everything a command writes is on disk by the time it returns (recordings and key files are
    /// synced and renamed before their events are reported); what may still run are unowned tasks
    /// and C library threads finishing their own teardown (a status message on its way to the
    /// broker, a connection's last DTLS alert). `exit` would tear OpenSSL's and GnuTLS's globals
    /// down under them, and `recorder serve` was seen to crash that way after a clean drain. Only
    /// standard I/O buffers need flushing, and that is done here.
    private static func leave(status: Int32) -> Never {
        fflush(nil)
        _exit(status)
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
