import ConclaveCore
import ConclaveTestSupport
import Synchronization
import Testing

@testable import ConclaveE2EE

/// Frames that must not decrypt are dropped with the right reason, counted per sender and reason.
@Suite("decrypt failures")
struct DecryptFailureTests {
    static let codecsByFormat: [(FrameCryptoFormat, MediaCodec)] = [
        (.ecall, .h264), (.ecall, .opus), (.sframe, .h264), (.sframe, .opus), (.sframe, .vp8),
    ]

    func sample(_ codec: MediaCodec, _ rng: inout SeededGenerator) -> [UInt8] {
        switch codec {
        case .h264: idrFrame(&rng, sliceSize: 400)
        case .opus: [0x48] + rng.bytes(80)
        case .vp8: [0x31, 0x10, 0x00] + rng.bytes(300)
        }
    }

    func expectReason(
        _ reason: DecryptFailureReason,
        _ decryptor: FrameDecryptor,
        _ input: EncodedFrame,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            let output = try decryptor.decrypt(input)
            Issue.record("expected \(reason), got a \(output.data.count)-byte frame", sourceLocation: sourceLocation)
        } catch {
            #expect(error.reason == reason, "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("tampered frame: authentication failed", arguments: codecsByFormat)
    func tampered(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 21)
        let call = makeCall(format: format)
        let sealed = try call.makeEncryptor(codec: codec, senderID: 1).encrypt(frame(codec, sample(codec, &rng)))
        var tampered = sealed
        tampered.data[tampered.data.count - 20] ^= 0x40
        let decryptor = call.makeDecryptor(codec: codec, senderID: 7)
        expectReason(.authenticationFailed, decryptor, tampered)
        #expect(call.failureCounts.count(senderID: 7, reason: .authenticationFailed) == 1)
        #expect(call.failureCounts.total == 1)
    }

