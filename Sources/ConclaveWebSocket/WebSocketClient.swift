import CWebSockets
import CWebSocketsShims
import Foundation
import Logging
import Synchronization

/// One client WebSocket over libwebsockets, serviced by a thread of its own: text messages in and
/// out, for any subprotocol (Janus's `janus-protocol`, STOMP's `v12.stomp`).
///
/// libwebsockets is single-threaded: every `lws_*` call happens on the service thread, except
/// `lws_cancel_service`, which other threads use to wake it after queueing a command. Events are
/// handed to the `handler` given at init, synchronously on the service thread, in order: at most
/// one `.open`, then `.message`s, then exactly one `.closed`. A handler that only updates state
/// under a lock and resumes continuations costs no extra thread hop per message (an `AsyncStream`
/// in between would cost one); it must not block, and must not call ``close()`` or ``abort()``,
/// which wait for this very thread.
public final class WebSocketClient: @unchecked Sendable {
    // @unchecked: `wsi`, `outbox`, `inbox`, `running`, `established`, `closing`, `aborting`, `finished` and the C
    // strings are only touched on the service thread once it runs (and by init before it starts);
    // `mailbox` and `wakeable` are Mutexes; `handler` is Sendable. The context pointer is immutable
    // and used off the service thread only for lws_cancel_service, under the `wakeable` lock while
    // the context is alive.

    /// What happens to the connection, in order.
    public enum Event: Sendable {
        /// The upgrade succeeded; queued messages go out now.
        case open
        /// One complete text message (fragments reassembled).
        case message(String)
        /// The connection ended: `error` is nil for a close we asked for.
        case closed(WebSocketError?)
    }

    private enum Command {
        case send([UInt8])
        case close
        /// Close without a close handshake's intent: reported as a dropped connection.
        case abort
    }

    /// Commands for the service thread, and whether it still takes any.
    private struct Mailbox {
        var commands: [Command] = []
        var contextAlive = true
        /// The service thread was woken and has not drained yet: later commands need no wake-up
        /// of their own (under load, one `lws_cancel_service` carries a whole batch).
        var wakePending = false
    }

    /// The server's URL.
    public let url: WebSocketURL
    private let handler: @Sendable (Event) -> Void
    private let logger: Logger
    private let mailbox = Mutex(Mailbox())
    /// Whether the lws context exists to be woken. A lock of its own, held across
    /// `lws_cancel_service`, so that the mailbox's is not: the woken service thread takes the
    /// mailbox lock at once, and finding it held across the wake-up syscall made it spin.
    private let wakeable = Mutex(true)

    private var context: OpaquePointer?
    private var wsi: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private var strings: [UnsafeMutablePointer<CChar>] = []
    /// Frames to write, each with `LWS_PRE` bytes of headroom already in front of the payload.
    private var outbox: [[UInt8]] = []
    private var inbox: [UInt8] = []
    private var running = true
    /// The upgrade is done: frames may be written.
    private var established = false
    private var closing = false
    private var aborting = false
    private var finished = false
    private let stopped = DispatchSemaphore(value: 0)

