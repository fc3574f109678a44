import ConclaveTestSupport
import Crypto
import Foundation
import Testing

@testable import ConclaveE2EE

@Suite("device keys and key wrapping")
struct KeyWrappingTests {
    @Test("public keys are published as ECall publishes them", arguments: DeviceKeyType.allCases)
    func publishedForm(type: DeviceKeyType) throws {
        let identity = try DeviceIdentity.generate(type)
        let published = identity.publicKeyString
        let der = try #require(Data(base64Encoded: published))
        switch type {
        case .rsa:
            #expect(published.count >= 150)
            // PKCS#1 RSAPublicKey: SEQUENCE { INTEGER n, INTEGER e }, not SPKI (which starts with a
            // nested SEQUENCE holding the algorithm identifier).
            #expect(der.prefix(4) == Data([0x30, 0x82, 0x01, 0x0A]))
            #expect(der[4] == 0x02)
        case .p256:
            #expect(der.count == 64)
            #expect(published.count == 88)
        }
        let parsed = try DevicePublicKey(publicKeyString: published)
        #expect(parsed.type == type)
        #expect(parsed.publicKeyString == published)
        #expect(parsed.publicKeyHash == HexCoding.encode(SHA256.hash(data: Array(published.utf8))))
        #expect(parsed.fingerprint.split(separator: " ").count == 16)
    }

    @Test("a private key survives storage as bytes", arguments: DeviceKeyType.allCases)
    func privateKeyRoundTrip(type: DeviceKeyType) throws {
        let identity = try DeviceIdentity.generate(type)
        let restored = try DeviceIdentity(type: type, privateKeyBytes: identity.privateKeyBytes)
        #expect(restored.publicKeyString == identity.publicKeyString)
    }

    @Test(
        "wrap and unwrap for each recipient type; the format is chosen from the string",
        arguments: DeviceKeyType.allCases
    )
    func roundTrip(type: DeviceKeyType) throws {
        let recipient = try DeviceIdentity.generate(type)
        let key = CallKey.random()
        let wrapped = try KeyWrapping.wrap(key, for: recipient.publicKey)
        switch type {
        case .rsa:
            #expect(KeyWrapping.Format(wrapped: wrapped) == .rsaOAEP)
            #expect(wrapped.count == 344)
        case .p256:
            #expect(KeyWrapping.Format(wrapped: wrapped) == .p256Box)
            let parts = wrapped.split(separator: ":")
            #expect(parts.count == 2)
            #expect(parts[0].count == 88)
            #expect(parts[1].count == 80)
            // A fresh ephemeral sender key each time.
            #expect(try KeyWrapping.wrap(key, for: recipient.publicKey).split(separator: ":")[0] != parts[0])
        }
        #expect(try KeyWrapping.unwrap(wrapped, with: recipient) == key)
    }

    @Test("a key wrapped for someone else does not open", arguments: DeviceKeyType.allCases)
    func wrongRecipient(type: DeviceKeyType) throws {
        let wrapped = try KeyWrapping.wrap(.random(), for: try DeviceIdentity.generate(type).publicKey)
        let other = try DeviceIdentity.generate(type)
        #expect(throws: KeyMaterialError.unwrapFailed(format: type == .rsa ? "RSA-OAEP" : "P-256")) {
            try KeyWrapping.unwrap(wrapped, with: other)
        }
        let mismatched = try DeviceIdentity.generate(type == .rsa ? .p256 : .rsa)
        #expect(throws: KeyMaterialError.self) { try KeyWrapping.unwrap(wrapped, with: mismatched) }
    }

    @Test("ECall's legacy one-to-one P-256 string (only the caller's key) derives the session key")
    func legacyFormat() throws {
        let me = P256.KeyAgreement.PrivateKey()
        let caller = P256.KeyAgreement.PrivateKey()
        let legacy = caller.publicKey.rawRepresentation.base64EncodedString()
        let expected = try KeyWrapping.p256WrappingKey(caller, me.publicKey).withUnsafeBytes { Array($0) }
        #expect(KeyWrapping.Format(wrapped: legacy) == .p256Legacy)
        #expect(try KeyWrapping.unwrap(legacy, with: .p256(me)) == CallKey(bytes: expected))
    }

    @Test("bad public keys and call keys give clear errors")
    func badInput() throws {
        #expect(throws: KeyMaterialError.invalidEncoding(what: "public key", expected: "base64")) {
            try DevicePublicKey(publicKeyString: "not base64!")
        }
        #expect(throws: KeyMaterialError.wrongLength(what: "P-256 public key (raw X||Y)", expected: 64, actual: 65)) {
            try DevicePublicKey(publicKeyString: Data([4] + [UInt8](repeating: 1, count: 64)).base64EncodedString())
        }
        #expect(throws: KeyMaterialError.self) {
            try DevicePublicKey(publicKeyString: String(repeating: "A", count: 200))
        }
        #expect(throws: KeyMaterialError.wrongLength(what: "call key", expected: 32, actual: 31)) {
            try CallKey(hex: String(repeating: "ab", count: 31))
        }
        #expect(throws: KeyMaterialError.self) { try CallKey(hex: String(repeating: "zz", count: 32)) }
        let key = CallKey.random()
        #expect(key.description == "CallKey(<redacted>)")
        #expect(try CallKey(hex: key.hexString.uppercased()) == key)
    }
}

@Suite("wrapped key fuzzing")
struct WrappedKeyFuzzTests {
    @Test("random and mutated wrapped strings never crash unwrap and fail with KeyMaterialError")
    func fuzzUnwrap() throws {
        var rng = SeededGenerator(seed: 0x77A9)
        let rsa = try DeviceIdentity.generate(.rsa)
        let p256 = try DeviceIdentity.generate(.p256)
        let key = CallKey.random()
        let valid = [try KeyWrapping.wrap(key, for: rsa.publicKey), try KeyWrapping.wrap(key, for: p256.publicKey)]
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=:!\n ")
        var opened = 0
        for iteration in 0..<1_500 {
            var text = Array(valid[iteration % 2])
            switch iteration % 3 {
            case 0:
                text = (0..<Int.random(in: 0...400, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            case 1:
                for _ in 0...Int.random(in: 0...3, using: &rng) {
                    text[Int.random(in: 0..<text.count, using: &rng)] = alphabet.randomElement(using: &rng)!
                }
            default:
                text = Array(text.prefix(Int.random(in: 0...text.count, using: &rng)))
            }
            for identity in [rsa, p256] {
                do {
                    if try KeyWrapping.unwrap(String(text), with: identity) == key { opened += 1 }
                } catch {
                    // Typed throws: every failure is a KeyMaterialError with a description.
                    #expect(!error.description.isEmpty)
                }
            }
        }
        // Only unchanged strings (a mutation that rewrote a character to itself) may still open.
        #expect(opened < 100)
    }
}
