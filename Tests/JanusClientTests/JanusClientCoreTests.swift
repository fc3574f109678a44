import JanusProtocol
import Testing

@testable import JanusClient

/// The sans-IO core with vectors: inputs in, actions out, time as a value. No socket, no clock.
@Suite struct JanusClientCoreTests {
    typealias Core = JanusClientCore<Int>

    let t0 = ContinuousClock.now

    func makeCore(reconnect: JanusConnection.ReconnectPolicy? = nil) -> Core {
        Core(
            configuration: Core.Configuration(
                url: "ws://janus.test:8188/",
                apiSecret: "secret",
                token: nil,
                requestTimeout: .seconds(10),
                keepaliveInterval: .seconds(25),
                reconnect: reconnect,
                transactionPrefix: "t-"
            )
        )
    }

    /// An open core (the transport is up).
    func openCore(reconnect: JanusConnection.ReconnectPolicy? = nil) -> Core {
        var core = makeCore(reconnect: reconnect)
        let actions = core.transportUp(now: t0)
        #expect(states(actions) == [.connected])
        return core
    }

    // MARK: Reading actions

    func sent(_ actions: [Core.Action]) -> [JSONValue] {
        actions.compactMap { action in
            if case .send(let outgoing) = action { return try? JSONValue.parse(outgoing.text) }
            return nil
        }
    }

    func completions(_ actions: [Core.Action]) -> [(Int, Result<JanusMessage, JanusClientError>)] {
        actions.compactMap { action in
            if case .complete(let waiter, let result) = action { return (waiter, result) }
            return nil
        }
    }

    func states(_ actions: [Core.Action]) -> [JanusConnection.State] {
        actions.compactMap { action in
            if case .state(let state) = action { return state }
            return nil
        }
    }

