import ConclaveE2EE
import ConclaveKeyStore
import ECallSignaling
import Foundation
import Logging
import Synchronization

/// Runs a ``CallKeyLifecycle`` for one call: feeds it the room's participants, the frame crypto's
/// "key needed" events, the messages of a ``SignalingChannel`` and its own rotation timer, and
/// carries out what it decides on the call's ``CallKeyRing``, the channel and the key store.
///
/// Wiring, before the call joins:
/// ```swift
/// let coordinator = CallKeyCoordinator(lifecycle: lifecycle, channel: channel, keyRing: ring, ...)
/// let crypto = CallFrameCrypto(callID: id, format: format, keyRing: ring, logger: logger,
///                              onKeyNeeded: coordinator.keyNeededHandler)
/// await coordinator.start(crypto: crypto)
/// let session = CallSession(configuration: ..., observers: [coordinator.participantObserver], ...)
/// ```
/// Everything reaches the lifecycle through one stream, in order, so it sees one input at a time.
/// Undecodable messages and unknown types are logged in one line and dropped. The channel's
/// availability goes in too (the host owes a rotation rather than rotating into an outage), and a
/// channel that fails for good is logged once and kept in ``signalingFailure``; the call's media
/// goes on under the keys it has.
public actor CallKeyCoordinator {
    /// A key epoch as this device applied it: when it became (or becomes) current.
    public struct AppliedEpoch: Sendable, Hashable {
        public var epoch: UInt64
        public var validFrom: Date
    }

    private var lifecycle: CallKeyLifecycle
    private let channel: any SignalingChannel
    private let keyRing: CallKeyRing
    private let storage: CallKeyStorage?
    private let logger: Logger
    private let inputs: AsyncStream<CallKeyLifecycle.Input>
    private let continuation: AsyncStream<CallKeyLifecycle.Input>.Continuation
    /// Messages to send, in order, by a task of their own: a send can wait up to the channel's
    /// own timeout while the broker is away, and the lifecycle must go on meanwhile (a rotation
    /// from the host still has to be scheduled while our key request waits to go out).
    private let outbox: AsyncStream<Outgoing>
    private let outboxContinuation: AsyncStream<Outgoing>.Continuation
    private var crypto: CallFrameCrypto?
    private var tasks: [Task<Void, Never>] = []
    private var timer: Task<Void, Never>?
    private var timerDeadline: Date?
    private var applied: [AppliedEpoch] = []
    private var rejections = 0
    private var failure: (any Error)?
    private let epochApplied: (@Sendable (AppliedEpoch) -> Void)?

    /// The observer to give the ``CallSession`` (or ``RoomSubscription``): it turns publishers
    /// arriving and leaving into participant changes by the user id of their `userId:name` display.
    public nonisolated let participantObserver: any CallMediaObserver

    /// The handler to give ``CallFrameCrypto`` as `onKeyNeeded`.
    public nonisolated let keyNeededHandler: @Sendable (KeyNeededEvent) -> Void

    /// - Parameters:
    ///   - storage: where each epoch is kept (wrapped for this device) with its validity window;
    ///     nil keeps nothing on disk.
    ///   - epochApplied: told each epoch installed or scheduled, with when it takes effect (a
    ///     recording lists them: ``RecordingSession/keyEpochApplied(_:validFrom:)``); not told of a
    ///     key that was current already, nor of a late one kept for decryption only.
    public init(
        lifecycle: sending CallKeyLifecycle,
        channel: any SignalingChannel,
        keyRing: CallKeyRing,
        storage: CallKeyStorage?,
        logger: Logger,
        epochApplied: (@Sendable (AppliedEpoch) -> Void)? = nil
    ) {
        self.epochApplied = epochApplied
        self.lifecycle = lifecycle
        self.channel = channel
        self.keyRing = keyRing
        self.storage = storage
        var logger = logger
        logger[metadataKey: "call"] = "\(lifecycle.configuration.callId)"
        self.logger = logger
        let (inputs, continuation) = AsyncStream.makeStream(of: CallKeyLifecycle.Input.self)
        self.inputs = inputs
        self.continuation = continuation
        (outbox, outboxContinuation) = AsyncStream.makeStream(of: Outgoing.self)
        participantObserver = ParticipantFeeds(continuation: continuation)
        keyNeededHandler = { continuation.yield(.keyNeeded($0)) }
    }

    /// Starts reading messages and inputs; `crypto` is told when a key request was answered.
    public func start(crypto: CallFrameCrypto?) {
        guard tasks.isEmpty else { return }
        self.crypto = crypto
        perform(lifecycle.start(now: Date()))
        let continuation = continuation
        let logger = logger
        let messages = channel.messages
        let reader = Task {
            for await body in messages {
                do {
                    continuation.yield(.message(try SignalMessage(json: body)))
                } catch {
                    logger.notice("dropped a signaling message: \(error)")
                }
            }
        }
        let inputs = inputs
        let loop = Task { [weak self] in
            for await input in inputs {
                guard let self else { return }
                await self.process(input)
            }
        }
        let availability = channel.availability
        let watcher = Task { [weak self] in
            for await change in availability {
                switch change {
                case .up: continuation.yield(.signaling(available: true))
                case .down: continuation.yield(.signaling(available: false))
                case .failed(let error):
                    continuation.yield(.signaling(available: false))
                    await self?.signalingFailed(error)
                }
            }
        }
        let channel = channel
        let outbox = outbox
        let sender = Task {
            for await message in outbox {
                do {
                    try await channel.send(message.body, toDevice: message.device)
                } catch {
                    logger.warning("could not send \(message.type) to device \(message.device): \(error)")
                }
            }
        }
        tasks = [reader, loop, watcher, sender]
        rearmTimer()
    }

    /// Asks the call's participants for the key (this device has none, or lost it).
    public func requestRejoin() { continuation.yield(.rejoinNeeded) }

    /// Hands `input` to the lifecycle as if it had arrived (tests, and the CLI's own events).
    public nonisolated func submit(_ input: CallKeyLifecycle.Input) { continuation.yield(input) }

    /// Whether this device holds the key role now.
    public var isHost: Bool { lifecycle.isHost }

    /// The current key host.
    public var host: DeviceAddress? { lifecycle.host }

    /// Every epoch this device scheduled or installed, in the order they take effect: a key
    /// installed now comes before one scheduled earlier for a later time (a rejoining device can
    /// get the next rotation before the current key).
    public var appliedEpochs: [AppliedEpoch] { applied }

    /// How many key messages were rejected (forged, replayed, misaddressed).
    public var rejectedMessages: Int { rejections }

    /// Why the signaling channel failed for good (a `STOMPError` with `.connectRefused` when the
    /// broker refused this device's credentials), or nil while it works or may come back.
    public var signalingFailure: (any Error)? { failure }

    /// Stops: no more messages, inputs or rotations. Unless `keepHistory`, the key store keeps
    /// only the current and previous epochs of the call.
    public func stop(keepHistory: Bool = false) {
        continuation.finish()
        outboxContinuation.finish()
        for task in tasks { task.cancel() }
        timer?.cancel()
        tasks = []
        guard !keepHistory, let storage else { return }
        do {
            try storage.pruneHistory(for: lifecycle.configuration.callId)
        } catch {
            logger.warning("could not prune the call's key history: \(error)")
        }
    }

    // MARK: Internals

    private func signalingFailed(_ error: any Error) {
        failure = error
        logger.error("call signaling failed for good: \(error); media goes on with the current key")
    }

    private func process(_ input: CallKeyLifecycle.Input) {
        if case .tick = input { timerDeadline = nil }
        perform(lifecycle.handle(input, now: Date()))
        rearmTimer()
    }

    /// Carries out the lifecycle's actions; sends are queued for the sender task, in order.
    private func perform(_ actions: [CallKeyLifecycle.Action]) {
        for action in actions {
            switch action {
            case .send(let message, let device):
                outboxContinuation.yield(Outgoing(body: message.jsonBody(), device: device, type: message.type))
            case .install(let key, let epoch):
                // Only a change is an epoch applied: the key current already (a second answer
                // bringing it) is not, nor one the ring keeps for decryption only because it has
                // applied a newer rotation on its own clock since the lifecycle decided.
                if keyRing.install(key, epoch: epoch) == .madeCurrent {
                    record(AppliedEpoch(epoch: epoch, validFrom: Date()))
                }
            case .schedule(let key, let epoch, let at):
                let delay = at.timeIntervalSinceNow
                keyRing.schedule(key, epoch: epoch, after: .milliseconds(Int64((max(delay, 0) * 1000).rounded())))
                record(AppliedEpoch(epoch: epoch, validFrom: at))
            case .retain(let key, let epoch): keyRing.retain(key, epoch: epoch)
            case .store(let epoch, let wrappedKey, let validFrom):
                do {
                    try storage?.storeWrappedKey(
                        wrappedKey,
                        for: lifecycle.configuration.callId,
                        epoch: epoch,
                        appliedAt: validFrom
                    )
                } catch {
                    logger.warning("could not store key epoch \(epoch): \(error)")
                }
            case .keyRequestCompleted: crypto?.keyRequestCompleted()
            case .becameHost: logger.notice("this device holds the call's key role")
            case .stoppedBeingHost: logger.notice("this device no longer holds the call's key role")
            case .log(let level, let line):
                switch level {
                case .debug: logger.debug("\(line)")
                case .notice: logger.notice("\(line)")
                case .warning:
                    if line.hasPrefix("rejected") { rejections += 1 }
                    logger.warning("\(line)")
                }
            }
        }
    }

    /// One message waiting for the sender task.
    private struct Outgoing: Sendable {
        var body: String
        var device: UInt64
        var type: SignalMessageType
    }

    private func record(_ epoch: AppliedEpoch) {
        let index = applied.lastIndex { $0.validFrom <= epoch.validFrom }.map { $0 + 1 } ?? 0
        applied.insert(epoch, at: index)
        epochApplied?(epoch)
    }

    /// One timer task for the lifecycle's next deadline (a rotation): a deadline, not a poll.
    private func rearmTimer() {
        let deadline = lifecycle.nextDeadline
        guard deadline != timerDeadline else { return }
        timer?.cancel()
        timerDeadline = deadline
        guard let deadline else { return }
        let continuation = continuation
        timer = Task {
            let delay = deadline.timeIntervalSinceNow
            if delay > 0 { try? await Task.sleep(for: .milliseconds(Int64((delay * 1000).rounded(.up)))) }
            guard !Task.isCancelled else { return }
            continuation.yield(.tick)
        }
    }
}

