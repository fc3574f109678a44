import ArgumentParser
import ConclaveE2EE
import ConclaveKeyStore
import ECallSignaling
import Foundation
import Logging
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave recorder`: record calls at scale through a job queue on the signaling broker.
///
/// Jobs go to the quorum queue `recorder.jobs`; recorder services take them and announce what
/// they do on the `recorder.events` exchange (config/rabbitmq/README.md).
struct RecorderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recorder",
        abstract: "Submit calls to the recorder fleet and watch its services.",
        subcommands: [Submit.self, Status.self, Serve.self]
    )

    /// `recorder submit`: one call to record, as a job on the queue.
    struct Submit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Submit a call to the recorder fleet's job queue and print the job id.",
            discussion: """
                The call key (the one stored for --call-id, or --key-file) is wrapped for the fleet's \
                device key, given as --recorder-public-key or --recorder-key FILE (what 'conclave keys \
                show' prints on a recorder machine); the key itself never leaves this process. \
                With --invitation FILE (the host's signed call_invitation to the fleet device, roster \
                included) the services follow the call's key rotations as that device. The call's host \
                (the device that ran 'call create --invite' with the fleet device in the roster) needs no \
                file: it signs that invitation itself, and the fleet device's key may then come from the \
                roster. --no-invitation sends the job without one: it records with the job's key only. \
                The job is sent persistent and the command returns once the broker has stored it.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var configFile: ConfigFileOption
        @OptionGroup var signaling: SignalingOptions

        @Option(name: .customLong("call-id"), help: "The call to record (a decimal number).")
        var callID: UInt64

        @Option(help: "The call's VideoRoom (default: the room stored with the call's key).")
        var room: UInt64?

        @Option(
            name: .customLong("janus"),
            help: ArgumentHelp(
                "The Janus server, ws://HOST:8188 (default: the one stored with the call's key, else janus.url).",
                valueName: "url"
            )
        )
        var janusURL: String?

        @Option(help: "End-to-end encryption of the call: ecall, sframe or none (default: as stored, else ecall).")
        var crypto: RecordJobCrypto?

        @Option(
            name: .customLong("out"),
            help: ArgumentHelp("The recording folder, relative to the services' storage root.", valueName: "path")
        )
        var output: String

        @Option(help: ArgumentHelp("Record this many seconds.", valueName: "seconds"))
        var duration: Double?

        @Flag(name: .customLong("until-empty"), help: "Record until the room is empty (see --grace).")
        var untilEmpty = false

        @Option(help: ArgumentHelp("With --until-empty: seconds the room must stay empty.", valueName: "seconds"))
        var grace: Double = 30

        @Option(name: .customLong("recorder-device"), help: "The recorder fleet's device id.")
        var recorderDevice: UInt64?

        @Option(
            name: .customLong("recorder-key"),
            help: ArgumentHelp("A file holding the fleet device's public key string.", valueName: "file")
        )
        var recorderKeyFile: String?

        @Option(
            name: .customLong("recorder-public-key"),
            help: ArgumentHelp("The fleet device's public key string, as 'keys show' prints it.", valueName: "key")
        )
        var recorderPublicKey: String?

        @Option(
            name: .customLong("key-file"),
            help: ArgumentHelp(
                "Read the call key (64 hexadecimal characters) from this file, or '-' for standard input.",
                valueName: "file"
            )
        )
        var keyFile: String?

        @Option(name: .customLong("key-epoch"), help: "The epoch of the --key-file key (default 0).")
        var keyEpoch: UInt64?

        @Option(
            help: ArgumentHelp(
                "A file holding the host's signed call_invitation to the fleet device (JSON, with the roster): the services follow the call's key rotations.",
                valueName: "file"
            )
        )
        var invitation: String?

        @Flag(
            name: .customLong("no-invitation"),
            help: "Send no invitation, not even the one the call's host would sign: the recording keeps the job's key."
        )
        var noInvitation = false

        @Option(help: "The name the recorder joins the room with.")
        var display: String?

        @Option(name: .customLong("job-id"), help: "The job's id, [A-Za-z0-9._-]{1,64} (default: a new random one).")
        var jobID: String?

        @Option(help: ArgumentHelp("How long to wait for the broker to store the job.", valueName: "seconds"))
        var timeout: Double = 15

        func validate() throws {
            switch (duration, untilEmpty) {
            case (nil, false): throw ValidationError("give --duration SECONDS or --until-empty")
            case (.some, true): throw ValidationError("give --duration or --until-empty, not both")
            default: break
            }
            if recorderKeyFile != nil, recorderPublicKey != nil {
                throw ValidationError("give --recorder-key or --recorder-public-key, not both")
            }
            if keyEpoch != nil, keyFile == nil { throw ValidationError("--key-epoch goes with --key-file") }
            if signaling.passcodeFile == "-", keyFile == "-" {
                throw ValidationError("--passcode-file - and --key-file -: only one can read standard input")
            }
            if invitation == "-", keyFile == "-" || signaling.passcodeFile == "-" {
                throw ValidationError("--invitation -: only one of the files can be standard input")
            }
            if invitation != nil, noInvitation {
                throw ValidationError("give --invitation FILE or --no-invitation, not both")
            }
            if invitation != nil, crypto == RecordJobCrypto.none {
                throw ValidationError("--invitation: a call with --crypto none has no keys to follow")
            }
            guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout: expected 0 to 600 seconds") }
        }

        func run() async throws {
            let logger = global.makeLogger(label: "conclave.recorder")
            let settings = try configFile.load()
            let store = try KeyStoreAccess.store(global, configured: settings.dataDirectory)
            let record = try KeyStoreAccess.run { try store.hasDeviceIdentity ? store.calls.record(for: callID) : nil }
            let crypto = crypto ?? record?.cryptoFormat.flatMap { RecordJobCrypto(rawValue: $0.rawValue) } ?? .ecall
            var job = RecordJob(
                jobID: jobID ?? Self.newJobID(),
                callID: callID,
                room: try room ?? record?.room ?? { throw ValidationError("no room: pass --room") }(),
                janusURL: try janusURL ?? record?.janusURL ?? settings.janusURL
                    ?? { throw ValidationError("no Janus URL: pass --janus ws://HOST:8188") }(),
                crypto: crypto,
                output: output,
                stop: untilEmpty ? .roomEmpty(graceSeconds: grace) : .after(seconds: duration ?? 0),
                display: display,
                submittedAt: RecorderTime.format(Date())
            )
            if crypto != .none {
                let device = try recorderDevice ?? { throw ValidationError("pass --recorder-device ID") }()
                let hosted = try HostedCall(record: record, store: store)
                let (key, epoch) = try callKey(store: store, record: record)
                let recipient = try recipientKey(device: device, hosted: hosted)
                job.wrappedKey = try KeyStoreAccess.run { try KeyWrapping.wrap(key, for: recipient) }
                job.keyEpoch = epoch
                job.recorderDeviceID = device
                if let invitation {
                    // A file, never argv: it carries a wrapped key, and its text is the job's.
                    job.invitation = try SecretInput.read(invitation, flag: "--invitation")
                        .trimmingCharacters(in: .whitespacesAndNewlines)
                } else if noInvitation {
                    Self.note(
                        "--no-invitation: the recording keeps the key of epoch \(epoch) and does not follow rotations"
                    )
                } else if let hosted {
                    job.invitation = try hosted.invitation(for: device, job: job, key: key)
                } else {
                    Self.note(
                        "no invitation: the recording will not follow call \(callID)'s key rotations "
                            + "(only the call's host signs one; pass --invitation FILE)"
                    )
                }
            }
            // The checks every service makes: a job this command would send is one they take.
            do {
                try job.validate()
            } catch {
                throw CallCommandError("the job is not valid: \(error.reason)")
            }
            guard let broker = try signaling.resolve(settings: settings, store: store, required: true) else { return }
            let connection = try broker.stompConnection(logger: logger)
            do {
                try await RecorderBroker.submit(job, on: connection, timeout: .milliseconds(Int(timeout * 1000)))
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
            print(job.jobID)
        }

        /// The fleet device's public key: the one given, else the one the hosted call's roster lists.
        /// A given key that is not the roster's would make an invitation the service cannot open.
        private func recipientKey(device: UInt64, hosted: HostedCall?) throws -> DevicePublicKey {
            let listed = hosted?.roster.first { $0.deviceId == device }?.publicKey
            let given: String?
            if let recorderPublicKey {
                given = recorderPublicKey
            } else if let recorderKeyFile {
                given = try SecretInput.read(recorderKeyFile, flag: "--recorder-key")
            } else {
                given = nil
            }
            guard let text = (given ?? listed)?.trimmingCharacters(in: .whitespacesAndNewlines) else {
                throw ValidationError("an encrypted call needs --recorder-public-key KEY or --recorder-key FILE")
            }
            let key = try KeyStoreAccess.run { try DevicePublicKey(publicKeyString: text) }
            if let listed, invitation == nil, !noInvitation,
                (try? DevicePublicKey(publicKeyString: listed))?.publicKeyString != key.publicKeyString
            {
                throw CallCommandError(
                    "the fleet device's key is not the one call \(callID)'s roster lists for device \(device): "
                        + "the recorder could not open the invitation"
                )
            }
            return key
        }

        /// The call key (from --key-file or the key store) and its epoch.
        private func callKey(store: KeyStore, record: CallKeyRecord?) throws -> (CallKey, UInt64) {
            if let keyFile {
                let hex = try SecretInput.read(keyFile, flag: "--key-file")
                let key = try KeyStoreAccess.run {
                    try CallKey(hex: hex.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                return (key, keyEpoch ?? 0)
            }
            guard let record else {
                throw CallCommandError(
                    "no key stored for call \(callID): pass --key-file FILE, or --crypto none for an unencrypted call"
                )
            }
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            do {
                return (
                    try store.openCallKey(record.wrappedKey, with: identity), record.history.map(\.epoch).max() ?? 0
                )
            } catch {
                throw CallCommandError("the stored key of call \(callID): \(error)")
            }
        }

        /// One line on stderr: what the job will not do, without failing the submission.
        static func note(_ text: String) {
            FileHandle.standardError.write(Data("conclave: note: \(text)\n".utf8))
        }

        /// `job-<12 random hex digits>`: unique enough for a queue, short enough for a folder name.
        static func newJobID() -> String {
            "job-" + String(UInt64.random(in: 0..<(1 << 48)), radix: 16).leftPadded(to: 12)
        }
    }

    /// `recorder status`: every service, its calls and problems, from the events exchange.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show every recorder service, its calls, CPU, disk and problems, from the broker.",
            discussion: """
                Listens to the services' announcements (each sends its status every 2 s) for --seconds, \
                then prints every service heard and the failures announced meanwhile. With --watch it \
                prints again every 2 s until Ctrl-C; with --json each print is one line of JSON.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var configFile: ConfigFileOption
        @OptionGroup var signaling: SignalingOptions

        @Option(help: ArgumentHelp("How long to listen before printing.", valueName: "seconds"))
        var seconds: Double = 3

        @Flag(help: "Keep listening and print again every 2 s.")
        var watch = false

        @Flag(help: "One line of JSON per print: {\"services\": [...], \"failures\": [...]}.")
        var json = false

        func validate() throws {
            guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds: expected 0 to 3600") }
        }

        func run() async throws {
            let logger = global.makeLogger(label: "conclave.recorder")
            let settings = try configFile.load()
            let store = try KeyStoreAccess.store(global, configured: settings.dataDirectory)
            guard let broker = try signaling.resolve(settings: settings, store: store, required: true) else { return }
            let stop = StopSignals()
            let connection = try broker.stompConnection(logger: logger)
            let fleet = FleetView()
            let reader = Task {
                for await message in connection.messages { fleet.receive(message.body) }
            }
            connection.subscribe(id: "recorder-events", destination: RecorderTopology.allEvents)
            var wait = Duration.milliseconds(Int(seconds * 1000))
            while true {
                let reason = await stop.wait(timeout: wait)
                print(json ? fleet.snapshot().json : fleet.snapshot().text)
                fflush(nil)
                guard watch, reason == .duration else { break }
                wait = ServiceStatus.interval
            }
            reader.cancel()
            await connection.close()
        }
    }
}

/// A call this device created as host, from its kept invitation: its roster, with this device's
/// entry as the host (the key the roster lists is this device's own). Only the host's signature
/// makes a roster the fleet device may follow keys by.
struct HostedCall {
    var host: RosterEntry
    var roster: [RosterEntry]
    var isVideo: Bool
    var identity: DeviceIdentity

    /// Nil when the call is not stored, kept no invitation, or another device is its host.
    init?(record: CallKeyRecord?, store: KeyStore) throws {
        guard let text = record?.invitation, let message = try? SignalMessage(json: text),
            let roster = message.roster, let host = roster.first(where: \.isHost)
        else { return nil }
        let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
        guard host.publicKey == identity.publicKeyString else { return nil }
        self.host = host
        self.roster = roster
        self.isVideo = message.isVideo ?? true
        self.identity = identity
    }

    /// A fresh `call_invitation` to `device` carrying `key` (the job's key), signed now by this
    /// device: the roster as stored, so that the service follows the keys as the invitees do.
    func invitation(for device: UInt64, job: RecordJob, key: CallKey) throws -> String {
        guard let recipient = roster.first(where: { $0.deviceId == device }) else {
            throw CallCommandError(
                "device \(device) is not in call \(job.callID)'s roster: invite it with call create --invite "
                    + "--participant USER:NAME@\(device)=KEY (or pass --no-invitation to record one epoch)"
            )
        }
        guard let format = FrameCryptoFormat(rawValue: job.crypto.rawValue) else {
            throw CallCommandError("crypto \(job.crypto.rawValue): no keys to follow")
        }
        do {
            return try SignalMessage.callInvitation(
                callId: job.callID,
                roomId: job.room,
                caller: host,
                recipient: recipient,
                roster: roster,
                key: key,
                janusUrl: job.janusURL,
                crypto: format,
                isVideo: isVideo,
                signedBy: identity,
                at: Date()
            ).jsonBody()
        } catch {
            throw CallCommandError("cannot sign the invitation to device \(device): \(error)")
        }
    }
}

/// Sending jobs to the broker.
enum RecorderBroker {
    /// Sends `job` persistent to the submit exchange and returns once the broker's receipt came:
    /// RabbitMQ sends it after the queue confirmed the message, so the job survives a restart.
    static func submit(_ job: RecordJob, on connection: STOMPConnection, timeout: Duration) async throws {
        let receipt = "submit-\(job.jobID)"
        let events = connection.events
        let confirmed = Task {
            for await event in events {
                switch event {
                case .receipt(let id) where id == receipt: return true
                case .state(.closed): return false
                default: continue
                }
            }
            return false
        }
        let deadline = Task {
            try await Task.sleep(for: timeout)
            confirmed.cancel()
        }
        defer { deadline.cancel() }
        do {
            try await connection.send(
                STOMPFrame(
                    .send,
                    headers: [
                        .init("destination", RecorderTopology.submitDestination), .init("persistent", "true"),
                        .init("content-type", "application/json"), .init("receipt", receipt),
                    ],
                    body: job.encoded()
                )
            )
        } catch {
            confirmed.cancel()
            throw CallCommandError("\(connection.url): the job was not sent: \(error)")
        }
        guard await confirmed.value else {
            throw CallCommandError(
                "\(connection.url): the broker did not confirm job \(job.jobID) within \(timeout) (it may not be queued)"
            )
        }
    }
}

extension BrokerSetup {
    /// A plain STOMP connection as this device, for the recorder queue and events (not the
    /// device's signaling subscription). Started by the caller's first use.
    func stompConnection(logger: Logger) throws -> STOMPConnection {
        do {
            let connection = try STOMPConnection(
                configuration: STOMPClientConfiguration(
                    url: url,
                    virtualHost: virtualHost,
                    credentials: STOMPCredentials(login: login, passcode: passcode)
                ),
                logger: logger
            )
            connection.start()
            return connection
        } catch {
            throw CallCommandError("broker \(url) as \(login): \(error)")
        }
    }
}

/// What `recorder status` heard: the latest status of each service and the recent failures.
final class FleetView: Sendable {
    /// Failures kept for the print: the latest ones.
    static let failureLimit = 20

    struct Snapshot: Encodable {
        var services: [ServiceStatus]
        var failures: [RecordingFailed]
        /// Messages on the exchange that were not recorder events.
        var unreadable: Int

        var json: String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }

        var text: String {
            var lines: [String] = []
            if services.isEmpty {
                lines.append("no recorder service announced itself")
            }
            for service in services {
                // The service admits while its CPU is under the budget (`Admission`): at or over
                // it, it takes no job, and whoever reads this wonders why the queue grows.
                let state =
                    service.draining
                    ? "draining" : service.cpu >= service.cpuBudget ? "full (CPU budget)" : "taking jobs"
                lines.append(
                    "\(service.serviceID) on \(service.host): \(service.calls.count) calls, CPU "
                        + String(format: "%.2f of %.2f cores", service.cpu, service.cpuBudget)
                        + ", disk free \(Self.bytes(service.diskFreeBytes)), \(state)"
                )
                for call in service.calls {
                    lines.append(
                        "  call \(call.callID) (job \(call.jobID)): \(call.participants) participants, "
                            + String(format: "%.0f s", call.seconds)
                    )
                }
                for problem in service.problems { lines.append("  problem: \(problem)") }
            }
            if !failures.isEmpty {
                lines.append("recent failures:")
                for failure in failures {
                    let job = failure.jobID.map { "job \($0)" } ?? "a message that is not a job"
                    lines.append("  \(failure.time) \(failure.serviceID) \(job): \(failure.reason)")
                }
            }
            if unreadable > 0 {
                lines.append("\(unreadable) unreadable messages on \(RecorderTopology.eventsExchange)")
            }
            return lines.joined(separator: "\n")
        }

        static func bytes(_ count: UInt64) -> String {
            let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
            var value = Double(count)
            var unit = 0
            while value >= 1024, unit < units.count - 1 {
                value /= 1024
                unit += 1
            }
            return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
        }
    }

    private struct State {
        var services: [String: ServiceStatus] = [:]
        var failures: [RecordingFailed] = []
        var unreadable = 0
    }

    private let state = Mutex(State())

    func receive(_ body: [UInt8]) {
        let event = try? RecorderEvent.decode(body)
        state.withLock { state in
            switch event {
            case .serviceStatus(let status)?:
                state.services[status.serviceID] = status
            case .recordingFailed(let failure)?:
                state.failures.append(failure)
                if state.failures.count > Self.failureLimit { state.failures.removeFirst() }
            case .recordingStarted?, .recordingFinished?:
                break
            case nil:
                state.unreadable += 1
            }
        }
    }

    func snapshot() -> Snapshot {
        state.withLock { state in
            Snapshot(
                services: state.services.values.sorted { $0.serviceID < $1.serviceID },
                failures: state.failures,
                unreadable: state.unreadable
            )
        }
    }
}

extension RecordJobCrypto: ExpressibleByArgument {}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
