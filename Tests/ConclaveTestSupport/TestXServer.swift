import Foundation

/// A private X server (Xvfb) for one test, on a display number it chooses itself, and the
/// programs shown on it.
///
/// `-displayfd` makes Xvfb pick a free display (its lock files make that safe against other
/// tests starting servers at the same time) and write the number once it accepts connections:
/// that line is the readiness event, so nothing polls or sleeps.
public final class TestXServer: @unchecked Sendable {
    // @unchecked: everything is set in init and only read afterwards; `clients` is append-only
    // under the lock.
    /// The display name, `:N`.
    public let display: String
    /// The screen's size.
    public let width: Int
    public let height: Int
    private let server: BackgroundProcess
    private let lock = NSLock()
    private var clients: [BackgroundProcess] = []

    /// Starts Xvfb with one screen of `width` x `height` at 24 bits.
    public init(width: Int = 640, height: Int = 480) throws {
        let executable: String
        do { executable = try which("Xvfb") } catch {
            throw SubprocessError(description: "Xvfb is needed by this test and is not on PATH (apt install xvfb)")
        }
        server = try BackgroundProcess(
            executable,
            ["-displayfd", "1", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp"]
        )
        let line = try server.readLine(timeout: .seconds(20)).trimmingCharacters(in: .whitespaces)
        guard let number = Int(line) else {
            throw SubprocessError(description: "Xvfb announced no display number: \(line)")
        }
        display = ":\(number)"
        self.width = width
        self.height = height
        guard FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") else {
            throw SubprocessError(description: "Xvfb announced \(display) but /tmp/.X11-unix/X\(number) is missing")
        }
    }

    deinit { stop() }

    /// Stops every client, then the server, and removes the socket and lock file it leaves
    /// behind when killed (so the display number is free again, and device lists stay clean).
    public func stop() {
        lock.withLock { clients }.forEach { $0.stop() }
        server.stop()
        let number = display.dropFirst()
        for leftover in ["/tmp/.X11-unix/X\(number)", "/tmp/.X\(number)-lock"] {
            try? FileManager.default.removeItem(atPath: leftover)
        }
    }

    /// Shows a video file in a borderless window with its top-left corner at (`x`, `y`), at its own
    /// size and rate, looping, with Debian's `ffplay` (there is no window manager to move it).
    @discardableResult
    public func play(_ path: String, x: Int = 0, y: Int = 0) throws -> BackgroundProcess {
        let executable: String
        do { executable = try which("ffplay") } catch {
            throw SubprocessError(description: "ffplay is needed by this test and is not on PATH (apt install ffmpeg)")
        }
        let player = try BackgroundProcess(
            executable,
            [
                "-hide_banner", "-loglevel", "error", "-noborder", "-left", "\(x)", "-top", "\(y)", "-an", "-sn",
                "-loop", "0", path,
            ],
            environment: ["DISPLAY": display, "SDL_AUDIODRIVER": "dummy"]
        )
        lock.withLock { clients.append(player) }
        return player
    }
}
