import ConclaveAV
import ConclaveCompose
import Foundation
import Testing

@Suite struct AudioExportTests {
    @Test(arguments: ["mix.opus", "mix.ogg", "mix.flac", "mix.wav"])
    func theMixIsWrittenInTheFormatOfItsExtensionWithTheCallsDuration(name: String) throws {
        var recording = try AudioTestRecording(duration: 5)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0.5, length: 4, beeps: [0.5, 3.0])])
        try recording.add("bob", [.init(file: "b.webm", startOffset: 2, length: 3, beeps: [0.2], tone: 700)])
        let timeline = try recording.timeline()
        let path = recording.directory + "/out/" + name
        try FileManager.default.createDirectory(atPath: recording.directory + "/out", withIntermediateDirectories: true)
        var last = (0.0, 0.0)
        let problems = try AudioExport.writeMix(timeline, to: path, options: .init()) { last = ($0, $1) }
        #expect(problems.isEmpty)
        #expect(last == (5, 5))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: recording.directory + "/out") == [name])
        let demuxer = try MediaDemuxer(path: path)
        let codec = demuxer.streams.first?.codecName
        #expect(codec == (name.hasSuffix(".flac") ? "flac" : name.hasSuffix(".wav") ? "pcm_s16le" : "opus"))
        let decoded = try decodeFile(path)
        #expect(decoded.channels == 2)
        let seconds = Double(decoded.samples.count / 2) / 48_000
        // Lossless formats to the sample; Ogg Opus ends on its last packet's granule position.
        #expect(abs(seconds - 5) <= (name.hasSuffix(".wav") || name.hasSuffix(".flac") ? 0 : 0.02))
        AudioMixdownTests.expectOnsets(beepOnsets(decoded.samples, channels: 2), [1.0, 2.2, 3.5], tolerance: 0.003)
    }

    @Test func anUnknownExtensionIsRefusedWithOneLine() throws {
        var recording = try AudioTestRecording(duration: 1)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0, length: 1, beeps: [])])
        let timeline = try recording.timeline()
        let error = #expect(throws: ComposeError.self) {
            try AudioExport.writeMix(timeline, to: recording.directory + "/mix.mp3", options: .init()) { _, _ in }
        }
        #expect(error?.reason.contains(".opus") == true)
        #expect(!FileManager.default.fileExists(atPath: recording.directory + "/mix.mp3"))
    }
}
