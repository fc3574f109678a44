import ConclaveCore
import ConclavePeerConnection
import Synchronization

/// Janus's `webrtcup` for one handle: Janus's end of the PeerConnection is up.
///
/// Our end being connected is not enough. Janus calls the plugin's `setup_media` when its DTLS
/// handshake is done and only then says `webrtcup`; before that the VideoRoom refuses to
/// subscribe anyone to a publisher's feed ("No such feed") and relays nothing to a subscriber.
/// As DTLS client (our publishers' offers) Janus finishes a flight after us, and as server (our
/// subscribers' answers) it sends its last flight before it sets up the media, so on a loaded
/// machine our side can be ready first in both cases.
final class WebRTCUp: Sendable {
    private let up = Mutex(false)
    private let signal = ChangeSignal()

    /// Janus said `webrtcup` (from the handle's event task).
    func reported() {
        up.withLock { $0 = true }
        signal.notify()
    }

    /// Waits until Janus has said it, or throws at `deadline` (`limit` names the wait's length).
    func wait(until deadline: ContinuousClock.Instant, limit: Duration, role: String) async throws {
        while true {
            let generation = signal.generation
            if up.withLock({ $0 }) { return }
            guard try await signal.wait(after: generation, until: deadline) else {
                throw MediaTransportError(
                    "Janus did not report the \(role)'s PeerConnection up (webrtcup) within \(limit)"
                )
            }
        }
    }
}
