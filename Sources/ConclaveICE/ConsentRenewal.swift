/// Whether a lost consent to send (RFC 7675) is renewed on the pair in use instead of failing ICE.
///
/// libnice 0.1.21 checks consent every 4 to 6 s with a single binding request that it never
/// retransmits, and declares consent lost 10 s after the last answer, where RFC 7675 lets it run
/// for 30 s. One request lost on the way fails ICE about half the time (when the next check
/// comes more than 10 s after the last answer): at 5% loss, once or twice in five minutes, each
/// time followed by the call's recovery, an ICE restart and half a second without media
/// (`bench/devices/loss` heard it as missing beeps).
///
/// Media still arriving from the peer shows the pair alive and the peer still sending to us, so
/// a consent lost while it arrives is renewed on the same pair (`nice_agent_set_selected_pair`,
/// which grants consent afresh and restarts its timer). The direction toward the peer is not
/// proven by that, so a renewal is allowed once in ``spacing``: a path that lost its way out
/// fails at the next lost consent, about 20 s after it broke instead of 10, still within the
/// RFC's 30 s. A relayed pair is never renewed (libnice would let its TURN allocation go on
/// reselecting it), and neither is one without media from the peer, which is a real outage.
///
/// Pure arithmetic on instants of one monotonic clock, as durations from its origin; not
/// thread-safe.
struct ConsentRenewal: Sendable {
    /// Media from the peer at most this old shows the pair alive. Janus sends RTCP to a
    /// publisher about every second, and media to a subscriber all the time.
    static let inboundWindow: Duration = .seconds(3)
    /// The least time between two renewals.
    static let spacing: Duration = .seconds(30)

    /// Why a lost consent fails ICE.
    enum Refusal: Sendable, Hashable, CustomStringConvertible {
        /// Nothing has come from the peer within ``inboundWindow``.
        case noRecentMedia
        /// The pair goes through a TURN server.
        case relayed
        /// Consent was renewed less than ``spacing`` ago.
        case renewedRecently

        var description: String {
            switch self {
            case .noRecentMedia: "no media from the peer in the last \(ConsentRenewal.inboundWindow)"
            case .relayed: "the pair is relayed"
            case .renewedRecently: "consent was already renewed in the last \(ConsentRenewal.spacing)"
            }
        }
    }

    /// What to do about a lost consent.
    enum Decision: Sendable, Hashable {
        case renew
        case fail(Refusal)
    }

    /// When consent was last renewed.
    private var lastRenewal: Duration?

    /// Decides at `now` for a pair last heard from at `lastInbound` (nil: never). A renewal is
    /// counted from the decision, whether or not libnice then takes it.
    mutating func decide(at now: Duration, lastInbound: Duration?, relayed: Bool) -> Decision {
        if relayed { return .fail(.relayed) }
        guard let lastInbound, now - lastInbound <= Self.inboundWindow else { return .fail(.noRecentMedia) }
        if let lastRenewal, now - lastRenewal < Self.spacing { return .fail(.renewedRecently) }
        lastRenewal = now
        return .renew
    }
}
