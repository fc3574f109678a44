import ConclaveTestSupport
import Foundation
import RabbitMQTestBed
import STOMPProtocol
import Testing

@testable import STOMPClient

/// The client against a real RabbitMQ with Web-STOMP, started by the test from config/rabbitmq.
@Suite("STOMP against RabbitMQ", .serialized)
struct STOMPIntegrationTests {
    func channel(
        _ bed: RabbitMQTestBed,
        device: UInt64,
        passcode: String,
        tuning: (@Sendable (inout STOMPClientConfiguration) -> Void)? = nil
    ) throws -> STOMPSignalingChannel {
        var configuration = STOMPSignalingChannel.Configuration(
            url: bed.webSocketURL,
            deviceID: device,
            passcode: passcode
        )
        configuration.tuning =
            tuning ?? {
                $0.reconnect = STOMPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(2))
            }
        return try STOMPSignalingChannel(configuration: configuration)
    }

    /// Waits until `channel` has a subscription the broker confirmed: a message it sends itself
    /// comes back.
    func awaitSubscribed(_ channel: STOMPSignalingChannel, _ messages: Recorder<String>) async throws {
        let probe = "{\"probe\":\"\(UUID().uuidString)\"}"
        try await channel.send(probe, toDevice: channel.deviceID)
        #expect(await messages.first(within: .seconds(20)) { $0 == probe } != nil)
    }

    @Test func roundTripIsByteIdenticalBothWays() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        let one = try channel(bed, device: 1, passcode: try bed.addDevice(1))
        let two = try channel(bed, device: 2, passcode: try bed.addDevice(2))
        let inbox1 = Recorder(one.messages)
        let inbox2 = Recorder(two.messages)
        try await one.connect()
        try await two.connect()
        try await awaitSubscribed(two, inbox2)
        try await awaitSubscribed(one, inbox1)

        let unicode =
            "{\"type\":\"call_invitation\",\"callerId\":5,\"name\":\"Zoë 🎧 — ü\\n\\\"q\\\"\",\"nul\":\"a\\u0000b\"}"
        let large = "{\"pad\":\"" + String(repeating: "abcdéfgh", count: 64 * 1024 / 9) + "\"}"
        #expect(large.utf8.count >= 64 * 1024)
        try await one.send(unicode, toDevice: 2)
        try await one.send(large, toDevice: 2)
        try await two.send("{\"reply\":true}", toDevice: 1)
        let first = await inbox2.first(after: 1) { !$0.contains("probe") }
        #expect(first == unicode)
        let second = await inbox2.first(after: 2) { !$0.contains("probe") }
        #expect(second?.utf8.count == large.utf8.count)
        #expect(second == large)
        #expect(await inbox1.first { $0 == "{\"reply\":true}" } != nil)
        // Nothing for device 2 reached device 1.
        #expect(!inbox1.items.contains(unicode))
        await one.close()
        await two.close()
    }

    @Test func deviceCannotSubscribeToAnotherDevicesDestination() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        _ = try bed.addDevice(2)
        let one = try channel(bed, device: 1, passcode: try bed.addDevice(1))
        let events = Recorder(one.events)
        try await one.connect()
        one.connection.subscribe(id: "sub-2", destination: STOMPSignalingChannel.destination(forDevice: 2))
        let refused = await events.first { $0.error?.code == .subscriptionRefused }?.error
        // Over Web-STOMP the ERROR frame (`access_refused`) may not reach the client before the close.
        #expect(refused?.serverMessage == nil || refused?.serverMessage == "access_refused")
        #expect(refused?.message.contains("ecall.signal.out/2") == true)
        // The client reconnects with its own subscription only, and it still works.
        let inbox = Recorder(one.messages)
        _ = await events.first { $0.error?.code == .subscriptionRefused }
        let reconnected = await events.first(after: events.items.count) { $0.isConnected }
        #expect(reconnected != nil)
        #expect(one.connection.subscriptionIDsForTesting == ["sub-1"])
        try await awaitSubscribed(one, inbox)
        await one.close()
    }

    @Test func wrongPasscodeIsRefusedOnceWithoutRetrying() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        _ = try bed.addDevice(1)
        let one = try channel(bed, device: 1, passcode: "not-the-passcode")
        let events = Recorder(one.events)
        await #expect(throws: STOMPError.self) { try await one.connect() }
        let closed = await events.first { $0.closedError != nil }
        let error = try #require(closed?.closedError ?? nil)
        #expect(error.code == .connectRefused)
        #expect(error.serverMessage == "Bad CONNECT")
        #expect(!error.description.contains("not-the-passcode"))
        // The stream ended with the close: one attempt, no retries after it.
        _ = await events.first { _ in false }
        let attempts = events.items.filter { if case .state(.connecting) = $0 { true } else { false } }
        #expect(attempts.count == 1)
    }

    @Test func revokedCredentialsEndTheConnectionWithATypedError() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        let one = try channel(bed, device: 1, passcode: try bed.addDevice(1))
        let events = Recorder(one.events)
        try await one.connect()
        try bed.revokeDevice(1)
        let closed = await events.first { $0.closedError != nil }
        #expect((closed?.closedError ?? nil)?.code == .connectRefused)
        await #expect(throws: STOMPError.self) { try await one.send("{}", toDevice: 2) }
    }

    @Test func brokerRestartReconnectsResubscribesAndDeliversWhatWasSentMeanwhile() async throws {
        let bed = try RabbitMQTestBed()
        defer { bed.stop() }
        let one = try channel(bed, device: 1, passcode: try bed.addDevice(1))
        let two = try channel(bed, device: 2, passcode: try bed.addDevice(2))
        let inbox2 = Recorder(two.messages)
        let events1 = Recorder(one.events)
        let events2 = Recorder(two.events)
        try await one.connect()
        try await two.connect()
        try await awaitSubscribed(two, inbox2)

        try bed.stopBroker()
        #expect(await events1.first { $0.isReconnecting } != nil)
        #expect(await events2.first { $0.isReconnecting } != nil)
        let mark1 = events1.items.count
        let mark2 = events2.items.count
        // Sent while the broker is down: queued, and written once device 1 is back.
        let queued = Task { try await one.send("{\"during\":\"outage\"}", toDevice: 2) }
        try bed.startBroker()
        #expect(await events1.first(after: mark1, within: .seconds(30)) { $0.isConnected } != nil)
        #expect(await events2.first(after: mark2, within: .seconds(30)) { $0.isConnected } != nil)
        try await queued.value
        // Connected is not subscribed: the broker binds device 2's queue a moment after its
        // CONNECTED; a message that arrives before that is dropped (nothing to route it to).
        try await awaitSubscribed(two, inbox2)
        try await one.send("{\"after\":\"restart\"}", toDevice: 2)
        let after = await inbox2.first(within: .seconds(20)) { $0 == "{\"after\":\"restart\"}" }
        #expect(after != nil)
        // Device 2's subscription may come back after device 1's queued send went out: that message
        // is then lost by the broker (its queue did not exist yet); the client reports the send as
        // written, which is all STOMP without receipts can say.
        await one.close()
        await two.close()
    }

    @Test func silentBrokerIsDetectedAndTheClientRecovers() async throws {
        let bed = try RabbitMQTestBed()
        defer { bed.stop() }
        let tuning: @Sendable (inout STOMPClientConfiguration) -> Void = {
            $0.heartBeatSend = .seconds(1)
            $0.heartBeatReceive = .seconds(1)
            $0.connectTimeout = .seconds(3)
            $0.reconnect = STOMPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(1))
        }
        let one = try channel(bed, device: 1, passcode: try bed.addDevice(1), tuning: tuning)
        let inbox = Recorder(one.messages)
        let events = Recorder(one.events)
        try await one.connect()
        try await awaitSubscribed(one, inbox)
        bed.pause()
        let silent = await events.first(within: .seconds(20)) { $0.error?.code == .serverSilent }
        bed.resume()
        #expect(silent != nil)
        let mark = events.items.count
        #expect(await events.first(after: mark, within: .seconds(60)) { $0.isConnected } != nil)
        try await awaitSubscribed(one, inbox)
        await one.close()
    }
}

