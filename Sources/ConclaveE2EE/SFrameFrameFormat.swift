import ConclaveCore
import Crypto

/// How Conclave composes SFrame key ids: the sender in the high 56 bits, the key epoch (mod 256) in
/// the low 8 bits.
///
/// A receiver reads the epoch from the key id and picks that key from its ring directly, instead of
/// trying keys as the `ecall` format must; a sender's key id changes on every rotation.
public struct SFrameKeyID: Sendable, Hashable, CustomStringConvertible {
    /// The largest sender id that fits.
    public static let maxSenderID: UInt64 = (1 << 56) - 1

    public var senderID: UInt64
    public var epoch: UInt8

    public init(senderID: UInt64, epoch: UInt8) {
        self.senderID = senderID & Self.maxSenderID
        self.epoch = epoch
    }

    public init(rawValue: UInt64) {
        senderID = rawValue >> 8
        epoch = UInt8(truncatingIfNeeded: rawValue)
    }

    public var rawValue: UInt64 { senderID << 8 | UInt64(epoch) }

    public var description: String { "sender \(senderID) epoch \(epoch)" }
}

/// Conclave's `sframe` media format: RFC 9605 SFrame applied per codec so an SFU still sees what it
/// needs to route and a recorder can find frame boundaries.
///
/// - Opus: the whole packet is the SFrame plaintext; no metadata.
/// - VP8: the payload header (10 bytes on keyframes, 3 otherwise; RFC 6386 §9.1) stays clear and is
///   the SFrame metadata, so it is authenticated; the rest is sealed after it.
/// - H264 (Annex-B): start codes and each NAL header byte stay clear; the NAL header is the metadata.
///   Every NAL unit except SPS (7), PPS (8) and access unit delimiters (9) is sealed with its own
///   counter, so every slice of a multi-slice frame is covered. The sealed bytes get a `0x80` stop
///   byte (so the unit never ends in zero) and H264 emulation prevention, so no start code can appear
///   inside them on the wire.
public enum SFrameFrameFormat {
    /// NAL types sent in clear: parameter sets and delimiters carry no picture content and an SFU or
    /// recorder may need them.
    static let clearNALTypes: Set<UInt8> = [7, 8, 9]
    /// Appended to each sealed H264 unit before escaping, removed after unescaping.
    static let h264StopByte: UInt8 = 0x80

    /// Length of the clear VP8 payload header given its first byte.
    static func vp8HeaderLength(firstByte: UInt8) -> Int { firstByte & 0x01 == 0 ? 10 : 3 }

    /// Seals `frame`. `nextCounter` is called once per sealed unit and must never repeat a value for
    /// the same key id.
    public static func seal(
        _ frame: [UInt8],
        codec: MediaCodec,
        material: SFrameKeyMaterial,
        nextCounter: () throws(FrameEncryptionError) -> UInt64
    ) throws(FrameEncryptionError) -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(frame.count + 32)
        switch codec {
        case .opus:
            SFrameCipher.seal(
                frame[...],
                metadata: [],
                counter: try nextCounter(),
                material: material,
                appendingTo: &output
            )
        case .vp8:
            let clear = frame.first.map { min(vp8HeaderLength(firstByte: $0), frame.count) } ?? 0
            output.append(contentsOf: frame[..<clear])
            SFrameCipher.seal(
                frame[clear...],
                metadata: frame[..<clear],
                counter: try nextCounter(),
                material: material,
                appendingTo: &output
            )
        case .h264:
            guard H264FrameParser.isAnnexB(frame) else {
                throw .malformedFrame(codec: .h264, detail: "frame does not start with an Annex-B start code")
            }
            var sealed = [UInt8]()
            for unit in H264FrameParser.annexBUnits(in: frame) {
                output.append(contentsOf: frame[unit.framingStart...unit.headerIndex])
                let payload = frame[(unit.headerIndex + 1)..<unit.end]
                if clearNALTypes.contains(unit.type) {
                    output.append(contentsOf: payload)
                    continue
                }
                sealed.removeAll(keepingCapacity: true)
                SFrameCipher.seal(
                    payload,
                    metadata: frame[unit.headerIndex...unit.headerIndex],
                    counter: try nextCounter(),
                    material: material,
                    appendingTo: &sealed
                )
                sealed.append(h264StopByte)
                EmulationPrevention.escape(sealed, into: &output)
            }
        }
        return output
    }

    /// Opens an `sframe` frame, asking `material` for the keys of each key id it names.
    public static func open(
        _ frame: [UInt8],
        codec: MediaCodec,
        material: (UInt64) throws(FrameDecryptionError) -> SFrameKeyMaterial
    ) throws(FrameDecryptionError) -> [UInt8] {
        switch codec {
        case .opus:
            guard !frame.isEmpty else { throw FrameDecryptionError(.truncated, codec: codec, at: 0, "empty frame") }
            return try SFrameCipher.open(frame[...], metadata: [], codec: codec, material: material).plaintext
        case .vp8:
            guard let first = frame.first else {
                throw FrameDecryptionError(.truncated, codec: codec, at: 0, "empty frame")
            }
            let clear = vp8HeaderLength(firstByte: first)
            guard frame.count > clear else {
                throw FrameDecryptionError(
                    .truncated,
                    codec: codec,
                    at: frame.count,
                    "\(frame.count) bytes cannot hold the \(clear)-byte clear header and an SFrame header"
                )
            }
            var output = Array(frame[..<clear])
            output.append(
                contentsOf: try SFrameCipher.open(
                    frame[clear...],
                    metadata: frame[..<clear],
                    codec: codec,
                    material: material
                ).plaintext
            )
            return output
        case .h264:
            let units = H264FrameParser.isAnnexB(frame) ? H264FrameParser.annexBUnits(in: frame) : []
            guard !units.isEmpty else {
                throw FrameDecryptionError(
                    .malformedHeader,
                    codec: codec,
                    at: 0,
                    "no Annex-B NAL units in \(frame.count) bytes"
                )
            }
            var output = [UInt8]()
            output.reserveCapacity(frame.count)
            for unit in units {
                output.append(contentsOf: frame[unit.framingStart...unit.headerIndex])
                let payload = frame[(unit.headerIndex + 1)..<unit.end]
                if clearNALTypes.contains(unit.type) {
                    output.append(contentsOf: payload)
                    continue
                }
                var sealed = EmulationPrevention.unescape(payload)
                guard sealed.last == h264StopByte else {
                    throw FrameDecryptionError(
                        .malformedHeader,
                        codec: codec,
                        at: unit.end,
                        "NAL type \(unit.type) unit does not end with the SFrame stop byte"
                    )
                }
                sealed.removeLast()
                guard !sealed.isEmpty else {
                    throw FrameDecryptionError(
                        .truncated,
                        codec: codec,
                        at: unit.headerIndex + 1,
                        "empty sealed NAL unit"
                    )
                }
                output.append(
                    contentsOf: try SFrameCipher.open(
                        sealed[...],
                        metadata: frame[unit.headerIndex...unit.headerIndex],
                        codec: codec,
                        material: material
                    ).plaintext
                )
            }
            return output
        }
    }
}
