import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

extension RabbitMQTestBed {
    /// The test process's shared broker, for one test at a time, in the state of a new broker:
    /// the `ecall` virtual host with its exchanges and queues, no users.
    ///
    /// Starting a node costs several seconds of two cores, more than most broker tests take once
    /// it runs, so tests that never stop, restart or pause the broker take this one. ``stop()``
    /// hands it back: every user and the virtual host are deleted (closing every connection and
    /// queue of the test) and the topology is imported again, in one call of Erlang expressions on
    /// the node, before the next test may have it. While another test holds it (parallel runs)
    /// the caller gets a private broker instead of waiting, so tests never share state and never
    /// wait on each other. Tests that stop, restart or pause the broker start a private one with ``init()``.
    /// The shared node is killed when the process exits, and by an ``ExitWatchdog`` when the
    /// process is killed.
    public static func shared() throws -> RabbitMQTestBed {
        switch SharedRabbitMQ.lease() {
        case .idle(let node, let number):
            return RabbitMQTestBed(leaseOf: node, number: number)
        case .start(let number):
            do {
                let node = try RabbitMQTestBed(
                    configuration: Configuration(),
                    logger: Logger(label: "rabbitmq-testbed-shared"),
                    diesWithTestProcess: true
                )
                SharedRabbitMQ.started(node)
                return RabbitMQTestBed(leaseOf: node, number: number)
            } catch {
                SharedRabbitMQ.startFailed()
                throw error
            }
        case .busy:
            return try RabbitMQTestBed()
        }
    }

    /// Empties the shared broker for the next test (see ``shared()``): one call of Erlang
    /// expressions on the node.
    func reset() throws {
        let definitions = directory.appendingPathComponent("definitions.json").path
        let actor = "<<\"conclave-testbed\">>"
        try evaluate(
            """
            [ok = rabbit_auth_backend_internal:delete_user(internal_user:get_username(U), \(actor))
                || U <- rabbit_auth_backend_internal:all_users()],
            ok = rabbit_vhost:delete(<<"\(Self.virtualHost)">>, \(actor)),
            {ok, Definitions} = file:read_file("\(definitions)"),
            ok = rabbit_definitions:import_raw(Definitions)
            """
        )
    }
}

/// Who holds the shared broker. Its lock is held only to read and change the state, never while
/// a node starts or resets.
enum SharedRabbitMQ {
    private enum State {
        /// Not started (or stopped after a failed reset).
        case none
        /// Started and empty, waiting for a test.
        case idle
        /// Lease `number` holds it (while it starts, is used, and resets).
        case leased(number: Int)
    }

    enum Lease {
        case idle(RabbitMQTestBed, number: Int)
        /// The caller starts the shared node and reports back with ``started(_:)`` or ``startFailed()``.
        case start(number: Int)
        /// Held by another test: the caller uses a private broker.
        case busy
    }

    private final class Holder: @unchecked Sendable {
        // @unchecked: every property is guarded by `lock`.
        let lock = NSLock()
        var state = State.none
        /// The shared node while it runs, killed at exit.
        var node: RabbitMQTestBed?
        var leases = 0
        var exitHandlerInstalled = false
    }

    private static let holder = Holder()

    static func lease() -> Lease {
        holder.lock.withLock {
            switch (holder.state, holder.node) {
            case (.leased, _):
                return .busy
            case (.idle, let node?):
                holder.leases += 1
                holder.state = .leased(number: holder.leases)
                return .idle(node, number: holder.leases)
            case (.none, _), (.idle, nil):
                holder.leases += 1
                holder.state = .leased(number: holder.leases)
                return .start(number: holder.leases)
            }
        }
    }

    static func started(_ node: RabbitMQTestBed) {
        let install = holder.lock.withLock {
            holder.node = node
            defer { holder.exitHandlerInstalled = true }
            return !holder.exitHandlerInstalled
        }
        if install { atexit { SharedRabbitMQ.stopAtExit() } }
    }

    static func startFailed() {
        holder.lock.withLock { holder.state = .none }
    }

    /// Hands lease `number` back after emptying the node; a node that cannot be emptied is
    /// stopped, and the next test starts a new one. An old lease's release changes nothing.
    static func release(lease number: Int) {
        let node = holder.lock.withLock { () -> RabbitMQTestBed? in
            guard case .leased(number) = holder.state else { return nil }
            return holder.node
        }
        guard let node else { return }
        do {
            try node.reset()
            holder.lock.withLock { holder.state = .idle }
        } catch {
            FileHandle.standardError.write(
                Data("RabbitMQ test bed: \(error); the next test starts a new broker\n".utf8)
            )
            node.stop()
            holder.lock.withLock {
                holder.node = nil
                holder.state = .none
            }
        }
    }

    private static func stopAtExit() {
        let node = holder.lock.withLock { () -> RabbitMQTestBed? in
            defer {
                holder.node = nil
                holder.state = .none
            }
            return holder.node
        }
        node?.stop()
    }
}
