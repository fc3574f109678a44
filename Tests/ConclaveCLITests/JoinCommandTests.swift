import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End-to-end: `conclave join` processes in one call see each other's decrypted media, and one
/// of them records the call (`--record`).
@Suite(.serialized) struct JoinCommandTests {
    @Test func threeParticipantsSeeEachOthersDecryptedFramesAndLeaveCleanly() async throws {
        let bed = try TestJanus.shared()
        let call = try CallFixture(bed: bed, names: ["alice", "bob", "carol"])
        let alice = try call.join("alice", ["--duration", "25"])
        let bob = try call.join("bob", ["--audio", "tone", "--video", "pattern", "--duration", "25"])
        let recording = call.directory.appendingPathComponent("carol-recording").path
        let carol = try call.join("carol", ["--record", recording, "--composite", "call.mkv"])
        let everyone = [alice, bob, carol]
        let ids = ["alice", "bob", "carol"]

        // Each sees the others' video and audio: frames of both kinds, not only a count that audio
        // alone reaches before the first keyframe comes.
        let allSeeAll = await waitUntil(timeout: .seconds(20)) {
            everyone.enumerated().allSatisfy { index, process in
                ids.enumerated().allSatisfy { other, id in
                    guard other != index else { return true }
                    let participant = process.participant(id)
                    return process.framesDecrypted(from: id) > 30 && participant?["videoFrames"] as? Int ?? 0 > 10
                        && participant?["audioFrames"] as? Int ?? 0 > 10
                }
            }
        }
        for (index, process) in everyone.enumerated() {
            for (other, id) in ids.enumerated() where other != index {
                #expect(
                    process.framesDecrypted(from: id) > 30,
                    "\(process.name) decrypted from \(id): \(process.errorOutput)"
                )
                #expect(process.undecryptable(from: id) == 0, "\(process.name): undecryptable frames from \(id)")
                let participant = process.participant(id)
                #expect(participant?["videoCodec"] as? String == "h264")
                #expect(participant?["audioCodec"] as? String == "opus")
                print("join time: \(process.name) first frame from \(id) at \(participant?["firstFrameMs"] ?? "-") ms")
            }
        }
        #expect(allSeeAll != nil)

        // SIGTERM: Carol leaves cleanly (exit 0), and the others see her feed go.
        carol.signal(SIGTERM)
        #expect(await carol.waitForExit() == 0, "SIGTERM ends with exit 0: \(carol.errorOutput)")
        #expect(carol.lastStatus?["state"] as? String == "left")
        #expect(carol.lastStatus?["compositeVideoFramesDropped"] as? Int == 0, "\(carol.lastStatus ?? [:])")
        let noticed = await waitUntil(timeout: .seconds(10)) {
            alice.participant("carol")?["present"] as? Bool == false
                && bob.participant("carol")?["present"] as? Bool == false
        }
        #expect(noticed != nil, "Carol's unpublish and leave reached Janus")

        // Carol's recording: finished, Alice and Bob recorded, each file H264 + Opus that decodes.
        let inspect = try conclave(["recordings", "inspect", recording])
        #expect(inspect.succeeded, "recordings inspect: \(inspect.errorOutput)")
        #expect(inspect.output.contains("status finished"), "\(inspect.output)")
        for id in ["alice", "bob"] {
            #expect(inspect.output.contains("participant \(id) \"\(id):\(id.capitalized)\""), "\(inspect.output)")
        }
        // Every file the manifest names decodes, with as many video frames as it says were written.
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recording + "/manifest.json")))
                as? [String: Any]
        )
        let segments = (manifest["participants"] as? [[String: Any]] ?? []).flatMap {
            $0["segments"] as? [[String: Any]] ?? []
        }
        #expect(segments.count == 2, "one segment per recorded participant")
        for segment in segments {
            let file = try #require(segment["file"] as? String)
            let path = recording + "/" + file
            let tracks = segment["tracks"] as? [[String: Any]] ?? []
            let video = try #require(tracks.first { $0["kind"] as? String == "video" })
            let written = try #require(video["framesWritten"] as? Int)
            #expect(written > 0, "\(file) holds video")
            #expect(try FFmpeg.probeStreams(path).sorted() == ["h264", "opus"], "\(file)")
            #expect(try FFmpeg.decodeErrors(path) == "", "\(file)")
            #expect(try FFmpeg.frameCount(path) == written, "\(file)")
        }

        // The live composite beside the recording: H264 + Opus that decodes, one picture per frame
        // time of Carol's stay (as the status says).
        let composite = recording + "/call.mkv"
        #expect(try FFmpeg.probeStreams(composite).sorted() == ["h264", "opus"])
        #expect(try FFmpeg.decodeErrors(composite) == "")
        let compositeFrames = try FFmpeg.frameCount(composite)
        #expect(compositeFrames == carol.lastStatus?["compositeFrames"] as? Int, "\(compositeFrames) frames")
        #expect(compositeFrames >= 30, "\(compositeFrames) frames: Carol stays more than a second")

        // --duration: Alice and Bob end by themselves with exit 0.
        #expect(await alice.waitForExit(timeout: .seconds(40)) == 0, "\(alice.errorOutput)")
        #expect(await bob.waitForExit(timeout: .seconds(40)) == 0, "\(bob.errorOutput)")
        #expect(alice.lastStatus?["state"] as? String == "left")
        // Bob's copy of the key and the rejoin details are stored.
        let stored = try #require(call.storedCall("bob"))
        let file = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
        let record = try #require(file["record"] as? [String: Any])
        #expect(record["room"] as? String == "\(call.room)")
        #expect(record["display"] as? String == "bob:Bob")
        #expect(record["janusUrl"] as? String == bed.webSocketURL)
    }
}
