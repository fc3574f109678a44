import ArgumentParser
import ConclaveCall
import ConclaveCapture
import ConclaveCore
import ConclaveE2EE
import ConclaveFormats
import ConclaveICE
import ConclaveKeyStore
import ConclaveMedia
import ConclavePeerConnection
import ECallSignaling
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave join`: take part in a call until Ctrl-C, SIGTERM or `--duration`.
struct JoinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join an end-to-end encrypted call: publish, subscribe to everyone, decrypt.",
        discussion: """
            The call is named by --invitation (an invitation file from 'conclave call create' or another \
            tool), or by --room and --call-id with the call key already in the key store. Flags override \
            the invitation, which overrides the configuration file. Leave with Ctrl-C or SIGTERM (or \
            --duration): Conclave unpublishes, leaves and destroys its Janus session, then exits 0.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var janus: JanusOptions
    @OptionGroup var call: CallOptions

    @Option(help: "The invitation file (ECall fields plus janusUrl and crypto).")
    var invitation: String?

    @Option(help: "The room id (default: the invitation's).")
    var room: UInt64?

    @Option(name: .customLong("call-id"), help: "The call id (default: the invitation's).")
    var callID: UInt64?

    @Option(help: "Our display, USERID:NAME (default: the invitation's recipient).")
    var display: String?

    @Option(
        help: "Media crypto: ecall, sframe or none (default: the invitation's, else the configuration's, else ecall)."
    )
    var crypto: String?

    func run() async throws {
        let settings = try call.loadConfiguration()
        let logger = global.makeLogger()
        let parsedInvitation: CallInvitation?
        do {
            parsedInvitation = try invitation.map { path throws(InvitationError) in try CallInvitation.read(from: path)
            }
        } catch {
            throw CallCommandError(error.description)
        }
        guard let callID = callID ?? parsedInvitation?.callID else {
            throw ValidationError("no call: pass --invitation FILE, or --call-id and --room")
        }
        let store = KeyStore(
            dataDirectory: try KeyStoreAccess.run {
                try DataDirectory.resolve(override: global.dataDirectory ?? settings.dataDirectory)
            }
        )
        // A call accepted with `conclave listen` or made with `call create` is in the key store
        // with its room and Janus: `join --call-id` is enough.
        let known = parsedInvitation == nil ? try? store.calls.record(for: callID) : nil
        guard let room = room ?? parsedInvitation?.roomID ?? known?.room else {
            throw ValidationError("no room: pass --invitation FILE or --room")
        }
        let choice = try CallOptions.cryptoChoice(
            crypto ?? parsedInvitation?.crypto?.rawValue ?? settings.crypto?.rawValue ?? known?.cryptoFormat?.rawValue
                ?? "ecall"
        )

        // The key: opened (never stored) before anything else happens, so a bad invitation leaves
        // the key store as it was.
        var key: CallKey?
        var storedRecord: CallKeyRecord?
        if let format = choice.format {
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            if let parsedInvitation, let path = invitation {
                do {
                    key = try parsedInvitation.openKey(with: identity, path: path)
                } catch {
                    throw CallCommandError(error.description)
                }
            } else {
                storedRecord = try KeyStoreAccess.run { try store.calls.record(for: callID) }
                guard let storedRecord else {
                    throw CallCommandError(
                        "no key stored for call \(callID) in \(store.keysDirectory.path): pass --invitation FILE (or --crypto none)"
                    )
                }
                key = try KeyStoreAccess.run { try store.openCallKey(storedRecord.wrappedKey, with: identity) }
            }
            _ = format
        }
        // Over the broker (flags, environment or configuration) the call's key rotates: the roster
        // of the invitation `conclave listen` kept says who may change it.
        let broker =
            choice.format == nil ? nil : try call.signaling.resolve(settings: settings, store: store, required: false)
        var roster: [RosterEntry]?
        if broker != nil {
            let record = try storedRecord ?? KeyStoreAccess.run { try store.calls.record(for: callID) }
            roster = SignalingContext.roster(of: record)
            if roster == nil {
                if call.signaling.requested {
                    throw CallCommandError(
                        "call \(callID) has no signed invitation in the key store: accept it with 'conclave listen' first"
                    )
                }
                logger.notice("no signed invitation stored for the call: its key is not coordinated over the broker")
            }
        }
        let chosenDisplay: String
        if let given = display ?? (roster != nil ? broker?.device.display : nil) ?? parsedInvitation?.recipient?.display
            ?? storedRecord?.display
        {
            chosenDisplay = given
        } else {
            let fallback = try Self.defaultDisplay(store)
            chosenDisplay = fallback.display
            FileHandle.standardError.write(
                Data(
                    "conclave: joining as \"\(CallOptions.normalizedDisplay(chosenDisplay))\" (\(fallback.source)); pass --display USERID:NAME to choose\n"
                        .utf8
                )
            )
        }
        let url =
            janus.url ?? parsedInvitation?.janusURL ?? ProcessInfo.processInfo.environment["CONCLAVE_JANUS_URL"]
            ?? settings.janusURL ?? known?.janusURL
        guard let url else {
            throw ValidationError(
                "no Janus URL: pass --janus ws://HOST:8188, use an invitation, or set CONCLAVE_JANUS_URL"
            )
        }

        var runner = CallRunner(
            options: call,
            settings: settings,
            janus: janus,
            janusURL: url,
            room: room,
            callID: callID,
            display: CallOptions.normalizedDisplay(chosenDisplay),
            crypto: choice,
            key: key,
            allowEarlierInstance: false,
            logger: logger
        )
        if let broker, let roster {
            let connected = try await broker.connect(logger: logger)
            runner.signaling = SignalingContext(
                setup: broker,
                channel: connected,
                roster: roster,
                store: store,
                epoch: storedRecord?.history.last?.epoch ?? 0,
                keepHistory: call.signaling.keepKeyHistory,
                close: { await connected.close() }
            )
        }
        try await runner.run { session in
            // Stored only once the call is joined: a refused join leaves the key store untouched.
            guard let parsedInvitation, choice.format != nil else {
                if choice.format != nil {
                    try? store.calls.storeRejoinDetails(
                        for: callID,
                        janusURL: url,
                        room: room,
                        display: CallOptions.normalizedDisplay(chosenDisplay),
                        cryptoFormat: choice.format
                    )
                }
                return
            }
            do {
                try store.calls.storeWrappedKey(parsedInvitation.encryptedAESKey, for: callID)
                try store.calls.storeRejoinDetails(
                    for: callID,
                    janusURL: url,
                    room: room,
                    display: CallOptions.normalizedDisplay(chosenDisplay),
                    cryptoFormat: choice.format
                )
            } catch {
                logger.warning("could not store the call key for rejoin", metadata: ["error": "\(error)"])
            }
        }
    }
}

extension JoinCommand {
    /// Our display when neither --display, the invitation nor the key store names one: the display
    /// stored with the device key (`keys init --display`), else the login name, so that a first
    /// `join --room --call-id` works without knowing about displays.
    static func defaultDisplay(_ store: KeyStore) throws -> (display: String, source: String) {
        if let stored = try? store.deviceDisplay(), !stored.isEmpty {
            return (stored, "the display stored with the device key")
        }
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name, !String(cString: name).isEmpty {
            return (String(cString: name), "the login name")
        }
        if let name = ProcessInfo.processInfo.environment["USER"], !name.isEmpty {
            return (name, "the login name from $USER")
        }
        throw CallCommandError("no display: pass --display USERID:NAME")
    }
}

/// The media, status, ICE and lifetime options `join` and `rejoin` share.
struct CallOptions: ParsableArguments {
    @OptionGroup var configFile: ConfigFileOption
    @OptionGroup var ice: ICEOptions
    @OptionGroup var signaling: SignalingOptions
    @OptionGroup var layers: LayerOption

    @Option(help: "Audio to send: tone, a media file, mic[:SOURCE] (PulseAudio; SIGUSR1 toggles mute), or none.")
    var audio: String = "tone"

    @Option(
        help: """
            Video to send: pattern (default), a media file, camera[:/dev/videoN][@WxH/FPS], \
            screen[:DISPLAY[+x,y,WxH]], or none. Given twice, a video and a screen: the screen is \
            shared beside the video as a stream of its own (--video camera --video screen).
            """
    )
    var video: [String] = []

    /// `--video` read: our feed's video and the screen shared beside it.
    var videoChoices: VideoChoices {
        get throws { try VideoChoices(parsing: video) }
    }

    @Option(help: "Video codec to send: h264 (ECall) or vp8.")
    var codec: MediaCodec?

    @Option(help: "Video width of the pattern or of transcoded files.")
    var width: Int?

    @Option(help: "Video height.")
    var height: Int?

    @Option(help: "Video frame rate (default: the configuration's, else 30).")
    var fps: Int?

    @Option(
        name: .customLong("video-bitrate"),
        help: "Video bitrate, bits per second (with --simulcast, the top layer's)."
    )
    var videoBitrate: Int?

    @Option(
        help: """
            Send the video as this many simulcast layers, 2 or 3 (1: none), each half the size and a \
            third of the bitrate of the one above; Janus forwards each subscriber the layer it picks \
            (--layer). Layers above what Janus's bitrate estimate (REMB) allows are paused.
            """
    )
    var simulcast: Int = 1

    @Option(help: "Record the call into this folder.")
    var record: String?

    @Option(
        help: """
            With --record: also write the call's composite while it runs (every participant tiled \
            with their name and the mixed audio, 1280x720/30) in FILE, .mkv (H264 + Opus) or .mp4 \
            (fragmented, H264 + AAC), which plays after a crash up to within a second of it. A bare \
            file name goes into the recording folder.
            """
    )
    var composite: String?

    func validate() throws {
        guard (1...3).contains(simulcast) else {
            throw ValidationError("--simulcast: \(SimulcastError.layerCount(simulcast))")
        }
        do {
            _ = try videoChoices
        } catch {
            throw ValidationError("\(error)")
        }
        if let composite {
            guard record != nil else { throw ValidationError("--composite needs --record DIR") }
            let ext = (composite as NSString).pathExtension.lowercased()
            guard ext == "mkv" || ext == "mp4" else {
                throw ValidationError("--composite must end in .mkv or .mp4, not \(composite)")
            }
            try LiveCompositeOutput.refuseExisting(composite, recording: record)
        }
    }

    @Flag(inversion: .prefixedNo, help: "Show the call window (default: with a DISPLAY and a terminal).")
    var window: Bool?

    @Option(
        help: """
            Play the call through PulseAudio: default (the default sink), a sink's name, or none \
            (default: the default sink when a terminal is attached, else none).
            """
    )
    var speaker: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Echo cancellation, noise suppression and gain on the microphone when the speaker plays too."
    )
    var aec = true

    @Option(help: "A participant's playback volume, USERID=LEVEL from 0 (silent) to 2 (repeatable).")
    var volume: [String] = []

    @Option(help: "Leave after this many seconds.")
    var duration: Double?

    @Option(help: "Status output: tty (a live table), json (one line per second), none (logs only).")
    var status: StatusMode?

    enum StatusMode: String, ExpressibleByArgument {
        case tty, json, none

        /// Prints `report` as this mode asks: a line of JSON, or the table redrawn in place.
        func show(_ report: some StatusReport) {
            switch self {
            case .json: print(report.jsonLine())
            case .tty: print("\u{1B}[H\u{1B}[2J" + report.terminalText())
            case .none: return
            }
            fflush(nil)
        }
    }

    /// The configuration file named by `--config`, or the default one if it exists.
    func loadConfiguration() throws -> ConclaveConfiguration { try configFile.load() }

    static func cryptoChoice(_ text: String) throws -> CallCryptoChoice {
        guard let choice = CallCryptoChoice(rawValue: text) else {
            throw ValidationError("--crypto: expected ecall, sframe or none, got \(text)")
        }
        return choice
    }

    /// `"<userId>:<name>"`; a display without a user id gets its name as user id.
    static func normalizedDisplay(_ display: String) -> String {
        ParticipantDisplay(parsing: display).userID == nil ? "\(display):\(display)" : display
    }

    func transport(_ settings: ConclaveConfiguration) throws -> MediaTransport.Configuration {
        try ice.transport(settings)
    }
}

extension MediaCodec: ExpressibleByArgument {}

/// Runs a call from the command line: sources, session, signals, status output, leaving.
struct CallRunner {
    var options: CallOptions
    var settings: ConclaveConfiguration
    var janus: JanusOptions
    var janusURL: String
    var room: UInt64
    var callID: UInt64
    var display: String
    var crypto: CallCryptoChoice
    var key: CallKey?
    var allowEarlierInstance: Bool
    var logger: Logger
    /// The broker that carries the call's key messages; nil for a call whose key never changes.
    var signaling: SignalingContext? = nil

    /// Joins, calls `joined` once in the call, runs until a signal or the duration, leaves.
    func run(joined: (CallSession) async throws -> Void) async throws {
        let origin = ContinuousClock.now
        let stop = StopSignals()
        // Observers of everything the call receives: the recorder, when asked for. It must see the
        // call from its first event, so it starts before joining (`CallRecorder` refuses a folder
        // that already holds a recording before writing anything).
        var recording: RecordingSession?
        if let directory = options.record {
            do {
                recording = try RecordingSession(
                    configuration: .init(
                        directory: directory,
                        callID: "\(callID)",
                        room: room,
                        janusURL: janusURL,
                        recorderVersion: conclaveVersion,
                        cryptoFormat: crypto.format?.rawValue ?? "none",
                        keyEpochs: key == nil ? [] : [signaling?.epoch ?? 0]
                    ),
                    logger: logger,
                    datagramDelay: ReceiveBatching.interactive.maximumDelay
                )
            } catch {
                throw CallCommandError("cannot record into \(directory): \(error)")
            }
        }
        var observers: [any CallMediaObserver] = recording.map { [$0] } ?? []
        var liveComposite: LiveCompositeOutput?
        if let composite = options.composite, let directory = options.record {
            do {
                liveComposite = try LiveCompositeOutput(
                    path: LiveCompositeOutput.path(composite, recording: directory),
                    frameRate: nil
                )
            } catch {
                _ = await recording?.finish()
                throw error
            }
        }
        if let liveComposite { observers.append(liveComposite) }
        let codec = options.codec ?? settings.videoCodec ?? .h264
        guard codec.kind == .video else { throw ValidationError("--codec: expected h264 or vp8") }
        let videoSettings = CallVideoSettings(
            codec: codec,
            width: options.width ?? settings.videoWidth ?? 640,
            height: options.height ?? settings.videoHeight ?? 480,
            frameRate: options.fps ?? settings.videoFrameRate ?? PatternSource.defaultFrameRate,
            bitrate: options.videoBitrate ?? settings.videoBitrate ?? 600_000,
            simulcastLayers: options.simulcast
        )
        // The window's `s` shares the screen through the session, which exists once joined.
        let sessionForKeys = Mutex<CallSession?>(nil)
        let controls = WindowControls(
            toggleMute: { LiveAudio.toggleMute() ?? "no microphone to mute (--audio mic)" },
            toggleCamera: { LiveVideo.toggleOff() },
            toggleScreenShare: { [logger] in
                guard let session = sessionForKeys.withLock({ $0 }) else { return "not in the call yet" }
                return await LiveVideo.toggleScreenShare(in: session, settings: videoSettings, logger: logger)
            }
        )
        let callWindow = await CallWindowOutput.start(options.window, callID: callID, stop: stop, controls: controls)
        if let callWindow { observers.append(callWindow) }
        let echo = LiveAudio.echoCanceller(options)
        let speaker = await SpeakerOutput.start(
            options.speaker,
            echo: echo,
            volumes: try SpeakerOutput.volumes(options.volume)
        ) { [window = callWindow?.window] speaker in window?.activeSpeaker(id: speaker) }
        if let speaker { observers.append(speaker) }

        var sources: [RebasingFrameSource] = []
        var screen: RebasingFrameSource?
        let choices = try options.videoChoices
        do {
            if let audio = try await LiveAudio.audio(
                CallMediaChoice(options.audio, generatedName: "tone"),
                bitrate: settings.audioBitrate ?? 32_000,
                echo: speaker == nil ? nil : echo
            ) {
                sources.append(audio)
            }
            if let video = try await LiveVideo.source(
                choices.main,
                options: options,
                settings: videoSettings,
                switchable: callWindow != nil,
                logger: logger
            )
                ?? CallMediaSources.video(
                    CallMediaChoice(choices.main, generatedName: "pattern"),
                    settings: videoSettings
                )
            {
                sources.append(video)
            }
            if let request = choices.screen {
                screen = try await LiveVideo.screenBeside(request, settings: videoSettings, logger: logger)
            }
        } catch {
            throw CallCommandError("cannot open the media to send: \(error)")
        }

        var frameCrypto: CallFrameCrypto?
        var brokerKeys: BrokerKeys?
        if let format = crypto.format, let signaling {
            var epochApplied: (@Sendable (CallKeyCoordinator.AppliedEpoch) -> Void)?
            if let recording {
                epochApplied = { recording.keyEpochApplied($0.epoch, validFrom: $0.validFrom) }
            }
            let keys = try await BrokerKeys.start(
                context: signaling,
                callID: callID,
                format: format,
                key: key,
                logger: logger,
                epochApplied: epochApplied
            )
            brokerKeys = keys
            frameCrypto = keys.crypto
            observers.append(keys.coordinator.participantObserver)
        } else if let format = crypto.format, let key {
            let crypto = CallFrameCrypto(callID: callID, format: format, logger: logger)
            crypto.keyRing.install(key, epoch: 0)
            frameCrypto = crypto
        }
        let connectionOptions = janus.connectionOptions(settings: settings)

        // Datagrams are read at most 5 ms apart rather than one wakeup each: half the receive
        // thread's wakeups, a delay the 20 ms audio frames do not notice.
        var transport = try options.transport(settings)
        transport.receiveBatching = .interactive
        var callConfiguration = CallSession.Configuration(
            janusURL: janusURL,
            connectionOptions: connectionOptions,
            room: room,
            callID: callID,
            display: display,
            crypto: frameCrypto,
            transport: transport,
            allowEarlierInstance: allowEarlierInstance,
            roomOptions: .init(room: room, videoCodecs: ["h264", "vp8"]),
            layers: try options.layers.selection(standard: .auto)
        )
        // `auto` asks for no more than the window's tiles show.
        if let window = callWindow?.window {
            callConfiguration.shownVideo = { feed in
                window.shownPictures()[feed].map {
                    ShownVideo(drawnHeight: $0.drawnHeight, pictureHeight: $0.pictureHeight)
                }
            }
        }
        let session = CallSession(
            configuration: callConfiguration,
            sources: sources,
            screen: screen,
            observers: observers,
            tracker: CallStatusTracker(origin: origin),
            logger: logger
        )
        // The recorder asks for the keyframes it misses through the call's current subscription
        // (the call creates a new one when it recovers). A task per request keeps the recorder
        // thread from waiting for the call; requests come at most once a second per feed.
        recording?.setKeyframeRequester { [weak session] feedID in
            guard let session else { return }
            Task { await session.requestKeyframe(feedID: feedID) }
        }
        let mode = options.status ?? (isatty(STDOUT_FILENO) == 1 ? .tty : .none)
        do {
            try await session.join()
        } catch {
            await brokerKeys?.coordinator.stop(keepHistory: signaling?.keepHistory ?? false)
            await signaling?.close()
            _ = await liveComposite?.finish()
            _ = await recording?.finish()
            await callWindow?.close()
            throw CallCommandError(error.description)
        }
        try await joined(session)
        sessionForKeys.withLock { $0 = session }
        callWindow?.follow(session)
        if let brokerKeys, key == nil {
            // Scripts wait for this line.
            print("no key for call \(callID): asking the participants for it (rejoin by request)")
            fflush(nil)
            await brokerKeys.coordinator.requestRejoin()
        }

        let keysForStatus = brokerKeys
        let compositeForStatus = liveComposite
        let printer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if Task.isCancelled { return }
                let figures = compositeForStatus.map { CompositeFigures($0.composite.figures) }
                if let brokerKeys = keysForStatus {
                    let keyed = KeyedStatus(report: await session.status(), keys: await brokerKeys.figures())
                    mode.show(CompositeStatus(report: keyed, composite: figures), speaker: speaker)
                } else {
                    mode.show(CompositeStatus(report: await session.status(), composite: figures), speaker: speaker)
                }
            }
        }
        let reason = await stop.wait(timeout: options.duration.map { Duration.milliseconds(Int64($0 * 1000)) })
        logger.info("leaving", metadata: ["reason": "\(Self.callEnd(reason))"])
        printer.cancel()
        let final = await session.status()
        await session.leave()
        await callWindow?.close()
        speaker?.stop()
        let compositeReport = await liveComposite?.finish()
        await brokerKeys?.coordinator.stop(keepHistory: (signaling?.keepHistory ?? false) || options.record != nil)
        await signaling?.close()
        if let recording {
            _ = await recording.finish()
            logger.notice("recording finished", metadata: ["directory": "\(options.record ?? "")"])
        }
        var last = final
        last.state = await session.currentPhase
        last.janus = .closed
        let figures = compositeReport.map(CompositeFigures.init(report:))
        if let brokerKeys {
            mode.show(
                CompositeStatus(
                    report: KeyedStatus(report: last, keys: await brokerKeys.figures()),
                    composite: figures
                ),
                speaker: speaker
            )
        } else {
            mode.show(CompositeStatus(report: last, composite: figures), speaker: speaker)
        }
        if mode == .tty { print("") }
        speaker?.printSummary()
        if let compositeReport {
            print(LiveCompositeOutput.summary(compositeReport))
            for problem in compositeReport.problems { print("composite problem: \(problem)") }
        }
    }

    /// What ended the call, as the log names it.
    static func callEnd(_ reason: StopReason) -> CallEnd {
        switch reason {
        case .signal(SIGINT): .interrupt
        case .signal: .terminate
        case .duration: .duration
        }
    }
}

/// An error shown as its message alone (exit status 1).
struct CallCommandError: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
