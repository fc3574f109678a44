import ArgumentParser
import Foundation
import RabbitMQTestBed

#if canImport(Glibc)
    import Glibc
#endif

extension TestBedCommand {
    /// Runs a private RabbitMQ with the signaling topology until Ctrl-C.
    struct Broker: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a private RabbitMQ (Web-STOMP on loopback) with one user per device, until Ctrl-C.",
            discussion: """
                Prints the STOMP WebSocket URL and each device's login; each passcode is written to \
                PASSCODES/device-<id>.passcode (mode 0600), never printed. The topology is \
                config/rabbitmq/README.md's.
                """
        )

        @Option(help: "Comma-separated device ids to create users for.")
        var devices: String = "1,2"

        @Option(help: "Folder for the passcode files (created 0700).")
        var passcodes: String = "broker-passcodes"

        @Option(help: "Folder with rabbitmq.conf, enabled_plugins and definitions.json (default: config/rabbitmq).")
        var config: String?

        func run() throws {
            let ids = try Self.deviceIDs(devices)
            var configuration = RabbitMQTestBed.Configuration()
            if let config { configuration.templateDirectory = URL(fileURLWithPath: config) }
            // Ctrl-C and SIGTERM are taken with sigwait below, so the broker is always stopped.
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGINT)
            sigaddset(&signals, SIGTERM)
            pthread_sigmask(SIG_BLOCK, &signals, nil)

            let bed = try RabbitMQTestBed(configuration: configuration)
            defer { bed.stop() }
            let folder = URL(fileURLWithPath: passcodes)
            print("CONCLAVE_STOMP_URL=\(bed.webSocketURL)")
            print("CONCLAVE_STOMP_VHOST=\(RabbitMQTestBed.virtualHost)")
            for (id, file) in try Self.writePasscodes(for: ids, on: bed, into: folder) {
                print("device \(id): login \(RabbitMQTestBed.login(forDevice: id)), passcode in \(file.path)")
            }
            print("broker running (log: \(bed.logFile.path)); Ctrl-C stops it")
            fflush(nil)
            var received: Int32 = 0
            sigwait(&signals, &received)
        }

        /// `1,2,3` as device ids.
        static func deviceIDs(_ text: String) throws -> [UInt64] {
            let ids = try text.split(separator: ",").map { text -> UInt64 in
                guard let id = UInt64(text.trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError("'\(text)' is not a device id")
                }
                return id
            }
            guard !ids.isEmpty else { throw ValidationError("no device ids given") }
            return ids
        }

        /// What a device's broker user may do besides signaling (config/rabbitmq/README.md).
        enum Role {
            case device
            /// The recorder fleet's device: takes jobs, announces events.
            case recorder
            /// Submits jobs and watches the services (`conclave recorder submit|status`).
            case submitter
        }

        /// The role of each id: `recorders` and `submitters` (comma-separated ids, each also in
        /// `ids`) get theirs, every other id is a plain device.
        static func roles(ids: [UInt64], recorders: String?, submitters: String?) throws -> [UInt64: Role] {
            var roles = Dictionary(uniqueKeysWithValues: ids.map { ($0, Role.device) })
            for (text, role, option) in [
                (recorders, Role.recorder, "--recorders"), (submitters, .submitter, "--submitters"),
            ] {
                guard let text else { continue }
                for id in try deviceIDs(text) {
                    guard roles[id] == .device else {
                        throw ValidationError("\(option): device \(id) is not in --devices, or has a role already")
                    }
                    roles[id] = role
                }
            }
            return roles
        }

        /// Creates a broker user per device and writes each passcode to
        /// `folder/device-<id>.passcode` (0600 in a 0700 folder): passcodes never reach argv or output.
        @discardableResult
        static func writePasscodes(
            for ids: [UInt64],
            roles: [UInt64: Role] = [:],
            on bed: RabbitMQTestBed,
            into folder: URL
        ) throws -> [(UInt64, URL)] {
            try FileManager.default.createDirectory(
                at: folder,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            var files: [(UInt64, URL)] = []
            for id in ids {
                let passcode =
                    switch roles[id] ?? .device {
                    case .device: try bed.addDevice(id)
                    case .recorder: try bed.addRecorder(id)
                    case .submitter: try bed.addSubmitter(id)
                    }
                let file = folder.appendingPathComponent("\(RabbitMQTestBed.login(forDevice: id)).passcode")
                try? FileManager.default.removeItem(at: file)
                guard
                    FileManager.default.createFile(
                        atPath: file.path,
                        contents: Data(passcode.utf8),
                        attributes: [.posixPermissions: 0o600]
                    )
                else { throw ValidationError("cannot write \(file.path)") }
                files.append((id, file))
            }
            return files
        }
    }
}
