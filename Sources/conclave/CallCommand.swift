import ArgumentParser
import Conclave
import ConclaveE2EE
import ConclaveKeyStore
import Foundation
import JanusClient
import JanusProtocol

/// `conclave call`: start calls.
struct CallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Create end-to-end encrypted calls and their invitations.",
        subcommands: [Create.self]
    )

    /// `call create`: room, call key, one invitation per participant, our own copy of the key.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a call: the room (if needed), a fresh call key, and one invitation file per participant.",
            discussion: """
                Each --participant is USERID[:NAME]=PUBLIC_KEY, where PUBLIC_KEY is the device's public key \
                string as 'conclave keys show --public' prints it (or @FILE to read it from a file). The call \
                key is wrapped for each participant's device and for this device; this device's copy is \
                stored in the call key store so that 'conclave rejoin' can use it. Invitations are written \
                to --out as USERID.json, in ECall's invitation fields plus janusUrl and crypto.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions

        @Option(name: .customLong("call-id"), help: "The call id (a decimal number).")
        var callID: UInt64

        @Option(help: "The room id: used if it exists, created if not. Default: a new room Janus numbers.")
        var room: UInt64?

        @Option(
            name: .customLong("participant"),
            parsing: .singleValue,
            help: ArgumentHelp(
                "A participant: USERID[:NAME]=PUBLIC_KEY or USERID[:NAME]=@FILE (repeat).",
                valueName: "spec"
            )
        )
        var participants: [String] = []

        @Option(help: "Video codecs the room allows, in order: h264 (ECall), vp8, or h264,vp8.")
        var codecs: String = "h264,vp8"

        @Option(help: "Media crypto format written into the invitations: ecall or sframe.")
        var crypto: FrameCryptoFormat = .ecall

        @Option(help: "Our own display, USERID:NAME (default: the participant whose key is this device's).")
        var display: String?

        @Flag(name: .customLong("audio-only"), help: "Mark the call as audio only (isVideo false).")
        var audioOnly = false

        @Option(help: "Folder for the invitation files.")
        var out: String = "."

        func run() async throws {
            let logger = global.makeLogger()
            let store = try KeyStoreAccess.store(global)
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            let parsed = try participants.map(ParticipantSpec.init(parsing:))
            guard !parsed.isEmpty else { throw ValidationError("name at least one --participant") }
            let videoCodecs = codecs.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !videoCodecs.isEmpty, videoCodecs.allSatisfy({ $0 == "h264" || $0 == "vp8" }) else {
                throw ValidationError("--codecs: expected h264, vp8 or h264,vp8")
            }
            let ownKey = identity.publicKeyString
            let ownDisplay = display ?? parsed.first { $0.publicKey.publicKeyString == ownKey }?.display
            let url = try janus.resolvedURL()

            // Room first: nothing is written unless Janus has the room.
            let roomID = try await withVideoRoom(janus, logger: logger) { handle -> UInt64 in
                if let room, try await handle.roomExists(room) { return room }
                return try await handle.createRoom(
                    VideoRoom.RoomOptions(
                        room: room,
                        description: "conclave call \(callID)",
                        publishers: 16,
                        videoCodecs: videoCodecs,
                        bitrate: 1_500_000
                    )
                )
            }

            let key = CallKey.random()
            let caller = ownDisplay.map(ParticipantDisplay.init(parsing:))
            var written: [String] = []
            let folder = URL(fileURLWithPath: out, isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for participant in parsed {
                let invitation = CallInvitation(
                    callID: callID,
                    roomID: roomID,
                    encryptedAESKey: try KeyStoreAccess.run { try KeyWrapping.wrap(key, for: participant.publicKey) },
                    callerID: caller?.userID ?? caller?.name ?? "",
                    callerName: caller?.name ?? "",
                    isVideo: !audioOnly,
                    janusURL: url,
                    crypto: crypto,
                    recipient: .init(display: participant.display, publicKeyHash: participant.publicKey.publicKeyHash)
                )
                let file = folder.appendingPathComponent("\(participant.fileName).json")
                try Data(invitation.jsonText().utf8).write(to: file, options: .atomic)
                written.append(file.path)
            }

            let ownCopy = try KeyStoreAccess.run { try KeyWrapping.wrap(key, for: identity.publicKey) }
            try KeyStoreAccess.run {
                try store.calls.storeWrappedKey(ownCopy, for: callID)
                try store.calls.storeRejoinDetails(
                    for: callID,
                    janusURL: url,
                    room: roomID,
                    display: ownDisplay,
                    cryptoFormat: crypto
                )
            }
            print("Call \(callID) in room \(roomID) on \(url) (\(crypto), video \(videoCodecs.joined(separator: ",")))")
            for path in written { print("Invitation: \(path)") }
            print("This device's copy of the call key is stored for 'conclave join/rejoin'.")
        }
    }
}

/// One `--participant USERID[:NAME]=KEY` of `call create`.
struct ParticipantSpec {
    var display: String
    var fileName: String
    var publicKey: DevicePublicKey

    init(parsing text: String) throws {
        guard let equals = text.firstIndex(of: "=") else {
            throw ValidationError("--participant \(text.prefix(40)): expected USERID[:NAME]=PUBLIC_KEY")
        }
        let name = String(text[..<equals]).trimmingCharacters(in: .whitespaces)
        var keyText = String(text[text.index(after: equals)...])
        guard !name.isEmpty else { throw ValidationError("--participant: the user id before '=' is empty") }
        if keyText.hasPrefix("@") {
            let path = String(keyText.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("--participant \(name): cannot read the public key file \(path)")
            }
            keyText = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let parsed = ParticipantDisplay(parsing: name)
        display = parsed.userID == nil ? "\(name):\(name)" : name
        let userID = parsed.userID ?? name
        fileName = String(userID.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
        do {
            publicKey = try DevicePublicKey(publicKeyString: keyText)
        } catch {
            throw ValidationError("--participant \(name): \(error.description)")
        }
    }
}

extension FrameCryptoFormat: ExpressibleByArgument {}
