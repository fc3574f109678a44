import ArgumentParser
import ConclaveRecorder
import Foundation

/// `conclave recordings`: look after recording folders.
struct RecordingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recordings",
        abstract: "Inspect or repair recording folders.",
        subcommands: [Inspect.self, Repair.self]
    )

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print participants, tracks, durations, frame counts, gaps and decrypt failures."
        )

        @Argument(help: "The recording folder (holding manifest.json).")
        var directory: String

        func run() throws {
            do {
                print(try RecordingInspection.report(directory: directory))
            } catch {
                throw RecordCommandError(message: error.description)
            }
        }
    }

    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild every container from its journal (after a crash or kill), and update the manifest."
        )

        @Argument(help: "The recording folder.")
        var directory: String

        @Flag(
            name: .customLong("remove-journals"),
            help: "Remove the journals of files that were rebuilt and verified."
        )
        var removeJournals = false

        func run() throws {
            let outcome: RecordingRepair.Outcome
            do {
                outcome = try RecordingRepair.repair(
                    directory: directory,
                    recorderVersion: conclaveVersion,
                    removeJournals: removeJournals
                )
            } catch {
                throw RecordCommandError(message: error.description)
            }
            for file in outcome.rebuilt { print("rebuilt \(directory)/\(file)") }
            for problem in outcome.problems {
                FileHandle.standardError.write(Data("conclave: \(problem)\n".utf8))
            }
            if outcome.rebuilt.isEmpty && !outcome.problems.isEmpty { throw ExitCode(1) }
        }
    }
}
