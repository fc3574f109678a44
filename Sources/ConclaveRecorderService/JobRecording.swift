import ConclaveCall
import ConclaveE2EE
public import ConclavePeerConnection
import ConclaveRecorder
import Foundation
import JanusClient
import Logging
import RecorderJobs
import Synchronization

/// What a service gives each job: where to write, how to open keys, how to reach Janus.
public struct JobEnvironment: Sendable {
    public var storage: StorageRoot
    public var identity: FleetIdentity
    /// ICE settings of the subscriber (the `record` options).
    public var transport: MediaTransport.Configuration
    public var recorderVersion: String
    /// How long joining may take before the job fails (an unreachable Janus, a lost room).
    public var joinTimeout: Duration
    /// Accept unsigned key messages from the roster's host, as ECall devices send them (the
    /// signaling's ECall-compatible mode).
    public var ecallCompatible: Bool

    public init(
        storage: StorageRoot,
        identity: FleetIdentity,
        transport: MediaTransport.Configuration,
        recorderVersion: String,
        joinTimeout: Duration = .seconds(15),
        ecallCompatible: Bool = false
    ) {
        self.storage = storage
        self.identity = identity
        var transport = transport
        // Nothing is played back: datagrams may wait up to 40 ms, read in fewer wakeups (as `record`).
        transport.receiveBatching = .recording
        self.transport = transport
        self.recorderVersion = recorderVersion
        self.joinTimeout = joinTimeout
        self.ecallCompatible = ecallCompatible
    }
}

/// Why a recording stopped.
enum StopReason: Sendable, Hashable, CustomStringConvertible {
    case duration
    case roomEmpty
    /// The service stops the call to hand it to another service (drain with handover, or the
    /// broker connection lost: the broker has given the job back to the queue).
    case handover(String)

    var description: String {
        switch self {
        case .duration: "duration reached"
        case .roomEmpty: "room empty"
        case .handover(let why): why
        }
    }
}

/// The first stop reason wins; whoever waits hears it.
final class StopLatch: Sendable {
    private let state = Mutex<(reason: StopReason?, waiters: [CheckedContinuation<StopReason, Never>])>((nil, []))

    func fire(_ reason: StopReason) {
        let waiters = state.withLock { state -> [CheckedContinuation<StopReason, Never>] in
            guard state.reason == nil else { return [] }
            state.reason = reason
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: reason) }
    }

    var reason: StopReason? { state.withLock { $0.reason } }

    func wait() async -> StopReason {
        await withCheckedContinuation { continuation in
            let fired = state.withLock { state -> StopReason? in
                if let reason = state.reason { return reason }
                state.waiters.append(continuation)
                return nil
            }
            if let fired { continuation.resume(returning: fired) }
        }
    }
}

/// Counts the room's publishers from the subscription's participant events and fires the latch
/// once the room has stayed empty for the job's grace time. Frames pass straight through.
final class RoomPresence: CallMediaObserver {
    private struct State {
        var feeds: Set<UInt64> = []
        var timer: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let grace: Duration?
    private let latch: StopLatch

    /// `grace` nil: the job does not stop on an empty room (the count is still kept for status).
    init(grace: Duration?, latch: StopLatch) {
        self.grace = grace
        self.latch = latch
    }

    var participants: Int { state.withLock { $0.feeds.count } }

    /// Starts the grace timer if the room is empty now (a recorder that joins an empty room waits
    /// the grace time for someone to come).
    func start() { update { _ in } }

    func participantJoined(feedID: UInt64, display: String?) { update { $0.insert(feedID) } }
    func participantLeft(feedID: UInt64) { update { $0.remove(feedID) } }
    func received(_ media: ReceivedMedia) {}
    func senderReport(_ report: SubscribedSenderReport) {}

    func stop() { state.withLock { $0.timer?.cancel() } }

    private func update(_ change: (inout Set<UInt64>) -> Void) {
        guard let grace else {
            state.withLock { change(&$0.feeds) }
            return
        }
        let latch = latch
        state.withLock { state in
            change(&state.feeds)
            if state.feeds.isEmpty {
                guard state.timer == nil else { return }
                state.timer = Task {
                    // A timer, not a wait for something else: the grace time is the job's rule.
                    try? await Task.sleep(for: grace)
                    if !Task.isCancelled { latch.fire(.roomEmpty) }
                }
            } else {
                state.timer?.cancel()
                state.timer = nil
            }
        }
    }
}

/// How a job ended.
enum JobOutcome: Sendable {
    /// Recorded, finished and verified (problems listed, if any).
    case finished(FinishedRecording)
    /// Refused or failed before anything worth keeping was written.
    case failed(String)
    /// Stopped for another service to continue (the files are finished, the job not done).
    case handedOver(String)
}

struct FinishedRecording: Sendable {
    var directory: String
    var attempt: Int
    var manifest: RecordingManifest
    var problems: [String]
}

/// One job being recorded: checked, joined, recorded as `conclave record` records, stopped on the
/// job's condition and finished. The service keeps one per call it holds.
final class JobRecording: Sendable {
    let job: RecordJob
    let latch = StopLatch()
    private let presence: RoomPresence
    private let started = ContinuousClock.now
    private let directory = Mutex<String?>(nil)
    private let logger: Logger

