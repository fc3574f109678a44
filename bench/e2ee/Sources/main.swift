// Frame encryption throughput of the E2EE stages, for comparison with `openssl speed -evp aes-256-gcm`.
//
// Usage: bench-e2ee [--seconds S] [--openssl-bytes-per-second B] [--ratio-only] [--only TEXT] [--no-header]
//
// Measures both formats (`ecall`, `sframe`), both paths (audio: the Opus path, sealed whole; video:
// the H264 path, Annex-B scanning, slice sealing and start-code protection) at 100 B, 16 kB (16384
// bytes, OpenSSL's block size) and 30 kB, encrypt and decrypt, through the public stages
// (`FrameEncryptor`, `FrameDecryptor`). MB/s counts plaintext bytes.
//
// Given OpenSSL's 16 kB figure from the same run, each row also shows it and the row's share of it,
// and the 16 kB rows are marked PASS or BELOW against the 70% target. --ratio-only measures only the
// 16 kB cases; --only keeps the rows whose "format path size direction" label contains TEXT. The
// `run` script uses both to measure each 16 kB row right after its own `openssl speed` run, because
// on a shared machine the load changes within seconds.

import ConclaveCore
import ConclaveE2EE
import Foundation
import Logging

struct Case {
    var path: String
    var size: String
    var codec: MediaCodec
    var payload: [UInt8]
}

/// A frame of `size` bytes that each codec's sealer accepts: random bytes for Opus, and for H264 a
/// P slice as an encoder writes it, random (compressed-looking) bytes with emulation prevention, so
/// zero bytes are as frequent as in real slices but no start code appears inside.
func makePayload(codec: MediaCodec, size: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    switch codec {
    case .h264:
        var frame: [UInt8] = [0, 0, 0, 1, 0x41]
        while frame.count < size {
            var byte = UInt8.random(in: 0...255, using: &generator)
            if frame[frame.count - 1] == 0 && frame[frame.count - 2] == 0 && byte <= 3 { byte = 3 }
            frame.append(byte)
        }
        // A slice ends in its stop bit, never in a zero byte.
        if frame[frame.count - 1] == 0 { frame[frame.count - 1] = 0x80 }
        return frame
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
    // Warm up caches and the key contexts of the stages.
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

let usage =
    "usage: bench-e2ee [--seconds S] [--openssl-bytes-per-second B] [--ratio-only] [--only TEXT] [--no-header]\n"
var seconds = 0.5
var opensslBytesPerSecond: Double?
var ratioOnly = false
var only: String?
var header = true
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--seconds": seconds = Double(arguments.next() ?? "") ?? seconds
    case "--openssl-bytes-per-second": opensslBytesPerSecond = Double(arguments.next() ?? "")
    case "--ratio-only": ratioOnly = true
    case "--only": only = arguments.next()
    case "--no-header": header = false
    default:
        FileHandle.standardError.write(Data(usage.utf8))
        exit(2)
    }
}

let sizes = [("100 B", 100), ("16 kB", 16_384), ("30 kB", 30_000)]
let paths: [(String, MediaCodec)] = [("audio", .opus), ("video", .h264)]
let allCases = paths.flatMap { path, codec in
    sizes.map { label, size in
        Case(path: path, size: label, codec: codec, payload: makePayload(codec: codec, size: size))
    }
}
let cases = ratioOnly ? allCases.filter { $0.payload.count == 16_384 } : allCases
let openssl = opensslBytesPerSecond.map { $0 / 1e6 }
let target = 70.0

let logger = Logger(label: "bench-e2ee")
let key = CallKey.random()

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func padLeft(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

func number(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

if header {
    if openssl != nil { print("target: 16 kB rows at \(number(target, 0))% or more of OpenSSL's MB/s") }
    print(
        pad("format", 8) + pad("path", 7) + pad("size", 7) + pad("direction", 10) + padLeft("frames/s", 11)
            + padLeft("MB/s", 10)
            + (openssl == nil ? "" : padLeft("OpenSSL MB/s", 14) + padLeft("share", 8) + "  target")
    )
}
var belowTarget = 0
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
        for direction in ["encrypt", "decrypt"] {
            let label = "\(format) \(benchCase.path) \(benchCase.size) \(direction)"
            if let only, !label.contains(only) { continue }
            let encrypting = direction == "encrypt"
            let result = try measure(seconds: seconds, bytesPerFrame: frame.data.count) {
                if encrypting {
                    _ = try encryptor.encrypt(frame)
                } else {
                    _ = try decryptor.decrypt(sealed)
                }
            }
            var line =
                pad(format.rawValue, 8) + pad(benchCase.path, 7) + pad(benchCase.size, 7) + pad(direction, 10)
                + padLeft(number(result.framesPerSecond, 0), 11) + padLeft(number(result.megabytesPerSecond, 1), 10)
            if let openssl {
                let ratio = result.megabytesPerSecond / openssl * 100
                line += padLeft(number(openssl, 1), 14) + padLeft(number(ratio, 1) + "%", 8)
                if benchCase.payload.count == 16_384 {
                    line += ratio >= target ? "  PASS" : "  BELOW"
                    if ratio < target { belowTarget += 1 }
                }
            }
            print(line)
        }
    }
}
if openssl != nil && only == nil {
    print(
        belowTarget == 0
            ? "all 16 kB rows at or above \(number(target, 0))% of OpenSSL"
            : "\(belowTarget) 16 kB row(s) below \(number(target, 0))% of OpenSSL"
    )
}
