import ConclaveOpenSSL
import ConclaveTestSupport
import Logging
import Synchronization

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
