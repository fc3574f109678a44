import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave rejoin` after the process was killed: the call resumes from the key store.
@Suite struct RejoinCommandTests {
    @Test func rejoinAfterKillResumesMediaBothWays() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed)
        let alice = try call.join("alice")
        let bob = try call.join("bob")
        let flowing = await waitUntil {
            alice.framesDecrypted(from: "bob") > 20 && bob.framesDecrypted(from: "alice") > 20
        }
        #expect(flowing != nil, "\(alice.errorOutput)\n\(bob.errorOutput)")

        alice.signal(SIGKILL)
        _ = await alice.waitForExit()
        // Bob's status lines come once a second: wait for two written after Alice's exit, so that
        // frames of hers still on their way then are counted and the count no longer grows. (A
        // poll, as in `waitUntil`: the lines arrive in a file, which gives no event to wait on.)
        let linesAtExit = bob.statusLines.count
        let settled = await waitUntil { bob.statusLines.count >= linesAtExit + 2 }
        #expect(settled != nil, "bob wrote no status lines after alice's exit: \(bob.errorOutput)")
        let beforeRejoin = bob.framesDecrypted(from: "alice")
        let rejoined = try CallProcess(
            "alice-rejoin",
            arguments: ["rejoin", "\(call.callID)", "--data-dir", call.dataDirectory("alice")] + call.mediaArguments,
            in: call.directory
        )
        // Both directions timed from the rejoin command's start.
        var aliceSees: Duration?
        var bobSees: Duration?
        _ = await waitUntil {
            let elapsed = ContinuousClock.now - rejoined.started
            if aliceSees == nil, rejoined.framesDecrypted(from: "bob") > 0 { aliceSees = elapsed }
            if bobSees == nil, bob.framesDecrypted(from: "alice") > beforeRejoin { bobSees = elapsed }
            return aliceSees != nil && bobSees != nil
        }
        let resumed = await waitUntil { bob.framesDecrypted(from: "alice") > beforeRejoin + 20 }
        #expect(resumed != nil, "media keeps coming from the rejoined alice")
        print(
            "rejoin: first frame from bob \(aliceSees.map { "\($0)" } ?? "never") after the command started; "
                + "bob decrypts alice again at \(bobSees.map { "\($0)" } ?? "never")"
        )
        #expect(aliceSees != nil, "\(rejoined.errorOutput)")
        #expect(bobSees != nil)
        let aliceAtBob = try #require(bob.participant("alice"))
        #expect((aliceAtBob["feeds"] as? [Any])?.count ?? 0 >= 2, "the rejoined feed is the same participant")
        #expect(aliceAtBob["undecryptable"] as? Int == 0, "the stored key is the call's key")

        rejoined.signal(SIGTERM)
        bob.signal(SIGTERM)
        #expect(await rejoined.waitForExit() == 0, "\(rejoined.errorOutput)")
        #expect(await bob.waitForExit() == 0)
    }

    @Test func rejoinOfAnUnknownCallSaysSo() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-rejoin")
        let result = try conclave(["rejoin", "12345", "--data-dir", directory.path])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("no call 12345"), "\(result.errorOutput)")
    }
}
