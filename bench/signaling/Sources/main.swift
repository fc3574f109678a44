import Foundation
import RabbitMQTestBed
import STOMPClient

// Call-signaling benchmark: STOMP round trips through a real RabbitMQ (Web-STOMP on loopback).
//
// Device A sends a message to device B through `ecall.signal.in`; B answers A the same way; A
// measures the round trip: p50/p99 one at a time, then messages/s with many in flight. Baseline, in
// the same run against the same broker: Debian's python3-stomp doing the same (bench/signaling/
// baseline.py). python3-stomp has no WebSocket transport, so it speaks plain STOMP over TCP to the
// broker's rabbitmq_stomp listener on 127.0.0.1; the broker routes both the same way.
//
// Then the call key's lifecycle over the same broker (Lifecycle.swift): rotation at 16 participants,
// emergency redistribution and rejoin by request, with the targets of issue 14.

let sequential = Int(ProcessInfo.processInfo.environment["BENCH_SEQUENTIAL"] ?? "") ?? 2000
let concurrentTotal = Int(ProcessInfo.processInfo.environment["BENCH_CONCURRENT"] ?? "") ?? 20000
let inFlight = Int(ProcessInfo.processInfo.environment["BENCH_IN_FLIGHT"] ?? "") ?? 100

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func micros(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
}

func benchmark() async throws {
    let bed = try RabbitMQTestBed()
    defer { bed.stop() }
    print("RabbitMQ \(bed.webSocketURL) (STOMP over TCP on 127.0.0.1:\(bed.stompPort) for the baseline)")

    func channel(_ id: UInt64) throws -> STOMPSignalingChannel {
        try STOMPSignalingChannel(
            configuration: .init(url: bed.webSocketURL, deviceID: id, passcode: try bed.addDevice(id))
        )
    }

    let deviceA = try channel(1)
    let deviceB = try channel(2)
    try await deviceA.connect()
    try await deviceB.connect()

    // Device A's subscription is live once a message to itself comes back; B's once a message it
    // sends itself comes back to A through the echo.
    var replies = deviceA.messages.makeAsyncIterator()
    try await deviceA.send("{\"probe\":\"a\"}", toDevice: 1)
    _ = await replies.next()
    // B answers every message to A.
    let echo = Task {
        for await body in deviceB.messages { try? await deviceB.send(body, toDevice: 1) }
    }
    try await deviceB.send("{\"probe\":\"b\"}", toDevice: 2)
    _ = await replies.next()

    let payload =
        "{\"type\":\"key_rotation\",\"callId\":12345678901,\"participantId\":42,\"encryptedAESKey\":\""
        + String(repeating: "QUJD", count: 90) + "\",\"keyRotationTimestamp\":1764000000000}"
    var samples: [Duration] = []
    let clock = ContinuousClock()
    for index in 0..<(sequential + 100) {
        let elapsed = try await clock.measure {
            try await deviceA.send(payload, toDevice: 2)
            _ = await replies.next()
        }
        if index >= 100 { samples.append(elapsed) }  // the first 100 warm up
    }
    samples.sort()
    let p50 = micros(percentile(samples, 0.5))
    let p99 = micros(percentile(samples, 0.99))
    print(String(format: "Conclave: %d sequential round trips: p50 %.0f µs, p99 %.0f µs", sequential, p50, p99))

    let start = ContinuousClock.now
    var sent = 0
    while sent < inFlight {
        try await deviceA.send(payload, toDevice: 2)
        sent += 1
    }
    var received = 0
    while received < concurrentTotal, await replies.next() != nil {
        received += 1
        if sent < concurrentTotal {
            try await deviceA.send(payload, toDevice: 2)
            sent += 1
        }
    }
    let seconds = micros(ContinuousClock.now - start) / 1e6
    let rate = Double(received) / seconds
    print(
        String(
            format: "Conclave: %d round trips with %d in flight in %.2f s = %.0f messages/s",
            received,
            inFlight,
            seconds,
            rate
        )
    )
    echo.cancel()
    await deviceA.close()
    await deviceB.close()

    // The baseline, same broker, two more devices. Passcodes go on its standard input.
    let passcodeC = try bed.addDevice(3)
    let passcodeD = try bed.addDevice(4)
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("baseline.py").path
    let python = Process()
    python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    python.arguments = [script, "\(bed.stompPort)", "\(sequential)", "\(concurrentTotal)", "\(inFlight)"]
    let input = Pipe()
    let output = Pipe()
    python.standardInput = input
    python.standardOutput = output
    try python.run()
    input.fileHandleForWriting.write(Data("\(passcodeC)\n\(passcodeD)\n\(payload)\n".utf8))
    try input.fileHandleForWriting.close()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    python.waitUntilExit()
    var baseline: [String: Double] = [:]
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ").map(String.init)
        for index in stride(from: 1, to: fields.count - 1, by: 2) {
            baseline[fields[0] + "." + fields[index]] = Double(fields[index + 1])
        }
    }
    if let baseP50 = baseline["sequential.p50_us"], let baseP99 = baseline["sequential.p99_us"],
        let baseRate = baseline["concurrent.rate"]
    {
        print(
            String(format: "python3-stomp (TCP): p50 %.0f µs, p99 %.0f µs, %.0f messages/s", baseP50, baseP99, baseRate)
        )
        print(
            String(
                format: "ratio Conclave / python3-stomp: p50 latency %.2f, p99 latency %.2f, throughput %.2f",
                p50 / baseP50,
                p99 / baseP99,
                rate / baseRate
            )
        )
    } else {
        print("baseline client failed: \(text)")
    }

    print("call key lifecycle over the same broker:")
    try await lifecycleBenchmark(bed)
}

try await benchmark()
