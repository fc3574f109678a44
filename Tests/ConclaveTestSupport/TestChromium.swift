import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Headless Chromium as a peer in a test: it opens the project's browser page (`web/`, served on
/// 127.0.0.1) and is driven through the DevTools protocol over `--remote-debugging-pipe`, so it
/// listens on no port at all.
///
/// Chromium stays off the network: every host name but localhost and Janus's address resolves to
/// nothing, background networking, component updates, sync and the rest are off, and the page uses
/// no STUN server. Its camera and microphone are fake devices, or the files given (a Y4M picture
/// sequence and a WAV), so that the frames carry numbers. Chromium runs in a process group of its
/// own, killed whole by ``stop()`` (also from deinit, so a failing test does not leave it behind).
/// A missing `chromium` fails the test with one line.
public final class TestChromium: @unchecked Sendable {
    // @unchecked: the pids and descriptors are set in init and only read afterwards; `stopped`
    // is under `lock`; the DevTools traffic goes through `connection`, which is Sendable.

    /// The fake media Chromium's getUserMedia returns.
    public struct Media: Sendable {
        /// A Y4M file played (looped) as the camera, or nil for Chromium's own fake camera.
        public var videoFile: String?
        /// A WAV file played (looped) as the microphone, or nil for Chromium's own beeps.
        public var audioFile: String?

        public init(videoFile: String? = nil, audioFile: String? = nil) {
            self.videoFile = videoFile
            self.audioFile = audioFile
        }
    }

    /// The folder served on 127.0.0.1 (the page with janus.js beside it) and Chromium's profile.
    public let directory: URL
    /// The page's origin, http://localhost:PORT (served on 127.0.0.1): getUserMedia needs a secure
    /// context, and localhost is one.
    public let origin: String
    private let server: BackgroundProcess
    private let chromiumPID: pid_t
    private let connection: DevToolsConnection
    private let lock = Mutex(false)
    private let page = Mutex<String?>(nil)

    /// Serves `web/` and starts Chromium, allowed to reach `janusAddress` and localhost only.
    /// `extraArguments` go on Chromium's command line as they are (field trials, for instance).
    public init(janusAddress: String, media: Media = Media(), extraArguments: [String] = []) throws {
        let executable = try Self.chromiumExecutable()
        directory = try TestPaths.temporaryDirectory("conclave-chromium")
        let site = directory.appendingPathComponent("site")
        try Self.stageSite(at: site)
        server = try BackgroundProcess(
            "python3",
            ["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", site.path]
        )
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let banner = try server.readLine(timeout: .seconds(10))
        guard
            let port = banner.split(separator: " ").firstIndex(of: "port").map({ banner.split(separator: " ")[$0 + 1] })
        else { throw SubprocessError(description: "no port in the web server's banner: \(banner)") }
        origin = "http://localhost:\(port)"

        var arguments = [
            executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", "--user-data-dir=\(directory.appendingPathComponent("profile").path)",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-domain-reliability",
            "--metrics-recording-only", "--disable-breakpad", "--disable-features=WebRtcHideLocalIpsWithMdns",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE \(janusAddress)",
            "--autoplay-policy=no-user-gesture-required", "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
        ]
        if let video = media.videoFile { arguments.append("--use-file-for-fake-video-capture=\(video)") }
        if let audio = media.audioFile { arguments.append("--use-file-for-fake-audio-capture=\(audio)") }
        arguments += extraArguments
        arguments.append("about:blank")
        let log = directory.appendingPathComponent("chromium.log").path
        let (pid, input, output) = try Self.spawn(arguments, log: log)
        chromiumPID = pid
        connection = DevToolsConnection(input: input, output: output, log: log)
    }

    deinit { stop() }

    /// Chromium's process group (its pid): every process of the browser is in it.
    public var processGroup: pid_t { chromiumPID }

