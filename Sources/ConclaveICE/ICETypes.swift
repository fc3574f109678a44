/// A STUN server, by numeric address (libnice does not resolve host names).
public struct STUNServer: Sendable, Hashable {
    public var address: String
    public var port: UInt16

    public init(address: String, port: UInt16 = 3478) {
        self.address = address
        self.port = port
    }
}

/// A TURN server with long-term credentials (RFC 8656), by numeric address.
public struct TURNServer: Sendable, Hashable, CustomStringConvertible {
    /// How we reach the TURN server (the relayed candidate itself is always UDP).
    public enum Transport: Sendable, Hashable {
        case udp, tcp, tls
    }

    public var address: String
    public var port: UInt16
    public var transport: Transport
    public var username: String
    public var password: String

    public init(address: String, port: UInt16, transport: Transport, username: String, password: String) {
        self.address = address
        self.port = port
        self.transport = transport
        self.username = username
        self.password = password
    }

    /// Never shows the password.
    public var description: String { "TURNServer(\(transport) \(address):\(port), user \(username))" }
}

/// Which local candidates ICE may use (WebRTC's `iceTransportPolicy`).
public enum ICETransportPolicy: String, Sendable, Hashable, CaseIterable {
    /// Host, server-reflexive and relayed candidates.
    case all
    /// Relayed candidates only: media always goes through a TURN server, so the peer never learns
    /// our addresses and only the TURN server's port needs to be open.
    case relay
}

/// The kind of an ICE candidate (RFC 8445 section 5.1.1).
public enum ICECandidateType: String, Sendable, Hashable {
    case host
    case serverReflexive = "srflx"
    case peerReflexive = "prflx"
    case relayed = "relay"
}

/// The candidate pair ICE selected for media.
public struct ICESelectedPair: Sendable, Hashable {
    /// Our candidate, as an SDP candidate value.
    public var local: String
    /// Its kind: `.relayed` when media goes through a TURN server.
    public var localType: ICECandidateType
    /// The peer's candidate, as an SDP candidate value.
    public var remote: String
    /// Its kind.
    public var remoteType: ICECandidateType

    public init(local: String, localType: ICECandidateType, remote: String, remoteType: ICECandidateType) {
        self.local = local
        self.localType = localType
        self.remote = remote
        self.remoteType = remoteType
    }
}

/// Local or remote ICE credentials (`a=ice-ufrag`, `a=ice-pwd`).
public struct ICECredentials: Sendable, Hashable, CustomStringConvertible {
    public var ufrag: String
    public var password: String

    public init(ufrag: String, password: String) {
        self.ufrag = ufrag
        self.password = password
    }

    /// Shows the ufrag only: the password authenticates connectivity checks.
    public var description: String { "ICECredentials(ufrag: \(ufrag))" }
}

/// The connectivity state of the agent's one component, as libnice reports it.
public enum ICEConnectionState: Sendable, Hashable, CustomStringConvertible {
    /// Nothing scheduled (before gathering, or after a restart cleared the checks).
    case disconnected
    /// Gathering local candidates.
    case gathering
    /// Checking candidate pairs.
    case connecting
    /// At least one pair works; media may flow.
    case connected
    /// A pair is nominated; ICE concluded.
    case ready
    /// No pair works (after the peer's end-of-candidates), or consent was lost (RFC 7675).
    case failed
    /// The agent was closed.
    case closed

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .gathering: "gathering"
        case .connecting: "connecting"
        case .connected: "connected"
        case .ready: "ready"
        case .failed: "failed"
        case .closed: "closed"
        }
    }
}

/// A trickled local candidate, or the end of them.
public enum ICECandidateEvent: Sendable, Hashable {
    /// An SDP candidate attribute value without the `a=` prefix (`candidate:1 1 UDP ...`), the
    /// form Janus's `trickle` request and browsers' `RTCIceCandidate.candidate` carry.
    case candidate(String)
    /// Gathering finished (`a=end-of-candidates`; Janus: `{"completed": true}`).
    case endOfCandidates
}
