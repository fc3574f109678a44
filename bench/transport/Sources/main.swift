import ConclaveCall
import ConclaveCore
import ConclaveICE
import ConclaveMedia
import ConclavePeerConnection
import ConclaveSRTP
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// Transport benchmark, against a real Janus in a test-bed namespace (run as root):
//
// 1. Join time: from starting to subscribe to the first video frame of a publisher already in
//    the room (p50/p95 over BENCH_JOIN_RUNS runs).
// 2. Receive cost: CPU-seconds of this process per received feed-second with 1, 8 and 32 VP8
//    1 Mbit/s + Opus feeds. The publishers are Janus `add_remote_publisher` entries fed by ffmpeg
//    with plain RTP, so they cost this process nothing. Target: under 1% of a core per feed.
// 3. SRTP unprotect throughput for 1200-byte packets in both profiles, next to `openssl speed`
//    for the same cipher on the same machine in the same run.
// 4. What a sent frame would pay to reach the ICE loop: an uncontended lock (what
//    `RTPSendSession.send` and `MediaTransport`'s send path take) against posting the work to the
//    loop (what binding the send side to the loop would take), in CPU per frame.

let environment = ProcessInfo.processInfo.environment
let joinRuns = Int(environment["BENCH_JOIN_RUNS"] ?? "") ?? 10
let feedCounts = (environment["BENCH_FEEDS"] ?? "1,8,32").split(separator: ",").compactMap { Int($0) }
let measureSeconds = Double(environment["BENCH_SECONDS"] ?? "") ?? 10

var logger = Logger(label: "bench")
logger.logLevel = ProcessInfo.processInfo.environment["BENCH_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error

/// Prints a line at once (output to a file is otherwise buffered until exit).
func report(_ line: String) {
    print(line)
    fflush(nil)
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Counts what arrives and when the first video frame came.
final class CountingObserver: CallMediaObserver {
    struct Counts {
        var frames = 0
        var bytes = 0
        var firstVideo: ContinuousClock.Instant?
    }
    let counts = Mutex(Counts())
    func participantJoined(feedID: UInt64, display: String?) {}
    func participantLeft(feedID: UInt64) {}
    func senderReport(_ report: SubscribedSenderReport) {}
    func received(_ media: ReceivedMedia) {
        guard case .frame(let frame) = media else { return }
        counts.withLock {
            $0.frames += 1
            $0.bytes += frame.frame.data.count
            if frame.frame.codec.kind == .video, $0.firstVideo == nil { $0.firstVideo = .now }
        }
    }
}

let bed = try JanusTestBed()
defer { bed.stop() }
report("Janus \(bed.webSocketURL) (namespace \(bed.namespace)); \(ProcessInfo.processInfo.activeProcessorCount) cores")
let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
let connection = try await JanusConnection.connect(to: bed.webSocketURL)
let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())

// MARK: 1. Join time

do {
    let room = try await admin.createRoom(.init(room: 1, videoCodecs: ["vp8"]))
    let publisher = try await Publisher.publish(
        on: try await connection.createSession(),
        configuration: .init(room: room, display: "1:Pattern", transport: transport),
        logger: logger
    )
    let sender = MediaSender(
        source: EncodingVideoSource(
            raw: try PatternSource(width: 640, height: 480, frameRate: 30),
            encoder: try VideoEncoderSettings(codec: .vp8).makeEncoder()
        ),
        encryptor: nil,
        publisher: publisher,
        logger: logger
    )
    let keyframes = Task { for await _ in publisher.keyframeRequests { sender.requestKeyframe() } }
    let sending = Task { try await sender.run(pacer: MediaPacer(mode: .realTime)) }
    try await Task.sleep(for: .seconds(1))

    var samples: [Double] = []
    for _ in 0..<joinRuns {
        let start = ContinuousClock.now
        let session = try await connection.createSession()
        let listener = try await RoomListener.join(on: session, room: room, display: nil)
        let observer = CountingObserver()
        let subscription = RoomSubscription(
            session: session,
            configuration: .init(room: room, ownFeedID: listener.joined.id, crypto: nil, transport: transport),
            initialPublishers: listener.joined.publishers,
            roomEvents: listener.roomEvents,
            observers: [observer],
            logger: logger
        )
        let deadline = ContinuousClock.now + .seconds(10)
        while observer.counts.withLock({ $0.firstVideo }) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        if let first = observer.counts.withLock({ $0.firstVideo }) {
            samples.append(seconds(first - start) * 1000)
        } else if environment["BENCH_LOG"] != nil {
            let streams = await subscription.subscriber?.statistics ?? [:]
            for (mid, stats) in streams.sorted(by: { $0.key < $1.key }) {
                report(
                    "no video: mid \(mid) packets \(stats.packets) assembled \(stats.framesAssembled) "
                        + "dropped \(stats.framesDropped) PLI \(stats.pliSent)"
                )
            }
            report("publisher: \(publisher.statistics.map { "\($0.codec) PLI \($0.pliReceived)" })")
        }
        await subscription.close()
        await listener.leave()
        try? await session.destroy()
    }
    samples.sort()
    if joinRuns == 0 {
        // skipped
    } else if samples.isEmpty {
        report("join to first video frame: no frame arrived")
    } else {
        let p50 = samples[samples.count / 2]
        let p95 = samples[min(samples.count - 1, Int(Double(samples.count) * 0.95))]
        report(
            String(format: "join to first video frame: p50 %.0f ms, p95 %.0f ms over %d runs", p50, p95, samples.count)
        )
    }
    sending.cancel()
    keyframes.cancel()
    await publisher.leave()
    try await admin.destroyRoom(room)
}

// MARK: 2. Receive cost per feed

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-transport-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }
let media = directory.appendingPathComponent("feed.webm").path
try RemoteFeeds.makeMedia(at: media)

