public import ConclaveCore
import Foundation
import Synchronization

/// The call window: every participant's video in a grid, their names, indicators (muted, video
/// off, key problem, poor connection), the active speaker's border and, while Tab is held, the
/// status table.
///
/// Thread-safe: any thread may call it. Calls only leave their change in a mailbox and wake the
/// window's thread (`conclave-window`, the one owner of SDL), which applies every change at once
/// and draws. Pictures are never queued: the mailbox keeps the newest picture of each
/// participant, so a window that falls behind shows the latest and skips the rest.
public final class CallWindow: Sendable {
    /// Key presses (and the window's close button), in order. Ends when the window closes.
    public let commands: AsyncStream<WindowCommand>
    private let mailbox: Mailbox
    private let ended: Ended

    /// Opens the window on the display `DISPLAY` names and starts its thread; throws when there
    /// is no display or no renderer.
    public static func open(title: String = "Conclave", width: Int = 960, height: Int = 540) async throws(WindowError)
        -> CallWindow
    {
        let (commands, continuation) = AsyncStream.makeStream(of: WindowCommand.self)
        let mailbox = Mailbox()
        let ended = Ended()
        let result: Result<Void, WindowError> = await withCheckedContinuation { ready in
            let thread = Thread {
                let loop: WindowLoop
                do throws(WindowError) {
                    loop = try WindowLoop(
                        title: title,
                        width: width,
                        height: height,
                        mailbox: mailbox,
                        commands: continuation
                    )
                } catch {
                    continuation.finish()
                    ready.resume(returning: .failure(error))
                    ended.signal()
                    return
                }
                ready.resume(returning: .success(()))
                loop.run()
                continuation.finish()
                ended.signal()
            }
            thread.name = "conclave-window"
            thread.start()
        }
        if case .failure(let error) = result { throw error }
        return CallWindow(commands: commands, mailbox: mailbox, ended: ended)
    }

    private init(commands: AsyncStream<WindowCommand>, mailbox: Mailbox, ended: Ended) {
        self.commands = commands
        self.mailbox = mailbox
        self.ended = ended
    }

    /// A participant joined: their tile is added (in join order) with `display` as its label.
    public func participantJoined(id: UInt64, display: String) {
        mailbox.post { $0.changes.append(.joined(id, display)) }
    }

    /// A participant left: their tile is removed.
    public func participantLeft(id: UInt64) {
        mailbox.post {
            $0.changes.append(.left(id))
            $0.pictures[id] = nil
        }
    }

    /// The newest picture of a participant (I420). Replaces one not yet drawn.
    public func show(picture: VideoFrame, for id: UInt64) {
        show(DecodedPicture(picture), for: id)
    }

    /// The newest picture of a participant, perhaps already scaled down to its ``pictureBox(for:)``
    /// by the decoder. Replaces one not yet drawn.
    public func show(_ picture: DecodedPicture, for id: UInt64) {
        mailbox.post {
            $0.pictures[id] = picture
            $0.pictureCounts[id, default: 0] += 1
        }
    }

    /// The room a participant's picture is drawn in (its tile less the border), for a decoder
    /// that scales pictures down before they reach the window (``PictureFit``); nil when the
    /// window has no tile for it yet, or when its renderer scales on a GPU, where a picture of the
    /// full decoded size costs nothing more and is drawn sharper.
    public func pictureBox(for id: UInt64) -> PictureSize? {
        mailbox.boxes.withLock { $0[id] }
    }

    /// A participant's indicators.
    public func setState(_ state: ParticipantState, for id: UInt64) {
        mailbox.post { $0.changes.append(.state(id, state)) }
    }

    /// The participant whose tile gets the highlight border; nil for none.
    public func activeSpeaker(id: UInt64?) {
        mailbox.post { $0.changes.append(.speaker(id)) }
    }

    /// The status table (the lines `--status tty` prints), shown while Tab is held.
    public func statusText(_ lines: [String]) {
        mailbox.post { $0.changes.append(.status(lines)) }
    }

    /// Closes the window and waits for its thread to end.
    public func close() async {
        mailbox.post { $0.stop = true }
        await ended.wait()
    }

    /// Presses a key as if on the keyboard: the event goes through SDL's queue like a real one.
    /// For tests, which have no keyboard (Xvfb has no XTest here).
    package func press(_ key: WindowKey) {
        mailbox.post { $0.keys.append((key, true)) }
    }

