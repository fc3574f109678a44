import ConclaveCore
import ConclaveE2EE
import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

/// The browser peer's end-to-end encryption (web/e2ee-core.js in an Encoded Transform worker)
/// against Conclave's own `ecall` and `sframe` formats.
///
/// First the formats alone, in the page: frames Conclave sealed open there, frames the page sealed
/// open in Conclave, and `sframe` (deterministic for a given key id and counter) is the same byte
/// for byte. Then calls through the test bed's Janus, both ways and in both formats, with VP8 and
/// Opus: `ecall` leaves VP8 in clear as ECall iOS and Conclave do, so there only Opus is sealed.
/// Then a wrong key on either side: frames are counted as undecryptable and dropped, nothing is
/// recorded or decoded from them, and the page's transform keeps running (it decrypts once the
/// right key arrives). The call key reaches the page through `conclave.setCallKey` over DevTools
/// and Conclave through a key file or an invitation: never a URL or an argument.
///
/// Chromium runs through `TestChromium`, which keeps it off the network: `--host-resolver-rules`
/// leave it nothing but localhost and the test bed's Janus, and the page's peer connections
/// have no STUN server.
@Suite(.serialized) struct BrowserE2EETests {
    let plain = BrowserInteropTests()

    // MARK: The formats, in the page

