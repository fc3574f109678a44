// Frame encryption throughput of the E2EE stages, for comparison with `openssl speed -evp aes-256-gcm`.
//
// Usage: bench-e2ee [--seconds S] [--openssl-bytes-per-second B [--ratio-only]]
// The `run` script next to this file passes OpenSSL's 16 kB figure from the same run, so the ratio is
// printed against the same machine under the same load. With --ratio-only, only the 16 kB cases are
// measured (again) and printed as a share of OpenSSL's figure.

import ConclaveCore
import ConclaveE2EE
import Foundation
import Logging

struct Case {
    var label: String
    var codec: MediaCodec
    var payload: [UInt8]
}

/// A frame of `size` bytes that each codec's sealer accepts: an H264 P slice without zero bytes,
/// or random bytes for Opus.
func makePayload(codec: MediaCodec, size: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    switch codec {
    case .h264:
        return [0, 0, 0, 1, 0x41] + (0..<(size - 5)).map { _ in UInt8.random(in: 1...255, using: &generator) }
    case .opus, .vp8:
        return (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
}

struct Measurement {
    var framesPerSecond: Double
    var megabytesPerSecond: Double
}

/// Runs `body` in batches until `seconds` have passed; counts plaintext bytes.
func measure(seconds: Double, bytesPerFrame: Int, _ body: () throws -> Void) rethrows -> Measurement {
    let clock = ContinuousClock()
    // Warm up caches and the derived-key caches of the stages.
    for _ in 0..<50 { try body() }
    var frames = 0
    let start = clock.now
    var elapsed = Duration.zero
    let budget = Duration.milliseconds(Int(seconds * 1_000))
    while elapsed < budget {
        for _ in 0..<64 { try body() }
        frames += 64
        elapsed = clock.now - start
    }
    let secondsElapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let fps = Double(frames) / secondsElapsed
    return Measurement(framesPerSecond: fps, megabytesPerSecond: fps * Double(bytesPerFrame) / 1e6)
}

var seconds = 0.5
var opensslBytesPerSecond: Double?
var ratioOnly = false
var only: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--seconds": seconds = Double(arguments.next() ?? "") ?? seconds
    case "--openssl-bytes-per-second": opensslBytesPerSecond = Double(arguments.next() ?? "")
    case "--ratio-only": ratioOnly = true
    case "--only": only = arguments.next()
    default:
        FileHandle.standardError.write(
            Data("usage: bench-e2ee [--seconds S] [--openssl-bytes-per-second B [--ratio-only]]\n".utf8)
        )
        exit(2)
    }
}

let allCases = [
    Case(label: "audio 100 B (opus)", codec: .opus, payload: makePayload(codec: .opus, size: 100)),
    Case(label: "video 30 kB (h264)", codec: .h264, payload: makePayload(codec: .h264, size: 30_000)),
    Case(label: "16 kB (opus path)", codec: .opus, payload: makePayload(codec: .opus, size: 16_384)),
    Case(label: "16 kB (h264)", codec: .h264, payload: makePayload(codec: .h264, size: 16_384)),
]
let cases = ratioOnly ? allCases.filter { $0.payload.count == 16_384 } : allCases

let logger = Logger(label: "bench-e2ee")
let key = CallKey.random()
var sixteenKilobyte: [String: Double] = [:]

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func number(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

if !ratioOnly {
    print(
        pad("format", 8) + pad("frame", 22) + pad("encrypt frames/s", 18) + pad("encrypt MB/s", 14)
            + pad("decrypt frames/s", 18) + "decrypt MB/s"
    )
}
for format in FrameCryptoFormat.allCases {
    let ring = CallKeyRing()
    ring.install(key, epoch: 0)
    let call = CallFrameCrypto(callID: 1, format: format, keyRing: ring, logger: logger)
    for benchCase in cases {
        let encryptor = call.makeEncryptor(codec: benchCase.codec, senderID: 1)
        let decryptor = call.makeDecryptor(codec: benchCase.codec, senderID: 2)
        let frame = EncodedFrame(codec: benchCase.codec, data: benchCase.payload, rtpTimestamp: 0, isKeyframe: false)
        let sealed = try encryptor.encrypt(frame)
        guard try decryptor.decrypt(sealed).data == frame.data else { fatalError("round trip failed") }
        if let only, !"\(format) \(benchCase.label)".contains(only) { continue }
        let encrypt = try measure(seconds: seconds, bytesPerFrame: frame.data.count) {
            _ = try encryptor.encrypt(frame)
        }
        let decrypt = try measure(seconds: seconds, bytesPerFrame: frame.data.count) {
            _ = try decryptor.decrypt(sealed)
        }
        if !ratioOnly {
            print(
                pad(format.rawValue, 8) + pad(benchCase.label, 22)
                    + pad(number(encrypt.framesPerSecond, 0), 18) + pad(number(encrypt.megabytesPerSecond, 1), 14)
                    + pad(number(decrypt.framesPerSecond, 0), 18) + number(decrypt.megabytesPerSecond, 1)
            )
        }
        if benchCase.payload.count == 16_384 {
            sixteenKilobyte["\(format) \(benchCase.label) encrypt"] = encrypt.megabytesPerSecond
            sixteenKilobyte["\(format) \(benchCase.label) decrypt"] = decrypt.megabytesPerSecond
        }
    }
}

if let opensslBytesPerSecond {
    let openssl = opensslBytesPerSecond / 1e6
    print("")
    print("16 kB frames against openssl speed -evp aes-256-gcm at 16384 bytes: \(number(openssl, 1)) MB/s")
    for (label, value) in sixteenKilobyte.sorted(by: { $0.key < $1.key }) {
        let ratio = value / openssl * 100
        print(
            "  \(pad(label, 34)) \(pad(number(value, 1) + " MB/s", 14)) \(number(ratio, 1))% of OpenSSL\(ratio >= 70 ? "" : "  (below the 70% target)")"
        )
    }
}
