public import ConclaveCore
import ConclaveFiles
import ConclaveRTP
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a journal file describes: one track of one segment of one participant.
///
/// The header is JSON so that `recordings repair` can rebuild a container from the journal alone,
/// without the manifest (which a crash may have left stale).
public struct JournalHeader: Codable, Sendable, Hashable {
    /// The participant key (the display name's user id, else `feed-<id>`).
    public var participant: String
    /// The Janus feed id the segment was received from.
    public var feedID: UInt64
    /// The display name, if the publisher set one.
    public var display: String?
    /// The segment's number within the participant (1-based).
    public var segment: Int
    /// The container file this journal belongs to, without extension (a name in the same
    /// folder: `recordings repair` refuses anything else, see ``fileNameProblem``).
    public var file: String
    /// Audio or video.
    public var kind: MediaKind
    /// The codec of every frame in the journal.
    public var codec: MediaCodec
    /// The call timeline's origin: the recording's start, in microseconds since the Unix epoch.
    public var recordingStartMicroseconds: Int64

    public init(
        participant: String,
        feedID: UInt64,
        display: String?,
        segment: Int,
        file: String,
        kind: MediaKind,
        codec: MediaCodec,
        recordingStartMicroseconds: Int64
    ) {
        self.participant = participant
        self.feedID = feedID
        self.display = display
        self.segment = segment
        self.file = file
        self.kind = kind
        self.codec = codec
        self.recordingStartMicroseconds = recordingStartMicroseconds
    }

    /// Why ``file`` is not a plain name in the journal's own folder, or nil when it is.
    public var fileNameProblem: String? { Self.fileNameProblem(file) }

    /// Why `name` is not a plain name of a file in the journal's folder, or nil when it is.
    ///
    /// The header comes from a file that anyone who could write to the folder (or a damaged disk)
    /// may have changed, and `repair` writes `<file>.webm` and a temporary `.rebuild-<file>`: a
    /// separator or `..` would take those writes out of the folder, a leading dot would hide them
    /// or collide with the temporary files, and NUL would cut the name short in a system call.
    /// Dots inside a name are fine (``ParticipantIdentity/fileSafeKey`` keeps them, so a user id
    /// `a..b` makes `a..b-7-s1`): without a separator, `..` leaves the folder only as the whole name.
    public static func fileNameProblem(_ name: String) -> String? {
        if name.isEmpty { return "it is empty" }
        if name.contains("/") { return "it contains a path separator" }
        if name == ".." || name == "." { return "it is \"\(name)\"" }
        if name.unicodeScalars.contains("\u{0}") { return "it contains a NUL character" }
        if name.hasPrefix(".") { return "it starts with a dot" }
        if name.utf8.count > 200 { return "it is longer than 200 bytes" }
        return nil
    }
}

/// One entry of a journal.
public enum JournalRecord: Sendable, Hashable {
    /// A decrypted frame, when it arrived (microseconds since the Unix epoch), and how many
    /// frames of the stream were lost just before it.
    case frame(EncodedFrame, arrivalMicroseconds: Int64, framesLostBefore: Int = 0)
    /// A sender report of the track's stream: the sender's NTP time of an RTP timestamp.
    case senderReport(SenderReportTime, arrivalMicroseconds: Int64)

    /// When the record's event arrived.
    public var arrivalMicroseconds: Int64 {
        switch self {
        case .frame(_, let arrival, _), .senderReport(_, let arrival): arrival
        }
    }
}

/// Why a journal cannot be written or read, naming the file and, for reads, the byte offset.
public struct JournalError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The journal file.
    public var path: String
    /// What went wrong.
    public var reason: String
    /// Where in the file, for read errors.
    public var byteOffset: Int?

    public init(path: String, reason: String, byteOffset: Int? = nil) {
        self.path = path
        self.reason = reason
        self.byteOffset = byteOffset
    }

    public var description: String {
        "\(path): \(reason)" + (byteOffset.map { " at byte \($0)" } ?? "")
    }
}

