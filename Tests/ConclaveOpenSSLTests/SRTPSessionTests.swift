import ConclaveOpenSSL
import ConclaveSRTP
import ConclaveTestSupport
import Testing

/// Keys from a real in-memory DTLS handshake, then SRTP in both directions.
@Suite("SRTP with DTLS-exported keys")
struct SRTPSessionTests {
    struct Sessions {
        let clientOut: SRTPSession
        let serverIn: SRTPSession
        let serverOut: SRTPSession
        let clientIn: SRTPSession
    }

    func sessions(for profile: SRTPProtectionProfile) throws -> Sessions {
        let link = try MemoryLink(profiles: [profile])
        try link.client.start()
        try link.pump()
        let clientKeys = try #require(link.client.keyingMaterial)
        let serverKeys = try #require(link.server.keyingMaterial)
        let srtpProfile = try #require(SRTPProfile(rawValue: profile.rawValue))
        return Sessions(
            clientOut: try SRTPSession(
                profile: srtpProfile,
                direction: .outbound,
                keyAndSalt: clientKeys.localKeyAndSalt
            ),
            serverIn: try SRTPSession(
                profile: srtpProfile,
                direction: .inbound,
                keyAndSalt: serverKeys.remoteKeyAndSalt
            ),
            serverOut: try SRTPSession(
                profile: srtpProfile,
                direction: .outbound,
                keyAndSalt: serverKeys.localKeyAndSalt
            ),
            clientIn: try SRTPSession(
                profile: srtpProfile,
                direction: .inbound,
                keyAndSalt: clientKeys.remoteKeyAndSalt
            )
        )
    }

