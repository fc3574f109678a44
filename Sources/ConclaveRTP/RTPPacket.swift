/// Why an RTP packet was rejected, with the byte offset where parsing stopped.
public struct RTPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Hashable {
        /// Fewer than the 12 bytes of a fixed header, or fewer than the header claims.
        case truncated
        /// The version field is not 2.
        case unsupportedVersion(UInt8)
        /// The padding count is zero or runs into the header.
        case invalidPadding(UInt8)
    }

    /// What was wrong.
    public var reason: Reason
    /// The byte offset in the datagram where the problem was found.
    public var offset: Int
    /// The datagram length.
    public var length: Int

    public var description: String {
        "RTP packet rejected at byte \(offset) of \(length): \(reason)"
    }
}

/// One RTP header extension element (RFC 8285): a local id and its value bytes.
public struct RTPHeaderExtensionElement: Sendable, Hashable {
    /// The id negotiated with `a=extmap` (1...14 for the one-byte form, 1...255 for the two-byte form).
    public var id: UInt8
    /// The value, at most 16 bytes in the one-byte form and 255 in the two-byte form.
    public var value: [UInt8]

    /// Creates an element.
    public init(id: UInt8, value: [UInt8]) {
        self.id = id
        self.value = value
    }
}

/// A parsed RTP packet (RFC 3550) that references the datagram it came from.
///
/// Parsing validates the layout once and records offsets; the payload and extension values are
/// slices of the original buffer, so receiving a packet costs no allocation beyond the datagram.
/// The jitter buffer keeps the packet (and so the array) until its frame is delivered: hand each
/// datagram over in its own array rather than reusing one receive buffer, which would copy.
public struct RTPPacket: Sendable {
    /// The one-byte header extension profile (RFC 8285 §4.2).
    public static let oneByteProfile: UInt16 = 0xBEDE
    /// The two-byte header extension profile with zero app bits (RFC 8285 §4.3).
    public static let twoByteProfile: UInt16 = 0x1000

    /// The whole datagram.
    public let buffer: [UInt8]
    /// The marker bit: for video the last packet of a frame, for audio the start of a talkspurt.
    public let marker: Bool
    /// The 7-bit payload type.
    public let payloadType: UInt8
    /// The 16-bit sequence number.
    public let sequenceNumber: UInt16
    /// The RTP timestamp in the codec's clock rate.
    public let timestamp: UInt32
    /// The synchronization source.
    public let ssrc: UInt32
    /// The number of contributing sources.
    public let csrcCount: Int
    /// The header extension profile, or nil when the X bit is clear.
    public let extensionProfile: UInt16?
    /// The byte range of the header extension data (after its 4-byte header).
    public let extensionRange: Range<Int>
    /// The byte range of the payload (padding excluded).
    public let payloadRange: Range<Int>
    /// The number of padding bytes at the end, including the count byte (0 if none).
    public let paddingLength: Int

    /// Parses and validates a datagram. Extension element syntax is checked lazily, as RFC 8285
    /// asks receivers to ignore malformed extensions rather than drop the packet.
    public init(parsing bytes: [UInt8]) throws(RTPParseError) {
        let n = bytes.count
        guard n >= 12 else { throw RTPParseError(reason: .truncated, offset: n, length: n) }
        let b0 = bytes[0]
        let version = b0 >> 6
        guard version == 2 else { throw RTPParseError(reason: .unsupportedVersion(version), offset: 0, length: n) }
        let hasPadding = b0 & 0x20 != 0
        let hasExtension = b0 & 0x10 != 0
        let cc = Int(b0 & 0x0F)
        let b1 = bytes[1]
        var offset = 12 + 4 * cc
        guard offset <= n else { throw RTPParseError(reason: .truncated, offset: 12, length: n) }
        var profile: UInt16? = nil
        var extRange = offset..<offset
        if hasExtension {
            guard offset + 4 <= n else { throw RTPParseError(reason: .truncated, offset: offset, length: n) }
            profile = bytes.be16(offset)
            let words = Int(bytes.be16(offset + 2))
            let start = offset + 4
            let end = start + 4 * words
            guard end <= n else { throw RTPParseError(reason: .truncated, offset: offset + 2, length: n) }
            extRange = start..<end
            offset = end
        }
        var padding = 0
        if hasPadding {
            let count = bytes[n - 1]
            guard count > 0, n - Int(count) >= offset else {
                throw RTPParseError(reason: .invalidPadding(count), offset: n - 1, length: n)
            }
            padding = Int(count)
        }
        self.buffer = bytes
        self.marker = b1 & 0x80 != 0
        self.payloadType = b1 & 0x7F
        self.sequenceNumber = bytes.be16(2)
        self.timestamp = bytes.be32(4)
        self.ssrc = bytes.be32(8)
        self.csrcCount = cc
        self.extensionProfile = profile
        self.extensionRange = extRange
        self.payloadRange = offset..<(n - padding)
        self.paddingLength = padding
    }

    /// The payload bytes, without padding.
    public var payload: ArraySlice<UInt8> { buffer[payloadRange] }

    /// The contributing sources.
    public var csrcs: [UInt32] {
        (0..<csrcCount).map { buffer.be32(12 + 4 * $0) }
    }

