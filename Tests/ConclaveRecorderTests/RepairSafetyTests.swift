import ConclaveAV
import ConclaveCore
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import Testing

@Suite("Repair safety", .serialized)
struct RepairSafetyTests {
    let start: Int64 = 1_763_000_000_000_000
    let base = "u1-11-s1"

    func header(file: String) -> JournalHeader {
        JournalHeader(
            participant: "u1",
            feedID: 11,
            display: "u1:Ann",
            segment: 1,
            file: file,
            kind: .audio,
            codec: .opus,
            recordingStartMicroseconds: start
        )
    }

    /// A recording folder with a manifest and no participant yet.
    func emptyRecording(_ folder: String) throws {
        let recorder = try makeRecorder(directory: URL(fileURLWithPath: folder), start: start)
        recorder.finish(at: start + 1_000_000)
    }

    /// Writes `frames` into a journal at `path`; returns each record's offset and size.
    @discardableResult
    func writeJournal(_ path: String, file: String, frames: [(frame: EncodedFrame, arrival: Int64)]) throws
        -> [(offset: Int, size: Int)]
    {
        let writer = try JournalWriter(path: path, header: header(file: file))
        for item in frames { try writer.append(item.frame, arrivalMicroseconds: item.arrival) }
        try writer.close()
        // Marker (4), type, flags, RTP timestamp (4), arrival (8), length (4), data, CRC (4).
        let sizes = frames.map { 26 + $0.frame.data.count }
        var offset = writer.size - sizes.reduce(0, +)
        return sizes.map { size in
            defer { offset += size }
            return (offset, size)
        }
    }

    /// Flips a bit of a record's checksum.
    func corruptChecksum(_ path: String, record: (offset: Int, size: Int)) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[record.offset + record.size - 1] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Writes the container the recorder would have written for `frames`.
    func writeContainer(_ basePath: String, frames: [(frame: EncodedFrame, arrival: Int64)]) throws {
        let muxer = SegmentMuxer(basePath: basePath, recordingStart: start)
        for item in frames { try muxer.append(kind: .audio, frame: item.frame, arrival: item.arrival) }
        try muxer.finish()
    }

    // MARK: - Path traversal