    func rtpPacket(sequence: UInt16, payloadLength: Int, generator: inout SeededGenerator) -> [UInt8] {
        let ssrc: UInt32 = 0x1234_5678
        let timestamp = UInt32(sequence) * 3000
        var packet: [UInt8] = [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        packet += withUnsafeBytes(of: timestamp.bigEndian, Array.init)
        packet += withUnsafeBytes(of: ssrc.bigEndian, Array.init)
        return packet + randomBytes(payloadLength, using: &generator)
    }

    func rtcpSenderReport(generator: inout SeededGenerator) -> [UInt8] {
        // SR with no report blocks: 28 bytes, length field 6.
        [0x80, 200, 0x00, 0x06, 0x12, 0x34, 0x56, 0x78] + randomBytes(20, using: &generator)
    }

    @Test("RTP round trip is byte-identical in both directions", arguments: SRTPProtectionProfile.allCases)
    func rtpRoundTrip(profile: SRTPProtectionProfile) throws {
        let sessions = try sessions(for: profile)
        let srtpProfile = try #require(SRTPProfile(rawValue: profile.rawValue))
        var generator = SeededGenerator(seed: 1)
        for sequence in UInt16(1)...50 {
            let plain = rtpPacket(sequence: sequence, payloadLength: Int(sequence) * 20, generator: &generator)
            for (sender, receiver) in [
                (sessions.clientOut, sessions.serverIn), (sessions.serverOut, sessions.clientIn),
            ] {
                var packet = plain
                try sender.protect(&packet)
                #expect(packet.count == plain.count + srtpProfile.rtpTrailerLength)
                #expect(packet[12...] != plain[12...] || plain.count == 12, "payload is encrypted")
                #expect(packet[..<12] == plain[..<12], "header stays in the clear")
                try receiver.unprotect(&packet)
                #expect(packet == plain)
            }
        }
    }

    @Test("RTCP round trip is byte-identical in both directions", arguments: SRTPProtectionProfile.allCases)
    func rtcpRoundTrip(profile: SRTPProtectionProfile) throws {
        let sessions = try sessions(for: profile)
        let srtpProfile = try #require(SRTPProfile(rawValue: profile.rawValue))
        var generator = SeededGenerator(seed: 2)
        for _ in 0..<20 {
            let plain = rtcpSenderReport(generator: &generator)
            for (sender, receiver) in [
                (sessions.clientOut, sessions.serverIn), (sessions.serverOut, sessions.clientIn),
            ] {
                var packet = plain
                try sender.protectRTCP(&packet)
                #expect(packet.count == plain.count + srtpProfile.rtcpTrailerLength)
                #expect(packet[8..<28] != plain[8..<28], "report is encrypted")
                try receiver.unprotectRTCP(&packet)
                #expect(packet == plain)
            }
        }
    }

    @Test("a replayed packet is rejected as a replay", arguments: SRTPProtectionProfile.allCases)
    func replayRejected(profile: SRTPProtectionProfile) throws {
        let sessions = try sessions(for: profile)
        var generator = SeededGenerator(seed: 3)
        var packet = rtpPacket(sequence: 100, payloadLength: 100, generator: &generator)
        try sessions.clientOut.protect(&packet)
        var first = packet
        try sessions.serverIn.unprotect(&first)
        var replay = packet
        let error = #expect(throws: SRTPError.self) { try sessions.serverIn.unprotect(&replay) }
        #expect(error?.code == .replayed)
        #expect(replay == packet, "a rejected packet is left as it was")

        var report = rtcpSenderReport(generator: &generator)
        try sessions.clientOut.protectRTCP(&report)
        var firstReport = report
        try sessions.serverIn.unprotectRTCP(&firstReport)
        var replayedReport = report
        let rtcpError = #expect(throws: SRTPError.self) { try sessions.serverIn.unprotectRTCP(&replayedReport) }
        #expect(rtcpError?.code == .replayed)
    }

    @Test("a tampered or wrongly keyed packet fails authentication", arguments: SRTPProtectionProfile.allCases)
    func tamperRejected(profile: SRTPProtectionProfile) throws {
        let sessions = try sessions(for: profile)
        var generator = SeededGenerator(seed: 4)
        for sequence in UInt16(200)..<220 {
            var packet = rtpPacket(sequence: sequence, payloadLength: 160, generator: &generator)
            try sessions.clientOut.protect(&packet)
            let index = Int.random(in: 0..<packet.count, using: &generator)
            packet[index] ^= UInt8.random(in: 1...255, using: &generator)
            let error = #expect(throws: SRTPError.self) { try sessions.serverIn.unprotect(&packet) }
            // Flipping the sequence number can also land on a replayed index; either way rejected.
            #expect(error?.code == .authenticationFailed || error?.code == .replayed)
        }
        var report = rtcpSenderReport(generator: &generator)
        try sessions.clientOut.protectRTCP(&report)
        report[10] ^= 0x01
        let rtcpError = #expect(throws: SRTPError.self) { try sessions.serverIn.unprotectRTCP(&report) }
        #expect(rtcpError?.code == .authenticationFailed)

        // The client's own inbound session holds the server's key: wrong key for client packets.
        var packet = rtpPacket(sequence: 300, payloadLength: 50, generator: &generator)
        try sessions.clientOut.protect(&packet)
        let wrongKey = #expect(throws: SRTPError.self) { try sessions.clientIn.unprotect(&packet) }
        #expect(wrongKey?.code == .authenticationFailed)
    }

    @Test("in-place API on a caller buffer checks headroom and lengths")
    func inPlaceBuffers() throws {
        let sessions = try sessions(for: .aeadAES128GCM)
        var generator = SeededGenerator(seed: 5)
        let plain = rtpPacket(sequence: 9, payloadLength: 200, generator: &generator)
        var storage = plain + [UInt8](repeating: 0, count: SRTPSession.trailerCapacity)
        let protectedLength = try storage.withUnsafeMutableBytes { buffer in
            try sessions.clientOut.protect(buffer, length: plain.count)
        }
        #expect(protectedLength == plain.count + 16)
        let plainLength = try storage.withUnsafeMutableBytes { buffer in
            try sessions.serverIn.unprotect(buffer, length: protectedLength)
        }
        #expect(Array(storage[..<plainLength]) == plain)

        var tight = plain
        let error = #expect(throws: SRTPError.self) {
            _ = try tight.withUnsafeMutableBytes { try sessions.clientOut.protect($0, length: plain.count) }
        }
        #expect(
            error?.code == .bufferTooSmall(needed: plain.count + SRTPSession.trailerCapacity, available: plain.count)
        )
        var runt: [UInt8] = [0x80, 96, 0]
        #expect(throws: SRTPError(operation: "srtp_unprotect", code: .packetTooShort(length: 3))) {
            try sessions.serverIn.unprotect(&runt)
        }
        #expect(throws: SRTPError(operation: "srtp_create", code: .wrongKeyLength(expected: 30, actual: 3))) {
            _ = try SRTPSession(profile: .aes128CMHMACSHA1_80, direction: .inbound, keyAndSalt: [1, 2, 3])
        }
    }

    @Test("seeded fuzz: unprotect of random and mutated packets never crashes")
    func unprotectFuzz() throws {
        let sessions = try sessions(for: .aes128CMSHA1_80)
        var generator = SeededGenerator(seed: 6)
        var accepted = 0
        for iteration in 0..<3_000 {
            var packet: [UInt8]
            if iteration.isMultiple(of: 2) {
                packet = randomBytes(Int.random(in: 0...300, using: &generator), using: &generator)
            } else {
                packet = rtpPacket(sequence: UInt16(1000 + iteration), payloadLength: 40, generator: &generator)
                try sessions.clientOut.protect(&packet)
                if Bool.random(using: &generator) { packet = Array(packet.dropLast()) }
                let cut = Int.random(in: 0...packet.count, using: &generator)
                packet = Array(packet.prefix(cut))
            }
            do throws(SRTPError) {
                if iteration % 3 == 0 {
                    try sessions.serverIn.unprotectRTCP(&packet)
                } else {
                    try sessions.serverIn.unprotect(&packet)
                }
                accepted += 1
            } catch {
                // Typed by the signature (SRTPError); the point is that nothing traps.
                #expect(!error.description.isEmpty)
            }
        }
        #expect(accepted < 3_000)
    }
}
