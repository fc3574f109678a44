import ConclaveCall
import ECallSignaling
import Foundation
import Logging
import STOMPClient
import Synchronization

/// The fleet device's signaling channel in one service, shared by every job that follows its
/// call's keys.
///
/// The fleet has one device and one broker login, and the broker gives each subscription its own
/// copy of the device's messages, so one channel per service sees the messages of every call any
/// service records. One channel per job would multiply the connections by the jobs for nothing; the
/// hub reads the one channel and hands each job a ``CallSignalingView`` that carries only its call's
/// messages (by `callId`) and sends through the shared channel.
///
/// It connects when the first view is asked for (a service that records no encrypted call with an
/// invitation opens no channel), and again after a failed attempt. The service closes it.
final class CallSignalingHub: Sendable {
    private struct View {
        var messages: AsyncStream<String>.Continuation
        var availability: AsyncStream<SignalingAvailability>.Continuation
    }

    private struct State {
        /// The channel, connected or connecting; nil before the first view and after a failed connect.
        var channel: Task<STOMPSignalingChannel, any Error>?
        var views: [UInt64: [Int: View]] = [:]
        var nextView = 0
        /// The channel's last state other than up, which a view made meanwhile starts with.
        var outage: SignalingAvailability?
        var closed = false
        var readers: [Task<Void, Never>] = []
    }

    private let configuration: STOMPSignalingChannel.Configuration
    private let logger: Logger
    private let state = Mutex(State())

