internal import CNice
import Dispatch
import Glibc
import Synchronization

/// A `GMainContext` iterated by a dedicated thread, on which libnice runs its timers, socket
/// reads and signal emissions.
///
/// Every `ICEAgent` owns one loop (one thread per transport, as Janus does per handle): an agent
/// busy with checks never delays another's packets, and closing an agent ends its thread, so
/// nothing outlives the transport.
///
/// Lifecycle: `init` starts the thread; `shutdown(_:)` runs a last closure on the thread, which
/// calls the `quit` it is given when done (possibly later, from a callback); the thread then
/// dispatches whatever is still pending and exits; `waitForExit()` joins it.
@usableFromInline
final class GLibEventLoop: @unchecked Sendable {
    // @unchecked: `context` and `loop` are GLib objects whose attach/quit/wakeup APIs are
    // thread-safe; all mutable Swift state is inside `lifecycle`.
    let context: OpaquePointer  // GMainContext *
    private let loop: OpaquePointer  // GMainLoop *
    private let lifecycle = Mutex(Lifecycle())
    /// Runs actor jobs that arrive after the thread has exited, in order, one at a time.
    private let afterExitQueue: DispatchQueue
    /// Marks `afterExitQueue`, so that work running there counts as the loop's (see `isOwner`).
    private let afterExitKey = DispatchSpecificKey<Bool>()
    /// The loop thread's `pthread_self()`, stored by the thread before it runs anything: the
    /// owner check on the per-packet path is one relaxed load and a compare, no lock (unlike
    /// `g_main_context_is_owner`, which takes the context's mutex).
    private let ownerThread = Atomic<UInt>(0)

    private struct Lifecycle: ~Copyable {
        var thread: pthread_t?
        /// Set by `shutdown`: no new GSource is attached after this.
        var stopping = false
        /// Set by the thread when it has dispatched everything and is about to return.
        var exited = false
        var joined = false
        /// Work that arrived while stopping: run by the thread before it exits.
        var pending: [@Sendable () -> Void] = []
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Starts the loop thread; `name` labels the queue that serves late actor jobs.
    init(name: String) throws(ICEError) {
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        afterExitQueue = DispatchQueue(label: "\(name).closed")
        afterExitQueue.setSpecific(key: afterExitKey, value: true)
        let start = Unmanaged.passRetained(ThreadStart(loop: self)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, glibLoopThreadMain, start)
        guard result == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(start).release()
            throw ICEError.threadCreationFailed(errno: result)
        }
        lifecycle.withLock { $0.thread = thread }
    }

    deinit {
        g_main_loop_unref(loop)
        g_main_context_unref(context)
    }

    /// True once the thread has run its last work item (it then only returns).
    var hasExited: Bool { lifecycle.withLock { $0.exited } }

    /// True once the thread has been joined (by `waitForExit`) or detached.
    var isJoinedOrDetached: Bool { lifecycle.withLock { $0.joined } }

    /// True when called on the loop thread while it iterates the context.
    var isCurrentThread: Bool { g_main_context_is_owner(context) != 0 }

    /// True when called from work the loop runs: on its thread (at any point of its life, also
    /// while it drains after shutdown), or on the serial queue that takes its work after it
    /// exited. Lock-free, for checks on the per-packet path.
    @usableFromInline var isOwner: Bool {
        pthread_self() == ownerThread.load(ordering: .relaxed) || DispatchQueue.getSpecific(key: afterExitKey) == true
    }

    /// Runs `body` on the loop thread at its next iteration, never inline (unlike
    /// `g_main_context_invoke`, which calls directly when already on the owning thread and would
    /// nest one actor job inside another). After shutdown, runs it on a serial queue instead.
    func execute(_ body: @escaping @Sendable () -> Void) {
        enum Route { case attach, pending, afterExit }
        let route: Route = lifecycle.withLock { state in
            if !state.stopping { return .attach }
            if !state.exited {
                state.pending.append(body)
                return .pending
            }
            return .afterExit
        }
        switch route {
        case .attach: attach(body)
        case .pending: g_main_context_wakeup(context)
        case .afterExit: afterExitQueue.async(execute: body)
        }
    }

    /// Begins shutdown: `teardown` runs on the loop thread and must call `quit` (immediately or
    /// from a later callback on the same thread) once it has released its GLib resources.
    func shutdown(_ teardown: @escaping @Sendable (_ quit: @escaping @Sendable () -> Void) -> Void) {
        let alreadyStopping = lifecycle.withLock { state in
            defer { state.stopping = true }
            return state.stopping
        }
        guard !alreadyStopping else { return }
        attach { [self] in teardown { g_main_loop_quit(self.loop) } }
    }