/// The on-disk layout of a journal.
///
/// `CNCLJRN2`, a big-endian UInt32 header length and the JSON header, then records: the
/// 4-byte ``recordMarker``, a type byte (1 frame, 2 sender report), the fields, and a CRC-32 of
/// type and fields (not the marker).
/// Frame: flags (bit 0 keyframe, bit 1 loss count present), RTP timestamp u32, arrival i64,
/// frames lost just before it u32 (only with bit 1), length u32, bytes.
/// Sender report: NTP u64, RTP timestamp u32, arrival i64.
/// Records are only ever appended, so a file cut at any byte holds every complete record before
/// the cut. A corrupt record in the middle (a bad sector, a flipped bit) costs only itself: the
/// reader looks for the next marker whose record's checksum holds and goes on from there.
///
/// `CNCLJRN1` journals (written before the marker existed) have the same records without it;
/// they are still read, up to their first incomplete or corrupt record.
enum JournalFormat {
    static let magic = Array("CNCLJRN2".utf8)
    /// The first version's magic: no record markers, so reading stops at the first bad record.
    static let magicVersion1 = Array("CNCLJRN1".utf8)
    /// Written before every record of a version 2 journal so that a reader can find the next
    /// record after a corrupt one. Any fixed value would do (the record's CRC decides whether a
    /// match is a record); this one is not ASCII and not a common video or Opus byte pattern.
    static let recordMarker: [UInt8] = [0xC7, 0x1A, 0x4A, 0x9E]
    static let frameRecord: UInt8 = 1
    static let senderReportRecord: UInt8 = 2
    static let keyframeFlag: UInt8 = 1
    /// Set when a 32-bit count of frames lost before this one follows the arrival time.
    static let lossFlag: UInt8 = 2
    /// A frame larger than this is treated as corruption (a 4K keyframe is a few hundred KiB).
    static let maximumFrameSize = 16 << 20
    static let maximumHeaderSize = 64 << 10
    static let fileExtension = "journal"
}

/// Appends records to a journal file and makes them durable at least every `syncInterval`.
///
/// Records are collected in memory and handed to the kernel with one `write` by ``commit()``,
/// which the recorder calls after each batch of events (every 60 to 100 ms), so a recording of
/// many tracks costs a few writes a second per track rather than one per frame. `fsync` runs when
/// a record or a timer call comes a second or more after the previous sync, and on `close()`. A
/// process killed at any moment therefore loses only the records of the batch being taken in, and
/// a machine crash at most the last second.
public final class JournalWriter {
    /// The journal's path.
    public let path: String
    /// The header written at the start.
    public let header: JournalHeader
    /// Bytes handed to the kernel so far, header included.
    public private(set) var size = 0
    private var descriptor: Int32
    private let syncInterval: Int64
    private var lastSync: Int64?
    /// Records not yet written; reused, so appending allocates only when a batch outgrows it.
    private var pending: [UInt8] = []
    /// A batch larger than this is written at once (a burst of keyframes, a long batch).
    private static let pendingLimit = 1 << 20

    /// Creates (or truncates) the journal and writes its header.
    public init(path: String, header: JournalHeader, syncIntervalMicroseconds: Int64 = 1_000_000) throws(JournalError) {
        self.path = path
        self.header = header
        self.syncInterval = syncIntervalMicroseconds
        // Decrypted frames: owner-only whatever the umask.
        do {
            descriptor = try PrivateFiles.openPrivateFile(path)
        } catch {
            throw JournalError(path: path, reason: error.reasonWithoutPath)
        }
        let json: Data
        do {
            json = try JSONEncoder().encode(header)
        } catch {
            throw JournalError(path: path, reason: "cannot encode the header: \(error)")
        }
        var bytes = JournalFormat.magic
        bytes.appendBigEndian(UInt32(json.count))
        bytes += json
        try writeAll(bytes)
        try sync()
        pending.reserveCapacity(64 << 10)
    }

    deinit {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }

