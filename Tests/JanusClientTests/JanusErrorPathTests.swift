import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import Testing

/// Error paths no real Janus produces on demand, against `Tests/Interop/fake_janus.py` on 127.0.0.1.
@Suite struct JanusErrorPathTests {
    static let script = TestPaths.packageRoot.appendingPathComponent("Tests/Interop/fake_janus.py").path

    /// Starts the fake in `mode`; returns it and its URL.
    func fake(_ mode: String, tls: (cert: String, key: String)? = nil) throws -> (BackgroundProcess, String) {
        var arguments = [Self.script, mode, "--lifetime", "20"]
        if let tls { arguments += ["--tls", tls.cert, tls.key] }
        let server = try BackgroundProcess(try TestPaths.python(), arguments)
        let port = try server.readLine()
        return (server, "\(tls == nil ? "ws" : "wss")://127.0.0.1:\(port)")
    }

    @Test func malformedMessagesAreCountedAndSkipped() async throws {
        let (server, url) = try fake("garbage")
        defer { server.stop() }
        let connection = try await JanusConnection.connect(to: url, options: .init(reconnect: nil))
        // The reply still arrives after two malformed messages, and the client counts them.
        let session = try await connection.createSession()
        #expect(session.id == 4242)
        #expect(connection.malformedMessages == 2)
        await connection.close()
    }

    @Test func connectionClosedMidRequestFailsTheRequest() async throws {
        let (server, url) = try fake("close")
        defer { server.stop() }
        let connection = try await JanusConnection.connect(to: url, options: .init(reconnect: nil))
        let error = await #expect(throws: JanusClientError.self) { _ = try await connection.createSession() }
        #expect(error?.code == .connectionClosed)
        await connection.close()
    }

    @Test func silentServerTimesOut() async throws {
        let (server, url) = try fake("silent")
        defer { server.stop() }
        let connection = try await JanusConnection.connect(
            to: url,
            options: .init(requestTimeout: .milliseconds(300), reconnect: nil)
        )
        let error = await #expect(throws: JanusClientError.self) { _ = try await connection.createSession() }
        #expect(error?.code == .timeout)
        #expect(error?.description.contains("create") == true)
        await connection.close()
    }

    @Test func refusedUpgradeIsAClearError() async throws {
        let (server, url) = try fake("reject")
        defer { server.stop() }
        let error = await #expect(throws: JanusClientError.self) { _ = try await JanusConnection.connect(to: url) }
        #expect(error?.code == .handshakeRejected)
        #expect(error?.description.contains("127.0.0.1") == true)
    }

    @Test func unreachableServerIsAClearError() async throws {
        // Port 9 on loopback: nothing listens there, so the connection is refused at once.
        let error = await #expect(throws: JanusClientError.self) {
            _ = try await JanusConnection.connect(to: "ws://127.0.0.1:9")
        }
        #expect(error?.code == .unreachable)
        let invalid = await #expect(throws: JanusClientError.self) {
            _ = try await JanusConnection.connect(to: "http://127.0.0.1:9")
        }
        #expect(invalid?.code == .invalidURL)
    }

    @Test func tlsIsVerifiedAndAPrivateCAIsHonoured() async throws {
        let pki = try TestPKI()
        let (server, url) = try fake("normal", tls: (pki.serverCertificate, pki.serverKey))
        defer { server.stop() }

        // Without the CA, the self-made certificate is refused.
        let untrusted = await #expect(throws: JanusClientError.self) {
            _ = try await JanusConnection.connect(to: url, options: .init(reconnect: nil))
        }
        #expect(untrusted?.code == .tlsFailure)

        // With the CA, the same server is trusted and answers.
        let connection = try await JanusConnection.connect(
            to: url,
            options: .init(tls: TLSOptions(caFile: pki.caCertificate), reconnect: nil)
        )
        let session = try await connection.createSession()
        #expect(session.id == 4242)
        await connection.close()

        let missing = await #expect(throws: JanusClientError.self) {
            _ = try await JanusConnection.connect(
                to: url,
                options: .init(tls: TLSOptions(caFile: "/nonexistent/ca.pem"))
            )
        }
        #expect(missing?.code == .tlsFailure)
    }
}

/// A throwaway CA and a server certificate for 127.0.0.1, made with the openssl command.
struct TestPKI {
    let directory: URL
    var caCertificate: String { directory.appendingPathComponent("ca.pem").path }
    var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    var serverKey: String { directory.appendingPathComponent("server.key").path }

    init() throws {
        directory = try TestPaths.temporaryDirectory("pki")
        let d = directory.path
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try check(
            runProcess(
                "openssl",
                ["req", "-x509"] + ec + [
                    "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.pem", "-days", "1", "-subj", "/CN=Conclave Test CA",
                ]
            )
        )
        try check(
            runProcess(
                "openssl",
                ["req"] + ec + ["-keyout", "\(d)/server.key", "-out", "\(d)/server.csr", "-subj", "/CN=127.0.0.1"]
            )
        )
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(d)/san.ext", atomically: true, encoding: .utf8)
        try check(
            runProcess(
                "openssl",
                [
                    "x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key",
                    "-CAcreateserial", "-out", "\(d)/server.pem", "-days", "1", "-extfile", "\(d)/san.ext",
                ]
            )
        )
    }

    private func check(_ result: ProcessResult) throws {
        guard result.succeeded else { throw SubprocessError(description: "openssl failed: \(result.errorOutput)") }
    }
}