for feeds in feedCounts {
    let room = try await admin.createRoom(.init(room: UInt64(100 + feeds), publishers: feeds + 2, videoCodecs: ["vp8"]))
    let remote = try await RemoteFeeds.start(count: feeds, room: room, media: media, bed: bed, admin: admin)
    let session = try await connection.createSession()
    let listener = try await RoomListener.join(on: session, room: room, display: nil)
    let observer = CountingObserver()
    let subscription = RoomSubscription(
        session: session,
        configuration: .init(room: room, ownFeedID: listener.joined.id, crypto: nil, transport: transport),
        initialPublishers: listener.joined.publishers,
        roomEvents: listener.roomEvents,
        observers: [observer],
        logger: logger
    )
    try await Task.sleep(for: .seconds(3))  // subscribed, keyframes arrived
    let startCPU = cpuSeconds()
    let startCounts = observer.counts.withLock { $0 }
    let start = ContinuousClock.now
    try await Task.sleep(for: .milliseconds(Int(measureSeconds * 1000)))
    let wall = seconds(ContinuousClock.now - start)
    let cpu = cpuSeconds() - startCPU
    let endCounts = observer.counts.withLock { $0 }
    let feedSeconds = Double(feeds) * wall
    let megabits = Double(endCounts.bytes - startCounts.bytes) * 8 / 1e6 / wall
    report(
        String(
            format:
                "%2d feeds: %.4f CPU-s per feed-second (%.2f%% of a core per feed), %.1f Mbit/s received, %d frames in %.1f s",
            feeds,
            cpu / feedSeconds,
            100 * cpu / feedSeconds,
            megabits,
            endCounts.frames - startCounts.frames,
            wall
        )
    )
    remote.stop()
    await subscription.close()
    await listener.leave()
    try? await session.destroy()
    try await admin.destroyRoom(room)
}

await connection.close()

// MARK: 3. SRTP unprotect throughput

/// Thousands of bytes per second from the last line of an `openssl speed` run, in MB/s.
func opensslMegabytesPerSecond(_ arguments: [String], label: String) throws -> Double {
    let output = try JanusTestBed.runCommand("openssl", ["speed"] + arguments + ["-seconds", "2"])
    guard let line = output.split(separator: "\n").last(where: { $0.lowercased().hasPrefix(label) }),
        let field = line.split(separator: " ").last, let thousands = Double(field.dropLast())
    else { throw TestBedError("unexpected openssl speed output: \(output)") }
    return thousands / 1000
}

let payload = 1200
let packetSize = payload + 12

