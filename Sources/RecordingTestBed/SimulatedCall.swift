public import ConclaveCore
public import ConclaveRecorder
import Foundation
public import Logging

/// A call of several simulated publishers, each with a join time, a leave time and muted spans,
/// recorded through a real `CallRecorder` into a finished recording folder.
///
/// Every time is a whole number of seconds on the call timeline, so that the flashes and beeps of
/// all participants fall on the same instants and a composite can be checked for alignment.
public struct SimulatedCall: Sendable {
    /// One participant of the call.
    public struct Member: Sendable {
        public var feedID: UInt64
        /// The display name as ECall sends it (`<userId>:<name>`).
        public var display: String
        public var codec: MediaCodec
        /// Seconds after the call's start.
        public var join: Int
        /// Seconds after the call's start; nil: stays to the end.
        public var leave: Int?
        /// Muted spans, in seconds after the call's start.
        public var muted: [Range<Int>]

        public init(
            feedID: UInt64,
            display: String,
            codec: MediaCodec,
            join: Int = 0,
            leave: Int? = nil,
            muted: [Range<Int>] = []
        ) {
            self.feedID = feedID
            self.display = display
            self.codec = codec
            self.join = join
            self.leave = leave
            self.muted = muted
        }

        /// The user id part of the display name: the manifest's participant key.
        public var key: String { String(display.prefix { $0 != ":" }) }
        /// The name part of the display name: what a tile shows.
        public var name: String { String(display.drop { $0 != ":" }.dropFirst()) }
    }

    public var members: [Member]
    /// The call's length in seconds.
    public var seconds: Int
    public var width: Int
    public var height: Int

    public init(members: [Member], seconds: Int, width: Int = 320, height: Int = 240) {
        self.members = members
        self.seconds = seconds
        self.width = width
        self.height = height
    }

    /// `participants` people (VP8 and H264 alternately); with `varied`, the second joins a quarter
    /// into the call, the third leaves at three quarters and the fourth is muted from a quarter
    /// for up to 10 s; without, everyone is there and talking the whole call.
    public static func standard(
        participants: Int,
        seconds: Int,
        width: Int = 320,
        height: Int = 240,
        varied: Bool = true
    ) -> SimulatedCall {
        let names = ["Ann", "Bob", "Cem", "Dia", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lea"]
        let quarter = max(1, seconds / 4)
        var members: [Member] = []
        for index in 0..<max(0, participants) {
            var member = Member(
                feedID: UInt64(index + 1) * 11,
                display: "u\(index + 1):\(names[index % names.count])\(index < names.count ? "" : "\(index)")",
                codec: index % 2 == 0 ? .vp8 : .h264
            )
            if varied {
                switch index {
                case 1: member.join = quarter
                case 2: member.leave = max(quarter + 1, seconds - quarter)
                case 3: member.muted = [quarter..<min(seconds, quarter + 10)]
                default: break
                }
            }
            members.append(member)
        }
        return SimulatedCall(members: members, seconds: seconds, width: width, height: height)
    }

    /// The publisher a member is, on this call's timeline.
    public func publisher(_ member: Member) -> SimulatedPublisher {
        let end = min(member.leave ?? seconds, seconds)
        return SimulatedPublisher(
            feedID: member.feedID,
            display: member.display,
            codec: member.codec,
            width: width,
            height: height,
            seconds: max(0, end - member.join),
            start: Int64(member.join) * 1_000_000,
            muted: member.muted.map { Int64($0.lowerBound) * 1_000_000..<Int64($0.upperBound) * 1_000_000 }
        )
    }

    /// Records the call into `directory` (new or empty) and finishes the recording.
    ///
    /// - Parameter startTime: the call's start, Unix microseconds.
    /// - Returns: the finished manifest.
    public func record(
        to directory: String,
        startTime: Int64 = 1_795_000_000_000_000,
        logger: Logger? = nil
    ) throws -> RecordingManifest {
        var quiet = Logger(label: "simulated-call")
        quiet.logLevel = .error
        let recorder = try CallRecorder(
            configuration: .init(
                directory: directory,
                callID: "4242",
                room: 1234,
                janusURL: "ws://127.0.0.1:8188",
                recorderVersion: "simulated",
                cryptoFormat: "ecall",
                keyEpochs: [0]
            ),
            startTime: startTime,
            logger: logger ?? quiet
        )
        var inputs: [RecorderInput] = []
        for member in members {
            let publisher = publisher(member)
            inputs.append(
                .joined(feedID: member.feedID, display: member.display, time: startTime + publisher.start)
            )
            inputs += try publisher.events(recordingStart: startTime).map(RecorderInput.media)
            if let leave = member.leave, leave < seconds {
                // The room announces the leave after the last packets arrived.
                inputs.append(.left(feedID: member.feedID, time: startTime + Int64(leave) * 1_000_000 + 100_000))
            }
        }
        play(inputs: inputs, into: recorder, from: startTime)
        return recorder.finish(at: startTime + Int64(seconds) * 1_000_000)
    }
}
