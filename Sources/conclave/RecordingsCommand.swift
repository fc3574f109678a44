import ArgumentParser
import ConclaveRecorder
import Foundation

/// `conclave recordings`: look after recording folders.
struct RecordingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recordings",
        abstract: "Inspect or repair recording folders.",
        subcommands: [Inspect.self, Repair.self, ComposeCommand.self]
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
            abstract:
                "Rebuild every container from its journal (after a crash or kill), and update the manifest. A file is never replaced by a rebuild that holds less; that rebuild is written beside it as <name>.repaired.<ext>."
        )

        @Argument(help: "The recording folder.")
        var directory: String

        @Flag(
            name: .customLong("remove-journals"),
            help:
                "Remove the journals of files that were rebuilt, verified and put in place; journals with unreadable records are kept."
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
            for notice in outcome.notices {
                FileHandle.standardError.write(Data("conclave: note: \(notice)\n".utf8))
            }
            for problem in outcome.problems {
                FileHandle.standardError.write(Data("conclave: \(problem)\n".utf8))
            }
            if outcome.rebuilt.isEmpty && !outcome.problems.isEmpty { throw ExitCode(1) }
        }
    }
}
