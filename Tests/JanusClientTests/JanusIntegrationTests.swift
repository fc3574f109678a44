import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Testing

/// Against a real Janus in its own network namespace (see `TestJanus`).
@Suite(.serialized) struct JanusIntegrationTests {
    /// Connects a new client with a session and a VideoRoom handle.
    func client(_ bed: JanusTestBed, options: JanusConnection.Options = .init()) async throws
        -> (JanusConnection, JanusSession, VideoRoomHandle)
    {
        let connection = try await JanusConnection.connect(to: bed.webSocketURL, options: options)
        let session = try await connection.createSession()
        return (connection, session, try await VideoRoomHandle.attach(to: session))
    }

    /// Waits for the first VideoRoom event on `handle` that `match` accepts.
    func nextEvent<T: Sendable>(
        on handle: VideoRoomHandle,
        within limit: Duration = .seconds(5),
        _ match: @escaping @Sendable (VideoRoom.Event) -> T?
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                for await event in handle.events {
                    guard case .plugin(let data, _) = event else { continue }
                    for roomEvent in (try? VideoRoom.events(from: data)) ?? [] {
                        if let value = match(roomEvent) { return value }
                    }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: limit)  // the deadline, not a wait for the event
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return try #require(first, "no matching VideoRoom event within \(limit)")
        }
    }

    @Test func publishersSeeEachOtherJoinAndLeave() async throws {
        let bed = try TestJanus.shared()
        let (aliceConnection, aliceSession, alice) = try await client(bed)
        let (bobConnection, bobSession, bob) = try await client(bed)
        let room = try await alice.createRoom(.init(room: TestJanus.uniqueRoomID(), publishers: 4))

        let aliceJoined = try await alice.joinAsPublisher(room: room, display: "1001:Alice")
        #expect(aliceJoined.room == room)
        #expect(aliceJoined.publishers.isEmpty)

        // A participant who joins but does not publish shows up in listparticipants, and leaving
        // is announced to the others.
        let bobJoined = try await bob.joinAsPublisher(room: room, display: "1002:Bob")
        #expect(bobJoined.id != aliceJoined.id)

        let participants = try await alice.listParticipants(room: room)
        #expect(Set(participants.map(\.id)) == [aliceJoined.id, bobJoined.id])
        let bobEntry = try #require(participants.first { $0.id == bobJoined.id })
        #expect(ParticipantDisplay(parsing: bobEntry.display ?? "") == ParticipantDisplay(userID: "1002", name: "Bob"))
        #expect(bobEntry.isPublisher == false)

        async let aliceSeesBobLeave = nextEvent(on: alice) { event -> UInt64? in
            if case .leaving(let id?) = event { return id }
            return nil
        }
        // No pause needed before Bob leaves: the handle's event stream buffers what arrives
        // before `nextEvent` starts reading it.
        try await bob.leave()
        #expect(try await aliceSeesBobLeave == bobJoined.id)
        #expect(try await alice.listParticipants(room: room).map(\.id) == [aliceJoined.id])

        try await alice.destroyRoom(room)
        try await aliceSession.destroy()
        try await bobSession.destroy()
        await aliceConnection.close()
        await bobConnection.close()
    }

    @Test func unknownRoomIsATypedError() async throws {
        let bed = try TestJanus.shared()
        let (connection, session, handle) = try await client(bed)
        let error = await #expect(throws: JanusClientError.self) {
            _ = try await handle.joinAsPublisher(room: 424_242_424, display: "nobody")
        }
        #expect(error?.code == .janus)
        #expect(error?.janusError?.code == JanusError.videoRoomNoSuchRoom)
        #expect(try await handle.roomExists(424_242_424) == false)
        try await session.destroy()
        await connection.close()
    }

    @Test func destroyedSessionIsATypedError() async throws {
        let bed = try TestJanus.shared()
        let (connection, session, _) = try await client(bed)
        try await session.destroy()
        let error = await #expect(throws: JanusClientError.self) { try await session.sendKeepalive() }
        #expect(error?.isSessionGone == true)
        await connection.close()
    }

    @Test func manyConcurrentRequestsOnOneConnectionAllComplete() async throws {
        let bed = try TestJanus.shared()
        let (connection, session, handle) = try await client(bed)
        let room = try await handle.createRoom(.init(room: TestJanus.uniqueRoomID()))
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    if index.isMultiple(of: 2) {
                        return try await handle.roomExists(room)
                    } else {
                        return try await handle.listParticipants(room: room).isEmpty
                    }
                }
            }
            var results: [Bool] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0 })
        try await handle.destroyRoom(room)
        try await session.destroy()
        await connection.close()
    }

    /// Requests keep coming from several tasks while the connection closes: every one is answered
    /// or fails with `.connectionClosed`, and closing returns (the socket's wake-ups race the
    /// end of its service thread here).
    @Test func closingWhileRequestsPourInEndsEveryOneCleanly() async throws {
        let bed = try TestJanus.shared()
        for _ in 0..<10 {
            let (connection, _, handle) = try await client(bed)
            let answered = try await withThrowingTaskGroup(of: Int.self) { group in
                for sender in 0..<8 {
                    group.addTask {
                        var answered = 0
                        while true {
                            do {
                                _ = try await handle.roomExists(1)
                                answered += 1
                            } catch let error as JanusClientError where error.code == .connectionClosed {
                                return answered
                            }
                            if sender == 0, answered == 50 { await connection.close() }
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(answered >= 50)
        }
    }

    @Test func droppedWebSocketIsReconnectedAndTheSessionClaimed() async throws {
        let bed = try TestJanus.shared()
        let (connection, session, alice) = try await client(bed)
        let room = try await alice.createRoom(.init(room: TestJanus.uniqueRoomID()))
        let aliceJoined = try await alice.joinAsPublisher(room: room, display: "1:Alice")

        await connection.dropConnectionForTesting()

        // The session is claimed on a new socket: the same session and handle work again...
        var reclaimed = false
        for await event in session.events {
            if event == .reclaimed {
                reclaimed = true
                break
            }
            Issue.record("unexpected session event \(event)")
            break
        }
        #expect(reclaimed)
        #expect(try await alice.listParticipants(room: room).map(\.id) == [aliceJoined.id])

        // ...and events for the handle still arrive: another participant's departure.
        let (bobConnection, bobSession, bob) = try await client(bed)
        let bobJoined = try await bob.joinAsPublisher(room: room, display: "2:Bob")
        async let aliceSeesBobLeave = nextEvent(on: alice) { event -> UInt64? in
            if case .leaving(let id?) = event { return id }
            return nil
        }
        // No pause needed before Bob leaves: the handle's event stream buffers what arrives
        // before `nextEvent` starts reading it.
        try await bob.leave()
        #expect(try await aliceSeesBobLeave == bobJoined.id)

        try await alice.destroyRoom(room)
        try await bobSession.destroy()
        try await session.destroy()
        await bobConnection.close()
        await connection.close()
    }

    @Test func aRequestMadeWhileReconnectingGoesOutOnceTheSessionIsClaimed() async throws {
        let bed = try TestJanus.shared()
        // A long request timeout: a request whose wait missed the end of the reconnect would go
        // out only when the timeout ends it.
        let (connection, session, alice) = try await client(bed, options: .init(requestTimeout: .seconds(30)))
        let room = try await alice.createRoom(.init(room: TestJanus.uniqueRoomID()))
        var states = connection.states.makeAsyncIterator()

        await connection.dropConnectionForTesting()
        var reconnecting = false
        while let state = await states.next() {
            if case .reconnecting = state {
                reconnecting = true
                break
            }
        }
        try #require(reconnecting)

        // Made during the reconnect (the first attempt waits 250 ms), sent once it is over.
        let started = ContinuousClock.now
        #expect(try await alice.roomExists(room))
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(10), "the request waited \(elapsed) for a reconnect that took well under that")
        var reconnected = false
        while let state = await states.next() {
            if state == .reconnected {
                reconnected = true
                break
            }
        }
        #expect(reconnected)

        try await alice.destroyRoom(room)
        try await session.destroy()
        await connection.close()
    }

    @Test func keepalivesKeepAnIdleSessionAliveBeyondJanussTimeout() async throws {
        // A Janus of our own that expires a session after 2 s without traffic.
        let bed = try TestJanus.start(.init(sessionTimeout: 2, reclaimTimeout: 2))
        defer { bed.stop() }
        let connection = try await JanusConnection.connect(
            to: bed.webSocketURL,
            options: .init(keepaliveInterval: .milliseconds(500))
        )
        let session = try await connection.createSession()
        // The scenario itself: the session stays idle (no request but the keepalives the connection
        // sends by itself) for more than twice Janus's timeout.
        try await Task.sleep(for: .seconds(5))
        // Janus still knows the session: a request on it succeeds instead of failing with 458.
        try await session.sendKeepalive()
        let handle = try await session.attach(plugin: "janus.plugin.videoroom")
        try await handle.detach()
        try await session.destroy()
        await connection.close()
    }

    @Test func expiredSessionIsReportedAsLost() async throws {
        // A Janus of our own with a short session timeout.
        let bed = try TestJanus.start(.init(sessionTimeout: 2, reclaimTimeout: 2))
        defer { bed.stop() }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let session = try await connection.createSession()
        session.stopKeepalive()

        var lost: JanusClientError?
        let deadline = ContinuousClock.now + .seconds(15)
        for await event in session.events {
            if case .lost(let error) = event { lost = error }
            break
        }
        #expect(ContinuousClock.now < deadline)
        #expect(lost != nil, "Janus's timeout event should mark the session lost")
        let error = await #expect(throws: JanusClientError.self) { try await session.sendKeepalive() }
        #expect(error?.isSessionGone == true)
        await connection.close()
    }

    @Test func wrongAPISecretIsRejectedClearly() async throws {
        let bed = try TestJanus.start(.init(apiSecret: "correct-secret"))
        defer { bed.stop() }
        let wrong = try await JanusConnection.connect(to: bed.webSocketURL, options: .init(apiSecret: "wrong"))
        let error = await #expect(throws: JanusClientError.self) { _ = try await wrong.createSession() }
        #expect(error?.janusError?.code == JanusError.unauthorized)
        #expect(error?.description.contains("unauthorized") == true)
        await wrong.close()

        let right = try await JanusConnection.connect(to: bed.webSocketURL, options: .init(apiSecret: "correct-secret"))
        let session = try await right.createSession()
        try await session.destroy()
        await right.close()
    }

    @Test func janusRestartLosesTheSession() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let connection = try await JanusConnection.connect(
            to: bed.webSocketURL,
            options: .init(reconnect: .init(initialDelay: .milliseconds(100), window: .seconds(10)))
        )
        let session = try await connection.createSession()
        try bed.restartJanus()
        var lost: JanusClientError?
        for await event in session.events {
            if case .lost(let error) = event { lost = error }
            break
        }
        #expect(lost?.isSessionGone == true, "claiming after a Janus restart must report the session as gone")
        // The connection itself is back: a new session works.
        let fresh = try await connection.createSession()
        try await fresh.destroy()
        await connection.close()
    }
}
