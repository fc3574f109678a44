import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Faults under running `conclave join` processes, against a private Janus: each process recovers
/// by itself and reports the recovery in its status lines.
@Suite(.serialized) struct CallFaultTests {
    /// The recoveries of the latest status line.
    static func recoveries(_ process: CallProcess) -> [[String: Any]] {
        process.lastStatus?["recoveries"] as? [[String: Any]] ?? []
    }

    static func resumed(_ process: CallProcess, kind: String) -> [String: Any]? {
        recoveries(process).last { $0["kind"] as? String == kind && $0["mediaResumedMs"] != nil }
    }

    @Test func webSocketKilledAndJanusRestartedUnderRunningJoins() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try CallFixture(bed: bed)
        let alice = try call.join("alice")
        let bob = try call.join("bob")
        let flowing = await waitUntil {
            alice.framesDecrypted(from: "bob") > 20 && bob.framesDecrypted(from: "alice") > 20
        }
        #expect(flowing != nil, "\(alice.errorOutput)")

        // WebSocket killed: every client socket to Janus is reset; the sessions are claimed.
        let janus = URL(string: bed.webSocketURL)!
        let killed = try runProcess(
            try which("ss"),
            ["-K", "dst", janus.host!, "dport", "=", ":\(janus.port!)"]
        )
        #expect(killed.succeeded, "ss -K: \(killed.errorOutput)")
        let claimed = await waitUntil {
            Self.resumed(alice, kind: "claim") != nil && Self.resumed(bob, kind: "claim") != nil
        }
        #expect(claimed != nil, "both claim their sessions: \(alice.errorOutput)")
        if let claim = Self.resumed(alice, kind: "claim"), let start = claim["startedMs"] as? Int,
            let media = claim["mediaResumedMs"] as? Int
        {
            print("CLI claim path: media flowing \(media - start) ms after the socket dropped")
        }

        // Janus killed and restarted: new sessions, same room (recreated), same key.
        let before = bob.framesDecrypted(from: "alice")
        try bed.restartJanus()
        let back = ContinuousClock.now
        let recovered = await waitUntil {
            Self.resumed(alice, kind: "new-session") != nil && Self.resumed(bob, kind: "new-session") != nil
                && bob.framesDecrypted(from: "alice") > before + 20
        }
        #expect(recovered != nil, "both recover with new sessions: \(alice.errorOutput)\n\(bob.errorOutput)")
        print(
            "CLI new-session path: media both ways again \(ContinuousClock.now - back) after Janus was back (status polled)"
        )
        #expect(bob.undecryptable(from: "alice") == 0 && alice.undecryptable(from: "bob") == 0)
        #expect((bob.participant("alice")?["feeds"] as? [Any])?.count == 2, "alice's new feed is still alice")

        alice.signal(SIGTERM)
        bob.signal(SIGTERM)
        #expect(await alice.waitForExit() == 0)
        #expect(await bob.waitForExit() == 0)
    }
}
