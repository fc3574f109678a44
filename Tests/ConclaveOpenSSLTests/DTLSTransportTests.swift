import Testing

@testable import ConclaveOpenSSL

@Suite("DTLS-SRTP handshake in memory")
struct DTLSTransportTests {
    @Test("certificate fingerprint is SHA-256 as uppercase colon hex, and round-trips through SDP")
    func certificateFingerprint() throws {
        let first = try DTLSCertificate()
        let second = try DTLSCertificate()
        let hex = first.fingerprint.hex
        #expect(hex.count == 32 * 3 - 1)
        #expect(
            hex.split(separator: ":").allSatisfy { $0.count == 2 && $0.allSatisfy { "0123456789ABCDEF".contains($0) } }
        )
        #expect(first.fingerprint.sdpValue.hasPrefix("sha-256 "))
        #expect(try DTLSFingerprint(sdpValue: first.fingerprint.sdpValue) == first.fingerprint)
        #expect(try DTLSFingerprint(sdpValue: "SHA-256 " + hex.lowercased()) == first.fingerprint)
        #expect(first.fingerprint != second.fingerprint, "each certificate is fresh")
    }

    @Test("malformed SDP fingerprints and setup roles give typed errors")
    func malformedFingerprints() throws {
        #expect(throws: DTLSError.unsupportedFingerprintAlgorithm("md5")) { try DTLSFingerprint(sdpValue: "md5 AA:BB") }
        for bad in [
            "sha-256", "sha-256 AA:BB", "sha-256 " + String(repeating: "ZZ:", count: 31) + "ZZ", "", "sha-256 A:B:C",
        ] {
            #expect(throws: DTLSError.self) { try DTLSFingerprint(sdpValue: bad) }
        }
        #expect(try DTLSRole(answeringRemoteSetup: "actpass") == .client)
        #expect(try DTLSRole(answeringRemoteSetup: "active") == .server)
        #expect(try DTLSRole(offeredActpassAndRemoteAnswered: "passive") == .client)
        #expect(throws: DTLSError.invalidSetupRole("holdconn")) { try DTLSRole(answeringRemoteSetup: "holdconn") }
    }

    @Test("handshake completes and both sides derive mirrored SRTP keys", arguments: SRTPProtectionProfile.allCases)
    func handshakeDerivesMirroredKeys(profile: SRTPProtectionProfile) throws {
        let link = try MemoryLink(profiles: [profile])
        try link.client.start()
        let (clientEvents, serverEvents) = try link.pump()
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
        guard case .connected(let clientKeys) = try #require(clientEvents.first),
            case .connected(let serverKeys) = try #require(serverEvents.first)
        else {
            Issue.record("expected connected events, got \(clientEvents) and \(serverEvents)")
            return
        }
        #expect(clientKeys.profile == profile)
        #expect(serverKeys.profile == profile)
        #expect(clientKeys.localKeyAndSalt.count == profile.masterKeyLength + profile.masterSaltLength)
        #expect(clientKeys.localKeyAndSalt == serverKeys.remoteKeyAndSalt)
        #expect(clientKeys.remoteKeyAndSalt == serverKeys.localKeyAndSalt)
        #expect(clientKeys.localKeyAndSalt != clientKeys.remoteKeyAndSalt)
        #expect(!"\(clientKeys)".contains(clientKeys.localKeyAndSalt.map { String($0, radix: 16) }.joined()))
    }

    @Test("with both profiles offered, the negotiated one is shared by both sides")
    func negotiatesOneProfile() throws {
        let link = try MemoryLink(profiles: [.aeadAES128GCM, .aes128CMSHA1_80], serverProfiles: [.aes128CMSHA1_80])
        try link.client.start()
        try link.pump()
        #expect(link.client.keyingMaterial?.profile == .aes128CMSHA1_80)
        #expect(link.server.keyingMaterial?.profile == .aes128CMSHA1_80)
    }

    @Test("a peer certificate that does not match the SDP fingerprint aborts with fingerprintMismatch")
    func wrongFingerprintAborts() throws {
        let impostor = try DTLSCertificate()
        // The server expects a different client certificate.
        let link = try MemoryLink(serverExpects: impostor.fingerprint)
        try link.client.start()
        let error = #expect(throws: DTLSError.self) { try link.pump() }
        guard case .fingerprintMismatch(let expected, let received) = error else {
            Issue.record("expected fingerprintMismatch, got \(String(describing: error))")
            return
        }
        #expect(expected == impostor.fingerprint.sdpValue)
        #expect(received == link.clientCertificate.fingerprint.sdpValue)
        #expect(error?.description.contains("does not match the SDP fingerprint") == true)
        #expect(link.server.state == .failed)
        #expect(link.server.keyingMaterial == nil)

        // The client side checks too.
        let other = try MemoryLink(clientExpects: impostor.fingerprint)
        try other.client.start()
        #expect(
            throws: DTLSError.fingerprintMismatch(
                expected: impostor.fingerprint.sdpValue,
                received: other.serverCertificate.fingerprint.sdpValue
            )
        ) { try other.pump() }
        #expect(other.client.state == .failed)
    }

    @Test("a dropped flight is retransmitted when the timer fires and the handshake completes")
    func retransmissionAfterDrop() async throws {
        let link = try MemoryLink(initialTimeout: .milliseconds(20))
        try link.client.start()
        let dropped = link.clientOut.take()  // ClientHello lost
        #expect(!dropped.isEmpty)
        let timeout = try #require(link.client.retransmissionTimeout)
        try await Task.sleep(for: timeout + .milliseconds(5))
        try link.client.handleTimeout()
        #expect(link.client.statistics.retransmissions == 1)
        #expect(link.clientOut.datagrams.count == dropped.count, "the same flight again")

        // Deliver the ClientHello, then lose the server's first flight too.
        for datagram in link.clientOut.take() { try link.server.receive(datagram) }
        #expect(!link.serverOut.take().isEmpty)
        let serverTimeout = try #require(link.server.retransmissionTimeout)
        try await Task.sleep(for: serverTimeout + .milliseconds(5))
        try link.server.handleTimeout()
        #expect(link.server.statistics.retransmissions == 1)
        try link.pump()
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
        #expect(link.client.retransmissionTimeout == nil, "no timer once connected")
    }

    @Test("startIfNew starts once, and leaves alone a server whose handshake a ClientHello began")
    func startIfNewIsOneStep() throws {
        let link = try MemoryLink()
        #expect(try link.client.startIfNew())
        #expect(try !link.client.startIfNew(), "already begun")
        // The ClientHello reaches the server before its owner starts it (the peer's ICE finished
        // first): the handshake has begun, and start() would now be refused.
        for datagram in link.clientOut.take() { try link.server.receive(datagram) }
        #expect(link.server.state == .handshaking)
        #expect(throws: DTLSError.self) { try link.server.start() }
        #expect(try !link.server.startIfNew())
        for datagram in link.serverOut.take() { try link.client.receive(datagram) }
        try link.pump()
        #expect(link.client.state == .connected && link.server.state == .connected)
    }

    @Test("close_notify from the peer closes the transport")
    func closeNotify() throws {
        let link = try MemoryLink()
        try link.client.start()
        try link.pump()
        link.client.close()
        let (_, serverEvents) = try link.pump()
        #expect(serverEvents == [.closedByPeer])
        #expect(link.server.state == .closed)
        #expect(link.client.state == .closed)
    }
}
