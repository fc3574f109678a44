import ConclaveAV
import ConclaveCall
import ConclaveCore
import ConclaveWindow
import Foundation
import JanusProtocol
import Synchronization

/// What the call does for the window's `m`, `v` and `s` keys: each returns the status line to
/// print. The microphone, camera and screen sources connect here; without them the keys only
/// say so.
struct WindowControls: Sendable {
    var toggleMute: (@Sendable () async -> String)?
    var toggleCamera: (@Sendable () async -> String)?
    var toggleScreenShare: (@Sendable () async -> String)?
}

/// `join --window`: the call window fed with what the call receives.
///
/// A `CallMediaObserver` like `LiveCompositeOutput`: the receive path only queues video frames
/// for ConclaveAV's `VideoDecodeQueue` (its own thread, bounded, drops to the next keyframe when
/// behind), whose newest pictures go to the window; joins and leaves become tiles; a frame that
/// does not decrypt lights the participant's key-problem indicator at once. Once a second the
/// call's status sets every indicator (key problem, poor connection, video off) and the status
/// table the window shows while Tab is held.
final class CallWindowOutput: CallMediaObserver {
    let window: CallWindow
    private let decoder: VideoDecodeQueue
    /// Indicators set between two status updates (a key problem seen on a frame).
    private let states = Mutex<[UInt64: ParticipantState]>([:])
    private let tasks = Mutex<[Task<Void, Never>]>([])

    /// Whether `join` opens a window: `--window`/`--no-window`, else when a display is set and
    /// a terminal is attached (headless machines and scripts keep the window off).
    static func wanted(_ flag: Bool?) -> Bool {
        flag
            ?? (ProcessInfo.processInfo.environment["DISPLAY"].map { !$0.isEmpty } == true
                && isatty(STDOUT_FILENO) == 1)
    }

    /// The window's title, which names the call.
    static func title(callID: UInt64) -> String { "Conclave call \(callID)" }

    /// Opens the window when wanted; an SDL error is one line and the call goes on headless.
    static func start(_ flag: Bool?, callID: UInt64, stop: StopSignals, controls: WindowControls = .init()) async
        -> CallWindowOutput?
    {
        guard wanted(flag) else { return nil }
        do {
            let window = try await CallWindow.open(title: title(callID: callID))
            let output = CallWindowOutput(window: window)
            output.handleCommands(stop: stop, controls: controls)
            return output
        } catch {
            print("\(error); the call goes on without a window")
            fflush(nil)
            return nil
        }
    }

    private init(window: CallWindow) {
        self.window = window
        // With SDL's software renderer the window names each tile's box, and pictures come
        // scaled down to it: smaller to convert, and copied rather than stretched at each present.
        decoder = VideoDecodeQueue(
            name: "conclave-window-decode",
            fitting: { window.pictureBox(for: $0) },
            pictures: { feedID, picture in window.show(picture, for: feedID) }
        )
    }

    func participantJoined(feedID: UInt64, display: String?) {
        window.participantJoined(
            id: feedID,
            display: display.map { ParticipantDisplay(parsing: $0).name } ?? "feed \(feedID)"
        )
    }

    func participantLeft(feedID: UInt64) {
        window.participantLeft(id: feedID)
        decoder.forget(feedID: feedID)
        states.withLock { $0[feedID] = nil }
    }

    func received(_ media: ReceivedMedia) {
        switch media {
        case .frame(let frame):
            guard frame.frame.codec.kind == .video else { return }
            decoder.add(feedID: frame.feedID, frame: frame.frame)
        case .undecryptable(let feedID, _, _, _):
            let changed: ParticipantState? = states.withLock { states in
                var state = states[feedID] ?? []
                guard !state.contains(.undecryptable) else { return nil }
                state.insert(.undecryptable)
                states[feedID] = state
                return state
            }
            if let changed { window.setState(changed, for: feedID) }
        }
    }

    func senderReport(_ report: SubscribedSenderReport) {}

    /// Follows the call's status once a second: indicators and the status table.
    func follow(_ session: CallSession) {
        let task = Task { [self] in
            while !Task.isCancelled {
                let status = await session.status()
                window.statusText(status.terminalText().components(separatedBy: "\n"))
                let derived = Self.states(status)
                states.withLock { $0 = derived }
                for (feedID, state) in derived { window.setState(state, for: feedID) }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        tasks.withLock { $0.append(task) }
    }

    /// Each present participant's indicators, from the call's status.
    static func states(_ status: CallStatus) -> [UInt64: ParticipantState] {
        var states: [UInt64: ParticipantState] = [:]
        for participant in status.participants where participant.present {
            guard let feed = participant.feed else { continue }
            var state: ParticipantState = []
            if participant.decryptState == .failing || participant.decryptState == .partlyFailing {
                state.insert(.undecryptable)
            }
            if participant.loss > 0.05 { state.insert(.poorConnection) }
            if participant.videoCodec == nil { state.insert(.videoOff) }
            states[feed] = state
        }
        return states
    }

    /// `q` or the close button leaves the call as Ctrl-C does; `m`, `v`, `s` go to `controls`.
    private func handleCommands(stop: StopSignals, controls: WindowControls) {
        let task = Task { [window] in
            for await command in window.commands {
                let line: String
                switch command {
                case .leave:
                    print("window: leaving the call")
                    fflush(nil)
                    stop.requestStop()
                    continue
                case .toggleFullscreen:
                    continue
                case .toggleMute:
                    line = await controls.toggleMute?() ?? "window: m (mute): no microphone in this call"
                case .toggleCamera:
                    line = await controls.toggleCamera?() ?? "window: v (camera): no camera in this call"
                case .toggleScreenShare:
                    line = await controls.toggleScreenShare?() ?? "window: s (screen share): not available in this call"
                }
                print(line.hasPrefix("window:") ? line : "window: \(line)")
                fflush(nil)
            }
        }
        tasks.withLock { $0.append(task) }
    }

    /// Stops following the call, the decoding and the window.
    func close() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        await decoder.finish()
        await window.close()
    }
}
