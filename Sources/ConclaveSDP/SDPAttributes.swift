import ConclaveCore

/// Media direction attributes.
public enum SDPDirection: String, Sendable, Hashable, CaseIterable {
    /// Both ways.
    case sendrecv
    /// The describing side only sends.
    case sendonly
    /// The describing side only receives.
    case recvonly
    /// Neither.
    case inactive

    /// The direction an answer takes when it accepts everything the offer allows and wants to
    /// receive only (a subscriber) — recvonly if the offerer sends, inactive otherwise.
    public var receiveOnlyAnswer: SDPDirection {
        switch self {
        case .sendrecv, .sendonly: .recvonly
        case .recvonly, .inactive: .inactive
        }
    }
}

/// `a=setup` (RFC 4145, RFC 5763): which side is the DTLS client.
public enum SDPSetupRole: String, Sendable, Hashable {
    /// Either; offers use this.
    case actpass
    /// This side starts the DTLS handshake (client).
    case active
    /// This side waits for the handshake (server).
    case passive
    /// No connection.
    case holdconn
}

/// `a=rtpmap:<pt> <name>/<clock>[/<channels>]`.
public struct SDPRTPMap: Sendable, Hashable {
    /// The payload type.
    public var payloadType: UInt8
    /// The encoding name as written (`opus`, `VP8`, `H264`, `rtx`, ...).
    public var encodingName: String
    /// The clock rate.
    public var clockRate: UInt32
    /// The channel count (audio), if given.
    public var channels: Int?

    /// Creates a map.
    public init(payloadType: UInt8, encodingName: String, clockRate: UInt32, channels: Int? = nil) {
        self.payloadType = payloadType
        self.encodingName = encodingName
        self.clockRate = clockRate
        self.channels = channels
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let value = attribute.value else { throw attribute.error("rtpmap") }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, let pt = UInt8(parts[0]), pt < 128 else { throw attribute.error("rtpmap payload type") }
        let encoding = parts[1].split(separator: "/")
        guard encoding.count >= 2, let clock = UInt32(encoding[1]) else { throw attribute.error("rtpmap encoding") }
        var channels: Int? = nil
        if encoding.count >= 3 {
            guard let c = Int(encoding[2]) else { throw attribute.error("rtpmap channels") }
            channels = c
        }
        self.init(payloadType: pt, encodingName: String(encoding[0]), clockRate: clock, channels: channels)
    }

    /// The attribute value.
    public var value: String {
        "\(payloadType) \(encodingName)/\(clockRate)" + (channels.map { "/\($0)" } ?? "")
    }
}

/// `a=fmtp:<pt> k=v;k=v` with its parameters in order.
public struct SDPFormatParameters: Sendable, Hashable {
    /// The payload type.
    public var payloadType: UInt8
    /// The parameters in order; a parameter without `=` has an empty value.
    public var parameters: [SDPParameter]

    /// Creates parameters.
    public init(payloadType: UInt8, parameters: [SDPParameter]) {
        self.payloadType = payloadType
        self.parameters = parameters
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let value = attribute.value else { throw attribute.error("fmtp") }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard let first = parts.first, let pt = UInt8(first), pt < 128 else {
            throw attribute.error("fmtp payload type")
        }
        var parameters: [SDPParameter] = []
        if parts.count == 2 {
            for item in parts[1].split(separator: ";") {
                let trimmed = item.trimmingSpaces
                guard !trimmed.isEmpty else { continue }
                if let eq = trimmed.firstIndex(of: "=") {
                    parameters.append(
                        SDPParameter(String(trimmed[..<eq]), String(trimmed[trimmed.index(after: eq)...]))
                    )
                } else {
                    parameters.append(SDPParameter(String(trimmed), ""))
                }
            }
        }
        self.init(payloadType: pt, parameters: parameters)
    }

    /// The value of parameter `name` (case-insensitive name match).
    public subscript(name: String) -> String? {
        parameters.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The attribute value.
    public var value: String {
        "\(payloadType) "
            + parameters.map { $0.value.isEmpty ? $0.name : "\($0.name)=\($0.value)" }.joined(separator: ";")
    }
}

/// One `name=value` of an fmtp line.
public struct SDPParameter: Sendable, Hashable {
    /// The name.
    public var name: String
    /// The value.
    public var value: String

