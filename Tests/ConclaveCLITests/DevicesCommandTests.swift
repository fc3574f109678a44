import ConclaveTestSupport
import Foundation
import Testing

@Suite struct DevicesCommandTests {
    @Test func listsTheServersMicrophonesAndSpeakers() throws {
        let server = try TestPulseServer(sinks: ["speaker", "mic"])
        let text = try conclave(["devices"], environment: server.environment)
        #expect(text.succeeded, "\(text.errorOutput)")
        let lines = text.output.split(separator: "\n").map(String.init)
        let speakers = try #require(lines.firstIndex(of: "Speakers:"))
        #expect(lines.first == "Microphones:")
        #expect(lines[1..<speakers].contains { $0.contains("mic.monitor") && $0.hasSuffix("(monitor)") })
        #expect(lines[(speakers + 1)...].contains { $0.hasPrefix("* speaker ") }, "the default sink is starred")
        #expect(lines[(speakers + 1)...].contains { $0.hasPrefix("  mic ") })

        let json = try conclave(["devices", "--json"], environment: server.environment)
        #expect(json.succeeded, "\(json.errorOutput)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        let sinks = try #require(object["speakers"] as? [[String: Any]])
        #expect(sinks.compactMap { $0["name"] as? String } == ["speaker", "mic"])
        #expect(sinks.first?["default"] as? Bool == true)
        #expect(sinks.first?["rate"] as? Int == 48_000)
        let sources = try #require(object["microphones"] as? [[String: Any]])
        #expect(sources.contains { $0["name"] as? String == "mic.monitor" && $0["monitor"] as? Bool == true })
        #expect(object["problems"] == nil)
    }

    @Test func noServerIsOneLineAndSuccess() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-nopulse")
        defer { try? FileManager.default.removeItem(at: directory) }
        let address = "unix:\(directory.path)/native"
        let text = try conclave(["devices"], environment: ["PULSE_SERVER": address])
        #expect(text.succeeded, "\(text.errorOutput)")
        #expect(text.output.hasPrefix("no PulseAudio server at \(address): "), "\(text.output)")
        #expect(text.output.split(separator: "\n").count == 1)

        let json = try conclave(["devices", "--json"], environment: ["PULSE_SERVER": address])
        #expect(json.succeeded, "\(json.errorOutput)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        #expect((object["microphones"] as? [Any])?.isEmpty == true)
        #expect((object["problems"] as? [String])?.first?.contains("no PulseAudio server") == true)
    }
}
