import ArgumentParser
import ConclaveE2EE
import ConclaveFormats
import ConclaveKeyStore
import ECallSignaling
import Foundation
import JanusProtocol
import Logging
import STOMPClient

/// The broker options `join`, `record`, `rejoin`, `call create` and `listen` share.
///
/// There is deliberately no passcode flag: a flag's value is readable by every user of the
/// machine in `/proc/PID/cmdline` for as long as the call lasts.
struct SignalingOptions: ParsableArguments {
    @Option(
        name: .customLong("broker"),
        help: ArgumentHelp(
            "The signaling broker, ws://HOST:PORT/ws (default: $CONCLAVE_BROKER_URL, else signaling.url).",
            valueName: "url"
        )
    )
    var url: String?

    @Option(
        name: .customLong("passcode-file"),
        help: ArgumentHelp(
            "The file holding this device's broker passcode, or '-' for standard input.",
            discussion: """
                Default: signaling.passcodeFile, else $CONCLAVE_BROKER_PASSCODE_FILE, else \
                $CONCLAVE_BROKER_PASSCODES/device-<id>.passcode, else $CONCLAVE_BROKER_PASSCODE.
                """,
            valueName: "file"
        )
    )
    var passcodeFile: String?

    @Option(
        name: .customLong("rotation"),
        help: ArgumentHelp(
            "Seconds between key rotations while this device holds the key role (default: signaling.rotationSeconds, else 300).",
            valueName: "seconds"
        )
    )
    var rotation: Double?

    @Flag(
        name: .customLong("ecall-compatible"),
        help: "Accept unsigned invitations and key messages from the call's host, as ECall devices send them."
    )
    var ecallCompatible = false

    @Flag(
        name: .customLong("keep-key-history"),
        help:
            "Keep every key epoch of the call in the key store after it ends (default: the current and previous only; recordings always keep them, for repair)."
    )
    var keepKeyHistory = false

    /// Whether the command line asks for the broker. The environment and the configuration file
    /// only offer one: a device without broker ids then joins as before, without it.
    var requested: Bool {
        url != nil || passcodeFile != nil || rotation != nil || ecallCompatible
    }

    /// The broker settings of the flags, the environment and the configuration, in that order;
    /// nil when none of them names a broker, or (unless `required` or a flag asks for it) when this
    /// device has no broker ids.
    func resolve(settings: ConclaveConfiguration, store: KeyStore, required: Bool) throws -> BrokerSetup? {
        let environment = ProcessInfo.processInfo.environment
        let configured = settings.signaling
        guard
            let url = url ?? environment["CONCLAVE_BROKER_URL"].flatMap({ $0.isEmpty ? nil : $0 }) ?? configured?.url
        else {
            if required || requested {
                throw CallCommandError(
                    "no signaling broker: pass --broker ws://HOST:15674/ws, set CONCLAVE_BROKER_URL, or signaling.url in the configuration"
                )
            }
            return nil
        }
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://"), URL(string: url)?.host != nil else {
            throw CallCommandError("--broker \(url): expected ws://HOST:PORT/ws or wss://...")
        }
        let rotation = rotation ?? configured?.rotationSeconds ?? 300
        guard SignalingSettings.rotationRange.contains(rotation) else {
            let range = SignalingSettings.rotationRange
            throw CallCommandError(
                "--rotation \(rotation): expected \(Int(range.lowerBound)) to \(Int(range.upperBound)) seconds"
            )
        }
        let device: DeviceIdentityDetails
        do {
            device = try DeviceIdentityDetails.load(store)
        } catch {
            if required || requested { throw error }
            return nil
        }
        let passcode = try Self.passcode(
            file: passcodeFile ?? configured?.passcodeFile,
            deviceID: device.address.deviceId,
            environment: environment
        )
        return BrokerSetup(
            url: url,
            virtualHost: configured?.virtualHost ?? "ecall",
            login: configured?.login ?? "device-\(device.address.deviceId)",
            passcode: passcode,
            rotationSeconds: rotation,
            ecallCompatible: ecallCompatible || configured?.ecallCompatible == true,
            device: device
        )
    }

    /// The passcode: from `file`, else the environment (a file, a folder of per-device files as
    /// `conclave-testbed broker` writes them, or the value itself).
    static func passcode(file: String?, deviceID: UInt64, environment: [String: String]) throws -> String {
        if let file { return try SecretInput.read(file, flag: "--passcode-file") }
        if let file = environment["CONCLAVE_BROKER_PASSCODE_FILE"], !file.isEmpty {
            return try SecretInput.read(file, flag: "CONCLAVE_BROKER_PASSCODE_FILE")
        }
        if let folder = environment["CONCLAVE_BROKER_PASSCODES"], !folder.isEmpty {
            let file = URL(fileURLWithPath: folder).appendingPathComponent("device-\(deviceID).passcode").path
            return try SecretInput.read(file, flag: "CONCLAVE_BROKER_PASSCODES")
        }
        if let value = environment["CONCLAVE_BROKER_PASSCODE"], !value.isEmpty { return value }
        throw CallCommandError(
            "no broker passcode for device \(deviceID): pass --passcode-file FILE, set signaling.passcodeFile, or CONCLAVE_BROKER_PASSCODE_FILE"
        )
    }
}

