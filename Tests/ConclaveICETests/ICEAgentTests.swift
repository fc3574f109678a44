import ConclaveTestSupport
import Synchronization
import Testing

@testable import ConclaveICE

/// Serialized: each test runs its own agents; keeps the loopback traffic of one test at a time.
@Suite("ICE agent over loopback", .serialized)
struct ICEAgentTests {
    @Test("two agents connect with trickled host candidates on 127.0.0.1 only")
    func connectsOverLoopback() async throws {
        let pair = try await ConnectedPair.connect()
        try await withDeadline("end-of-candidates from both agents") {
            while true {
                let a = await pair.controllingObserver.sawEndOfCandidates
                let b = await pair.controlledObserver.sawEndOfCandidates
                if a && b { return }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let candidatesA = await pair.controllingObserver.candidates
        let candidatesB = await pair.controlledObserver.candidates
        for line in candidatesA + candidatesB {
            #expect(line.hasPrefix("candidate:"), "no a= prefix: \(line)")
            #expect(line.contains(" 127.0.0.1 "), "only the configured address: \(line)")
            #expect(line.contains(" typ host"), "no STUN/TURN configured: \(line)")
            #expect(!line.lowercased().contains(" tcp "), "ICE-TCP is off by default: \(line)")
        }
        #expect(!candidatesA.isEmpty && !candidatesB.isEmpty)
        #expect(try await pair.controlling.currentLocalCandidates().sorted() == candidatesA.sorted())
        await pair.close()
    }

    @Test("datagrams cross both ways byte-identical, through the stream and through the handler")
    func exchangesDatagrams() async throws {
        let received = Mutex<[[UInt8]]>([])
        let pair = try await ConnectedPair.connect(controlledHandler: { bytes in
            received.withLock { $0.append(Array(bytes)) }
        })
        var generator = SeededGenerator(seed: 7)
        let toControlled = (0..<20).map { index in randomBytes(1 + index * 60, using: &generator) }
        let toControlling = (0..<20).map { index in randomBytes(1200 - index * 50, using: &generator) }

        // The pair may be connected a moment before the controlled side has a selected pair.
        try await withDeadline("first datagram through") {
            while received.withLock({ $0.isEmpty }) {
                pair.controlling.send([0x80, 0x00])
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        received.withLock { $0.removeAll() }
        for datagram in toControlled { #expect(pair.controlling.send(datagram)) }
        for datagram in toControlling { #expect(pair.controlled.send(datagram)) }

        let fromControlled = try await withDeadline("datagrams at the controlling agent") {
            var collected: [[UInt8]] = []
            for await datagram in pair.controlling.receivedDatagrams {
                collected.append(datagram)
                if collected.count == toControlling.count { break }
            }
            return collected
        }
        try await withDeadline("datagrams at the controlled agent") {
            while received.withLock({ $0.count < toControlled.count }) { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(fromControlled == toControlling)
        #expect(received.withLock { $0 } == toControlled)
        await pair.close()
    }

    @Test("an ICE restart on both sides gives new credentials and reconnects")
    func restartReconnects() async throws {
        let pair = try await ConnectedPair.connect()
        let (a, b) = (pair.controlling, pair.controlled)
        let oldCredentials = try await a.localCredentials()
        let statesBefore = (await pair.controllingObserver.states.count, await pair.controlledObserver.states.count)

        let newA = try await a.restart()
        let newB = try await b.restart()
        #expect(newA != oldCredentials)
        #expect(newA.ufrag != oldCredentials.ufrag)
        try await a.setRemoteCredentials(newB)
        try await b.setRemoteCredentials(newA)
        for line in try await a.currentLocalCandidates() { try await b.addRemoteCandidate(line) }
        for line in try await b.currentLocalCandidates() { try await a.addRemoteCandidate(line) }
        try await a.addRemoteEndOfCandidates()
        try await b.addRemoteEndOfCandidates()
        try await withDeadline("reconnection after restart") {
            try await pair.controllingObserver.waitForState([.connected, .ready], after: statesBefore.0)
            try await pair.controlledObserver.waitForState([.connected, .ready], after: statesBefore.1)
        }
        let message: [UInt8] = Array("after restart".utf8)
        let echoed = try await withDeadline("datagram after restart") {
            var iterator = b.receivedDatagrams.makeAsyncIterator()
            while true {
                a.send(message)
                if let datagram = await iterator.next(), datagram == message { return datagram }
            }
        }
        #expect(echoed == message)
        await pair.close()
    }

    @Test("closing ends the streams and joins the loop threads, every time")
    func closeIsClean() async throws {
        for _ in 0..<4 {
            let pair = try await ConnectedPair.connect()
            let loops = [pair.controlling.loop, pair.controlled.loop]
            #expect(loops.allSatisfy { !$0.hasExited })
            await pair.close()  // waits for the forwarding tasks, so the streams must have finished
            #expect(loops.allSatisfy { $0.hasExited && $0.isJoinedOrDetached }, "threads ended and joined")
            #expect(await pair.controllingObserver.states.last == .closed)
            #expect(pair.controlling.state == .closed)
            #expect(pair.controlling.send([1, 2, 3]) == false)
            await #expect(throws: ICEError.closed) { try await pair.controlling.gatherCandidates() }
            await pair.controlling.close()  // idempotent
        }
        // An agent dropped without close() still ends its thread.
        var loop: GLibEventLoop?
        do {
            let agent = try makeLoopbackAgent(.controlling)
            try await agent.gatherCandidates()
            loop = agent.loop
        }
        let droppedLoop = try #require(loop)
        try await withDeadline("dropped agent's thread to end") {
            while !droppedLoop.hasExited { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(droppedLoop.isJoinedOrDetached)
    }

    @Test("malformed or unusable remote candidates give typed errors")
    func rejectsBadCandidates() async throws {
        let agent = try makeLoopbackAgent(.controlled)
        let malformed: [(String, String)] = [
            ("", "prefix"),
            ("candidat:1 1 udp 1 127.0.0.1 5000 typ host", "prefix"),
            ("candidate:1 1 udp 1 127.0.0.1 5000 typ", "fields"),
            ("candidate: 1 udp 1 127.0.0.1 5000 typ host", "fields"),
            ("candidate:1 0 udp 1 127.0.0.1 5000 typ host", "component-id"),
            ("candidate:1 x udp 1 127.0.0.1 5000 typ host", "component-id"),
            ("candidate:1 1 sctp 1 127.0.0.1 5000 typ host", "transport"),
            ("candidate:1 1 udp -5 127.0.0.1 5000 typ host", "priority"),
            ("candidate:1 1 udp 99999999999 127.0.0.1 5000 typ host", "priority"),
            ("candidate:1 1 udp 1 127.0.0.1 70000 typ host", "port"),
            ("candidate:1 1 udp 1 127.0.0.1 port typ host", "port"),
            ("candidate:1 1 udp 1 127.0.0.1 5000 type host", "typ"),
            ("candidate:1 1 udp 1 127.0.0.1 5000 typ relayed", "cand-type"),
            ("candidate:f\u{00e9} 1 udp 1 127.0.0.1 5000 typ host", "foundation"),
        ]
        for (line, field) in malformed {
            let error = await #expect(throws: ICEError.self) { try await agent.addRemoteCandidate(line) }
            guard case .malformedCandidate(_, let reported, _) = error else {
                Issue.record("\(line): expected malformedCandidate, got \(String(describing: error))")
                continue
            }
            #expect(reported == field, "\(line)")
        }
        let unsupported = [
            "candidate:1 2 udp 1 127.0.0.1 5000 typ host",  // RTCP component with rtcp-mux
            "candidate:1 1 tcp 1 127.0.0.1 9 typ host tcptype active",  // ICE-TCP off
            "candidate:1 1 udp 1 6f1c2b3a-0d4e-4f5a-8b6c-7d8e9f0a1b2c.local 5000 typ host",  // mDNS
        ]
        for line in unsupported {
            let error = await #expect(throws: ICEError.self) { try await agent.addRemoteCandidate(line) }
            guard case .unsupportedCandidate = error else {
                Issue.record("\(line): expected unsupportedCandidate, got \(String(describing: error))")
                continue
            }
        }
        await #expect(throws: ICEError.invalidCredentials(field: "ufrag", reason: "empty")) {
            try await agent.setRemoteCredentials(ICECredentials(ufrag: "", password: "abcdefghijklmnopqrstuvwx"))
        }
        #expect(throws: ICEError.invalidAddress(field: "local address", value: "localhost")) {
            _ = try ICEAgent(
                configuration: .init(role: .controlled, localAddresses: ["localhost"]),
                logger: .init(label: "t")
            )
        }
        await agent.close()
    }

    @Test("STUN and TURN (UDP, TCP) configuration is accepted by address; host names and TURN over TLS are refused")
    func serverConfiguration() async throws {
        // Nothing is gathered, so nothing is sent; the servers are only registered with libnice.
        let servers = [TURNServer.Transport.udp, .tcp].map { transport in
            TURNServer(address: "127.0.0.1", port: 3478, transport: transport, username: "user", password: "secret")
        }
        let agent = try ICEAgent(
            configuration: .init(
                role: .controlling,
                localAddresses: ["127.0.0.1"],
                stunServer: STUNServer(address: "127.0.0.1"),
                turnServers: servers,
                portRange: 40_000...40_100
            ),
            logger: .init(label: "test.ice.servers")
        )
        #expect(try await agent.localCredentials().ufrag.count >= 4)
        #expect(!"\(servers[0])".contains("secret"), "TURN password never printed")
        await agent.close()

        #expect(throws: ICEError.invalidAddress(field: "TURN server", value: "turn.example.com")) {
            _ = try ICEAgent(
                configuration: .init(
                    role: .controlling,
                    turnServers: [
                        .init(address: "turn.example.com", port: 3478, transport: .udp, username: "u", password: "p")
                    ]
                ),
                logger: .init(label: "t")
            )
        }
        // libnice would open a plain TCP connection for it: refused rather than silently unencrypted.
        let tls = TURNServer(address: "127.0.0.1", port: 5349, transport: .tls, username: "u", password: "p")
        #expect {
            _ = try ICEAgent(configuration: .init(role: .controlling, turnServers: [tls]), logger: .init(label: "t"))
        } throws: { error in
            guard case ICEError.invalidConfiguration(_, let reason) = error else { return false }
            return reason.contains("TLS")
        }
        let relayWithoutServer = ICEAgent.Configuration(role: .controlling, transportPolicy: .relay)
        #expect {
            _ = try ICEAgent(configuration: relayWithoutServer, logger: .init(label: "t"))
        } throws: { error in
            guard case ICEError.invalidConfiguration = error else { return false }
            return true
        }
        #expect(throws: ICEError.invalidAddress(field: "STUN server", value: "stun.example.com")) {
            _ = try ICEAgent(
                configuration: .init(role: .controlling, stunServer: .init(address: "stun.example.com")),
                logger: .init(label: "t")
            )
        }
    }
}
