import ConclaveCompose
import ConclaveRecorder
import Foundation
import Testing

@Suite struct CompositionTimelineTests {
    @Test func aManifestOfAnotherFormatVersionIsRefusedWithOneLine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("compose-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        let manifest = """
            {"formatVersion": 2, "callID": "7", "recorderVersion": "test", "cryptoFormat": "none",
             "keyEpochs": [], "startTime": "2026-11-24T07:00:00.000Z", "status": "finished",
             "participants": [], "notRecorded": []}
            """
        let path = directory.appendingPathComponent(RecordingManifest.fileName).path
        #expect(
            FileManager.default.createFile(
                atPath: path,
                contents: Data(manifest.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        )
        let error = #expect(throws: ComposeError.self) { try CompositionTimeline.load(directory: directory.path) }
        #expect(error?.reason.contains("format version 2") == true)
        #expect(error?.description.contains("\n") == false)
    }

    @Test func theFilterLibraryIsLinked() {
        #expect(FilterLibrary.version.hasPrefix("8."))
    }
}
