import ConclaveCore
import JanusProtocol

/// Something that consumes what a call receives: the recorder, a status view, a test.
///
/// The call (or `conclave record`) fans everything the subscription receives out to its
/// observers. Frames (`received`) are passed in order on the subscription's receive thread, as
/// they complete and are decrypted; room changes and sender reports come from tasks. So
/// implementations must return quickly (hand heavy work to a queue of their own; blocking would
/// delay packets) and must be thread-safe.
public protocol CallMediaObserver: Sendable {
    /// A publisher's feed appeared (or reappeared after a rejoin with a new feed id).
    func participantJoined(feedID: UInt64, display: String?)
    /// A publisher's feed is gone (unpublished or left).
    func participantLeft(feedID: UInt64)
    /// A decrypted frame, or a frame that did not decrypt.
    func received(_ media: ReceivedMedia)
    /// A sender report of a subscribed stream (the NTP/RTP mapping for synchronization).
    func senderReport(_ report: SubscribedSenderReport)
    /// Janus now forwards `substream` of the simulcast video of `feedID` (after a keyframe); has
    /// a default that ignores it.
    func layerReceived(feedID: UInt64, substream: VideoRoom.Substream)
}

extension CallMediaObserver {
    /// Ignores layer switches: only observers that show or act on layers implement it.
    public func layerReceived(feedID: UInt64, substream: VideoRoom.Substream) {}
}