    @Test(arguments: [FrameCryptoFormat.ecall, .sframe])
    func thePagesFormatMatchesConclaves(format: FrameCryptoFormat) async throws {
        let chromium = try TestChromium(janusAddress: "127.0.0.1")
        defer { chromium.stop() }
        // No Janus here: the page's join fails on a closed port, which does not concern the formats.
        try await chromium.open(parameters: ["server": "ws://127.0.0.1:9", "crypto": format.rawValue])
        let key = try CallKey(bytes: (0..<32).map { UInt8($0 * 7 + 1) })
        let epoch: UInt8 = 3
        let keyID = SFrameKeyID(senderID: 77, epoch: epoch).rawValue
        let material = SFrameKeyMaterial(callKey: key, keyID: keyID)
        let frames = Self.sampleFrames()

        // Conclave seals, the page opens.
        var counter: UInt64 = 1000
        var sealed: [[UInt8]] = []
        for (codec, frame) in frames {
            switch format {
            case .ecall:
                switch codec {
                case .opus: sealed.append(try ECallFrameFormat.sealAudio(frame, key: key))
                case .h264: sealed.append(try ECallFrameFormat.sealH264(frame, key: key))
                case .vp8: sealed.append(frame)
                }
            case .sframe:
                sealed.append(
                    try SFrameFrameFormat.seal(frame, codec: codec, material: material) {
                        () throws(FrameEncryptionError) -> UInt64 in
                        defer { counter += 1 }
                        return counter
                    }
                )
            }
        }
        let opened = try await pageRun(
            chromium,
            """
            const ring = new c.KeyRing();
            await ring.install(c.fromBase64(input.key), \(epoch));
            const out = [];
            const openAll = async () => {
              for (const f of input.frames) out.push(c.toBase64(await c.openFrame(input.format, f.codec, c.fromBase64(f.data), ring)));
            };
            await openAll();
            // A rotation: the frames' key is now the previous one, and still opens them.
            await ring.install(new Uint8Array(32).fill(5), \(epoch + 1));
            await openAll();
            return out;
            """,
            input: input(format: format, key: key, frames: zip(frames, sealed).map { (codec: $0.0.codec, bytes: $0.1) })
        )
        #expect(opened.count == 2 * frames.count)
        for (index, frame) in frames.enumerated() where opened.count == 2 * frames.count {
            #expect(opened[index] == frame.bytes, "\(format) \(frame.codec) frame \(index) opened in the page")
            #expect(opened[frames.count + index] == frame.bytes, "and after a key rotation, with the previous key")
        }

        // The page seals (sframe counters from 1000, as above), Conclave opens.
        let sealedInPage = try await pageRun(
            chromium,
            """
            const ring = new c.KeyRing();
            await ring.install(c.fromBase64(input.key), \(epoch));
            let counter = 1000n;
            const out = [];
            for (const f of input.frames) {
              const options = { senderID: 77, nextCounter: () => counter++ };
              out.push(c.toBase64(await c.sealFrame(input.format, f.codec, c.fromBase64(f.data), ring, options)));
            }
            return out;
            """,
            input: input(format: format, key: key, frames: frames)
        )
        for (index, (codec, frame)) in frames.enumerated() {
            let page = sealedInPage[index]
            switch format {
            case .ecall:
                let back: [UInt8]
                switch codec {
                case .opus: back = try ECallFrameFormat.openAudio(page, keys: [key])
                case .h264: back = try ECallFrameFormat.openH264(page, keys: [key])
                case .vp8: back = page
                }
                #expect(back == frame, "ecall \(codec) frame \(index) sealed in the page opens in Conclave")
                if codec != .vp8 { #expect(page != frame && page.count == frame.count + (codec == .opus ? 29 : 28)) }
            case .sframe:
                // Same key id and counter: the same bytes.
                #expect(page == sealed[index], "sframe \(codec) frame \(index) sealed alike")
                let back = try SFrameFrameFormat.open(page, codec: codec) {
                    (id: UInt64) throws(FrameDecryptionError) -> SFrameKeyMaterial in
                    SFrameKeyMaterial(callKey: key, keyID: id)
                }
                #expect(back == frame)
            }
        }

        // A wrong key, a flipped byte and a cut frame are each refused with a reason, never opened.
        let refusals = try await pageStrings(
            chromium,
            """
            const right = new c.KeyRing();
            await right.install(c.fromBase64(input.key), \(epoch));
            const wrong = new c.KeyRing();
            await wrong.install(new Uint8Array(32).fill(9), \(epoch));
            const reasons = [];
            const attempt = async (ring, codec, bytes) => {
              try { await c.openFrame(input.format, codec, bytes, ring); reasons.push("opened"); }
              catch (e) { reasons.push(e.reason || ("threw " + e)); }
            };
            for (const f of input.frames) {
              if (c.passesClear(input.format, f.codec)) continue;
              const bytes = c.fromBase64(f.data);
              await attempt(wrong, f.codec, bytes);
              const flipped = bytes.slice(); flipped[flipped.length - 20] ^= 0x40;
              await attempt(right, f.codec, flipped);
              await attempt(right, f.codec, bytes.subarray(0, bytes.length - 10));
            }
            return reasons;
            """,
            input: input(format: format, key: key, frames: zip(frames, sealed).map { (codec: $0.0.codec, bytes: $0.1) })
        )
        let sealedFrames = frames.filter { format != .ecall || $0.codec != .vp8 }.count
        #expect(refusals.count == sealedFrames * 3, "\(refusals)")
        #expect(!refusals.contains("opened") && !refusals.contains { $0.hasPrefix("threw") }, "\(refusals)")
        #expect(refusals.contains("authentication_failed"), "\(refusals)")
    }

    // MARK: Calls

    @Test(arguments: [FrameCryptoFormat.ecall, .sframe])
    func conclaveRecordsChromiumsEncryptedPublisher(format: FrameCryptoFormat) async throws {
        let bed = try TestJanus.shared()
        let directory = try TestPaths.temporaryDirectory("conclave-browser-e2ee")
        let room = try plain.createRoom(on: bed, codec: "vp8")
        let chromium = try TestChromium(janusAddress: bed.janusAddress, media: try plain.writeMedia(in: directory))
        defer { chromium.stop() }
        try await chromium.open(parameters: page(bed, room: room, format: format, publish: true))
        let key = CallKey.random()
        try await setCallKey(key, in: chromium)
        let sealedKind = format == .ecall ? "audio" : "video"
        _ = try await waitOrShow(
            chromium,
            "s.published && Object.values(s.outbound).some(c => c.kind == 'video' && c.framesEncoded >= 30)"
                + " && s.e2ee.send.\(sealedKind).encrypted >= 30"
        )
        let keyFile = try writeKeyFile(key, in: directory)
        let recording = directory.appendingPathComponent("recording")
        let recorded = try record(bed, room: room, format: format, keyFile: keyFile, into: recording, in: directory)
        #expect(recorded.succeeded, "conclave record: \(recorded.errorOutput)")

        let participant = try chromiumInManifest(recording)
        #expect(participant["framesUndecryptable"] as? Int == 0, "no frame failed to decrypt: \(participant)")
        let segments = (participant["segments"] as? [[String: Any]]) ?? []
        let file = recording.appendingPathComponent(try #require(segments.first?["file"] as? String)).path
        let errors = try FFmpeg.decodeErrors(file, everyFrame: true)
        #expect(errors.isEmpty, "decoding \(file): \(errors)")
        let streams = try FFmpeg.probeStreams(file)
        #expect(streams.contains("vp8") && streams.contains("opus"), "streams: \(streams)")
        let numbers = try plain.patternNumbers(in: file)
        #expect(numbers.pictures >= 90, "\(numbers.pictures) pictures in 6 s of recording")
        #expect(numbers.read.count == numbers.pictures, "every picture carries its number: \(numbers)")
        let steps = zip(numbers.read, numbers.read.dropFirst()).map {
            ($1 - $0 + BrowserInteropTests.loopFrames) % BrowserInteropTests.loopFrames
        }
        #expect(steps.allSatisfy { $0 <= 10 }, "the numbers go forward: \(numbers.read)")
        let audio = try #require(track("audio", in: segments), "\(segments)")
        #expect((audio["framesWritten"] as? Int ?? 0) >= 100, "Opus frames decrypted and written: \(audio)")
        let sent = try await chromium.evaluate("conclavePeer.state.e2ee", as: PageE2EE.self)
        #expect(sent.send["audio"]?.notSent == 0, "the page joined with its key: nothing held back \(sent)")
        print("browser → conclave \(format): \(numbers.pictures) pictures recorded; page sent \(sent.send)")
        _ = try await chromium.evaluate("conclavePeer.leave()")
        try? FileManager.default.removeItem(at: directory)
    }

    @Test(arguments: [FrameCryptoFormat.ecall, .sframe])
    func chromiumDecryptsConclavesPublisher(format: FrameCryptoFormat) async throws {
        let bed = try TestJanus.shared()
        let call = try EncryptedCall(bed: bed, format: format)
        let conclave = try call.join()
        defer { conclave.stop() }
        let chromium = try TestChromium(janusAddress: bed.janusAddress)
        defer { chromium.stop() }
        try await chromium.open(parameters: page(bed, room: call.room, format: format, publish: false))
        try await setCallKey(call.key, in: chromium)

        let video = Self.trackMid("video")
        let audio = Self.trackMid("audio")
        let sealedKind = format == .ecall ? "audio" : "video"
        let first = try await chromium.waitFor(
            "(s.inbound[\(video)] || {}).framesDecoded >= 30 && (s.inbound[\(audio)] || {}).totalSamplesReceived > 0"
                + " && s.e2ee.receive.\(sealedKind).decrypted >= 30",
            timeout: .seconds(20)
        )
        let mid = try #require(
            first.tracks.first { $0.value.kind == "video" && $0.value.display == "u1:Conclave" }?.key
        )
        let decodedFirst = try #require(first.inbound[mid]?.framesDecoded)
        let later = try await chromium.waitFor(
            "s.inbound['\(mid)'].framesDecoded >= \(decodedFirst + 60) && s.tracks['\(mid)'].pattern.numbers.length >= 60",
            timeout: .seconds(15)
        )
        let pattern = try #require(later.tracks[mid]?.pattern)
        #expect(pattern.backwardSteps == 0, "the pattern's numbers go forward: \(pattern.numbers)")
        #expect(pattern.repeatedSteps <= 2, "numbers read twice in a row: \(pattern.numbers)")
        #expect(pattern.unreadable * 20 <= pattern.read, "unreadable strips: \(pattern.unreadable) of \(pattern.read)")
        #expect(later.errors.isEmpty, "page errors: \(later.errors)")
        let e2ee = try await chromium.evaluate("conclavePeer.state.e2ee", as: PageE2EE.self)
        #expect(e2ee.receive.values.allSatisfy { $0.undecryptable == 0 }, "no frame failed to decrypt: \(e2ee)")
        #expect((e2ee.receive["audio"]?.decrypted ?? 0) > 0, "\(e2ee)")
        if format == .ecall {
            #expect(e2ee.receive["video"]?.decrypted == 0 && (e2ee.receive["video"]?.clear ?? 0) > 0, "\(e2ee)")
        }
        print("conclave → browser \(format): page received \(e2ee.receive)")
        _ = try await chromium.evaluate("conclavePeer.leave()")
    }

    /// Chromium publishes under one key, Conclave records with another: every frame is counted as
    /// undecryptable and nothing is written. Then Conclave publishes under its key to a page holding
    /// the wrong one: the page counts and drops the frames (no picture decoded), and once given the
    /// right key the same transform decrypts and the pictures come.
    @Test func aWrongKeyIsCountedAndNothingIsDecodedFromIt() async throws {
        let format = FrameCryptoFormat.sframe
        let bed = try TestJanus.shared()
        let directory = try TestPaths.temporaryDirectory("conclave-browser-e2ee")
        let room = try plain.createRoom(on: bed, codec: "vp8")
        let publisher = try TestChromium(janusAddress: bed.janusAddress, media: try plain.writeMedia(in: directory))
        defer { publisher.stop() }
        try await publisher.open(parameters: page(bed, room: room, format: format, publish: true))
        try await setCallKey(CallKey.random(), in: publisher)
        _ = try await waitOrShow(publisher, "s.published && s.e2ee.send.video.encrypted >= 30")
        let recording = directory.appendingPathComponent("recording")
        let wrongKey = try writeKeyFile(CallKey.random(), in: directory)
        let recorded = try record(bed, room: room, format: format, keyFile: wrongKey, into: recording, in: directory)
        let participant = try chromiumInManifest(recording)
        #expect((participant["framesUndecryptable"] as? Int ?? 0) >= 60, "counted: \(participant)")
        let segments = (participant["segments"] as? [[String: Any]]) ?? []
        let written = segments.flatMap { ($0["tracks"] as? [[String: Any]]) ?? [] }.map {
            $0["framesWritten"] as? Int ?? 0
        }
        #expect(written.allSatisfy { $0 == 0 }, "nothing undecryptable is written: \(segments)")
        print("conclave record with the wrong key (exit \(recorded.status)): \(participant)")
        publisher.stop()

        let call = try EncryptedCall(bed: bed, format: format)
        let conclave = try call.join()
        defer { conclave.stop() }
        let chromium = try TestChromium(janusAddress: bed.janusAddress)
        defer { chromium.stop() }
        try await chromium.open(parameters: page(bed, room: call.room, format: format, publish: false))
        try await setCallKey(CallKey.random(), in: chromium)
        let refused = try await chromium.waitFor(
            "s.e2ee.receive.video && s.e2ee.receive.video.undecryptable >= 30 && s.e2ee.receive.audio.undecryptable >= 30",
            timeout: .seconds(20)
        )
        let mid = try #require(refused.tracks.first { $0.value.kind == "video" }?.key)
        #expect(refused.inbound[mid]?.framesDecoded ?? 0 == 0, "nothing decoded from undecryptable frames")
        let e2ee = try #require(refused.e2ee)
        #expect(e2ee.receive["video"]?.decrypted == 0, "\(e2ee)")
        #expect(e2ee.lastFailure?.contains("authentication_failed") == true, "\(e2ee)")
        #expect(refused.tracks[mid]?.pattern.read == 0, "no picture shown")

        // The right key, as the next epoch would come: the same transforms now decrypt.
        try await setCallKey(call.key, epoch: 0, in: chromium)
        let recovered = try await chromium.waitFor(
            "(s.inbound['\(mid)'] || {}).framesDecoded >= 30 && s.e2ee.receive.video.decrypted >= 30"
                + " && s.tracks['\(mid)'].pattern.numbers.length >= 10",
            timeout: .seconds(20)
        )
        #expect(recovered.errors.isEmpty, "page errors: \(recovered.errors)")
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Helpers

    /// `waitFor` that prints the page's state and Chromium's log when the condition does not come.
    private func waitOrShow(_ chromium: TestChromium, _ condition: String) async throws -> PeerState {
        do {
            return try await chromium.waitFor(condition, timeout: .seconds(20))
        } catch {
            let state = (try? await chromium.evaluate("conclavePeer.state")).map { String(decoding: $0, as: UTF8.self) }
            print("page state: \(state ?? "none")\nChromium: \(chromium.logTail(lines: 30))")
            throw error
        }
    }

    /// The mid of Conclave's track of `kind`, as a JavaScript expression over the state `s`.
    static func trackMid(_ kind: String) -> String {
        "Object.keys(s.tracks).find(m => s.tracks[m].kind == '\(kind)' && s.tracks[m].display == 'u1:Conclave')"
    }

    private func page(_ bed: JanusTestBed, room: UInt64, format: FrameCryptoFormat, publish: Bool) -> [String: String] {
        plain.page(bed, room: room, display: "chromium:Chromium", codec: "vp8", publish: publish)
            .merging(["crypto": format.rawValue]) { $1 }
    }

    /// Gives the page the call key over DevTools (never in its URL).
    private func setCallKey(_ key: CallKey, epoch: UInt64? = nil, in chromium: TestChromium) async throws {
        let base64 = key.withUnsafeBytes { Data($0).base64EncodedString() }
        let epochArgument = epoch.map { ", \($0)" } ?? ""
        _ = try await chromium.evaluate("conclave.setCallKey('\(base64)'\(epochArgument))")
    }

    private func writeKeyFile(_ key: CallKey, in directory: URL) throws -> String {
        let file = directory.appendingPathComponent("call.key")
        let written = FileManager.default.createFile(
            atPath: file.path,
            contents: Data(key.hexString.utf8),
            attributes: [.posixPermissions: 0o600]
        )
        guard written else { throw SubprocessError(description: "cannot write \(file.path)") }
        return file.path
    }

    /// `conclave record` of the room for 6 seconds.
    private func record(
        _ bed: JanusTestBed,
        room: UInt64,
        format: FrameCryptoFormat,
        keyFile: String,
        into recording: URL,
        in directory: URL
    ) throws -> ProcessResult {
        try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--room", "\(room)", "--call-id", "1", "--crypto", format.rawValue, "--key-file", keyFile,
                "--janus", bed.webSocketURL, "--ice-address", bed.hostAddress, "--out", recording.path,
                "--duration", "6", "--data-dir", directory.appendingPathComponent("data").path,
            ],
            timeout: .seconds(60)
        )
    }