/// A scripted server feeds the connection what RabbitMQ never would.
@Suite("STOMP connection against a scripted server")
struct STOMPScriptedServerTests {
    @Test func malformedAndOversizedFramesGiveOneErrorEachAndTheConnectionSurvives() async throws {
        let server = ScriptedServer()
        var configuration = STOMPClientConfiguration(
            url: "ws://127.0.0.1:9/ws",
            virtualHost: "ecall",
            credentials: STOMPCredentials(login: "device-1", passcode: "p")
        )
        configuration.limits = STOMPDecoder.Limits(maximumFrameSize: 4096)
        let connection = try STOMPConnection(configuration: configuration) { _ in server.makeTransport() }
        let events = Recorder(connection.events)
        let messages = Recorder(connection.messages)
        connection.subscribe(id: "sub-1", destination: "/exchange/ecall.signal.out/1")
        connection.start()
        try await connection.waitUntilConnected()
        server.push("MESSAGE\nthis line has no colon\n\n\0")
        server.push("MESSAGE\nsubscription:sub-1\n\n" + String(repeating: "x", count: 5000) + "\0")
        server.push("NOT-A-COMMAND\n\n\0")
        server.push("MESSAGE\nsubscription:sub-1\ndestination:/d\n\n{\"still\":\"here\"}\0")
        #expect(await messages.first { $0.text == "{\"still\":\"here\"}" } != nil)
        // The events stream is collected by a task of its own: wait for its three errors too.
        let errors = await events.matching(count: 3) { $0.error != nil }.compactMap(\.error)
        try #require(errors.count == 3, "expected three malformed-frame errors, got \(errors)")
        #expect(errors.map(\.code) == [.malformedFrame, .malformedFrame, .malformedFrame])
        #expect(errors[1].message.contains("larger than 4096"))
        #expect(connection.malformedFrames == 3)
        #expect(!events.items.contains { $0.isReconnecting })
        #expect(server.received.withLock { $0 }.contains { $0.hasPrefix("SUBSCRIBE\n") })
        await connection.close()
    }
}

