import ConclaveTestSupport
import ECallSignaling
import Foundation
import RecorderJobs
import Testing

/// A valid ECall job, for tests to break one field at a time.
func sampleJob() -> RecordJob {
    RecordJob(
        jobID: "job-1.a_b",
        callID: 42,
        room: 1234,
        janusURL: "ws://127.0.0.1:8188/janus",
        crypto: .ecall,
        wrappedKey: "QUJD:REVG",
        keyEpoch: 3,
        recorderDeviceID: 900,
        output: "team/2026-11-24/call-42",
        stop: .after(seconds: 60),
        display: "Recorder",
        submittedAt: "2026-11-24T07:00:00.000Z"
    )
}

/// The sample job's JSON as an object, to edit fields as a submitter could.
func sampleObject() throws -> [String: Any] {
    try #require(JSONSerialization.jsonObject(with: Data(sampleJob().encoded())) as? [String: Any])
}

func bytes(_ object: [String: Any]) throws -> [UInt8] {
    Array(try JSONSerialization.data(withJSONObject: object))
}

/// The reason `body` is refused, or nil when it is accepted.
func refusal(_ body: [UInt8]) -> String? {
    do {
        _ = try RecordJob.decode(body)
        return nil
    } catch {
        return error.reason
    }
}

@Suite("Record jobs")
struct RecordJobTests {
    @Test func roundTripsThroughItsJSON() throws {
        let job = sampleJob()
        #expect(try RecordJob.decode(job.encoded()) == job)
        var plain = job
        plain.crypto = .none
        plain.wrappedKey = nil
        plain.keyEpoch = nil
        plain.recorderDeviceID = nil
        plain.stop = .roomEmpty(graceSeconds: 30)
        plain.display = nil
        #expect(try RecordJob.decode(plain.encoded()) == plain)
    }

