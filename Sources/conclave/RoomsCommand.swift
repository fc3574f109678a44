import ArgumentParser
import Foundation
import JanusClient
import JanusProtocol
import Logging

/// `conclave rooms`: list and create VideoRoom rooms.
struct RoomsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rooms",
        abstract: "List or create Janus VideoRoom rooms.",
        subcommands: [List.self, Create.self, Participants.self, Destroy.self],
        defaultSubcommand: List.self
    )
}

/// Connects, runs `body` with a VideoRoom handle, and tears the session down again.
func withVideoRoom<T: Sendable>(
    _ janus: JanusOptions,
    logger: Logger,
    _ body: (VideoRoomHandle) async throws -> T
) async throws -> T {
    let connection = try await JanusConnection.connect(
        to: try janus.resolvedURL(),
        options: janus.connectionOptions(),
        logger: logger
    )
    do {
        let session = try await connection.createSession()
        let handle = try await VideoRoomHandle.attach(to: session)
        let result = try await body(handle)
        try? await session.destroy()
        await connection.close()
        return result
    } catch {
        await connection.close()
        throw error
    }
}

extension RoomsCommand {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the public rooms.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        func run() async throws {
            let rooms = try await withVideoRoom(janus, logger: global.makeLogger()) { try await $0.listRooms() }
            if json {
                let entries: [JSONValue] = rooms.sorted { $0.id < $1.id }.map { room in
                    [
                        "room": .id(room.id), "description": .string(room.description),
                        "participants": .int(Int64(room.participantCount)),
                        "max_publishers": .int(Int64(room.maxPublishers)),
                        "videocodec": .string(room.videoCodecs.joined(separator: ",")),
                        "audiocodec": .string(room.audioCodecs.joined(separator: ",")),
                        "require_e2ee": .bool(room.requiresE2EE),
                    ]
                }
                print(JSONValue.array(entries).serialized())
                return
            }
            guard !rooms.isEmpty else {
                print("no public rooms")
                return
            }
            print(pad("ROOM", 20) + pad("PARTICIPANTS", 14) + pad("VIDEO", 12) + pad("E2EE", 6) + "DESCRIPTION")
            for room in rooms.sorted(by: { $0.id < $1.id }) {
                print(
                    pad("\(room.id)", 20) + pad("\(room.participantCount)/\(room.maxPublishers)", 14)
                        + pad(room.videoCodecs.joined(separator: ","), 12) + pad(room.requiresE2EE ? "yes" : "no", 6)
                        + room.description
                )
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a room.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions

        @Option(help: "Room id (default: Janus picks one).")
        var room: UInt64?

        @Option(help: "Video codecs in order of preference: vp8, h264 or vp8,h264. ECall iOS needs h264.")
        var codec = "vp8,h264"

        @Flag(help: "Require every publisher to mark its media end-to-end encrypted.")
        var e2ee = false

        @Option(help: "Maximum number of publishers.")
        var publishers = 16

        @Option(help: "Description shown by `rooms list`.")
        var description: String?

        func validate() throws {
            let codecs = codec.split(separator: ",").map { $0.lowercased() }
            guard !codecs.isEmpty, codecs.allSatisfy({ $0 == "vp8" || $0 == "h264" }) else {
                throw ValidationError("--codec takes vp8, h264 or vp8,h264 (got '\(codec)')")
            }
        }

        func run() async throws {
            let options = VideoRoom.RoomOptions(
                room: room,
                description: description,
                publishers: publishers,
                videoCodecs: codec.split(separator: ",").map { $0.lowercased() },
                requireE2EE: e2ee
            )
            let id = try await withVideoRoom(janus, logger: global.makeLogger()) { try await $0.createRoom(options) }
            print(id)
        }
    }

    struct Participants: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a room's participants.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions

        @Option(help: "The room.")
        var room: UInt64

        func run() async throws {
            let people = try await withVideoRoom(janus, logger: global.makeLogger()) {
                try await $0.listParticipants(room: room)
            }
            for person in people.sorted(by: { $0.id < $1.id }) {
                let display = ParticipantDisplay(parsing: person.display ?? "")
                let user = display.userID.map { " user \($0)" } ?? ""
                print("\(person.id)\t\(person.isPublisher ? "publishing" : "listening")\t\(display.name)\(user)")
            }
        }
    }

    struct Destroy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Destroy a room.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var janus: JanusOptions

        @Option(help: "The room.")
        var room: UInt64

        @Option(help: "The room's secret, if it has one.")
        var secret: String?

        func run() async throws {
            try await withVideoRoom(janus, logger: global.makeLogger()) {
                try await $0.destroyRoom(room, secret: secret)
            }
        }
    }
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}
