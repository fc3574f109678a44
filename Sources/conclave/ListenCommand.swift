import ArgumentParser
import ConclaveE2EE
import ConclaveKeyStore
import ECallSignaling
import Foundation
import Logging
import STOMPClient

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave listen`: wait on the broker for call invitations to this device.
struct ListenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Wait for call invitations over the signaling broker; join or record the calls.",
        discussion: """
            Prints a line per invitation (caller, call, room, video or audio, crypto) and, when a desktop \
            session is there ($DBUS_SESSION_BUS_ADDRESS), shows a notification. The invitation's key is \
            checked (signed by the caller's device in its roster) and stored in the key store, with the \
            roster, for 'conclave join --call-id' and 'conclave rejoin'. With --auto-join the call is \
            joined with the join options given here (--video, --audio, --duration, --status...); with \
            --auto-record it is recorded into a folder of DIR; else, on a terminal, listen asks. One call \
            at a time; Ctrl-C or SIGTERM leaves the call and stops listening.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var janus: JanusOptions
    @OptionGroup var call: CallOptions

    @Flag(name: .customLong("auto-join"), help: "Join each call at once.")
    var autoJoin = false

    @Option(
        name: .customLong("auto-record"),
        help: ArgumentHelp("Record each call into DIR/call-<id> instead of joining it.", valueName: "dir")
    )
    var autoRecord: String?

    @Option(name: .customLong("calls"), help: "Stop listening after this many calls (default: never).")
    var calls: Int?

    func validate() throws {
        if autoJoin, autoRecord != nil { throw ValidationError("give --auto-join or --auto-record, not both") }
        if let calls, calls < 1 { throw ValidationError("--calls: expected at least 1") }
        if call.signaling.passcodeFile == "-", autoJoin || autoRecord != nil {
            throw ValidationError("--passcode-file -: the calls listen starts need a file or the environment")
        }
    }

    func run() async throws {
        let logger = global.makeLogger(label: "conclave.listen")
        let settings = try call.loadConfiguration()
        let store = try KeyStoreAccess.store(global, configured: settings.dataDirectory)
        guard let broker = try call.signaling.resolve(settings: settings, store: store, required: true) else { return }
        let stop = StopSignals()
        let channel = try await broker.connect(logger: logger)
        let device = broker.device
        // Tests and scripts wait for this line.
        print(
            "listening for invitations as user \(device.address.userId) device \(device.address.deviceId) on \(broker.url)"
        )
        fflush(nil)
        let children = ChildProcesses()
        // Ctrl-C or SIGTERM: the running call leaves (its process gets SIGTERM), no other starts,
        // and closing the channel ends the message loop below.
        let stopper = Task {
            _ = await stop.wait(timeout: nil)
            children.terminate()
            await channel.close()
        }
        let handled = await receive(channel: channel, broker: broker, store: store, children: children, logger: logger)
        stopper.cancel()
        await channel.close()
        logger.info("stopped listening", metadata: ["calls": "\(handled)"])
    }

    /// Reads this device's messages until `--calls` calls were handled or the channel closes;
    /// returns how many calls were handled.
    private func receive(
        channel: STOMPSignalingChannel,
        broker: BrokerSetup,
        store: KeyStore,
        children: ChildProcesses,
        logger: Logger
    ) async -> Int {
        var handled = 0
        for await body in channel.messages {
            let message: SignalMessage
            do {
                message = try SignalMessage(json: body)
            } catch {
                logger.notice("dropped a malformed signaling message: \(error)")
                continue
            }
            guard message.type == .callInvitation else {
                if case .unknown(let type) = message.type {
                    logger.notice("dropped a signaling message of unknown type \(type.prefix(40).debugDescription)")
                } else {
                    // Key messages of a call a child process is in: that process has them too.
                    logger.debug("not an invitation: \(message.type)")
                }
                continue
            }
            let invitation: ReceivedInvitation
            do {
                invitation = try message.openInvitation(
                    as: broker.device.address,
                    with: broker.device.identity,
                    now: Date(),
                    acceptUnsigned: broker.ecallCompatible
                )
            } catch {
                logger.warning("rejected an invitation: \(error)")
                continue
            }
            do {
                try keep(invitation, message: message, device: broker.device, store: store)
            } catch {
                logger.error("could not store the invitation's key: \(error)")
                continue
            }
            announce(invitation)
            guard let arguments = childArguments(for: invitation) else { continue }
            await children.run(arguments, logger: logger)
            handled += 1
            if let calls, handled >= calls { return handled }
        }
        return handled
    }

    /// Stores the invitation's key (still wrapped) and the call's details, as `join --invitation`
    /// does, and the signed invitation itself, whose roster later joins and rejoins start from.
    private func keep(
        _ invitation: ReceivedInvitation,
        message: SignalMessage,
        device: DeviceIdentityDetails,
        store: KeyStore
    ) throws {
        guard let wrapped = message.encryptedAESKey else { return }
        // The kept copy has no key: the key store holds keys in one place only.
        var details = message
        details.encryptedAESKey = nil
        try store.calls.storeWrappedKey(wrapped, for: invitation.callId)
        try store.calls.storeRejoinDetails(
            for: invitation.callId,
            janusURL: invitation.janusUrl,
            room: invitation.roomId,
            display: device.display,
            cryptoFormat: invitation.crypto ?? .ecall,
            invitation: details.jsonBody()
        )
    }

    /// One line on the terminal, and a desktop notification when there is a desktop session.
    private func announce(_ invitation: ReceivedInvitation) {
        let caller = invitation.caller
        let name = caller.displayName.isEmpty ? "user \(caller.userId)" : caller.displayName
        let kind = invitation.isVideo ? "video" : "audio"
        let crypto = invitation.crypto?.rawValue ?? "ecall"
        let line =
            "invitation: call \(invitation.callId) in room \(invitation.roomId) from \(name) "
            + "(user \(caller.userId) device \(caller.deviceId)), \(kind), crypto \(crypto)"
            + (invitation.unsigned ? ", UNSIGNED" : "")
        print(line)
        fflush(nil)
        let environment = ProcessInfo.processInfo.environment
        guard environment["DBUS_SESSION_BUS_ADDRESS"].map({ !$0.isEmpty }) == true else { return }
        let notify = Process()
        notify.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        notify.arguments = [
            "notify-send", "--app-name=conclave", "Call from \(name)", "\(kind) call \(invitation.callId)",
        ]
        notify.standardOutput = FileHandle.nullDevice
        notify.standardError = FileHandle.nullDevice
        // A missing notify-send or desktop is no reason to miss the call.
        try? notify.run()
    }

    /// The `conclave join` or `record` command line for the call, or nil when it is declined.
    private func childArguments(for invitation: ReceivedInvitation) -> [String]? {
        let forwarded = Self.forwardedArguments(Array(CommandLine.arguments.dropFirst()))
        let crypto = (invitation.crypto ?? .ecall).rawValue
        var call = ["--call-id", "\(invitation.callId)", "--room", "\(invitation.roomId)", "--crypto", crypto]
        // The invitation's Janus, unless this command line names one.
        if let url = invitation.janusUrl, janus.url == nil { call += ["--janus", url] }
        if let autoRecord {
            let folder = URL(fileURLWithPath: autoRecord).appendingPathComponent("call-\(invitation.callId)").path
            return ["record"] + call + ["--out", folder] + Self.recordArguments(forwarded)
        }
        if !autoJoin {
            guard isatty(STDIN_FILENO) == 1 else { return nil }
            print("join? [y/N] ", terminator: "")
            fflush(nil)
            guard let answer = readLine(), answer.lowercased().hasPrefix("y") else { return nil }
        }
        return ["join"] + call + forwarded
    }

    /// The command line without `listen` and its own options: what `join` takes as it is.
    static func forwardedArguments(_ arguments: [String]) -> [String] {
        var result: [String] = []
        var index = arguments.startIndex
        var sawCommand = false
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if !sawCommand, argument == "listen" {
                sawCommand = true
                continue
            }
            if argument == "--auto-join" { continue }
            if argument == "--auto-record" || argument == "--calls" {
                index += 1
                continue
            }
            if argument.hasPrefix("--auto-record=") || argument.hasPrefix("--calls=") { continue }
            result.append(argument)
        }
        return result
    }

    /// The options of `forwarded` that `record` also takes.
    static func recordArguments(_ forwarded: [String]) -> [String] {
        let withValue: Set<String> = [
            "--data-dir", "--log-level", "--config", "--broker", "--passcode-file", "--rotation", "--janus",
            "--api-secret-file", "--token-file", "--ca-file", "--timeout", "--duration", "--status",
            "--ice-address", "--stun", "--turn", "--turn-credentials", "--ice-policy",
        ]
        let flags: Set<String> = ["--ecall-compatible"]
        var result: [String] = []
        var index = forwarded.startIndex
        while index < forwarded.endIndex {
            let argument = forwarded[index]
            index += 1
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if flags.contains(name) {
                result.append(argument)
            } else if withValue.contains(name) {
                result.append(argument)
                if !argument.contains("="), index < forwarded.endIndex {
                    result.append(forwarded[index])
                    index += 1
                }
            }
        }
        return result
    }
}

/// The `conclave join` or `record` process of the current call, one at a time.
final class ChildProcesses: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Process?
    private var stopping = false

    /// Runs `conclave ARGUMENTS` and returns when it has exited.
    func run(_ arguments: [String], logger: Logger) async {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
        process.arguments = arguments
        let stopping = lock.withLock { () -> Bool in
            if !self.stopping { current = process }
            return self.stopping
        }
        if stopping { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            process.terminationHandler = { _ in continuation.resume() }
            do {
                try process.run()
            } catch {
                logger.error("cannot start conclave \(arguments.first ?? ""): \(error)")
                process.terminationHandler = nil
                continuation.resume()
            }
        }
        lock.withLock { current = nil }
        if process.terminationStatus != 0 {
            logger.warning("conclave \(arguments.first ?? "") ended with status \(process.terminationStatus)")
        }
    }

    /// Asks the running call to leave (SIGTERM: it leaves cleanly) and starts no other.
    func terminate() {
        let process = lock.withLock { () -> Process? in
            stopping = true
            return current
        }
        if let process, process.isRunning { kill(process.processIdentifier, SIGTERM) }
    }
}