    /// Appends a frame (in memory until the next ``commit()`` or sync).
    public func append(_ frame: EncodedFrame, arrivalMicroseconds: Int64, framesLostBefore: Int = 0)
        throws(JournalError)
    {
        guard descriptor >= 0 else { throw JournalError(path: path, reason: "the journal is closed") }
        pending.append(contentsOf: JournalFormat.recordMarker)
        let start = pending.count
        let lost = UInt32(clamping: max(framesLostBefore, 0))
        pending.append(JournalFormat.frameRecord)
        pending.append((frame.isKeyframe ? JournalFormat.keyframeFlag : 0) | (lost > 0 ? JournalFormat.lossFlag : 0))
        pending.appendBigEndian(frame.rtpTimestamp)
        pending.appendBigEndian(UInt64(bitPattern: arrivalMicroseconds))
        if lost > 0 { pending.appendBigEndian(lost) }
        pending.appendBigEndian(UInt32(frame.data.count))
        pending.append(contentsOf: frame.data)
        pending.appendBigEndian(CRC32.checksum(pending, from: start))
        if pending.count >= Self.pendingLimit { try commit() }
        try syncIfDue(now: arrivalMicroseconds)
    }

    /// Appends a sender report (in memory until the next ``commit()`` or sync).
    public func appendSenderReport(_ report: SenderReportTime, arrivalMicroseconds: Int64) throws(JournalError) {
        guard descriptor >= 0 else { throw JournalError(path: path, reason: "the journal is closed") }
        pending.append(contentsOf: JournalFormat.recordMarker)
        let start = pending.count
        pending.append(JournalFormat.senderReportRecord)
        pending.appendBigEndian(report.ntp.rawValue)
        pending.appendBigEndian(report.rtpTimestamp)
        pending.appendBigEndian(UInt64(bitPattern: arrivalMicroseconds))
        pending.appendBigEndian(CRC32.checksum(pending, from: start))
        try syncIfDue(now: arrivalMicroseconds)
    }

    /// Hands the records appended since the last call to the kernel with one `write`; from then
    /// on they survive the process being killed.
    public func commit() throws(JournalError) {
        guard !pending.isEmpty else { return }
        defer { pending.removeAll(keepingCapacity: true) }
        try writeAll(pending)
    }

    /// Commits and syncs if the last sync is `syncInterval` or more before `now` (call it from a
    /// timer too, so a track that goes quiet still gets its last records synced).
    public func syncIfDue(now: Int64) throws(JournalError) {
        if let lastSync, now.clampedSubtracting(lastSync) < syncInterval { return }
        try sync()
        lastSync = now
    }

    /// Makes everything appended durable.
    public func sync() throws(JournalError) {
        guard descriptor >= 0 else { return }
        try commit()
        if fsync(descriptor) != 0 {
            throw JournalError(path: path, reason: "cannot sync: \(String(cString: strerror(errno)))")
        }
    }

    /// Syncs and closes the journal. Calling it twice is harmless.
    public func close() throws(JournalError) {
        guard descriptor >= 0 else { return }
        defer {
            _ = Glibc.close(descriptor)
            descriptor = -1
            pending = []
        }
        try sync()
    }

    private func writeAll(_ bytes: [UInt8]) throws(JournalError) {
        guard descriptor >= 0 else { throw JournalError(path: path, reason: "the journal is closed") }
        do {
            try PrivateFiles.writeAll(bytes, to: descriptor, path: path)
        } catch {
            // A partial record may be on disk; the reader skips it, so the other records stay usable.
            throw JournalError(
                path: path,
                reason: "cannot write: \(String(cString: strerror(error.errno ?? EIO)))",
                byteOffset: size
            )
        }
        size += bytes.count
    }
}

/// A stretch of a journal that held no readable record.
public struct JournalDamage: Sendable, Hashable {
    /// Where it starts (a record's marker, or its type byte in a version 1 journal).
    public var byteOffset: Int
    /// How long it is: up to the next readable record, or to the end of the file.
    public var length: Int
    /// How many records it held, as far as their markers tell (at least one).
    public var records: Int
    /// Why its first record was not readable.
    public var reason: String
    /// The file ends inside the stretch's only record: a write cut short by a crash. Nothing in
    /// it was ever a complete record, so it holds nothing a later reader could use.
    public var isCutTail: Bool

    public init(byteOffset: Int, length: Int, records: Int, reason: String, isCutTail: Bool) {
        self.byteOffset = byteOffset
        self.length = length
        self.records = records
        self.reason = reason
        self.isCutTail = isCutTail
    }
}