    /// The Chromium executable: Debian's binary itself (its /usr/bin/chromium wrapper adds API
    /// keys and extensions a test does not want), else whatever `chromium` is on PATH.
    static func chromiumExecutable() throws -> String {
        let debian = "/usr/lib/chromium/chromium"
        if FileManager.default.isExecutableFile(atPath: debian) { return debian }
        do { return try which("chromium") } catch {
            throw SubprocessError(description: "chromium is not installed (scripts/setup installs it)")
        }
    }

    /// Copies `web/` with janus.js and adapter.js from Debian's packages beside it.
    static func stageSite(at site: URL) throws {
        let files = FileManager.default
        try files.copyItem(at: TestPaths.packageRoot.appendingPathComponent("web"), to: site)
        let libraries = [
            ("/usr/share/javascript/janus-gateway/janus.js", "libjs-janus-gateway"),
            ("/usr/share/javascript/webrtc-adapter/adapter.js", "libjs-webrtc-adapter"),
        ]
        for (path, package) in libraries {
            let source = URL(fileURLWithPath: path).resolvingSymlinksInPath()
            guard files.fileExists(atPath: source.path) else {
                throw SubprocessError(description: "\(path) is missing (apt install \(package), part of janus-demos)")
            }
            try files.copyItem(at: source, to: site.appendingPathComponent(source.lastPathComponent))
        }
    }

    /// Opens the page with `parameters` in its URL and waits for its load event.
    public func open(parameters: [String: String], timeout: Duration = .seconds(20)) async throws {
        let session = try await attachedSession(timeout: timeout)
        var components = URLComponents(string: "\(origin)/index.html")!
        components.queryItems = parameters.sorted { $0.key < $1.key }.map {
            URLQueryItem(name: $0.key, value: $0.value)
        }
        let loads = connection.eventCount("Page.loadEventFired")
        _ = try await connection.send("Page.navigate", ["url": components.string!], session: session, timeout: timeout)
        try await connection.waitForEvent("Page.loadEventFired", after: loads, timeout: timeout)
    }

    /// Evaluates `expression` in the page, awaiting it when it is a promise, and returns its value
    /// as JSON (the page's values go through JSON.stringify).
    public func evaluate(_ expression: String, timeout: Duration = .seconds(30)) async throws -> Data {
        let session = try await attachedSession(timeout: timeout)
        let reply = try await connection.send(
            "Runtime.evaluate",
            [
                "expression": "Promise.resolve(\(expression)).then(v => JSON.stringify(v === undefined ? null : v))",
                "awaitPromise": true, "returnByValue": true,
            ],
            session: session,
            timeout: timeout
        )
        let result = (try JSONSerialization.jsonObject(with: reply) as? [String: Any])?["result"] as? [String: Any]
        if let exception = result?["exceptionDetails"] as? [String: Any] {
            let text =
                ((exception["exception"] as? [String: Any])?["description"] as? String)
                ?? (exception["text"] as? String) ?? "\(exception)"
            throw SubprocessError(description: "the page threw: \(text)")
        }
        guard let value = (result?["result"] as? [String: Any])?["value"] as? String else {
            throw SubprocessError(
                description: "Runtime.evaluate returned no value: \(String(decoding: reply, as: UTF8.self))"
            )
        }
        return Data(value.utf8)
    }

    /// Evaluates `expression` and decodes its JSON value.
    public func evaluate<T: Decodable>(_ expression: String, as type: T.Type, timeout: Duration = .seconds(30))
        async throws -> T
    {
        try JSONDecoder().decode(T.self, from: try await evaluate(expression, timeout: timeout))
    }

