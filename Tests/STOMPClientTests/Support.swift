import ConclaveTestSupport
import Foundation
import STOMPProtocol
import Synchronization

@testable import STOMPClient

/// The shared collector, under the name these tests use.
typealias Recorder = StreamCollector

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
