import ConclaveTestSupport
import Testing

@testable import ConclaveOpenSSL

@Suite("DTLS input robustness")
struct DTLSRobustnessTests {
    @Test("RFC 7983 demultiplexing by first byte, RTCP by payload type")
    func demultiplexing() {
        #expect(MultiplexedPacketKind(classifying: [UInt8]()) == .unknown)
        #expect(MultiplexedPacketKind(classifying: [0x00, 0x01]) == .stun)
        #expect(MultiplexedPacketKind(classifying: [3]) == .stun)
        #expect(MultiplexedPacketKind(classifying: [17]) == .zrtp)
        #expect(MultiplexedPacketKind(classifying: [20, 0xFE]) == .dtls)
        #expect(MultiplexedPacketKind(classifying: [63]) == .dtls)
        #expect(MultiplexedPacketKind(classifying: [64]) == .turnChannel)
        #expect(MultiplexedPacketKind(classifying: [0x80, 96]) == .rtp)
        #expect(MultiplexedPacketKind(classifying: [0x80, 0xE0]) == .rtp, "marker bit set, PT 96")
        #expect(MultiplexedPacketKind(classifying: [0x80, 200]) == .rtcp)
        #expect(MultiplexedPacketKind(classifying: [0x81, 206]) == .rtcp)
        #expect(MultiplexedPacketKind(classifying: [0x80]) == .unknown)
        #expect(MultiplexedPacketKind(classifying: [4]) == .unknown)
        #expect(MultiplexedPacketKind(classifying: [192, 0]) == .unknown)
        #expect(MultiplexedPacketKind(classifying: [255]) == .unknown)
    }

    @Test("garbage and truncated datagrams interleaved with a handshake are dropped and counted")
    func garbageDuringHandshake() throws {
        let link = try MemoryLink()
        try link.client.start()
        var generator = SeededGenerator(seed: 42)
        var rejectedExpected = 0
        for _ in 0..<10 {
            // Not DTLS at all: rejected before OpenSSL.
            for first: UInt8 in [0, 2, 70, 128, 200, 255] {
                var junk = randomBytes(Int.random(in: 1...300, using: &generator), using: &generator)
                junk[0] = first
                #expect(try link.server.receive(junk) == nil)
                #expect(try link.client.receive(junk) == nil)
                rejectedExpected += 1
            }
            // DTLS first byte but shorter than a record header: OpenSSL discards it.
            let short = [UInt8(22)] + randomBytes(Int.random(in: 0...11, using: &generator), using: &generator)
            #expect(try link.server.receive(short) == nil)
            #expect(try link.server.receive([UInt8]()) == nil)
            rejectedExpected += 1
            // A truncated copy of a real flight.
            if let real = link.clientOut.datagrams.first {
                let cut = Array(real.prefix(Int.random(in: 1..<real.count, using: &generator)))
                _ = try? link.server.receive(cut)
            }
            try link.pump(rounds: 1)
        }
        try link.pump()
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
        #expect(link.server.statistics.datagramsRejected == rejectedExpected)
        #expect(link.client.statistics.datagramsRejected == 60)
    }

    @Test("seeded fuzz: random and mutated datagrams never crash, failures are typed")
    func fuzz() throws {
        var generator = SeededGenerator(seed: 0xD715)
        // Capture a real first flight to mutate.
        let seedLink = try MemoryLink()
        try seedLink.client.start()
        let clientHello = try #require(seedLink.clientOut.datagrams.first)
        var outcomes = (accepted: 0, failed: 0)
        var link = try MemoryLink()
        for iteration in 0..<3_000 {
            if iteration % 100 == 0 { link = try MemoryLink() }
            var datagram: [UInt8]
            switch iteration % 3 {
            case 0: datagram = randomBytes(Int.random(in: 0...1500, using: &generator), using: &generator)
            case 1:
                datagram = clientHello
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    let index = Int.random(in: 0..<datagram.count, using: &generator)
                    datagram[index] = UInt8.random(in: 0...255, using: &generator)
                }
            default:
                datagram = Array(clientHello.prefix(Int.random(in: 0...clientHello.count, using: &generator)))
            }
            do {
                try link.server.receive(datagram)
                outcomes.accepted += 1
            } catch {
                outcomes.failed += 1  // a typed DTLSError by the signature; the transport is now failed
                #expect(link.server.state == .failed)
                link = try MemoryLink()
            }
        }
        // The connected state survives garbage too.
        let connected = try MemoryLink()
        try connected.client.start()
        try connected.pump()
        for _ in 0..<500 {
            var datagram = randomBytes(Int.random(in: 1...200, using: &generator), using: &generator)
            datagram[0] = UInt8.random(in: 20...63, using: &generator)
            _ = try connected.server.receive(datagram)
        }
        #expect(connected.server.state == .connected)
        #expect(outcomes.accepted + outcomes.failed == 3_000)
        #expect(outcomes.accepted > 0, "most garbage is dropped without failing the transport")
    }
}