    func errorCode(_ result: Result<JanusMessage, JanusClientError>) -> JanusClientError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }

    /// Sends `request` as waiter `waiter` and returns its transaction.
    func send(_ request: JanusRequest, waiter: Int, on core: inout Core, at now: ContinuousClock.Instant) throws
        -> String
    {
        let out = sent(core.request(request, timeout: nil, waiter: waiter, now: now))
        let message = try #require(out.first)
        #expect(out.count == 1)
        return try #require(message["transaction"]?.stringValue)
    }

    // MARK: Transactions

    @Test func repliesCompleteTheirOwnTransactionWhateverTheOrder() throws {
        var core = openCore()
        let first = try send(.create(), waiter: 1, on: &core, at: t0)
        let second = try send(JanusRequest(.keepalive, session: 7), waiter: 2, on: &core, at: t0)
        #expect(first != second)

        let replyToSecond = core.received(#"{"janus":"ack","session_id":7,"transaction":"\#(second)"}"#, now: t0)
        #expect(completions(replyToSecond).map(\.0) == [2])
        let replyToFirst = core.received(
            #"{"janus":"success","transaction":"\#(first)","data":{"id":42}}"#,
            now: t0
        )
        let completion = try #require(completions(replyToFirst).first)
        #expect(completion.0 == 1)
        #expect(try completion.1.get().createdID == 42)
        #expect(core.outstandingRequests == 0)

        // A second reply to a completed transaction completes nothing.
        #expect(completions(core.received(#"{"janus":"ack","transaction":"\#(first)"}"#, now: t0)).isEmpty)
    }

    @Test func requestsCarryTheCredentialsAndSessionIDs() throws {
        var core = openCore()
        let out = sent(
            core.request(.attach(session: 9, plugin: "janus.plugin.videoroom"), timeout: nil, waiter: 1, now: t0)
        )
        let message = try #require(out.first)
        #expect(message["janus"]?.stringValue == "attach")
        #expect(message["session_id"]?.uint64Value == 9)
        #expect(message["apisecret"]?.stringValue == "secret")
        #expect(message["transaction"]?.stringValue?.hasPrefix("t-") == true)
    }

    @Test func pluginMessageWaitsPastTheAckForItsEvent() throws {
        var core = openCore()
        let message = JanusRequest.message(session: 1, handle: 2, body: VideoRoom.leave())
        let transaction = try send(message, waiter: 5, on: &core, at: t0)

        let ack = core.received(#"{"janus":"ack","session_id":1,"transaction":"\#(transaction)"}"#, now: t0)
        #expect(completions(ack).isEmpty)
        #expect(core.outstandingRequests == 1)

        let event = core.received(
            #"{"janus":"event","session_id":1,"sender":2,"transaction":"\#(transaction)","#
                + #""plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","leaving":"ok"}}}"#,
            now: t0
        )
        let completion = try #require(completions(event).first)
        #expect(completion.0 == 5)
        #expect(try completion.1.get().kind == .event)
        // The event answered a request, so it is not also delivered to the handle.
        #expect(!event.contains { if case .deliver = $0 { true } else { false } })
    }

    @Test func keepaliveAndTrickleCompleteOnTheirAck() throws {
        var core = openCore()
        let transaction = try send(
            .trickle(session: 1, handle: 2, candidate: .completed),
            waiter: 3,
            on: &core,
            at: t0
        )
        let ack = core.received(#"{"janus":"ack","session_id":1,"transaction":"\#(transaction)"}"#, now: t0)
        #expect(completions(ack).map(\.0) == [3])
    }

    @Test func errorRepliesBecomeTypedJanusErrors() throws {
        var core = openCore()
        let transaction = try send(.attach(session: 1, plugin: "janus.plugin.nope"), waiter: 1, on: &core, at: t0)
        let actions = core.received(
            #"{"janus":"error","transaction":"\#(transaction)","error":{"code":460,"reason":"No such plugin"}}"#,
            now: t0
        )
        let completion = try #require(completions(actions).first)
        guard case .failure(let error) = completion.1 else {
            Issue.record("an error reply succeeded")
            return
        }
        #expect(error.code == .janus)
        #expect(error.janusError?.code == JanusError.pluginNotFound)
        #expect(error.description.contains("attach"))
    }

    // MARK: Timeouts

    @Test func requestsTimeOutAtTheirDeadlineAndNotBefore() throws {
        var core = openCore()
        _ = try send(.create(), waiter: 1, on: &core, at: t0)
        _ = core.request(.create(), timeout: .seconds(2), waiter: 2, now: t0)
        #expect(core.nextDeadline == t0 + .seconds(2))

        #expect(completions(core.tick(now: t0 + .milliseconds(1999))).isEmpty)
        let early = completions(core.tick(now: t0 + .seconds(2)))
        #expect(early.map(\.0) == [2])
        #expect(early.map { errorCode($0.1) } == [.timeout])
        #expect(core.nextDeadline == t0 + .seconds(10))

        let late = completions(core.tick(now: t0 + .seconds(10)))
        #expect(late.map(\.0) == [1])
        if case .failure(let error) = late.first?.1 {
            #expect(error.description.contains("create"))
        }
        #expect(core.outstandingRequests == 0)
    }

    @Test func aReplyAfterTheTimeoutIsIgnored() throws {
        var core = openCore()
        let transaction = try send(.create(), waiter: 1, on: &core, at: t0)
        #expect(completions(core.tick(now: t0 + .seconds(11))).count == 1)
        let late = core.received(#"{"janus":"success","transaction":"\#(transaction)","data":{"id":1}}"#, now: t0)
        #expect(completions(late).isEmpty)
    }

    // MARK: Malformed messages

    @Test func aMalformedMessageIsOneTypedErrorAndLosesNothing() throws {
        var core = openCore()
        let transaction = try send(.create(), waiter: 1, on: &core, at: t0)

        for text in ["this is not JSON", #"{"janus":"success","transaction":"\#(transaction)""#, #"{"no":"janus"}"#] {
            let actions = core.received(text, now: t0)
            #expect(actions.count == 1)
            guard case .malformed(let error) = actions.first else {
                Issue.record("expected one malformed action for \(text), got \(actions)")
                continue
            }
            #expect(error.code == .malformedMessage)
            #expect(error.description.contains("janus.test"))
        }
        #expect(core.malformedMessages == 3)
        #expect(core.outstandingRequests == 1)

        let reply = core.received(#"{"janus":"success","transaction":"\#(transaction)","data":{"id":4242}}"#, now: t0)
        #expect(try completions(reply).first?.1.get().createdID == 4242)
    }

    // MARK: Events

    @Test func eventsGoToTheirHandleAndEarlyOnesWaitForTheAttach() {
        var core = openCore()
        let hangup = #"{"janus":"hangup","session_id":1,"sender":77,"reason":"Close PC"}"#
        #expect(core.received(hangup, now: t0).isEmpty)  // handle 77 is not attached yet: held
        let held = core.handleAttached(77)
        #expect(held.map(\.kind) == [.hangup])

        let webrtcup = core.received(#"{"janus":"webrtcup","session_id":1,"sender":77}"#, now: t0)
        guard case .deliver(let handle, let message) = webrtcup.first else {
            Issue.record("webrtcup was not delivered: \(webrtcup)")
            return
        }
        #expect(handle == 77)
        #expect(message.kind == .webrtcup)

        core.handleDetached(77)
        #expect(core.received(hangup, now: t0).isEmpty)
    }

    // MARK: Sessions and keepalives

    @Test func keepalivesFollowTheIntervalPerSession() throws {
        var core = openCore()
        core.sessionCreated(1, now: t0)
        core.sessionCreated(2, now: t0 + .seconds(5))
        #expect(core.nextDeadline == t0 + .seconds(25))

        #expect(sent(core.tick(now: t0 + .seconds(24))).isEmpty)
        let first = sent(core.tick(now: t0 + .seconds(25)))
        #expect(first.map { $0["janus"]?.stringValue } == ["keepalive"])
        #expect(first.first?["session_id"]?.uint64Value == 1)
        #expect(core.nextDeadline == t0 + .seconds(30))

        let second = sent(core.tick(now: t0 + .seconds(30)))
        #expect(second.first?["session_id"]?.uint64Value == 2)

        // A stopped session sends no more; the other goes on.
        core.stopKeepalive(2)
        let later = sent(core.tick(now: t0 + .seconds(60)))
        #expect(later.map { $0["session_id"]?.uint64Value } == [1])
    }

    @Test func aKeepaliveAnsweredWithNoSuchSessionReportsTheSessionLost() throws {
        var core = openCore()
        core.sessionCreated(1, now: t0)
        let keepalive = try #require(sent(core.tick(now: t0 + .seconds(25))).first)
        let transaction = try #require(keepalive["transaction"]?.stringValue)
        let actions = core.received(
            #"{"janus":"error","session_id":1,"transaction":"\#(transaction)","#
                + #""error":{"code":458,"reason":"No such session 1"}}"#,
            now: t0 + .seconds(25)
        )
        guard case .sessionLost(let session, let error) = actions.first else {
            Issue.record("expected the session lost, got \(actions)")
            return
        }
        #expect(session == 1)
        #expect(error.isSessionGone)
        #expect(sent(core.tick(now: t0 + .seconds(100))).isEmpty)  // no keepalive for a lost session
    }

    @Test func janusTimingASessionOutReportsItLost() {
        var core = openCore()
        core.sessionCreated(1, now: t0)
        let actions = core.received(#"{"janus":"timeout","session_id":1}"#, now: t0 + .seconds(61))
        guard case .sessionLost(1, let error) = actions.first else {
            Issue.record("expected session 1 lost, got \(actions)")
            return
        }
        #expect(error.code == .janus)
        // Reported once: Janus's second word on it changes nothing.
        #expect(core.received(#"{"janus":"timeout","session_id":1}"#, now: t0 + .seconds(62)).isEmpty)
    }

    // MARK: Reconnect and claim

    @Test func aDropFailsOutstandingRequestsAndSchedulesAReconnect() throws {
        var core = openCore(
            reconnect: .init(initialDelay: .milliseconds(250), maximumDelay: .seconds(1), window: .seconds(3))
        )
        _ = try send(.create(), waiter: 1, on: &core, at: t0)
        let dropped = JanusClientError(.connectionClosed, "dropped")
        let actions = core.transportDown(dropped, now: t0)
        #expect(completions(actions).map { $0.0 } == [1])
        #expect(completions(actions).map { errorCode($0.1) } == [.connectionClosed])
        #expect(states(actions) == [.reconnecting(attempt: 1)])
        #expect(actions.contains { if case .reconnect(after: .milliseconds(250)) = $0 { true } else { false } })

        // Failed attempts back off, doubling up to the maximum, until the window closes.
        let refused = JanusClientError(.unreachable, "refused")
        let second = core.transportFailed(refused, now: t0 + .milliseconds(300))
        #expect(states(second) == [.reconnecting(attempt: 2)])
        #expect(second.contains { if case .reconnect(after: .milliseconds(500)) = $0 { true } else { false } })
        let third = core.transportFailed(refused, now: t0 + .seconds(1))
        #expect(third.contains { if case .reconnect(after: .seconds(1)) = $0 { true } else { false } })
        let fourth = core.transportFailed(refused, now: t0 + .seconds(2))
        #expect(fourth.contains { if case .reconnect(after: .seconds(1)) = $0 { true } else { false } })
        let last = core.transportFailed(refused, now: t0 + .seconds(3))
        guard case .closed(let error?) = states(last).first else {
            Issue.record("expected closed with an error, got \(last)")
            return
        }
        #expect(error.code == .connectionClosed)
        #expect(error.description.contains("could not reconnect"))
        #expect(core.isClosed)
    }

    @Test func withoutAReconnectPolicyADropClosesForGood() throws {
        var core = openCore()
        core.sessionCreated(1, now: t0)
        _ = try send(.create(), waiter: 1, on: &core, at: t0)
        let actions = core.transportDown(JanusClientError(.connectionClosed, "dropped"), now: t0)
        #expect(completions(actions).map { errorCode($0.1) } == [.connectionClosed])
        #expect(states(actions) == [.closed(JanusClientError(.connectionClosed, "dropped"))])
        let after = core.request(.create(), timeout: nil, waiter: 2, now: t0)
        #expect(completions(after).map { errorCode($0.1) } == [.connectionClosed])
        #expect(core.nextDeadline == nil)
    }

    @Test func aReconnectClaimsEverySessionBeforeQueuedRequestsGoOut() throws {
        var core = openCore(reconnect: .init())
        core.sessionCreated(1, now: t0)
        core.sessionCreated(2, now: t0)
        _ = core.transportDown(JanusClientError(.connectionClosed, "dropped"), now: t0)

        // A request made while reconnecting waits.
        #expect(core.request(.create(), timeout: nil, waiter: 9, now: t0).isEmpty)
        #expect(core.outstandingRequests == 1)

        let up = core.transportUp(now: t0 + .seconds(1))
        let claims = sent(up)
        #expect(claims.map { $0["janus"]?.stringValue } == ["claim", "claim"])
        #expect(claims.map { $0["session_id"]?.uint64Value } == [1, 2])
        #expect(states(up).isEmpty)  // not reconnected until the claims are answered

        let firstClaim = try #require(claims[0]["transaction"]?.stringValue)
        let secondClaim = try #require(claims[1]["transaction"]?.stringValue)
        let one = core.received(#"{"janus":"success","session_id":1,"transaction":"\#(firstClaim)"}"#, now: t0)
        guard case .sessionReclaimed(1) = one.first else {
            Issue.record("expected session 1 reclaimed, got \(one)")
            return
        }
        #expect(sent(one).isEmpty)

        let two = core.received(
            #"{"janus":"error","session_id":2,"transaction":"\#(secondClaim)","#
                + #""error":{"code":458,"reason":"No such session 2"}}"#,
            now: t0
        )
        #expect(two.contains { if case .sessionLost(2, _) = $0 { true } else { false } })
        #expect(states(two) == [.reconnected])
        #expect(sent(two).map { $0["janus"]?.stringValue } == ["create"])

        // Only the claimed session keeps its keepalive.
        let keepalives = sent(core.tick(now: t0 + .seconds(60)))
        #expect(keepalives.map { $0["session_id"]?.uint64Value } == [1])
    }

    @Test func aRequestQueuedDuringAReconnectFailsAtItsDeadline() {
        var core = openCore(reconnect: .init())
        _ = core.transportDown(JanusClientError(.connectionClosed, "dropped"), now: t0)
        _ = core.request(.create(), timeout: .seconds(2), waiter: 4, now: t0)
        #expect(core.nextDeadline == t0 + .seconds(2))
        let actions = core.tick(now: t0 + .seconds(2))
        #expect(completions(actions).map { $0.0 } == [4])
        #expect(completions(actions).map { errorCode($0.1) } == [.connectionClosed])
    }

    @Test func cancellingAQueuedRequestHandsItsWaiterBack() {
        var core = openCore(reconnect: .init())
        _ = core.transportDown(JanusClientError(.connectionClosed, "dropped"), now: t0)
        _ = core.request(.create(), timeout: nil, waiter: 1, now: t0)
        _ = core.request(.create(), timeout: nil, waiter: 2, now: t0)
        #expect(core.cancelQueued { $0 == 2 } == [2])
        #expect(core.outstandingRequests == 1)
    }

    @Test func closingFailsEverythingOnce() throws {
        var core = openCore(reconnect: .init())
        _ = try send(.create(), waiter: 1, on: &core, at: t0)
        let actions = core.close()
        #expect(completions(actions).map { $0.0 } == [1])
        #expect(states(actions) == [.closed(nil)])
        #expect(core.close().isEmpty)
        // The transport's own end after a close is no drop: nothing reconnects.
        #expect(core.transportDown(JanusClientError(.connectionClosed, "closed"), now: t0).isEmpty)
    }
}
