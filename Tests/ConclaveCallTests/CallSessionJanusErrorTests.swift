import ConclaveCall
import ConclavePeerConnection
import JanusClient
import JanusProtocol
import JanusTesting
import Logging
import Testing

/// The call layer's error paths against the in-memory Janus: each Janus failure while joining
/// ends in the ``CallError`` a user is shown, and the call is left cleanly. No Janus process, no
/// network namespace; a real Janus stays in the integration tests.
@Suite struct CallSessionJanusErrorTests {
    static let url = "ws://in-memory.janus:8188"
    static let room: UInt64 = 4242

    /// A call (no media sources) that reaches `janus` through its transport.
    func call(_ janus: InMemoryJanus, options: JanusConnection.Options? = nil) -> CallSession {
        CallSession(
            configuration: CallSession.Configuration(
                janusURL: Self.url,
                connectionOptions: options ?? janus.options(requestTimeout: .seconds(2)),
                room: Self.room,
                callID: 1,
                display: "1001:Alice",
                crypto: nil,
                transport: MediaTransport.Configuration(localAddresses: ["127.0.0.1"])
            ),
            sources: [],
            logger: Logger(label: "test.call")
        )
    }

    /// Joins and returns the error, checking that the call is left afterwards.
    func joinError(_ call: CallSession) async -> CallError? {
        var failure: CallError?
        do {
            try await call.join()
            Issue.record("joining succeeded")
            await call.leave()
        } catch {
            failure = error
        }
        #expect(await call.currentPhase == .left)
        return failure
    }

    @Test func janusThatRefusesConnectionsIsUnreachable() async {
        let janus = InMemoryJanus(rooms: [Self.room])
        janus.inject(.refuseConnections)
        let error = await joinError(call(janus))
        guard case .janusUnreachable(let url, _) = error else {
            Issue.record("expected janusUnreachable, got \(String(describing: error))")
            return
        }
        #expect(url == Self.url)
    }

    @Test func aMissingRoomIsRoomNotFound() async {
        let janus = InMemoryJanus()
        let error = await joinError(call(janus))
        #expect(error == .roomNotFound(room: Self.room, url: Self.url))
        #expect(!janus.requests.contains("message:join"))
    }

    @Test func aWrongAPISecretIsUnauthorized() async {
        let janus = InMemoryJanus(rooms: [Self.room], apiSecret: "right")
        let error = await joinError(call(janus, options: janus.options(apiSecret: "wrong")))
        #expect(error == .unauthorized(url: Self.url))
    }

    @Test func aRoomThatRefusesTheJoinIsUnauthorized() async {
        let janus = InMemoryJanus(rooms: [Self.room])
        janus.inject(.error(on: .videoRoom("join"), code: JanusError.videoRoomUnauthorized, reason: "Unauthorized"))
        let error = await joinError(call(janus))
        #expect(error == .unauthorized(url: Self.url))
    }

    @Test func aRefusedPublishNamesThePublishStep() async {
        let janus = InMemoryJanus(rooms: [Self.room])
        janus.inject(
            .error(
                on: .videoRoom("publish"),
                code: JanusError.videoRoomPublishersFull,
                reason: "Maximum number of publishers reached"
            )
        )
        let error = await joinError(call(janus))
        guard case .janus(let step, let message) = error else {
            Issue.record("expected a Janus error, got \(String(describing: error))")
            return
        }
        #expect(step == "joining the call")
        #expect(message.contains("publish"))
        #expect(message.contains("Maximum number of publishers"))
        // The failed join cleaned up after itself: its session is destroyed.
        #expect(janus.requests.contains("destroy"))
    }

    @Test func aJanusHangupDuringPublishEndsTheJoinWithATimeout() async {
        let janus = InMemoryJanus(rooms: [Self.room])
        janus.inject(.hangup(on: .videoRoom("publish")))
        let error = await joinError(call(janus, options: janus.options(requestTimeout: .milliseconds(300))))
        guard case .janus(let step, let message) = error else {
            Issue.record("expected a Janus error, got \(String(describing: error))")
            return
        }
        #expect(step == "joining the call")
        #expect(message.contains("did not answer"))
    }

    @Test func aConnectionLostWithoutReconnectEndsTheJoin() async {
        let janus = InMemoryJanus(rooms: [Self.room])
        janus.inject(.dropConnection(on: .videoRoom("join")))
        let error = await joinError(call(janus))
        guard case .janus(let step, let message) = error else {
            Issue.record("expected a Janus error, got \(String(describing: error))")
            return
        }
        #expect(step == "joining the call")
        #expect(message.contains("closed") || message.contains("dropped"))
    }
}