    /// A hub for the fleet device `deviceID`, reaching the broker as `broker` says (the service's
    /// own login: the fleet's `device-<id>`).
    init(deviceID: UInt64, broker: STOMPClientConfiguration, logger: Logger) {
        var configuration = STOMPSignalingChannel.Configuration(
            url: broker.url,
            deviceID: deviceID,
            passcode: broker.credentials.passcode,
            login: broker.credentials.login,
            virtualHost: broker.virtualHost
        )
        // Heart-beats, timeouts, reconnect and queue limits as the service's own connections.
        configuration.tuning = { $0 = broker }
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "signaling"] = "device-\(deviceID)"
        self.logger = logger
    }

    /// A view of call `callID`'s messages, once the channel is connected (within `timeout`).
    func view(callID: UInt64, timeout: Duration) async throws(RecorderServiceError) -> CallSignalingView {
        let connecting = try channelTask()
        let channel: STOMPSignalingChannel
        do {
            channel = try await Self.value(of: connecting, within: timeout)
        } catch {
            state.withLock { state in
                // The next job tries again, with a new channel.
                if state.channel == connecting { state.channel = nil }
            }
            connecting.cancel()
            throw RecorderServiceError(
                "signaling: broker \(configuration.url) as \(configuration.login): \(error)"
            )
        }
        let (messages, messageContinuation) = AsyncStream.makeStream(of: String.self)
        let (availability, availabilityContinuation) = AsyncStream.makeStream(of: SignalingAvailability.self)
        let id = state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            let id = state.nextView
            state.nextView += 1
            state.views[callID, default: [:]][id] = View(
                messages: messageContinuation,
                availability: availabilityContinuation
            )
            if let outage = state.outage { availabilityContinuation.yield(outage) }
            return id
        }
        guard let id else { throw RecorderServiceError("signaling: the service is stopping") }
        return CallSignalingView(
            channel: channel,
            messages: messages,
            availability: availability,
            release: { [weak self] in self?.release(callID: callID, view: id) }
        )
    }

    /// Closes the channel; every view's streams end.
    func close() async {
        let (channel, readers, views) = state.withLock { state in
            state.closed = true
            defer {
                state.channel = nil
                state.views = [:]
                state.readers = []
            }
            return (state.channel, state.readers, state.views.values.flatMap(\.values))
        }
        for view in views {
            view.messages.finish()
            view.availability.finish()
        }
        for reader in readers { reader.cancel() }
        guard let channel else { return }
        channel.cancel()
        if let connected = try? await channel.value { await connected.close() }
    }

    // MARK: Internals

    private func channelTask() throws(RecorderServiceError) -> Task<STOMPSignalingChannel, any Error> {
        let configuration = configuration
        let logger = logger
        let task = state.withLock { state -> Task<STOMPSignalingChannel, any Error>? in
            guard !state.closed else { return nil }
            if let channel = state.channel { return channel }
            let channel = Task { [weak self] () async throws -> STOMPSignalingChannel in
                let channel = try STOMPSignalingChannel(configuration: configuration, logger: logger)
                self?.startReading(channel)
                do {
                    try await withTaskCancellationHandler {
                        try await channel.connect()
                    } onCancel: {
                        Task { await channel.close() }
                    }
                } catch {
                    await channel.close()
                    throw error
                }
                return channel
            }
            state.channel = channel
            return channel
        }
        guard let task else { throw RecorderServiceError("signaling: the service is stopping") }
        return task
    }

    /// Routes the channel's messages to the views of their call, and its availability to every view.
    private func startReading(_ channel: STOMPSignalingChannel) {
        let messages = channel.messages
        let availability = channel.availability
        let logger = logger
        let router = Task { [weak self] in
            for await body in messages {
                guard let self else { return }
                // Key messages are a few per call and minute: parsing each once here is nothing.
                guard let callID = try? SignalMessage(json: body).callId else {
                    logger.debug("dropped a signaling message without a call id")
                    continue
                }
                let views = self.state.withLock { $0.views[callID].map { Array($0.values) } ?? [] }
                if views.isEmpty { logger.debug("no job here follows call \(callID)") }
                for view in views { view.messages.yield(body) }
            }
        }
        let watcher = Task { [weak self] in
            for await change in availability {
                guard let self else { return }
                let views = self.state.withLock { state -> [View] in
                    if case .up = change { state.outage = nil } else { state.outage = change }
                    return state.views.values.flatMap(\.values)
                }
                for view in views { view.availability.yield(change) }
            }
        }
        state.withLock { $0.readers += [router, watcher] }
    }

    private func release(callID: UInt64, view id: Int) {
        let view = state.withLock { state -> View? in
            let view = state.views[callID]?.removeValue(forKey: id)
            if state.views[callID]?.isEmpty == true { state.views[callID] = nil }
            return view
        }
        view?.messages.finish()
        view?.availability.finish()
    }

    /// `task`'s value, or a timeout error once `timeout` has passed.
    private static func value<Value: Sendable>(
        of task: Task<Value, any Error>,
        within timeout: Duration
    ) async throws -> Value {
        try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask { try await task.value }
            group.addTask {
                // The bound on connecting: a timer by design.
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() ?? nil else {
                // Awaiting `task.value` does not end when its child is cancelled: the group would
                // wait for the connect at its close. Cancelling the connect itself ends it (its
                // cancellation handler closes the channel), so the bound holds.
                task.cancel()
                throw RecorderServiceError("not connected within \(timeout)")
            }
            return value
        }
    }
}

/// One call's part of the service's signaling channel: the messages of that call, the channel's
/// availability, and sends through the shared channel. Released when the job ends.
final class CallSignalingView: SignalingChannel {
    private let channel: STOMPSignalingChannel
    let messages: AsyncStream<String>
    let availability: AsyncStream<SignalingAvailability>
    private let releaser: @Sendable () -> Void

    init(
        channel: STOMPSignalingChannel,
        messages: AsyncStream<String>,
        availability: AsyncStream<SignalingAvailability>,
        release: @escaping @Sendable () -> Void
    ) {
        self.channel = channel
        self.messages = messages
        self.availability = availability
        releaser = release
    }

    func send(_ body: String, toDevice deviceID: UInt64) async throws {
        try await channel.send(body, toDevice: deviceID)
    }

    /// Stops receiving the call's messages; its streams end.
    func release() { releaser() }
}
