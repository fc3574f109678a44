import Foundation
public import JanusClient
import JanusProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Publishers that cost the process under test nothing: Janus `add_remote_publisher` entries fed
/// by ffmpeg processes that send a media file's audio and video as plain RTP, looped.
///
/// The benchmarks use them to put N VP8 1 Mbit/s + Opus participants in a room without encoding
/// or encrypting anything themselves.
public final class RemoteFeeds {
    /// The feed ids Janus gave the remote publishers, in creation order.
    public let feedIDs: [UInt64]
    private var processes: [Process]

    private init(feedIDs: [UInt64], processes: [Process]) {
        self.feedIDs = feedIDs
        self.processes = processes
    }

    deinit { stop() }

    /// Encodes `seconds` of ffmpeg's test picture (640x480, 30 fps, VP8 at 1 Mbit/s, a keyframe
    /// every 2 s) and a 440 Hz tone (Opus, 32 kbit/s) into a WebM file at `path`.
    public static func makeMedia(at path: String, seconds: Int = 12) throws {
        try runFFmpeg([
            "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x480:rate=30", "-f", "lavfi", "-i",
            "sine=frequency=440:sample_rate=48000", "-t", "\(seconds)", "-c:v", "libvpx", "-b:v", "1M", "-minrate",
            "1M", "-maxrate", "1M", "-deadline", "realtime", "-cpu-used", "8", "-g", "60", "-c:a", "libopus", "-b:a",
            "32k", "-y", path,
        ])
    }

    /// Adds `count` remote publishers to `room` (displays `"<index>:Remote <index>"`) and starts
    /// one ffmpeg per publisher sending `media` (made by ``makeMedia(at:seconds:)``) to it.
    public static func start(
        count: Int,
        room: UInt64,
        media: String,
        bed: JanusTestBed,
        admin: VideoRoomHandle
    ) async throws -> RemoteFeeds {
        var feedIDs: [UInt64] = []
        var processes: [Process] = []
        do {
            for index in 0..<count {
                let (data, _) = try await admin.request(
                    [
                        "request": "add_remote_publisher", "room": .id(room),
                        "display": .string("\(index):Remote \(index)"), "iface": .string(bed.janusAddress),
                        "streams": [
                            ["type": "audio", "mindex": 0, "mid": "0", "codec": "opus"],
                            ["type": "video", "mindex": 1, "mid": "1", "codec": "vp8"],
                        ],
                    ],
                    name: "add_remote_publisher"
                )
                guard let port = data["port"]?.intValue else {
                    throw TestBedError("add_remote_publisher gave no port")
                }
                if let id = data["id"]?.intValue { feedIDs.append(UInt64(id)) }
                let target = "rtp://\(bed.janusAddress):\(port)"
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = [
                    "ffmpeg", "-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i", media, "-map", "0:a", "-c",
                    "copy", "-ssrc", "1000", "-payload_type", "111", "-f", "rtp", target, "-map", "0:v", "-c", "copy",
                    "-ssrc", "1010", "-payload_type", "96", "-f", "rtp", target,
                ]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                processes.append(process)
            }
        } catch {
            RemoteFeeds(feedIDs: feedIDs, processes: processes).stop()
            throw error
        }
        if feedIDs.count != count {
            feedIDs = try await admin.listParticipants(room: room).filter(\.isPublisher).map(\.id)
        }
        return RemoteFeeds(feedIDs: feedIDs, processes: processes)
    }

    /// Stops the ffmpeg processes (the Janus entries go with the room).
    public func stop() {
        // SIGKILL: children inherit the spawning thread's signal mask, in which SIGTERM is blocked.
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for process in processes { process.waitUntilExit() }
        processes = []
    }

    private static func runFFmpeg(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ffmpeg"] + arguments
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw TestBedError("cannot run ffmpeg (is it installed?): \(error)")
        }
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestBedError("ffmpeg \(arguments.joined(separator: " ")) failed: \(output)")
        }
    }
}
