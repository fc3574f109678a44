import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclavePeerConnection
import ConclaveRecorder
import ConclaveTestSupport
import ConclaveVPX
import ConclaveWindow
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging
import Synchronization
import Testing

/// Collects one feed's video frames and the layer switches Janus reports, in arrival order, and
/// wakes a waiter on each.
final class SimulcastObserver: CallMediaObserver {
    struct Seen {
        /// Video frames and where each layer switch landed (the switch is reported after its
        /// keyframe was forwarded, so it is noted at the count of frames then).
        var frames: [SubscribedFrame] = []
        var switches: [(afterFrames: Int, substream: VideoRoom.Substream)] = []
        var feeds: [UInt64] = []
        /// Frames of an end-to-end encrypted call that did not decrypt.
        var undecryptable = 0
    }

    let seen = Mutex(Seen())
    private let changes: AsyncStream<Void>
    private let changed: AsyncStream<Void>.Continuation

    init() { (changes, changed) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1)) }

    func participantJoined(feedID: UInt64, display: String?) { update { $0.feeds.append(feedID) } }
    func participantLeft(feedID: UInt64) {}
    func senderReport(_ report: SubscribedSenderReport) {}
    func received(_ media: ReceivedMedia) {
        if case .undecryptable = media { update { $0.undecryptable += 1 } }
        guard case .frame(let frame) = media, frame.frame.codec.kind == .video else { return }
        update { $0.frames.append(frame) }
    }
    func layerReceived(feedID: UInt64, substream: VideoRoom.Substream) {
        update { $0.switches.append((afterFrames: $0.frames.count, substream: substream)) }
    }

    /// Returns once `condition` holds, or throws after `limit`.
    func wait(for limit: Duration, _ what: String, until condition: @escaping @Sendable (Seen) -> Bool) async throws {
        let met = await withTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                if seen.withLock({ condition($0) }) { return true }
                for await _ in changes where seen.withLock({ condition($0) }) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let met = await group.next() ?? false
            group.cancelAll()
            return met
        }
        guard met else {
            let (frames, switches) = seen.withLock { ($0.frames.count, $0.switches.map { $0.substream }) }
            throw SubprocessError(description: "not within \(limit): \(what) (\(frames) frames, switches \(switches))")
        }
    }

    private func update(_ body: (inout Seen) -> Void) {
        seen.withLock { body(&$0) }
        changed.yield()
    }
}

/// Chromium publishes VP8 simulcast (three layers of Conclave's numbered test pattern); Conclave's
/// subscriber starts on the lowest layer and switches to the highest through Janus's `configure`.
/// Every received frame is decoded with the project's VP8 decoder afterwards.
///
/// Chromium runs through `TestChromium`, which keeps it off the network: `--host-resolver-rules`
/// leave it nothing but localhost and the test bed's Janus, and the page's peer connections
/// have no STUN server.
@Suite(.serialized) struct SimulcastReceiveTests {
    static let width = 640
    static let height = 480
    static let loopFrames = 150

