import ConclaveCore

/// Why a frame could not be rebuilt from its RTP payloads.
public struct DepacketizationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Hashable {
        /// A payload is shorter than its payload header says.
        case truncated
        /// The frame's first packet is not the start of a frame (VP8 S bit / partition 0).
        case missingFrameStart
        /// An H264 FU-A fragment arrived without the fragment that starts its NAL unit.
        case fragmentWithoutStart
        /// An H264 packet type this depacketizer does not handle (STAP-B, MTAP, FU-B).
        case unsupportedNALType(UInt8)
        /// The frame has no media bytes.
        case empty
    }

    /// The codec being depacketized.
    public var codec: MediaCodec
    /// What was wrong.
    public var reason: Reason
    /// The index of the offending packet within the frame.
    public var packetIndex: Int
    /// The byte offset within that packet's payload.
    public var offset: Int

    public var description: String {
        "\(codec) depacketization failed in packet \(packetIndex) at byte \(offset): \(reason)"
    }
}

/// A frame rebuilt from RTP payloads.
public struct DepacketizedFrame: Sendable, Hashable {
    /// The frame bytes: an Opus packet, a VP8 frame, or an Annex-B H264 access unit.
    public var data: [UInt8]
    /// Whether a decoder can start from this frame.
    public var isKeyframe: Bool
}

/// Codec dispatch for the receive path; a switch instead of an existential keeps calls direct.
public enum PayloadFormat {
    /// Rebuilds one frame from the payloads of its packets, in sequence order.
    public static func depacketize(
        codec: MediaCodec,
        payloads: some Collection<ArraySlice<UInt8>>
    ) throws(DepacketizationError) -> DepacketizedFrame {
        switch codec {
        case .opus: try OpusPayload.depacketize(payloads)
        case .vp8: try VP8Depacketizer.depacketize(payloads)
        case .h264: try H264Depacketizer.depacketize(payloads)
        }
    }

    /// Whether `payload` is known to begin a frame: true or false where the format says so, nil
    /// when only the RTP marker and timestamp can tell (H264 NAL units other than an FU-A start).
    public static func beginsFrame(codec: MediaCodec, payload: ArraySlice<UInt8>) -> Bool? {
        switch codec {
        case .opus: true
        case .vp8: VP8PayloadDescriptor(parsing: payload).map { $0.startOfPartition && $0.partitionIndex == 0 }
        case .h264: H264Depacketizer.beginsNAL(payload) == false ? false : nil
        }
    }
}

// MARK: - Opus

/// Opus over RTP (RFC 7587): one Opus packet per RTP payload, no payload header.
public enum OpusPayload {
    /// The payload for one Opus packet is the packet itself.
    public static func packetize(_ frame: [UInt8]) -> [[UInt8]] {
        frame.isEmpty ? [] : [frame]
    }

    /// Joins the payloads of one frame (there is normally exactly one).
    public static func depacketize(
        _ payloads: some Collection<ArraySlice<UInt8>>
    ) throws(DepacketizationError) -> DepacketizedFrame {
        var data: [UInt8] = []
        if payloads.count == 1, let only = payloads.first {
            data = Array(only)
        } else {
            for payload in payloads { data.append(contentsOf: payload) }
        }
        guard !data.isEmpty else { throw DepacketizationError(codec: .opus, reason: .empty, packetIndex: 0, offset: 0) }
        return DepacketizedFrame(data: data, isKeyframe: true)
    }

    /// The number of 48 kHz samples an Opus packet covers, from its TOC byte (RFC 6716 §3.1),
    /// or nil if the packet is empty or malformed. The sender advances the RTP timestamp by this.
    public static func sampleCount(_ packet: some Collection<UInt8>) -> Int? {
        guard let toc = packet.first else { return nil }
        let config = Int(toc >> 3)
        let frameSamples: Int
        switch config {
        case 0...11: frameSamples = [480, 960, 1920, 2880][config % 4]
        case 12...15: frameSamples = [480, 960][config % 2]
        default: frameSamples = [120, 240, 480, 960][config % 4]
        }
        let frames: Int
        switch toc & 0x03 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default:
            guard packet.count >= 2 else { return nil }
            frames = Int(packet[packet.index(after: packet.startIndex)] & 0x3F)
            guard frames > 0 else { return nil }
        }
        let total = frames * frameSamples
        return total <= 5760 ? total : nil  // at most 120 ms
    }
}
