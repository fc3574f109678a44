import ConclaveAudioProcessing
import ConclaveCall
import ConclaveMedia
import ConclaveOpus
import ConclavePulse
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `--audio mic[:SOURCE]`: the microphone through PulseAudio as the call's audio source, muted and
/// unmuted with SIGUSR1.
///
/// A microphone that cannot be opened (no server) is one line on standard error and the call goes
/// on without sending audio, as a call client should. What is opened lives as long as the process
/// (the call is the process's whole life).
enum LiveAudio {
    /// The microphone's source name when `choice` asks for one (`mic` is the default source,
    /// `mic:NAME` a named one); nil for the other choices (tone, file, none).
    static func microphoneSource(_ choice: CallMediaChoice) -> String?? {
        guard case .file(let text) = choice else { return .none }
        if text == "mic" { return .some(nil) }
        if text.hasPrefix("mic:") { return .some(String(text.dropFirst(4))) }
        return .none
    }

    /// The audio source for `choice`: the microphone's encoder for `mic[:SOURCE]`, else what
    /// ``CallMediaSources/audio(_:bitrate:)`` makes (tone, file, none).
    /// With `echo`, the microphone goes through the echo canceller that the speaker feeds.
    static func audio(
        _ choice: CallMediaChoice,
        bitrate: Int = 32_000,
        echo: EchoCanceller? = nil
    ) async throws -> RebasingFrameSource? {
        guard let source = microphoneSource(choice) else { return try CallMediaSources.audio(choice, bitrate: bitrate) }
        let connection: PulseConnection
        do {
            connection = try await Self.connection()
        } catch {
            note("\(error.message): joining without a microphone")
            return nil
        }
        let microphone = PulseMicrophone(
            connection: connection,
            source: source,
            initialTimestamp: UInt32.random(in: 0...UInt32.max)
        )
        let events = microphone.events
        Task {
            for await event in events {
                switch event {
                case .running, .bufferResized: continue
                case .interrupted(let reason): note("microphone interrupted (\(reason)); reopening it")
                case .fellBackToDefault(let missing): note("microphone \(missing) is gone: using the default source")
                }
            }
        }
        let toggle = MuteToggle(microphone)
        kept.withLock { $0.append(toggle) }
        var configuration = OpusEncoderConfiguration()
        configuration.bitrate = bitrate
        let raw: any AudioFrameSource = echo.map { EchoCancelledMicrophone(microphone, echo: $0) } ?? microphone
        return RebasingFrameSource(
            EncodingAudioSource(raw: raw, encoder: try OpusAudioEncoder(configuration: configuration))
        )
    }

    /// The echo canceller between the speaker and the microphone: when both are in use and
    /// `--no-aec` is not given. A canceller that cannot be made is one line; the microphone is then
    /// sent as captured.
    static func echoCanceller(_ options: CallOptions) -> EchoCanceller? {
        guard options.aec, SpeakerOutput.wanted(options.speaker),
            microphoneSource(CallMediaChoice(options.audio, generatedName: "tone")) != nil
        else { return nil }
        do {
            return try EchoCanceller()
        } catch {
            note("echo cancellation unavailable (\(error)); the microphone is sent as captured")
            return nil
        }
    }

    /// The process's one PulseAudio connection, shared by the microphone and the speaker (made at
    /// the first use; a failed attempt is not kept, so the next use tries again).
    static func connection() async throws(PulseError) -> PulseConnection {
        if let connection = shared.withLock({ $0 }) { return connection }
        let connection = try await PulseConnection.connect()
        return shared.withLock {
            $0 = $0 ?? connection
            return $0 ?? connection
        }
    }

    /// Flips the microphone's mute (the window's `m`, as SIGUSR1 does); the status line, or nil
    /// when no microphone is open.
    static func toggleMute() -> String? {
        let toggles = kept.withLock { $0 }
        guard !toggles.isEmpty else { return nil }
        var muted = false
        for toggle in toggles { muted = toggle.toggle() }
        return muted ? "microphone muted" : "microphone on"
    }

    private static let shared = Mutex<PulseConnection?>(nil)

    /// One line on standard error.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data("conclave: \(line)\n".utf8))
    }

    /// What lives until the process ends: the mute toggles (each holds its microphone).
    private static let kept = Mutex<[MuteToggle]>([])
}

/// The write end of the pipe the SIGUSR1 handler wakes ``MuteToggle`` through; -1 until one
/// exists. A global because a C signal handler captures nothing.
private let muteSignalPipe = Atomic<Int32>(-1)

/// SIGUSR1 flips the microphone's mute; each flip prints one status line on standard error.
///
/// As with ``StopSignals``, the handler only writes a byte to a pipe that a dispatch read source
/// watches (a dispatch signal source would need the signal blocked in every thread).
private final class MuteToggle: @unchecked Sendable {
    // @unchecked: constants only; the source's handler runs on its own queue.
    private let microphone: PulseMicrophone
    private let source: (any DispatchSourceRead)?

    /// Flips the mute; whether it is now muted.
    func toggle() -> Bool { microphone.toggleMute() }

    init(_ microphone: PulseMicrophone) {
        self.microphone = microphone
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            source = nil
            return
        }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        let reader = ends[0]
        let source = DispatchSource.makeReadSource(fileDescriptor: reader, queue: .global())
        source.setEventHandler { [microphone] in
            var bytes = [UInt8](repeating: 0, count: 16)
            let count = read(reader, &bytes, bytes.count)
            for _ in 0..<max(count, 0) {
                let muted = microphone.toggleMute()
                let line = muted ? "microphone muted (SIGUSR1 to unmute)" : "microphone on (SIGUSR1 to mute)"
                LiveAudio.note(line)
            }
        }
        source.resume()
        self.source = source
        muteSignalPipe.store(ends[1], ordering: .relaxed)
        signal(SIGUSR1) { _ in
            var byte: UInt8 = 1
            _ = write(muteSignalPipe.load(ordering: .relaxed), &byte, 1)
        }
    }
}