    @Test func switchesFromTheLowToTheHighLayerAtAKeyframe() async throws {
        let call = try await startCall(
            layers: LayerSelection(standard: .fixed(.high), perParticipant: ["chromium": .fixed(.low)]),
            logLevel: .warning
        )
        defer { call.chromium.stop() }
        let (observer, subscription, directory) = (call.observer, call.subscription, call.directory)
        try await observer.wait(for: .seconds(20), "60 frames of the low layer") { seen in
            // Janus forwards the first substream that sends a keyframe and then steps towards
            // the one asked for, a keyframe at a time.
            guard let low = seen.switches.last, low.substream == .low else { return false }
            return seen.frames.count >= low.afterFrames + 60
        }
        let feed = try #require(observer.seen.withLock { $0.feeds.first })
        #expect(subscription.subscriber?.receivedLayers[feed] == .low)
        let requested = observer.seen.withLock { $0.frames.count }
        #expect(try await subscription.selectLayer(.high, feedID: feed))
        try await observer.wait(for: .seconds(20), "60 frames of the high layer") { seen in
            guard let high = seen.switches.last, high.substream == .high else { return false }
            return seen.frames.count >= high.afterFrames + 60
        }
        #expect(subscription.subscriber?.receivedLayers[feed] == .high)
        await call.close()

        let (frames, switches) = observer.seen.withLock { ($0.frames, $0.switches) }
        let lowFrom = try #require(switches.last { $0.afterFrames <= requested && $0.substream == .low }).afterFrames
        #expect(
            switches.filter { $0.afterFrames >= requested }.map { $0.substream } == [.high],
            "switches: \(switches)"
        )
        // Janus cuts the old substream where the new one's keyframe comes, so the old one's frame
        // in progress may be given up: around the switch asked for (from the request until a
        // second after the high layer's first frame), loss is allowed only just before a keyframe.
        // Outside that window a lost packet is the loaded machine's, not the switch's (Janus's own
        // first steps down may also cut a frame anywhere); those frames still have to decode below.
        let switchedAt = switches.last { $0.afterFrames >= requested && $0.substream == .high }?.afterFrames
        let window = requested..<((switchedAt ?? frames.count) + 30)
        let lossy = frames.enumerated().filter { window.contains($0.offset) && $0.element.framesLostBefore > 0 }
        #expect(lossy.allSatisfy { $0.element.frame.isKeyframe }, "frames lost at the switch: \(lossy.map(\.offset))")
        let lostElsewhere = frames.enumerated().filter {
            !window.contains($0.offset) && $0.element.framesLostBefore > 0
        }
        if !lostElsewhere.isEmpty {
            print("simulcast: frames lost away from the switch at \(lostElsewhere.map(\.offset))")
        }

