import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

/// Alice's microphone playing beeps to Bob's speaker through Janus, on a private PulseAudio
/// server: the set-up the speaker tests share, so each states only what it does to the call and
/// what it hears.
///
/// Alice's microphone is the monitor of sink `mic`, fed with a beep track; Bob speaks into the
/// silent `quiet` sink's monitor (his microphone goes through the echo canceller fed by what his
/// speaker plays) and listens on `speaker`, whose monitor the test records.
struct BeepCall {
    let pulse: TestPulseServer
    let player: BackgroundProcess
    let alice: CallProcess
    let bob: CallProcess

    /// Starts both participants for `seconds` and returns once Bob plays Alice's audio.
    init(bed: JanusTestBed, seconds: Int) async throws {
        pulse = try TestPulseServer(sinks: ["speaker", "mic", "quiet"])
        let track = pulse.directory.appendingPathComponent("beeps.raw")
        try Beeps.track(seconds: 60).write(to: track)
        player = try pulse.play(track, into: "mic")
        let call = try CallFixture(bed: bed, names: ["alice", "bob"])
        alice = try call.join(
            "alice",
            ["--audio", "mic:mic.monitor", "--video", "none", "--speaker", "none", "--duration", "\(seconds)"],
            environment: pulse.environment
        )
        bob = try call.join(
            "bob",
            ["--audio", "mic:quiet.monitor", "--video", "none", "--speaker", "speaker", "--duration", "\(seconds)"],
            environment: pulse.environment
        )
        let bob = bob
        let flowing = await waitUntil(timeout: .seconds(30)) {
            bob.participant("alice")?["audioFrames"] as? Int ?? 0 > 50
        }
        #expect(flowing != nil, "Bob got no audio from Alice: \(alice.errorOutput) \(bob.errorOutput)")
    }
}