/// This device as the broker and the other devices know it: its ids, name and key pair.
struct DeviceIdentityDetails {
    var address: DeviceAddress
    var name: String
    var identity: DeviceIdentity

    /// `USERID:NAME`, the display feeds are published under (the user id maps feeds to devices).
    var display: String { "\(address.userId):\(name)" }

    /// This device's roster entry.
    func rosterEntry(isHost: Bool) -> RosterEntry {
        RosterEntry(
            userId: address.userId,
            deviceId: address.deviceId,
            displayName: name,
            publicKey: identity.publicKeyString,
            isHost: isHost
        )
    }

    /// Reads the ids stored with the device key, or says which `keys` command stores them.
    static func load(_ store: KeyStore) throws -> DeviceIdentityDetails {
        let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
        let display = try KeyStoreAccess.run { try store.deviceDisplay() }
        let deviceID = try KeyStoreAccess.run { try store.deviceID() }
        let parsed = display.map(ParticipantDisplay.init(parsing:))
        guard let userText = parsed?.userID, let userID = UInt64(userText) else {
            throw CallCommandError(
                "the broker needs this device's numeric user id: run 'conclave keys set --display USERID:NAME'"
                    + (display.map { " (the stored display \"\($0)\" has none)" } ?? "")
            )
        }
        guard let deviceID else {
            throw CallCommandError("the broker needs this device's id: run 'conclave keys set --device-id N'")
        }
        return DeviceIdentityDetails(
            address: DeviceAddress(userId: userID, deviceId: deviceID),
            name: parsed?.name ?? userText,
            identity: identity
        )
    }
}

/// Everything needed to reach the broker as this device.
struct BrokerSetup {
    var url: String
    var virtualHost: String
    var login: String
    var passcode: String
    var rotationSeconds: Double
    var ecallCompatible: Bool
    var device: DeviceIdentityDetails

    /// Connects and subscribes to this device's messages; a refusal or an unreachable broker is
    /// one line naming the broker and the login (never the passcode).
    func connect(logger: Logger) async throws -> STOMPSignalingChannel {
        do {
            let channel = try STOMPSignalingChannel(
                configuration: .init(
                    url: url,
                    deviceID: device.address.deviceId,
                    passcode: passcode,
                    login: login,
                    virtualHost: virtualHost
                ),
                logger: logger
            )
            try await channel.connect()
            return channel
        } catch {
            throw CallCommandError("broker \(url) as \(login): \(error)")
        }
    }

    /// The key lifecycle's settings for `callID`.
    func lifecycleConfiguration(callID: UInt64) -> CallKeyLifecycle.Configuration {
        CallKeyLifecycle.Configuration(
            callId: callID,
            me: device.address,
            rotationPeriod: rotationSeconds,
            rotationLead: min(10, rotationSeconds / 2),
            ecallCompatible: ecallCompatible
        )
    }
}