/// Turns feeds arriving and leaving into users joining and leaving: a user whose feed is replaced
/// (a recovery publishes again with a new feed id) does not leave.
private final class ParticipantFeeds: CallMediaObserver {
    private let continuation: AsyncStream<CallKeyLifecycle.Input>.Continuation
    /// The user of each feed, and how many feeds each user has.
    private let feeds = Mutex<(users: [UInt64: UInt64], counts: [UInt64: Int])>(([:], [:]))

    init(continuation: AsyncStream<CallKeyLifecycle.Input>.Continuation) {
        self.continuation = continuation
    }

    func participantJoined(feedID: UInt64, display: String?) {
        guard let text = display?.split(separator: ":", maxSplits: 1).first, let userId = UInt64(text) else { return }
        let first = feeds.withLock { feeds -> Bool in
            guard feeds.users[feedID] == nil else { return false }
            feeds.users[feedID] = userId
            feeds.counts[userId, default: 0] += 1
            return feeds.counts[userId] == 1
        }
        if first { continuation.yield(.participantJoined(userId: userId)) }
    }

    func participantLeft(feedID: UInt64) {
        let last = feeds.withLock { feeds -> UInt64? in
            guard let userId = feeds.users.removeValue(forKey: feedID) else { return nil }
            let remaining = (feeds.counts[userId] ?? 1) - 1
            feeds.counts[userId] = remaining > 0 ? remaining : nil
            return remaining > 0 ? nil : userId
        }
        if let last { continuation.yield(.participantLeft(userId: last)) }
    }

    func received(_ media: ReceivedMedia) {}

    func senderReport(_ report: SubscribedSenderReport) {}
}
