import ConclaveCore
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import RecordingTestBed
import Testing

/// Records `seconds` of one participant into `folder` and stops without finishing, as a crash
/// would: the live file, the journals and a manifest naming them are left.
func crashRecording(in folder: String, start: Int64, seconds: Int = 4) throws {
    let recorder = try makeRecorder(directory: URL(fileURLWithPath: folder), start: start)
    let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: seconds)
    recorder.participantJoined(feedID: 11, display: ann.display, at: start)
    play(try ann.events(recordingStart: start), into: recorder, from: start)
    recorder.tick(now: start + Int64(seconds + 1) * 1_000_000)
    // Keep the recorder alive so that its deinit cannot tidy up.
    _ = Unmanaged.passRetained(recorder)
}

/// Records `seconds` of one participant into `folder` and finishes.
func finishedRecording(in folder: String, start: Int64, seconds: Int = 2) throws {
    let recorder = try makeRecorder(directory: URL(fileURLWithPath: folder), start: start)
    let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: seconds)
    recorder.participantJoined(feedID: 11, display: ann.display, at: start)
    play(try ann.events(recordingStart: start), into: recorder, from: start)
    recorder.finish(at: start + Int64(seconds + 1) * 1_000_000)
}

/// The uid and gid of `nobody`.
func nobodyIDs() throws -> (uid: uid_t, gid: gid_t) {
    guard let entry = getpwnam("nobody") else { throw SubprocessError(description: "no user nobody") }
    return (entry.pointee.pw_uid, entry.pointee.pw_gid)
}

/// The names in a folder, sorted.
func names(in folder: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
}

@Suite("Recording privacy", .serialized)
struct RecordingPrivacyTests {
    let start: Int64 = 1_763_000_000_000_000

    @Test(
        "Recording folders (and the recordings folder made for them) are 0700 and every file 0600 whatever the umask, after recording, after a crash and after repair",
        arguments: [mode_t(0o000), mode_t(0o022)]
    )
    func modesWhateverTheUmask(mask: mode_t) throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-privacy")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let recordings = root + "/recordings"
        try FilePrivacy.withUmask(mask) {
            let crashed = recordings + "/call-1"
            try crashRecording(in: crashed, start: start)
            let left = try names(in: crashed)
            #expect(left.contains { $0.hasSuffix(".journal") } && left.contains { $0.hasSuffix(".webm") }, "\(left)")
            #expect(FilePrivacy.nonPrivateEntries(under: recordings) == [], "after a crash")

            let outcome = try RecordingRepair.repair(directory: crashed, recorderVersion: "test")
            #expect(outcome.rebuilt == ["u1-11-s1.webm"], "\(outcome.problems)")
            #expect(FilePrivacy.nonPrivateEntries(under: recordings) == [], "after repair")

            try finishedRecording(in: recordings + "/call-2", start: start)
            #expect(try names(in: recordings + "/call-2") == ["manifest.json", "u1-11-s1.webm"])
            #expect(FilePrivacy.nonPrivateEntries(under: recordings) == [], "after a clean finish")
        }
    }

    @Test(
        "Another local user (nobody) can read neither a recording nor its manifest, though it can read a 0644 file beside it"
    )
    func nobodyCannotRead() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-privacy")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let control = root + "/control.txt"
        try Data("control".utf8).write(to: URL(fileURLWithPath: control))
        #expect(chmod(control, 0o644) == 0)
        #expect(try FilePrivacy.readAsNobody(control) == Data("control".utf8), "the control: nobody reads a 0644 file")

        let folder = root + "/recordings/call-1"
        try FilePrivacy.withUmask(0o022) { try finishedRecording(in: folder, start: start) }
        for file in ["manifest.json", "u1-11-s1.webm"] {
            #expect(try FilePrivacy.readAsNobody(folder + "/" + file) == nil, "\(file) through its 0700 folder")
        }
        #expect(try FilePrivacy.listAsNobody(folder) == nil)
        // The files are closed on their own too: opening the folders does not expose them.
        #expect(chmod(root + "/recordings", 0o755) == 0 && chmod(folder, 0o755) == 0)
        #expect(try FilePrivacy.listAsNobody(folder) != nil, "the folder is open now")
        for file in ["manifest.json", "u1-11-s1.webm"] {
            #expect(try FilePrivacy.readAsNobody(folder + "/" + file) == nil, "\(file) in an open folder")
        }
    }

    @Test(
        "An existing empty folder of this user that others could enter is narrowed to 0700; one owned by another user is refused"
    )
    func existingFolders() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-privacy")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let mine = root + "/mine"
        #expect(mkdir(mine, 0o755) == 0 && chmod(mine, 0o755) == 0)
        _ = try makeRecorder(directory: URL(fileURLWithPath: mine), start: start)
        #expect(FilePrivacy.mode(mine) == 0o700)
        #expect(FilePrivacy.nonPrivateEntries(under: mine) == [])

        let foreign = root + "/foreign"
        let nobody = try nobodyIDs()
        #expect(mkdir(foreign, 0o755) == 0 && chown(foreign, nobody.uid, nobody.gid) == 0)
        let error = try #require(throws: RecordingError.self) {
            _ = try makeRecorder(directory: URL(fileURLWithPath: foreign), start: start)
        }
        #expect(error.description == "\(foreign): refusing it: owned by uid \(nobody.uid), not by this user")
        #expect(try names(in: foreign) == [], "nothing written into a folder that is not ours")
    }
}

