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
    let logger: Logger
    var period: Duration = .seconds(1)

    /// Samples until the task is cancelled.
    func run() async {
        var machines: [UInt64: LayerAdaptation] = [:]
        var previous: [String: ReceiveStatistics] = [:]
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: period)
            } catch {
                return
            }
            let statistics = await subscriber.statistics
            let simulcasting = subscriber.receivedLayers
            for stream in subscriber.streams where stream.type == "video" && stream.isActive {
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
                var machine = machines[feed] ?? LayerAdaptation(initial: simulcasting[feed] ?? .high)
                let change = machine.observe(sample)
                machines[feed] = machine
                guard let change else { continue }
                logger.info(
                    "auto layer",
                    metadata: [
                        "feed": "\(feed)", "substream": "\(change)",
                        "loss": "\(Int(sample.lossFraction * 100))%",
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
