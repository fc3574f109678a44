import ArgumentParser
import ConclaveCall
import ConclaveE2EE
import ConclaveFiles
import ConclaveFormats
import ConclaveKeyStore
import ConclaveRecorder
import Dispatch
import ECallSignaling
import Foundation
import JanusClient
import Logging

/// `conclave record`: records every participant of a call without taking part in it.
struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record every participant of a call, decrypted, one file per participant and segment.",
        discussion: """
            Joins the room without publishing, subscribes to every publisher, and writes WebM (VP8 + Opus) \
            or Matroska (H264 + Opus) files without transcoding, with a journal per track and manifest.json. \
            Stops after --duration seconds, or on Ctrl-C / SIGTERM, finishing every file cleanly. After a \
            crash, `conclave recordings repair DIR` rebuilds the files from the journals.
            """
    )

    enum Crypto: String, ExpressibleByArgument, CaseIterable {
        case ecall, sframe, none
    }

    @OptionGroup var global: GlobalOptions
    @OptionGroup var janus: JanusOptions
    @OptionGroup var configFile: ConfigFileOption
    @OptionGroup var ice: ICEOptions
    @OptionGroup var signaling: SignalingOptions
    @OptionGroup var layers: LayerOption

    @Option(help: "The VideoRoom room id.")
    var room: UInt64

    @Option(name: .customLong("call-id"), help: "The call id (part of the E2EE nonce and the manifest).")
    var callID: UInt64

    @Option(
        help: "A file holding the invitation: ECall's wrapped key (encryptedAESKey) for this device, as JSON or alone."
    )
    var invitation: String?

    @Option(name: .customLong("key-file"), help: "A file holding the call key as 64 hexadecimal characters.")
    var keyFile: String?

    @Option(
        help:
            "Where to write the recording. Default: call-<id>-<UTC time> in the configuration's recordingsDirectory, else in recordings/."
    )
    var out: String?

    @Option(help: "Stop after this many seconds (default: until Ctrl-C or SIGTERM).")
    var duration: Double?

    @Option(help: "End-to-end encryption of the call: ecall (default), sframe, or none.")
    var crypto: Crypto = .ecall

    @Option(help: "The display name the recorder joins the room with.")
    var display: String = "recorder"

    @Option(
        help:
            "Status output: tty (a live table), json (one line per second), none. Default: tty on a terminal, else json."
    )
    var status: CallOptions.StatusMode?

    @Option(
        help: """
            Also write the call's composite while it runs: every participant tiled with their name \
            and the mixed audio, 1280x720/30, in FILE (.mkv: H264 + Opus; .mp4: fragmented, H264 + \
            AAC), which plays after a crash up to within a second of it. A bare file name goes into \
            the recording folder. Input video the composite cannot keep up with is dropped and \
            counted (status lines, FILE.json).
            """
    )
    var composite: String?

    func validate() throws {
        if let composite {
            let ext = (composite as NSString).pathExtension.lowercased()
            guard ext == "mkv" || ext == "mp4" else {
                throw ValidationError("--composite must end in .mkv or .mp4, not \(composite)")
            }
            try LiveCompositeOutput.refuseExisting(composite, recording: out)
        }
    }

    func run() async throws {
        let logger = global.makeLogger(label: "conclave.record")
        let settings = try configFile.load()
        let environment = ProcessInfo.processInfo.environment
        guard let url = janus.url ?? environment["CONCLAVE_JANUS_URL"] ?? settings.janusURL else {
            throw ValidationError(
                "no Janus URL: pass --janus ws://HOST:8188, set CONCLAVE_JANUS_URL, or janus.url in the configuration"
            )
        }
        var transport = try ice.transport(settings)
        // Nothing is played back: datagrams may wait up to 40 ms, read in fewer wakeups.
        transport.receiveBatching = .recording
        // Keys first: with no key there is nothing to record, so refuse before touching the network.
        let key = try loadKey(dataDirectory: settings.dataDirectory)
        var frameCrypto: CallFrameCrypto?
        if let format = FrameCryptoFormat(rawValue: crypto.rawValue) {
            guard let key else {
                throw RecordCommandError(
                    message:
                        "no call key for call \(callID): pass --invitation FILE or --key-file FILE (or store the key with the key store); refusing to record a call that cannot be decrypted"
                )
            }
            let callCrypto = CallFrameCrypto(callID: callID, format: format, logger: logger)
            callCrypto.keyRing.install(key.key, epoch: key.epoch)
            frameCrypto = callCrypto
        }
        // Over the broker the recorder follows the call's key rotations as an invited device: the
        // roster of the invitation `conclave listen` kept says who may change the key.
        var broker: (setup: BrokerSetup, roster: [RosterEntry], store: KeyStore)?
        if crypto != .none {
            let store = try KeyStoreAccess.store(global, configured: settings.dataDirectory)
            if let setup = try signaling.resolve(settings: settings, store: store, required: false) {
                let record = try KeyStoreAccess.run { try store.calls.record(for: callID) }
                if let roster = SignalingContext.roster(of: record) {
                    broker = (setup, roster, store)
                } else if signaling.requested {
                    throw RecordCommandError(
                        message:
                            "call \(callID) has no signed invitation in the key store: accept it with 'conclave listen' first"
                    )
                }
            }
        }
        let directory = out ?? Self.defaultDirectory(callID: callID, in: settings.recordingsDirectory ?? "recordings")
        // An existing recording is refused before anything touches the network or the disk.
        do {
            try CallRecorder.checkNewRecordingFolder(directory)
        } catch {
            throw RecordCommandError(message: error.description)
        }

        let signals = StopSignals()
        let channel = try await broker?.setup.connect(logger: logger)
        let connection = try await JanusConnection.connect(
            to: url,
            options: janus.connectionOptions(settings: settings),
            logger: logger
        )
        let listener: RoomListener
        do {
            listener = try await RoomListener.join(
                on: try await connection.createSession(),
                room: room,
                display: display
            )
        } catch {
            await connection.close()
            throw error
        }
        // Nothing is written before the room is joined: a wrong room, URL or secret leaves no
        // empty recording folder behind.
        let recording: RecordingSession
        do {
            recording = try RecordingSession(
                configuration: .init(
                    directory: directory,
                    callID: "\(callID)",
                    room: room,
                    janusURL: url,
                    recorderVersion: conclaveVersion,
                    cryptoFormat: crypto.rawValue,
                    keyEpochs: key.map { [$0.epoch] } ?? []
                ),
                logger: logger,
                datagramDelay: transport.receiveBatching?.maximumDelay ?? .zero
            )
        } catch {
            await listener.leave()
            await connection.close()
            await channel?.close()
            throw RecordCommandError(message: error.description)
        }
        var observers: [any CallMediaObserver] = [recording]
        var liveComposite: LiveCompositeOutput?
        if let composite {
            do {
                liveComposite = try LiveCompositeOutput(
                    path: LiveCompositeOutput.path(composite, recording: directory),
                    frameRate: nil
                )
            } catch {
                _ = await recording.finish()
                await listener.leave()
                await connection.close()
                await channel?.close()
                throw error
            }
        }
        if let liveComposite { observers.append(liveComposite) }
        var brokerKeys: BrokerKeys?
        if let broker, let channel, let format = FrameCryptoFormat(rawValue: crypto.rawValue) {
            let keys = try await BrokerKeys.start(
                context: SignalingContext(
                    setup: broker.setup,
                    channel: channel,
                    roster: broker.roster,
                    store: broker.store,
                    epoch: key?.epoch ?? 0,
                    keepHistory: true
                ),
                callID: callID,
                format: format,
                key: key?.key,
                logger: logger,
                epochApplied: { recording.keyEpochApplied($0.epoch, validFrom: $0.validFrom) }
            )
            brokerKeys = keys
            frameCrypto = keys.crypto
            observers.append(keys.coordinator.participantObserver)
        }
        let subscription = RoomSubscription(
            session: try await connection.createSession(),
            configuration: .init(
                room: room,
                ownFeedID: listener.joined.id,
                crypto: frameCrypto,
                transport: transport,
                // The recording keeps the best picture there is unless told otherwise.
                layers: try layers.selection(standard: .fixed(.high))
            ),
            initialPublishers: listener.joined.publishers,
            roomEvents: listener.roomEvents,
            observers: observers,
            logger: logger
        )
        // A recording that misses a keyframe asks the sender for one through the subscriber that
        // receives it (created after the recording, which it feeds). A task per request keeps the
        // recorder thread from waiting for the receive thread; requests come at most once a
        // second per feed.
        recording.setKeyframeRequester { [weak subscription] feedID in
            guard let subscription else { return }
            Task { await subscription.requestKeyframe(feedID: feedID) }
        }
        // Tests and scripts wait for this line.
        FileHandle.standardOutput.write(Data("recording room \(room) into \(directory)\n".utf8))

        let mode = status ?? (isatty(STDOUT_FILENO) == 1 ? .tty : .json)
        let origin = ContinuousClock.now
        // No status wanted, no snapshot asked for: the recorder then builds none.
        let keysForStatus = brokerKeys
        let compositeForStatus = liveComposite
        let printer = Task {
            while mode != .none, !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if Task.isCancelled { return }
                guard let manifest = recording.snapshot() else { continue }
                let layers = (subscription.subscriber?.receivedLayers ?? [:]).mapValues(\.description)
                let status = RecordingStatus(
                    manifest: manifest,
                    directory: directory,
                    elapsed: ContinuousClock.now - origin,
                    layers: layers
                )
                let figures = compositeForStatus.map { CompositeFigures($0.composite.figures) }
                if let brokerKeys = keysForStatus {
                    let keyed = KeyedStatus(report: status, keys: await brokerKeys.figures())
                    mode.show(CompositeStatus(report: keyed, composite: figures))
                } else {
                    mode.show(CompositeStatus(report: status, composite: figures))
                }
            }
        }
        let reason = await signals.wait(timeout: duration.map { Duration.milliseconds(Int64($0 * 1000)) })
        printer.cancel()
        logger.notice("stopping", metadata: ["reason": "\(Self.describe(reason))"])
        let finalLayers = (subscription.subscriber?.receivedLayers ?? [:]).mapValues(\.description)
        await subscription.close()
        let compositeReport = await liveComposite?.finish()
        // Every epoch stays in the key store: `recordings repair` may need any of them.
        await brokerKeys?.coordinator.stop(keepHistory: true)
        await channel?.close()
        let manifest = await recording.finish()
        await listener.leave()
        await connection.close()
        let final = RecordingStatus(
            manifest: manifest,
            directory: directory,
            elapsed: ContinuousClock.now - origin,
            state: "finished",
            layers: finalLayers
        )
        let figures = compositeReport.map(CompositeFigures.init(report:))
        if let brokerKeys {
            let keyed = KeyedStatus(report: final, keys: await brokerKeys.figures())
            mode.show(CompositeStatus(report: keyed, composite: figures))
        } else {
            mode.show(CompositeStatus(report: final, composite: figures))
        }
        if mode == .tty { print("") }
        Self.printSummary(manifest, directory: directory)
        if let compositeReport {
            print(LiveCompositeOutput.summary(compositeReport))
            for problem in compositeReport.problems { print("composite problem: \(problem)") }
        }
    }

    struct LoadedKey {
        var key: CallKey
        var epoch: UInt64
    }

    private func loadKey(dataDirectory: String?) throws -> LoadedKey? {
        if let keyFile {
            let text = try readSecretFile(keyFile)
            do {
                return LoadedKey(key: try CallKey(hex: text.trimmingCharacters(in: .whitespacesAndNewlines)), epoch: 0)
            } catch {
                throw RecordCommandError(message: "\(keyFile): \(error)")
            }
        }
        if let invitation {
            let identity = try KeyStoreAccess.identity(global, configured: dataDirectory)
            let text = try readSecretFile(invitation).trimmingCharacters(in: .whitespacesAndNewlines)
            do {
                // The invitation `conclave call create` writes (the same file `join` reads), which
                // also refuses an invitation meant for another device...
                if text.hasPrefix("{") {
                    let parsed = try CallInvitation.read(from: invitation)
                    return LoadedKey(key: try parsed.openKey(with: identity, path: invitation), epoch: 0)
                }
                // ...or ECall's wrapped key (encryptedAESKey) alone.
                return LoadedKey(key: try KeyWrapping.unwrap(text, with: identity), epoch: 0)
            } catch let error as InvitationError {
                throw RecordCommandError(message: error.description)
            } catch {
                throw RecordCommandError(message: "\(invitation): \(error)")
            }
        }
        // A key stored for this call (by `conclave join` or an invitation handled earlier).
        let store = try KeyStoreAccess.store(global, configured: dataDirectory)
        guard store.hasDeviceIdentity else { return nil }
        let record = try KeyStoreAccess.run { try store.calls.record(for: callID) }
        guard let record else { return nil }
        let identity = try KeyStoreAccess.identity(global)
        do {
            // Also tries the device keys `keys init --force` replaced.
            let key = try store.openCallKey(record.wrappedKey, with: identity)
            return LoadedKey(key: key, epoch: record.history.map(\.epoch).max() ?? 0)
        } catch {
            throw RecordCommandError(message: "the stored key of call \(callID): \(error)")
        }
    }

    /// A key or invitation file: a regular file (a FIFO or folder is refused at once), at most 64 KiB.
    private func readSecretFile(_ path: String) throws -> String {
        do {
            return String(decoding: try PrivateFiles.readExistingRegularFile(path, limit: 64 << 10), as: UTF8.self)
        } catch {
            throw RecordCommandError(message: error.description)
        }
    }

    static func defaultDirectory(callID: UInt64, in parent: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let name = "call-\(callID)-\(formatter.string(from: Date()))"
        return parent.hasSuffix("/") ? parent + name : parent + "/" + name
    }

    static func printSummary(_ manifest: RecordingManifest, directory: String) {
        for participant in manifest.participants {
            for segment in participant.segments {
                guard let file = segment.file else { continue }
                let frames = segment.tracks.map { "\($0.kind) \($0.framesWritten)" }.joined(separator: ", ")
                print("\(directory)/\(file): \(participant.display ?? participant.key) (\(frames))")
            }
        }
        for entry in manifest.notRecorded {
            print("not recorded: \(entry.display ?? entry.key): \(entry.reason)")
        }
    }

    /// How the log names what ended the recording.
    static func describe(_ reason: StopReason) -> String {
        switch reason {
        case .signal(SIGINT): "SIGINT"
        case .signal: "SIGTERM"
        case .duration: "duration reached"
        }
    }
}

/// An error shown as its message alone.
struct RecordCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
