import ConclaveCore
import ConclaveTestSupport
import Testing

@testable import ConclaveSDP

@Suite("Fuzzing the SDP parser")
struct SDPFuzzTests {
    static let alphabet = Array("0123456789 :=/-;*abcmtvosCFIPUDTLSRAVx\r\n".utf8)

    /// Mutates text at the line and byte level: drops, duplicates or swaps lines, and changes bytes.
    static func mutate(_ text: String, _ random: inout SeededGenerator) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.utf8) }
        for _ in 0..<Int.random(in: 1...6, using: &random) where !lines.isEmpty {
            let i = Int.random(in: 0..<lines.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0: lines.remove(at: i)
            case 1: lines.insert(lines[i], at: Int.random(in: 0...lines.count, using: &random))
            case 2: lines.swapAt(i, Int.random(in: 0..<lines.count, using: &random))
            case 3 where !lines[i].isEmpty:
                let j = Int.random(in: 0..<lines[i].count, using: &random)
                lines[i][j] = alphabet.randomElement(using: &random)!
            default:
                lines[i] = Array(lines[i].prefix(Int.random(in: 0...lines[i].count, using: &random)))
            }
        }
        return String(decoding: Array(lines.joined(separator: Array("\n".utf8))), as: UTF8.self)
    }

    @Test func parserAndNegotiatorSurviveMutatedDescriptions() {
        var random = SeededGenerator(seed: 0x5D9)
        let fixtures = [
            Fixtures.janusSubscriberOffer, Fixtures.janusPublisherAnswer, Fixtures.chromeOffer, Fixtures.aiortcOffer,
        ]
        let local = NegotiationTests.local
        var parsed = 0
        var answered = 0
        for i in 0..<3000 {
            let text: String
            if i % 10 == 0 {
                let bytes = (0..<Int.random(in: 0...200, using: &random)).map { _ in
                    Self.alphabet.randomElement(using: &random)!
                }
                text = String(decoding: bytes, as: UTF8.self)
            } else {
                text = Self.mutate(fixtures[i % fixtures.count], &random)
            }
            do {
                let sdp = try SessionDescription(parsing: text)
                parsed += 1
                _ = sdp.text
                for m in sdp.media {
                    _ = try? m.rtpMaps()
                    _ = try? m.formatParameters()
                    _ = try? m.rtcpFeedback()
                    _ = try? m.extensionMaps()
                    _ = try? m.ssrcAttributes()
                    _ = try? m.ssrcGroups()
                    _ = try? m.candidates()
                    _ = try? m.fingerprint()
                    _ = try? m.setupRole()
                }
                if let (answer, _) = try? SDPNegotiator.subscriberAnswer(to: sdp, local: local, sessionID: "1") {
                    answered += 1
                    #expect(answer.media.count == sdp.media.count)
                }
                _ = try? SDPNegotiator.acceptPublisherAnswer(sdp, offer: sdp)
            } catch {
                #expect(error.line != nil)
            }
        }
        #expect(parsed > 1000)
        #expect(answered > 100)
    }
}
