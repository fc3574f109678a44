import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End-to-end: `conclave join` processes in one call see each other's decrypted media.
@Suite(.serialized) struct JoinCommandTests {
    @Test func threeParticipantsSeeEachOthersDecryptedFramesAndLeaveCleanly() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice", "bob", "carol"])
        let alice = try call.join("alice", ["--duration", "25"])
        let bob = try call.join("bob", ["--audio", "tone", "--video", "pattern", "--duration", "25"])
        let carol = try call.join("carol")
        let everyone = [alice, bob, carol]
        let ids = ["alice", "bob", "carol"]

        let allSeeAll = await waitUntil(timeout: .seconds(20)) {
            everyone.enumerated().allSatisfy { index, process in
                ids.enumerated().allSatisfy { other, id in other == index || process.framesDecrypted(from: id) > 30 }
            }
        }
        for (index, process) in everyone.enumerated() {
            for (other, id) in ids.enumerated() where other != index {
                #expect(
                    process.framesDecrypted(from: id) > 30,
                    "\(process.name) decrypted from \(id): \(process.errorOutput)"
                )
                #expect(process.undecryptable(from: id) == 0, "\(process.name): undecryptable frames from \(id)")
                let participant = process.participant(id)
                #expect(participant?["videoCodec"] as? String == "h264")
                #expect(participant?["audioCodec"] as? String == "opus")
                print("join time: \(process.name) first frame from \(id) at \(participant?["firstFrameMs"] ?? "-") ms")
            }
        }
        #expect(allSeeAll != nil)

        // SIGTERM: Carol leaves cleanly (exit 0), and the others see her feed go.
        carol.signal(SIGTERM)
        #expect(await carol.waitForExit() == 0, "SIGTERM ends with exit 0: \(carol.errorOutput)")
        #expect(carol.lastStatus?["state"] as? String == "left")
        let noticed = await waitUntil(timeout: .seconds(10)) {
            alice.participant("carol")?["present"] as? Bool == false
                && bob.participant("carol")?["present"] as? Bool == false
        }
        #expect(noticed != nil, "Carol's unpublish and leave reached Janus")

        // --duration: Alice and Bob end by themselves with exit 0.
        #expect(await alice.waitForExit(timeout: .seconds(40)) == 0, "\(alice.errorOutput)")
        #expect(await bob.waitForExit(timeout: .seconds(40)) == 0, "\(bob.errorOutput)")
        #expect(alice.lastStatus?["state"] as? String == "left")
        // Bob's copy of the key and the rejoin details are stored.
        let stored = try #require(call.storedCall("bob"))
        let file = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
        let record = try #require(file["record"] as? [String: Any])
        #expect(record["room"] as? String == "\(call.room)")
        #expect(record["display"] as? String == "bob:Bob")
        #expect(record["janusUrl"] as? String == bed.webSocketURL)
    }
}
