/// Runs actor jobs on a `GLibEventLoop` thread, so an actor using it may call libnice directly
/// and share state with libnice's signal callbacks without locks (as NIO's event loops do for
/// their `SerialExecutor`).
final class GLibExecutor: SerialExecutor {
    let loop: GLibEventLoop

    init(loop: GLibEventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    func checkIsolated() {
        // After close, late jobs run on the loop's serial fallback queue.
        precondition(loop.isCurrentThread || loop.hasExited, "not on the ICE agent's GLib loop thread")
    }
}