    @Test("a frame that fails does not break the stream: the next good frame still opens", arguments: codecsByFormat)
    func goodFrameAfterFailure(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 23)
        let call = makeCall(format: format)
        let encryptor = call.makeEncryptor(codec: codec, senderID: 1)
        let decryptor = call.makeDecryptor(codec: codec, senderID: 1)
        let plain = [sample(codec, &rng), sample(codec, &rng)]
        let first = try encryptor.encrypt(frame(codec, plain[0]))
        let second = try encryptor.encrypt(frame(codec, plain[1]))
        #expect(try decryptor.decrypt(first).data == plain[0])
        var tampered = second
        tampered.data[tampered.data.count - 20] ^= 0x40
        expectReason(.authenticationFailed, decryptor, tampered)
        // The decryptor's kept cipher context must be usable again after a failed tag check.
        #expect(try decryptor.decrypt(second).data == plain[1])
        #expect(try decryptor.decrypt(first).data == plain[0])
    }

    @Test("wrong key: authentication failed", arguments: codecsByFormat)
    func wrongKey(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 22)
        let sender = makeCall(format: format)
        let receiver = makeCall(format: format)  // a different random key
        let sealed = try sender.makeEncryptor(codec: codec, senderID: 1).encrypt(frame(codec, sample(codec, &rng)))
        expectReason(.authenticationFailed, receiver.makeDecryptor(codec: codec, senderID: 1), sealed)
    }

    @Test("truncated frame", arguments: codecsByFormat)
    func truncated(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 23)
        let call = makeCall(format: format)
        let decryptor = call.makeDecryptor(codec: codec, senderID: 1)
        var short: [UInt8]
        switch (format, codec) {
        case (.ecall, .h264): short = [0, 0, 0, 1, 0x65, 0x88] + rng.bytes(20).map { $0 | 1 }
        case (.ecall, _): short = [0xFF] + rng.bytes(20)
        case (.sframe, .h264): short = [0, 0, 0, 1, 0x65, 0x12, 0x80]
        case (.sframe, .vp8): short = [0x31, 0x10, 0x00, 0x10] + rng.bytes(5)
        case (.sframe, _): short = [0x10] + rng.bytes(10)
        }
        expectReason(.truncated, decryptor, frame(codec, short))
    }

    @Test("sframe frame from an unknown key id")
    func unknownKeyID() throws {
        let call = makeCall(format: .sframe)
        // Epoch 3 was never installed.
        var material = SFrameKeyMaterial(callKey: .random(), keyID: SFrameKeyID(senderID: 1, epoch: 3).rawValue)
        var sealed = [UInt8]()
        SFrameCipher.seal([1, 2, 3][...], metadata: [], counter: 0, material: material, appendingTo: &sealed)
        expectReason(.unknownKeyID, call.makeDecryptor(codec: .opus, senderID: 1), frame(.opus, sealed))
        // Same for a key id whose epoch is held but under another key: authentication, not key id.
        material = SFrameKeyMaterial(callKey: .random(), keyID: SFrameKeyID(senderID: 1, epoch: 0).rawValue)
        sealed.removeAll()
        SFrameCipher.seal([1, 2, 3][...], metadata: [], counter: 0, material: material, appendingTo: &sealed)
        expectReason(.authenticationFailed, call.makeDecryptor(codec: .opus, senderID: 1), frame(.opus, sealed))
    }

    @Test("no key installed", arguments: codecsByFormat)
    func noKey(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 24)
        let sealed = try makeCall(format: format).makeEncryptor(codec: codec, senderID: 1).encrypt(
            frame(codec, sample(codec, &rng))
        )
        expectReason(.noKey, makeCall(format: format, key: nil).makeDecryptor(codec: codec, senderID: 1), sealed)
    }

    @Test("ecall audio without the 0xFF marker is not encrypted")
    func notEncrypted() {
        let call = makeCall(format: .ecall)
        expectReason(
            .notEncrypted,
            call.makeDecryptor(codec: .opus, senderID: 1),
            frame(.opus, [0x48] + Array(repeating: 7, count: 60))
        )
    }

    @Test("random bytes are rejected with a typed reason", arguments: codecsByFormat)
    func randomBytes(format: FrameCryptoFormat, codec: MediaCodec) {
        var rng = SeededGenerator(seed: 25)
        let call = makeCall(format: format)
        let decryptor = call.makeDecryptor(codec: codec, senderID: 1)
        var expected: Set<DecryptFailureReason> = [.authenticationFailed, .malformedHeader, .truncated, .unknownKeyID]
        if format == .ecall && codec == .opus { expected.insert(.notEncrypted) }
        for _ in 0..<50 {
            let input = frame(codec, rng.bytes(Int.random(in: 0...400, using: &rng)))
            do {
                _ = try decryptor.decrypt(input)
                Issue.record("random \(input.data.count) bytes decrypted")
            } catch {
                #expect(expected.contains(error.reason), "\(error)")
            }
        }
        #expect(call.failureCounts.total == 50)
    }

    @Test("ecall H264 plaintext slice (sender without key) is dropped, not decoded")
    func plaintextSliceDropped() {
        var rng = SeededGenerator(seed: 26)
        let call = makeCall(format: .ecall)
        expectReason(.authenticationFailed, call.makeDecryptor(codec: .h264, senderID: 1), frame(.h264, idrFrame(&rng)))
    }

    @Test("errors never carry key bytes")
    func errorsCarryNoKeys() throws {
        let key = CallKey.random()
        let call = makeCall(format: .ecall, key: key)
        #expect(!"\(key)".contains(key.hexString))
        let decryptor = call.makeDecryptor(codec: .opus, senderID: 1)
        do {
            _ = try decryptor.decrypt(frame(.opus, [0xFF] + Array(repeating: 1, count: 40)))
        } catch {
            #expect(!error.description.contains(key.hexString))
        }
    }

    @Test("key-needed callback: first failure requests, then 3 s cooldown, then the 10 s in-flight timeout")
    func keyNeededRateLimit() throws {
        let clock = ManualTimeSource()
        let events = Mutex<[KeyNeededEvent]>([])
        let call = makeCall(format: .ecall, clock: clock) { event in events.withLock { $0.append(event) } }
        let decryptor = call.makeDecryptor(codec: .opus, senderID: 3)
        let bad = frame(.opus, [0x01, 2, 3])
        func fail() { _ = try? decryptor.decrypt(bad) }

        fail()
        #expect(events.withLock { $0.count } == 1)
        #expect(
            events.withLock { $0.first } == KeyNeededEvent(callID: 42, senderID: 3, codec: .opus, reason: .notEncrypted)
        )
        #expect(events.withLock { $0.first?.ecallReason } == "audio_decrypt_failed")
        for _ in 0..<30 { fail() }  // a burst inside the same second
        #expect(events.withLock { $0.count } == 1)
        clock.advance(by: .seconds(5))
        fail()  // cooldown passed, but the first request is still in flight
        #expect(events.withLock { $0.count } == 1)
        clock.advance(by: .seconds(5))
        fail()  // 10 s without an answer: ask again
        #expect(events.withLock { $0.count } == 2)
        call.keyRequestCompleted()
        clock.advance(by: .seconds(2))
        fail()  // answered, but within the 3 s cooldown
        #expect(events.withLock { $0.count } == 2)
        clock.advance(by: .seconds(1))
        fail()
        #expect(events.withLock { $0.count } == 3)
        #expect(call.failureCounts.count(senderID: 3, reason: .notEncrypted) == 35)
    }

    @Test("limiter: the 1 s same-reason dedupe applies when the cooldown is shorter")
    func dedupe() {
        var limiter = KeyRequestLimiter(policy: KeyRequestPolicy(timeout: .zero, cooldown: .zero, dedupe: .seconds(1)))
        var decisions: [Bool] = []
        decisions.append(limiter.shouldRequest(reason: "video_decrypt_failed", at: .zero))
        decisions.append(limiter.shouldRequest(reason: "video_decrypt_failed", at: .milliseconds(500)))
        decisions.append(limiter.shouldRequest(reason: "audio_decrypt_failed", at: .milliseconds(600)))
        decisions.append(limiter.shouldRequest(reason: "video_decrypt_failed", at: .milliseconds(1_000)))
        #expect(decisions == [true, false, true, true])
    }
}