    /// Creates the lws context and starts connecting on a new service thread named `threadName`.
    ///
    /// - Parameters:
    ///   - subprotocols: offered in `Sec-WebSocket-Protocol`, most preferred first (servers such
    ///     as Janus refuse the upgrade without theirs).
    ///   - handler: receives every ``Event`` on the service thread (see the type's notes).
    /// - Throws: `.tlsFailure` for an unreadable CA file, `.unreachable` when no context can be made.
    ///   Failures to connect arrive later as `.closed(error)`.
    public init(
        url: WebSocketURL,
        subprotocols: [String],
        tls: TLSOptions = TLSOptions(),
        threadName: String = "conclave-ws",
        logger: Logger = Logger(label: "conclave.websocket"),
        handler: @escaping @Sendable (Event) -> Void
    ) throws(WebSocketError) {
        self.url = url
        self.logger = logger
        self.handler = handler
        WebSocketLogging.install()

        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)  // a zeroed entry ends the list
        protocols[0].callback = webSocketCallback
        protocols[0].rx_buffer_size = 65_536
        let offered = subprotocols.joined(separator: ",")
        protocols[0].name = UnsafePointer(keep(subprotocols.first ?? "conclave"))
        if let caFile = tls.caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw WebSocketError(.tlsFailure, url: "\(url)", "cannot read the CA file \(caFile) for \(url)")
        }

        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.options = UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        info.connect_timeout_secs = 10
        if let caFile = tls.caFile { info.client_ssl_ca_filepath = UnsafePointer(keep(caFile)) }
        guard let context = lws_create_context(&info) else {
            throw WebSocketError(.unreachable, url: "\(url)", "cannot create a WebSocket context for \(url)")
        }
        self.context = context

        var connect = lws_client_connect_info()
        connect.context = context
        connect.address = UnsafePointer(keep(url.host))
        connect.host = connect.address
        connect.origin = connect.address
        connect.port = Int32(url.port)
        connect.path = UnsafePointer(keep(url.path))
        if !offered.isEmpty { connect.protocol = UnsafePointer(keep(offered)) }
        connect.local_protocol_name = protocols[0].name
        connect.ssl_connection = url.isSecure ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        wsi = lws_client_connect_via_info(&connect)
        if wsi == nil {
            // lws reports most failures through LWS_CALLBACK_CLIENT_CONNECTION_ERROR, but a failure
            // detected synchronously (name resolution, say) returns nil.
            finish(WebSocketError(.unreachable, url: "\(url)", "cannot connect to \(url)"))
            running = false
        }

        let thread = Thread { [self] in self.serviceLoop() }
        thread.name = threadName
        thread.start()
    }

    deinit {
        protocols.deinitialize(count: 2)
        protocols.deallocate()
        freeStrings()
    }

    /// Queues a text message; it is sent once the connection is open. Thread-safe; a message sent
    /// after the connection ended is dropped.
    public func send(_ text: String) {
        // The frame is built with lws's headroom here, on the caller's thread, so that the service
        // thread writes it without another copy.
        var frame = [UInt8](repeating: 0, count: cshim_LWS_PRE)
        frame.append(contentsOf: text.utf8)
        enqueue(.send(frame))
    }

    /// Closes the connection and waits until the service thread has ended. Thread-safe, idempotent;
    /// not from the handler.
    public func close() {
        enqueue(.close)
        waitUntilStopped()
    }

    /// Drops the connection as a network failure would: the close is reported as an error
    /// (`.connectionClosed`). For fault drills and tests; not from the handler.
    public func abort() {
        enqueue(.abort)
        waitUntilStopped()
    }

    private func waitUntilStopped() {
        stopped.wait()
        stopped.signal()  // let a second caller return too
    }

    private func enqueue(_ command: Command) {
        let wake = mailbox.withLock { box in
            guard box.contextAlive else { return false }
            box.commands.append(command)
            guard !box.wakePending else { return false }
            box.wakePending = true
            return true
        }
        guard wake else { return }
        // Outside the mailbox lock (see `wakeable`). A wake-up that arrives after the service
        // thread drained for another reason only costs it one empty drain.
        wakeable.withLock { alive in
            if alive, let context { lws_cancel_service(context) }
        }
    }

    // MARK: Service thread

    private func serviceLoop() {
        while running {
            if lws_service(context, 0) < 0 { break }
        }
        mailbox.withLock { $0.contextAlive = false }
        wakeable.withLock { $0 = false }  // waits for a wake-up under way to leave the context
        lws_context_destroy(context)
        finish(nil)
        stopped.signal()
    }

    fileprivate func handle(
        wsi: OpaquePointer?,
        reason: lws_callback_reasons,
        input: UnsafeMutableRawPointer?,
        length: Int
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainCommands()
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            logger.debug("WebSocket open", metadata: ["url": "\(url)"])
            established = true
            handler(.open)
            if !outbox.isEmpty, let wsi { lws_callback_on_writable(wsi) }
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            if closing || aborting { return -1 }  // returning non-zero closes the connection
            guard !outbox.isEmpty, let wsi else { return 0 }
            var frame = outbox.removeFirst()
            if !write(&frame, to: wsi) { return -1 }
            if !outbox.isEmpty { lws_callback_on_writable(wsi) }
        case LWS_CALLBACK_CLIENT_RECEIVE:
            if let input, length > 0 {
                inbox.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
            }
            if let wsi, lws_is_final_fragment(wsi) != 0, lws_remaining_packet_payload(wsi) == 0 {
                handler(.message(String(decoding: inbox, as: UTF8.self)))
                inbox.removeAll(keepingCapacity: true)
            }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let text = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "unknown error"
            self.wsi = nil
            finish(Self.classify(connectionError: text, url: url))
            running = false
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            logger.debug("WebSocket closed by the server", metadata: ["url": "\(url)"])
        case LWS_CALLBACK_CLIENT_CLOSED:
            self.wsi = nil
            finish(
                closing ? nil : WebSocketError(.connectionClosed, url: "\(url)", "the connection to \(url) was closed")
            )
            running = false
        default:
            break
        }
        return 0
    }

    private func drainCommands() {
        let pending = mailbox.withLock { box in
            defer {
                box.commands.removeAll(keepingCapacity: true)
                box.wakePending = false
            }
            return box.commands
        }
        for command in pending {
            switch command {
            case .send(var frame):
                // The socket can take it now (nothing queued, nothing left over from a partial
                // write): write at once instead of waiting for one more service round.
                if established, outbox.isEmpty, !closing, !aborting, let wsi, lws_send_pipe_choked(wsi) == 0 {
                    if !write(&frame, to: wsi) {
                        aborting = true
                        lws_callback_on_writable(wsi)  // the writeable callback returns -1 to close
                    }
                    continue
                }
                outbox.append(frame)
                if let wsi { lws_callback_on_writable(wsi) }
            case .close, .abort:
                if case .close = command { closing = true } else { aborting = true }
                if let wsi {
                    lws_callback_on_writable(wsi)  // the writeable callback returns -1 to close
                } else {
                    running = false
                }
            }
        }
    }

    /// Writes one frame whose first `LWS_PRE` bytes are lws's headroom.
    private func write(_ frame: inout [UInt8], to wsi: OpaquePointer) -> Bool {
        let length = frame.count - cshim_LWS_PRE
        let written = frame.withUnsafeMutableBufferPointer { pointer in
            lws_write(wsi, pointer.baseAddress! + cshim_LWS_PRE, length, LWS_WRITE_TEXT)
        }
        if written < length {
            logger.warning("WebSocket write failed", metadata: ["url": "\(url)"])
            return false
        }
        return true
    }

    /// Delivers the final event once.
    private func finish(_ error: WebSocketError?) {
        guard !finished else { return }
        finished = true
        handler(.closed(error))
    }

    private static func classify(connectionError text: String, url: WebSocketURL) -> WebSocketError {
        let lower = text.lowercased()
        if lower.contains("ssl") || lower.contains("tls") || lower.contains("cert") || lower.contains("verify") {
            return WebSocketError(.tlsFailure, url: "\(url)", "TLS with \(url) failed: \(text)")
        }
        if lower.contains("upgrade") || lower.contains("protocol") || lower.contains("http") {
            return WebSocketError(.handshakeRejected, url: "\(url)", "\(url) refused the WebSocket upgrade: \(text)")
        }
        return WebSocketError(.unreachable, url: "\(url)", "cannot connect to \(url): \(text)")
    }

    private func keep(_ string: String) -> UnsafeMutablePointer<CChar> {
        let copy = strdup(string)!
        strings.append(copy)
        return copy
    }

    private func freeStrings() {
        for string in strings { free(string) }
        strings.removeAll()
    }
}

/// The lws protocol callback: a file-scope function, since a C function pointer cannot capture.
/// It finds the client through the context's user pointer (`lws_context_creation_info.user`).
private func webSocketCallback(
    wsi: OpaquePointer?,
    reason: lws_callback_reasons,
    user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?,
    length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else { return 0 }
    return Unmanaged<WebSocketClient>.fromOpaque(owner).takeUnretainedValue()
        .handle(wsi: wsi, reason: reason, input: input, length: length)
}

/// Routes libwebsockets' own log lines (errors and warnings only) to swift-log at debug level, so
/// they never clutter a user's terminal but are there with `--log-level debug`.
enum WebSocketLogging {
    static let logger = Logger(label: "conclave.websocket.lws")
    private static let installed: Void = {
        lws_set_log_level(Int32(LLL_ERR | LLL_WARN)) { _, line in
            guard let line else { return }
            let text = String(cString: line).trimmingCharacters(in: .whitespacesAndNewlines)
            WebSocketLogging.logger.debug("\(text)")
        }
    }()

    static func install() { _ = installed }
}
