import ConclaveTestSupport
import JanusClient
import JanusProtocol
import JanusTesting
import Testing

/// JanusConnection's error paths against the in-memory Janus: every failure mode gives its
/// documented typed error, a reconnect claims the session, timeouts fire. No process, no socket.
@Suite struct JanusConnectionInMemoryTests {
    static let url = "ws://in-memory.janus:8188"

    func connect(_ janus: InMemoryJanus, options: JanusConnection.Options? = nil) async throws -> JanusConnection {
        try await JanusConnection.connect(to: Self.url, options: options ?? janus.options())
    }

    /// The first element of `stream` that `match` accepts, or nil when none comes within 10 s (a
    /// bound that only a broken client reaches, not a timing assertion).
    func first<S: AsyncSequence & Sendable, T: Sendable>(
        _ stream: S,
        _ match: @escaping @Sendable (S.Element) -> T?
    ) async -> T? where S.Element: Sendable {
        await withDeadline(.seconds(10)) {
            do {
                for try await element in stream {
                    if let value = match(element) { return value }
                }
            } catch {}
            return nil
        }
    }

    @Test func aRefusedConnectionIsUnreachable() async throws {
        let janus = InMemoryJanus()
        janus.inject(.refuseConnections)
        let error = await #expect(throws: JanusClientError.self) { _ = try await connect(janus) }
        #expect(error?.code == .unreachable)
        // The refusal was one attempt's: the next connects.
        let connection = try await connect(janus)
        await connection.close()
    }

    @Test func aDropMidRequestFailsItWithConnectionClosed() async throws {
        let janus = InMemoryJanus()
        janus.inject(.dropConnection(on: .request(.create)))
        let connection = try await connect(janus)
        let error = await #expect(throws: JanusClientError.self) { _ = try await connection.createSession() }
        #expect(error?.code == .connectionClosed)
        let closed = await first(connection.states) { state -> JanusClientError?? in
            if case .closed(let error) = state { return .some(error) }
            return nil
        }
        #expect(closed??.code == .connectionClosed)
        // Closed for good (no reconnect policy): later requests fail at once.
        let later = await #expect(throws: JanusClientError.self) { _ = try await connection.createSession() }
        #expect(later?.code == .connectionClosed)
    }