    /// Suspends until the thread has exited, then joins it. Must not be called on the loop thread.
    func waitForExit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let exited = lifecycle.withLock { state in
                if !state.exited { state.exitWaiters.append(continuation) }
                return state.exited
            }
            if exited { continuation.resume() }
        }
        let thread: pthread_t? = lifecycle.withLock { state in
            defer { state.joined = true }
            return state.joined ? nil : state.thread
        }
        if let thread { pthread_join(thread, nil) }
    }

    /// Lets the thread release its resources by itself when nobody will join it.
    func detachThread() {
        let thread: pthread_t? = lifecycle.withLock { state in
            defer { state.joined = true }
            return state.joined ? nil : state.thread
        }
        if let thread { pthread_detach(thread) }
    }

    /// Calls `body` on the loop thread every `milliseconds` until it returns false or the loop
    /// shuts down. A GLib timeout on the thread that already wakes for every datagram: periodic
    /// work costs no thread hop and no timer thread of its own.
    func repeatEvery(milliseconds: UInt32, _ body: @escaping @Sendable () -> Bool) {
        guard !lifecycle.withLock({ $0.stopping }) else { return }
        let source = g_timeout_source_new(guint(max(milliseconds, 1)))
        g_source_set_priority(source, G_PRIORITY_DEFAULT)
        g_source_set_callback(
            source,
            { data in
                guard let data else { return 0 }
                return Unmanaged<RepeatingBox>.fromOpaque(data).takeUnretainedValue().run() ? 1 : 0
            },
            Unmanaged.passRetained(RepeatingBox(loop: self, body)).toOpaque(),
            { data in if let data { Unmanaged<RepeatingBox>.fromOpaque(data).release() } }
        )
        g_source_attach(source, context)
        g_source_unref(source)
    }

    /// Lets datagrams gather before the thread wakes to read them (see ``ReceiveBatching``): the
    /// thread's poll function sleeps before blocking. Installed on the thread, whose state it is.
    func batchReceives(_ batching: ReceiveBatchingPoll) {
        execute { [self] in batching.install(on: context) }
    }

    /// Whether shutdown has begun (repeating work then stops).
    fileprivate var isStopping: Bool { lifecycle.withLock { $0.stopping } }

    private func attach(_ body: @escaping @Sendable () -> Void) {
        let source = g_idle_source_new()
        g_source_set_priority(source, G_PRIORITY_DEFAULT)
        g_source_set_callback(
            source,
            { data in
                guard let data else { return 0 }
                Unmanaged<ClosureBox>.fromOpaque(data).takeUnretainedValue().run()
                return 0  // G_SOURCE_REMOVE: run once
            },
            Unmanaged.passRetained(ClosureBox(body)).toOpaque(),
            { data in if let data { Unmanaged<ClosureBox>.fromOpaque(data).release() } }
        )
        g_source_attach(source, context)
        g_source_unref(source)
    }

    /// The thread's body, after the start box has been unwrapped.
    fileprivate func run() {
        ownerThread.store(pthread_self(), ordering: .relaxed)
        g_main_context_push_thread_default(context)
        g_main_loop_run(loop)
        // Dispatch sources attached before shutdown (including libnice's own final callbacks)
        // and work queued while stopping, until nothing is left.
        while true {
            while g_main_context_iteration(context, 0) != 0 {}
            let work: [@Sendable () -> Void] = lifecycle.withLock { state in
                defer { state.pending.removeAll() }
                if state.pending.isEmpty { state.exited = true }
                return state.pending
            }
            if work.isEmpty { break }
            for body in work { body() }
        }
        g_main_context_pop_thread_default(context)
        // A thread id may be reused once this thread is joined: later work runs on the queue.
        ownerThread.store(0, ordering: .relaxed)
        let waiters = lifecycle.withLock { state in
            defer { state.exitWaiters.removeAll() }
            return state.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A closure in a class, so it can travel through a `gpointer` to the loop thread.
///
/// GLib's own locking orders the handoff, but it uses futexes that ThreadSanitizer cannot see;
/// the release/acquire pair on `published` states the ordering in a form it checks.
final class ClosureBox: Sendable {
    private let body: @Sendable () -> Void
    private let published = Atomic<Bool>(false)

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        published.store(true, ordering: .releasing)
    }

    func run() {
        _ = published.load(ordering: .acquiring)
        body()
    }
}

/// A repeating closure for `repeatEvery`; it holds the loop weakly (the loop owns the source).
final class RepeatingBox: Sendable {
    private let body: @Sendable () -> Bool
    private weak let loop: GLibEventLoop?
    private let published = Atomic<Bool>(false)

    init(loop: GLibEventLoop, _ body: @escaping @Sendable () -> Bool) {
        self.loop = loop
        self.body = body
        published.store(true, ordering: .releasing)
    }

    /// Runs the body; false removes the source.
    func run() -> Bool {
        _ = published.load(ordering: .acquiring)
        guard let loop, !loop.isStopping else { return false }
        return body()
    }
}

/// What the new thread needs: handed over retained, taken back once.
private final class ThreadStart {
    let loop: GLibEventLoop
    init(loop: GLibEventLoop) { self.loop = loop }
}

/// `void *start_routine(void *)` for pthread_create.
private func glibLoopThreadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
    start.loop.run()
    return nil
}