/// Unprotects packets in place with `SRTPContext`, as the receive path does on the ICE loop
/// thread (no lock), or with `SRTPSession`, the same context behind a lock, as senders use it.
func unprotectMegabytesPerSecond(_ profile: SRTPProfile, locked: Bool) throws -> Double {
    var key = [UInt8](repeating: 0, count: profile.masterKeyLength + profile.masterSaltLength)
    for index in key.indices { key[index] = UInt8(truncatingIfNeeded: index * 7 + 3) }
    let sender = try SRTPContext(profile: profile, direction: .outbound, keyAndSalt: key)
    let receiver = try SRTPContext(profile: profile, direction: .inbound, keyAndSalt: key)
    let lockedReceiver = try SRTPSession(profile: profile, direction: .inbound, keyAndSalt: key)
    let batch = 20_000
    let slot = packetSize + SRTPContext.trailerCapacity
    var storage = [UInt8](repeating: 0, count: batch * slot)
    var lengths = [Int](repeating: 0, count: batch)
    var total = 0.0
    var elapsed = Duration.zero
    var sequence: UInt16 = 0
    var timestamp: UInt32 = 0
    for _ in 0..<5 {
        try storage.withUnsafeMutableBytes { buffer in
            for index in 0..<batch {
                sequence &+= 1
                timestamp &+= 3000
                let packet = UnsafeMutableRawBufferPointer(rebasing: buffer[(index * slot)..<((index + 1) * slot)])
                let header: [UInt8] =
                    [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
                    + withUnsafeBytes(of: timestamp.bigEndian) { Array($0) } + [0x12, 0x34, 0x56, 0x78]
                packet.copyBytes(from: header)
                for offset in 12..<packetSize { packet[offset] = 0xA5 }
                lengths[index] = try sender.protect(packet, length: packetSize)
            }
            let start = ContinuousClock.now
            for index in 0..<batch {
                let packet = UnsafeMutableRawBufferPointer(rebasing: buffer[(index * slot)..<((index + 1) * slot)])
                lengths[index] =
                    locked
                    ? try lockedReceiver.unprotect(packet, length: lengths[index])
                    : try receiver.unprotect(packet, length: lengths[index])
            }
            elapsed += ContinuousClock.now - start
        }
        total += Double(batch * packetSize)
    }
    return total / seconds(elapsed) / 1e6
}

/// libsrtp2's srtp_unprotect called directly from C (bench/transport/baseline), when `run` built it.
func libsrtpMegabytesPerSecond(_ profile: SRTPProfile) throws -> Double? {
    guard let path = environment["BENCH_SRTP_BASELINE"], !path.isEmpty else { return nil }
    let output = try JanusTestBed.runCommand(path, [profile == .aeadAES128GCM ? "gcm" : "cm"])
    return Double(output.trimmingCharacters(in: .whitespacesAndNewlines))
}

// OpenSSL at the packet size, in the shape SRTP uses the cipher: for GCM with `-aead` (a fresh IV,
// the header as AAD and the tag per packet); for AES-CM with HMAC-SHA1, AES-CTR and HMAC-SHA1 each
// over the packet, combined as one pass after the other (1 / (1/a + 1/b)).
report(
    "SRTP unprotect, \(packetSize)-byte packets (Debian's libsrtp2 does its crypto with NSS, not OpenSSL):"
)
for profile in [SRTPProfile.aeadAES128GCM, .aes128CMHMACSHA1_80] {
    let ours = try unprotectMegabytesPerSecond(profile, locked: false)
    let locked = try unprotectMegabytesPerSecond(profile, locked: true)
    let direct = try libsrtpMegabytesPerSecond(profile)
    let openssl: Double
    let opensslName: String
    if profile == .aeadAES128GCM {
        openssl = try opensslMegabytesPerSecond(
            ["-aead", "-evp", "aes-128-gcm", "-bytes", "\(packetSize)"],
            label: "aes-128-gcm"
        )
        opensslName = "openssl speed -aead aes-128-gcm"
    } else {
        let ctr = try opensslMegabytesPerSecond(
            ["-evp", "aes-128-ctr", "-bytes", "\(packetSize)"],
            label: "aes-128-ctr"
        )
        let hmac = try opensslMegabytesPerSecond(["-hmac", "sha1", "-bytes", "\(packetSize)"], label: "hmac(sha1)")
        openssl = 1 / (1 / ctr + 1 / hmac)
        opensslName = "openssl speed aes-128-ctr + hmac sha1"
    }
    var line = String(format: "  %@: Conclave %.0f MB/s (behind a lock %.0f MB/s)", "\(profile)", ours, locked)
    if let direct {
        line += String(format: "; libsrtp from C %.0f MB/s (ratio %.2f)", direct, ours / direct)
    }
    line += String(format: "; %@ %.0f MB/s (ratio %.2f)", opensslName, openssl, ours / openssl)
    report(line)
}

// MARK: 4. A sent frame: the send lock against a post to the ICE loop

/// CPU nanoseconds of this process per iteration of `body`, run `count` times.
func cpuNanoseconds(per count: Int, _ body: () async -> Void) async -> Double {
    let start = cpuSeconds()
    await body()
    return (cpuSeconds() - start) * 1e9 / Double(count)
}

do {
    let locks = 10_000_000
    let lock = Mutex(0)
    let lockCost = await cpuNanoseconds(per: locks) {
        for _ in 0..<locks { lock.withLock { $0 += 1 } }
    }
    let agent = try ICEAgent(configuration: .init(role: .controlling, localAddresses: ["127.0.0.1"]), logger: logger)
    let bound = LoopBound(0, on: agent)
    let posts = 200_000
    let postCost = await cpuNanoseconds(per: posts) {
        for _ in 0..<posts { bound.execute { $0 += 1 } }
        // Posts run in order: the last read sees them all.
        while await bound.run({ $0 }) < posts {}
    }
    await agent.close()
    report(
        String(
            format: "per frame sent: an uncontended lock %.0f ns of CPU; a post to the ICE loop %.0f ns of CPU (%.0fx)",
            lockCost,
            postCost,
            postCost / lockCost
        )
    )
}