    @Test(
        "A journal header naming a file outside the folder (or hidden, or with NUL) is refused: nothing written outside, the journal named",
        arguments: ["x/../../outside/pwned", "../outside/pwned", "x/pwned", ".hidden", "a\u{0}b", ".."]
    )
    func pathTraversal(file: String) throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try emptyRecording(folder)
        let outside = root + "/outside"
        #expect(mkdir(outside, 0o755) == 0)
        try Data("precious".utf8).write(to: URL(fileURLWithPath: outside + "/pwned.webm"))
        // What a crafted folder would hold so that the names resolve: the folders they go through.
        if let first = file.split(separator: "/", omittingEmptySubsequences: false).first, file.contains("/") {
            #expect(mkdir(folder + "/" + first, 0o700) == 0 || errno == EEXIST)
            #expect(mkdir(folder + "/.rebuild-" + first, 0o700) == 0 || errno == EEXIST)
        }
        try writeJournal(folder + "/evil.audio.journal", file: file, frames: try opusFrames(seconds: 1, start: start))
        let before = try names(in: folder)

        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test", removeJournals: true)
        #expect(outcome.rebuilt == [])
        #expect(
            outcome.problems.contains {
                $0.hasPrefix("evil.audio.journal: journal not used: its header names the file")
            },
            "\(outcome.problems)"
        )
        #expect(try names(in: outside) == ["pwned.webm"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside + "/pwned.webm")) == Data("precious".utf8))
        #expect(try names(in: root) == ["outside", "rec"])
        #expect(try names(in: folder) == before, "nothing created, nothing removed")
    }

    @Test("A plain name with dots inside (a user id such as a..b) is not a traversal: it is rebuilt")
    func dotsInsideAName() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try emptyRecording(folder)
        let name = ParticipantIdentity(feedID: 11, display: "a..b:Ann").fileSafeKey + "-11-s1"
        #expect(name == "a..b-11-s1")
        try writeJournal(
            folder + "/\(name).audio.journal",
            file: name,
            frames: try opusFrames(seconds: 1, start: start)
        )
        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test")
        #expect(outcome.problems == [])
        #expect(outcome.rebuilt == ["\(name).webm"])
    }

    // MARK: - Shorter rebuilds, damaged journals

    @Test(
        "A journal with one bad record (of 100) is read past it; the 99-frame rebuild does not replace the 100-frame file and the journal is kept"
    )
    func shorterRebuildKeepsBoth() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try emptyRecording(folder)
        let frames = try opusFrames(seconds: 2, start: start)
        try #require(frames.count == 100)
        let journal = folder + "/\(base).audio.journal"
        let records = try writeJournal(journal, file: base, frames: frames)
        try writeContainer(folder + "/" + base, frames: frames)
        let good = folder + "/\(base).webm"
        let goodBytes = try Data(contentsOf: URL(fileURLWithPath: good))
        #expect(try mediaContents(good).packets == 100)
        try corruptChecksum(journal, record: records[10])

        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test", removeJournals: true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: good)) == goodBytes, "the 100-frame file is untouched")
        let beside = folder + "/\(base).repaired.webm"
        #expect(outcome.rebuilt == ["\(base).repaired.webm"])
        let rebuilt = try mediaContents(beside)
        #expect(rebuilt.packets == 99, "every readable record, the ones after the bad one included")
        #expect(rebuilt.span > 1.9)
        #expect(FileManager.default.fileExists(atPath: journal), "the journal holds a record no file has")
        #expect(
            outcome.problems.contains {
                $0.hasPrefix("\(base).audio.journal: 1 damaged record skipped (") && $0.contains("checksum mismatch")
            },
            "\(outcome.problems)"
        )
        #expect(outcome.notices.contains { $0.hasPrefix("\(base): kept \(base).webm: it holds 100 audio packets") })
        #expect(outcome.notices.contains { $0.contains("journals kept") && $0.contains("\(base).audio.journal") })
        #expect(FilePrivacy.mode(beside) == 0o600)
        // The manifest names the journal that is left.
        let segment = try #require(outcome.manifest?.participants.first { $0.key == "u1" }?.segments.first)
        #expect(segment.journals == ["\(base).audio.journal"])

        // A second repair changes nothing: the rebuild beside holds no more than the one there.
        let besideBytes = try Data(contentsOf: URL(fileURLWithPath: beside))
        let again = try RecordingRepair.repair(directory: folder, recorderVersion: "test", removeJournals: true)
        #expect(again.rebuilt == ["\(base).repaired.webm"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: good)) == goodBytes)
        #expect(try mediaContents(beside).packets == 99)
        #expect(!besideBytes.isEmpty)
        #expect(FileManager.default.fileExists(atPath: journal))
    }

    @Test(
        "With no file to compare with, a damaged journal's rebuild becomes the file, and --remove-journals still keeps the journal"
    )
    func damagedJournalKept() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try emptyRecording(folder)
        let frames = try opusFrames(seconds: 2, start: start)
        let journal = folder + "/\(base).audio.journal"
        let records = try writeJournal(journal, file: base, frames: frames)
        try corruptChecksum(journal, record: records[40])

        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test", removeJournals: true)
        #expect(outcome.rebuilt == ["\(base).webm"])
        #expect(try mediaContents(folder + "/\(base).webm").packets == 99)
        #expect(FileManager.default.fileExists(atPath: journal))
        #expect(
            outcome.notices.contains { $0.contains("hold records the rebuild could not read") },
            "\(outcome.notices)"
        )
    }

    @Test(
        "A rebuild that holds more than the file (a live file cut by a crash) replaces it, and --remove-journals removes the journal"
    )
    func fullerRebuildReplaces() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try emptyRecording(folder)
        let frames = try opusFrames(seconds: 2, start: start)
        let journal = folder + "/\(base).audio.journal"
        try writeJournal(journal, file: base, frames: frames)
        try writeContainer(folder + "/" + base, frames: Array(frames.prefix(60)))

        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test", removeJournals: true)
        #expect(outcome.rebuilt == ["\(base).webm"])
        #expect(outcome.problems == [])
        #expect(try mediaContents(folder + "/\(base).webm").packets == 100)
        #expect(!FileManager.default.fileExists(atPath: journal))
        let left = try names(in: folder)
        #expect(left == ["manifest.json", "\(base).webm"])
    }

    // MARK: - Manifests

    enum BadManifest: String, CaseIterable, Sendable {
        case garbage, truncated, empty, missing
    }

    @Test(
        "An unparseable manifest is set aside (0600) and rebuilt from the journals with their start time; a missing one is rebuilt",
        arguments: BadManifest.allCases
    )
    func unparseableManifest(kind: BadManifest) throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try crashRecording(in: folder, start: start)
        let path = folder + "/manifest.json"
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let bad: Data? =
            switch kind {
            case .garbage: Data("{\"callID\": 4242, oops".utf8)
            case .truncated: original.prefix(original.count / 2)
            case .empty: Data()
            case .missing: nil
            }
        if let bad {
            try bad.write(to: URL(fileURLWithPath: path))
        } else {
            try FileManager.default.removeItem(atPath: path)
        }

        let outcome = try RecordingRepair.repair(directory: folder, recorderVersion: "test")
        #expect(outcome.rebuilt == ["\(base).webm"])
        let manifest = try RecordingManifest.read(from: folder)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        #expect(manifest.startTime == formatter.string(from: Date(timeIntervalSince1970: Double(start) / 1e6)))
        #expect(manifest.status == "repaired")
        let participant = try #require(manifest.participants.first { $0.key == "u1" })
        #expect(participant.recorded && participant.segments.first?.file == "\(base).webm")
        let aside = try names(in: folder).filter { $0.hasPrefix("manifest.json.unreadable-") }
        if let bad {
            let all = try names(in: folder)
            #expect(aside.count == 1, "\(all)")
            let asidePath = folder + "/" + (aside.first ?? "-")
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: asidePath)) == bad,
                "the unreadable manifest is kept as it was"
            )
            #expect(FilePrivacy.mode(asidePath) == 0o600)
            #expect(
                outcome.notices.contains {
                    $0.hasPrefix("manifest.json was not readable (") && $0.contains("kept as \(aside.first ?? "-")")
                },
                "\(outcome.notices)"
            )
        } else {
            #expect(aside.isEmpty)
            #expect(
                outcome.notices.contains { $0.hasPrefix("no manifest.json: a new one was built from the journals") }
            )
        }
        #expect(FilePrivacy.nonPrivateEntries(under: folder) == [])
    }

    @Test("An unparseable manifest and no journal: repair refuses and changes nothing")
    func unparseableManifestWithoutJournals() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try finishedRecording(in: folder, start: start)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: folder + "/manifest.json"))
        let before = try names(in: folder)
        let error = try #require(throws: RecordingError.self) {
            try RecordingRepair.repair(directory: folder, recorderVersion: "test")
        }
        #expect(error.description.contains("not valid JSON") && error.description.hasSuffix("nothing was changed"))
        #expect(try names(in: folder) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json")) == Data("garbage".utf8))
    }

    @Test(
        "Run as a user who may not read the manifest, repair refuses with the reason and writes nothing; inspect gives the reason"
    )
    func manifestWithoutPermission() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try crashRecording(in: folder, start: start)
        // The folder and its files belong to nobody, except the manifest, which nobody may not read.
        let nobody = try nobodyIDs()
        #expect(try runProcess("chown", ["-R", "\(nobody.uid):\(nobody.gid)", folder]).succeeded)
        #expect(chown(folder + "/manifest.json", 0, 0) == 0 && chmod(folder + "/manifest.json", 0o600) == 0)
        let manifest = try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json"))
        let before = try names(in: folder)
        let live = try Data(contentsOf: URL(fileURLWithPath: folder + "/\(base).webm"))

        let conclave = try TestPaths.conclave()
        let repair = try runProcess(
            "runuser",
            ["-u", "nobody", "--", conclave, "recordings", "repair", "--remove-journals", folder],
            timeout: .seconds(60)
        )
        #expect(!repair.succeeded)
        #expect(
            repair.errorOutput.contains(
                "\(folder)/manifest.json: cannot read the manifest: cannot open it: Permission denied; nothing was changed"
            ),
            "\(repair.errorOutput)"
        )
        #expect(repair.errorOutput.split(separator: "\n").count == 1, "one clear line: \(repair.errorOutput)")
        #expect(try names(in: folder) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json")) == manifest)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/\(base).webm")) == live)

        let inspect = try runProcess(
            "runuser",
            ["-u", "nobody", "--", conclave, "recordings", "inspect", folder],
            timeout: .seconds(60)
        )
        #expect(!inspect.succeeded)
        #expect(
            inspect.errorOutput.contains("cannot read the manifest: cannot open it: Permission denied"),
            "\(inspect.errorOutput)"
        )
    }

    // MARK: - Reasons, FIFOs

    @Test("inspect gives the reason a manifest is unreadable: where the JSON breaks, a missing field, an empty file")
    func inspectReasons() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        #expect(mkdir(folder, 0o700) == 0)
        for (content, reason) in [
            ("{\"callID\": 4242, oops", "not valid JSON at line 1, column 18 (invalid value)"),
            ("{\n  \"callID\": 4242,\n  x", "not valid JSON at line 3, column 3 (invalid value)"),
            ("{\"callID\": \"4242\"", "not valid JSON: it ends in the middle (cut short?)"),
            ("{\"callID\": \"4242\"}", "not a recording manifest: \"formatVersion\" is missing"),
            ("", "the file is empty"),
        ] {
            try Data(content.utf8).write(to: URL(fileURLWithPath: folder + "/manifest.json"))
            let error = try #require(throws: RecordingError.self) {
                try RecordingInspection.report(directory: folder)
            }
            #expect(
                error.description.hasPrefix("\(folder)/manifest.json: cannot read the manifest: \(reason)"),
                "\(error)"
            )
            #expect(!error.description.contains("\n"))
        }
    }

    @Test("A FIFO as manifest.json: inspect and repair return at once with \"it is a FIFO\", and repair writes nothing")
    func manifestFIFO() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try crashRecording(in: folder, start: start)
        let fifo = folder + "/manifest.json"
        try FileManager.default.removeItem(atPath: fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unblockFIFO(fifo) }
        let before = try names(in: folder)
        let inspect = try #require(
            returnsPromptly(within: .seconds(10)) { () -> String in
                do { return try RecordingInspection.report(directory: folder) } catch { return "\(error)" }
            },
            "inspect blocked on the FIFO"
        )
        #expect(inspect == "\(fifo): cannot read the manifest: it is a FIFO, not a regular file")
        unblockFIFO(fifo)
        let repair = try #require(
            returnsPromptly(within: .seconds(30)) { () -> String in
                do {
                    return "repaired: \(try RecordingRepair.repair(directory: folder, recorderVersion: "test").rebuilt)"
                } catch {
                    return "\(error)"
                }
            },
            "repair blocked on the FIFO"
        )
        #expect(repair == "\(fifo): cannot read the manifest: it is a FIFO, not a regular file; nothing was changed")
        #expect(try names(in: folder) == before)
    }

    @Test("A FIFO as a journal: repair returns at once, names it as a FIFO, and repairs the rest")
    func journalFIFO() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-repair")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/rec"
        try crashRecording(in: folder, start: start)
        let fifo = folder + "/zz-1-s1.audio.journal"
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unblockFIFO(fifo) }
        let outcome = try #require(
            returnsPromptly(within: .seconds(60)) { () -> Result<RecordingRepair.Outcome, RecordingError> in
                Result { () throws(RecordingError) in
                    try RecordingRepair.repair(directory: folder, recorderVersion: "test")
                }
            },
            "repair blocked on the FIFO"
        ).get()
        #expect(outcome.problems == ["\(fifo): it is a FIFO, not a regular file"])
        #expect(outcome.rebuilt == ["\(base).webm"])
    }
}
