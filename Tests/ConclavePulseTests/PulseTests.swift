import ConclaveCore
import ConclaveMedia
import ConclavePulse
import ConclaveTestSupport
import Foundation
import Testing

/// ConclavePulse against a real PulseAudio server started by each test, with null sinks as
/// speakers and their monitors as microphones.
@Suite struct PulseTests {
    @Test func noServerIsOneClearError() async throws {
        let directory = try TestPaths.temporaryDirectory("conclave-nopulse")
        defer { try? FileManager.default.removeItem(at: directory) }
        let address = "unix:\(directory.path)/native"
        do {
            _ = try await PulseConnection.connect(server: address)
            Issue.record("connected to a server that does not exist")
        } catch {
            #expect(error.kind == .noServer)
            #expect(error.message.hasPrefix("no PulseAudio server at \(address): "), "\(error.message)")
            #expect(!error.message.contains("\n"))
        }
    }

    @Test func listsSourcesAndSinksWithTheDefaults() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        guard case .ready = connection.currentState else {
            Issue.record("state \(connection.currentState)")
            return
        }
        let devices = try await connection.devices()
        #expect(devices.sinks.map(\.name) == ["speaker", "mic"])
        #expect(devices.sinks.first { $0.isDefault }?.name == "speaker")
        #expect(devices.sinks.allSatisfy { $0.sampleSpec.rate == 48_000 && !$0.isMonitor })
        let monitors = devices.sources.filter(\.isMonitor).map(\.name)
        #expect(Set(monitors) == ["speaker.monitor", "mic.monitor"])
        #expect(devices.sources.first { $0.isDefault } != nil)
    }

    @Test func microphoneYieldsExactBlocksWithTheBeepsAtTheirSpacing() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let microphone = PulseMicrophone(connection: connection, source: "mic.monitor", initialTimestamp: 1000)
        defer { microphone.stop() }
        let track = server.directory.appendingPathComponent("beeps.raw")
        try Beeps.track(seconds: 6).write(to: track)
        let player = try server.play(track, into: "mic")
        defer { player.stop() }

        // Blocks until six beeps were heard (or a bound passes: then the checks below fail).
        let collected = await withDeadline(.seconds(20)) { () -> (samples: [Int16], frames: [AudioFrame]) in
            var samples: [Int16] = []
            var frames: [AudioFrame] = []
            while Beeps.onsets(in: samples).count < 6 {
                do {
                    try await microphone.waitUntilReady()
                    guard let frame = try microphone.nextFrame() else { break }
                    frames.append(frame)
                    samples += frame.samples
                } catch {
                    break
                }
            }
            return (samples, frames)
        }
        #expect(collected.frames.allSatisfy { $0.samples.count == 960 && $0.channels == 1 })
        #expect(collected.frames.first?.rtpTimestamp == 1000)
        #expect(
            zip(collected.frames, collected.frames.dropFirst()).allSatisfy { $1.rtpTimestamp == $0.rtpTimestamp &+ 960 }
        )
        let onsets = Beeps.onsets(in: collected.samples)
        #expect(onsets.count >= 6, "beeps at \(onsets)")
        for (earlier, later) in zip(onsets, onsets.dropFirst()) {
            #expect(abs(later - earlier - Beeps.period) <= 480, "beeps at \(onsets)")
        }
        #expect(microphone.statistics.underruns == 0)

        // Muted, the blocks keep coming, as silence.
        microphone.setMuted(true)
        var muted: [Int16] = []
        for _ in 0..<30 {
            try await microphone.waitUntilReady()
            muted += try #require(try microphone.nextFrame()).samples
        }
        #expect(muted.allSatisfy { $0 == 0 })
        #expect(microphone.toggleMute() == false)

        // Stopped, the source ends.
        microphone.stop()
        try await microphone.waitUntilReady()
        #expect(try microphone.nextFrame() == nil)
    }

    @Test func playbackPlaysTheRendererWithoutGlitches() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let recording = try server.record("speaker.monitor")
        defer { recording.stop() }
        let playback = PulsePlayback(connection: connection, sink: "speaker", renderer: BeepRenderer())
        defer { playback.stop() }

        let samples = recording.read(samples: 4 * Beeps.sampleRate, timeout: .seconds(20))
        let onsets = Beeps.onsets(in: samples)
        // A beep off its spacing is a stall in what the server played. The server counts the
        // stalls it saw (underruns: the pulse thread wrote too late for the 40 ms buffer, as
        // happens on an overloaded machine); both are in the messages so that a failure says which.
        let statistics = playback.statistics
        #expect(onsets.count >= 6, "beeps at \(onsets), \(statistics)")
        #expect(statistics.underruns == 0, "beeps at \(onsets), \(statistics)")
        for (earlier, later) in zip(onsets, onsets.dropFirst()) {
            #expect(abs(later - earlier - Beeps.period) <= 240, "beeps at \(onsets), \(statistics)")
        }
        if let first = onsets.first, let last = onsets.last, last > first {
            let silence = Beeps.longestSilence(in: samples, from: first, to: last)
            #expect(silence <= Beeps.period - Beeps.length + 240, "a gap of \(silence) samples between beeps")
        }
        #expect(playback.statistics.rendered > 0)
    }

    @Test func aStallLongerThanTheBufferGrowsItAndTheServerGrantsIt() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        // The pulse thread stops for 200 ms after two seconds of playing, as on a machine that
        // stalls: the 40 ms queued on the server run out.
        let renderer = StallingRenderer(after: 2 * Beeps.sampleRate, for: .milliseconds(200))
        let playback = PulsePlayback(connection: connection, sink: "speaker", renderer: renderer)
        defer { playback.stop() }
        let events = playback.events

        let running = await nextEvent(of: events, within: .seconds(20)) {
            if case .running = $0 { true } else { false }
        }
        #expect(running != nil, "the stream never ran")
        let before = playback.statistics
        #expect(before.buffer == .milliseconds(40), "\(before)")
        #expect(before.serverQueue > .zero, "\(before)")
        let resized = await nextEvent(of: events, within: .seconds(20)) {
            if case .bufferResized = $0 { true } else { false }
        }
        let after = playback.statistics
        #expect(renderer.stalled)
        #expect(after.underruns >= 1, "\(after)")
        #expect(after.bufferGrowths == 1, "\(after)")
        // The stall, as the device's figures tell it: a render as long, and a wait as long.
        #expect(after.longestRender >= .milliseconds(190), "\(after)")
        #expect(after.longestWait >= .milliseconds(190), "\(after)")
        #expect(resized == .bufferResized(.milliseconds(60)), "\(after)")
        #expect(after.buffer == .milliseconds(60), "\(after)")
        // The server's reply: it queues more for the stream than before.
        #expect(after.serverQueue > before.serverQueue, "before \(before), after \(after)")
        // And it plays on.
        let recording = try server.record("speaker.monitor")
        defer { recording.stop() }
        #expect(try heardBeeps(recording, within: 10), "no beeps after the stall")
    }

    @Test func playbackResumesAfterTheServerIsKilledAndRestarted() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let playback = PulsePlayback(connection: connection, sink: "speaker", renderer: BeepRenderer())
        defer { playback.stop() }
        let before = try server.record("speaker.monitor")
        #expect(Beeps.onsets(in: before.read(samples: Beeps.sampleRate, timeout: .seconds(20))).count >= 1)
        before.stop()

        try server.restart()
        let after = try server.record("speaker.monitor")
        defer { after.stop() }
        #expect(try heardBeeps(after, within: 10), "no beeps within 10 s of the restart")
        #expect(playback.statistics.restarts >= 1)
    }

    @Test func playbackMovesToTheDefaultSinkWhenItsSinkIsRemoved() async throws {
        let server = try TestPulseServer(sinks: ["fallback", "speaker"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let playback = PulsePlayback(connection: connection, sink: "speaker", renderer: BeepRenderer())
        defer { playback.stop() }
        let before = try server.record("speaker.monitor")
        #expect(Beeps.onsets(in: before.read(samples: Beeps.sampleRate, timeout: .seconds(20))).count >= 1)
        before.stop()

        let fallback = try server.record("fallback.monitor")
        defer { fallback.stop() }
        let unloaded = try server.pactl(["unload-module", try server.moduleIndex(ofSink: "speaker")])
        #expect(unloaded.succeeded, "\(unloaded.errorOutput)")
        #expect(try heardBeeps(fallback, within: 10), "no beeps on the default sink within 10 s")
    }

    @Test func aKilledPlaybackStreamRetriesUntilASinkAppears() async throws {
        // With its only sink gone the server cannot move the stream: it kills it.
        let server = try TestPulseServer(sinks: ["speaker"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let playback = PulsePlayback(connection: connection, renderer: BeepRenderer())
        defer { playback.stop() }
        let before = try server.record("speaker.monitor")
        #expect(Beeps.onsets(in: before.read(samples: Beeps.sampleRate, timeout: .seconds(20))).count >= 1)
        before.stop()

        let unloaded = try server.pactl(["unload-module", try server.moduleIndex(ofSink: "speaker")])
        #expect(unloaded.succeeded, "\(unloaded.errorOutput)")
        let loaded = try server.pactl(["load-module", "module-null-sink", "sink_name=late", "rate=48000"])
        #expect(loaded.succeeded, "\(loaded.errorOutput)")
        let late = try server.record("late.monitor")
        defer { late.stop() }
        #expect(try heardBeeps(late, within: 10), "no beeps on the new sink within 10 s")
        #expect(playback.statistics.restarts >= 1)
    }

    @Test func microphoneResumesAfterTheServerIsKilledAndRestarted() async throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let microphone = PulseMicrophone(connection: connection, source: "mic.monitor")
        defer { microphone.stop() }
        try await microphone.waitUntilReady()
        _ = try microphone.nextFrame()

        try server.restart()
        let track = server.directory.appendingPathComponent("beeps.raw")
        try Beeps.track(seconds: 20).write(to: track)
        let player = try server.play(track, into: "mic")
        defer { player.stop() }
        let heard = await hearsBeeps(microphone, within: .seconds(15))
        #expect(heard, "no beeps from the microphone within 15 s of the restart")
        #expect(microphone.statistics.restarts >= 1)
    }

    @Test func microphoneMovesToTheDefaultSourceWhenItsSourceIsRemoved() async throws {
        // The default sink is `speaker`, so the default source is `speaker.monitor`.
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let connection = try await PulseConnection.connect(server: server.serverAddress)
        defer { connection.close() }
        let microphone = PulseMicrophone(connection: connection, source: "mic.monitor")
        defer { microphone.stop() }
        // Every stream event until the microphone runs on the default source.
        let events = microphone.events
        let moved = Task {
            var seen: [PulseStreamEvent] = []
            for await event in events {
                seen.append(event)
                if event == .running(device: "speaker.monitor") { break }
            }
            return seen
        }
        try await microphone.waitUntilReady()

        let unloaded = try server.pactl(["unload-module", try server.moduleIndex(ofSink: "mic")])
        #expect(unloaded.succeeded, "\(unloaded.errorOutput)")
        let track = server.directory.appendingPathComponent("beeps.raw")
        try Beeps.track(seconds: 20).write(to: track)
        let player = try server.play(track, into: "speaker")
        defer { player.stop() }
        let heard = await hearsBeeps(microphone, within: .seconds(15))
        #expect(heard, "no beeps from the default source within 15 s")
        let seen = await firstWithin(.seconds(10)) { await moved.value }
        #expect(seen?.first == .running(device: "mic.monitor"), "\(seen ?? [])")
        #expect(seen?.last == .running(device: "speaker.monitor"), "\(seen ?? [])")
    }

    /// Reads `recording` in half-second stretches until two beeps were heard or `seconds` of audio
    /// passed.
    /// Whether the microphone's blocks carry two beep onsets before `limit` passes.
    private func hearsBeeps(_ microphone: PulseMicrophone, within limit: Duration) async -> Bool {
        await withDeadline(limit) { () -> Bool in
            var samples: [Int16] = []
            while Beeps.onsets(in: samples).count < 2 {
                do {
                    try await microphone.waitUntilReady()
                    guard let frame = try microphone.nextFrame() else { return false }
                    samples += frame.samples
                } catch {
                    return false
                }
            }
            return true
        }
    }

    /// The first event of `events` matching `wanted`, nil if none came within `limit`.
    private func nextEvent(
        of events: AsyncStream<PulseStreamEvent>,
        within limit: Duration,
        where wanted: @escaping @Sendable (PulseStreamEvent) -> Bool
    ) async -> PulseStreamEvent? {
        await firstWithin(limit) {
            for await event in events where wanted(event) { return event }
            return nil
        } ?? nil
    }

    private func heardBeeps(_ recording: PulseRecording, within seconds: Int) throws -> Bool {
        var samples: [Int16] = []
        while samples.count < seconds * Beeps.sampleRate {
            let chunk = recording.read(samples: Beeps.sampleRate / 2, timeout: .seconds(5))
            if chunk.isEmpty { return false }
            samples += chunk
            if Beeps.onsets(in: samples).count >= 2 { return true }
        }
        return false
    }
}
