import JanusProtocol

/// The `auto` layer choice for one simulcast feed: a pure state machine fed once a second with
/// what the receive side saw, answering which substream to ask Janus for.
///
/// Janus 1.1.2 does not choose for the subscriber: it ignores a subscriber's REMB (its handler
/// has a "should we do something about it?" FIXME) and sends no transport-wide feedback towards
/// subscribers, and its only automatic move is the `fallback` to a lower substream when the wanted
/// one sends nothing at all. So the receiver decides from its own view of the path: packet loss
/// (after retransmissions) on the video stream. Loss on a path that took the lower layer well is
/// the sign of a bottleneck (a rate limit drops the excess), so:
///
/// - sustained loss (``Policy/lossToStepDown`` in ``Policy/samplesToStepDown`` samples in a row)
///   steps one layer down at once, and so does one sample with heavy loss
///   (``Policy/heavyLoss``): a rate limit well below the layer's rate drops a third or more of
///   its packets, and waiting a second more for a second sample only prolongs a broken picture;
/// - after ``Policy/quietSamplesToProbe`` samples without loss at a layer below the highest, it
///   probes one layer up; a probe that meets loss within ``Policy/probeSamples`` goes back down
///   and doubles the quiet time before the next probe (up to ``Policy/maximumQuietSamples``),
///   so a path that cannot take the higher layer is not flooded every few seconds; a probe that
///   holds resets the quiet time.
public struct LayerAdaptation: Sendable, Hashable {
    /// The thresholds.
    public struct Policy: Sendable, Hashable {
        /// Lost over expected packets in one sample that counts as loss.
        public var lossToStepDown: Double = 0.04
        /// Consecutive lossy samples that step down.
        public var samplesToStepDown: Int = 2
        /// Loss in one sample that steps down without waiting for the next.
        public var heavyLoss: Double = 0.2
        /// Loss below this is quiet.
        public var quietLoss: Double = 0.005
        /// Quiet samples before the first probe up.
        public var quietSamplesToProbe: Int = 6
        /// The longest wait between probes, after repeated failed ones.
        public var maximumQuietSamples: Int = 24
        /// Samples after a probe in which loss sends it back down.
        public var probeSamples: Int = 3

        public init() {}
    }

    /// One second (or so) of the video stream as the receiver saw it.
    public struct Sample: Sendable, Hashable {
        /// Packets that arrived in the interval.
        public var received: Int
        /// Packets lost in the interval (expected minus received, after retransmissions).
        public var lost: Int

        public init(received: Int, lost: Int) {
            self.received = received
            self.lost = lost
        }

        /// Lost over expected, 0 when nothing was expected.
        public var lossFraction: Double {
            let lost = max(0, lost)
            let expected = max(0, received) + lost
            return expected > 0 ? Double(lost) / Double(expected) : 0
        }
    }

    public let policy: Policy
    /// The substream to ask for now.
    public private(set) var target: VideoRoom.Substream
    /// The highest substream worth receiving, from how the video is shown (``ceiling(for:)``).
    private var ceiling: VideoRoom.Substream = .high
    private var lossySamples = 0
    private var quietSamples = 0
    private var quietSamplesNeeded: Int
    /// Samples left in the probe just made, nil when not probing.
    private var probeLeft: Int?

    /// Starts at `initial` (the highest by default: most paths take it, and a path that does not
    /// shows it within two seconds).
    public init(initial: VideoRoom.Substream = .high, policy: Policy = Policy()) {
        self.policy = policy
        target = initial
        quietSamplesNeeded = policy.quietSamplesToProbe
    }

    /// Takes one sample, and the highest substream worth receiving for how the video is shown
    /// (`.high` without a window); returns the new target when it changed.
    ///
    /// A ceiling below the target moves the target down to it at once: a smaller tile needs no
    /// evidence. A ceiling rising above the target (a tile grown, the window made fullscreen) is a
    /// probe up at once when the path is not losing packets, held or abandoned like any probe.
    public mutating func observe(_ sample: Sample, ceiling: VideoRoom.Substream = .high) -> VideoRoom.Substream? {
        let previousCeiling = self.ceiling
        self.ceiling = ceiling
        if target > ceiling {
            target = ceiling
            lossySamples = 0
            quietSamples = 0
            probeLeft = nil
            return ceiling
        }
        // No packets at all says nothing about the path (a paused or muted sender).
        guard sample.received > 0 || sample.lost > 0 else { return nil }
        let loss = sample.lossFraction
        if ceiling > previousCeiling, target >= previousCeiling, loss < policy.lossToStepDown, probeLeft == nil,
            let higher = target.higher
        {
            lossySamples = 0
            quietSamples = 0
            probeLeft = policy.probeSamples
            target = higher
            return higher
        }
        if loss >= policy.lossToStepDown {
            lossySamples += 1
            quietSamples = 0
        } else {
            lossySamples = 0
            quietSamples = loss < policy.quietLoss ? quietSamples + 1 : 0
        }
        if let left = probeLeft {
            if lossySamples > 0, let lower = target.lower {
                // The probe did not hold: back down, and wait longer before the next one.
                probeLeft = nil
                lossySamples = 0
                quietSamples = 0
                quietSamplesNeeded = min(quietSamplesNeeded * 2, policy.maximumQuietSamples)
                target = lower
                return lower
            }
            probeLeft = left > 1 ? left - 1 : nil
            if probeLeft == nil { quietSamplesNeeded = policy.quietSamplesToProbe }
            return nil
        }
        if lossySamples >= policy.samplesToStepDown || loss >= policy.heavyLoss, let lower = target.lower {
            lossySamples = 0
            quietSamples = 0
            target = lower
            return lower
        }
        if quietSamples >= quietSamplesNeeded, let higher = target.higher, higher <= ceiling {
            quietSamples = 0
            probeLeft = policy.probeSamples
            target = higher
            return higher
        }
        return nil
    }
}

/// How one participant's video is shown (the call window's tile): the height it is drawn at and
/// the height of the picture received, both in pixels.
public struct ShownVideo: Sendable, Hashable {
    public var drawnHeight: Int
    public var pictureHeight: Int

    public init(drawnHeight: Int, pictureHeight: Int) {
        self.drawnHeight = drawnHeight
        self.pictureHeight = pictureHeight
    }
}

extension LayerAdaptation {
    /// The lowest substream whose pictures are at least (nearly) as tall as they are drawn, given
    /// the height of the highest one; `.high` when the highest is not known.
    ///
    /// Each substream is taken to be half the height of the one above: the scaling browsers
    /// (libwebrtc: 1/4, 1/2, 1) and Conclave use, and what Janus rooms see from them. A picture
    /// drawn down to 90 % of its height is still taken as sharp enough.
    public static func ceiling(drawnHeight: Int, highestHeight: Int?) -> VideoRoom.Substream {
        guard let highestHeight, highestHeight > 0, drawnHeight > 0 else { return .high }
        for substream in VideoRoom.Substream.allCases.sorted() {
            let steps = VideoRoom.Substream.high.rawValue - substream.rawValue
            let height = highestHeight >> steps
            if Double(height) >= 0.9 * Double(drawnHeight) { return substream }
        }
        return .high
    }

    /// The height of the highest substream, from a picture of `pictureHeight` received on
    /// `substream`; nil when it would not fit an `Int`.
    public static func highestHeight(pictureHeight: Int, received substream: VideoRoom.Substream) -> Int? {
        let steps = VideoRoom.Substream.high.rawValue - substream.rawValue
        guard pictureHeight > 0, pictureHeight <= Int.max >> steps else { return nil }
        return pictureHeight << steps
    }
}