    /// The value of the extension element with `id`, or nil if absent or the block is malformed.
    public func extensionValue(id: UInt8) -> ArraySlice<UInt8>? {
        var found: ArraySlice<UInt8>? = nil
        forEachExtension { elementID, value in
            if elementID == id {
                found = value
                return false
            }
            return true
        }
        return found
    }

    /// All extension elements (allocates; prefer `extensionValue(id:)` on the receive path).
    public var extensionElements: [RTPHeaderExtensionElement] {
        var result: [RTPHeaderExtensionElement] = []
        forEachExtension { id, value in
            result.append(RTPHeaderExtensionElement(id: id, value: Array(value)))
            return true
        }
        return result
    }

    /// Walks the extension elements until `body` returns false or the data ends or turns malformed.
    public func forEachExtension(_ body: (UInt8, ArraySlice<UInt8>) -> Bool) {
        guard let profile = extensionProfile else { return }
        var i = extensionRange.lowerBound
        let end = extensionRange.upperBound
        if profile == Self.oneByteProfile {
            while i < end {
                let b = buffer[i]
                if b == 0 {  // padding
                    i += 1
                    continue
                }
                let id = b >> 4
                if id == 15 { return }  // reserved: stop processing (RFC 8285 §4.2)
                let length = Int(b & 0x0F) + 1
                guard i + 1 + length <= end else { return }
                if !body(id, buffer[(i + 1)..<(i + 1 + length)]) { return }
                i += 1 + length
            }
        } else if profile & 0xFFF0 == Self.twoByteProfile {
            while i < end {
                let id = buffer[i]
                if id == 0 {
                    i += 1
                    continue
                }
                guard i + 2 <= end else { return }
                let length = Int(buffer[i + 1])
                guard i + 2 + length <= end else { return }
                if !body(id, buffer[(i + 2)..<(i + 2 + length)]) { return }
                i += 2 + length
            }
        }
    }
}

/// The header of an RTP packet to send; `serialize` writes it with a payload.
public struct RTPHeader: Sendable, Hashable {
    /// The marker bit.
    public var marker: Bool
    /// The 7-bit payload type.
    public var payloadType: UInt8
    /// The sequence number.
    public var sequenceNumber: UInt16
    /// The RTP timestamp.
    public var timestamp: UInt32
    /// The synchronization source.
    public var ssrc: UInt32
    /// Contributing sources (at most 15).
    public var csrcs: [UInt32]
    /// Header extension elements. The one-byte form is used when every id is 1...14 and every value
    /// 1...16 bytes long, the two-byte form otherwise.
    public var extensions: [RTPHeaderExtensionElement]

    /// Creates a header.
    public init(
        marker: Bool = false,
        payloadType: UInt8,
        sequenceNumber: UInt16,
        timestamp: UInt32,
        ssrc: UInt32,
        csrcs: [UInt32] = [],
        extensions: [RTPHeaderExtensionElement] = []
    ) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.extensions = extensions
    }

    /// Whether the extensions fit the one-byte form.
    var usesOneByteForm: Bool {
        extensions.allSatisfy { (1...14).contains($0.id) && (1...16).contains($0.value.count) }
    }

    /// The serialized header length, extensions included.
    public var byteCount: Int {
        var n = 12 + 4 * min(csrcs.count, 15)
        if !extensions.isEmpty {
            let perElement = usesOneByteForm ? 1 : 2
            let raw = extensions.reduce(0) { $0 + perElement + min($1.value.count, 255) }
            n += 4 + (raw + 3) / 4 * 4
        }
        return n
    }

    /// Writes the header, `payload` and `paddingLength` padding bytes (0 or 1...255) into a new buffer.
    public func serialize(payload: some Collection<UInt8>, paddingLength: Int = 0) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(byteCount + payload.count + paddingLength)
        write(payload: payload, paddingLength: paddingLength, into: &out)
        return out
    }

    /// Appends the header, payload and padding to `out` (which callers may reuse between packets).
    public func write(payload: some Collection<UInt8>, paddingLength: Int = 0, into out: inout [UInt8]) {
        let padding = max(0, min(paddingLength, 255))
        let cc = min(csrcs.count, 15)
        var b0: UInt8 = 0x80 | UInt8(cc)
        if padding > 0 { b0 |= 0x20 }
        if !extensions.isEmpty { b0 |= 0x10 }
        out.append(b0)
        out.append((marker ? 0x80 : 0) | (payloadType & 0x7F))
        out.appendBE16(sequenceNumber)
        out.appendBE32(timestamp)
        out.appendBE32(ssrc)
        for csrc in csrcs.prefix(cc) { out.appendBE32(csrc) }
        if !extensions.isEmpty {
            let oneByte = usesOneByteForm
            out.appendBE16(oneByte ? RTPPacket.oneByteProfile : RTPPacket.twoByteProfile)
            let lengthIndex = out.count
            out.appendBE16(0)
            let start = out.count
            for element in extensions {
                let value = element.value.prefix(255)
                if oneByte {
                    out.append(element.id << 4 | UInt8(value.count - 1))
                } else {
                    out.append(element.id)
                    out.append(UInt8(value.count))
                }
                out.append(contentsOf: value)
            }
            while (out.count - start) % 4 != 0 { out.append(0) }
            out.setBE16(UInt16((out.count - start) / 4), at: lengthIndex)
        }
        out.append(contentsOf: payload)
        if padding > 0 {
            for _ in 1..<padding { out.append(0) }
            out.append(UInt8(padding))
        }
    }
}