extension STOMPIntegrationTests {
    /// A user allowed everything in the vhost: a work queue of its own, not a device's destinations.
    func worker(_ bed: RabbitMQTestBed, _ login: String) throws -> STOMPConnection {
        let passcode = RabbitMQTestBed.randomPasscode()
        try bed.importUser(login: login, passcode: passcode, permissions: (".*", ".*", ".*"))
        let connection = try STOMPConnection(
            configuration: STOMPClientConfiguration(
                url: bed.webSocketURL,
                virtualHost: RabbitMQTestBed.virtualHost,
                credentials: STOMPCredentials(login: login, passcode: passcode)
            )
        )
        connection.start()
        return connection
    }

    @Test func clientIndividualAcknowledgementAgainstRabbitMQ() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        let consumer = try worker(bed, "consumer")
        let inbox = Recorder(consumer.messages)
        try await consumer.waitUntilConnected()
        let queue = "/queue/work-\(UUID().uuidString)"
        consumer.subscribe(
            id: "work",
            destination: queue,
            ack: "client-individual",
            headers: [.init("prefetch-count", "1")]
        )
        for text in ["one", "two"] {
            try await consumer.send(STOMPFrame(.send, headers: [.init("destination", queue)], text: text))
        }
        let first = try #require(await inbox.first { $0.text == "one" })
        #expect(!first.redelivered)
        // NACK with requeue: the same message again, marked redelivered (prefetch 1 holds "two" back).
        try await consumer.nack(first, requeue: true)
        let again = try #require(await inbox.first(after: 1) { $0.text == "one" })
        #expect(again.redelivered)
        try await consumer.ack(again)
        let second = try #require(await inbox.first { $0.text == "two" })
        #expect(!second.redelivered)
        // A consumer that goes away without ACK: the broker gives the message to the next one,
        // marked redelivered.
        await consumer.close()
        let next = try worker(bed, "next")
        let nextInbox = Recorder(next.messages)
        try await next.waitUntilConnected()
        next.subscribe(
            id: "work",
            destination: queue,
            ack: "client-individual",
            headers: [.init("prefetch-count", "1")]
        )
        let taken = try #require(await nextInbox.first { $0.text == "two" })
        #expect(taken.redelivered)
        try await next.ack(taken)
        // Acknowledged for good: a third consumer gets only what is sent next.
        await next.close()
        let third = try worker(bed, "third")
        let thirdInbox = Recorder(third.messages)
        try await third.waitUntilConnected()
        third.subscribe(id: "work", destination: queue, ack: "client-individual")
        try await third.send(STOMPFrame(.send, headers: [.init("destination", queue)], text: "three"))
        let only = try #require(await thirdInbox.first { _ in true })
        #expect(only.text == "three")
        await third.close()
    }

    /// Why the recorder service gives each call a subscription of its own: RabbitMQ refuses an
    /// ACK for a delivery whose subscription was cancelled, and closes the connection, which puts
    /// the message back in the queue.
    @Test func rabbitMQRefusesAnAckAfterUnsubscribe() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        let consumer = try worker(bed, "consumer")
        let inbox = Recorder(consumer.messages)
        let events = Recorder(consumer.events)
        try await consumer.waitUntilConnected()
        let queue = "/queue/cancelled-\(UUID().uuidString)"
        consumer.subscribe(
            id: "work",
            destination: queue,
            ack: "client-individual",
            headers: [.init("prefetch-count", "1")]
        )
        try await consumer.send(STOMPFrame(.send, headers: [.init("destination", queue)], text: "one"))
        let first = try #require(await inbox.first { $0.text == "one" })
        consumer.unsubscribe(id: "work")
        try await consumer.ack(first)
        let refused = await events.first { $0.error?.code == .server }?.error
        #expect(refused?.serverMessage?.contains("Subscription not found") == true, "\(String(describing: refused))")
        await consumer.close()
        let next = try worker(bed, "next")
        let nextInbox = Recorder(next.messages)
        try await next.waitUntilConnected()
        next.subscribe(id: "work", destination: queue, ack: "client-individual")
        let again = try #require(await nextInbox.first { $0.text == "one" })
        #expect(again.redelivered)
        await next.close()
    }
}
