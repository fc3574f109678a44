import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Joins that must fail: a clear message, a non-zero exit, and the key store as it was.
@Suite struct JoinErrorTests {
    @Test func aRoomThatDoesNotExist() throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed)
        let destroyed = try conclave(["rooms", "destroy", "--room", "\(call.room)"] + call.janusArguments)
        #expect(destroyed.succeeded, "\(destroyed.errorOutput)")
        let result = try call.joinToCompletion("bob")
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("room \(call.room) does not exist"), "\(result.errorOutput)")
        #expect(call.storedCall("bob") == nil, "nothing stored for a call that was not joined")
    }

    @Test func aWrongAPISecret() throws {
        let bed = try TestJanus.start(.init(apiSecret: "the-right-secret"))
        defer { bed.stop() }
        let call = try CallFixture(bed: bed, apiSecret: "the-right-secret")
        let result = try conclave(
            [
                "join", "--data-dir", call.dataDirectory("bob"), "--invitation", call.invitationPath("bob"),
                "--janus", bed.webSocketURL, "--api-secret", "a-wrong-secret", "--duration", "5",
            ] + call.mediaArguments
        )
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("API secret"), "\(result.errorOutput)")
        #expect(!result.errorOutput.contains("the-right-secret") && !result.errorOutput.contains("a-wrong-secret"))
        #expect(call.storedCall("bob") == nil)
    }

    @Test func anInvitationForAnotherDevice() throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, extraKeys: ["mallory"])
        let result = try call.joinToCompletion("mallory", invitation: call.invitationPath("bob"))
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("is for another device"), "\(result.errorOutput)")
        #expect(call.storedCall("mallory") == nil)

        // The same invitation without Conclave's recipient field (as another tool writes it).
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: call.invitationPath("bob"))))
                as? [String: Any]
        )
        object["recipient"] = nil
        let anonymous = call.directory.appendingPathComponent("anonymous.json")
        try JSONSerialization.data(withJSONObject: object).write(to: anonymous)
        let again = try call.joinToCompletion("mallory", invitation: anonymous.path)
        #expect(again.status != 0)
        #expect(again.errorOutput.contains("does not open with this device's key"), "\(again.errorOutput)")
        #expect(call.storedCall("mallory") == nil)
    }

    @Test func anInvitationWithACorruptKey() throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed)
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: call.invitationPath("bob"))))
                as? [String: Any]
        )
        var key = Array(try #require(object["encryptedAESKey"] as? String))
        key[20] = key[20] == "Q" ? "R" : "Q"
        object["encryptedAESKey"] = String(key)
        let corrupt = call.directory.appendingPathComponent("corrupt.json")
        try JSONSerialization.data(withJSONObject: object).write(to: corrupt)
        let result = try call.joinToCompletion("bob", invitation: corrupt.path)
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("does not open with this device's key"), "\(result.errorOutput)")
        #expect(!result.errorOutput.contains(String(key)), "the key is not echoed")
        #expect(call.storedCall("bob") == nil)
    }

    @Test func twoInstancesOfTheSameParticipant() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed)
        let first = try call.join("bob")
        let live = await waitUntil(timeout: .seconds(20)) { first.lastStatus?["state"] as? String == "live" }
        #expect(live != nil, "\(first.errorOutput)")
        let stored = call.storedCall("bob")
        #expect(stored != nil)

        let second = try call.joinToCompletion("bob")
        #expect(second.status != 0)
        #expect(second.errorOutput.contains("participant 'bob' is already in room"), "\(second.errorOutput)")
        #expect(call.storedCall("bob") == stored, "the key store is untouched")

        first.signal(SIGTERM)
        #expect(await first.waitForExit() == 0, "the first instance is unaffected and leaves cleanly")
    }
}