    /// Creates a parameter.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// `a=rtcp-fb:<pt|*> <type> [<parameter>]` (RFC 4585).
public struct SDPRTCPFeedback: Sendable, Hashable {
    /// The payload type, nil for `*`.
    public var payloadType: UInt8?
    /// `nack`, `ccm`, `goog-remb`, `transport-cc`, ...
    public var type: String
    /// `pli` (for nack), `fir` (for ccm), or nil.
    public var parameter: String?

    /// Creates a feedback line.
    public init(payloadType: UInt8?, type: String, parameter: String? = nil) {
        self.payloadType = payloadType
        self.type = type
        self.parameter = parameter
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let value = attribute.value else { throw attribute.error("rtcp-fb") }
        let fields = value.split(separator: " ")
        guard fields.count >= 2 else { throw attribute.error("rtcp-fb") }
        var pt: UInt8? = nil
        if fields[0] != "*" {
            guard let p = UInt8(fields[0]), p < 128 else { throw attribute.error("rtcp-fb payload type") }
            pt = p
        }
        self.init(
            payloadType: pt,
            type: String(fields[1]),
            parameter: fields.count > 2 ? fields[2...].joined(separator: " ") : nil
        )
    }

    /// The attribute value.
    public var value: String {
        (payloadType.map(String.init) ?? "*") + " \(type)" + (parameter.map { " \($0)" } ?? "")
    }

    /// The feedback kind this line enables, if Conclave uses it.
    public var kind: RTCPFeedbackSet? {
        switch (type.lowercased(), parameter?.lowercased()) {
        case ("nack", nil): .nack
        case ("nack", "pli"): .pli
        case ("ccm", "fir"): .fir
        case ("goog-remb", nil): .remb
        case ("transport-cc", nil): .transportCC
        default: nil
        }
    }
}

/// The RTCP feedback kinds Conclave negotiates.
public struct RTCPFeedbackSet: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Generic NACK.
    public static let nack = RTCPFeedbackSet(rawValue: 1)
    /// Picture loss indication.
    public static let pli = RTCPFeedbackSet(rawValue: 2)
    /// Full intra request.
    public static let fir = RTCPFeedbackSet(rawValue: 4)
    /// Receiver estimated max bitrate.
    public static let remb = RTCPFeedbackSet(rawValue: 8)
    /// Transport-wide congestion control.
    public static let transportCC = RTCPFeedbackSet(rawValue: 16)

    /// Everything Conclave supports for video.
    public static let video: RTCPFeedbackSet = [.nack, .pli, .fir, .remb, .transportCC]

    /// The rtcp-fb lines for this set and payload type.
    public func lines(payloadType: UInt8) -> [SDPRTCPFeedback] {
        var lines: [SDPRTCPFeedback] = []
        if contains(.remb) { lines.append(.init(payloadType: payloadType, type: "goog-remb")) }
        if contains(.transportCC) { lines.append(.init(payloadType: payloadType, type: "transport-cc")) }
        if contains(.fir) { lines.append(.init(payloadType: payloadType, type: "ccm", parameter: "fir")) }
        if contains(.nack) { lines.append(.init(payloadType: payloadType, type: "nack")) }
        if contains(.pli) { lines.append(.init(payloadType: payloadType, type: "nack", parameter: "pli")) }
        return lines
    }
}

/// `a=extmap:<id>[/<direction>] <uri> [<attributes>]` (RFC 8285).
public struct SDPExtensionMap: Sendable, Hashable {
    /// The local id (1...14 one-byte, up to 255 two-byte).
    public var id: UInt8
    /// An optional direction.
    public var direction: SDPDirection?
    /// The extension URI.
    public var uri: String
    /// Extension attributes, if any.
    public var extensionAttributes: String?

    /// Creates a map.
    public init(id: UInt8, direction: SDPDirection? = nil, uri: String, extensionAttributes: String? = nil) {
        self.id = id
        self.direction = direction
        self.uri = uri
        self.extensionAttributes = extensionAttributes
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let value = attribute.value else { throw attribute.error("extmap") }
        let fields = value.split(separator: " ", maxSplits: 2)
        guard fields.count >= 2 else { throw attribute.error("extmap") }
        let idField = fields[0].split(separator: "/", maxSplits: 1)
        guard let first = idField.first, let id = UInt8(first), id > 0 else { throw attribute.error("extmap id") }
        var direction: SDPDirection? = nil
        if idField.count == 2 {
            guard let d = SDPDirection(rawValue: String(idField[1])) else { throw attribute.error("extmap direction") }
            direction = d
        }
        self.init(
            id: id,
            direction: direction,
            uri: String(fields[1]),
            extensionAttributes: fields.count > 2 ? String(fields[2]) : nil
        )
    }

