import ConclaveSDP
import ConclaveTestSupport
import Testing

@Suite struct ICECandidateTests {
    @Test func parsesAndWritesCandidates() throws {
        let host = try ICECandidate(parsing: "candidate:1 1 udp 2015363327 198.18.200.1 20042 typ host")
        #expect(host.address == "198.18.200.1" && host.port == 20042 && host.priority == 2015363327)
        #expect(host.trickleString == "candidate:1 1 udp 2015363327 198.18.200.1 20042 typ host")
        #expect(host.attributeLine == "a=candidate:1 1 udp 2015363327 198.18.200.1 20042 typ host")
        let relay = "4 1 udp 41885439 198.51.100.9 3478 typ relay raddr 203.0.113.7 rport 51472 generation 0 ufrag Fm3h"
        #expect(try ICECandidate(parsing: "a=candidate:" + relay).value == relay)
        let tcp = try ICECandidate(parsing: "2 1 TCP 1015037951 198.18.200.1 9 typ host tcptype active")
        #expect(tcp.tcpType == "active" && tcp.transport == "TCP")
        // A trickled line: the prefix is required, a line break and an `a=` are tolerated.
        let line = try ICECandidate(parsingLine: "a=candidate:1 1 udp 1 127.0.0.1 5000 typ host\r\n")
        #expect(line.trickleString == "candidate:1 1 udp 1 127.0.0.1 5000 typ host")
    }

    @Test("malformed candidates give one typed error naming the field")
    func rejectsMalformedCandidates() {
        let malformed: [(String, ICECandidate.ParseError.Field)] = [
            ("", .prefix),
            ("candidat:1 1 udp 1 127.0.0.1 5000 typ host", .prefix),
            ("candidate:1 1 udp 1 127.0.0.1 5000 typ", .fields),
            ("candidate: 1 udp 1 127.0.0.1 5000 typ host", .fields),
            ("candidate:1 0 udp 1 127.0.0.1 5000 typ host", .componentID),
            ("candidate:1 x udp 1 127.0.0.1 5000 typ host", .componentID),
            ("candidate:1 1 sctp 1 127.0.0.1 5000 typ host", .transport),
            ("candidate:1 1 udp -5 127.0.0.1 5000 typ host", .priority),
            ("candidate:1 1 udp 99999999999 127.0.0.1 5000 typ host", .priority),
            ("candidate:1 1 udp 1 127.0.0.1 70000 typ host", .port),
            ("candidate:1 1 udp 1 127.0.0.1 port typ host", .port),
            ("candidate:1 1 udp 1 127.0.0.1 5000 type host", .typ),
            ("candidate:1 1 udp 1 127.0.0.1 5000 typ relayed", .candidateType),
            ("candidate:f\u{00e9} 1 udp 1 127.0.0.1 5000 typ host", .foundation),
            ("candidate:\(String(repeating: "a", count: 33)) 1 udp 1 127.0.0.1 5000 typ host", .foundation),
            ("candidate:1 1 udp 1 127.0.0.1 5000 typ srflx raddr 127.0.0.2 rport x", .relatedPort),
            ("candidate:1 1 udp 1 198.18.10.1 9 typ host raddr", .extensionAttribute),
        ]
        for (line, field) in malformed {
            #expect(throws: ICECandidate.ParseError(candidate: line, field: field, reason: reason(line))) {
                try ICECandidate(parsingLine: line)
            }
        }
        // The attribute value form needs no prefix, so the same fields fail the same way there.
        #expect(throws: ICECandidate.ParseError.self) {
            try ICECandidate(parsing: "1 1 udp 1 198.18.10.1 99999 typ host")
        }
        #expect(throws: ICECandidate.ParseError.self) { try ICECandidate(parsing: "1 1 udp 1 198.18.10.1 9 host") }
    }

    /// The reason the parser gives for `line`, so the table above checks the field exactly.
    func reason(_ line: String) -> String {
        do {
            _ = try ICECandidate(parsingLine: line)
            return ""
        } catch {
            return error.reason
        }
    }

    @Test("a rejected a=candidate names its line in the SDP error")
    func sdpErrorNamesTheLine() throws {
        let sdp = try SessionDescription(
            parsing:
                "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n"
                + "a=candidate:1 1 udp 1 198.18.10.1 99999 typ host\r\n"
        )
        do {
            _ = try sdp.media[0].candidates()
            Issue.record("accepted a candidate with port 99999")
        } catch {
            #expect(error.line == 7 && error.reason == .invalidField("candidate port"))
        }
    }

    @Test("candidate parser survives a seeded fuzz loop with typed errors only")
    func candidateParserFuzz() {
        var generator = SeededGenerator(seed: 0xC0FFEE)
        let valid = Array(
            "candidate:842163049 1 udp 1677729535 127.0.0.1 49203 typ srflx raddr 0.0.0.0 rport 0 generation 0".utf8
        )
        var accepted = 0
        for iteration in 0..<5_000 {
            var bytes: [UInt8]
            if iteration % 4 == 0 {
                bytes = randomBytes(Int.random(in: 0...120, using: &generator), using: &generator)
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    let index = Int.random(in: 0..<bytes.count, using: &generator)
                    switch Int.random(in: 0...2, using: &generator) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(UInt8.random(in: 32...126, using: &generator), at: index)
                    }
                    if bytes.isEmpty { break }
                }
            }
            let line = String(decoding: bytes, as: UTF8.self)
            do {
                let candidate = try ICECandidate(parsingLine: line)
                accepted += 1
                // What parses formats to a line that parses to the same candidate.
                #expect(try ICECandidate(parsingLine: candidate.trickleString) == candidate)
            } catch {
                // Typed by the signature: every failure is a ParseError with a field and reason.
                #expect(!error.description.isEmpty)
            }
        }
        #expect(accepted > 0, "some mutations keep the line valid")
        #expect(accepted < 5_000)
    }
}