    /// The end of Chromium's log, for failure messages.
    public func logTail(lines: Int = 20) -> String {
        let text = (try? String(contentsOf: directory.appendingPathComponent("chromium.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// Kills Chromium's whole process group and the web server, and removes the profile.
    public func stop() {
        let first = lock.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        kill(-chromiumPID, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(chromiumPID, &status, 0)
        // The browser's own children are orphans now, reaped by init: wait (boundedly) until the
        // group is empty, so that a test ends with no Chromium process left.
        let deadline = ContinuousClock.now + .seconds(5)
        while kill(-chromiumPID, 0) == 0, ContinuousClock.now < deadline { usleep(10_000) }
        connection.close()
        server.stop()
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("profile"))
    }

    /// The DevTools session of the page (attached once, flat mode).
    private func attachedSession(timeout: Duration) async throws -> String {
        if let session = page.withLock({ $0 }) { return session }
        let targets = try JSONSerialization.jsonObject(
            with: try await connection.send("Target.getTargets", [:], session: nil, timeout: timeout)
        )
        let infos = ((targets as? [String: Any])?["result"] as? [String: Any])?["targetInfos"] as? [[String: Any]]
        guard let target = infos?.first(where: { $0["type"] as? String == "page" })?["targetId"] as? String else {
            throw SubprocessError(description: "Chromium has no page: \(logTail())")
        }
        let attached = try JSONSerialization.jsonObject(
            with: try await connection.send(
                "Target.attachToTarget",
                ["targetId": target, "flatten": true],
                session: nil,
                timeout: timeout
            )
        )
        guard let id = ((attached as? [String: Any])?["result"] as? [String: Any])?["sessionId"] as? String else {
            throw SubprocessError(description: "cannot attach to Chromium's page")
        }
        _ = try await connection.send("Page.enable", [:], session: id, timeout: timeout)
        page.withLock { $0 = id }
        return id
    }

    /// Starts Chromium in a process group of its own with the DevTools pipe on fds 3 (commands in)
    /// and 4 (replies out), its output to `log`. Returns the pid and this side's two ends.
    private static func spawn(_ arguments: [String], log: String) throws -> (pid_t, Int32, Int32) {
        // This side's descriptors are close-on-exec copies above 4, so the child gets exactly the two
        // dup2'd (the originals live only for the moment between pipe and fcntl).
        func pipeAbove4() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw SubprocessError(description: "pipe: \(errno)") }
            let read = fcntl(fds[0], F_DUPFD_CLOEXEC, 10)
            let write = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
            close(fds[0])
            close(fds[1])
            return (read, write)
        }
        let commands = try pipeAbove4()
        let replies = try pipeAbove4()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_adddup2(&actions, commands.read, 3)
        posix_spawn_file_actions_adddup2(&actions, replies.write, 4)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        )
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(commands.read)
        close(replies.write)
        guard status == 0 else {
            close(commands.write)
            close(replies.read)
            throw SubprocessError(description: "cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        }
        return (pid, commands.write, replies.read)
    }
}

/// The DevTools protocol over Chromium's pipe: NUL-terminated JSON messages each way. A reader
/// thread routes replies to their command by id and events to whoever expects them.
final class DevToolsConnection: Sendable {
    private struct Routes {
        var nextID = 1
        var replies: [Int: CheckedContinuation<Data, any Error>] = [:]
        var events: [(method: String, continuation: CheckedContinuation<Void, any Error>)] = []
        var eventCounts: [String: Int] = [:]
        var closed: String?
    }

    private let input: Int32
    private let output: Int32
    private let log: String
    private let routes = Mutex(Routes())
    private let writing = Mutex(())

    init(input: Int32, output: Int32, log: String) {
        self.input = input
        self.output = output
        self.log = log
        let thread = Thread { [self] in readLoop() }
        thread.name = "devtools-pipe"
        thread.start()
    }

    /// Sends a command and returns its whole reply (JSON), or throws its error or at `timeout`.
    func send(_ method: String, _ parameters: [String: Any], session: String?, timeout: Duration) async throws
        -> Data
    {
        let id = routes.withLock { routes in
            defer { routes.nextID += 1 }
            return routes.nextID
        }
        var message: [String: Any] = ["id": id, "method": method, "params": parameters]
        if let session { message["sessionId"] = session }
        var bytes = try JSONSerialization.data(withJSONObject: message)
        bytes.append(0)
        let timer = Task { [self] in
            try await Task.sleep(for: timeout)
            fail(id: id, SubprocessError(description: "Chromium did not answer \(method) within \(timeout)"))
        }
        defer { timer.cancel() }
        let reply = try await withCheckedThrowingContinuation { continuation in
            let closed = routes.withLock { routes in
                if routes.closed == nil { routes.replies[id] = continuation }
                return routes.closed
            }
            if let closed { return continuation.resume(throwing: SubprocessError(description: closed)) }
            writing.withLock { _ in
                bytes.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = write(input, buffer.baseAddress! + offset, buffer.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
        }
        if let error = (try JSONSerialization.jsonObject(with: reply) as? [String: Any])?["error"] {
            throw SubprocessError(description: "Chromium refused \(method): \(error)")
        }
        return reply
    }

    /// How many `method` events have arrived so far: taken before the command that causes the
    /// next one, and given to ``waitForEvent(_:after:timeout:)``, so that event cannot be missed.
    func eventCount(_ method: String) -> Int { routes.withLock { $0.eventCounts[method, default: 0] } }

    /// Returns once more than `count` `method` events have arrived, or throws at `timeout`.
    func waitForEvent(_ method: String, after count: Int, timeout: Duration) async throws {
        let timer = Task { [self] in
            try await Task.sleep(for: timeout)
            failEvents(method, SubprocessError(description: "no \(method) from Chromium within \(timeout)"))
        }
        defer { timer.cancel() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Bool, SubprocessError> = routes.withLock { routes in
                if let closed = routes.closed { return .failure(SubprocessError(description: closed)) }
                if routes.eventCounts[method, default: 0] > count { return .success(true) }
                routes.events.append((method, continuation))
                return .success(false)
            }
            switch outcome {
            case .failure(let error): continuation.resume(throwing: error)
            case .success(true): continuation.resume()
            case .success(false): break
            }
        }
    }

    /// Stops routing: everything still waiting fails.
    func close() {
        finish("Chromium was stopped")
        Glibc.close(input)
    }

    private func fail(id: Int, _ error: SubprocessError) {
        routes.withLock { $0.replies.removeValue(forKey: id) }?.resume(throwing: error)
    }

    private func failEvents(_ method: String, _ error: SubprocessError) {
        let waiting = routes.withLock { routes in
            let matching = routes.events.filter { $0.method == method }
            routes.events.removeAll { $0.method == method }
            return matching
        }
        for waiter in waiting { waiter.continuation.resume(throwing: error) }
    }

    private func finish(_ reason: String) {
        let (replies, events) = routes.withLock { routes in
            if routes.closed == nil { routes.closed = reason }
            defer {
                routes.replies = [:]
                routes.events = []
            }
            return (Array(routes.replies.values), routes.events.map(\.continuation))
        }
        for reply in replies { reply.resume(throwing: SubprocessError(description: reason)) }
        for event in events { event.resume(throwing: SubprocessError(description: reason)) }
    }

    private func readLoop() {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(output, &chunk, chunk.count)
            if count <= 0 { break }
            buffer.append(contentsOf: chunk[0..<count])
            while let end = buffer.firstIndex(of: 0) {
                route(buffer[buffer.startIndex..<end])
                buffer.removeSubrange(buffer.startIndex...end)
            }
        }
        Glibc.close(output)
        let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(5)
        finish("Chromium exited: \(tail.joined(separator: " | "))")
    }

    private func route(_ message: Data) {
        guard let object = try? JSONSerialization.jsonObject(with: message) as? [String: Any] else { return }
        if let id = object["id"] as? Int {
            routes.withLock { $0.replies.removeValue(forKey: id) }?.resume(returning: Data(message))
        } else if let method = object["method"] as? String {
            let waiting = routes.withLock { routes in
                routes.eventCounts[method, default: 0] += 1
                let matching = routes.events.filter { $0.method == method }
                routes.events.removeAll { $0.method == method }
                return matching
            }
            for waiter in waiting { waiter.continuation.resume() }
        }
    }
}
