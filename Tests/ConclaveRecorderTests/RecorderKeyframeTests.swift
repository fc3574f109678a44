import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A test-bed H264 publisher whose encoder makes keyframes only when asked, as many senders do:
/// one keyframe at the start, then delta frames only, and a keyframe for each request (PLI or
/// FIR) Janus passes on.
///
/// Its frames are encrypted (ecall) with a key the recorder does not have until
/// ``switchToCallKey()``, so every keyframe sent before the switch (the first one, and the answers
/// to the requests Janus and the subscriber's jitter buffer send when a subscriber arrives) is
/// lost to the recorder, which then receives delta frames it can decrypt but not decode. The
/// jitter buffer saw those keyframes and is content: it asks for nothing more, so only the
/// recorder can. The switch is made on a frame that answers no request, a second after the last
/// request, so the first frame with the call key is always a delta frame and only a request sent
/// after the switch brings the recorder a keyframe.
final class OnDemandKeyframePublisher: Sendable {
    /// What the publisher did, for the assertions.
    struct Report: Sendable {
        var switchedAt: ContinuousClock.Instant?
        /// The first keyframe sent after the switch.
        var firstKeyframeAfterSwitch: ContinuousClock.Instant?
        var keyframesBeforeSwitch = 0
        var keyframesAfterSwitch = 0
        var requestsBeforeSwitch = 0
        var requestsAfterSwitch = 0
        var framesSent = 0
        var error: String?
    }

    private struct Control {
        var switchWanted = false
        var switched = false
        /// When the last keyframe request arrived.
        var lastRequest: ContinuousClock.Instant?
        var stop = false
        var report = Report()
    }

    let publisher: Publisher
    private let control = Mutex(Control())
    private let keyframeAsked = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let requests = Mutex<Task<Void, Never>?>(nil)

    /// Publishes into `room` and starts sending at 30 frames a second on a thread of its own.
    init(
        on connection: JanusConnection,
        room: UInt64,
        display: String,
        callKey: CallKey,
        callID: UInt64,
        address: String,
        logger: Logger
    ) async throws {
        publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: display,
                audio: nil,
                video: .h264,
                endToEndEncrypted: true,
                transport: .init(localAddresses: [address])
            ),
            logger: logger
        )
        let keyframeRequests = publisher.keyframeRequests
        let listener = Task { [self] in
            for await _ in keyframeRequests {
                keyframeAsked.store(true, ordering: .releasing)
                control.withLock { control in
                    control.lastRequest = .now
                    if control.switched {
                        control.report.requestsAfterSwitch += 1
                    } else {
                        control.report.requestsBeforeSwitch += 1
                    }
                }
            }
        }
        requests.withLock { $0 = listener }
        let feedID = publisher.feedID
        func encryptor(_ key: CallKey) -> FrameEncryptor {
            let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
            crypto.keyRing.install(key, epoch: 0)
            return crypto.makeEncryptor(codec: .h264, senderID: feedID, cipher: OpenSSLFrameCipher.self)
        }
        let wrong = encryptor(CallKey.random())
        let right = encryptor(callKey)
        let thread = Thread { [self] in
            do {
                try send(wrong: wrong, right: right)
            } catch {
                control.withLock { $0.report.error = "\(error)" }
            }
            done.signal()
        }
        thread.name = "on-demand-keyframes"
        thread.start()
    }

    /// From the next frame that answers no keyframe request on, frames carry the call key.
    func switchToCallKey() {
        control.withLock { $0.switchWanted = true }
    }

    var report: Report { control.withLock { $0.report } }

    /// Stops sending and leaves the room; returns what was done.
    func stop() async -> Report {
        control.withLock { $0.stop = true }
        // The sending thread checks `stop` before every frame (33 ms apart).
        _ = done.wait(timeout: .now() + .seconds(5))
        requests.withLock { $0?.cancel() }
        await publisher.leave()
        return report
    }

    /// The sending loop (its own thread): frames paced by the pattern's timeline.
    private func send(wrong: FrameEncryptor, right: FrameEncryptor) throws {
        // H264 as configured here makes an IDR frame first and then only when forced (no intra
        // period, no scene-change detection): the frames below are delta frames unless asked.
        let source = EncodingVideoSource(
            raw: try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: 30 * 120),
            encoder: try VideoEncoderSettings(codec: .h264, width: 320, height: 240, bitrate: 300_000).makeEncoder()
        )
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let asked = keyframeAsked.exchange(false, ordering: .acquiringAndReleasing)
            let (stop, switched) = control.withLock { control -> (Bool, Bool) in
                // A request answered just before the switch may still be on its way (the
                // publisher defers requests that come less than 300 ms apart): the switch waits
                // for a second without requests.
                if control.switchWanted, !control.switched, !asked,
                    control.lastRequest.map({ clock.now - $0 > .seconds(1) }) ?? true
                {
                    control.switched = true
                    control.report.switchedAt = clock.now
                }
                return (control.stop, control.switched)
            }
            if stop { return }
            if asked { source.requestKeyframe() }
            guard let timed = try source.nextFrame() else { return }
            // Pacing, not synchronisation: a frame goes out when its capture time comes.
            let wait = start.advanced(by: timed.mediaTime) - clock.now
            if wait > .zero { Thread.sleep(forTimeInterval: seconds(wait)) }
            publisher.send(try (switched ? right : wrong).encrypt(timed.frame))
            let keyframe = timed.frame.isKeyframe
            control.withLock { control in
                control.report.framesSent += 1
                guard keyframe else { return }
                if switched {
                    control.report.keyframesAfterSwitch += 1
                    if control.report.firstKeyframeAfterSwitch == nil {
                        control.report.firstKeyframeAfterSwitch = clock.now
                    }
                } else {
                    control.report.keyframesBeforeSwitch += 1
                }
            }
        }
    }
}

