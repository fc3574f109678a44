import Foundation
import STOMPProtocol
import Synchronization

@testable import STOMPClient

/// Collects a stream's elements so that a test can wait for one that matches, with a deadline.
final class Recorder<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var finished = false
        var waiters:
            [(id: Int, predicate: @Sendable (Element) -> Bool, continuation: CheckedContinuation<Element?, Never>)] = []
        var nextID = 0
    }

    private let state = Mutex(State())
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ stream: AsyncStream<Element>) {
        let consumer = Task { [weak self] in
            for await item in stream { self?.append(item) }
            self?.finish()
        }
        task.withLock { $0 = consumer }
    }

    deinit { task.withLock { $0?.cancel() } }

    var items: [Element] { state.withLock { $0.items } }

    private func append(_ item: Element) {
        let ready = state.withLock { state in
            state.items.append(item)
            let matching = state.waiters.filter { $0.predicate(item) }
            state.waiters.removeAll { $0.predicate(item) }
            return matching.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: item) }
    }

    private func finish() {
        let waiting = state.withLock { state in
            state.finished = true
            defer { state.waiters.removeAll() }
            return state.waiters.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(returning: nil) }
    }

    /// The first element, recorded after the `after`-th one, that matches; nil at the deadline or
    /// when the stream ended without one.
    func first(
        after skip: Int = 0,
        within limit: Duration = .seconds(30),
        where predicate: @escaping @Sendable (Element) -> Bool
    ) async -> Element? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timeout = Task {
            try? await Task.sleep(for: limit)
            let waiter = state.withLock { state -> CheckedContinuation<Element?, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: nil)
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { continuation in
            let found = state.withLock { state -> Element?? in
                if let item = state.items.dropFirst(skip).first(where: predicate) { return .some(item) }
                if state.finished { return .some(nil) }
                state.waiters.append((id, predicate, continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }
}

extension STOMPConnection.Event {
    var state: STOMPConnectionState? {
        if case .state(let state) = self { state } else { nil }
    }
    var error: STOMPError? {
        if case .error(let error) = self { error } else { nil }
    }
    var isConnected: Bool {
        if case .state(.connected) = self { true } else { false }
    }
    var isReconnecting: Bool {
        if case .state(.reconnecting) = self { true } else { false }
    }
    var closedError: STOMPError?? {
        if case .state(.closed(let error)) = self { .some(error) } else { nil }
    }
}

/// A scripted STOMP server in memory: it answers CONNECT with CONNECTED, records what the client
/// sends, and lets the test push any text to the client.
final class ScriptedServer: Sendable {
    final class Transport: STOMPTransport {
        let server: ScriptedServer
        let handler = Mutex<(@Sendable (STOMPTransportEvent) -> Void)?>(nil)

        init(server: ScriptedServer) { self.server = server }

        func open(handler: @escaping @Sendable (STOMPTransportEvent) -> Void) async throws(STOMPError) {
            self.handler.withLock { $0 = handler }
            server.current.withLock { $0 = self }
        }

        func send(_ text: String) {
            server.received.withLock { $0.append(text) }
            if text.hasPrefix("CONNECT\n") { push("CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0") }
        }

        func close() async {
            handler.withLock { $0 = nil }
        }

        func push(_ text: String) {
            handler.withLock { $0 }?(.message(text))
        }
    }

    let current = Mutex<Transport?>(nil)
    let received = Mutex<[String]>([])

    func makeTransport() -> any STOMPTransport { Transport(server: self) }

    func push(_ text: String) { current.withLock { $0 }?.push(text) }
}
