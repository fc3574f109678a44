import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed

// Janus signaling benchmark: request round trips over the test bed's veth link to a real Janus.
//
// Prints p50/p99 round-trip latency of a VideoRoom `exists` (a plugin request: client -> lws ->
// Janus core -> VideoRoom -> back) one at a time, then throughput with many requests in flight on
// one connection. Baseline, in the same run against the same Janus: a minimal blocking client
// (bench/janus-signaling/baseline.py: a raw socket, no framework), whose round trip is close to
// what Janus and the link cost by themselves. The ratio shows what Conclave's client adds.

let sequential = Int(ProcessInfo.processInfo.environment["BENCH_SEQUENTIAL"] ?? "") ?? 2000
let concurrentTotal = Int(ProcessInfo.processInfo.environment["BENCH_CONCURRENT"] ?? "") ?? 20000
let inFlight = Int(ProcessInfo.processInfo.environment["BENCH_IN_FLIGHT"] ?? "") ?? 200

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func micros(_ d: Duration) -> String {
    String(format: "%.0f µs", Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12)
}

func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

let bed = try JanusTestBed()
defer { bed.stop() }
print("Janus \(bed.webSocketURL) (network namespace \(bed.namespace))")

let connection = try await JanusConnection.connect(to: bed.webSocketURL)
let session = try await connection.createSession()
let room = try await VideoRoomHandle.attach(to: session)
let roomID = try await room.createRoom(.init(room: 777))

/// Times `body` one call at a time on the caller's executor (here the main actor, like the calls
/// in `body`): a nonisolated loop would switch executors around every call it times, which
/// neither the client nor the baseline does.
func measureSequential(
    _ label: String,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Void
) async throws -> [Duration] {
    for _ in 0..<100 { try await body() }  // warm up
    var samples: [Duration] = []
    samples.reserveCapacity(sequential)
    let clock = ContinuousClock()
    for _ in 0..<sequential {
        samples.append(try await clock.measure { try await body() })
    }
    samples.sort()
    print(
        "\(label): \(sequential) sequential round trips: p50 \(micros(percentile(samples, 0.5))), "
            + "p99 \(micros(percentile(samples, 0.99))), max \(micros(samples.last!))"
    )
    return samples
}

let keepalive = try await measureSequential("keepalive (Janus core, baseline)") { try await session.sendKeepalive() }
let plugin = try await measureSequential("VideoRoom exists (plugin request)") {
    _ = try await room.roomExists(roomID)
}

let start = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    var sent = 0
    for _ in 0..<inFlight {
        group.addTask { _ = try await room.roomExists(roomID) }
        sent += 1
    }
    while try await group.next() != nil {
        if sent < concurrentTotal {
            group.addTask { _ = try await room.roomExists(roomID) }
            sent += 1
        }
    }
}
let elapsed = ContinuousClock.now - start
let rate = Double(concurrentTotal) / seconds(elapsed)
print(
    String(
        format: "VideoRoom exists with %d in flight: %d requests in %.2f s = %.0f requests/s",
        inFlight,
        concurrentTotal,
        seconds(elapsed),
        rate
    )
)
print(
    String(
        format: "ratio p50 plugin / core keepalive: %.2f",
        seconds(percentile(plugin, 0.5)) / seconds(percentile(keepalive, 0.5))
    )
)

// The baseline client, same requests, same Janus, same room.
let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("baseline.py").path
let python = Process()
python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
python.arguments = [
    "python3", script, bed.janusAddress, "\(bed.configuration.webSocketPort)", "\(roomID)", "\(sequential)",
    "\(concurrentTotal)", "\(inFlight)",
]
let pipe = Pipe()
python.standardOutput = pipe
try python.run()
let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
python.waitUntilExit()
var baseline: [String: Double] = [:]
for line in output.split(separator: "\n") {
    let fields = line.split(separator: " ").map(String.init)
    for index in stride(from: 0, to: fields.count - 1, by: 2) {
        baseline[fields[index] + "." + fields[0]] = Double(fields[index + 1])
    }
}
if let p50 = baseline["p50_us.sequential"], let p99 = baseline["p99_us.sequential"],
    let baselineRate = baseline["rate.concurrent"]
{
    let ours = seconds(percentile(plugin, 0.5)) * 1e6
    print(
        String(
            format: "baseline (minimal Python client): p50 %.0f µs, p99 %.0f µs, %.0f requests/s",
            p50,
            p99,
            baselineRate
        )
    )
    print(
        String(format: "ratio Conclave / baseline: p50 latency %.2f, throughput %.2f", ours / p50, rate / baselineRate)
    )
} else {
    print("baseline client failed: \(output)")
}

try await room.destroyRoom(roomID)
try await session.destroy()
await connection.close()
