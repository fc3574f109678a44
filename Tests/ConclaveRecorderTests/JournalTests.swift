import ConclaveCore
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import Testing

@Suite("Journals")
struct JournalTests {
    static let header = JournalHeader(
        participant: "u1",
        feedID: 7,
        display: "u1:Ann",
        segment: 1,
        file: "u1-7-s1",
        kind: .video,
        codec: .vp8,
        recordingStartMicroseconds: 1_700_000_000_000_000
    )

    func writeSample(to path: String, frames: Int) throws -> [JournalRecord] {
        let writer = try JournalWriter(path: path, header: Self.header)
        var records: [JournalRecord] = []
        var random = SplitMix64(seed: 7)
        for index in 0..<frames {
            let data = (0..<Int.random(in: 1...300, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            let frame = EncodedFrame(
                codec: .vp8,
                data: data,
                rtpTimestamp: UInt32(index * 3000),
                isKeyframe: index % 10 == 0
            )
            try writer.append(frame, arrivalMicroseconds: Int64(index) * 33_000)
            records.append(.frame(frame, arrivalMicroseconds: Int64(index) * 33_000))
            if index % 15 == 0 {
                try writer.appendSenderReport(
                    ntp: 0xE000_0000_0000_0000 + UInt64(index),
                    rtpTimestamp: UInt32(index * 3000),
                    arrivalMicroseconds: Int64(index) * 33_000 + 1
                )
                records.append(
                    .senderReport(
                        ntp: 0xE000_0000_0000_0000 + UInt64(index),
                        rtpTimestamp: UInt32(index * 3000),
                        arrivalMicroseconds: Int64(index) * 33_000 + 1
                    )
                )
            }
        }
        try writer.close()
        return records
    }

    @Test("Every record written comes back, in order, with the header")
    func roundTrip() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let written = try writeSample(to: path, frames: 50)
        let read = try JournalContents(path: path)
        #expect(read.header == Self.header)
        #expect(read.records == written)
        #expect(read.damagedTailOffset == nil)
    }

    @Test("A journal cut at any byte (a crash mid-write) yields every complete record before the cut")
    func cutAnywhere() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let written = try writeSample(to: path, frames: 12)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let full = try JournalContents(bytes: bytes, path: path)
        let headerEnd = bytes.count - recordSizes(written).reduce(0, +)
        var previousCount = 0
        for cut in headerEnd...bytes.count {
            let contents = try JournalContents(bytes: Array(bytes[..<cut]), path: path)
            #expect(contents.records == Array(full.records.prefix(contents.records.count)))
            #expect(contents.records.count >= previousCount)
            previousCount = contents.records.count
        }
        #expect(previousCount == written.count)
    }

    @Test("A flipped byte inside a record stops reading at that record (checksum), never a crash")
    func corruption() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let written = try writeSample(to: path, frames: 12)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let sizes = recordSizes(written)
        let headerEnd = bytes.count - sizes.reduce(0, +)
        // Corrupt a byte in the middle of the fifth record's payload.
        let fifth = headerEnd + sizes.prefix(4).reduce(0, +)
        bytes[fifth + sizes[4] / 2] ^= 0x40
        let contents = try JournalContents(bytes: bytes, path: path)
        #expect(contents.records == Array(written.prefix(4)))
        #expect(contents.damagedTailOffset == fifth)
    }

    @Test("Random and mutated journals give records or a typed error")
    func fuzz() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        _ = try writeSample(to: path, frames: 8)
        let valid = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var random = SplitMix64(seed: 99)
        var rejected = 0
        for iteration in 0..<3_000 {
            var bytes: [UInt8]
            if iteration % 3 == 0 {
                bytes = (0..<Int.random(in: 0...200, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                if iteration % 2 == 0 { bytes = Array("CNCLJRN1".utf8) + bytes }
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...6, using: &random) {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    bytes[index] = UInt8.random(in: 0...255, using: &random)
                }
                if iteration % 5 == 0 { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random))) }
            }
            do {
                _ = try JournalContents(bytes: bytes, path: "fuzz")
            } catch {
                #expect(error.path == "fuzz")
                rejected += 1
            }
        }
        #expect(rejected > 0)
    }

    func recordSizes(_ records: [JournalRecord]) -> [Int] {
        records.map { record in
            switch record {
            case .frame(let frame, _): 1 + 1 + 4 + 8 + 4 + frame.data.count + 4
            case .senderReport: 1 + 8 + 4 + 8 + 4
            }
        }
    }
}

/// A small deterministic generator for reproducible fuzzing.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
