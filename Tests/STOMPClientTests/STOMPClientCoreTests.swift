import STOMPProtocol
import Testing

@testable import STOMPClient

/// The core driven by a scripted server: frames and times are inputs, so nothing here waits.
@Suite("STOMP client core")
struct STOMPClientCoreTests {
    typealias Core = STOMPClientCore<Int>
    let start = ContinuousClock.now

    static func configuration() -> STOMPClientConfiguration {
        STOMPClientConfiguration(
            url: "ws://127.0.0.1:1/ws",
            virtualHost: "ecall",
            credentials: STOMPCredentials(login: "device-1", passcode: "s3cret")
        )
    }

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    /// Texts the core asked to send.
    static func sent(_ actions: [Core.Action]) -> [String] {
        actions.compactMap { if case .send(let text) = $0 { text } else { nil } }
    }

    static func frames(_ actions: [Core.Action]) -> [STOMPFrame] {
        sent(actions).compactMap { text in
            var decoder = STOMPDecoder()
            return try? decoder.decode(text).frames.first
        }
    }

    static func states(_ actions: [Core.Action]) -> [STOMPConnectionState] {
        actions.compactMap { if case .state(let state) = $0 { state } else { nil } }
    }

    static func errors(_ actions: [Core.Action]) -> [STOMPError] {
        actions.compactMap { if case .report(let error) = $0 { error } else { nil } }
    }

    static func completions(_ actions: [Core.Action]) -> [Int: Result<Void, STOMPError>] {
        var out: [Int: Result<Void, STOMPError>] = [:]
        for case .complete(let waiter, let result) in actions { out[waiter] = result }
        return out
    }

    /// A core that is connected, with server heart-beats `serverBeat` ("sx,sy").
    func connectedCore(serverBeat: String = "10000,10000") -> Core {
        var core = Core(configuration: Self.configuration())
        _ = core.start(now: at(0))
        _ = core.subscribe(id: "sub-1", destination: "/exchange/ecall.signal.out/1", now: at(0))
        _ = core.transportOpened(now: at(0.1))
        _ = core.received("CONNECTED\nversion:1.2\nheart-beat:\(serverBeat)\n\n\0", now: at(0.2))
        return core
    }

    @Test func connectsAsECallDoesAndSubscribesAfterConnected() throws {
        var core = Core(configuration: Self.configuration())
        let started = core.start(now: at(0))
        #expect(Self.states(started) == [.connecting(attempt: 0)])
        #expect(started.contains { if case .openTransport = $0 { true } else { false } })
        #expect(core.subscribe(id: "sub-1", destination: "/exchange/ecall.signal.out/1", now: at(0)).isEmpty)
        let connect = try #require(Self.frames(core.transportOpened(now: at(0.1))).first)
        #expect(connect.command == .connect)
        #expect(connect["accept-version"] == "1.2")
        #expect(connect["host"] == "ecall")
        #expect(connect["login"] == "device-1")
        #expect(connect["passcode"] == "s3cret")
        #expect(connect["heart-beat"] == "10000,10000")
        #expect(!"\(core.configuration.credentials)".contains("s3cret"))

        let connected = core.received("CONNECTED\nversion:1.2\nheart-beat:5000,20000\n\n\0", now: at(0.2))
        let subscribe = try #require(Self.frames(connected).first)
        #expect(subscribe.command == .subscribe)
        #expect(subscribe["id"] == "sub-1")
        #expect(subscribe["destination"] == "/exchange/ecall.signal.out/1")
        #expect(subscribe["ack"] == "auto")
        #expect(Self.states(connected) == [.connected(STOMPHeartBeat(outgoing: .seconds(20), incoming: .seconds(10)))])
    }

