/// Decides which media section (mid) a received RTP packet belongs to on a BUNDLEd transport
/// (RFC 8843 §9.2): by SSRC once known, else by the mid header extension (which then binds the
/// SSRC), else by a payload type that only one section uses.
///
/// The SSRC lookup comes first so the steady state costs one dictionary lookup and no allocation;
/// the mid extension is read only for an SSRC not seen before (a new feed after renegotiation).
public struct RTPStreamRouter: Sendable {
    private var midExtensionID: UInt8?
    private var bySSRC: [UInt32: String] = [:]
    private var byPayloadType: [UInt8: String] = [:]
    private var ambiguousPayloadTypes: Set<UInt8> = []

    /// Creates a router; `midExtensionID` is the negotiated id of the mid extension, if any.
    public init(midExtensionID: UInt8?) {
        self.midExtensionID = midExtensionID
    }

    /// Binds an SSRC announced in SDP (`a=ssrc`) to its mid.
    public mutating func bind(ssrc: UInt32, to mid: String) {
        bySSRC[ssrc] = mid
    }

    /// Registers the payload type a section uses; a type used by several sections routes nothing.
    public mutating func bind(payloadType: UInt8, to mid: String) {
        if let existing = byPayloadType[payloadType], existing != mid {
            ambiguousPayloadTypes.insert(payloadType)
        }
        byPayloadType[payloadType] = mid
    }

    /// Forgets every binding of `mid` (the section was removed or its feed left).
    public mutating func remove(mid: String) {
        bySSRC = bySSRC.filter { $0.value != mid }
        byPayloadType = byPayloadType.filter { $0.value != mid }
    }

    /// The mid of `packet`, or nil if it cannot be routed (the caller counts and drops it).
    public mutating func route(_ packet: RTPPacket) -> String? {
        if let mid = bySSRC[packet.ssrc] { return mid }
        if let id = midExtensionID, let value = packet.extensionValue(id: id),
            let mid = String(validating: value, as: UTF8.self), !mid.isEmpty
        {
            bySSRC[packet.ssrc] = mid
            return mid
        }
        guard !ambiguousPayloadTypes.contains(packet.payloadType) else { return nil }
        return byPayloadType[packet.payloadType]
    }
}
