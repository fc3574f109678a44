import ArgumentParser
import ConclaveE2EE
import ConclaveKeyStore
import Foundation

/// `conclave rejoin CALL_ID`: join a call again from what the key store remembers of it.
struct RejoinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rejoin",
        abstract: "Join a call again with its stored key, Janus URL, room, display and crypto format.",
        discussion: """
            This is how a call is resumed after conclave itself stopped (a crash, kill -9, a reboot). \
            Our earlier feed may still be in the room until Janus times its session out; rejoin accepts \
            that, and the other participants map the new feed to us by the display's user id.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var janus: JanusOptions
    @OptionGroup var call: CallOptions

    @Argument(help: "The call id.")
    var callID: UInt64

    func run() async throws {
        let settings = try call.loadConfiguration()
        let logger = global.makeLogger()
        let store = KeyStore(
            dataDirectory: try KeyStoreAccess.run {
                try DataDirectory.resolve(override: global.dataDirectory ?? settings.dataDirectory)
            }
        )
        guard let record = try KeyStoreAccess.run({ try store.calls.record(for: callID) }) else {
            throw CallCommandError(
                "no call \(callID) in \(store.keysDirectory.path): join it first with 'conclave join --invitation FILE'"
            )
        }
        guard let url = janus.url ?? record.janusURL else {
            throw CallCommandError("call \(callID) has no stored Janus URL: pass --janus URL")
        }
        guard let room = record.room else {
            throw CallCommandError("call \(callID) has no stored room: join it with 'conclave join' instead")
        }
        guard let display = record.display else {
            throw CallCommandError(
                "call \(callID) has no stored display: join it with 'conclave join --display' instead"
            )
        }
        let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
        let broker = try call.signaling.resolve(settings: settings, store: store, required: false)
        let roster = broker == nil ? nil : SignalingContext.roster(of: record)
        if broker != nil, roster == nil, call.signaling.requested {
            throw CallCommandError(
                "call \(callID) has no signed invitation in the key store: it was not joined over the broker"
            )
        }
        // Over the broker a key that no longer opens (the device key was replaced, the key file
        // damaged) is asked for from the participants instead: rejoin by request.
        let key: CallKey?
        if let roster, !roster.isEmpty {
            key = record.wrappedKey.isEmpty ? nil : try? store.openCallKey(record.wrappedKey, with: identity)
        } else {
            key = try KeyStoreAccess.run { try store.openCallKey(record.wrappedKey, with: identity) }
        }
        let format = record.cryptoFormat ?? .ecall
        var runner = CallRunner(
            options: call,
            settings: settings,
            janus: janus,
            janusURL: url,
            room: room,
            callID: callID,
            display: display,
            crypto: format == .sframe ? .sframe : .ecall,
            key: key,
            allowEarlierInstance: true,
            logger: logger
        )
        if let broker, let roster {
            let connected = try await broker.connect(logger: logger)
            runner.signaling = SignalingContext(
                setup: broker,
                channel: connected,
                roster: roster,
                store: store,
                epoch: key == nil ? 0 : record.history.last?.epoch ?? 0,
                keepHistory: call.signaling.keepKeyHistory,
                close: { await connected.close() }
            )
        }
        try await runner.run { _ in }
    }
}