    @Test func heartBeatNegotiation() {
        let ours = (send: Duration.seconds(10), receive: Duration.seconds(10))
        func agree(_ header: String?) -> STOMPHeartBeat {
            STOMPHeartBeat.negotiate(clientSend: ours.send, clientReceive: ours.receive, serverHeader: header)
        }
        #expect(agree("0,0") == STOMPHeartBeat(outgoing: nil, incoming: nil))
        #expect(agree(nil) == STOMPHeartBeat(outgoing: nil, incoming: nil))
        #expect(agree("4000,4000") == STOMPHeartBeat(outgoing: .seconds(10), incoming: .seconds(10)))
        #expect(agree("30000,0") == STOMPHeartBeat(outgoing: nil, incoming: .seconds(30)))
        #expect(agree("garbage") == STOMPHeartBeat(outgoing: nil, incoming: nil))
        #expect(
            STOMPHeartBeat.negotiate(clientSend: .zero, clientReceive: .seconds(10), serverHeader: "10000,10000")
                == STOMPHeartBeat(outgoing: nil, incoming: .seconds(10))
        )
    }

    @Test func sendsHeartBeatWhenIdleAndNotWhenBusy() {
        var core = connectedCore()
        #expect(core.nextDeadline == at(10.2))
        #expect(Self.sent(core.tick(now: at(5))).isEmpty)
        _ = core.send(STOMPFrame(.send, headers: [.init("destination", "/x")], text: "{}"), waiter: 1, now: at(6))
        #expect(Self.sent(core.tick(now: at(10.2))).isEmpty)  // something went out at 6 s
        _ = core.received("\n", now: at(15))
        #expect(Self.sent(core.tick(now: at(16))) == ["\n"])
        #expect(core.nextDeadline == at(26))
    }

    @Test func silentServerIsDetectedAndTheClientReconnectsAndResubscribes() throws {
        var core = connectedCore()
        _ = core.received("\n", now: at(8))
        #expect(Self.errors(core.tick(now: at(27.9))).isEmpty)
        let silent = core.tick(now: at(28))
        #expect(Self.errors(silent).map(\.code) == [.serverSilent])
        #expect(silent.contains { if case .closeTransport = $0 { true } else { false } })
        guard case .reconnecting(1, let delay, let reason) = Self.states(silent).first else {
            Issue.record("no reconnecting state in \(silent)")
            return
        }
        #expect(delay == .milliseconds(500))
        #expect(reason.code == .serverSilent)
        // Sent while down: queued, then flushed after the subscription is renewed.
        let queued = core.send(
            STOMPFrame(.send, headers: [.init("destination", "/q")], text: "late"),
            waiter: 7,
            now: at(28.1)
        )
        #expect(queued.isEmpty)
        let reopen = core.tick(now: at(28.5))
        #expect(Self.states(reopen) == [.connecting(attempt: 1)])
        _ = core.transportOpened(now: at(28.6))
        let back = core.received("CONNECTED\nversion:1.2\nheart-beat:10000,10000\n\n\0", now: at(28.7))
        let frames = Self.frames(back)
        #expect(frames.map(\.command) == [.subscribe, .send])
        #expect(frames.first?["destination"] == "/exchange/ecall.signal.out/1")
        #expect(frames.last?.bodyText == "late")
        #expect(try Self.completions(back)[7]?.get() != nil)
    }

    @Test func connectedMustArriveInTime() {
        var core = Core(configuration: Self.configuration())
        _ = core.start(now: at(0))
        _ = core.transportOpened(now: at(0.1))
        #expect(core.nextDeadline == at(10))
        let late = core.tick(now: at(10))
        guard case .reconnecting(1, _, let reason) = Self.states(late).first else {
            Issue.record("no reconnect in \(late)")
            return
        }
        #expect(reason.code == .connectTimeout)
    }

    @Test func backoffDoublesToTheCapAndConnectionsThatDoNotLastKeepGrowingIt() {
        let policy = STOMPReconnectPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(15))
        #expect(
            (1...7).map { policy.delay(attempt: $0) }
                == [0.5, 1, 2, 4, 8, 15, 15].map { .milliseconds(Int64($0 * 1000)) }
        )
        var core = Core(configuration: Self.configuration())
        _ = core.start(now: at(0))
        var now = 0.0
        var delays: [Duration] = []
        for _ in 0..<4 {
            // Open, CONNECTED, then dropped at once: the wait must keep growing.
            let actions = core.transportClosed(nil, now: at(now))
            guard case .reconnecting(_, let delay, _) = Self.states(actions).first else { break }
            delays.append(delay)
            now += Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            _ = core.tick(now: at(now))
            _ = core.transportOpened(now: at(now))
            _ = core.received("CONNECTED\nversion:1.2\n\n\0", now: at(now))
        }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4)])
    }

    @Test func refusedCredentialsCloseForGoodWithTheServersMessage() {
        var core = Core(configuration: Self.configuration())
        _ = core.start(now: at(0))
        _ = core.send(STOMPFrame(.send, headers: [.init("destination", "/q")], text: "x"), waiter: 3, now: at(0))
        _ = core.transportOpened(now: at(0.1))
        let refused = core.received(
            "ERROR\nmessage:Bad CONNECT\ncontent-type:text/plain\ncontent-length:35\n\nAccess refused for user 'device-1'\n\0",
            now: at(0.2)
        )
        guard case .closed(let error?) = Self.states(refused).last else {
            Issue.record("not closed: \(refused)")
            return
        }
        #expect(error.code == .connectRefused)
        #expect(error.serverMessage == "Bad CONNECT")
        #expect(error.bodyExcerpt == "Access refused for user 'device-1'")
        #expect(core.isClosed)
        #expect(core.nextDeadline == nil)  // no retry
        if case .failure(let failure)? = Self.completions(refused)[3] {
            #expect(failure.code == .connectRefused)
        } else {
            Issue.record("the queued send did not fail")
        }
    }

    @Test func refusedSubscriptionIsReportedAndDroppedNotRetried() {
        var core = connectedCore()
        _ = core.subscribe(id: "sub-2", destination: "/exchange/ecall.signal.out/2", now: at(1))
        let refused = core.received(
            "ERROR\nmessage:access_refused\n\nACCESS_REFUSED - access to topic '2' refused\0",
            now: at(1.1)
        )
        let error = Self.errors(refused).first
        #expect(error?.code == .subscriptionRefused)
        #expect(error?.serverMessage == "access_refused")
        #expect(error?.message.contains("/exchange/ecall.signal.out/2") == true)
        #expect(core.subscriptionIDs == ["sub-1"])
    }

    @Test func aCloseRightAfterTheSameSubscribeTwiceMeansRefused() {
        var core = connectedCore()
        _ = core.subscribe(id: "sub-2", destination: "/exchange/ecall.signal.out/2", now: at(5))
        let first = core.transportClosed(nil, now: at(5.01))
        #expect(Self.errors(first).isEmpty)
        #expect(core.subscriptionIDs == ["sub-1", "sub-2"])
        _ = core.tick(now: at(6))
        _ = core.transportOpened(now: at(6))
        let again = core.received("CONNECTED\nversion:1.2\n\n\0", now: at(6))
        #expect(Self.frames(again).compactMap { $0["id"] } == ["sub-1", "sub-2"])
        let second = core.transportClosed(nil, now: at(6.01))
        #expect(Self.errors(second).map(\.code) == [.subscriptionRefused])
        #expect(core.subscriptionIDs == ["sub-1"])
        // A close long after a SUBSCRIBE is an ordinary drop.
        _ = core.tick(now: at(8))
        _ = core.transportOpened(now: at(8))
        _ = core.received("CONNECTED\nversion:1.2\n\n\0", now: at(8))
        #expect(Self.errors(core.transportClosed(nil, now: at(20))).isEmpty)
        #expect(core.subscriptionIDs == ["sub-1"])
    }

    @Test func serverErrorAfterConnectedIsTypedAndReconnects() {
        var core = connectedCore()
        let actions = core.received("ERROR\nmessage:boom\n\nsomething broke\0", now: at(3))
        #expect(Self.errors(actions).map(\.code) == [.server])
        #expect(Self.errors(actions).first?.bodyExcerpt == "something broke")
        #expect(core.subscriptionIDs == ["sub-1"])
        guard case .reconnecting = Self.states(actions).first else {
            Issue.record("no reconnect")
            return
        }
    }

    @Test func messagesAreDeliveredWithTheirSubscriptionAndMalformedOnesReportedOnce() {
        var core = connectedCore()
        let actions = core.received(
            "MESSAGE\nsubscription:sub-1\ndestination:/exchange/ecall.signal.in/1\nmessage-id:m1\ncontent-length:10\n\n{\"a\":\"é\"}\0\n",
            now: at(1)
        )
        let delivered = actions.compactMap { if case .deliver(let message) = $0 { message } else { nil } }
        #expect(delivered.map(\.subscription) == ["sub-1"])
        #expect(delivered.first?.text == "{\"a\":\"é\"}")
        let bad = core.received("MESSAGE\nno colon here\n\n\0", now: at(2))
        #expect(Self.errors(bad).map(\.code) == [.malformedFrame])
        #expect(core.malformedFrames == 1)
        // Still connected: the next frame is read.
        let next = core.received("MESSAGE\nsubscription:sub-1\n\nok\0", now: at(3))
        #expect(next.contains { if case .deliver = $0 { true } else { false } })
    }

    @Test func queueIsBoundedAndTimesOut() {
        var configuration = Self.configuration()
        configuration.sendQueueLimit = 2
        configuration.sendQueueTimeout = .seconds(5)
        var core = Core(configuration: configuration)
        _ = core.start(now: at(0))
        let frame = STOMPFrame(.send, headers: [.init("destination", "/q")], text: "x")
        #expect(core.send(frame, waiter: 1, now: at(0)).isEmpty)
        #expect(core.send(frame, waiter: 2, now: at(1)).isEmpty)
        if case .failure(let error)? = Self.completions(core.send(frame, waiter: 3, now: at(1)))[3] {
            #expect(error.code == .sendQueueFull)
        } else {
            Issue.record("third send not refused")
        }
        let expired = Self.completions(core.tick(now: at(5)))
        #expect(expired.keys.sorted() == [1])
        if case .failure(let error)? = expired[1] { #expect(error.code == .sendTimeout) }
        let closed = Self.completions(core.close())
        #expect(closed.keys.sorted() == [2])
    }

    @Test func closeSendsDisconnect() {
        var core = connectedCore()
        let actions = core.close()
        #expect(Self.frames(actions).map(\.command) == [.disconnect])
        #expect(Self.states(actions) == [.closed(nil)])
        #expect(core.close().isEmpty)
    }

    @Test func subscribeCarriesExtraHeadersButNotOverridesOfItsOwn() throws {
        var core = connectedCore()
        let actions = core.subscribe(
            id: "jobs",
            destination: "/amq/queue/recorder.jobs",
            ack: "client-individual",
            headers: [.init("prefetch-count", "3"), .init("ack", "auto"), .init("id", "other")],
            now: at(1)
        )
        let frame = try #require(Self.frames(actions).first)
        #expect(frame.command == .subscribe)
        #expect(frame.headers.map(\.name) == ["id", "destination", "ack", "prefetch-count"])
        #expect(frame["ack"] == "client-individual")
        #expect(frame["prefetch-count"] == "3")
        // Renewed with the same headers after a reconnect.
        _ = core.transportClosed(nil, now: at(10))
        _ = core.tick(now: at(20))
        _ = core.transportOpened(now: at(20.1))
        let renewed = Self.frames(core.received("CONNECTED\nversion:1.2\n\n\0", now: at(20.2)))
        let jobs = try #require(renewed.first { $0["id"] == "jobs" })
        #expect(jobs["prefetch-count"] == "3")
        #expect(jobs["ack"] == "client-individual")
    }

    static func delivered(_ actions: [Core.Action]) -> [STOMPMessage] {
        actions.compactMap { if case .deliver(let message) = $0 { message } else { nil } }
    }

    @Test func ackAndNackNameTheMessageByItsAckHeaderAndReportRedelivery() throws {
        var core = connectedCore()
        let messages = Self.delivered(
            core.received(
                "MESSAGE\nsubscription:jobs\nmessage-id:T_jobs@@s@@7\nack:T_jobs@@s@@7\nredelivered:true\n\n{}\0"
                    + "MESSAGE\nsubscription:jobs\nmessage-id:m-8\nredelivered:false\n\n{}\0",
                now: at(1)
            )
        )
        #expect(messages.count == 2)
        #expect(messages.map(\.redelivered) == [true, false])
        #expect(messages.map(\.ackID) == ["T_jobs@@s@@7", "m-8"])
        let acked = core.acknowledge(messages[0], .ack, waiter: 1, now: at(2))
        let ack = try #require(Self.frames(acked).first)
        #expect(ack.command == .ack)
        #expect(ack.headers == [.init("id", "T_jobs@@s@@7")])
        if case .success? = Self.completions(acked)[1] {} else { Issue.record("ACK not completed") }
        let nacked = Self.frames(core.acknowledge(messages[1], .nack(requeue: true), waiter: 2, now: at(3)))
        #expect(nacked.first?.command == .nack)
        #expect(nacked.first?.headers == [.init("id", "m-8"), .init("requeue", "true")])
        let dropped = Self.frames(core.acknowledge(messages[1], .nack(requeue: false), waiter: 3, now: at(3)))
        #expect(dropped.first?["requeue"] == "false")
    }

    @Test func aMessageOfAnEarlierConnectionIsNotAcknowledged() throws {
        var core = connectedCore()
        let message = try #require(
            Self.delivered(core.received("MESSAGE\nsubscription:sub-1\nack:a-1\n\nx\0", now: at(1))).first
        )
        #expect(message.connection == 1)
        _ = core.transportClosed(nil, now: at(2))
        // While disconnected: refused at once, not queued.
        let waiting = core.acknowledge(message, .ack, waiter: 1, now: at(2))
        #expect(Self.sent(waiting).isEmpty)
        if case .failure(let error)? = Self.completions(waiting)[1] {
            #expect(error.code == .notAcknowledgeable)
        } else {
            Issue.record("ACK while disconnected not refused")
        }
        _ = core.tick(now: at(10))
        _ = core.transportOpened(now: at(10.1))
        _ = core.received("CONNECTED\nversion:1.2\n\n\0", now: at(10.2))
        #expect(core.connections == 2)
        // Reconnected: the old delivery is the broker's again.
        let stale = core.acknowledge(message, .nack(requeue: true), waiter: 2, now: at(11))
        #expect(Self.sent(stale).isEmpty)
        if case .failure(let error)? = Self.completions(stale)[2] {
            #expect(error.code == .notAcknowledgeable)
            #expect(error.message.contains("a-1"))
        } else {
            Issue.record("ACK of an earlier connection's message not refused")
        }
        // A message without any id cannot be acknowledged either.
        let anonymous = try #require(
            Self.delivered(core.received("MESSAGE\nsubscription:sub-1\n\nx\0", now: at(12))).first
        )
        if case .failure(let error)? = Self.completions(core.acknowledge(anonymous, .ack, waiter: 3, now: at(12)))[3] {
            #expect(error.code == .notAcknowledgeable)
        } else {
            Issue.record("ACK without an id not refused")
        }
    }
}