/// Reads a journal record by record, skipping damaged records.
///
/// The file is memory-mapped and records are decoded one at a time, so rebuilding an hour-long
/// recording does not hold its frames in memory (which is why it does not use
/// `PrivateFiles.readRegularFile`, which reads the whole file). Like that function it opens the
/// file without blocking and refuses anything but a regular file, so a FIFO or a folder named
/// `*.journal` gives an error instead of hanging `repair`.
///
/// A record that does not check out (cut, unknown type, checksum mismatch) is skipped: in a
/// version 2 journal the reader goes on at the next record marker whose record checks out, in a
/// version 1 journal it stops. ``damage`` lists what was skipped.
public struct JournalReader {
    /// The journal's path.
    public let path: String
    /// The header.
    public let header: JournalHeader
    /// The format version (1: no record markers, 2: markers).
    public let version: Int
    /// The stretches skipped so far, in file order.
    public private(set) var damage: [JournalDamage] = []
    private var reader: ByteReader
    private var finished = false

    /// Where the readable part ends, when the file ends in a stretch that held no readable record.
    public var damagedTailOffset: Int? {
        guard let last = damage.last, last.byteOffset + last.length == reader.data.count else { return nil }
        return last.byteOffset
    }

    /// Why the tail was not readable.
    public var damagedTailReason: String? { damagedTailOffset == nil ? nil : damage.last?.reason }

    /// Whether the journal holds records that were not read: anything skipped other than a
    /// record cut short at the end by a crash. Such a journal is never deleted by `repair`.
    public var holdsUnreadRecords: Bool { damage.contains { !$0.isCutTail } }

    /// Opens the journal at `path` and reads its header.
    public init(path: String) throws(JournalError) {
        try self.init(data: try Self.map(path), path: path)
    }

    /// Reads journal bytes that came from `path`.
    public init(bytes: [UInt8], path: String) throws(JournalError) {
        try self.init(data: Data(bytes), path: path)
    }

    private init(data: Data, path: String) throws(JournalError) {
        self.path = path
        var reader = ByteReader(data: data)
        let magic = reader.read(count: JournalFormat.magic.count).map(Array.init) ?? []
        switch magic {
        case JournalFormat.magic: version = 2
        case JournalFormat.magicVersion1: version = 1
        default: throw JournalError(path: path, reason: "not a Conclave journal (bad magic)", byteOffset: 0)
        }
        guard let headerLength = reader.readUInt32().map(Int.init), headerLength <= JournalFormat.maximumHeaderSize,
            let headerBytes = reader.read(count: headerLength)
        else {
            throw JournalError(path: path, reason: "the header is cut or too long", byteOffset: 8)
        }
        do {
            header = try JSONDecoder().decode(JournalHeader.self, from: headerBytes)
        } catch {
            throw JournalError(path: path, reason: "the header is not valid JSON of a journal header", byteOffset: 12)
        }
        self.reader = reader
    }