    /// The wire format, byte for byte: other languages submit jobs too.
    @Test func encodesTheDocumentedVector() {
        let text = String(decoding: sampleJob().encoded(), as: UTF8.self)
        #expect(
            text == """
                {"callId":42,"crypto":"ecall","display":"Recorder","janusUrl":"ws://127.0.0.1:8188/janus",\
                "jobId":"job-1.a_b","keyEpoch":3,"output":"team/2026-11-24/call-42","recorderDeviceId":900,\
                "room":1234,"stop":{"after":60},"submittedAt":"2026-11-24T07:00:00.000Z","version":1,\
                "wrappedKey":"QUJD:REVG"}
                """
        )
    }

    @Test func decodesTheLargestIdsExactly() throws {
        var object = try sampleObject()
        object["callId"] = UInt64.max
        object["room"] = UInt64.max - 1
        let text = String(decoding: try bytes(object), as: UTF8.self)
        #expect(text.contains("18446744073709551615"))
        let job = try RecordJob.decode(try bytes(object))
        #expect(job.callID == UInt64.max)
        #expect(job.room == UInt64.max - 1)
    }

    @Test func decodesUntilEmptyAndSecondsWithoutFraction() throws {
        let body = """
            {"version":1,"jobId":"x","callId":1,"room":2,"janusUrl":"wss://janus.example/ws","crypto":"none",\
            "output":"a","stop":{"roomEmpty":15.5},"submittedAt":"2026-11-24T07:00:00Z"}
            """
        let job = try RecordJob.decode(Array(body.utf8))
        #expect(job.stop == .roomEmpty(graceSeconds: 15.5))
        #expect(job.crypto == .none)
        #expect(job.display == nil)
    }

    /// Each broken field (its JSON text) is refused with one line that names it.
    @Test(arguments: [
        ("version", "2", "version: 2 is not supported"),
        ("jobId", #""""#, "jobId: 0 characters"),
        ("jobId", "\"" + String(repeating: "a", count: 65) + "\"", "jobId: 65 characters"),
        ("jobId", #""a/b""#, "jobId: \"a/b\" has a character outside"),
        ("jobId", "7", "jobId: expected a string"),
        ("callId", "0", "callId: must not be 0"),
        ("callId", "-1", "callId: expected a whole number from 0"),
        ("callId", #""42""#, "callId: expected an integer"),
        ("version", "1e30", "version: expected a whole number"),
        ("room", "0", "room: must not be 0"),
        ("room", "1.5", "room: expected a whole number from 0 to 18446744073709551615"),
        ("janusUrl", #""http://127.0.0.1:8088/janus""#, "janusUrl: \"http://127.0.0.1:8088/janus\" is not a ws://"),
        ("janusUrl", #""ws://""#, "janusUrl: \"ws://\" has no host"),
        ("janusUrl", #""ws://a b/""#, "janusUrl: only printable ASCII"),
        ("crypto", #""rot13""#, "crypto:"),
        ("wrappedKey", #""not base64!""#, "wrappedKey: expected base64"),
        ("wrappedKey", #""""#, "wrappedKey: 0 characters"),
        ("keyEpoch", "-3", "keyEpoch: expected a whole number from 0"),
        ("recorderDeviceId", "0", "recorderDeviceId: must not be 0"),
        ("output", #""/etc/cron.d""#, "output: \"/etc/cron.d\" is absolute"),
        ("output", #""a/../../etc""#, "output: \"a/../../etc\" leaves the storage root"),
        ("output", #""..""#, "output: \"..\" leaves the storage root"),
        ("output", #""a//b""#, "output: \"a//b\" has an empty component"),
        ("output", #""a/""#, "output: \"a/\" has an empty component"),
        ("output", #""./a""#, "output: \"./a\" has a '.' component"),
        ("output", #""a\u0000b""#, "output: NUL in the path"),
        ("output", #""a\nb""#, "output: control character"),
        ("output", #""a\\..\\b""#, "output: backslash"),
        ("output", #""""#, "output: empty path"),
        ("output", "\"" + Array(repeating: "d", count: 17).joined(separator: "/") + "\"", "output: 17 components"),
        ("output", "\"" + String(repeating: "n", count: 256) + "\"", "output: a component of 256 bytes"),
        ("stop", #"{"after":0}"#, "stop.after: 0.0 is not in (0, 86400]"),
        ("stop", #"{"after":-5}"#, "stop.after: -5.0 is not in"),
        ("stop", #"{"after":86401}"#, "stop.after: 86401.0 is not in"),
        ("stop", #"{"roomEmpty":0}"#, "stop.roomEmpty: 0.0 is not in"),
        ("stop", #"{"after":1,"roomEmpty":1}"#, "stop: expected exactly one of"),
        ("stop", "{}", "stop: expected exactly one of"),
        ("stop", #"{"until":5}"#, "stop.until: unknown field"),
        ("stop", "60", "stop: expected an object"),
        ("display", #""a\u0007b""#, "display: control characters"),
        ("display", #""""#, "display: must not be empty"),
        ("display", "\"" + String(repeating: "é", count: 129) + "\"", "display: 258 bytes"),
        ("submittedAt", #""yesterday""#, "submittedAt: \"yesterday\" is not an ISO 8601"),
        ("outptu", #""x""#, "outptu: unknown field"),
    ])
    func refusesABrokenField(field: String, json: String, expected: String) throws {
        var object = try sampleObject()
        object[field] = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)
        let reason = try #require(refusal(try bytes(object)), "accepted \(field) = \(json)")
        #expect(reason.hasPrefix(expected), "\(reason)")
        #expect(!reason.contains("\n"))
    }

    @Test(arguments: ["version", "jobId", "callId", "room", "janusUrl", "crypto", "output", "stop", "submittedAt"])
    func refusesAMissingField(field: String) throws {
        var object = try sampleObject()
        object.removeValue(forKey: field)
        #expect(refusal(try bytes(object)) == "\(field): missing")
    }

    @Test func refusesKeyFieldsThatDoNotMatchTheCrypto() throws {
        var object = try sampleObject()
        object.removeValue(forKey: "wrappedKey")
        #expect(refusal(try bytes(object))?.hasPrefix("wrappedKey: missing") == true)
        object = try sampleObject()
        object.removeValue(forKey: "keyEpoch")
        #expect(refusal(try bytes(object))?.hasPrefix("keyEpoch: missing") == true)
        object = try sampleObject()
        object.removeValue(forKey: "recorderDeviceId")
        #expect(refusal(try bytes(object))?.hasPrefix("recorderDeviceId: missing") == true)
        object = try sampleObject()
        object["crypto"] = "none"
        #expect(refusal(try bytes(object))?.hasPrefix("wrappedKey: a job with crypto \"none\" carries no key") == true)
        object["wrappedKey"] = NSNull()
        #expect(refusal(try bytes(object)) != nil)
    }

    @Test func refusesWhatIsNotAJobObject() {
        #expect(refusal(Array("not json".utf8)) == "job: not valid JSON")
        #expect(refusal([]) == "job: not valid JSON")
        #expect(refusal(Array("[1,2]".utf8)) == "job: expected an object")
        #expect(refusal(Array("null".utf8)) != nil)
        let large = [UInt8](repeating: UInt8(ascii: " "), count: RecordJob.maximumBodySize + 1)
        #expect(refusal(large) == "job: 65537 bytes, more than the 65536 a job may have")
    }

    @Test func pathsResolveUnderTheRoot() throws {
        let path = try RecordJobPath("team/é call/42")
        #expect(path.components == ["team", "é call", "42"])
        #expect(path.description == "team/é call/42")
        let root = URL(fileURLWithPath: "/srv/recordings")
        #expect(path.resolved(under: root).path == "/srv/recordings/team/é call/42")
        #expect(throws: RecordJobError.self) { try RecordJobPath("a/./b") }
        // Names that merely start with dots are ordinary names.
        #expect(try RecordJobPath("...").components == ["..."])
        #expect(try RecordJobPath(".hidden/..x").components == [".hidden", "..x"])
    }
}

/// The sample job's call invitation to the recorder device 900 as its JSON object: its shape is
/// checked when a job is decoded (the signature by the service, which has the fleet's key).
func sampleInvitationObject() -> [String: Any] {
    [
        "type": "call_invitation", "callId": 42, "roomId": 1234, "callerId": 1, "callerDeviceId": 11,
        "calleeId": 9, "calleeDeviceId": 900, "crypto": "ecall", "encryptedAESKey": "QUJD:REVG",
        "roster": [
            ["userId": 1, "deviceId": 11, "displayName": "host", "publicKey": "HOSTKEY", "isHost": true],
            ["userId": 9, "deviceId": 900, "displayName": "recorder", "publicKey": "FLEETKEY", "isHost": false],
        ],
    ]
}

func text(_ object: [String: Any]) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: object, options: .sortedKeys), as: UTF8.self)
}

func sampleJobWithInvitation() throws -> RecordJob {
    var job = sampleJob()
    job.invitation = try text(sampleInvitationObject())
    return job
}

@Suite("Record jobs with an invitation")
struct RecordJobInvitationTests {
    @Test func roundTripsAndReadsAsTheInvitationItCarries() throws {
        let job = try sampleJobWithInvitation()
        let decoded = try RecordJob.decode(job.encoded())
        #expect(decoded == job)
        let message = try SignalMessage(json: try #require(decoded.invitation))
        #expect(message.type == .callInvitation && message.callId == 42)
        #expect(message.roster?.map(\.deviceId) == [11, 900])
    }

    /// The wire format: the invitation is a JSON string field holding the message's text.
    @Test func encodesTheDocumentedVector() throws {
        var job = sampleJob()
        job.invitation =
            #"{"callId":42,"roster":[{"deviceId":900,"displayName":"r","isHost":false,"publicKey":"K","userId":9},"#
            + #"{"deviceId":11,"displayName":"h","isHost":true,"publicKey":"H","userId":1}],"type":"call_invitation"}"#
        let body = String(decoding: job.encoded(), as: UTF8.self)
        #expect(
            body == #"{"callId":42,"crypto":"ecall","display":"Recorder","invitation":"{\"callId\":42,"#
                + #"\"roster\":[{\"deviceId\":900,\"displayName\":\"r\",\"isHost\":false,\"publicKey\":\"K\","#
                + #"\"userId\":9},{\"deviceId\":11,\"displayName\":\"h\",\"isHost\":true,\"publicKey\":\"H\","#
                + #"\"userId\":1}],\"type\":\"call_invitation\"}","janusUrl":"ws://127.0.0.1:8188/janus","#
                + #""jobId":"job-1.a_b","keyEpoch":3,"output":"team/2026-11-24/call-42","recorderDeviceId":900,"#
                + #""room":1234,"stop":{"after":60},"submittedAt":"2026-11-24T07:00:00.000Z","version":1,"#
                + #""wrappedKey":"QUJD:REVG"}"#,
            "\(body)"
        )
        #expect(try RecordJob.decode(job.encoded()) == job)
    }

    /// Each broken invitation is refused with one line that names the field and the fault.
    @Test(arguments: [
        ("type", #""key_rotation""#, "invitation: a \"key_rotation\" message, not a call_invitation"),
        ("callId", "43", "invitation: for call 43, not the job's call 42"),
        ("callId", "null", "invitation: for call -, not the job's call 42"),
        ("calleeDeviceId", "901", "invitation: addressed to device 901, not the recorder device 900"),
        (
            "roster", #"[{"userId":1,"deviceId":11,"displayName":"h","publicKey":"k","isHost":true}]"#,
            "invitation: its roster does not list the recorder device 900"
        ),
        ("roster", "null", "invitation: its roster does not list the recorder device 900"),
        (
            "roster", #"[{"userId":9,"deviceId":900,"displayName":"r","publicKey":"k","isHost":false}]"#,
            "invitation: its roster names no host"
        ),
        ("roster", #""everyone""#, "invitation: not a signaling message"),
        ("crypto", #""sframe""#, "invitation: crypto sframe, the job's is ecall"),
        ("callId", #""forty-two""#, "invitation: not a signaling message"),
    ])
    func refusesABrokenInvitation(field: String, json: String, expected: String) throws {
        var invitation = sampleInvitationObject()
        invitation[field] = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)
        var object = try sampleObject()
        object["invitation"] = try text(invitation)
        let reason = try #require(refusal(try bytes(object)), "accepted \(field) = \(json)")
        #expect(reason.hasPrefix(expected), "\(reason)")
        #expect(!reason.contains("\n"))
    }

    @Test func refusesAnInvitationThatIsNoMessageOrTooLongOrUnneeded() throws {
        var object = try sampleObject()
        for (value, expected) in [
            ("", "invitation: 0 bytes, expected 1 to 49152"),
            ("not json", "invitation: not a signaling message"),
            ("[1]", "invitation: not a signaling message"),
            (String(repeating: " ", count: RecordJob.maximumInvitationLength + 1), "invitation: 49153 bytes"),
        ] {
            object["invitation"] = value
            let reason = try #require(refusal(try bytes(object)), "accepted \(value.prefix(20))")
            #expect(reason.hasPrefix(expected), "\(reason)")
            #expect(!reason.contains("\n"))
        }
        object["invitation"] = 7
        #expect(refusal(try bytes(object)) == "invitation: expected a string")
        // A call without end-to-end encryption has no keys to follow.
        object = try sampleObject()
        object["crypto"] = "none"
        object["wrappedKey"] = nil
        object["keyEpoch"] = nil
        object["recorderDeviceId"] = nil
        object["invitation"] = try text(sampleInvitationObject())
        #expect(refusal(try bytes(object))?.hasPrefix("invitation: a job with crypto \"none\" has no keys") == true)
    }

    /// The largest roster that fits is accepted: the bounds are not tighter than they say.
    @Test func acceptsAnInvitationUpToItsBound() throws {
        var invitation = sampleInvitationObject()
        var roster = try #require(invitation["roster"] as? [[String: Any]])
        let filler = String(repeating: "A", count: 700)
        for index in 0..<40 {
            roster.append(
                [
                    "userId": 100 + index, "deviceId": 1000 + index, "displayName": "p", "publicKey": filler,
                    "isHost": false,
                ]
            )
        }
        invitation["roster"] = roster
        var job = sampleJob()
        job.invitation = try text(invitation)
        #expect(try #require(job.invitation).utf8.count > 16 * 1024)
        #expect(try RecordJob.decode(job.encoded()) == job)
    }
}

/// Bounded, seeded fuzzing: mutated and random bodies give a job or a one-line error, never a trap.
@Suite("Fuzzing the job and event decoders")
struct RecordJobFuzzTests {
    @Test func mutatedJobsDecodeOrFailWithOneLine() throws {
        var generator = SeededGenerator(seed: 0x5EED_0018)
        let seeds = [
            sampleJob().encoded(),
            Array(
                """
                {"version":1,"jobId":"x","callId":1,"room":2,"janusUrl":"ws://h","crypto":"none","output":"a/b",\
                "stop":{"roomEmpty":1e3},"submittedAt":"2026-11-24T07:00:00Z"}
                """.utf8
            ),
        ]
        var accepted = 0
        for iteration in 0..<4000 {
            let body =
                iteration % 10 == 9
                ? generator.bytes(Int.random(in: 0..<300, using: &generator))
                : generator.mutate(seeds[iteration % seeds.count])
            do {
                let job = try RecordJob.decode(body)
                accepted += 1
                // Whatever is accepted re-encodes to a job that is accepted and equal.
                #expect(try RecordJob.decode(job.encoded()) == job)
                _ = try RecordJobPath(job.output)
            } catch {
                #expect(!error.reason.isEmpty)
                #expect(!error.reason.contains("\n"), "\(error.reason)")
            }
        }
        #expect(accepted > 0)
    }

    /// Mutated invitations inside an otherwise valid job: a job or one line, never a trap.
    @Test func mutatedInvitationsDecodeOrFailWithOneLine() throws {
        var generator = SeededGenerator(seed: 0x1_417E)
        let job = try sampleJobWithInvitation()
        let seed = Array(try #require(job.invitation).utf8)
        var accepted = 0
        for _ in 0..<3000 {
            var mutated = job
            mutated.invitation = String(decoding: generator.mutate(seed), as: UTF8.self)
            do {
                let decoded = try RecordJob.decode(mutated.encoded())
                accepted += 1
                #expect(try RecordJob.decode(decoded.encoded()) == decoded)
            } catch {
                #expect(!error.reason.isEmpty)
                #expect(!error.reason.contains("\n"), "\(error.reason)")
            }
        }
        #expect(accepted > 0)
    }

    @Test func mutatedEventsDecodeOrFail() {
        var generator = SeededGenerator(seed: 0xE7E7)
        let seeds = sampleEvents().map { $0.encoded() }
        for iteration in 0..<3000 {
            let body = generator.mutate(seeds[iteration % seeds.count])
            do {
                let event = try RecorderEvent.decode(body)
                #expect(try RecorderEvent.decode(event.encoded()) == event)
            } catch {
                #expect(!error.reason.contains("\n"), "\(error.reason)")
            }
        }
    }
}
