import ConclaveRTP
import JanusProtocol
import Logging

/// Runs ``LayerAdaptation`` for every simulcast feed whose layer is `auto`: once a second it
/// samples the subscriber's receive statistics of the feed's video and asks Janus for the layer
/// the state machine settles on.
///
/// A sampling period, not a wait for something: loss is a rate, and the jitter buffers keep
/// cumulative counters on the receive thread, which one read a second costs nothing on the
/// packet path.
struct AutoLayers {
    let subscriber: Subscriber
    /// The layer asked for each feed (nil: no longer subscribed).
    let layer: @Sendable (UInt64) -> VideoLayer?
    /// How each feed's video is shown (the call window), nil without a window or a tile.
    let shown: (@Sendable (UInt64) -> ShownVideo?)?
    let logger: Logger
    var period: Duration = .seconds(1)

    /// Samples until the task is cancelled.
    func run() async {
        var machines: [UInt64: LayerAdaptation] = [:]
        var previous: [String: ReceiveStatistics] = [:]
        var heights = HighestHeights()
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: period)
            } catch {
                return
            }
            let statistics = await subscriber.statistics
            let simulcasting = subscriber.receivedLayers
            // Participants come and go for hours in a long call: forget the ones gone.
            let streams = subscriber.streams
            let present = Set(streams.compactMap(\.feedID))
            heights.keep(only: present)
            machines = machines.filter { present.contains($0.key) }
            let mids = Set(streams.map(\.mid))
            previous = previous.filter { mids.contains($0.key) }
            for stream in streams where stream.type == "video" && stream.isActive {
                guard let feed = stream.feedID, simulcasting[feed] != nil, layer(feed) == .auto,
                    let now = statistics[stream.mid]
                else {
                    if let feed = stream.feedID { machines[feed] = nil }
                    continue
                }
                defer { previous[stream.mid] = now }
                guard let before = previous[stream.mid] else { continue }
                // A stream that started over (a new negotiation of the mid) has no interval yet.
                guard now.packets >= before.packets else { continue }
                let sample = LayerAdaptation.Sample(
                    received: Int(clamping: now.packets - before.packets),
                    lost: Int(clamping: now.lost &- before.lost)
                )
                var ceiling = VideoRoom.Substream.high
                if let received = simulcasting[feed], let shown = shown?(feed) {
                    let highest = heights.note(feed: feed, pictureHeight: shown.pictureHeight, received: received)
                    ceiling = LayerAdaptation.ceiling(drawnHeight: shown.drawnHeight, highestHeight: highest)
                }
                var machine = machines[feed] ?? LayerAdaptation(initial: simulcasting[feed] ?? .high)
                let change = machine.observe(sample, ceiling: ceiling)
                machines[feed] = machine
                guard let change else { continue }
                logger.info(
                    "auto layer",
                    metadata: [
                        "feed": "\(feed)", "substream": "\(change)",
                        "loss": "\(Int(sample.lossFraction * 100))%", "ceiling": "\(ceiling)",
                    ]
                )
                do {
                    try await subscriber.selectLayer(change, feedID: feed)
                } catch {
                    logger.warning("could not change the layer", metadata: ["feed": "\(feed)", "error": "\(error)"])
                }
            }
        }
    }
}

/// The height of each feed's highest substream, learnt from the pictures shown: taken only when
/// two samples in a row agree on the layer received and the picture's height, since Janus reports
/// a switch a little before or after the window shows its first picture.
package struct HighestHeights {
    private var last: [UInt64: (received: VideoRoom.Substream, pictureHeight: Int)] = [:]
    private var known: [UInt64: Int] = [:]

    package init() {}

    /// Notes one sample; returns the height known for the feed.
    package mutating func note(feed: UInt64, pictureHeight: Int, received: VideoRoom.Substream) -> Int? {
        if let before = last[feed], before.received == received, before.pictureHeight == pictureHeight,
            let height = LayerAdaptation.highestHeight(pictureHeight: pictureHeight, received: received)
        {
            known[feed] = height
        }
        last[feed] = (received, pictureHeight)
        return known[feed]
    }

    /// Forgets every feed but `feeds` (the ones still subscribed).
    package mutating func keep(only feeds: Set<UInt64>) {
        last = last.filter { feeds.contains($0.key) }
        known = known.filter { feeds.contains($0.key) }
    }
}
