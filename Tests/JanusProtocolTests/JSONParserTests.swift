import Foundation
import JanusProtocol
import Testing

/// The JSON reader against Foundation's on the same texts, and its refusals.
@Suite struct JSONParserTests {
    /// What Foundation reads, as a JSONValue (numbers as Int64 when integral literals fit).
    func foundation(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    @Test func readsWhatJanusSends() throws {
        let text = #"""
            {"janus":"event","session_id":4951686904510440,"sender":-3,"transaction":"t\u00e9\n\"q\"",
             "plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"joined","room":1234,
             "publishers":[{"id":1,"display":"1001:Al\ud83d\ude00ce","talking":false,"ratio":0.5,"big":1e300}],
             "none":null,"empty":{},"list":[]}}}
            """#
        let value = try JSONValue.parse(text)
        #expect(value["session_id"] == .int(4_951_686_904_510_440))
        #expect(value["sender"] == .int(-3))
        #expect(value["transaction"] == .string("té\n\"q\""))
        let data = try #require(value["plugindata"]?["data"])
        let publisher = try #require(data["publishers"]?.arrayValue?.first)
        #expect(publisher["display"] == .string("1001:Al😀ce"))
        #expect(publisher["talking"] == .bool(false))
        #expect(publisher["ratio"] == .double(0.5))
        #expect(publisher["big"] == .double(1e300))
        #expect(data["none"] == .null)
        #expect(data["empty"] == .object([:]))
        #expect(data["list"] == .array([]))
        // The same tree Foundation reads, compared through serialization with sorted keys.
        let ours = try JSONSerialization.jsonObject(with: Data(value.serialized().utf8))
        let theirs = try foundation(text)
        #expect(NSDictionary(dictionary: ours as! [String: Any]) == NSDictionary(dictionary: theirs as! [String: Any]))
    }

    @Test func integersPastInt64BecomeDoubles() throws {
        #expect(try JSONValue.parse("9223372036854775807") == .int(.max))
        #expect(try JSONValue.parse("-9223372036854775808") == .int(.min))
        #expect(try JSONValue.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSONValue.parse(" 4.5 ") == .double(4.5))
    }

    @Test func refusesWhatIsNotJSON() {
        let bad = [
            "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "1e", "+1", "NaN", "tru", "nul",
            "\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"tab\there\"", "{} {}", "[1 2]", "1e999",
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ]
        for text in bad {
            #expect(throws: JanusProtocolError.self, "\(text.prefix(20))") { try JSONValue.parse(text) }
        }
    }
}
