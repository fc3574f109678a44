import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ECallSignaling
import Foundation
import Logging
import RabbitMQTestBed
import STOMPClient
import Synchronization

// The call key's lifecycle over the real broker, without Janus: `participants` coordinators, each
// with its own `CallFrameCrypto` and `STOMPSignalingChannel`. The host encrypts an audio and a video
// frame every 10 ms and every other device decrypts both through its own key ring, so a key that
// arrives late shows up as undecryptable frames.
//
// (a) rotation: from the host's decision to the last device having scheduled the key, and the
//     frames that failed across the switches (target 0);
// (b) emergency: a device's key corrupted; from its first failed frame to the host's key installed
//     (target <= 1 s);
// (c) rejoin: a device's key ring emptied; from its `participant_request_rejoin` to the key
//     installed (target <= 500 ms).

/// When each device scheduled or installed each epoch, as the coordinators report it.
final class AppliedKeys: Sendable {
    struct Record: Sendable {
        var user: UInt64
        var epoch: UInt64
        var at: ContinuousClock.Instant
    }

    let records: AsyncStream<Record>
    private let continuation: AsyncStream<Record>.Continuation

    init() { (records, continuation) = AsyncStream.makeStream(of: Record.self) }

    func applied(_ epoch: UInt64, by user: UInt64) {
        continuation.yield(Record(user: user, epoch: epoch, at: .now))
    }
}

/// The host's frames, every 10 ms, decrypted by every other device; failures counted per device.
final class FrameTraffic: Sendable {
    private struct Counts {
        var failures: [UInt64: Int] = [:]
        var firstFailure: [UInt64: ContinuousClock.Instant] = [:]
        var paused: Set<UInt64> = []
        var decrypted = 0
    }

    private let counts = Mutex(Counts())
    private let encryptors: [FrameEncryptor]
    private let decryptors: [(user: UInt64, stages: [FrameDecryptor])]
    private let frames: [EncodedFrame]

    init(host: CallFrameCrypto, receivers: [(user: UInt64, crypto: CallFrameCrypto)]) {
        let codecs: [MediaCodec] = [.opus, .h264]
        encryptors = codecs.map { host.makeEncryptor(codec: $0, senderID: 1) }
        decryptors = receivers.map { receiver in
            (receiver.user, codecs.map { receiver.crypto.makeDecryptor(codec: $0, senderID: 1) })
        }
        // An Opus packet and an H264 slice (start code, non-IDR NAL header, no zero runs).
        frames = [
            EncodedFrame(codec: .opus, data: [UInt8](repeating: 0x5a, count: 120), rtpTimestamp: 0, isKeyframe: false),
            EncodedFrame(
                codec: .h264,
                data: [0, 0, 0, 1, 0x41] + [UInt8](repeating: 0x7e, count: 1200) + [0x80],
                rtpTimestamp: 0,
                isKeyframe: false
            ),
        ]
    }

    /// One round: each frame encrypted once and decrypted by every device that is not paused.
    func round() {
        let paused = counts.withLock { $0.paused }
        for (index, encryptor) in encryptors.enumerated() {
            guard let sealed = try? encryptor.encrypt(frames[index]) else { continue }
            for (user, stages) in decryptors where !paused.contains(user) {
                do {
                    _ = try stages[index].decrypt(sealed)
                    counts.withLock { $0.decrypted += 1 }
                } catch {
                    counts.withLock { counts in
                        counts.failures[user, default: 0] += 1
                        if counts.firstFailure[user] == nil { counts.firstFailure[user] = .now }
                    }
                }
            }
        }
    }

    /// Runs ``round()`` every 10 ms until cancelled.
    func start() -> Task<Void, Never> {
        Task.detached {
            let clock = ContinuousClock()
            var next = clock.now
            while !Task.isCancelled {
                self.round()
                next = next.advanced(by: .milliseconds(10))
                try? await clock.sleep(until: next)
            }
        }
    }

