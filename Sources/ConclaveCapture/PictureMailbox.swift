import ConclaveCore
import Synchronization

/// The one picture slot between a capture thread and the sending task: the thread replaces the
/// picture, the sender reads the newest. A capture never queues, so a slow encoder skips pictures
/// instead of falling behind the device, and memory stays at one picture.
final class PictureMailbox: Sendable {
    private struct State {
        /// The newest picture; it stays after being read, so a slow device's picture is repeated.
        var latest: VideoFrame?
        /// A sender waiting for the first picture.
        var waiter: CheckedContinuation<Void, any Error>?
        /// Why the device stopped, once it has.
        var end: CaptureError?
        /// Pictures posted so far.
        var posted = 0
    }

    private let state = Mutex(State())

    /// Replaces the picture (capture thread), and wakes a waiting sender.
    func post(_ picture: VideoFrame) {
        let waiter = state.withLock { state in
            state.latest = picture
            state.posted += 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Records that the device stopped (capture thread). The last picture, if any, stays.
    func end(_ error: CaptureError) {
        let waiter = state.withLock { state in
            state.end = state.end ?? error
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    /// The newest picture, if one has come.
    var latest: VideoFrame? { state.withLock { $0.latest } }

    /// Pictures the device delivered so far.
    var posted: Int { state.withLock { $0.posted } }

    /// Why the device stopped, if it has.
    var ended: CaptureError? { state.withLock { $0.end } }

    /// Suspends until the first picture is there; throws when the device ended before giving one,
    /// or when the task is cancelled.
    func waitForFirstPicture() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now: Result<Void, any Error>? = state.withLock { state in
                    if state.latest != nil { return .success(()) }
                    if let end = state.end { return .failure(end) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
