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

/// Lets received datagrams gather in the socket before the transport's thread wakes to read
/// them: for a recorder, which plays nothing back, up to 40 ms (``recording``); for a call
/// client, up to 5 ms (``interactive``).
///
/// Each wakeup of the thread costs more than reading a datagram: at one 1 Mbit/s feed the thread
/// woke about 85 times a second, and waking at most every 40 ms halved its CPU. A call with
/// three feeds woke it about 440 times a second; at most every 5 ms, a delay the playout's 20 ms
/// frames do not notice, it wakes about half as often. The delay shrinks
/// as the datagram rate grows, so that about ``datagramBudget`` datagrams wait at a time: a
/// socket's default receive buffer holds about 90 full-size datagrams, and a busy thread wakes
/// often anyway. Timers (NACK retries, receiver reports) still fire on time.
public struct ReceiveBatching: Sendable, Hashable {
    /// The longest a datagram waits before the thread wakes.
    public var maximumDelay: Duration
    /// About how many datagrams may wait at a time at high rates.
    public var datagramBudget: Int
    /// The receive buffer asked for the media socket, as a margin for a sudden rise in rate
    /// (32 feeds starting at once) before the delay shrinks; the kernel caps it at
    /// net.core.rmem_max.
    public var receiveBufferBytes: Int

    public init(maximumDelay: Duration = .milliseconds(40), datagramBudget: Int = 24, receiveBufferBytes: Int = 1 << 20)
    {
        self.maximumDelay = maximumDelay
        self.datagramBudget = datagramBudget
        self.receiveBufferBytes = receiveBufferBytes
    }

    /// For recording: 40 ms at most, 24 datagrams, a 1 MiB receive buffer.
    public static let recording = ReceiveBatching()

    /// For a call that plays what it receives (`conclave join`): 5 ms at most, 8 datagrams, a
    /// 1 MiB receive buffer (room for a few keyframes' worth of packets).
    public static let interactive = ReceiveBatching(maximumDelay: .milliseconds(5), datagramBudget: 8)
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