    private func chromiumInManifest(_ recording: URL) throws -> [String: Any] {
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: recording.appendingPathComponent("manifest.json")))
                as? [String: Any]
        )
        return try #require(
            (manifest["participants"] as? [[String: Any]])?.first { $0["userID"] as? String == "chromium" },
            "\(manifest)"
        )
    }

    private func track(_ kind: String, in segments: [[String: Any]]) -> [String: Any]? {
        segments.flatMap { ($0["tracks"] as? [[String: Any]]) ?? [] }.first { $0["kind"] as? String == kind }
    }

    /// Frames of each codec: Opus, a VP8 keyframe and inter frame, and an H264 keyframe (SPS, PPS,
    /// IDR slice) and P frame, the last with a 3-byte start code.
    static func sampleFrames() -> [(codec: MediaCodec, bytes: [UInt8])] {
        var generator = SystemRandomNumberGenerator()
        func noise(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 1...255, using: &generator) } }
        let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xC0, 0x1E, 0x8C, 0x68, 0x14, 0x1F]
        let pps: [UInt8] = [0, 0, 0, 1, 0x68, 0xCE, 0x3C, 0x80]
        return [
            (.opus, [0xFC] + noise(80)),
            (.opus, [0x78]),
            (.vp8, [0x50, 0x42, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00] + noise(400)),
            (.vp8, [0x31, 0x22, 0x00] + noise(120)),
            (.h264, sps + pps + [0, 0, 0, 1, 0x65, 0x88] + noise(600)),
            (.h264, [0, 0, 1, 0x41, 0x9A] + noise(200) + [0, 0, 2] + noise(50)),
        ]
    }

    private func input(format: FrameCryptoFormat, key: CallKey, frames: [(codec: MediaCodec, bytes: [UInt8])])
        -> String
    {
        let object: [String: Any] = [
            "format": format.rawValue,
            "key": key.withUnsafeBytes { Data($0).base64EncodedString() },
            "frames": frames.map { ["codec": $0.codec.rawValue, "data": Data($0.bytes).base64EncodedString()] },
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Runs `body` (an async function body over `c`, the page's e2ee-core.js module, and `input`)
    /// in the page; returns its array of base64 strings decoded, or of plain strings.
    private func pageRun(_ chromium: TestChromium, _ body: String, input: String) async throws -> [[UInt8]] {
        let strings = try await pageStrings(chromium, body, input: input)
        return strings.map { Array(Data(base64Encoded: $0) ?? Data()) }
    }

    private func pageStrings(_ chromium: TestChromium, _ body: String, input: String) async throws -> [String] {
        try await chromium.evaluate(
            "conclave.core().then(async (c) => { const input = \(input);\n\(body)\n})",
            as: [String].self
        )
    }
}

/// `conclavePeer.state.e2ee` of web/e2ee-page.js.
struct PageE2EE: Decodable, CustomStringConvertible {
    struct Send: Decodable {
        var encrypted: Int
        var clear: Int
        var notSent: Int
    }

    struct Receive: Decodable {
        var decrypted: Int
        var clear: Int
        var undecryptable: Int
    }

    var format: String
    var keyEpoch: Int?
    var send: [String: Send]
    var receive: [String: Receive]
    var lastFailure: String?
    var error: String?

    var description: String {
        "format \(format), key epoch \(keyEpoch.map(String.init) ?? "none"), send \(send), receive \(receive), "
            + "last failure \(lastFailure ?? "none"), error \(error ?? "none")"
    }
}

/// An encrypted call made with `conclave call create` for one Conclave participant (u1), whose
/// call key the test reads back with `conclave keys unwrap` to give it to the page.
struct EncryptedCall {
    let directory: URL
    let room: UInt64
    let key: CallKey
    let bed: JanusTestBed

    init(bed: JanusTestBed, format: FrameCryptoFormat) throws {
        self.bed = bed
        directory = try TestPaths.temporaryDirectory("conclave-browser-call")
        let data = directory.appendingPathComponent("data").path
        let conclave = try TestPaths.conclave()
        func run(_ arguments: [String]) throws -> ProcessResult {
            let result = try runProcess(conclave, arguments)
            guard result.succeeded else {
                throw SubprocessError(description: "conclave \(arguments[0]): \(result.errorOutput)")
            }
            return result
        }
        _ = try run(["keys", "init", "--type", "p256", "--data-dir", data])
        let publicKey = directory.appendingPathComponent("u1.pub")
        try run(["keys", "show", "--public", "--data-dir", data]).stdout.write(to: publicKey)
        _ = try run([
            "call", "create", "--call-id", "\(UInt64.random(in: 1...9_000_000_000))", "--codecs", "vp8", "--crypto",
            format.rawValue, "--participant", "u1:Conclave=@\(publicKey.path)", "--out",
            directory.appendingPathComponent("invitations").path, "--janus", bed.webSocketURL, "--data-dir", data,
        ])
        let object = try JSONSerialization.jsonObject(
            with: Data(contentsOf: directory.appendingPathComponent("invitations/u1.json"))
        )
        guard let invitation = object as? [String: Any],
            let roomID = (invitation["roomId"] as? NSNumber)?.uint64Value,
            let wrapped = invitation["encryptedAESKey"] as? String
        else { throw SubprocessError(description: "no roomId or encryptedAESKey in the invitation") }
        room = roomID
        let unwrapped = try run(["keys", "unwrap", wrapped, "--data-dir", data])
        key = try CallKey(
            hex: String(decoding: unwrapped.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        )
    }

    var invitationPath: String { directory.appendingPathComponent("invitations/u1.json").path }

    /// `conclave join` with the invitation, sending the test pattern and a tone.
    func join() throws -> BackgroundProcess {
        try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "join", "--invitation", invitationPath, "--janus", bed.webSocketURL, "--ice-address", bed.hostAddress,
                "--codec", "vp8", "--video", "pattern", "--audio", "tone", "--width", "\(BrowserInteropTests.width)",
                "--height",
                "\(BrowserInteropTests.height)", "--no-window", "--speaker", "none", "--status", "none", "--duration",
                "30", "--data-dir", directory.appendingPathComponent("data").path,
            ]
        )
    }
}
