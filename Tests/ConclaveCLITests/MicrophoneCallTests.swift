import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave join --audio mic:SOURCE` through a real Janus: beeps played into a PulseAudio null
/// sink reach the other participant, whose recording decodes to the same beeps; SIGUSR1 mutes
/// without stopping the packets.
@Suite(.serialized) struct MicrophoneCallTests {
    @Test func beepsFromTheMicrophoneReachTheOtherParticipant() async throws {
        let bed = try TestJanus.shared()
        let pulse = try TestPulseServer(sinks: ["speaker", "mic"])
        let track = pulse.directory.appendingPathComponent("beeps.raw")
        // 100 ms of 1 kHz every 500 ms, for longer than the call.
        try Beeps.track(seconds: 60).write(to: track)
        let player = try BackgroundProcess(
            "pacat",
            [
                "--playback", "--device=mic", "--format=s16le", "--rate=48000", "--channels=1", "--raw",
                track.path,
            ],
            environment: pulse.environment
        )
        defer { player.stop() }

        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        let alice = try call.join(
            "alice",
            ["--audio", "mic:mic.monitor", "--video", "none", "--duration", "40"],
            environment: pulse.environment
        )
        let recording = call.directory.appendingPathComponent("bob-recording").path
        let bob = try call.join("bob", ["--record", recording, "--duration", "40"])

        func audioFrames() -> Int { bob.participant("alice")?["audioFrames"] as? Int ?? 0 }
        let heard = await waitUntil(timeout: .seconds(30)) { audioFrames() > 250 }
        #expect(heard != nil, "Bob got \(audioFrames()) audio frames from Alice: \(alice.errorOutput)")

        // Muted: one status line, and the packets keep coming.
        alice.signal(SIGUSR1)
        let mutedLine = await waitUntil(timeout: .seconds(10)) { alice.errorOutput.contains("microphone muted") }
        #expect(mutedLine != nil, "\(alice.errorOutput)")
        let before = audioFrames()
        let flowing = await waitUntil(timeout: .seconds(10)) { audioFrames() > before + 50 }
        #expect(flowing != nil, "no audio from Alice after muting")

        bob.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        alice.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")

        // Bob's recording of Alice decodes to the beeps at their spacing.
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recording + "/manifest.json")))
                as? [String: Any]
        )
        let participants = manifest["participants"] as? [[String: Any]] ?? []
        let aliceEntry = try #require(participants.first { ($0["userID"] as? String) == "alice" }, "\(participants)")
        let segment = try #require((aliceEntry["segments"] as? [[String: Any]])?.first)
        let file = recording + "/" + (try #require(segment["file"] as? String))
        let pcm = call.directory.appendingPathComponent("alice.raw").path
        let decoded = try runProcess(
            "ffmpeg",
            // libopus, the reference decoder: FFmpeg's own adds a burst after some tone endings.
            [
                "-v", "error", "-y", "-c:a", "libopus", "-i", file, "-map", "0:a:0", "-f", "s16le", "-ac", "1", "-ar",
                "48000", pcm,
            ]
        )
        #expect(decoded.succeeded, "\(decoded.errorOutput)")
        let audio = try Data(contentsOf: URL(fileURLWithPath: pcm)).withUnsafeBytes {
            Array($0.bindMemory(to: Int16.self))
        }
        let onsets = Beeps.onsets(in: audio)
        #expect(onsets.count >= 6, "beeps at \(onsets)")
        let spacings = zip(onsets, onsets.dropFirst()).map { $1 - $0 }
        let regular = spacings.filter { abs($0 - 24_000) <= 960 }
        #expect(regular.count >= 5, "spacings \(spacings)")
    }

    @Test func withoutAPulseAudioServerTheCallGoesOnWithoutTheMicrophone() async throws {
        let bed = try TestJanus.shared()
        let nowhere = try TestPaths.temporaryDirectory("conclave-nopulse")
        defer { try? FileManager.default.removeItem(at: nowhere) }
        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        let alice = try call.join(
            "alice",
            ["--audio", "mic", "--duration", "30"],
            environment: ["PULSE_SERVER": "unix:\(nowhere.path)/native"]
        )
        let bob = try call.join("bob", ["--duration", "30"])
        let seen = await waitUntil(timeout: .seconds(20)) {
            bob.participant("alice")?["videoFrames"] as? Int ?? 0 > 10
        }
        #expect(seen != nil, "Alice's video did not reach Bob: \(alice.errorOutput)")
        let lines = alice.errorOutput.split(separator: "\n").filter { $0.contains("PulseAudio") }
        #expect(lines.count == 1, "\(alice.errorOutput)")
        #expect(
            lines.first?.contains("no PulseAudio server at unix:\(nowhere.path)/native") == true
                && lines.first?.contains("joining without a microphone") == true,
            "\(lines)"
        )
        #expect(bob.participant("alice")?["audioFrames"] as? Int ?? 0 == 0)
        alice.signal(SIGTERM)
        bob.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
    }
}