@Suite("New recording folders", .serialized)
struct NewRecordingFolderTests {
    let start: Int64 = 1_763_000_000_000_000

    @Test("Recording into a folder that holds a recording is refused before anything is written")
    func existingRecordingRefused() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-out")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/call"
        try finishedRecording(in: folder, start: start)
        let before = try names(in: folder)
        let manifest = try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json"))
        let error = try #require(throws: RecordingError.self) {
            _ = try makeRecorder(directory: URL(fileURLWithPath: folder), start: start + 60_000_000)
        }
        #expect(error.description.contains("already holds a recording"), "\(error)")
        #expect(error.description.hasSuffix("choose another --out"), "\(error)")
        #expect(try names(in: folder) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json")) == manifest)
    }

    @Test(
        "checkNewRecordingFolder refuses a folder with a manifest, a journal or a container, and accepts a missing or unrelated one",
        arguments: [
            ("manifest.json", false), ("u1-7-s1.video.journal", false), ("u1-7-s1.mkv", false),
            ("u1-7-s1.webm", false), ("manifest.json.unreadable-20260101T000000Z", false), ("notes.txt", true),
            ("", true),
        ]
    )
    func checkNewRecordingFolder(file: String, accepted: Bool) throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-out")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/out"
        #expect(mkdir(folder, 0o700) == 0)
        if !file.isEmpty { try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/" + file)) }
        if accepted {
            try CallRecorder.checkNewRecordingFolder(folder)
        } else {
            let error = try #require(throws: RecordingError.self) { try CallRecorder.checkNewRecordingFolder(folder) }
            #expect(
                error.description == "\(folder): the folder already holds a recording (\(file)); choose another --out"
            )
        }
        try CallRecorder.checkNewRecordingFolder(root + "/missing")
        try Data("x".utf8).write(to: URL(fileURLWithPath: root + "/plain"))
        #expect(throws: RecordingError.self) { try CallRecorder.checkNewRecordingFolder(root + "/plain") }
    }
}

@Suite("Repair privacy", .serialized)
struct RepairPrivacyTests {
    let start: Int64 = 1_763_000_000_000_000

    @Test("Repair of a recording made with open modes (an older recorder, a copy) leaves it owner-only, and says so")
    func repairNarrowsAnOpenRecording() throws {
        let root = try FilePrivacy.openTemporaryFolder("conclave-privacy")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/call"
        try crashRecording(in: folder, start: start)
        #expect(chmod(folder, 0o755) == 0)
        for name in try names(in: folder) { #expect(chmod(folder + "/" + name, 0o644) == 0) }
        let open = try names(in: folder).count
        let outcome = try FilePrivacy.withUmask(0o000) {
            try RecordingRepair.repair(directory: folder, recorderVersion: "test")
        }
        #expect(FilePrivacy.nonPrivateEntries(under: folder) == [])
        #expect(outcome.notices.contains("made \(open) file(s) owner-only (mode 600)"), "\(outcome.notices)")
    }
}
