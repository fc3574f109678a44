import ConclaveCore
import ConclaveTestSupport
import Testing

@testable import ConclaveE2EE

@Suite("key ring")
struct KeyRingTests {
    let first = KeyRingEntry(key: .random(), epoch: 0)
    let second = KeyRingEntry(key: .random(), epoch: 1)
    let third = KeyRingEntry(key: .random(), epoch: 2)

    @Test("previous key: 30 s for audio, 120 s for video, as ECall")
    func retention() {
        var ring = KeyRing()
        ring.install(first, at: .zero)
        ring.install(second, at: .seconds(100))
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(129)) == [second, first])
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(130)) == [second])
        #expect(ring.decryptionCandidates(for: .video, at: .seconds(219)) == [second, first])
        ring.advance(to: .seconds(220))
        #expect(ring.decryptionCandidates(for: .video, at: .seconds(220)) == [second])
        #expect(ring.previous == nil)
    }

    @Test("rotation: next decrypts at once, becomes current at its time, old current becomes previous")
    func rotation() {
        var ring = KeyRing()
        ring.install(first, at: .zero)
        ring.schedule(second, applyAt: .seconds(10), at: .zero)
        #expect(ring.current == first)
        #expect(ring.decryptionCandidates(for: .video, at: .seconds(1)) == [first, second])
        ring.advance(to: .seconds(10))
        #expect(ring.current == second)
        #expect(ring.next == nil)
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(10)) == [second, first])
        #expect(ring.entry(epochByte: 0, for: .audio, at: .seconds(10)) == first)
        #expect(ring.entry(epochByte: 2, for: .audio, at: .seconds(10)) == nil)
    }

    @Test("an unapplied next key is forgotten after 60 s")
    func nextExpires() {
        var ring = KeyRing()
        ring.install(first, at: .zero)
        ring.schedule(second, applyAt: .seconds(1_000), at: .zero)
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(59)).contains(second))
        ring.advance(to: .seconds(60))
        #expect(ring.next == nil)
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(60)) == [first])
    }

    @Test("installing the same key again keeps the previous one")
    func reinstallSameKey() {
        var ring = KeyRing()
        ring.install(first, at: .zero)
        ring.install(second, at: .seconds(1))
        ring.install(second, at: .seconds(2))
        #expect(ring.previous == first)
    }

    @Test("an older epoch installed after a newer one is kept for decryption only")
    func olderEpochIsNotMadeCurrent() {
        var ring = KeyRing()
        #expect(ring.install(first, at: .zero) == .madeCurrent)
        ring.schedule(second, applyAt: .seconds(10), at: .zero)
        ring.advance(to: .seconds(10))
        // An answer written under epoch 0 arrives after epoch 1 applied.
        #expect(ring.install(first, at: .seconds(11)) == .keptForDecryption)
        #expect(ring.current == second)
        #expect(ring.decryptionCandidates(for: .audio, at: .seconds(40)) == [second, first], "retained from then on")
        #expect(ring.install(second, at: .seconds(12)) == .alreadyCurrent)
        // An older key does not push out a newer previous one.
        ring.install(third, at: .seconds(13))
        ring.retain(first, at: .seconds(14))
        #expect(ring.previous == second)
    }

    @Test("installing a key consumes a scheduled one that is not newer")
    func installSupersedesAnOlderNext() {
        var ring = KeyRing()
        ring.install(first, at: .zero)
        ring.schedule(second, applyAt: .seconds(10), at: .zero)
        ring.install(third, at: .seconds(1))
        #expect(ring.next == nil)
        ring.advance(to: .seconds(10))
        #expect(ring.current == third, "epoch 1 never follows epoch 2")
        // A newer scheduled key stays.
        var other = KeyRing()
        other.install(first, at: .zero)
        other.schedule(third, applyAt: .seconds(10), at: .zero)
        #expect(other.install(second, at: .seconds(1)) == .madeCurrent)
        #expect(other.next == third)
    }

    @Test("the shared ring applies a due rotation before it installs")
    func sharedRingInstallsAfterADueRotation() {
        let clock = ManualTimeSource()
        let ring = CallKeyRing(clock: clock)
        ring.install(first.key, epoch: 0)
        ring.schedule(second.key, epoch: 1, after: .seconds(10))
        clock.advance(by: .seconds(10))
        #expect(ring.install(first.key, epoch: 0) == .keptForDecryption)
        #expect(ring.current() == second)
    }

    @Test("frames of the old key still decrypt after a rotation, through the shared ring")
    func stagesFollowRotation() throws {
        let clock = ManualTimeSource()
        let ring = CallKeyRing(clock: clock)
        ring.install(first.key, epoch: 0)
        let sender = CallFrameCrypto(callID: 1, format: .sframe, keyRing: ring, logger: .init(label: "test"))
        let receiver = sender.makeDecryptor(codec: .h264, senderID: 1)
        var rng = SeededGenerator(seed: 31)
        let beforeRotation = try sender.makeEncryptor(codec: .h264, senderID: 1).encrypt(frame(.h264, idrFrame(&rng)))
        ring.schedule(second.key, epoch: 1, after: .seconds(10))
        let early = try sender.makeEncryptor(codec: .h264, senderID: 1).encrypt(frame(.h264, pFrame(&rng)))
        clock.advance(by: .seconds(10))
        #expect(ring.current()?.epoch == 1)
        let after = try sender.makeEncryptor(codec: .h264, senderID: 1).encrypt(frame(.h264, pFrame(&rng)))
        #expect(try SFrameKeyID(rawValue: SFrameHeader.parse(after.data[5...]).header.keyID).epoch == 1)
        _ = try receiver.decrypt(beforeRotation)
        _ = try receiver.decrypt(early)
        _ = try receiver.decrypt(after)
        clock.advance(by: .seconds(120))
        #expect(throws: FrameDecryptionError.self) { try receiver.decrypt(beforeRotation) }
    }
}
