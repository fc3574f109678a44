import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What ended a command's wait: a signal asking it to stop, or its `--duration`.
enum StopReason: Sendable, Equatable {
    /// SIGINT or SIGTERM.
    case signal(Int32)
    /// The duration ran out.
    case duration
}

/// The write end of the pipe the signal handler wakes ``StopSignals`` through; -1 until one exists.
/// A global because a C signal handler captures nothing; the handler only loads it.
private let stopSignalPipe = Atomic<Int32>(-1)

/// SIGINT and SIGTERM, turned from process-killing signals into one event that `join` and
/// `record` wait on.
///
/// The handler does the one async-signal-safe thing it can: it writes the signal's number to a
/// pipe, whose read end a dispatch read source watches, so the waiting task wakes when the signal
/// arrives (no polling). A dispatch *signal* source is not used because it only sees signals that
/// stay blocked in every thread, and the main thread unblocks SIGINT and SIGTERM at start (so that
/// a child of a parent that blocks them can still be stopped).
///
/// Sendable: both properties are constants, the stream is Sendable and the source is only kept
/// alive here (its handler runs on its own queue).
final class StopSignals: @unchecked Sendable {
    private let signals: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation
    /// Watches the pipe; nil when no pipe could be made.
    private let source: (any DispatchSourceRead)?

    /// Installs the handlers. Create one per process, before the work a signal should stop.
    init() {
        var ends: [Int32] = [-1, -1]
        let (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.signals = signals
        self.continuation = continuation
        // Without a pipe (out of descriptors at start-up) the signals keep their default action
        // and still end the process, only without the clean finish.
        guard pipe(&ends) == 0 else {
            source = nil
            return
        }
        for end in ends {
            // Not inherited by children; a full pipe never blocks the handler.
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        let reader = ends[0]
        let source = DispatchSource.makeReadSource(fileDescriptor: reader, queue: .global())
        source.setEventHandler {
            var bytes = [UInt8](repeating: 0, count: 16)
            let count = read(reader, &bytes, bytes.count)
            for byte in bytes.prefix(max(count, 0)) { continuation.yield(Int32(byte)) }
        }
        source.resume()
        self.source = source
        stopSignalPipe.store(ends[1], ordering: .relaxed)
        for number in [SIGINT, SIGTERM] {
            signal(number) { received in
                var byte = UInt8(truncatingIfNeeded: received)
                _ = write(stopSignalPipe.load(ordering: .relaxed), &byte, 1)
            }
        }
    }

    /// Stops the wait as SIGINT does (the call window's `q` and close button).
    func requestStop() { continuation.yield(SIGINT) }

    /// Waits for SIGINT or SIGTERM, or for `timeout` when given; returns what came first.
    func wait(timeout: Duration?) async -> StopReason {
        let signals = self.signals
        return await withTaskGroup(of: StopReason?.self) { group in
            group.addTask {
                for await number in signals { return .signal(number) }
                return nil
            }
            if let timeout {
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    return .duration
                }
            }
            var reason: StopReason?
            while reason == nil, let next = await group.next() { reason = next }
            group.cancelAll()
            // The signal stream ends only on cancellation, so without a timeout it always returns one.
            return reason ?? .duration
        }
    }
}
