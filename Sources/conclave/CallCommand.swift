import ArgumentParser
import ConclaveE2EE
import ConclaveFiles
import ConclaveFormats
import ConclaveKeyStore
import ECallSignaling
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

                With --invite, each participant is USERID[:NAME]@DEVICEID=PUBLIC_KEY (numeric ids) and gets a \
                call_invitation signed by this device over the signaling broker (--broker); the roster lists \
                every participant and this device as the call's host. Invitation files are then written only \
                when --out is given.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions
        @OptionGroup var configFile: ConfigFileOption
        @OptionGroup var signaling: SignalingOptions

        @Flag(help: "Send each participant a signed invitation over the signaling broker.")
        var invite = false

        @Option(name: .customLong("call-id"), help: "The call id (a decimal number).")
        var callID: UInt64

        @Option(help: "The room id: used if it exists, created if not. Default: a new room Janus numbers.")
        var room: UInt64?

        @Option(
            name: .customLong("participant"),
            parsing: .singleValue,
            help: ArgumentHelp(
                "A participant: USERID[:NAME][@DEVICEID]=PUBLIC_KEY or ...=@FILE (repeat).",
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

        @Option(help: "Folder for the invitation files (created if missing; default: '.' without --invite).")
        var out: String?

        @Flag(help: "Overwrite invitation files that already exist in --out.")
        var force = false

        /// Checks everything that can be checked here (participants, ids, file names, the --out
        /// folder, public keys, our device key), then acts: room, invitations, our stored copy of
        /// the key. Bad input therefore leaves no room, no invitation and no key store entry
        /// behind, and is reported in one line.
        func run() async throws {
            let logger = global.makeLogger()
            // The configuration is read for the broker only, as before --invite existed.
            let settings = invite || configFile.config != nil ? try configFile.load() : ConclaveConfiguration()
            let store = try KeyStoreAccess.store(global)
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            let parsed = try participants.map(ParticipantSpec.init(parsing:))
            guard !parsed.isEmpty else { throw CallCommandError("name at least one --participant") }
            try ParticipantSpec.checkDistinct(parsed)
            // The broker and every invitee's ids are checked before anything is created.
            let broker = invite ? try signaling.resolve(settings: settings, store: store, required: true) : nil
            let invitees = try broker.map { try ParticipantSpec.invitees(parsed, host: $0.device.address) } ?? []
            let videoCodecs = codecs.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !videoCodecs.isEmpty, videoCodecs.allSatisfy({ $0 == "h264" || $0 == "vp8" }) else {
                throw CallCommandError("--codecs: expected h264, vp8 or h264,vp8")
            }
            if let display { try ParticipantSpec.checkDisplay(display, option: "--display") }
            let ownKey = identity.publicKeyString
            let ownDisplay = display ?? parsed.first { $0.publicKey.publicKeyString == ownKey }?.display
            let url = try janus.resolvedURL()
            let writesFiles = !invite || out != nil
            let folder = URL(fileURLWithPath: out ?? ".", isDirectory: true)
            let files = writesFiles ? parsed.map { folder.appendingPathComponent("\($0.fileName).json").path } : []
            if writesFiles { try checkOutput(folder: folder.path, files: files) }
            // Connected before the room exists: an unreachable broker or refused login creates nothing.
            let channel = try await broker?.connect(logger: logger)

            // Acting, local first: the folder, so that Janus gets a room only if we can write. A
            // folder made here is taken away again if Janus does not give us the room.
            var folderInfo = stat()
            let folderExisted = !writesFiles || stat(folder.path, &folderInfo) == 0
            do {
                if writesFiles { try PrivateFiles.ensureDirectoryExists(folder.path) }
            } catch {
                await channel?.close()
                throw CallCommandError("--out: \(error.description)")
            }
            let roomID: UInt64
            do {
                roomID = try await withVideoRoom(janus, logger: logger) { handle -> UInt64 in
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
            } catch {
                if !folderExisted { rmdir(folder.path) }
                await channel?.close()
                throw error
            }

            let key = CallKey.random()
            let caller = ownDisplay.map(ParticipantDisplay.init(parsing:))
            var texts: [String] = []
            for participant in parsed where writesFiles {
                let invitation = CallInvitation(
                    callID: callID,
                    roomID: roomID,
                    encryptedAESKey: try KeyStoreAccess.run { try KeyWrapping.wrap(key, for: participant.publicKey) },
                    callerID: caller?.userID.flatMap { UInt64($0) },
                    callerName: caller?.name ?? "",
                    isVideo: !audioOnly,
                    janusURL: url,
                    crypto: crypto,
                    recipient: .init(display: participant.display, publicKeyHash: participant.publicKey.publicKeyHash)
                )
                texts.append(invitation.jsonText())
            }
            let ownCopy = try KeyStoreAccess.run { try KeyWrapping.wrap(key, for: identity.publicKey) }
            // Over the broker: one signed invitation per invitee, and this device's own (addressed
            // to itself) kept with the key, whose roster later joins and rejoins start from.
            var messages: [(ParticipantSpec, SignalMessage)] = []
            var ownInvitation: String?
            if let broker {
                let host = broker.device.rosterEntry(isHost: true)
                let roster = [host] + invitees.map { $0.entry }
                do {
                    for invitee in invitees {
                        let message = try SignalMessage.callInvitation(
                            callId: callID,
                            roomId: roomID,
                            caller: host,
                            recipient: invitee.entry,
                            roster: roster,
                            key: key,
                            janusUrl: url,
                            crypto: crypto,
                            isVideo: !audioOnly,
                            signedBy: identity,
                            at: Date()
                        )
                        messages.append((invitee.spec, message))
                    }
                    var own = try SignalMessage.callInvitation(
                        callId: callID,
                        roomId: roomID,
                        caller: host,
                        recipient: host,
                        roster: roster,
                        key: key,
                        janusUrl: url,
                        crypto: crypto,
                        isVideo: !audioOnly,
                        signedBy: identity,
                        at: Date()
                    )
                    // The kept copy has no key: the key store holds keys in one place only.
                    own.encryptedAESKey = nil
                    ownInvitation = own.jsonBody()
                } catch {
                    await channel?.close()
                    throw CallCommandError("cannot sign the invitations: \(error)")
                }
            }

            // All or nothing: a write that fails takes the invitations already written with it.
            var written: [String] = []
            do {
                for (file, text) in zip(files, texts) {
                    try PrivateFiles.writeAtomically(Data(text.utf8), to: file)
                    written.append(file)
                }
            } catch {
                for file in written { try? PrivateFiles.removeFile(file) }
                throw CallCommandError("cannot write the invitations: \(error.description)")
            }
            do {
                try store.calls.storeWrappedKey(ownCopy, for: callID)
                try store.calls.storeRejoinDetails(
                    for: callID,
                    janusURL: url,
                    room: roomID,
                    display: broker?.device.display ?? ownDisplay,
                    cryptoFormat: crypto,
                    invitation: ownInvitation
                )
            } catch {
                for file in written { try? PrivateFiles.removeFile(file) }
                await channel?.close()
                throw CallCommandError("cannot store the call key (no invitation was kept): \(error.description)")
            }
            print("Call \(callID) in room \(roomID) on \(url) (\(crypto), video \(videoCodecs.joined(separator: ",")))")
            for path in written { print("Invitation: \(path)") }
            print("This device's copy of the call key is stored for 'conclave join/rejoin'.")
            guard let channel else { return }
            var failed = 0
            for (spec, message) in messages {
                let target = "\(spec.userID)@\(spec.deviceID ?? 0) (\(spec.name))"
                do {
                    try await channel.send(message.jsonBody(), toDevice: spec.deviceID ?? 0)
                    print("invited \(target): sent over the broker")
                } catch {
                    failed += 1
                    print("invited \(target): NOT sent: \(error)")
                }
            }
            await channel.close()
            if failed > 0 {
                throw CallCommandError("\(failed) of \(messages.count) invitations were not sent")
            }
        }

        /// Refuses an --out that is not a folder, and invitation paths that exist (unless --force)
        /// or are not regular files (a folder or FIFO is never overwritten, even with --force).
        private func checkOutput(folder: String, files: [String]) throws {
            var info = stat()
            if stat(folder, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw CallCommandError(
                        "--out \(folder): it is a \(PrivateFiles.fileTypeName(info.st_mode)), not a folder"
                    )
                }
                guard access(folder, W_OK | X_OK) == 0 else {
                    throw CallCommandError("--out \(folder): \(String(cString: strerror(errno)))")
                }
            } else if errno != ENOENT {
                throw CallCommandError("--out \(folder): \(String(cString: strerror(errno)))")
            }
            var existing: [String] = []
            for file in files where lstat(file, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFREG else {
                    throw CallCommandError(
                        "refusing \(file): it is a \(PrivateFiles.fileTypeName(info.st_mode)), not a regular file"
                    )
                }
                existing.append(file)
            }
            if !existing.isEmpty, !force {
                throw CallCommandError(
                    "\(existing.joined(separator: ", ")) already exist\(existing.count == 1 ? "s" : ""): "
                        + "pass --force to overwrite, or choose another --out"
                )
            }
        }
    }
}