    /// The attribute value.
    public var value: String {
        "\(id)" + (direction.map { "/\($0.rawValue)" } ?? "") + " \(uri)" + (extensionAttributes.map { " \($0)" } ?? "")
    }
}

/// `a=ssrc:<ssrc> <name>[:<value>]` (RFC 5576).
public struct SDPSSRCAttribute: Sendable, Hashable {
    /// The source.
    public var ssrc: UInt32
    /// `cname`, `msid`, ...
    public var name: String
    /// The value.
    public var value: String?

    /// Creates an attribute.
    public init(ssrc: UInt32, name: String, value: String?) {
        self.ssrc = ssrc
        self.name = name
        self.value = value
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let text = attribute.value else { throw attribute.error("ssrc") }
        let parts = text.split(separator: " ", maxSplits: 1)
        guard let first = parts.first, let ssrc = UInt32(first) else { throw attribute.error("ssrc id") }
        var name = ""
        var value: String? = nil
        if parts.count == 2 {
            if let colon = parts[1].firstIndex(of: ":") {
                name = String(parts[1][..<colon])
                value = String(parts[1][parts[1].index(after: colon)...])
            } else {
                name = String(parts[1])
            }
        }
        self.init(ssrc: ssrc, name: name, value: value)
    }

    /// The attribute value.
    public var text: String { "\(ssrc) \(name)" + (value.map { ":\($0)" } ?? "") }
}

/// `a=ssrc-group:<semantics> <ssrc>...` (FID pairs media and RTX).
public struct SDPSSRCGroup: Sendable, Hashable {
    /// `FID`, `SIM`, ...
    public var semantics: String
    /// The sources.
    public var ssrcs: [UInt32]

    /// Creates a group.
    public init(semantics: String, ssrcs: [UInt32]) {
        self.semantics = semantics
        self.ssrcs = ssrcs
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let text = attribute.value else { throw attribute.error("ssrc-group") }
        let fields = text.split(separator: " ")
        guard let semantics = fields.first else { throw attribute.error("ssrc-group") }
        var ssrcs: [UInt32] = []
        for f in fields.dropFirst() {
            guard let s = UInt32(f) else { throw attribute.error("ssrc-group ssrc") }
            ssrcs.append(s)
        }
        self.init(semantics: String(semantics), ssrcs: ssrcs)
    }

    /// The attribute value.
    public var value: String { ([semantics] + ssrcs.map(String.init)).joined(separator: " ") }
}

/// `a=fingerprint:<hash> <hex:hex:...>` (RFC 8122).
public struct SDPFingerprint: Sendable, Hashable {
    /// The hash function name, lowercased (`sha-256`).
    public var algorithm: String
    /// The digest bytes.
    public var digest: [UInt8]

    /// Creates a fingerprint.
    public init(algorithm: String = "sha-256", digest: [UInt8]) {
        self.algorithm = algorithm.lowercased()
        self.digest = digest
    }

    /// Parses the attribute value.
    public init(_ attribute: SDPAttribute) throws(SDPError) {
        guard let text = attribute.value else { throw attribute.error("fingerprint") }
        let parts = text.split(separator: " ")
        guard parts.count == 2 else { throw attribute.error("fingerprint") }
        var digest: [UInt8] = []
        for byte in parts[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard byte.count == 2, let b = UInt8(byte, radix: 16) else { throw attribute.error("fingerprint digest") }
            digest.append(b)
        }
        self.init(algorithm: String(parts[0]), digest: digest)
    }

    /// The attribute value, uppercase colon-separated hex.
    public var value: String {
        let hex = digest.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }
        return "\(algorithm) " + hex.joined(separator: ":")
    }
}

/// `a=msid:<stream> [<track>]` (RFC 8830).
public struct SDPMediaStreamID: Sendable, Hashable {
    /// The stream id.
    public var streamID: String
    /// The track id.
    public var trackID: String?

