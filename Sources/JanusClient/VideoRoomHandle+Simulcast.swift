import JanusProtocol

extension VideoRoomHandle {
    /// Asks Janus for a simulcast substream (and temporal layer) per m-line of this subscriber.
    ///
    /// Returns once Janus has taken the request (`configured`); the switch itself happens at the
    /// next keyframe of the wanted substream (Janus asks the publisher for one) and is reported as
    /// ``VideoRoom/Event/layerSwitched(mid:substream:temporal:)`` on ``events``.
    nonisolated(nonsending) public func configureLayers(_ layers: [VideoRoom.LayerChoice]) async throws {
        guard !layers.isEmpty else { return }
        _ = try await request(VideoRoom.configureSubscriber(layers: layers), name: "configure layers")
    }
}