    init(job: RecordJob, logger: Logger) {
        self.job = job
        var logger = logger
        logger[metadataKey: "job"] = "\(job.jobID)"
        self.logger = logger
        let grace: Duration? =
            switch job.stop {
            case .roomEmpty(let seconds): .milliseconds(Int64((seconds * 1000).rounded()))
            case .after: nil
            }
        presence = RoomPresence(grace: grace, latch: latch)
    }

    /// Publishers in the room now.
    var participants: Int { presence.participants }
    /// Seconds since the job was taken.
    var seconds: Double {
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Asks the recording to stop now (hand over, or the job went back to the queue).
    func stop(_ reason: StopReason) { latch.fire(reason) }

    /// Checks the job, then records it. `redelivered`: the broker delivered this job before (the
    /// previous attempt's folder is continued). `signaling`: the service's channel as the fleet
    /// device, for a job with an invitation. `onStarted` hears the folder once the room is joined
    /// and the recording runs.
    func run(
        in environment: JobEnvironment,
        redelivered: Bool,
        signaling: CallSignalingHub?,
        onStarted: @Sendable (String, Int) async -> Void
    ) async -> JobOutcome {
        // Everything that needs no network first: a bad job writes nothing and joins nothing.
        let plan: AttemptPlan
        let key: CallKey?
        let format: FrameCryptoFormat?
        var invitation: CheckedInvitation?
        do throws(RecorderServiceError) {
            let output = try environment.storage.resolve(job.output)
            plan = try AttemptPlan.plan(output: output, redelivered: redelivered)
            (key, format) = try openKey(environment.identity)
            if let text = job.invitation, key != nil {
                invitation = try CheckedInvitation.check(
                    text,
                    job: job,
                    identity: environment.identity,
                    ecallCompatible: environment.ecallCompatible
                )
            }
        } catch {
            return .failed(error.reason)
        }
        // The call's key messages, from before the room is joined: a rotation sent meanwhile is
        // not missed.
        var view: CallSignalingView?
        if invitation != nil {
            guard let signaling else {
                return .failed("invitation: this service has no fleet device id to follow the call's keys as")
            }
            do {
                view = try await signaling.view(callID: job.callID, timeout: environment.joinTimeout)
            } catch {
                return .failed(error.reason)
            }
        }
        if case .after(let seconds) = job.stop {
            let latch = latch
            Task {
                // The job's duration: a timer by design.
                try? await Task.sleep(for: .milliseconds(Int64((seconds * 1000).rounded())))
                latch.fire(.duration)
            }
        }

        let joined: (JanusConnection, RoomListener)
        do {
            joined = try await join(timeout: environment.joinTimeout)
        } catch {
            view?.release()
            return .failed("\(error)")
        }
        let (connection, listener) = joined
        // The room is there: only now the folder is made (as `record` does).
        let recording: RecordingSession
        do {
            recording = try RecordingSession(
                configuration: .init(
                    directory: plan.directory,
                    callID: "\(job.callID)",
                    room: job.room,
                    janusURL: job.janusURL,
                    recorderVersion: environment.recorderVersion,
                    cryptoFormat: job.crypto.rawValue,
                    keyEpochs: key == nil ? [] : [job.keyEpoch ?? 0]
                ),
                logger: logger,
                datagramDelay: environment.transport.receiveBatching?.maximumDelay ?? .zero
            )
        } catch {
            view?.release()
            await listener.leave()
            await connection.close()
            return .failed("output: \(error)")
        }
        directory.withLock { $0 = plan.directory }
        var crypto: CallFrameCrypto?
        var keys: JobCallKeys?
        var observers: [any CallMediaObserver] = [recording, presence]
        if let key, let format, let invitation, let view {
            do {
                let started = try await JobCallKeys.start(
                    invitation: invitation,
                    job: job,
                    key: key,
                    format: format,
                    identity: environment.identity,
                    ecallCompatible: environment.ecallCompatible,
                    view: view,
                    logger: logger,
                    epochApplied: { recording.keyEpochApplied($0.epoch, validFrom: $0.validFrom) }
                )
                keys = started
                crypto = started.crypto
                observers.append(started.coordinator.participantObserver)
            } catch {
                view.release()
                _ = await recording.finish()
                await listener.leave()
                await connection.close()
                return .failed(error.reason)
            }
        } else if let key, let format {
            let callCrypto = CallFrameCrypto(callID: job.callID, format: format, logger: logger)
            callCrypto.keyRing.install(key, epoch: job.keyEpoch ?? 0)
            crypto = callCrypto
        }
        let subscription: RoomSubscription
        do {
            subscription = RoomSubscription(
                session: try await connection.createSession(),
                configuration: .init(
                    room: job.room,
                    ownFeedID: listener.joined.id,
                    crypto: crypto,
                    transport: environment.transport
                ),
                initialPublishers: listener.joined.publishers,
                roomEvents: listener.roomEvents,
                observers: observers,
                logger: logger
            )
        } catch {
            await keys?.stop()
            _ = await recording.finish()
            await listener.leave()
            await connection.close()
            return .failed("janusURL: \(job.janusURL): \(error)")
        }
        recording.setKeyframeRequester { [weak subscription] feedID in
            guard let subscription else { return }
            Task { await subscription.requestKeyframe(feedID: feedID) }
        }
        presence.start()
        // The previous attempt of a dead service is finished from its journals meanwhile; its last
        // frame is where the outage starts.
        let previous: Task<RecordingManifest?, Never>? = plan.previous.map { folder in
            let version = environment.recorderVersion
            return Task.detached { Self.finishPrevious(folder, recorderVersion: version) }
        }
        await onStarted(plan.directory, plan.attempt)

        let reason = await latch.wait()
        logger.notice("stopping", metadata: ["reason": "\(reason)"])
        presence.stop()
        await subscription.close()
        await keys?.stop()
        var manifest = await recording.finish()
        await listener.leave()
        await connection.close()
        if let continuation = Outage.continuation(plan: plan, previous: await previous?.value, current: manifest) {
            manifest.continuation = continuation
            do {
                try manifest.write(to: plan.directory)
            } catch {
                logger.error("cannot write the continuation", metadata: ["error": "\(error)"])
            }
        }
        if case .handover(let why) = reason { return .handedOver(why) }
        return .finished(
            FinishedRecording(
                directory: plan.directory,
                attempt: plan.attempt,
                manifest: manifest,
                problems: Self.problems(of: manifest)
            )
        )
    }

    /// The folder being written, once recording.
    var outputDirectory: String? { directory.withLock { $0 } }

    private func openKey(_ identity: FleetIdentity) throws(RecorderServiceError) -> (CallKey?, FrameCryptoFormat?) {
        guard job.crypto != .none else { return (nil, nil) }
        guard let format = FrameCryptoFormat(rawValue: job.crypto.rawValue) else {
            throw RecorderServiceError("crypto: \"\(job.crypto.rawValue)\" is not ecall, sframe or none")
        }
        guard let wrapped = job.wrappedKey else {
            throw RecorderServiceError(
                "wrappedKey: missing for crypto \(job.crypto.rawValue); refusing to record ciphertext"
            )
        }
        return (try identity.unwrap(wrapped, for: job.recorderDeviceID), format)
    }

    /// Connects and joins within `timeout`: an unreachable Janus or a missing room fails the job
    /// with the reason, instead of holding a slot.
    private func join(timeout: Duration) async throws(RecorderServiceError) -> (JanusConnection, RoomListener) {
        let job = job
        let logger = logger
        let result = await withTaskGroup(of: Result<(JanusConnection, RoomListener), RecorderServiceError>?.self) {
            group in
            group.addTask {
                let connection: JanusConnection
                do {
                    connection = try await JanusConnection.connect(to: job.janusURL, logger: logger)
                } catch {
                    return .failure(RecorderServiceError("janusURL: \(job.janusURL) is unreachable: \(error)"))
                }
                do {
                    let listener = try await RoomListener.join(
                        on: try await connection.createSession(),
                        room: job.room,
                        display: job.display ?? "recorder"
                    )
                    return .success((connection, listener))
                } catch {
                    await connection.close()
                    return .failure(
                        RecorderServiceError("room: cannot join room \(job.room) on \(job.janusURL): \(error)")
                    )
                }
            }
            group.addTask {
                // The bound on joining: a timer by design.
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // A join that completes after the deadline is undone, not leaked.
            for await late in group {
                if case .success(let (connection, listener))? = late {
                    await listener.leave()
                    await connection.close()
                }
            }
            return first
        }
        switch result {
        case .success(let joined): return joined
        case .failure(let error): throw error
        case nil:
            throw RecorderServiceError("janusURL: no answer from \(job.janusURL) within \(timeout)")
        }
    }

    /// Repairs an attempt a dead recorder left (`recording` status): its files are rebuilt from
    /// the journals, as `conclave recordings repair` does. Returns its manifest.
    private static func finishPrevious(_ folder: String, recorderVersion: String) -> RecordingManifest? {
        guard let manifest = try? RecordingManifest.read(from: folder) else { return nil }
        guard manifest.status == "recording" else { return manifest }
        return (try? RecordingRepair.repair(directory: folder, recorderVersion: recorderVersion))?.manifest
            ?? manifest
    }

    /// What the verification left to report: segments with an error or journals kept (a file
    /// that did not verify), tracks that failed.
    static func problems(of manifest: RecordingManifest) -> [String] {
        var problems: [String] = []
        if manifest.status != "finished" { problems.append("manifest status \(manifest.status)") }
        for participant in manifest.participants {
            for segment in participant.segments {
                let name = segment.file ?? "\(participant.key) segment \(segment.index)"
                if let error = segment.error { problems.append("\(name): \(error)") }
                if !segment.journals.isEmpty { problems.append("\(name): journals kept (not verified)") }
                for track in segment.tracks {
                    if let error = track.error { problems.append("\(name) \(track.kind): \(error)") }
                }
            }
        }
        return problems
    }
}
