import Foundation
import JanusProtocol
import Testing

/// Janus messages whose numbers are out of every range the fields have: ids, codes, indexes and
/// counts parse to a value or nil, or the message is refused with a typed error, never a trap.
@Suite("Janus messages with extreme numbers")
struct HostileNumberTests {
    static let extremes = [
        "-1", "0", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
        "99999999999999999999999", "1e300", "-1e300", "1e-300", "4.5", "9007199254740993", "2147483648",
        "-2147483649", "65536",
    ]

    /// Every number in `text` replaced by `value`.
    static func replacingNumbers(in text: String, with value: String) -> String {
        text.replacingOccurrences(
            of: #"(?<=[:\[,])-?[0-9]+(\.[0-9]+)?(?=[,}\]])"#,
            with: value,
            options: .regularExpression
        )
    }

    @Test("Real Janus messages with every number replaced by an extreme one parse or fail with a typed error")
    func extremeNumbersNeverTrap() {
        var parsed = 0
        for message in RealJanus.all {
            for value in Self.extremes {
                let text = Self.replacingNumbers(in: message, with: value)
                #expect(text != message || !message.contains { $0.isNumber })
                guard let janus = try? JanusMessage(text: text) else { continue }
                parsed += 1
                _ = HandleEvent(janus)
                _ = janus.error.map { "\($0)" }
                if let data = janus.pluginData {
                    _ = try? VideoRoom.events(from: data)
                    _ = try? VideoRoom.participants(from: data)
                    _ = try? VideoRoom.rooms(from: data)
                }
            }
        }
        #expect(parsed > RealJanus.all.count)
    }

    @Test("Integer accessors take only exact values in range")
    func integerAccessorsAreExact() throws {
        #expect(try JSONValue.parse("18446744073709551615").uint64Value == nil, "past Int64: not an id")
        #expect(try JSONValue.parse("-1").uint64Value == nil)
        #expect(try JSONValue.parse("1e300").intValue == nil)
        #expect(try JSONValue.parse("4.5").intValue == nil)
        #expect(try JSONValue.parse("9223372036854775807").intValue == .max)
        #expect(try JSONValue.parse("4951686904510440").uint64Value == 4_951_686_904_510_440)
    }
}
