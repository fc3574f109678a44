import Dispatch
import JanusClient
import JanusProtocol
import JanusTesting
import Synchronization
import Testing

/// Requests run on the caller's executor: a caller on an actor sends without hopping to the
/// global executor first (and is resumed there directly after the reply).
@Suite struct CallerExecutorTests {
    /// A serial executor on a dispatch queue that code can recognise itself running on.
    final class QueueExecutor: SerialExecutor {
        private static let key = DispatchSpecificKey<Bool>()
        private let queue = DispatchQueue(label: "conclave.test.caller")

        init() { queue.setSpecific(key: Self.key, value: true) }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }

        /// Whether the current code runs on this executor's queue.
        static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }
    }

    /// An actor whose jobs run on a ``QueueExecutor``.
    actor QueueBoundCaller {
        private let executor = QueueExecutor()
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        func roomExists(_ room: UInt64, on handle: VideoRoomHandle) async throws -> Bool {
            try await handle.roomExists(room)
        }

        func keepalive(_ session: JanusSession) async throws {
            try await session.sendKeepalive()
        }
    }

    /// The in-memory Janus's transport, noting for each request whether it left from the
    /// caller's executor (the shell writes to its transport synchronously, on the sending thread).
    final class RecordingTransport: JanusTransport {
        private let inner: any JanusTransport
        private let log: Mutex<[(text: String, onCaller: Bool)]>

        init(_ inner: any JanusTransport) {
            self.inner = inner
            log = Mutex([])
        }

        /// Whether each request containing `marker` was sent from the caller's executor.
        func sentFromCaller(containing marker: String) -> [Bool] {
            log.withLock { $0.filter { $0.text.contains(marker) }.map(\.onCaller) }
        }

        func open(handler: @escaping @Sendable (JanusTransportEvent) -> Void) async throws(JanusClientError) {
            try await inner.open(handler: handler)
        }

        func send(_ text: String) {
            let onCaller = QueueExecutor.isCurrent
            log.withLock { $0.append((text, onCaller)) }
            inner.send(text)
        }

        func close() async { await inner.close() }
        func abort() async { await inner.abort() }
    }

    @Test func anActorsRequestsLeaveFromItsOwnExecutor() async throws {
        let janus = InMemoryJanus(rooms: [5])
        let transport = RecordingTransport(janus.makeTransport())
        var options = janus.options()
        options.transport = { _ in transport }
        let connection = try await JanusConnection.connect(to: "ws://in-memory.janus:8188", options: options)
        let session = try await connection.createSession()
        let room = try await VideoRoomHandle.attach(to: session)

        let caller = QueueBoundCaller()
        #expect(try await caller.roomExists(5, on: room))
        #expect(try await !caller.roomExists(6, on: room))
        try await caller.keepalive(session)

        #expect(transport.sentFromCaller(containing: #""request":"exists""#) == [true, true])
        #expect(transport.sentFromCaller(containing: #""janus":"keepalive""#) == [true])
        // The control: requests made off the actor do not run there.
        _ = try await room.roomExists(5)
        #expect(transport.sentFromCaller(containing: #""request":"exists""#) == [true, true, false])
        await connection.close()
    }
}
