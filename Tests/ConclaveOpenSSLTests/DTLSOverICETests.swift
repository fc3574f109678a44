import ConclaveICE
// DTLS-SRTP end to end over two real ICE agents on 127.0.0.1.
import ConclaveOpenSSL
import ConclaveSRTP
import Logging
import Synchronization
import Testing

/// One side of a DTLS-SRTP association over an ICE agent: the agent's receive handler feeds
/// DTLS records to the transport on the loop thread and collects SRTP packets.
private final class DTLSOverICEEndpoint: Sendable {
    /// Set once both the agent and the transport exist (each needs the other).
    let slot = Mutex<DTLSTransport?>(nil)
    let srtpReceived = Mutex<[[UInt8]]>([])
    let errors = Mutex<[DTLSError]>([])

    var transport: DTLSTransport? { slot.withLock { $0 } }

    func handle(_ datagram: UnsafeRawBufferPointer) {
        switch MultiplexedPacketKind(classifying: datagram) {
        case .dtls:
            do throws(DTLSError) { _ = try transport?.receive(datagram) } catch {
                errors.withLock { $0.append(error) }
            }
        case .rtp, .rtcp:
            let packet = Array(datagram)
            srtpReceived.withLock { $0.append(packet) }
        default:
            break
        }
    }

    var state: DTLSTransport.State? { transport?.state }
    var keys: SRTPKeyingMaterial? { transport?.keyingMaterial }
}

@Suite("DTLS-SRTP over two ICE agents on 127.0.0.1")
struct DTLSOverICETests {
    @Test("handshake over ICE, then SRTP both ways byte-identical", arguments: SRTPProtectionProfile.allCases)
    func endToEnd(profile: SRTPProtectionProfile) async throws {
        var logger = Logger(label: "test.dtls-ice")
        logger.logLevel = .warning
        let clientSide = DTLSOverICEEndpoint()
        let serverSide = DTLSOverICEEndpoint()
        let controlling = try ICEAgent(
            configuration: .init(role: .controlling, localAddresses: ["127.0.0.1"]),
            logger: logger,
            datagramHandler: { clientSide.handle($0) }
        )
        let controlled = try ICEAgent(
            configuration: .init(role: .controlled, localAddresses: ["127.0.0.1"]),
            logger: logger,
            datagramHandler: { serverSide.handle($0) }
        )

        let clientCertificate = try DTLSCertificate()
        let serverCertificate = try DTLSCertificate()
        let client = try DTLSTransport(
            certificate: clientCertificate,
            configuration: .init(
                role: .client,
                remoteFingerprint: serverCertificate.fingerprint,
                srtpProfiles: [profile],
                initialRetransmissionTimeout: .milliseconds(100)
            ),
            logger: logger,
            send: { controlling.send($0) }
        )
        let server = try DTLSTransport(
            certificate: serverCertificate,
            configuration: .init(
                role: .server,
                remoteFingerprint: clientCertificate.fingerprint,
                srtpProfiles: [profile],
                initialRetransmissionTimeout: .milliseconds(100)
            ),
            logger: logger,
            send: { controlled.send($0) }
        )
        clientSide.slot.withLock { $0 = client }
        serverSide.slot.withLock { $0 = server }

        // ICE with trickle both ways.
        try await controlled.setRemoteCredentials(controlling.localCredentials())
        try await controlling.setRemoteCredentials(controlled.localCredentials())
        let trickle = [
            Task {
                for await event in controlling.localCandidates {
                    if case .candidate(let line) = event { try? await controlled.addRemoteCandidate(line) }
                }
            },
            Task {
                for await event in controlled.localCandidates {
                    if case .candidate(let line) = event { try? await controlling.addRemoteCandidate(line) }
                }
            },
        ]
        try await controlling.gatherCandidates()
        try await controlled.gatherCandidates()

        // DTLS: the client starts as soon as ICE has a pair; timers cover anything sent too early.
        try await bounded("DTLS connected over ICE") {
            while controlling.state != .connected && controlling.state != .ready {
                try await Task.sleep(for: .milliseconds(10))
            }
            try client.start()
            while client.state != .connected || server.state != .connected {
                try client.handleTimeout()
                try server.handleTimeout()
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(clientSide.errors.withLock { $0.isEmpty } && serverSide.errors.withLock { $0.isEmpty })
        let clientKeys = try #require(clientSide.keys)
        let serverKeys = try #require(serverSide.keys)
        #expect(clientKeys.profile == profile)
        let srtpProfile = try #require(SRTPProfile(rawValue: profile.rawValue))
        let clientOut = try SRTPSession(
            profile: srtpProfile,
            direction: .outbound,
            keyAndSalt: clientKeys.localKeyAndSalt
        )
        let clientIn = try SRTPSession(
            profile: srtpProfile,
            direction: .inbound,
            keyAndSalt: clientKeys.remoteKeyAndSalt
        )
        let serverOut = try SRTPSession(
            profile: srtpProfile,
            direction: .outbound,
            keyAndSalt: serverKeys.localKeyAndSalt
        )
        let serverIn = try SRTPSession(
            profile: srtpProfile,
            direction: .inbound,
            keyAndSalt: serverKeys.remoteKeyAndSalt
        )

        // SRTP both ways over the ICE pair.
        func packet(_ sequence: UInt16, marker: UInt8) -> [UInt8] {
            [0x80, 111, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0, 1, 0xCA, 0xFE, 0, marker]
                + (0..<UInt8(100)).map { $0 &* marker &+ UInt8(truncatingIfNeeded: sequence) }
        }
        let fromClient = (UInt16(1)...30).map { packet($0, marker: 1) }
        let fromServer = (UInt16(1)...30).map { packet($0, marker: 2) }
        for plain in fromClient {
            var wire = plain
            try clientOut.protect(&wire)
            #expect(controlling.send(wire))
        }
        for plain in fromServer {
            var wire = plain
            try serverOut.protect(&wire)
            #expect(controlled.send(wire))
        }
        try await bounded("SRTP packets across") {
            while serverSide.srtpReceived.withLock({ $0.count }) < fromClient.count
                || clientSide.srtpReceived.withLock({ $0.count }) < fromServer.count
            {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let atServer = try serverSide.srtpReceived.withLock { $0 }.map { packet throws(SRTPError) in
            var packet = packet
            try serverIn.unprotect(&packet)
            return packet
        }
        let atClient = try clientSide.srtpReceived.withLock { $0 }.map { packet throws(SRTPError) in
            var packet = packet
            try clientIn.unprotect(&packet)
            return packet
        }
        #expect(atServer == fromClient)
        #expect(atClient == fromServer)

        await controlling.close()
        await controlled.close()
        for task in trickle { await task.value }
    }

    private func bounded(_ what: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(20))
                throw DeadlineExceeded(what: what)
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

private struct DeadlineExceeded: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}
