import ConclaveCore
import ConclaveTestSupport
import Foundation
import Testing

@testable import ConclaveE2EE

/// Conclave against an independent implementation of the ECall formats (Tests/Interop/e2ee_vectors.py,
/// Python `cryptography`): frames and wrapped keys made there open here, and the reverse.
@Suite("interop with an independent implementation")
struct PythonInteropTests {
    static let script = TestPaths.packageRoot.appendingPathComponent("Tests/Interop/e2ee_vectors.py").path

    func runScript(_ command: String, _ request: [String: Any]) throws -> [String: Any] {
        let input = try JSONSerialization.data(withJSONObject: request)
        let result = try runProcess(TestPaths.python(), [Self.script, command], input: input, timeout: .seconds(60))
        guard result.succeeded else {
            throw InteropScriptError(description: "e2ee_vectors.py \(command) failed: \(result.errorOutput)")
        }
        let answer = try JSONSerialization.jsonObject(with: result.stdout)
        return try #require(answer as? [String: Any])
    }

    @Test("ecall frames and wrapped keys from Python open in Conclave")
    func pythonToConclave() throws {
        let key = CallKey.random()
        let rsa = try DeviceIdentity.generate(.rsa)
        let p256 = try DeviceIdentity.generate(.p256)
        let answer = try runScript(
            "produce",
            [
                "key": key.hexString, "rsa_public": rsa.publicKeyString, "p256_public": p256.publicKeyString,
            ]
        )
        #expect(try KeyWrapping.unwrap(try #require(answer["rsa_wrapped"] as? String), with: rsa) == key)
        #expect(try KeyWrapping.unwrap(try #require(answer["p256_wrapped"] as? String), with: p256) == key)

        let call = makeCall(format: .ecall, key: key)
        let frames = try #require(answer["frames"] as? [[String: String]])
        #expect(frames.map { $0["name"] } == ["h264_idr", "h264_p", "opus"])
        for entry in frames {
            let codec = try #require(MediaCodec(rawValue: entry["codec"] ?? ""))
            let plain = hex(try #require(entry["plain"]))
            let sealed = hex(try #require(entry["sealed"]))
            #expect(sealed.count == plain.count + (codec == .opus ? 29 : 28))
            let opened = try call.makeDecryptor(codec: codec, senderID: 1).decrypt(frame(codec, sealed))
            #expect(opened.data == plain, "\(entry["name"] ?? "")")
        }
        if codecFramesContainIDR(frames) {
            // The IDR frame kept SPS and PPS in clear.
            let idr = hex(frames[0]["sealed"]!)
            #expect(H264AnnexB.units(in: idr, rule: .ecall).map(\.type) == [.sps, .pps, .idrSlice])
        }
    }

    func codecFramesContainIDR(_ frames: [[String: String]]) -> Bool { frames.first?["name"] == "h264_idr" }

    @Test("ecall frames and wrapped keys from Conclave open in Python")
    func conclaveToPython() throws {
        let key = CallKey.random()
        let rsa = try DeviceIdentity.generate(.rsa)
        let p256 = try DeviceIdentity.generate(.p256)
        let call = makeCall(format: .ecall, key: key)
        var rng = SeededGenerator(seed: 41)
        let plains: [(String, MediaCodec, [UInt8])] = [
            ("h264_idr", .h264, idrFrame(&rng, sliceSize: 5_000)),
            ("h264_p", .h264, pFrame(&rng, size: 900)),
            ("opus", .opus, [0x78] + rng.bytes(120)),
        ]
        var frames: [[String: String]] = []
        for (name, codec, plain) in plains {
            let sealed = try call.makeEncryptor(codec: codec, senderID: 1).encrypt(frame(codec, plain))
            frames.append(["name": name, "codec": codec.rawValue, "sealed": HexCoding.encode(sealed.data)])
        }
        let answer = try runScript(
            "open",
            [
                "key": key.hexString, "frames": frames,
                "rsa_private": Data(rsa.privateKeyBytes).base64EncodedString(),
                "p256_private": Data(p256.privateKeyBytes).base64EncodedString(),
                "rsa_wrapped": try KeyWrapping.wrap(key, for: rsa.publicKey),
                "p256_wrapped": try KeyWrapping.wrap(key, for: p256.publicKey),
            ]
        )
        #expect(answer["rsa_unwrapped"] as? String == key.hexString)
        #expect(answer["p256_unwrapped"] as? String == key.hexString)
        let opened = try #require(answer["frames"] as? [[String: String]])
        #expect(opened.count == plains.count)
        for (result, (name, _, plain)) in zip(opened, plains) {
            #expect(result["error"] == nil, "\(name): \(result["error"] ?? "")")
            #expect(result["plain"] == HexCoding.encode(plain), "\(name)")
        }
    }

    @Test("SFrame payloads match the independent RFC 9605 implementation")
    func sframeAgainstPython() throws {
        var rng = SeededGenerator(seed: 43)
        var vectors: [[String: Any]] = []
        var expected: [[UInt8]] = []
        for index in 0..<20 {
            let baseKey = rng.bytes(32)
            let kid = index < 4 ? UInt64(index) : UInt64.random(in: 0...UInt64(Int64.max), using: &rng) >> (index % 50)
            let ctr = UInt64.random(in: 0...UInt64(Int64.max), using: &rng) >> (index % 60)
            let metadata = rng.bytes(index % 11)
            let plaintext = rng.bytes(Int.random(in: 0...300, using: &rng))
            var sealed = [UInt8]()
            SFrameCipher.seal(
                plaintext[...],
                metadata: metadata[...],
                counter: ctr,
                material: SFrameKeyMaterial(baseKey: baseKey, keyID: kid),
                appendingTo: &sealed
            )
            expected.append(sealed)
            vectors.append([
                "base_key": HexCoding.encode(baseKey), "kid": kid, "ctr": ctr,
                "metadata": HexCoding.encode(metadata), "pt": HexCoding.encode(plaintext),
            ])
        }
        let answer = try runScript("sframe", ["vectors": vectors])
        let results = try #require(answer["results"] as? [[String: String]])
        #expect(results.map { $0["ct"] ?? "" } == expected.map { HexCoding.encode($0) })
    }
}

struct InteropScriptError: Error, CustomStringConvertible {
    var description: String
}