    var totalFailures: Int { counts.withLock { $0.failures.values.reduce(0, +) } }
    var decryptedFrames: Int { counts.withLock { $0.decrypted } }
    func failures(of user: UInt64) -> Int { counts.withLock { $0.failures[user] ?? 0 } }
    func firstFailure(of user: UInt64) -> ContinuousClock.Instant? { counts.withLock { $0.firstFailure[user] } }
    func pause(_ user: UInt64, _ paused: Bool) {
        counts.withLock { counts in
            if paused { counts.paused.insert(user) } else { counts.paused.remove(user) }
        }
    }
}

/// One device of the bench call.
struct BenchDevice {
    var user: UInt64
    var channel: STOMPSignalingChannel
    var ring: CallKeyRing
    var crypto: CallFrameCrypto
    var coordinator: CallKeyCoordinator
}

/// A call of users 1… `count` (device 100 + user), user 1 hosting, over `bed`.
func benchCall(
    _ bed: RabbitMQTestBed,
    count: Int,
    rotationPeriod: Double,
    passcodes: inout [UInt64: String],
    applied: AppliedKeys
) async throws -> [BenchDevice] {
    var logger = Logger(label: "bench-signaling")
    logger.logLevel = .error
    var identities: [UInt64: DeviceIdentity] = [:]
    var roster: [RosterEntry] = []
    for user in 1...UInt64(count) {
        let identity = try DeviceIdentity.generate(.p256)
        identities[user] = identity
        roster.append(
            RosterEntry(
                userId: user,
                deviceId: 100 + user,
                displayName: "user \(user)",
                publicKey: identity.publicKeyString,
                isHost: user == 1
            )
        )
    }
    let key = CallKey.random()
    var devices: [BenchDevice] = []
    for entry in roster {
        if passcodes[entry.deviceId] == nil { passcodes[entry.deviceId] = try bed.addDevice(entry.deviceId) }
        let channel = try STOMPSignalingChannel(
            configuration: .init(url: bed.webSocketURL, deviceID: entry.deviceId, passcode: passcodes[entry.deviceId]!),
            logger: logger
        )
        try await channel.connect()
        let ring = CallKeyRing()
        ring.install(key, epoch: 0)
        let user = entry.userId
        let coordinator = CallKeyCoordinator(
            lifecycle: CallKeyLifecycle(
                configuration: .init(callId: 900, me: entry.device, rotationPeriod: rotationPeriod, rotationLead: 1),
                identity: try DeviceIdentity(type: .p256, privateKeyBytes: identities[user]!.privateKeyBytes),
                roster: roster,
                key: key
            ),
            channel: channel,
            keyRing: ring,
            storage: nil,
            logger: logger,
            epochApplied: { applied.applied($0.epoch, by: user) }
        )
        let crypto = CallFrameCrypto(
            callID: 900,
            format: .ecall,
            keyRing: ring,
            logger: logger,
            onKeyNeeded: coordinator.keyNeededHandler
        )
        devices.append(BenchDevice(user: user, channel: channel, ring: ring, crypto: crypto, coordinator: coordinator))
    }
    // Every subscription is live before the first key message goes out.
    for device in devices { await device.coordinator.start(crypto: device.crypto) }
    return devices
}

func endCall(_ devices: [BenchDevice]) async {
    for device in devices {
        await device.coordinator.stop()
        await device.channel.close()
    }
}

/// When `user` next applied a key, skipping other devices' records; nil if the stream ended.
func nextRecord(of user: UInt64, in records: inout AsyncStream<AppliedKeys.Record>.Iterator) async
    -> ContinuousClock.Instant?
{
    while let record = await records.next() {
        if record.user == user { return record.at }
    }
    return nil
}

func milliseconds(_ duration: Duration) -> Double { micros(duration) / 1000 }

func summary(_ values: [Double]) -> String {
    let sorted = values.sorted()
    guard let max = sorted.last else { return "no samples" }
    return String(format: "p50 %.1f ms, max %.1f ms (%d samples)", sorted[sorted.count / 2], max, sorted.count)
}

