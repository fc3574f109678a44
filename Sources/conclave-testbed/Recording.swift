import ArgumentParser
import Foundation
import RecordingTestBed

extension TestBedCommand {
    /// Writes a recording folder of a simulated call, to try `conclave recordings compose` on and
    /// for bench/compose, without a Janus or a real call.
    struct Recording: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a recording of a simulated call (pattern video, tone audio) into a new folder.",
            discussion: """
                Each participant sends a moving pattern with its frame number and a white flash on every \
                whole second, and a tone with a beep on the same instants, encoded for real (VP8 and H264 \
                alternately) and recorded through Conclave's recorder. Unless --steady, the second \
                participant joins a quarter into the call, the third leaves at three quarters and the \
                fourth is muted from a quarter for up to 10 s.
                """
        )

        @Option(help: "How many people are in the call (1 to 12).")
        var participants = 4

        @Option(help: "The call's length in whole seconds.")
        var seconds = 20

        @Option(help: "The size of every participant's video, WxH (even numbers).")
        var size = "320x240"

        @Flag(help: "Everyone is there and talking for the whole call.")
        var steady = false

        @Option(help: "The new (or empty) folder to write the recording into.")
        var out: String

        func validate() throws {
            guard (1...12).contains(participants) else { throw ValidationError("--participants must be 1 to 12") }
            guard (1...3_600).contains(seconds) else { throw ValidationError("--seconds must be 1 to 3600") }
            guard Self.size(size) != nil else {
                throw ValidationError("--size must be WxH with even numbers from 64x64 to 1920x1080, not \(size)")
            }
        }

        func run() throws {
            guard let (width, height) = Self.size(size) else { throw ValidationError("bad --size \(size)") }
            let call = SimulatedCall.standard(
                participants: participants,
                seconds: seconds,
                width: width,
                height: height,
                varied: !steady
            )
            let manifest = try call.record(to: out)
            let segments = manifest.participants.reduce(0) { $0 + $1.segments.count }
            print("testbed: recorded \(seconds) s of \(participants) participants (\(segments) segments) in \(out)")
        }

        /// `WxH` with even sizes in a sensible range, or nil.
        static func size(_ text: String) -> (Int, Int)? {
            let parts = text.lowercased().split(separator: "x")
            guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]),
                (64...1920).contains(width), (64...1080).contains(height), width % 2 == 0, height % 2 == 0
            else { return nil }
            return (width, height)
        }
    }
}