/// One `--participant USERID[:NAME]=KEY` of `call create`.
struct ParticipantSpec {
    var userID: String
    var display: String
    var fileName: String
    var publicKey: DevicePublicKey
    /// The broker device id of `USERID[:NAME]@DEVICEID=...`; needed by `--invite`.
    var deviceID: UInt64?
    /// The public key string as given.
    var publicKeyString: String

    /// The human-readable name of the display.
    var name: String { ParticipantDisplay(parsing: display).name }

    /// The longest user id: it names a file, and ECall's ids are short.
    static let maximumUserIDLength = 128
    /// The longest display (`USERID:NAME`).
    static let maximumDisplayLength = 256

    init(parsing text: String) throws {
        guard let equals = text.firstIndex(of: "=") else {
            throw CallCommandError("--participant \(text.prefix(40)): expected USERID[:NAME]=PUBLIC_KEY")
        }
        var name = String(text[..<equals]).trimmingCharacters(in: .whitespaces)
        var keyText = String(text[text.index(after: equals)...])
        // `@DEVICEID` only when all digits: user ids such as `bob@example.org` keep working in the
        // file form, and `--invite` refuses a participant without a device id by name.
        if let at = name.lastIndex(of: "@"), let id = UInt64(name[name.index(after: at)...]) {
            deviceID = id
            name = String(name[..<at])
        }
        guard !name.isEmpty else { throw CallCommandError("--participant: the user id before '=' is empty") }
        let parsed = ParticipantDisplay(parsing: name)
        display = parsed.userID == nil ? "\(name):\(name)" : name
        userID = parsed.userID ?? name
        guard userID.count <= Self.maximumUserIDLength else {
            throw CallCommandError(
                "--participant \(userID.prefix(40))…: the user id has \(userID.count) characters, "
                    + "at most \(Self.maximumUserIDLength) are allowed"
            )
        }
        try Self.checkDisplay(name, option: "--participant")
        fileName = String(userID.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
        if keyText.hasPrefix("@") {
            let path = String(keyText.dropFirst())
            let data: Data?
            do {
                data = try PrivateFiles.readRegularFile(path, limit: 64 << 10)
            } catch {
                throw CallCommandError("--participant \(userID): \(error.description)")
            }
            guard let data else {
                throw CallCommandError("--participant \(userID): no public key file \(path)")
            }
            keyText = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        publicKeyString = keyText
        do {
            publicKey = try DevicePublicKey(publicKeyString: keyText)
        } catch {
            throw CallCommandError("--participant \(userID): \(error.description)")
        }
    }

    /// The roster entries of `--invite`: every participant but this device (`host`), each with
    /// numeric user and device ids.
    static func invitees(_ participants: [ParticipantSpec], host: DeviceAddress) throws -> [(
        spec: ParticipantSpec, entry: RosterEntry
    )] {
        var result: [(spec: ParticipantSpec, entry: RosterEntry)] = []
        for participant in participants {
            guard let userID = UInt64(participant.userID), let deviceID = participant.deviceID else {
                throw CallCommandError(
                    "--participant \(participant.userID.prefix(40)): --invite needs USERID[:NAME]@DEVICEID=PUBLIC_KEY "
                        + "with numeric ids"
                )
            }
            let device = DeviceAddress(userId: userID, deviceId: deviceID)
            if device == host { continue }
            guard !result.contains(where: { $0.entry.device == device }) else {
                throw CallCommandError("--participant \(userID)@\(deviceID) is given twice")
            }
            let entry = RosterEntry(
                userId: userID,
                deviceId: deviceID,
                displayName: participant.name,
                publicKey: participant.publicKeyString
            )
            result.append((participant, entry))
        }
        guard !result.isEmpty else { throw CallCommandError("--invite: no participant other than this device") }
        return result
    }

    /// Refuses an empty, overlong or multi-line display.
    static func checkDisplay(_ display: String, option: String) throws {
        guard
            !display.contains(where: {
                $0.isNewline || $0.unicodeScalars.contains { $0.properties.generalCategory == .control }
            })
        else {
            throw CallCommandError(
                "\(option) \(display.prefix(40).debugDescription): control characters are not allowed"
            )
        }
        guard display.count <= maximumDisplayLength else {
            throw CallCommandError(
                "\(option) \(display.prefix(40))…: \(display.count) characters, at most \(maximumDisplayLength) are allowed"
            )
        }
    }

    /// Refuses a user id given twice, and different ids that would share an invitation file
    /// (`a/b`, `a_b` and `a.b` all become `a_b.json`).
    static func checkDistinct(_ participants: [ParticipantSpec]) throws {
        var seen: Set<String> = []
        for participant in participants where !seen.insert(participant.userID).inserted {
            throw CallCommandError("--participant \(participant.userID) is given twice: one invitation per user id")
        }
        var owners: [String: [String]] = [:]
        for participant in participants { owners[participant.fileName, default: []].append(participant.userID) }
        for participant in participants {
            guard let ids = owners[participant.fileName], ids.count > 1 else { continue }
            throw CallCommandError(
                "--participant \(ids.joined(separator: ", ")): these user ids would share the invitation file "
                    + "\(participant.fileName).json; give them ids that differ in letters, digits, '-' or '_'"
            )
        }
    }
}

extension FrameCryptoFormat: ExpressibleByArgument {}
