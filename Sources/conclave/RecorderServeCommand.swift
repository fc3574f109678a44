import ArgumentParser
import ConclaveKeyStore
import ConclaveRecorderService
import Foundation
import Logging
import RecorderJobs
import STOMPClient

extension RecorderCommand {
    /// `recorder serve`: the long-running recorder service of the fleet.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record the calls of the job queue, several at once, until SIGTERM.",
            discussion: """
                Takes record jobs from the broker's recorder.jobs queue while under --max-calls and \
                --cpu-budget, records each as 'conclave record' does into --storage, and acknowledges a \
                job only once its recording is finished and verified; announces recording_started, \
                recording_finished, recording_failed and service_status on recorder.events. Every \
                service of a fleet uses the fleet's one recorder device key (the same key file on \
                each machine) and broker login. A job with an invitation is followed through the call's key \
                rotations over the broker as that device (which never takes the call's key role). \
                SIGTERM drains: no new jobs, the current ones record \
                to their end (with --handover, or on a second SIGTERM, they stop and go back to the \
                queue for another service to continue); then the service exits 0.
                """
        )

        enum StatusMode: String, ExpressibleByArgument, CaseIterable {
            case json, none
        }

        @OptionGroup var global: GlobalOptions
        @OptionGroup var configFile: ConfigFileOption
        @OptionGroup var ice: ICEOptions
        @OptionGroup var signaling: SignalingOptions

        @Option(help: "The folder every job's output is written under (created 0700).")
        var storage: String

        @Option(name: .customLong("service-id"), help: "This service's name in events (default: HOST-PID).")
        var serviceID: String?

        @Option(
            name: .customLong("cpu-budget"),
            help: "Take new jobs only while this process uses fewer cores than this (default: every core)."
        )
        var cpuBudget: Double?

        @Option(name: .customLong("max-calls"), help: "At most this many calls at once (default: 16).")
        var maxCalls: Int = 16

        @Flag(help: "On SIGTERM stop the current recordings at once and give their jobs back to the queue.")
        var handover = false

        @Option(help: "Status output: json (the service_status event every 2 s as a line), or none (default).")
        var status: StatusMode = .none

        func validate() throws {
            guard (1...1000).contains(maxCalls) else { throw ValidationError("--max-calls: expected 1 to 1000") }
            if let cpuBudget, !(cpuBudget > 0 && cpuBudget <= 4096) {
                throw ValidationError("--cpu-budget: expected a number of cores above 0")
            }
            if let serviceID, serviceID.isEmpty || serviceID.count > 128 {
                throw ValidationError("--service-id: expected 1 to 128 characters")
            }
        }

        func run() async throws {
            let logger = global.makeLogger(label: "conclave.recorder")
            let settings = try configFile.load()
            let store = try KeyStoreAccess.store(global, configured: settings.dataDirectory)
            guard let setup = try signaling.resolve(settings: settings, store: store, required: true) else {
                throw CallCommandError("no signaling broker for the recorder service")
            }
            let root: StorageRoot
            do {
                root = try StorageRoot(preparing: storage)
            } catch {
                throw CallCommandError("--storage: \(error)")
            }
            let host = ProcessInfo.processInfo.hostName
            let service = try RecorderService(
                configuration: .init(
                    serviceID: serviceID ?? "\(host)-\(getpid())",
                    host: host,
                    admission: Admission(
                        maxCalls: maxCalls,
                        cpuBudget: cpuBudget ?? Double(ProcessInfo.processInfo.activeProcessorCount)
                    ),
                    environment: JobEnvironment(
                        storage: root,
                        identity: FleetIdentity(
                            deviceID: setup.device.address.deviceId,
                            identity: setup.device.identity
                        ),
                        transport: try ice.transport(settings),
                        recorderVersion: conclaveVersion,
                        ecallCompatible: setup.ecallCompatible
                    ),
                    broker: STOMPClientConfiguration(
                        url: setup.url,
                        virtualHost: setup.virtualHost,
                        credentials: STOMPCredentials(login: setup.login, passcode: setup.passcode)
                    )
                ),
                logger: logger
            )
            let signals = StopSignals()
            let handover = handover
            let drainer = Task {
                // The first SIGTERM drains as asked; a second one hands the calls over.
                _ = await signals.wait(timeout: nil)
                await service.drain(handover: handover)
                _ = await signals.wait(timeout: nil)
                await service.drain(handover: true)
            }
            let mode = status
            let printer = Task {
                for await event in service.events { Self.show(event, mode: mode) }
            }
            defer { drainer.cancel() }
            try await service.run()
            await printer.value
        }

        /// One line per job event; status lines only as JSON, when asked.
        static func show(_ event: RecorderEvent, mode: StatusMode) {
            let line: String
            switch event {
            case .recordingStarted(let started):
                line =
                    "recording_started job \(started.jobID) call \(started.callID) attempt \(started.attempt) into \(started.path)"
            case .recordingFinished(let finished):
                let summary = finished.summary
                line =
                    "recording_finished job \(finished.jobID) call \(finished.callID) into \(finished.path): "
                    + "\(summary.participants) participants, \(summary.framesWritten) frames, "
                    + "\(summary.problems.count) problems"
            case .recordingFailed(let failed):
                line =
                    "recording_failed job \(failed.jobID ?? "-") call \(failed.callID.map(String.init) ?? "-"): \(failed.reason)"
            case .serviceStatus:
                guard mode == .json else { return }
                line = String(decoding: event.encoded(), as: UTF8.self)
            }
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