        // Every frame from the first keyframe on decodes; sizes change only at keyframes.
        let decoder = try VP8Decoder()
        var pictures: [(index: Int, width: Int, height: Int, number: Int?, keyframe: Bool)] = []
        for (index, received) in frames.enumerated().drop(while: { !$0.element.frame.isKeyframe }) {
            do {
                guard let picture = try decoder.decode(received.frame) else { continue }
                let number = PatternReader.read(picture)?.frameNumber
                pictures.append((index, picture.width, picture.height, number, received.frame.isKeyframe))
            } catch {
                Issue.record("frame \(index) of \(frames.count) does not decode: \(error)")
            }
        }
        let sizes = pictures.map { "\($0.width)x\($0.height)" }
        #expect(sizes.last == "640x480", "sizes \(Set(sizes))")
        for (before, after) in zip(pictures, pictures.dropFirst()) where before.width != after.width {
            #expect(after.keyframe, "the size changes at frame \(after.index), not a keyframe")
        }
        // From the low layer's first frames until the request, nothing but the low layer; then
        // the high layer, straight from it.
        let asked = pictures.filter { $0.index >= lowFrom + 5 && $0.index < requested }
        #expect(!asked.isEmpty && asked.allSatisfy { $0.width == 160 && $0.height == 120 }, "low layer: \(asked.count)")
        let firstHigh = pictures.firstIndex { $0.index >= requested && $0.width == Self.width }
        #expect(firstHigh.map { pictures[$0 - 1].width } == 160, "the high layer follows the low one directly")
        // The pattern's numbers go on across the switch: the layers are encodings of the same
        // pictures. Chromium skips a picture now and then on a busy machine (see BrowserInteropTests).
        let numbers = pictures.compactMap(\.number)
        #expect(numbers.count * 10 >= pictures.count * 9, "\(numbers.count) of \(pictures.count) numbers read")
        let steps = zip(numbers, numbers.dropFirst()).map { ($1 - $0 + Self.loopFrames) % Self.loopFrames }
        #expect(steps.allSatisfy { $0 <= 10 }, "the numbers go forward: \(numbers)")
        let repeated = steps.filter { $0 == 0 }.count
        let skipped = steps.reduce(0) { $0 + max(0, $1 - 1) }
        #expect((repeated + skipped) * 10 <= pictures.count, "\(repeated) repeated, \(skipped) skipped: \(numbers)")
        // Across the switch asked for, the next picture: the layers encode the same pictures.
        if let firstHigh, firstHigh > 0, let low = pictures[firstHigh - 1].number, let high = pictures[firstHigh].number
        {
            #expect((high - low + Self.loopFrames) % Self.loopFrames == 1, "number \(low) → \(high) at the switch")
        }
        if let firstHigh, firstHigh > 0, let low = pictures[firstHigh - 1].number, let high = pictures[firstHigh].number
        {
            print("simulcast low → high: number \(low) → \(high) at received frame \(pictures[firstHigh].index)")
        }
        print(
            "simulcast: \(frames.count) frames received, \(pictures.count) decoded, sizes "
                + "\(sizes.reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } })"
        )
        try? FileManager.default.removeItem(at: directory)
    }

    /// `auto` under a rate limit in Janus's namespace: the subscriber sees loss on the highest
    /// layer, steps down within 5 s, and probes its way back up once the limit is gone.
    ///
    /// The limit is 800 kbit/s, or 60 % of what the highest layer was measured to need when that
    /// is less: the test pattern is easy to compress, and its highest layer may need less than
    /// 800 kbit/s, which would then limit nothing.
    @Test func autoStepsDownUnderARateLimitAndGoesBackUpWhenItIsLifted() async throws {
        let call = try await startCall(layers: LayerSelection(standard: .auto), logLevel: .info)
        defer { call.chromium.stop() }
        let (bed, observer, subscription, directory) = (call.bed, call.observer, call.subscription, call.directory)
        defer { _ = try? bed.runInNamespace(["nft", "delete", "table", "inet", "conclave_cap"]) }
        try await observer.wait(for: .seconds(20), "60 frames of the high layer") { seen in
            seen.switches.last?.substream == .high && seen.frames.count >= (seen.switches.last?.afterFrames ?? 0) + 60
        }
        let subscriber = try #require(subscription.subscriber)
        let mid = try #require(subscriber.streams.first { $0.type == "video" }?.mid)
        // What the highest layer needs, over about three seconds of its frames.
        let startBytes = await subscriber.statistics[mid]?.bytes ?? 0
        let startFrames = observer.seen.withLock { $0.frames.count }
        let started = ContinuousClock.now
        try await observer.wait(for: .seconds(10), "90 more frames") { $0.frames.count >= startFrames + 90 }
        let elapsed = ContinuousClock.now - started
        let bytes = (await subscriber.statistics[mid]?.bytes ?? 0) - startBytes
        let highRate =
            Double(bytes * 8) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let cap = min(800_000, Int(highRate * 0.6))
        #expect(observer.seen.withLock { $0.switches.last?.substream } == .high, "auto stays high on a clean path")

        let switchesBefore = observer.seen.withLock { $0.switches.count }
        let rules = """
            table inet conclave_cap {
              chain output { type filter hook output priority 0; policy accept; meta l4proto udp limit rate over \(cap / 8) bytes/second burst \(cap / 32) bytes drop; }
            }
            """
        let file = directory.appendingPathComponent("cap.nft")
        try rules.write(to: file, atomically: true, encoding: .utf8)
        _ = try bed.runInNamespace(["nft", "-f", file.path])
        let capped = ContinuousClock.now
        try await observer.wait(for: .seconds(15), "a lower layer under the limit") { seen in
            seen.switches.dropFirst(switchesBefore).contains { $0.substream < .high }
        }
        let down = ContinuousClock.now - capped
        #expect(down <= .seconds(5), "auto stepped down after \(down)")

        _ = try bed.runInNamespace(["nft", "delete", "table", "inet", "conclave_cap"])
        let switchesCapped = observer.seen.withLock { $0.switches.count }
        let lifted = ContinuousClock.now
        try await observer.wait(for: .seconds(60), "the high layer again") { seen in
            seen.switches.count > switchesCapped && seen.switches.last?.substream == .high
        }
        let up = ContinuousClock.now - lifted
        let switches = observer.seen.withLock { $0.switches.map { $0.substream } }
        print(
            "simulcast auto: high layer \(Int(highRate / 1000)) kbit/s, cap \(cap / 1000) kbit/s, down after \(down),"
                + " up again \(up) after the cap was lifted; switches \(switches)"
        )
        await call.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `conclave record` of a simulcast publisher asks for the highest layer and says so in its
    /// status; every frame written decodes, and the recording ends on the highest layer's size
    /// (Janus starts with whichever layer sends a keyframe first and steps up a keyframe at a time).
    @Test func theRecorderRecordsTheHighestLayerAndShowsItInItsStatus() async throws {
        let bed = try TestJanus.shared()
        let directory = try TestPaths.temporaryDirectory("conclave-simulcast-record")
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))
        let chromium = try await simulcastPublisher(bed, room: room, directory: directory)
        defer { chromium.stop() }
        let recording = directory.appendingPathComponent("recording")
        let recorded = try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--room", "\(room)", "--call-id", "1", "--crypto", "none", "--janus", bed.webSocketURL,
                "--ice-address", bed.hostAddress, "--out", recording.path, "--duration", "6", "--status", "json",
                "--data-dir", directory.appendingPathComponent("data").path,
            ],
            timeout: .seconds(60)
        )
        _ = try? await chromium.evaluate("conclavePeer.leave()")
        await connection.close()
        #expect(recorded.succeeded, "conclave record: \(recorded.errorOutput)")
        let final = recorded.output.split(separator: "\n").last { $0.contains(#""state":"finished""#) } ?? ""
        #expect(final.contains(#""layer":"high""#), "the final status: \(final)")

        let manifest = try RecordingManifest.read(from: recording.path)
        let participant = try #require(manifest.participants.first { $0.userID == "chromium" }, "\(manifest)")
        let files = participant.segments.compactMap(\.file)
        let last = try #require(files.last, "no segment: \(participant)")
        for file in files {
            let path = recording.appendingPathComponent(file).path
            let errors = try FFmpeg.decodeErrors(path, everyFrame: true)
            #expect(errors.isEmpty, "decoding \(file): \(errors)")
        }
        let sizes = try runProcess(
            "ffprobe",
            [
                "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width,height", "-of", "csv=p=0",
                recording.appendingPathComponent(last).path,
            ]
        )
        let lastSize = sizes.output.split(separator: "\n").last.map(String.init) ?? ""
        #expect(lastSize == "\(Self.width),\(Self.height)", "the last picture: \(lastSize) (segments \(files))")
        try? FileManager.default.removeItem(at: directory)
    }

    /// `auto` with a call window: a tile smaller than the highest layer caps the layer at the one
    /// that fills it, on a path with no loss at all, and it stays there.
    @Test func autoAsksForNoMoreThanTheTileShows() async throws {
        let server = try TestXServer()
        defer { server.stop() }
        // 320x180: one tile about 170 lines tall, which the medium layer (240 lines) fills and the
        // high one (480) would only overfill.
        let window = try await server.withDisplay {
            try await CallWindow.open(title: "conclave simulcast", width: 320, height: 180)
        }
        let shown: @Sendable (UInt64) -> ShownVideo? = { feed in
            window.shownPictures()[feed].map {
                ShownVideo(drawnHeight: $0.drawnHeight, pictureHeight: $0.pictureHeight)
            }
        }
        let call = try await startCall(
            layers: LayerSelection(standard: .auto),
            logLevel: .info,
            shownVideo: shown,
            alsoObserving: [try WindowFeeder(window)]
        )
        defer { call.chromium.stop() }
        try await call.observer.wait(for: .seconds(30), "90 frames of the medium layer") { seen in
            guard let last = seen.switches.last, last.substream == .medium else { return false }
            return seen.frames.count >= last.afterFrames + 90
        }
        let drawn = window.shownPictures().values.first
        #expect(drawn?.pictureHeight == 240 && (drawn?.drawnHeight ?? 0) < 240, "drawn: \(String(describing: drawn))")
        let switches = call.observer.seen.withLock { $0.switches.map(\.substream) }
        print("simulcast auto in a 320x180 window: switches \(switches), drawn \(String(describing: drawn))")
        await call.close()
        await window.close()
        try? FileManager.default.removeItem(at: call.directory)
    }

    /// Decodes each feed's VP8 frames into the call window, as `join --window` does.
    final class WindowFeeder: CallMediaObserver {
        let window: CallWindow
        private let decoder: Mutex<VP8Decoder>

        init(_ window: CallWindow) throws {
            self.window = window
            decoder = Mutex(try VP8Decoder())
        }

        func participantJoined(feedID: UInt64, display: String?) {
            window.participantJoined(id: feedID, display: display ?? "\(feedID)")
        }
        func participantLeft(feedID: UInt64) { window.participantLeft(id: feedID) }
        func senderReport(_ report: SubscribedSenderReport) {}
        func received(_ media: ReceivedMedia) {
            guard case .frame(let frame) = media, frame.frame.codec == .vp8 else { return }
            if let picture = decoder.withLock({ try? $0.decode(frame.frame) }) {
                window.show(picture: picture, for: frame.feedID)
            }
        }
    }

    /// Chromium publishing simulcast in a room of its own, and Conclave's subscription to it.
    struct SimulcastCall {
        let bed: JanusTestBed
        let directory: URL
        let connection: JanusConnection
        let chromium: TestChromium
        let observer: SimulcastObserver
        let listener: RoomListener
        let subscription: RoomSubscription

        /// Leaves the room on every side; the caller still stops Chromium.
        func close() async {
            await subscription.close()
            await listener.leave()
            _ = try? await chromium.evaluate("conclavePeer.leave()")
            await connection.close()
        }
    }

    /// A fresh VP8 room on the shared test Janus, Chromium publishing three layers in it, and a
    /// subscription (choosing `layers`) reporting to a `SimulcastObserver`.
    private func startCall(
        layers: LayerSelection,
        logLevel: Logger.Level,
        shownVideo: (@Sendable (UInt64) -> ShownVideo?)? = nil,
        alsoObserving others: [any CallMediaObserver] = []
    ) async throws -> SimulcastCall {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = logLevel
        let directory = try TestPaths.temporaryDirectory("conclave-simulcast")
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))
        let chromium = try await simulcastPublisher(bed, room: room, directory: directory)
        do {
            let observer = SimulcastObserver()
            let listener = try await RoomListener.join(
                on: try await connection.createSession(),
                room: room,
                display: nil
            )
            let subscription = RoomSubscription(
                session: try await connection.createSession(),
                configuration: .init(
                    room: room,
                    ownFeedID: listener.joined.id,
                    crypto: nil,
                    transport: MediaTransport.Configuration(localAddresses: [bed.hostAddress]),
                    layers: layers,
                    shownVideo: shownVideo
                ),
                initialPublishers: listener.joined.publishers,
                roomEvents: listener.roomEvents,
                observers: [observer] + others,
                logger: logger
            )
            return SimulcastCall(
                bed: bed,
                directory: directory,
                connection: connection,
                chromium: chromium,
                observer: observer,
                listener: listener,
                subscription: subscription
            )
        } catch {
            chromium.stop()
            throw error
        }
    }

    /// Chromium publishing the pattern as three VP8 simulcast layers in `room`, all sending.
    private func simulcastPublisher(_ bed: JanusTestBed, room: UInt64, directory: URL) async throws -> TestChromium {
        // Chromium sends as many simulcast layers as its table allows for the picture size (two
        // at 640x480); the field trial lifts that table, so three layers come from a picture
        // small enough for a loaded machine to encode: 640x480, 320x240 and 160x120.
        let chromium = try TestChromium(
            janusAddress: bed.janusAddress,
            media: .init(videoFile: try writePattern(in: directory)),
            extraArguments: ["--force-fieldtrials=WebRTC-LegacySimulcastLayerLimit/Disabled/"]
        )
        do {
            try await chromium.open(parameters: [
                "server": bed.webSocketURL, "room": "\(room)", "display": "chromium:Chromium", "codec": "vp8",
                "audio": "no", "width": "\(Self.width)", "height": "\(Self.height)", "simulcast": "1",
            ])
            let layers = try await chromium.evaluate(
                "conclavePeer.waitFor(s => s.published && Object.values(s.outbound).filter(c => c.kind == 'video'"
                    + " && c.framesEncoded >= 30).length == 3, 30000).then(s => s.outbound)",
                as: [String: Layer].self,
                timeout: .seconds(35)
            )
            #expect(layers.count == 3, "Chromium sends three layers: \(layers)")
            return chromium
        } catch {
            chromium.stop()
            throw error
        }
    }

    /// One outbound layer, as the page's stats report it.
    struct Layer: Decodable {
        var frameWidth: Int
        var frameHeight: Int
        var framesEncoded: Int
    }

    /// Chromium's camera: Conclave's numbered test pattern, looped.
    private func writePattern(in directory: URL) throws -> String {
        let video = directory.appendingPathComponent("pattern.y4m")
        let layout = try PatternLayout(width: Self.width, height: Self.height)
        let writer = try Y4MWriter(path: video.path, width: Self.width, height: Self.height, frameRate: 30)
        for index in 0..<Self.loopFrames {
            try writer.write(PatternSource.render(layout: layout, frameNumber: index, flash: false, rtpTimestamp: 0))
        }
        try writer.close()
        return video.path
    }
}