    @Test func anErrorReplyIsATypedJanusError() async throws {
        let janus = InMemoryJanus()
        let connection = try await connect(janus)
        let session = try await connection.createSession()
        janus.inject(.error(on: .request(.attach), code: JanusError.pluginNotFound, reason: "No such plugin"))
        let error = await #expect(throws: JanusClientError.self) { _ = try await session.attach(plugin: "nope") }
        #expect(error?.code == .janus)
        #expect(error?.janusError?.code == JanusError.pluginNotFound)

        // A plugin's error code arrives inside its reply and becomes the same kind of error.
        let room = try await VideoRoomHandle.attach(to: session)
        janus.inject(.error(on: .videoRoom("join"), code: JanusError.videoRoomUnauthorized, reason: "Unauthorized"))
        let refused = await #expect(throws: JanusClientError.self) {
            _ = try await room.joinAsPublisher(room: 1, display: "1:A")
        }
        #expect(refused?.janusError?.code == JanusError.videoRoomUnauthorized)
        await connection.close()
    }

    @Test func aWrongAPISecretIsUnauthorized() async throws {
        let janus = InMemoryJanus(apiSecret: "right")
        let wrong = try await connect(janus, options: janus.options(apiSecret: "wrong"))
        let error = await #expect(throws: JanusClientError.self) { _ = try await wrong.createSession() }
        #expect(error?.janusError?.code == JanusError.unauthorized)
        await wrong.close()
        let right = try await connect(janus, options: janus.options(apiSecret: "right"))
        _ = try await right.createSession()
        await right.close()
    }

    @Test func malformedJSONIsCountedAndTheReplyStillArrives() async throws {
        let janus = InMemoryJanus()
        janus.inject(.malformed(on: .request(.create)), times: 2)
        let connection = try await connect(janus)
        _ = try await connection.createSession()
        _ = try await connection.createSession()
        #expect(connection.malformedMessages == 2)
        await connection.close()
    }

    @Test func aRequestJanusNeverAnswersTimesOut() async throws {
        let janus = InMemoryJanus()
        let connection = try await connect(janus, options: janus.options(requestTimeout: .milliseconds(200)))
        let session = try await connection.createSession()
        janus.inject(.silence(on: .request(.keepalive)))
        let error = await #expect(throws: JanusClientError.self) { try await session.sendKeepalive() }
        #expect(error?.code == .timeout)
        #expect(error?.description.contains("keepalive") == true)
        // The connection is fine afterwards.
        try await session.sendKeepalive()
        await connection.close()
    }

    @Test func aReconnectClaimsTheSessionAndItsHandleLivesOn() async throws {
        let janus = InMemoryJanus(rooms: [7])
        let options = janus.options(reconnect: .init(initialDelay: .milliseconds(1), window: .seconds(10)))
        let connection = try await connect(janus, options: options)
        let session = try await connection.createSession()
        let room = try await VideoRoomHandle.attach(to: session)

        janus.dropConnections()
        let event = await first(session.events) { $0 }
        #expect(event == .reclaimed)
        #expect(janus.requests.contains("claim"))
        // The claimed session's handle still works on the new connection.
        #expect(try await room.roomExists(7))
        await connection.close()
    }

    @Test func aSessionJanusForgotIsReportedLostAfterTheReconnect() async throws {
        let janus = InMemoryJanus()
        let options = janus.options(reconnect: .init(initialDelay: .milliseconds(1), window: .seconds(10)))
        let connection = try await connect(janus, options: options)
        let session = try await connection.createSession()

        janus.forgetSessions()  // as a restarted Janus would
        janus.dropConnections()
        let lost = await first(session.events) { event -> JanusClientError? in
            if case .lost(let error) = event { return error }
            return nil
        }
        #expect(lost?.isSessionGone == true)
        await connection.close()
    }

    @Test func reconnectingGivesUpWhenJanusStaysAway() async throws {
        let janus = InMemoryJanus()
        let options = janus.options(
            reconnect: .init(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(5), window: .milliseconds(50))
        )
        let connection = try await connect(janus, options: options)
        let session = try await connection.createSession()
        janus.inject(.refuseConnections, times: nil)
        janus.dropConnections()
        let closed = await first(connection.states) { state -> JanusClientError?? in
            if case .closed(let error) = state { return .some(error) }
            return nil
        }
        #expect(closed??.code == .connectionClosed)
        #expect(closed??.description.contains("could not reconnect") == true)
        let lost = await first(session.events) { event -> JanusClientError? in
            if case .lost(let error) = event { return error }
            return nil
        }
        #expect(lost?.code == .connectionClosed)
    }

    @Test func cancellingARequestThatWaitsForAReconnectEndsItsWait() async throws {
        let janus = InMemoryJanus()
        let options = janus.options(
            reconnect: .init(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(5), window: .seconds(30))
        )
        let connection = try await connect(janus, options: options)
        let session = try await connection.createSession()
        janus.inject(.refuseConnections, times: nil)
        janus.dropConnections()
        let reconnecting = await first(connection.states) { state -> Bool? in
            if case .reconnecting = state { return true }
            return nil
        }
        #expect(reconnecting == true)
        let waiting = Task { try await session.sendKeepalive() }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await connection.close()
    }

    @Test func anExpiredSessionIsReportedLost() async throws {
        let janus = InMemoryJanus()
        let connection = try await connect(janus)
        let session = try await connection.createSession()
        janus.expire(session: session.id)
        let lost = await first(session.events) { event -> JanusClientError? in
            if case .lost(let error) = event { return error }
            return nil
        }
        #expect(lost?.code == .janus)
        // Janus's answer to the session now is 458, typed.
        let error = await #expect(throws: JanusClientError.self) { try await session.sendKeepalive() }
        #expect(error?.isSessionGone == true)
        await connection.close()
    }

    @Test func videoRoomRequestsAndAHangupEventReachTheHandle() async throws {
        let janus = InMemoryJanus(rooms: [5])
        let connection = try await connect(janus)
        let session = try await connection.createSession()
        let room = try await VideoRoomHandle.attach(to: session)
        let joined = try await room.joinAsPublisher(room: 5, display: "1001:Alice")
        #expect(joined.room == 5)
        let missing = await #expect(throws: JanusClientError.self) {
            _ = try await room.joinAsPublisher(room: 6, display: "1001:Alice")
        }
        #expect(missing?.janusError?.code == JanusError.videoRoomNoSuchRoom)

        let subscriber = try await VideoRoomHandle.attach(to: session)
        let reply = try await subscriber.handle.message(
            VideoRoom.joinSubscriber(room: 5, streams: [.init(feed: joined.id)])
        )
        #expect(reply.kind == .event)
        #expect(reply.pluginData?["videoroom"]?.stringValue == "attached")
        let updated = try await subscriber.handle.message(VideoRoom.subscribe([.init(feed: joined.id)]))
        #expect(updated.pluginData?["videoroom"]?.stringValue == "updated")

        janus.hangUp(handle: room.handle.id, reason: "ICE failed")
        let reason = await first(room.events) { event -> String? in
            if case .hangup(let reason) = event { return reason }
            return nil
        }
        #expect(reason == "ICE failed")
        try await session.destroy()
        await connection.close()
    }
}