    /// Releases a key pressed with ``press(_:)`` (Tab shows the status table while held).
    package func release(_ key: WindowKey) {
        mailbox.post { $0.keys.append((key, false)) }
    }

    /// How each participant's picture was drawn in the last frame (absent: no tile or no picture
    /// yet). Cheap: a copy of what the window's thread noted, no drawing.
    public func shownPictures() -> [UInt64: ShownPicture] {
        mailbox.shown.withLock { $0 }
    }

    /// Draws what the window holds now and reads it back; nil once the window is closed.
    package func snapshot() async -> WindowSnapshot? {
        await withCheckedContinuation { continuation in
            let posted = mailbox.post { $0.snapshots.append(continuation) }
            if !posted { continuation.resume(returning: nil) }
        }
    }
}

/// One participant's picture as the window last drew it: the picture's size as decoded (before
/// any scaling down to its box) and the size it was drawn at (its tile, less the border, keeping
/// the aspect ratio).
public struct ShownPicture: Sendable, Hashable {
    public var pictureWidth: Int
    public var pictureHeight: Int
    public var drawnWidth: Int
    public var drawnHeight: Int
}

/// A change for the window's thread, applied in order.
enum WindowChange: Sendable {
    case joined(UInt64, String)
    case left(UInt64)
    case state(UInt64, ParticipantState)
    case speaker(UInt64?)
    case status([String])
}

/// What callers left for the window's thread since it last looked.
struct WindowMail: Sendable {
    var changes: [WindowChange] = []
    /// The newest picture of each participant.
    var pictures: [UInt64: DecodedPicture] = [:]
    /// How many pictures each participant sent since the last look, replaced ones included: the
    /// rate the window paces its presents to (``PresentPacing``).
    var pictureCounts: [UInt64: Int] = [:]
    /// Keys pressed (true) and released (false) by ``CallWindow/press(_:)`` and ``CallWindow/release(_:)``.
    var keys: [(WindowKey, Bool)] = []
    var snapshots: [CheckedContinuation<WindowSnapshot?, Never>] = []
    var stop = false

    var isEmpty: Bool {
        changes.isEmpty && pictures.isEmpty && keys.isEmpty && snapshots.isEmpty && !stop
    }
}

/// The mailbox between callers and the window's thread, and its wake-up.
///
/// The wake-up is one SDL user event, pushed only when none is pending, so a burst of pictures
/// costs one wake-up. `SDL_PushEvent` is SDL's one thread-safe entry point and is called under the
/// lock, which the window's thread also holds while it stops SDL: nothing is pushed into a closed
/// SDL.
final class Mailbox: Sendable {
    private struct State {
        var mail = WindowMail()
        /// Pushes the wake-up event; nil before the window is ready and after it closed.
        var wake: (@Sendable () -> Void)?
        var wakePending = false
        var closed = false
    }

    private let state = Mutex(State())
    /// What the last frame drew of each participant's picture, written by the window's thread.
    let shown = Mutex<[UInt64: ShownPicture]>([:])
    /// Each participant's picture box, written by the window's thread when it draws with SDL's
    /// software renderer (``CallWindow/pictureBox(for:)``).
    let boxes = Mutex<[UInt64: PictureSize]>([:])

    /// Applies `change` to the mail and wakes the window; false when the window is closed.
    @discardableResult
    func post(_ change: (inout WindowMail) -> Void) -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            change(&state.mail)
            if !state.wakePending, let wake = state.wake {
                state.wakePending = true
                wake()
            }
            return true
        }
    }

    /// Takes everything posted (the window's thread, on its wake-up event).
    func take() -> WindowMail {
        state.withLock { state in
            state.wakePending = false
            var mail = WindowMail()
            swap(&mail, &state.mail)
            return mail
        }
    }

    /// The window is ready: later posts wake it with `wake`.
    func open(wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// The window is closing: later posts are refused; what is left is returned.
    func close(_ finish: () -> Void) -> WindowMail {
        state.withLock { state in
            state.closed = true
            state.wake = nil
            finish()
            var mail = WindowMail()
            swap(&mail, &state.mail)
            return mail
        }
    }
}

/// The window thread's end, awaited by ``CallWindow/close()``.
final class Ended: Sendable {
    private let state = Mutex<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func signal() {
        let waiters = state.withLock { state in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state in
                if !state.ended { state.waiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }
}
