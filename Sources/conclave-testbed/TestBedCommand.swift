import ArgumentParser
import Foundation
import JanusTestBed
import Logging
import RabbitMQTestBed

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a local Janus in a network namespace of its own, for the demo and for trying Conclave out.
@main
struct TestBedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conclave-testbed",
        abstract: "Run a local Janus test bed in a network namespace (needs root).",
        discussion: """
            Janus never offers loopback ICE candidates, so the test bed runs it behind a veth pair in a \
            namespace of its own (198.18.0.0/15). Conclave then joins with --janus set to the printed \
            URL and --ice-address set to this side's address.
            """,
        subcommands: [Run.self, Up.self, Down.self, Broker.self, Recording.self]
    )
}

struct TestBedOptions: ParsableArguments {
    @Option(help: "Folder with the Janus config templates (default: config/janus of this checkout).")
    var config: String?

    @Option(help: "Janus api_secret to require, if any.")
    var apiSecret: String?

    @Option(help: "Janus session_timeout in seconds.")
    var sessionTimeout = 60

    func start(persistent: Bool = false) throws -> JanusTestBed {
        var configuration = JanusTestBed.Configuration(sessionTimeout: sessionTimeout, apiSecret: apiSecret)
        configuration.persistent = persistent
        if let config { configuration.templateDirectory = URL(fileURLWithPath: config) }
        return try JanusTestBed(configuration: configuration)
    }
}

extension TestBedCommand {
    /// Brings the test bed up, runs one command with its addresses in the environment, tears it down.
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start Janus, run a command, stop Janus.",
            discussion: """
                The command sees CONCLAVE_JANUS_URL (the WebSocket URL), CONCLAVE_ICE_ADDRESS (the \
                address to gather ICE candidates on) and CONCLAVE_TESTBED_NAMESPACE. With --broker a \
                private RabbitMQ runs too, with a user per --devices id: the command also sees \
                CONCLAVE_BROKER_URL and CONCLAVE_BROKER_PASSCODES (a 0700 folder of \
                device-<id>.passcode files, which conclave reads by itself). --recorders and \
                --submitters give some of those devices the recorder fleet's or a job submitter's \
                permissions (conclave recorder serve, submit and status).
                """
        )

        @OptionGroup var options: TestBedOptions

        @Flag(help: "Also start the signaling broker (RabbitMQ with Web-STOMP on loopback).")
        var broker = false

        @Option(help: "With --broker: comma-separated device ids to create broker users for.")
        var devices: String = "1,2"

        @Option(help: "With --broker: which of --devices are the recorder fleet's device (comma-separated).")
        var recorders: String?

        @Option(help: "With --broker: which of --devices may submit record jobs (comma-separated).")
        var submitters: String?

        @Option(help: "With --broker: the folder for the passcode files (default: a new temporary folder).")
        var passcodes: String?

        @Argument(parsing: .captureForPassthrough, help: "The command to run, after --.")
        var command: [String]

        func run() throws {
            let arguments = command.first == "--" ? Array(command.dropFirst()) : command
            guard !arguments.isEmpty else { throw ValidationError("no command given after --") }
            let ids = broker ? try Broker.deviceIDs(devices) : []
            let roles = try Broker.roles(ids: ids, recorders: recorders, submitters: submitters)
            let bed = try options.start()
            defer { bed.stop() }
            FileHandle.standardError.write(
                Data("testbed: Janus at \(bed.webSocketURL), ICE on \(bed.hostAddress)\n".utf8)
            )
            var exported = [
                "CONCLAVE_JANUS_URL": bed.webSocketURL,
                "CONCLAVE_ICE_ADDRESS": bed.hostAddress,
                "CONCLAVE_TESTBED_NAMESPACE": bed.namespace,
            ]
            var rabbit: RabbitMQTestBed?
            defer { rabbit?.stop() }
            if broker {
                let started = try RabbitMQTestBed()
                rabbit = started
                let folder =
                    passcodes.map { URL(fileURLWithPath: $0) }
                    ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                        "conclave-passcodes-\(getpid())"
                    )
                try Broker.writePasscodes(for: ids, roles: roles, on: started, into: folder)
                exported["CONCLAVE_BROKER_URL"] = started.webSocketURL
                exported["CONCLAVE_BROKER_PASSCODES"] = folder.path
                FileHandle.standardError.write(
                    Data("testbed: broker at \(started.webSocketURL), passcodes in \(folder.path)\n".utf8)
                )
            }
            let environment = ProcessInfo.processInfo.environment.merging(exported) { $1 }
            let pid = try spawnWithCleanSignals(arguments, environment: environment)
            // Ctrl-C goes to the whole foreground group: the command handles it, and we tear the
            // test bed down once it has exited.
            signal(SIGINT, SIG_IGN)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let exited = (status & 0x7F) == 0
            let code = exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            if code != 0 { throw ExitCode(code) }
        }
    }

    /// Brings the test bed up and leaves it running.
    struct Up: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start Janus and leave it running; prints shell variables to eval."
        )

        @OptionGroup var options: TestBedOptions

        func run() throws {
            let bed = try options.start(persistent: true)
            bed.detach()
            print("CONCLAVE_JANUS_URL=\(bed.webSocketURL)")
            print("CONCLAVE_ICE_ADDRESS=\(bed.hostAddress)")
            print("CONCLAVE_TESTBED_NAMESPACE=\(bed.namespace)")
            print("CONCLAVE_TESTBED_PID=\(bed.pid ?? 0)")
            print("CONCLAVE_TESTBED_LOG=\(bed.logFile.path)")
        }
    }

    /// Stops a test bed started with `up`.
    struct Down: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop a test bed started with `up`.")

        @Option(help: "The namespace printed by `up` (CONCLAVE_TESTBED_NAMESPACE).")
        var namespace: String

        @Option(help: "Janus's pid printed by `up` (CONCLAVE_TESTBED_PID).")
        var pid: Int32?

        func run() throws {
            JanusTestBed.stop(namespace: namespace, pid: pid)
        }
    }
}
