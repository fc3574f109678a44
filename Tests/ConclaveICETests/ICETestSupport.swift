import ConclaveTestSupport
import Logging
import Testing

@testable import ConclaveICE

/// Bounds a wait so a broken agent fails the test instead of hanging it.
struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

func withDeadline<T: Sendable>(
    _ what: String,
    seconds: Int = 20,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TimedOut(what: what) }
        return first
    }
}

/// Two agents on 127.0.0.1 only, no STUN or TURN: nothing leaves the loopback interface.
func makeLoopbackAgent(
    _ role: ICEAgent.Configuration.Role,
    receiveBatching: ReceiveBatching? = nil,
    datagramHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil
) throws -> ICEAgent {
    var logger = Logger(label: "test.ice.\(role)")
    logger.logLevel = .warning
    return try ICEAgent(
        configuration: .init(role: role, localAddresses: ["127.0.0.1"], receiveBatching: receiveBatching),
        logger: logger,
        datagramHandler: datagramHandler
    )
}

/// Collects what an agent's streams deliver, so tests can wait on them from several places.
actor AgentObserver {
    private(set) var states: [ICEConnectionState] = []
    private(set) var candidates: [String] = []
    private(set) var sawEndOfCandidates = false

    func record(_ state: ICEConnectionState) { states.append(state) }
    func record(_ event: ICECandidateEvent) {
        switch event {
        case .candidate(let line): candidates.append(line)
        case .endOfCandidates: sawEndOfCandidates = true
        }
    }

    /// Waits until the last reported state is one of `wanted` (polling the recorded history).
    func waitForState(_ wanted: Set<ICEConnectionState>, after index: Int = 0) async throws {
        while true {
            if states.count > index, let last = states.last, wanted.contains(last) { return }
            if states.last == .failed, !wanted.contains(.failed) { throw TimedOut(what: "anything but failed") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Trickles `from`'s candidates to `to` as they are gathered, and records both streams.
func startTrickle(from: ICEAgent, to: ICEAgent, observer: AgentObserver) -> [Task<Void, Never>] {
    let candidates = Task {
        for await event in from.localCandidates {
            await observer.record(event)
            switch event {
            case .candidate(let line): try? await to.addRemoteCandidate(line)
            case .endOfCandidates: try? await to.addRemoteEndOfCandidates()
            }
        }
    }
    let states = Task {
        for await state in from.stateChanges { await observer.record(state) }
    }
    return [candidates, states]
}

/// A connected pair with its observers and forwarding tasks.
struct ConnectedPair {
    let controlling: ICEAgent
    let controlled: ICEAgent
    let controllingObserver: AgentObserver
    let controlledObserver: AgentObserver
    let tasks: [Task<Void, Never>]

    static func connect(
        controllingHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil,
        controlledHandler: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil,
        controlledBatching: ReceiveBatching? = nil
    ) async throws -> ConnectedPair {
        let a = try makeLoopbackAgent(.controlling, datagramHandler: controllingHandler)
        let b = try makeLoopbackAgent(
            .controlled,
            receiveBatching: controlledBatching,
            datagramHandler: controlledHandler
        )
        let observerA = AgentObserver()
        let observerB = AgentObserver()
        try await b.setRemoteCredentials(a.localCredentials())
        try await a.setRemoteCredentials(b.localCredentials())
        let tasks =
            startTrickle(from: a, to: b, observer: observerA) + startTrickle(from: b, to: a, observer: observerB)
        try await a.gatherCandidates()
        try await b.gatherCandidates()
        try await withDeadline("both agents connected") {
            try await observerA.waitForState([.connected, .ready])
            try await observerB.waitForState([.connected, .ready])
        }
        return ConnectedPair(
            controlling: a,
            controlled: b,
            controllingObserver: observerA,
            controlledObserver: observerB,
            tasks: tasks
        )
    }

    func close() async {
        await controlling.close()
        await controlled.close()
        for task in tasks { await task.value }
    }
}
