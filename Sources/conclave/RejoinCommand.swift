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
        let key = try KeyStoreAccess.run { try store.openCallKey(record.wrappedKey, with: identity) }
        let format = record.cryptoFormat ?? .ecall
        let runner = CallRunner(
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
        try await runner.run { _ in }
    }
}
