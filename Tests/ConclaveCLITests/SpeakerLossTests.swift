import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave join --speaker` under packet loss: Alice's microphone reaches Bob's speaker through
/// a Janus that drops 5% of what it receives, and Bob's closing lines (and status lines) say what
/// the playout made of it: losses concealed or rebuilt from Opus's in-band FEC, no underrun.
@Suite(.serialized) struct SpeakerLossTests {
    /// The numbers of one `audio from ...` closing line.
    struct HeardLine {
        var played: Int
        var concealed: Int
        var fecRecovered: Int
        var late: Int
        var underruns: Int

        /// Parses `audio from NAME (id ID, feed N): P frames played, C concealed, F recovered by
        /// FEC, L late, D dropped, R resyncs, U underruns, ...`.
        init?(_ line: Substring) {
            guard let colon = line.range(of: "): ") else { return nil }
            var figures: [String: Int] = [:]
            for part in line[colon.upperBound...].split(separator: ", ") {
                let words = part.split(separator: " ", maxSplits: 1)
                guard words.count == 2, let value = Int(words[0]) else { continue }
                figures[String(words[1])] = value
            }
            guard let played = figures["frames played"], let concealed = figures["concealed"],
                let fecRecovered = figures["recovered by FEC"], let late = figures["late"],
                let underruns = figures["underruns"]
            else { return nil }
            self.played = played
            self.concealed = concealed
            self.fecRecovered = fecRecovered
            self.late = late
            self.underruns = underruns
        }
    }

    /// Alice's entry in the `speaker` figures of Bob's latest status line.
    static func heard(_ process: CallProcess, from id: String) -> [String: Any]? {
        let speaker = process.lastStatus?["speaker"] as? [String: Any]
        return (speaker?["participants"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    @Test(
        "with 5% loss toward Janus, Bob hears Alice's beeps at their spacing and prints concealed and FEC-recovered frames, no underrun"
    )
    func beepsThroughLoss() async throws {
        // A private Janus: the loss rule applies to everything it receives.
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await BeepCall(bed: bed, seconds: 60)
        defer { call.player.stop() }
        let (pulse, alice, bob) = (call.pulse, call.alice, call.bob)

        // Alice's packets (and Bob's RTCP and signalling, which cope) lose 5% on the way in.
        try bed.dropPackets(percent: 5, direction: .toJanus)
        let speaker = try pulse.record("speaker.monitor")
        defer { speaker.stop() }
        let heard = speaker.read(samples: 8 * Beeps.sampleRate, timeout: .seconds(20))
        #expect(heard.count == 8 * Beeps.sampleRate, "only \(heard.count) samples from Bob's speaker")
        // A dip inside a beep (the speaker's stream starved on a loaded machine: the device's
        // underruns, which the closing line counts and bench/devices/loss fails on) would count
        // as a second onset: an onset within half a period of the last one is the same beep.
        let onsets = Beeps.onsets(in: heard).reduce(into: [Int]()) { kept, onset in
            if let last = kept.last, onset - last < Beeps.period / 2 { return }
            kept.append(onset)
        }
        #expect(onsets.count >= 14, "beeps at \(onsets)")
        let spacings = zip(onsets, onsets.dropFirst()).map { $1 - $0 }
        // Within two frames: a beep whose first frame was lost and concealed starts a frame late,
        // and a frame concealed while the buffer waited delays what follows by a frame until the
        // playout drops one to return to its target.
        let regular = spacings.filter { abs($0 - Beeps.period) <= 1_920 }
        #expect(regular.count >= spacings.count - 1 && regular.count >= 13, "spacings \(spacings)")
        if let first = onsets.first, let last = onsets.last, last > first {
            let silence = Beeps.longestSilence(in: heard, from: first, to: last)
            #expect(silence <= Beeps.period - Beeps.length + 2_400, "a gap of \(silence) samples on Bob's speaker")
        }
        // The status lines carry the same figures: wait for a FEC recovery to show there.
        let recovered = await waitUntil(timeout: .seconds(20)) {
            Self.heard(bob, from: "alice")?["fecRecovered"] as? Int ?? 0 > 0
        }
        #expect(
            recovered != nil,
            "no FEC recovery in Bob's status: \(String(describing: Self.heard(bob, from: "alice")))"
        )
        try bed.clearImpairment()

        bob.signal(SIGTERM)
        alice.signal(SIGTERM)
        #expect(await bob.waitForExit() == 0, "\(bob.errorOutput)")
        #expect(await alice.waitForExit() == 0, "\(alice.errorOutput)")

        let output = (try? String(contentsOf: bob.stdoutFile, encoding: .utf8)) ?? ""
        let lines = output.split(separator: "\n")
        let fromAlice = lines.filter { $0.hasPrefix("audio from ") && $0.contains("(id alice, feed ") }
        #expect(fromAlice.count == 1, "Bob's closing lines: \(lines.filter { !$0.hasPrefix("{") })")
        let figures = fromAlice.first.flatMap(HeardLine.init)
        #expect(figures != nil, "unreadable: \(fromAlice)")
        if let figures {
            #expect(figures.played > 250, "\(fromAlice)")
            #expect(figures.concealed + figures.fecRecovered > 0, "no loss repaired: \(fromAlice)")
            #expect(figures.fecRecovered > 0, "no FEC recovery: \(fromAlice)")
            #expect(figures.underruns == 0, "\(fromAlice)")
        }
        let device = lines.filter { $0.hasPrefix("speaker: ") }
        #expect(device.count == 1 && device.first?.contains(" device underruns, ") == true, "\(device)")
        #expect(device.first?.contains(", longest wait between requests ") == true, "\(device)")
        let status = Self.heard(bob, from: "alice")
        #expect(status?["concealed"] is Int && status?["underruns"] as? Int == 0, "\(String(describing: status))")
    }
}
