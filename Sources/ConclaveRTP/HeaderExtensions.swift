import ConclaveCore

/// The local ids of the header extensions negotiated for one stream (0 = not negotiated).
///
/// Built from the SDP negotiation result (URI → id); read on every packet, so lookups are fields.
public struct RTPHeaderExtensionMap: Sendable, Hashable {
    /// Id of `RTPHeaderExtensionURI.mid`, or nil.
    public var mid: UInt8?
    /// Id of `RTPHeaderExtensionURI.audioLevel`, or nil.
    public var audioLevel: UInt8?
    /// Id of `RTPHeaderExtensionURI.absSendTime`, or nil.
    public var absSendTime: UInt8?
    /// Id of `RTPHeaderExtensionURI.transportWideCC`, or nil.
    public var transportWideCC: UInt8?

    /// Creates a map with explicit ids.
    public init(mid: UInt8? = nil, audioLevel: UInt8? = nil, absSendTime: UInt8? = nil, transportWideCC: UInt8? = nil) {
        self.mid = mid
        self.audioLevel = audioLevel
        self.absSendTime = absSendTime
        self.transportWideCC = transportWideCC
    }

    /// Creates a map from negotiated `URI → id` pairs; unknown URIs are ignored.
    public init(ids: [String: UInt8]) {
        self.init(
            mid: ids[RTPHeaderExtensionURI.mid],
            audioLevel: ids[RTPHeaderExtensionURI.audioLevel],
            absSendTime: ids[RTPHeaderExtensionURI.absSendTime],
            transportWideCC: ids[RTPHeaderExtensionURI.transportWideCC]
        )
    }

    /// The mid carried by `packet`, if negotiated and present and valid UTF-8.
    public func mid(in packet: RTPPacket) -> String? {
        guard let id = mid, let value = packet.extensionValue(id: id) else { return nil }
        return String(validating: value, as: UTF8.self)
    }

    /// The audio level (RFC 6464) carried by `packet`.
    public func audioLevel(in packet: RTPPacket) -> AudioLevel? {
        guard let id = audioLevel, let value = packet.extensionValue(id: id), let b = value.first else { return nil }
        return AudioLevel(byte: b)
    }

    /// The 24-bit abs-send-time value (6.18 fixed-point seconds) carried by `packet`.
    public func absSendTime(in packet: RTPPacket) -> UInt32? {
        guard let id = absSendTime, let v = packet.extensionValue(id: id), v.count >= 3 else { return nil }
        let s = v.startIndex
        return v.be24(s)
    }

    /// The transport-wide sequence number carried by `packet`.
    public func transportSequenceNumber(in packet: RTPPacket) -> UInt16? {
        guard let id = transportWideCC, let v = packet.extensionValue(id: id), v.count >= 2 else { return nil }
        return v.be16(v.startIndex)
    }
}

/// The RFC 6464 audio level: a voice-activity flag and the level in -dBov (0 loudest, 127 silence).
public struct AudioLevel: Sendable, Hashable {
    /// The V flag.
    public var voiceActivity: Bool
    /// The level in -dBov, 0...127.
    public var level: UInt8

    /// Creates a level; `level` is clamped to 127.
    public init(voiceActivity: Bool, level: UInt8) {
        self.voiceActivity = voiceActivity
        self.level = min(level, 127)
    }

    /// Decodes the one-byte element value.
    public init(byte: UInt8) {
        self.init(voiceActivity: byte & 0x80 != 0, level: byte & 0x7F)
    }

    /// The one-byte element value.
    public var byte: UInt8 { (voiceActivity ? 0x80 : 0) | level }
}

/// Encoders for extension values the sender writes.
public enum RTPHeaderExtensionValue {
    /// The 3-byte abs-send-time value for `time` (6.18 fixed-point seconds, wrapping every 64 s).
    public static func absSendTime(_ time: MonotonicTime) -> [UInt8] {
        let value = UInt32(truncatingIfNeeded: (time.microseconds << 18) / 1_000_000) & 0xFF_FFFF
        return [
            UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
            UInt8(truncatingIfNeeded: value),
        ]
    }

    /// The 2-byte transport-wide sequence number value.
    public static func transportSequenceNumber(_ value: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    /// The mid value (UTF-8, at most 16 bytes in the one-byte form).
    public static func mid(_ mid: String) -> [UInt8] {
        Array(mid.utf8)
    }
}
