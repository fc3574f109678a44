import ConclaveDTLS
import Logging
import Synchronization

/// Deterministic generator (SplitMix64) so fuzz failures reproduce.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func randomBytes(_ count: Int, using generator: inout SeededGenerator) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

/// Collects what a transport writes, as separate datagrams.
final class Outbox: Sendable {
    private let storage = Mutex<[[UInt8]]>([])
    var datagrams: [[UInt8]] { storage.withLock { $0 } }
    func append(_ datagram: [UInt8]) { storage.withLock { $0.append(datagram) } }
    func take() -> [[UInt8]] {
        storage.withLock { datagrams in
            defer { datagrams.removeAll() }
            return datagrams
        }
    }
}

/// Two transports wired through in-memory outboxes; the test decides what is delivered.
final class MemoryLink {
    let client: DTLSTransport
    let server: DTLSTransport
    let clientOut = Outbox()
    let serverOut = Outbox()
    let clientCertificate: DTLSCertificate
    let serverCertificate: DTLSCertificate

    init(
        profiles: [SRTPProtectionProfile] = [.aeadAES128GCM, .aes128CMSHA1_80],
        serverProfiles: [SRTPProtectionProfile]? = nil,
        clientExpects: DTLSFingerprint? = nil,
        serverExpects: DTLSFingerprint? = nil,
        initialTimeout: Duration = .seconds(1)
    ) throws {
        clientCertificate = try DTLSCertificate()
        serverCertificate = try DTLSCertificate()
        var logger = Logger(label: "test.dtls")
        logger.logLevel = .critical
        let clientOut = clientOut
        let serverOut = serverOut
        client = try DTLSTransport(
            certificate: clientCertificate,
            configuration: .init(
                role: .client,
                remoteFingerprint: clientExpects ?? serverCertificate.fingerprint,
                srtpProfiles: profiles,
                initialRetransmissionTimeout: initialTimeout
            ),
            logger: logger,
            send: { clientOut.append(Array($0)) }
        )
        server = try DTLSTransport(
            certificate: serverCertificate,
            configuration: .init(
                role: .server,
                remoteFingerprint: serverExpects ?? clientCertificate.fingerprint,
                srtpProfiles: serverProfiles ?? profiles,
                initialRetransmissionTimeout: initialTimeout
            ),
            logger: logger,
            send: { serverOut.append(Array($0)) }
        )
    }

    /// Delivers flights back and forth until neither side has anything to send. Returns the
    /// events each side produced.
    @discardableResult
    func pump(rounds: Int = 10) throws(DTLSError) -> (client: [DTLSTransport.Event], server: [DTLSTransport.Event]) {
        var clientEvents: [DTLSTransport.Event] = []
        var serverEvents: [DTLSTransport.Event] = []
        for _ in 0..<rounds {
            let toServer = clientOut.take()
            let toClient = serverOut.take()
            if toServer.isEmpty && toClient.isEmpty { break }
            for datagram in toServer { if let event = try server.receive(datagram) { serverEvents.append(event) } }
            for datagram in toClient { if let event = try client.receive(datagram) { clientEvents.append(event) } }
        }
        return (clientEvents, serverEvents)
    }
}