@Suite("decryptor fuzzing")
struct DecryptorFuzzTests {
    @Test(
        "random and mutated frames never crash either decryptor and fail with typed reasons",
        arguments: FrameCryptoFormat.allCases
    )
    func fuzz(format: FrameCryptoFormat) throws {
        var rng = SeededGenerator(seed: format == .ecall ? 0xEC411 : 0x5F4A3E)
        let call = makeCall(format: format)
        var valid: [EncodedFrame] = []
        for codec in MediaCodec.allCases where !(format == .ecall && codec == .vp8) {
            let encryptor = call.makeEncryptor(codec: codec, senderID: 1)
            for _ in 0..<4 {
                let plain: [UInt8] =
                    switch codec {
                    case .h264: Bool.random(using: &rng) ? idrFrame(&rng, sliceSize: 300) : pFrame(&rng, size: 200)
                    case .opus: rng.bytes(Int.random(in: 1...120, using: &rng))
                    case .vp8:
                        [UInt8.random(in: 0...255, using: &rng)] + rng.bytes(Int.random(in: 0...200, using: &rng))
                    }
                valid.append(try encryptor.encrypt(frame(codec, plain)))
            }
        }
        let decryptors = Dictionary(
            uniqueKeysWithValues: MediaCodec.allCases.map { ($0, call.makeDecryptor(codec: $0, senderID: 2)) }
        )
        var failures = 0
        for iteration in 0..<3_000 {
            var input = valid[Int.random(in: 0..<valid.count, using: &rng)]
            switch iteration % 4 {
            case 0:
                input.data = rng.bytes(Int.random(in: 0...300, using: &rng))
            case 1:
                for _ in 0...Int.random(in: 0...4, using: &rng) where !input.data.isEmpty {
                    input.data[Int.random(in: 0..<input.data.count, using: &rng)] = UInt8.random(
                        in: 0...255,
                        using: &rng
                    )
                }
            case 2:
                input.data = Array(input.data.prefix(Int.random(in: 0...input.data.count, using: &rng)))
            default:
                let at = Int.random(in: 0...input.data.count, using: &rng)
                input.data.insert(contentsOf: rng.bytes(Int.random(in: 1...8, using: &rng)), at: at)
            }
            do {
                _ = try decryptors[input.codec]!.decrypt(input)
            } catch {
                failures += 1
                #expect(DecryptFailureReason.allCases.contains(error.reason))
            }
        }
        #expect(call.failureCounts.total == failures)
        #expect(failures > 2_000)
    }
}

@Suite struct KeyEpochReportTests {
    @Test(
        "the decryptor tells which key epoch opened each frame",
        arguments: [
            (FrameCryptoFormat.ecall, MediaCodec.h264), (.ecall, .opus), (.sframe, .h264), (.sframe, .opus),
            (.sframe, .vp8),
        ]
    )
    func reportsTheEpoch(format: FrameCryptoFormat, codec: MediaCodec) throws {
        var rng = SeededGenerator(seed: 31)
        let first = CallKey.random()
        let second = CallKey.random()
        let sender = makeCall(format: format, key: first)
        let receiver = makeCall(format: format, key: first)
        receiver.keyRing.install(second, epoch: 1)  // `first` stays as the previous key
        let encryptor = sender.makeEncryptor(codec: codec, senderID: 1)
        let decryptor = receiver.makeDecryptor(codec: codec, senderID: 1)
        let payload = codec == .opus ? [0x48] + rng.bytes(80) : codec == .h264 ? idrFrame(&rng) : rng.bytes(300)

        let old = try decryptor.decryptReportingEpoch(try encryptor.encrypt(frame(codec, payload)))
        #expect(old.keyEpoch == 0)
        #expect(old.frame.data == payload)
        sender.keyRing.install(second, epoch: 1)
        let new = try decryptor.decryptReportingEpoch(try encryptor.encrypt(frame(codec, payload)))
        #expect(new.keyEpoch == 1)
        #expect(new.frame.data == payload)
    }

    @Test func ecallVP8IsInClearAndReportsNoEpoch() throws {
        let call = makeCall(format: .ecall)
        let vp8 = frame(.vp8, [0x31, 0x10, 0x00, 1, 2, 3])
        let opened = try call.makeDecryptor(codec: .vp8, senderID: 1).decryptReportingEpoch(vp8)
        #expect(opened.keyEpoch == nil)
        #expect(opened.frame.data == vp8.data)
    }
}
