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
        // The audio part is that one line; the camera and screen lines follow it.
        let audioLines = text.output.split(separator: "\n").filter {
            !$0.hasPrefix("camera") && !$0.hasPrefix("screen")
        }
        #expect(audioLines.count == 1, "\(text.output)")

        let json = try conclave(["devices", "--json"], environment: ["PULSE_SERVER": address])
        #expect(json.succeeded, "\(json.errorOutput)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        #expect((object["microphones"] as? [Any])?.isEmpty == true)
        #expect((object["problems"] as? [String])?.first?.contains("no PulseAudio server") == true)
    }

    @Test func listsTheScreensBesideTheAudioDevices() throws {
        let pulse = try TestPulseServer(sinks: ["speaker"])
        let server = try TestXServer(width: 800, height: 600)
        defer { server.stop() }
        let environment = pulse.environment.merging(["DISPLAY": server.display]) { $1 }
        let text = try conclave(["devices"], environment: environment)
        #expect(text.succeeded, "\(text.errorOutput)")
        let lines = text.output.split(separator: "\n").map(String.init)
        let speakers = try #require(lines.firstIndex(of: "Speakers:"))
        let screen = try #require(lines.firstIndex(of: "screen \(server.display)  800x600"), "\(text.output)")
        #expect(screen > speakers, "screens come after the audio devices: \(text.output)")
        #expect(lines.contains { $0.hasPrefix("camera") }, "a camera line, even when there is none: \(text.output)")

        let json = try conclave(["devices", "--json"], environment: environment)
        #expect(json.succeeded, "\(json.errorOutput)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        let screens = try #require(object["screens"] as? [[String: Any]], "\(object)")
        #expect(screens.first?["display"] as? String == server.display)
        #expect(screens.first?["size"] as? String == "800x600")
        #expect(object["cameras"] is [Any], "\(object)")
        #expect((object["speakers"] as? [[String: Any]])?.first?["name"] as? String == "speaker")
    }
}
