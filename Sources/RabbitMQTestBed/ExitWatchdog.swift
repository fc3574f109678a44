import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Kills a test bed's process groups when the test process ends, however it ends.
///
/// `atexit` stops the shared broker when the test process exits, but not when it is killed
/// (SIGKILL from a CI timeout, a crash): the node and its epmd would then live on, holding their
/// ports and folder. The watchdog is a small shell process reading a pipe whose only writer is
/// this process. Nothing is ever written: the kernel closes the writer when this process ends, the
/// read returns at end of file, and the watchdog kills its process groups and removes the folder.
/// No polling, and nothing the test process has to do on the way out.
///
/// It is armed as soon as a process is spawned, before the broker has finished booting (a kill
/// during the boot is as likely as any other), and it kills the whole group: Foundation starts
/// each child in a session of its own, and `rabbitmq-server` is a script whose Erlang VM is a
/// grandchild. The owner fires it right after stopping the groups itself, so a group number can
/// be reused only in that instant. The watchdog ignores SIGINT, SIGTERM and SIGHUP: a Ctrl-C
/// reaches the whole foreground process group, and the watchdog must outlive the test process.
/// (`/bin/sh` is dash, whose `kill` takes a negative pid for a group but no `--`.)
final class ExitWatchdog: @unchecked Sendable {
    // @unchecked: both properties are set once in init; `fire()` is called once, by the owner.
    /// The pipe's writer, close-on-exec so that no other child process inherits it (an inherited
    /// copy would keep the pipe open after this process ends).
    let writer: Int32
    private let watcher: Process

    /// Arms a watchdog for the process group led by `group` (a child Foundation started) and,
    /// if given, `directory`.
    init(killingGroupOf group: pid_t, removing directory: URL?) throws {
        // Glibc's module has no pipe2: close-on-exec copies are made with fcntl, so the plain
        // originals live only between pipe and close (a child spawned by another thread in that
        // instant could inherit them; the copies no child ever inherits).
        var plain: [Int32] = [-1, -1]
        guard pipe(&plain) == 0 else {
            throw RabbitMQTestBedError("cannot make the exit watchdog's pipe: \(String(cString: strerror(errno)))")
        }
        let ends = [fcntl(plain[0], F_DUPFD_CLOEXEC, 3), fcntl(plain[1], F_DUPFD_CLOEXEC, 3)]
        close(plain[0])
        close(plain[1])
        guard ends[0] >= 0, ends[1] >= 0 else {
            for end in ends where end >= 0 { close(end) }
            throw RabbitMQTestBedError("cannot make the exit watchdog's pipe: \(String(cString: strerror(errno)))")
        }
        let script = """
            trap '' INT TERM HUP
            read -r _ || true
            kill -9 "-$1" 2>/dev/null || kill -9 "$1" 2>/dev/null
            [ -n "$2" ] && rm -rf -- "$2"
            exit 0
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, "exit-watchdog", "\(group)", directory?.path ?? ""]
        process.standardInput = FileHandle(fileDescriptor: ends[0], closeOnDealloc: false)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            close(ends[0])
            close(ends[1])
            throw RabbitMQTestBedError("cannot start the exit watchdog: \(error)")
        }
        close(ends[0])
        writer = ends[1]
        watcher = process
    }

    /// Runs the watchdog now, as if this process had ended, and waits for it: after the owner's
    /// own stop this only reaps the watchdog (its groups are gone).
    func fire() {
        close(writer)
        watcher.waitUntilExit()
    }
}