    /// Maps the regular file at `path` read-only, refusing (without blocking) anything else.
    private static func map(_ path: String) throws(JournalError) -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw JournalError(path: path, reason: "cannot open it: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw JournalError(path: path, reason: "cannot stat it: \(String(cString: strerror(errno)))")
        }
        do {
            try PrivateFiles.checkRegular(info, path: path, privacy: .any)
        } catch {
            throw JournalError(path: path, reason: error.reasonWithoutPath)
        }
        let size = Int(info.st_size)
        guard size > 0 else { return Data() }
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0),
            base != UnsafeMutableRawPointer(bitPattern: -1)
        else {
            throw JournalError(path: path, reason: "cannot map it: \(String(cString: strerror(errno)))")
        }
        return Data(bytesNoCopy: base, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
    }

    /// The next readable record, or nil at the end of the file (or, in a version 1 journal, at
    /// its first damaged record).
    public mutating func next() -> JournalRecord? {
        while !finished, !reader.isAtEnd {
            let start = reader.offset
            let failure: RecordFailure
            switch readRecord(at: start) {
            case .success(let record, let end):
                reader.seek(to: end)
                return record
            case .failure(let reason):
                failure = reason
            }
            guard version >= 2, let resume = nextReadableRecord(after: start) else {
                let records = version >= 2 ? max(markers(in: start..<reader.data.count), 1) : 1
                damage.append(
                    JournalDamage(
                        byteOffset: start,
                        length: reader.data.count - start,
                        records: records,
                        reason: failure.reason,
                        isCutTail: failure.isCut && records == 1
                    )
                )
                finished = true
                return nil
            }
            damage.append(
                JournalDamage(
                    byteOffset: start,
                    length: resume - start,
                    records: max(markers(in: start..<resume), 1),
                    reason: failure.reason,
                    isCutTail: false
                )
            )
            reader.seek(to: resume)
        }
        return nil
    }

    /// The offset of the first marker after `start` whose record checks out.
    private func nextReadableRecord(after start: Int) -> Int? {
        var candidate = start + 1
        while let found = nextMarker(from: candidate) {
            if case .success = readRecord(at: found) { return found }
            candidate = found + 1
        }
        return nil
    }

    /// The offset of the first record marker at or after `offset`.
    private func nextMarker(from offset: Int) -> Int? {
        let marker = JournalFormat.recordMarker
        let data = reader.data
        guard offset >= 0, data.count - offset >= marker.count else { return nil }
        return data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Int? in
            var index = offset
            let last = buffer.count - marker.count
            while index <= last {
                if buffer[index] == marker[0], buffer[index + 1] == marker[1], buffer[index + 2] == marker[2],
                    buffer[index + 3] == marker[3]
                {
                    return index
                }
                index += 1
            }
            return nil
        }
    }

    /// How many record markers start inside `range`.
    private func markers(in range: Range<Int>) -> Int {
        var count = 0
        var offset = range.lowerBound
        while let found = nextMarker(from: offset), found < range.upperBound {
            count += 1
            offset = found + 1
        }
        return count
    }

    private struct RecordFailure {
        var reason: String
        /// The file ended inside the record (as opposed to bytes that are there but wrong).
        var isCut: Bool
    }

    private enum RecordResult {
        case success(JournalRecord, end: Int)
        case failure(RecordFailure)
    }

    /// Decodes the record at `offset` (its marker first, in a version 2 journal).
    private func readRecord(at offset: Int) -> RecordResult {
        var reader = reader
        reader.seek(to: offset)
        if version >= 2 {
            guard let marker = reader.read(count: JournalFormat.recordMarker.count) else {
                return .failure(RecordFailure(reason: "cut record marker", isCut: true))
            }
            guard Array(marker) == JournalFormat.recordMarker else {
                return .failure(RecordFailure(reason: "no record marker", isCut: false))
            }
        }
        let start = reader.offset
        func cut(_ reason: String) -> RecordResult { .failure(RecordFailure(reason: reason, isCut: true)) }
        func bad(_ reason: String) -> RecordResult { .failure(RecordFailure(reason: reason, isCut: false)) }
        guard let type = reader.readUInt8() else { return cut("cut record") }
        let record: JournalRecord
        switch type {
        case JournalFormat.frameRecord:
            guard let flags = reader.readUInt8(), let rtp = reader.readUInt32(), let arrival = reader.readUInt64()
            else { return cut("cut frame record") }
            var lost: UInt32 = 0
            if flags & JournalFormat.lossFlag != 0 {
                guard let count = reader.readUInt32() else { return cut("cut frame record") }
                lost = count
            }
            guard let length = reader.readUInt32().map(Int.init) else { return cut("cut frame record") }
            guard length <= JournalFormat.maximumFrameSize else { return bad("frame length \(length) too large") }
            guard let data = reader.read(count: length) else { return cut("cut frame data") }
            record = .frame(
                EncodedFrame(
                    codec: header.codec,
                    data: [UInt8](data),
                    rtpTimestamp: rtp,
                    isKeyframe: flags & JournalFormat.keyframeFlag != 0
                ),
                arrivalMicroseconds: Int64(bitPattern: arrival),
                framesLostBefore: Int(lost)
            )
        case JournalFormat.senderReportRecord:
            guard let ntp = reader.readUInt64(), let rtp = reader.readUInt32(), let arrival = reader.readUInt64() else {
                return cut("cut sender report record")
            }
            record = .senderReport(
                SenderReportTime(ntp: NTPTimestamp(rawValue: ntp), rtpTimestamp: rtp),
                arrivalMicroseconds: Int64(bitPattern: arrival)
            )
        default:
            return bad("unknown record type \(type)")
        }
        let checked = reader.slice(from: start)
        guard let stored = reader.readUInt32() else { return cut("cut checksum") }
        guard stored == CRC32.checksum(checked) else { return bad("checksum mismatch") }
        return .success(record, end: reader.offset)
    }
}

