import ConclavePeerConnection
import JanusClient

extension MediaTransport {
    /// Trickles our local candidates (and the end marker) to Janus on `handle`, until the
    /// transport closes. Returns the task doing it.
    func trickleCandidates(to handle: JanusHandle) -> Task<Void, Never> {
        let candidates = ice.localCandidates
        return Task { [self] in
            for await event in candidates {
                switch event {
                case .candidate(let line):
                    guard admitsLocalCandidate(line) else { continue }
                    try? await handle.trickle(.candidate(line, sdpMid: "0", sdpMLineIndex: 0))
                case .endOfCandidates:
                    try? await handle.trickle(.completed)
                }
            }
        }
    }
}
