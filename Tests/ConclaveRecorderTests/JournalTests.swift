import ConclaveCore
import ConclaveRTP
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
            // Some frames follow lost ones: their records carry the count.
            let lost = index % 7 == 3 ? index % 5 + 1 : 0
            try writer.append(frame, arrivalMicroseconds: Int64(index) * 33_000, framesLostBefore: lost)
            records.append(.frame(frame, arrivalMicroseconds: Int64(index) * 33_000, framesLostBefore: lost))
            if index % 15 == 0 {
                let report = SenderReportTime(
                    ntp: NTPTimestamp(rawValue: 0xE000_0000_0000_0000 + UInt64(index)),
                    rtpTimestamp: UInt32(index * 3000)
                )
                try writer.appendSenderReport(report, arrivalMicroseconds: Int64(index) * 33_000 + 1)
                records.append(.senderReport(report, arrivalMicroseconds: Int64(index) * 33_000 + 1))
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

    @Test("Records reach the file at commit (one write per batch), and a sync a second later commits too")
    func commitBatches() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let writer = try JournalWriter(path: path, header: Self.header)
        let headerSize = writer.size
        func frame(_ index: Int) -> EncodedFrame {
            EncodedFrame(
                codec: .vp8,
                data: [UInt8](repeating: UInt8(index), count: 100),
                rtpTimestamp: UInt32(index),
                isKeyframe: index == 0
            )
        }
        // The first append syncs (nothing was synced by a frame yet); the next ones wait for a commit.
        try writer.append(frame(0), arrivalMicroseconds: 0)
        try writer.append(frame(1), arrivalMicroseconds: 10_000)
        try writer.append(frame(2), arrivalMicroseconds: 20_000)
        #expect(try JournalContents(path: path).records.count == 1)
        try writer.commit()
        #expect(writer.size > headerSize)
        #expect(try JournalContents(path: path).records.count == 3)
        try writer.append(frame(3), arrivalMicroseconds: 500_000)
        #expect(try JournalContents(path: path).records.count == 3)
        // A second after the last sync, the append itself commits and syncs.
        try writer.append(frame(4), arrivalMicroseconds: 1_000_000)
        #expect(try JournalContents(path: path).records.count == 5)
        try writer.close()
    }

    @Test("Record checksums are the standard CRC-32, so journals of every version read alike")
    func standardChecksum() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        _ = try writeSample(to: path, frames: 1)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // Magic (8), header length (4), header; then the frame record: marker (4), type, flags,
        // RTP timestamp (4), arrival (8), length (4), data, CRC (4) of type to data.
        try #require(Array(bytes.prefix(8)) == Array("CNCLJRN2".utf8))
        let headerLength = bytes[8..<12].reduce(0) { $0 << 8 | Int($1) }
        #expect(Array(bytes[(12 + headerLength)..<(16 + headerLength)]) == [0xC7, 0x1A, 0x4A, 0x9E])
        let start = 16 + headerLength
        let length = bytes[(start + 14)..<(start + 18)].reduce(0) { $0 << 8 | Int($1) }
        let end = start + 18 + length
        try #require(end + 4 <= bytes.count, "the frame record lies inside the file")
        let stored = bytes[end..<(end + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        // Bit by bit, as the standard defines it (reflected, polynomial 0xEDB88320).
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes[start..<end] {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        #expect(stored == crc ^ 0xFFFF_FFFF)
        #expect(length > 8, "the sample frame exercises the eight-byte steps")
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

    @Test("A flipped byte inside a record costs only that record: the reader resynchronises at the next marker")
    func corruptionResynchronises() throws {
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
        var expected = written
        expected.remove(at: 4)
        #expect(contents.records == expected)
        #expect(
            contents.damage == [
                JournalDamage(
                    byteOffset: fifth,
                    length: sizes[4],
                    records: 1,
                    reason: "checksum mismatch",
                    isCutTail: false
                )
            ]
        )
        #expect(contents.damagedTailOffset == nil, "the damage is in the middle, not at the end")
    }

    @Test("Damage anywhere (a byte flipped in any record, or a run of bytes zeroed) loses only the records it touches")
    func damageAnywhere() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let written = try writeSample(to: path, frames: 30)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let sizes = recordSizes(written)
        let headerEnd = bytes.count - sizes.reduce(0, +)
        var starts: [Int] = []
        var offset = headerEnd
        for size in sizes {
            starts.append(offset)
            offset += size
        }
        var random = SplitMix64(seed: 5)
        for _ in 0..<200 {
            var damaged = bytes
            let first = Int.random(in: headerEnd..<bytes.count, using: &random)
            let length = Int.random(in: 1...40, using: &random)
            let end = min(first + length, bytes.count)
            for index in first..<end { damaged[index] = length % 2 == 0 ? 0 : damaged[index] ^ 0x5A }
            // The records whose bytes were touched.
            let touched = Set(sizes.indices.filter { starts[$0] < end && starts[$0] + sizes[$0] > first })
            let contents = try JournalContents(bytes: damaged, path: path)
            let survivors = written.indices.filter { !touched.contains($0) }.map { written[$0] }
            #expect(contents.records == survivors, "bytes \(first)..<\(end) touched records \(touched.sorted())")
            #expect(contents.damage.reduce(0) { $0 + $1.records } >= 1)
            #expect(contents.damage.allSatisfy { !$0.isCutTail })
        }
    }

    @Test("Version 1 journals (no record markers) are still read, up to their first damaged record")
    func versionOneJournals() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.journal").path
        let written = try writeSample(to: path, frames: 12)
        var bytes = versionOne(of: [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), records: written)
        let whole = try JournalContents(bytes: bytes, path: path)
        #expect(whole.version == 1)
        #expect(whole.header == Self.header)
        #expect(whole.records == written)
        #expect(whole.damage.isEmpty)
        let sizes = recordSizes(written).map { $0 - 4 }
        let headerEnd = bytes.count - sizes.reduce(0, +)
        let fifth = headerEnd + sizes.prefix(4).reduce(0, +)
        bytes[fifth + sizes[4] / 2] ^= 0x40
        let contents = try JournalContents(bytes: bytes, path: path)
        #expect(contents.records == Array(written.prefix(4)))
        #expect(contents.damagedTailOffset == fifth)
        #expect(contents.damage.count == 1 && contents.damage.first?.isCutTail == false)
    }

    /// The same journal in the first format: its magic, and no marker before the records.
    func versionOne(of bytes: [UInt8], records: [JournalRecord]) -> [UInt8] {
        let sizes = recordSizes(records)
        var offset = bytes.count - sizes.reduce(0, +)
        var result = Array("CNCLJRN1".utf8) + bytes[8..<offset]
        for size in sizes {
            result += bytes[(offset + 4)..<(offset + size)]
            offset += size
        }
        return result
    }

    @Test("A journal that is a FIFO or a folder is refused at once with a clear reason, never read (which would block)")
    func refusesFIFOAndFolder() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("f.journal").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unblockFIFO(fifo) }
        let folder = directory.appendingPathComponent("d.journal").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for (path, type) in [(fifo, "FIFO"), (folder, "folder")] {
            let result = try #require(
                returnsPromptly(within: .seconds(10)) { () -> String in
                    do {
                        _ = try JournalReader(path: path)
                        return "read"
                    } catch {
                        return "\(error)"
                    }
                },
                "reading \(path) blocked"
            )
            #expect(result == "\(path): it is a \(type), not a regular file")
        }
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
                if iteration % 2 == 0 { bytes = Array((iteration % 4 == 0 ? "CNCLJRN1" : "CNCLJRN2").utf8) + bytes }
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

    /// Each record's size in a version 2 journal, its marker included.
    func recordSizes(_ records: [JournalRecord]) -> [Int] {
        records.map { record in
            switch record {
            case .frame(let frame, _, let lost): 4 + 1 + 1 + 4 + 8 + (lost > 0 ? 4 : 0) + 4 + frame.data.count + 4
            case .senderReport: 4 + 1 + 8 + 4 + 8 + 4
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