/// A whole journal in memory: the header and every complete record (tests and small tools).
public struct JournalContents: Sendable {
    public var header: JournalHeader
    public var version: Int
    public var records: [JournalRecord]
    /// The stretches that held no readable record (see ``JournalReader/damage``).
    public var damage: [JournalDamage]
    public var damagedTailOffset: Int?
    public var damagedTailReason: String?

    public init(bytes: [UInt8], path: String) throws(JournalError) {
        self.init(reading: try JournalReader(bytes: bytes, path: path))
    }

    public init(path: String) throws(JournalError) {
        self.init(reading: try JournalReader(path: path))
    }

    private init(reading reader: JournalReader) {
        var reader = reader
        header = reader.header
        version = reader.version
        records = []
        while let record = reader.next() { records.append(record) }
        damage = reader.damage
        damagedTailOffset = reader.damagedTailOffset
        damagedTailReason = reader.damagedTailReason
    }
}

/// A bounds-checked cursor over bytes.
struct ByteReader {
    let data: Data
    private(set) var offset = 0

    init(data: Data) { self.data = data }

    var isAtEnd: Bool { offset >= data.count }

    mutating func seek(to offset: Int) { self.offset = min(max(offset, 0), data.count) }

    mutating func read(count: Int) -> Data? {
        guard count >= 0, data.count - offset >= count else { return nil }
        let base = data.startIndex + offset
        defer { offset += count }
        return data[base..<base + count]
    }

    /// The bytes from `start` to the current offset.
    func slice(from start: Int) -> Data { data[(data.startIndex + start)..<(data.startIndex + offset)] }

    mutating func readUInt8() -> UInt8? { read(count: 1)?.first }

    mutating func readUInt32() -> UInt32? {
        guard let slice = read(count: 4) else { return nil }
        return slice.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func readUInt64() -> UInt64? {
        guard let slice = read(count: 8) else { return nil }
        return slice.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

extension [UInt8] {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var big = value.bigEndian
        Swift.withUnsafeBytes(of: &big) { append(contentsOf: $0) }
    }
}

/// CRC-32 (IEEE 802.3, reflected), to tell a torn or corrupt record from a complete one.
///
/// Eight bytes per step with eight tables (slicing-by-8): every frame the recorder keeps goes
/// through it, so it is worth being several times faster than the one-byte loop.
enum CRC32 {
    /// `tables[k * 256 + b]`: the CRC of byte `b` followed by `k` zero bytes.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var value = UInt32(index)
            for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            tables[index] = value
        }
        for index in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[(slice - 1) * 256 + index]
                tables[slice * 256 + index] = tables[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return tables
    }()

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        if let crc = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0)) }) { return crc }
        return checksum(Array(bytes), from: 0)
    }

    /// The checksum of `bytes[start...]`.
    static func checksum(_ bytes: [UInt8], from start: Int) -> UInt32 {
        bytes.withUnsafeBytes { buffer in checksum(UnsafeRawBufferPointer(rebasing: buffer[start...])) }
    }

    static func checksum(_ buffer: UnsafeRawBufferPointer) -> UInt32 {
        tables.withUnsafeBufferPointer { table in
            var crc: UInt32 = 0xFFFF_FFFF
            var index = 0
            let count = buffer.count
            while count - index >= 8 {
                let low = crc ^ buffer.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian
                let high = buffer.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                crc =
                    table[7 * 256 + Int(low & 0xFF)] ^ table[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((low >> 16) & 0xFF)] ^ table[4 * 256 + Int(low >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[256 + Int((high >> 16) & 0xFF)] ^ table[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = table[Int((crc ^ UInt32(buffer[index])) & 0xFF)] ^ (crc >> 8)
                index += 1
            }
            return crc ^ 0xFFFF_FFFF
        }
    }
}
