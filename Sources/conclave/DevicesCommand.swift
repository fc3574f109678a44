import ArgumentParser
import ConclavePulse
import Foundation

/// `conclave devices`: the microphones and speakers (PulseAudio) a call can use, by the names
/// `join --audio mic:NAME` takes, and the cameras and screens `join --video camera:...` and
/// `--video screen:...` take.
///
/// A machine without a PulseAudio server still gets an answer: one line saying so, exit 0, and
/// whatever the other sections list.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List microphones, speakers, cameras and screens.",
        discussion: """
            Microphones and speakers come from the PulseAudio server (PULSE_SERVER, else the one in \
            the user's runtime directory; PipeWire serves the same API). Monitors (what a speaker \
            plays, recordable like a microphone) are marked. The default of each kind is starred. \
            Cameras are the capture devices among /dev/video*, with their formats; screens are the X \
            displays (DISPLAY first, then every /tmp/.X11-unix socket), with their size.
            """
    )

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() async throws {
        let audio = await AudioDevices.load()
        if json {
            // One object: the audio keys beside `cameras` and `screens` as ConclaveCapture encodes them.
            var object = audio.json
            let video = try JSONEncoder().encode(VideoDevices.listing())
            let encoded = try JSONSerialization.jsonObject(with: video) as? [String: Any]
            object.merge(encoded ?? [:]) { current, _ in current }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(audio.text, terminator: "")
            for line in VideoDevices.lines() { print(line) }
        }
    }
}

/// The audio half of `conclave devices`: what the server lists, or why there is nothing.
struct AudioDevices {
    var devices: PulseDeviceList?
    var problem: String?

    /// Asks the server; a missing server becomes ``problem``, never an error.
    static func load() async -> AudioDevices {
        do {
            let connection = try await PulseConnection.connect(applicationName: "Conclave devices")
            defer { connection.close() }
            return AudioDevices(devices: try await connection.devices())
        } catch {
            return AudioDevices(devices: nil, problem: error.message)
        }
    }

    var text: String {
        guard let devices else { return "\(problem ?? "no PulseAudio server")\n" }
        var out = "Microphones:\n"
        out += lines(devices.sources, empty: "  (none)\n")
        out += "Speakers:\n"
        out += lines(devices.sinks, empty: "  (none)\n")
        return out
    }

    private func lines(_ list: [PulseDevice], empty: String) -> String {
        guard !list.isEmpty else { return empty }
        let width = min(48, list.map(\.name.count).max() ?? 0)
        return list.map { device in
            let marker = device.isDefault ? "* " : "  "
            let padded = device.name.padding(toLength: max(width, device.name.count), withPad: " ", startingAt: 0)
            let monitor = device.isMonitor ? " (monitor)" : ""
            return "\(marker)\(padded)  \(device.description)  [\(device.sampleSpec)]\(monitor)\n"
        }.joined()
    }

    var json: [String: Any] {
        func entries(_ list: [PulseDevice]) -> [[String: Any]] {
            list.map {
                [
                    "name": $0.name, "description": $0.description, "format": $0.sampleSpec.format,
                    "rate": $0.sampleSpec.rate, "channels": $0.sampleSpec.channels, "default": $0.isDefault,
                    "monitor": $0.isMonitor,
                ]
            }
        }
        var object: [String: Any] = [
            "microphones": entries(devices?.sources ?? []),
            "speakers": entries(devices?.sinks ?? []),
        ]
        if let problem { object["problems"] = [problem] }
        return object
    }
}
