import ConclaveCall
import ConclaveE2EE
import ConclaveKeyStore
import ECallSignaling
import Foundation
import Logging

/// What a call needs to run its key over the broker: the connected channel, who is invited, and
/// where to keep the epochs.
struct SignalingContext {
    var setup: BrokerSetup
    var channel: any SignalingChannel
    /// Every invited device, with the host marked (from the signed invitation).
    var roster: [RosterEntry]
    var store: KeyStore
    /// The epoch of the key the call starts with (0, or the latest stored one on a rejoin).
    var epoch: UInt64 = 0
    /// Keep every epoch in the key store at the end (a recording needs them to be repaired).
    var keepHistory = false
    /// Closes the channel once the call is over.
    var close: @Sendable () async -> Void = {}

    /// The roster of the signed invitation kept with the call (``CallKeyRecord/invitation``).
    static func roster(of record: CallKeyRecord?) -> [RosterEntry]? {
        guard let text = record?.invitation, let message = try? SignalMessage(json: text) else { return nil }
        return message.roster
    }
}

/// A ``CallKeyCoordinator`` set up for one command's call: its key ring goes to the call's frame
/// crypto, its participant observer to the call's observers.
struct BrokerKeys: Sendable {
    let coordinator: CallKeyCoordinator
    let crypto: CallFrameCrypto

    /// Starts the coordinator; `epochApplied` hears each epoch (the recording lists them).
    static func start(
        context: SignalingContext,
        callID: UInt64,
        format: FrameCryptoFormat,
        key: CallKey?,
        logger: Logger,
        epochApplied: (@Sendable (CallKeyCoordinator.AppliedEpoch) -> Void)?
    ) async throws -> BrokerKeys {
        let ring = CallKeyRing()
        if let key { ring.install(key, epoch: context.epoch) }
        // The lifecycle moves to the coordinator's actor with an identity of its own: identities
        // are not Sendable.
        let coordinator = CallKeyCoordinator(
            lifecycle: try makeLifecycle(
                configuration: context.setup.lifecycleConfiguration(callID: callID),
                type: context.setup.device.identity.type,
                privateKeyBytes: context.setup.device.identity.privateKeyBytes,
                roster: context.roster,
                key: key,
                epoch: context.epoch
            ),
            channel: context.channel,
            keyRing: ring,
            storage: context.store.calls,
            logger: logger,
            epochApplied: epochApplied
        )
        let crypto = CallFrameCrypto(
            callID: callID,
            format: format,
            keyRing: ring,
            logger: logger,
            onKeyNeeded: coordinator.keyNeededHandler
        )
        await coordinator.start(crypto: crypto)
        return BrokerKeys(coordinator: coordinator, crypto: crypto)
    }

    /// A lifecycle built from Sendable parts only, so that it can move to the coordinator's actor.
    private static func makeLifecycle(
        configuration: CallKeyLifecycle.Configuration,
        type: DeviceKeyType,
        privateKeyBytes: [UInt8],
        roster: [RosterEntry],
        key: CallKey?,
        epoch: UInt64
    ) throws -> sending CallKeyLifecycle {
        let identity: DeviceIdentity
        do {
            identity = try DeviceIdentity(type: type, privateKeyBytes: privateKeyBytes)
        } catch {
            throw KeysCommandError(message: error.description)
        }
        return CallKeyLifecycle(
            configuration: configuration,
            identity: identity,
            roster: roster,
            key: key,
            epoch: epoch
        )
    }

    /// The figures `--status` adds: the current epoch and the rejected key messages.
    func figures() async -> KeyFigures {
        KeyFigures(
            keyEpoch: crypto.keyRing.current()?.epoch,
            appliedEpochs: await coordinator.appliedEpochs.map(\.epoch),
            rejectedMessages: await coordinator.rejectedMessages
        )
    }
}

/// The key figures of a call over the broker, as the status lines show them.
struct KeyFigures: Encodable, Sendable {
    var keyEpoch: UInt64?
    /// Every epoch this device installed or scheduled, in order.
    var appliedEpochs: [UInt64]
    var rejectedMessages: Int
}

/// A status report with the key figures added: the report's own fields stay as they are.
struct KeyedStatus<Report: StatusReport>: StatusReport {
    var report: Report
    var keys: KeyFigures

    func encode(to encoder: any Encoder) throws {
        try report.encode(to: encoder)
        try keys.encode(to: encoder)
    }

    func terminalText() -> String {
        report.terminalText()
            + "\nkey epoch \(keys.keyEpoch.map(String.init) ?? "-"), \(keys.rejectedMessages) key messages rejected"
    }
}
