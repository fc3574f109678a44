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
    public init(width: Int = 1280, height: Int = 720) throws {
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

    /// Runs `body` with `DISPLAY` naming this server (see ``withDisplay(_:_:)``).
    public func withDisplay<T>(_ body: () async throws -> T) async rethrows -> T {
        try await Self.withDisplay(display, body)
    }

    /// Runs `body` with `DISPLAY` set to `display`, then puts the process's `DISPLAY` back as it
    /// was (other tests in the process start children with it).
    public static func withDisplay<T>(_ display: String, _ body: () async throws -> T) async rethrows -> T {
        let previous = getenv("DISPLAY").map { String(cString: $0) }
        setenv("DISPLAY", display, 1)
        defer {
            if let previous { setenv("DISPLAY", previous, 1) } else { unsetenv("DISPLAY") }
        }
        return try await body()
    }

    /// The luma of a rectangle of the screen (ffmpeg's x11grab; BT.601 limited range).
    public func grabLuma(x: Int, y: Int, width: Int, height: Int) throws -> [UInt8] {
        let result = try runProcess(
            "ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-f", "x11grab", "-video_size", "\(width)x\(height)",
                "-i", "\(display)+\(x),\(y)", "-frames:v", "1", "-pix_fmt", "gray", "-f", "rawvideo", "-",
            ]
        )
        guard result.succeeded, result.stdout.count == width * height else {
            throw SubprocessError(description: "x11grab of \(display) failed: \(result.errorOutput)")
        }
        return [UInt8](result.stdout)
    }

    /// Asks the top-level window titled `title` to close, as a window manager's close button does
    /// (a `WM_DELETE_WINDOW` client message, sent with libX11 through Python's ctypes).
    public func closeWindow(titled title: String) throws {
        let result = try runProcess(
            try TestPaths.python(),
            ["-c", Self.closeScript, display, title]
        )
        guard result.succeeded else {
            throw SubprocessError(description: "cannot close the window \(title): \(result.errorOutput)")
        }
    }

    /// Types `key` (an X keysym name: `v`, `s`, `m`) into the window titled `title`, as a key
    /// press and release sent to it (Xvfb has no XTest; SDL takes sent key events as typed ones).
    public func type(_ key: String, intoWindowTitled title: String) throws {
        let result = try runProcess(try TestPaths.python(), ["-c", Self.keyScript, display, title, key])
        guard result.succeeded else {
            throw SubprocessError(description: "cannot type \(key) into the window \(title): \(result.errorOutput)")
        }
    }

    private static let keyScript = """
        import ctypes, sys
        x = ctypes.CDLL("libX11.so.6")
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XDefaultRootWindow.restype = ctypes.c_ulong
        x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x.XQueryTree.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
            ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong)),
            ctypes.POINTER(ctypes.c_uint)]
        x.XFetchName.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_char_p)]
        x.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        x.XStringToKeysym.restype = ctypes.c_ulong
        x.XStringToKeysym.argtypes = [ctypes.c_char_p]
        x.XKeysymToKeycode.restype = ctypes.c_ubyte
        x.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        class KeyEvent(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("root", ctypes.c_ulong),
                ("subwindow", ctypes.c_ulong), ("time", ctypes.c_ulong), ("x", ctypes.c_int), ("y", ctypes.c_int),
                ("x_root", ctypes.c_int), ("y_root", ctypes.c_int), ("state", ctypes.c_uint),
                ("keycode", ctypes.c_uint), ("same_screen", ctypes.c_int), ("pad", ctypes.c_long * 16)]
        d = x.XOpenDisplay(sys.argv[1].encode())
        if not d: sys.exit("no display " + sys.argv[1])
        root = x.XDefaultRootWindow(d)
        code = x.XKeysymToKeycode(d, x.XStringToKeysym(sys.argv[3].encode()))
        if not code: sys.exit("no keycode for " + sys.argv[3])
        r, p, n = ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_uint()
        children = ctypes.POINTER(ctypes.c_ulong)()
        x.XQueryTree(d, root, ctypes.byref(r), ctypes.byref(p), ctypes.byref(children), ctypes.byref(n))
        sent = 0
        for i in range(n.value):
            name = ctypes.c_char_p()
            if x.XFetchName(d, children[i], ctypes.byref(name)) and name.value == sys.argv[2].encode():
                for kind in (2, 3):
                    event = KeyEvent(type=kind, send_event=1, window=children[i], root=root, keycode=code,
                        same_screen=1, time=0)
                    x.XSendEvent(d, children[i], 1, 3, ctypes.byref(event))
                sent += 1
        # A round trip: the server has delivered the events before this process exits. With only
        # a flush, a loaded server could still hold them when the connection closed, and drop them.
        x.XSync(d, 0)
        x.XCloseDisplay(d)
        if not sent: sys.exit("no window titled " + sys.argv[2])
        """

    private static let closeScript = """
        import ctypes, sys
        x = ctypes.CDLL("libX11.so.6")
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XDefaultRootWindow.restype = ctypes.c_ulong
        x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x.XInternAtom.restype = ctypes.c_ulong
        x.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        x.XQueryTree.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
            ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong)),
            ctypes.POINTER(ctypes.c_uint)]
        x.XFetchName.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_char_p)]
        x.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        class ClientMessage(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("l", ctypes.c_long * 5), ("pad", ctypes.c_long * 12)]
        d = x.XOpenDisplay(sys.argv[1].encode())
        if not d: sys.exit("no display " + sys.argv[1])
        root = x.XDefaultRootWindow(d)
        r, p, n = ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_uint()
        children = ctypes.POINTER(ctypes.c_ulong)()
        x.XQueryTree(d, root, ctypes.byref(r), ctypes.byref(p), ctypes.byref(children), ctypes.byref(n))
        protocols = x.XInternAtom(d, b"WM_PROTOCOLS", 0)
        delete = x.XInternAtom(d, b"WM_DELETE_WINDOW", 0)
        sent = 0
        for i in range(n.value):
            name = ctypes.c_char_p()
            if x.XFetchName(d, children[i], ctypes.byref(name)) and name.value == sys.argv[2].encode():
                event = ClientMessage(type=33, send_event=1, window=children[i], message_type=protocols, format=32)
                event.l[0] = delete
                x.XSendEvent(d, children[i], 0, 0, ctypes.byref(event))
                sent += 1
        # A round trip: the server has delivered the events before this process exits. With only
        # a flush, a loaded server could still hold them when the connection closed, and drop them.
        x.XSync(d, 0)
        x.XCloseDisplay(d)
        if not sent: sys.exit("no window titled " + sys.argv[2])
        """
}