/// The recorder asks senders for the keyframes it needs (an RTCP PLI through its subscriber) and
/// so records video from a sender that sends keyframes only when asked.
@Suite("Recorder keyframe requests", .serialized)
struct RecorderKeyframeTests {

    /// Decodes a `--status json` line, nil for other output.
    func status(_ line: String) -> RecordingStatus? {
        guard line.hasPrefix("{") else { return nil }
        return try? JSONDecoder().decode(RecordingStatus.self, from: Data(line.utf8))
    }

    /// Reads status lines until one satisfies `condition` or `limit` passes; returns that line.
    func waitForStatus(
        _ recorder: BackgroundProcess,
        within limit: Duration,
        _ condition: (RecordingStatus) -> Bool
    ) -> RecordingStatus? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            guard let line = try? recorder.readLine(timeout: .seconds(5)), let status = status(line) else { continue }
            if condition(status) { return status }
        }
        return nil
    }

    /// Runs the `conclave` binary to completion; throws with its error output when it fails.
    func run(_ arguments: [String]) throws -> String {
        let result = try runProcess(try TestPaths.conclave(), arguments, timeout: .seconds(60))
        guard result.succeeded else {
            throw SubprocessError(description: "conclave \(arguments.first ?? ""): \(result.errorOutput)")
        }
        return result.output
    }

    /// Reads the manifest until it satisfies `condition` or `limit` passes; returns that manifest.
    func waitForManifest(
        _ directory: String,
        within limit: Duration,
        _ condition: (RecordingManifest) -> Bool
    ) async throws -> RecordingManifest? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            // Rewritten (atomically) within half a second of a track or file appearing.
            if let manifest = try? RecordingManifest.read(from: directory), condition(manifest) { return manifest }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    @Test(
        "record misses a sender's only keyframe (it did not decrypt), asks for one and starts the video within 1.5 s"
    )
    func recordAsksForMissedKeyframe() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-record-keyframe")
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["h264"]))
        let callID: UInt64 = 0x5EC0_0042
        let key = CallKey.random()
        let keyFile = directory.appendingPathComponent("call.key").path
        _ = FileManager.default.createFile(
            atPath: keyFile,
            contents: Data(key.hexString.utf8),
            attributes: [.posixPermissions: 0o600]
        )
        let output = directory.appendingPathComponent("rec")

        let recorder = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "\(callID)",
                "--key-file", keyFile, "--out", output.path, "--ice-address", bed.hostAddress, "--status", "json",
                "--duration", "60", "--log-level", "warning",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))

        let publisher = try await OnDemandKeyframePublisher(
            on: connection,
            room: room,
            display: "alice:Alice",
            callKey: key,
            callID: callID,
            address: bed.hostAddress,
            logger: logger
        )
        // The recorder receives Alice's frames and cannot decrypt them: her first keyframe, and
        // any she sent when Janus asked for one for the new subscriber, are lost to it.
        let receiving = waitForStatus(recorder, within: .seconds(20)) { status in
            status.participants.contains { $0.key == "alice" && $0.framesUndecryptable > 0 }
        }
        #expect(receiving != nil, "the recorder receives Alice's undecryptable frames")
        publisher.switchToCallKey()

        // Now her delta frames decrypt; the recording needs a keyframe to start her video.
        let writing = waitForStatus(recorder, within: .seconds(10)) { status in
            status.participants.contains { participant in
                participant.key == "alice"
                    && participant.tracks.contains { $0.kind == "video" && $0.framesWritten > 0 }
            }
        }
        let report = await publisher.stop()
        kill(recorder.pid, SIGTERM)
        let lines = readUntilExit(recorder, timeout: .seconds(30))

        #expect(report.error == nil, "\(report.error ?? "")")
        #expect(report.keyframesBeforeSwitch >= 1, "\(report)")
        #expect(writing != nil, "the recording writes Alice's video after the switch: \(report)")
        // The recorder asked (through Janus) after the switch, and Alice answered with a keyframe
        // promptly; without the request she never sends another.
        #expect(report.requestsAfterSwitch >= 1, "the recorder asked for a keyframe: \(report)")
        let switched = try #require(report.switchedAt)
        let answered = try #require(report.firstKeyframeAfterSwitch, "a keyframe after the switch: \(report)")
        #expect(answered - switched < .milliseconds(1500), "keyframe \(answered - switched) after the switch")
        print("keyframe \(answered - switched) after the switch; requests after it: \(report.requestsAfterSwitch)")

        let manifest = try RecordingManifest.read(from: output.path)
        #expect(manifest.status == "finished", "output: \(lines)")
        let alice = try #require(manifest.participants.first { $0.key == "alice" })
        #expect(alice.recorded && alice.framesUndecryptable > 0, "\(alice)")
        let video = try #require(
            alice.segments.flatMap(\.tracks).first { $0.kind == .video },
            "a video track: \(alice.segments)"
        )
        #expect(video.framesWritten > 0, "\(video)")
        print("record: video frames dropped before the keyframe: \(video.framesDroppedBeforeKeyframe)")
        // The delta frames dropped while waiting for the keyframe: the time from the recorder's
        // first decryptable video frame to its first written one, at 30 frames a second.
        #expect(
            video.framesDroppedBeforeKeyframe <= 45,
            "video starts \(Double(video.framesDroppedBeforeKeyframe) / 30) s after its first frame: \(video)"
        )

        try await admin.destroyRoom(room)
        await connection.close()
    }

    @Test(
        "join --record misses a sender's only keyframe (it did not decrypt), asks for one and records the video"
    )
    func joinRecordAsksForMissedKeyframe() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-join-record-keyframe")
        defer { try? FileManager.default.removeItem(at: directory) }
        // A call for Carol, created as `call create` does; her call key, unwrapped with her device
        // key, lets the test publisher encrypt with it.
        let data = directory.appendingPathComponent("data").path
        let invitations = directory.appendingPathComponent("invitations").path
        _ = try run(["keys", "init", "--type", "p256", "--data-dir", data])
        let publicKey = directory.appendingPathComponent("carol.pub")
        try Data(try run(["keys", "show", "--public", "--data-dir", data]).utf8).write(to: publicKey)
        let callID = UInt64.random(in: 1...9_000_000_000)
        _ = try run([
            "call", "create", "--call-id", "\(callID)", "--codecs", "h264", "--out", invitations, "--data-dir", data,
            "--janus", bed.webSocketURL, "--participant", "carol:Carol=@\(publicKey.path)",
        ])
        let invitationPath = invitations + "/carol.json"
        let invitation = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: invitationPath)))
                as? [String: Any]
        )
        let room = try #require((invitation["roomId"] as? NSNumber)?.uint64Value)
        let wrapped = try #require(invitation["encryptedAESKey"] as? String)
        let unwrapped = try run(["keys", "unwrap", wrapped, "--data-dir", data])
        let key = try CallKey(hex: unwrapped.trimmingCharacters(in: .whitespacesAndNewlines))

        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let publisher = try await OnDemandKeyframePublisher(
            on: connection,
            room: room,
            display: "alice:Alice",
            callKey: key,
            callID: callID,
            address: bed.hostAddress,
            logger: logger
        )
        let recording = directory.appendingPathComponent("rec").path
        let carol = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "join", "--data-dir", data, "--invitation", invitationPath, "--janus", bed.webSocketURL,
                "--record", recording, "--ice-address", bed.hostAddress, "--width", "320", "--height", "240",
                "--fps", "15", "--status", "none", "--duration", "60", "--log-level", "warning",
            ]
        )
        defer { carol.stop() }

        // Carol's recorder receives Alice's frames and cannot decrypt them (a failure appearing
        // rewrites the manifest at once).
        let receiving = try await waitForManifest(recording, within: .seconds(30)) { manifest in
            manifest.participants.contains { $0.key == "alice" && $0.framesUndecryptable > 0 }
        }
        #expect(receiving != nil, "the recorder receives Alice's undecryptable frames")
        publisher.switchToCallKey()

        // Her delta frames now decrypt; her file exists once the recording has a keyframe to
        // start from.
        let writing = try await waitForManifest(recording, within: .seconds(10)) { manifest in
            manifest.participants.contains { participant in
                participant.key == "alice" && participant.segments.contains { $0.file != nil }
            }
        }
        let report = await publisher.stop()
        kill(carol.pid, SIGTERM)
        let lines = readUntilExit(carol, timeout: .seconds(30))

        #expect(report.error == nil, "\(report.error ?? "")")
        #expect(writing != nil, "the recording writes Alice's video after the switch: \(report)")
        #expect(report.requestsAfterSwitch >= 1, "the recorder asked for a keyframe: \(report)")
        let switched = try #require(report.switchedAt)
        let answered = try #require(report.firstKeyframeAfterSwitch, "a keyframe after the switch: \(report)")
        #expect(answered - switched < .milliseconds(1500), "keyframe \(answered - switched) after the switch")
        print("keyframe \(answered - switched) after the switch; requests after it: \(report.requestsAfterSwitch)")

        let manifest = try RecordingManifest.read(from: recording)
        #expect(manifest.status == "finished", "output: \(lines)")
        let alice = try #require(manifest.participants.first { $0.key == "alice" })
        let video = try #require(
            alice.segments.flatMap(\.tracks).first { $0.kind == .video },
            "a video track: \(alice.segments)"
        )
        #expect(video.framesWritten > 0 && video.framesDroppedBeforeKeyframe <= 45, "\(video)")
        await connection.close()
    }

    @Test(
        "RoomSubscription.requestKeyframe sends a PLI that reaches the feed's publisher, throttled, and nothing for an unknown feed or after close"
    )
    func subscriptionRequestKeyframe() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))
        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: "alice:Alice",
                audio: nil,
                video: .vp8,
                transport: .init(localAddresses: [bed.hostAddress])
            ),
            logger: logger
        )
        let requests = Mutex<[ContinuousClock.Instant]>([])
        let keyframeRequests = publisher.keyframeRequests
        let counting = Task {
            for await _ in keyframeRequests { requests.withLock { $0.append(.now) } }
        }
        let listener = try await RoomListener.join(
            on: try await connection.createSession(),
            room: room,
            display: "recorder"
        )
        let subscription = RoomSubscription(
            session: try await connection.createSession(),
            configuration: .init(
                room: room,
                ownFeedID: listener.joined.id,
                crypto: nil,
                transport: .init(localAddresses: [bed.hostAddress])
            ),
            initialPublishers: listener.joined.publishers,
            roomEvents: listener.roomEvents,
            observers: [],
            logger: logger
        )
        let feed = publisher.feedID
        let subscribed = await waitUntil(within: .seconds(20)) { subscription.participants[feed] != nil }
        #expect(subscribed, "the subscription follows Alice")
        // Janus asks Alice for a keyframe for the new subscriber: wait until that has come and
        // gone (no request for a second; nothing is sent, so the jitter buffer asks for nothing).
        let start = ContinuousClock.now
        let quiet = await waitUntil(within: .seconds(15)) {
            ContinuousClock.now - (requests.withLock { $0.last } ?? start) > .seconds(1)
        }
        #expect(quiet)
        let before = requests.withLock { $0.count }
        let asked = ContinuousClock.now

        #expect(await subscription.requestKeyframe(feedID: feed), "a PLI went out")
        #expect(await !subscription.requestKeyframe(feedID: feed), "throttled: a second request at once sends nothing")
        #expect(await !subscription.requestKeyframe(feedID: feed &+ 1), "nothing for a feed not subscribed")
        let reached = await waitUntil(within: .seconds(3)) { requests.withLock { $0.count } > before }
        let arrival = requests.withLock { $0.count > before ? $0[before] : nil }
        #expect(reached, "the request reached Alice through Janus")
        #expect(arrival.map { $0 - asked < .seconds(1) } == true, "within a second")

        await subscription.close()
        #expect(await !subscription.requestKeyframe(feedID: feed), "nothing after close")
        counting.cancel()
        await listener.leave()
        await publisher.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }

    /// Polls `condition` every 50 ms until it holds or `limit` passes; returns whether it held.
    func waitUntil(within limit: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return condition()
    }
}
