import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave join --speaker SINK` through a real Janus: what Alice's microphone hears comes out of
/// Bob's speaker, beep for beep, without gaps, with Bob's own microphone through the echo
/// canceller at the same time.
@Suite(.serialized) struct SpeakerCallTests {
    @Test(
        "Alice's microphone beeps play on Bob's speaker at their spacing, with no gap, while Bob's microphone is echo-cancelled"
    )
    func microphoneToSpeaker() async throws {
        let bed = try TestJanus.shared()
        let call = try await BeepCall(bed: bed, seconds: 40)
        defer { call.player.stop() }
        let (pulse, alice, bob) = (call.pulse, call.alice, call.bob)

        let speaker = try pulse.record("speaker.monitor")
        defer { speaker.stop() }
        let heard = speaker.read(samples: 6 * Beeps.sampleRate, timeout: .seconds(20))
        #expect(heard.count == 6 * Beeps.sampleRate, "only \(heard.count) samples from Bob's speaker")
        let onsets = Beeps.onsets(in: heard)
        #expect(onsets.count >= 10, "beeps at \(onsets)")
        let spacings = zip(onsets, onsets.dropFirst()).map { $1 - $0 }
        let regular = spacings.filter { abs($0 - Beeps.period) <= 960 }
        #expect(regular.count >= spacings.count - 1 && regular.count >= 9, "spacings \(spacings)")
        if let first = onsets.first, let last = onsets.last, last > first {
            let silence = Beeps.longestSilence(in: heard, from: first, to: last)
            #expect(silence <= Beeps.period - Beeps.length + 2_400, "a gap of \(silence) samples on Bob's speaker")
        }

        bob.signal(SIGTERM)
        alice.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")
        #expect(!bob.errorOutput.contains("echo cancellation"), "\(bob.errorOutput)")
    }

    @Test("without a PulseAudio server, --speaker is one line and the call goes on")
    func noServer() async throws {
        let bed = try TestJanus.shared()
        let nowhere = try TestPaths.temporaryDirectory("conclave-nospeaker")
        defer { try? FileManager.default.removeItem(at: nowhere) }
        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        let alice = try call.join("alice", ["--duration", "30"])
        let bob = try call.join(
            "bob",
            ["--speaker", "default", "--duration", "30"],
            environment: ["PULSE_SERVER": "unix:\(nowhere.path)/native"]
        )
        let seen = await waitUntil(timeout: .seconds(20)) {
            bob.participant("alice")?["audioFrames"] as? Int ?? 0 > 50
        }
        #expect(seen != nil, "Bob's call did not go on: \(bob.errorOutput)")
        let lines = bob.errorOutput.split(separator: "\n").filter { $0.contains("PulseAudio") }
        #expect(
            lines.count == 1 && lines.first?.contains("the call goes on without sound") == true,
            "\(bob.errorOutput)"
        )
        alice.signal(SIGTERM)
        bob.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
    }

    @Test("--volume refuses a level outside 0...2 in one line, before joining")
    func badVolume() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice"])
        let alice = try call.join("alice", ["--volume", "bob=3", "--speaker", "none", "--duration", "5"])
        #expect(await alice.waitForExit() != 0)
        #expect(
            alice.errorOutput.contains("--volume bob=3: expected USERID=LEVEL with LEVEL from 0 to 2"),
            "\(alice.errorOutput)"
        )
    }
}
