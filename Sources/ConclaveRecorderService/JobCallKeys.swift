import ConclaveCall
import ConclaveE2EE
import ECallSignaling
import Foundation
import Logging
import RecorderJobs

/// A job's invitation, checked: the fleet device as the call's roster lists it, and the roster.
struct CheckedInvitation: Sendable {
    var me: DeviceAddress
    var roster: [RosterEntry]

    /// Checks `job`'s invitation as an invited device checks one: signed by the caller's roster
    /// key (unsigned only in ECall-compatible mode), addressed to the fleet device, its key opening
    /// with the fleet's device key. Throws one line naming why not; nothing has been written yet.
    ///
    /// The signature's send time is not held to the replay window: a job may be submitted long
    /// after the call began, and what the signature vouches for here, the roster, does not age.
    static func check(
        _ text: String,
        job: RecordJob,
        identity: FleetIdentity,
        ecallCompatible: Bool
    ) throws(RecorderServiceError) -> CheckedInvitation {
        let message: SignalMessage
        do {
            message = try SignalMessage(json: text)
        } catch {
            throw RecorderServiceError("invitation: not a signaling message: \(error)")
        }
        let roster = message.roster ?? []
        guard let device = job.recorderDeviceID, let entry = roster.first(where: { $0.deviceId == device }) else {
            throw RecorderServiceError("invitation: its roster does not list the recorder device")
        }
        if let fleet = identity.deviceID, fleet != entry.deviceId {
            throw RecorderServiceError(
                "invitation: for device \(entry.deviceId), this fleet's recorder device is \(fleet)"
            )
        }
        guard !entry.isHost else {
            throw RecorderServiceError("invitation: its roster makes the recorder device the call's key host")
        }
        let deviceIdentity: DeviceIdentity
        do {
            deviceIdentity = try identity.deviceIdentity()
        } catch {
            throw RecorderServiceError("invitation: this fleet's device key: \(error)")
        }
        do {
            _ = try message.openInvitation(
                as: entry.device,
                with: deviceIdentity,
                now: Date(),
                acceptUnsigned: ecallCompatible,
                window: .infinity
            )
        } catch {
            throw RecorderServiceError("invitation: \(error); refusing to follow keys it does not vouch for")
        }
        return CheckedInvitation(me: entry.device, roster: roster)
    }
}

/// A ``CallKeyCoordinator`` for one job's call: the fleet device as an invited participant that
/// never takes the key role, over the call's view of the service's signaling channel. Its key
/// ring is the job's frame crypto's; a frame that does not open asks the key host for the current
/// key (the job's key may be older than the call's: the job was taken after a rotation).
struct JobCallKeys: Sendable {
    let coordinator: CallKeyCoordinator
    let crypto: CallFrameCrypto
    private let view: CallSignalingView

    /// Starts following the keys, from `key` of the job's epoch.
    static func start(
        invitation: CheckedInvitation,
        job: RecordJob,
        key: CallKey,
        format: FrameCryptoFormat,
        identity: FleetIdentity,
        ecallCompatible: Bool,
        view: CallSignalingView,
        logger: Logger,
        epochApplied: @escaping @Sendable (CallKeyCoordinator.AppliedEpoch) -> Void
    ) async throws(RecorderServiceError) -> JobCallKeys {
        let epoch = job.keyEpoch ?? 0
        let ring = CallKeyRing()
        ring.install(key, epoch: epoch)
        let coordinator = CallKeyCoordinator(
            lifecycle: try makeLifecycle(
                configuration: CallKeyLifecycle.Configuration(
                    callId: job.callID,
                    me: invitation.me,
                    ecallCompatible: ecallCompatible,
                    mayHoldKeyRole: false
                ),
                identity: identity,
                roster: invitation.roster,
                key: key,
                epoch: epoch
            ),
            channel: view,
            keyRing: ring,
            // The recording lists the epochs; a service keeps no call keys of its own.
            storage: nil,
            logger: logger,
            epochApplied: epochApplied
        )
        let crypto = CallFrameCrypto(
            callID: job.callID,
            format: format,
            keyRing: ring,
            logger: logger,
            onKeyNeeded: coordinator.keyNeededHandler
        )
        await coordinator.start(crypto: crypto)
        return JobCallKeys(coordinator: coordinator, crypto: crypto, view: view)
    }

    /// Stops following: no more messages, requests or key changes.
    func stop() async {
        await coordinator.stop(keepHistory: true)
        view.release()
    }

    /// A lifecycle built from Sendable parts, so that it can move to the coordinator's actor.
    private static func makeLifecycle(
        configuration: CallKeyLifecycle.Configuration,
        identity: FleetIdentity,
        roster: [RosterEntry],
        key: CallKey,
        epoch: UInt64
    ) throws(RecorderServiceError) -> sending CallKeyLifecycle {
        let deviceIdentity: DeviceIdentity
        do {
            deviceIdentity = try identity.deviceIdentity()
        } catch {
            throw RecorderServiceError("invitation: this fleet's device key: \(error)")
        }
        return CallKeyLifecycle(
            configuration: configuration,
            identity: deviceIdentity,
            roster: roster,
            key: key,
            epoch: epoch
        )
    }
}
