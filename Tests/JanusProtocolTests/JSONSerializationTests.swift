import ConclaveTestSupport
import Foundation
import JanusProtocol
import Testing

/// The JSON writer: exact text for strings that need escaping and for those that do not (the
/// latter take a fast path), sorted keys, and random strings that read back unchanged.
@Suite struct JSONSerializationTests {
    @Test func escapesExactlyWhatJSONRequires() {
        let cases: [(String, String)] = [
            ("plain", #""plain""#),
            ("", #""""#),
            ("tr-ansaction:1z", #""tr-ansaction:1z""#),
            ("say \"hi\"", #""say \"hi\"""#),
            ("back\\slash", #""back\\slash""#),
            ("line\nfeed\r\ttab", #""line\nfeed\r\ttab""#),
            ("\u{01}\u{1F}", #""\u0001\u001f""#),
            ("/ and \u{7F} stay", "\"/ and \u{7F} stay\""),
            ("é 😀", "\"é 😀\""),
        ]
        for (value, expected) in cases {
            #expect(JSONValue.string(value).serialized() == expected, "\(value.debugDescription)")
        }
    }

    @Test func writesKeysSortedAndCompact() {
        let value: JSONValue = ["janus": "message", "body": ["room": 7, "request": "exists"], "a\"b": [1, nil, true]]
        #expect(value.serialized() == #"{"a\"b":[1,null,true],"body":{"request":"exists","room":7},"janus":"message"}"#)
    }

    @Test func randomStringsReadBackUnchanged() throws {
        var random = SeededGenerator(seed: 7)
        // Mostly plain ASCII (the fast path), with escapes, controls and non-ASCII mixed in.
        let pieces: [String] = [
            "a", "Z", "0", " ", ":", "-", "\"", "\\", "\n", "\r", "\t", "\u{00}", "\u{1B}", "é", "😀",
        ]
        for round in 0..<2000 {
            let plain = round % 2 == 0
            let count = Int.random(in: 0..<40, using: &random)
            let text = String(
                (0..<count).map { _ in pieces[Int.random(in: 0..<(plain ? 6 : pieces.count), using: &random)] }
                    .joined()
            )
            let value: JSONValue = ["key " + text: .string(text)]
            let serialized = value.serialized()
            #expect(try JSONValue.parse(serialized) == value, "\(text.debugDescription)")
            let foundation = try JSONSerialization.jsonObject(with: Data(serialized.utf8)) as? [String: String]
            #expect(foundation == ["key " + text: text], "\(text.debugDescription)")
        }
    }
}