func lifecycleBenchmark(_ bed: RabbitMQTestBed) async throws {
    let participants = Int(ProcessInfo.processInfo.environment["BENCH_PARTICIPANTS"] ?? "") ?? 16
    let rotations = Int(ProcessInfo.processInfo.environment["BENCH_ROTATIONS"] ?? "") ?? 5
    let trials = Int(ProcessInfo.processInfo.environment["BENCH_TRIALS"] ?? "") ?? 3
    var passcodes: [UInt64: String] = [:]

    // (a) Periodic rotations every 2 s, each announced 1 s ahead.
    let applied = AppliedKeys()
    var records = applied.records.makeAsyncIterator()
    let devices = try await benchCall(
        bed,
        count: participants,
        rotationPeriod: 2,
        passcodes: &passcodes,
        applied: applied
    )
    let traffic = FrameTraffic(host: devices[0].crypto, receivers: devices.dropFirst().map { ($0.user, $0.crypto) })
    let sender = traffic.start()
    var decided: [UInt64: ContinuousClock.Instant] = [:]
    var scheduled: [UInt64: [UInt64: ContinuousClock.Instant]] = [:]
    var latencies: [Double] = []
    // Until the host decides the rotation after the last one measured: that one's switch is past.
    while decided[UInt64(rotations) + 1] == nil, let record = await records.next() {
        if record.user == 1 {
            decided[record.epoch] = record.at
        } else {
            scheduled[record.epoch, default: [:]][record.user] = record.at
        }
        if let start = decided[record.epoch], let all = scheduled[record.epoch], all.count == participants - 1,
            let last = all.values.max()
        {
            latencies.append(milliseconds(last - start))
        }
    }
    sender.cancel()
    await sender.value
    print(
        "rotation at \(participants) participants: host's decision to every device scheduled: "
            + summary(latencies) + " (the key is sent 1 s ahead of its switch)"
    )
    print(
        "  frames across \(rotations) switches: \(traffic.decryptedFrames) decrypted, "
            + "\(traffic.totalFailures) undecryptable (target 0)"
    )
    await endCall(devices)

    // (b) and (c): a call that does not rotate, so that only the repair changes keys.
    let repairs = AppliedKeys()
    var repaired = repairs.records.makeAsyncIterator()
    let call = try await benchCall(
        bed,
        count: participants,
        rotationPeriod: 3600,
        passcodes: &passcodes,
        applied: repairs
    )
    let media = FrameTraffic(host: call[0].crypto, receivers: call.dropFirst().map { ($0.user, $0.crypto) })
    let running = media.start()
    var emergency: [Double] = []
    for trial in 0..<min(trials, participants - 1) {
        let victim = call[1 + trial]
        victim.ring.removeAll()
        victim.ring.install(.random(), epoch: 0)
        let installed = await nextRecord(of: victim.user, in: &repaired)
        if let installed, let first = media.firstFailure(of: victim.user) {
            emergency.append(milliseconds(installed - first))
        }
    }
    print(
        "emergency (request_aes_key): first failed frame to the host's key installed: \(summary(emergency))"
            + " (target <= 1000 ms)"
    )
    let lost = call.dropFirst().prefix(emergency.count).map { media.failures(of: $0.user) }
    print("  frames lost by each corrupted device until then: \(lost)")

    var rejoin: [Double] = []
    for trial in 0..<min(trials, participants - 1) {
        let device = call[participants - 1 - trial]
        media.pause(device.user, true)
        device.ring.removeAll()
        let asked = ContinuousClock.now
        await device.coordinator.requestRejoin()
        if let installed = await nextRecord(of: device.user, in: &repaired) {
            rejoin.append(milliseconds(installed - asked))
        }
        media.pause(device.user, false)
    }
    print("rejoin (participant_request_rejoin): request to key installed: \(summary(rejoin)) (target <= 500 ms)")
    running.cancel()
    await running.value
    let repairedUsers = Set(call.dropFirst().prefix(trials).map(\.user))
    let others = call.dropFirst().filter { !repairedUsers.contains($0.user) }.map { media.failures(of: $0.user) }
    print("  undecryptable frames at the devices not repaired: \(others.reduce(0, +)) (target 0)")
    await endCall(call)
}