    /// Creates an msid.
    public init(streamID: String, trackID: String?) {
        self.streamID = streamID
        self.trackID = trackID
    }

    /// The attribute value.
    public var value: String { streamID + (trackID.map { " \($0)" } ?? "") }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}

extension SDPAttributeContainer {
    /// `a=mid`.
    public var mid: String? { attribute("mid")?.value }

    /// The direction attribute, nil if none (RFC 8866 then implies sendrecv).
    public var direction: SDPDirection? {
        attributes.lazy.compactMap { $0.value == nil ? SDPDirection(rawValue: $0.name) : nil }.first
    }

    /// `a=ice-ufrag`.
    public var iceUfrag: String? { attribute("ice-ufrag")?.value }
    /// `a=ice-pwd`.
    public var icePwd: String? { attribute("ice-pwd")?.value }
    /// `a=ice-options` tokens.
    public var iceOptions: [String] {
        attributes(named: "ice-options").flatMap { ($0.value ?? "").split(separator: " ").map(String.init) }
    }
    /// Whether `a=rtcp-mux` is present.
    public var rtcpMux: Bool { has("rtcp-mux") }
    /// Whether `a=end-of-candidates` is present.
    public var endOfCandidates: Bool { has("end-of-candidates") }

    /// `a=setup`.
    public func setupRole() throws(SDPError) -> SDPSetupRole? {
        guard let a = attribute("setup") else { return nil }
        guard let role = a.value.flatMap(SDPSetupRole.init(rawValue:)) else { throw a.error("setup") }
        return role
    }

    /// The first `a=fingerprint`.
    public func fingerprint() throws(SDPError) -> SDPFingerprint? {
        guard let a = attribute("fingerprint") else { return nil }
        return try SDPFingerprint(a)
    }

    /// Every `a=rtpmap`.
    public func rtpMaps() throws(SDPError) -> [SDPRTPMap] {
        var result: [SDPRTPMap] = []
        for a in attributes where a.name == "rtpmap" { result.append(try SDPRTPMap(a)) }
        return result
    }

    /// Every `a=fmtp`.
    public func formatParameters() throws(SDPError) -> [SDPFormatParameters] {
        var result: [SDPFormatParameters] = []
        for a in attributes where a.name == "fmtp" { result.append(try SDPFormatParameters(a)) }
        return result
    }

    /// Every `a=rtcp-fb`.
    public func rtcpFeedback() throws(SDPError) -> [SDPRTCPFeedback] {
        var result: [SDPRTCPFeedback] = []
        for a in attributes where a.name == "rtcp-fb" { result.append(try SDPRTCPFeedback(a)) }
        return result
    }

    /// Every `a=extmap`.
    public func extensionMaps() throws(SDPError) -> [SDPExtensionMap] {
        var result: [SDPExtensionMap] = []
        for a in attributes where a.name == "extmap" { result.append(try SDPExtensionMap(a)) }
        return result
    }

    /// Every `a=ssrc`.
    public func ssrcAttributes() throws(SDPError) -> [SDPSSRCAttribute] {
        var result: [SDPSSRCAttribute] = []
        for a in attributes where a.name == "ssrc" { result.append(try SDPSSRCAttribute(a)) }
        return result
    }

    /// Every `a=ssrc-group`.
    public func ssrcGroups() throws(SDPError) -> [SDPSSRCGroup] {
        var result: [SDPSSRCGroup] = []
        for a in attributes where a.name == "ssrc-group" { result.append(try SDPSSRCGroup(a)) }
        return result
    }

    /// Every `a=candidate`.
    public func candidates() throws(SDPError) -> [ICECandidate] {
        var result: [ICECandidate] = []
        for a in attributes where a.name == "candidate" {
            do {
                result.append(try ICECandidate(parsing: a.value ?? ""))
            } catch {
                throw SDPError(.invalidField("candidate \(error.field.rawValue)"), line: a.line, text: "a=\(a.text)")
            }
        }
        return result
    }

    /// `a=msid`.
    public var mediaStreamID: SDPMediaStreamID? {
        guard let value = attribute("msid")?.value else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard let first = parts.first else { return nil }
        return SDPMediaStreamID(streamID: String(first), trackID: parts.count > 1 ? String(parts[1]) : nil)
    }
}
