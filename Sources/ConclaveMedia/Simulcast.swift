import ConclaveAV
public import ConclaveCore

/// One layer of a simulcast video: its picture size and its bitrates.
public struct SimulcastLayer: Sendable, Hashable {
    /// Picture width (even).
    public var width: Int
    /// Picture height (even).
    public var height: Int
    /// The bitrate the layer is sent at when the estimate allows it, bits per second.
    public var targetBitrate: Int
    /// The least bitrate the layer is worth sending at; below it the layer pauses (the lowest
    /// layer never does).
    public var minimumBitrate: Int

    public init(width: Int, height: Int, targetBitrate: Int, minimumBitrate: Int) {
        self.width = width
        self.height = height
        self.targetBitrate = targetBitrate
        self.minimumBitrate = minimumBitrate
    }
}

/// A simulcast plan that cannot be made.
public enum SimulcastError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not 1, 2 or 3 layers.
    case layerCount(Int)
    /// The lowest layer would be smaller than 16 pixels on a side.
    case tooSmall(width: Int, height: Int, layers: Int)

    public var description: String {
        switch self {
        case .layerCount(let count): "simulcast sends 2 or 3 layers (1 for none), not \(count)"
        case .tooSmall(let width, let height, let layers):
            "\(width)x\(height) is too small for \(layers) simulcast layers (the lowest would be under 16 pixels)"
        }
    }
}

/// How a simulcast video is layered and how a bitrate estimate is divided among its layers.
public enum SimulcastPlan {
    /// `count` layers for pictures of `width`×`height`, lowest first. Each layer is half the size
    /// of the one above, as libwebrtc scales them (and as subscribers assume when they pick a layer
    /// for a tile), and gets a third of its bitrate; the top layer's is `bitrate`. A layer is
    /// worth sending from half its target.
    public static func layers(count: Int, width: Int, height: Int, bitrate: Int) throws(SimulcastError)
        -> [SimulcastLayer]
    {
        guard (1...3).contains(count) else { throw .layerCount(count) }
        var layers: [SimulcastLayer] = []
        var (layerWidth, layerHeight, layerBitrate) = (width, height, max(bitrate, 1))
        for _ in 0..<count {
            guard layerWidth >= 16, layerHeight >= 16 else {
                throw .tooSmall(width: width, height: height, layers: count)
            }
            layers.insert(
                SimulcastLayer(
                    width: layerWidth,
                    height: layerHeight,
                    targetBitrate: layerBitrate,
                    minimumBitrate: layerBitrate / 2
                ),
                at: 0
            )
            // Halved and kept even: I420 needs even sizes.
            layerWidth = layerWidth / 4 * 2
            layerHeight = layerHeight / 4 * 2
            layerBitrate /= 3
        }
        return layers
    }

    /// Divides `total` bits per second among `layers` (lowest first): the bitrate of each layer
    /// sent, nil for a paused one.
    ///
    /// Layers are added from the lowest up for as long as the ones below get their target and
    /// the new one at least its minimum; each gets its target, except the highest sent, which gets
    /// what is left up to its target. The lowest layer is always sent, at its target or `total`
    /// if that is less. So a falling estimate first thins the top layer, then drops it whole,
    /// instead of starving every layer at once.
    public static func allocate(_ total: Int, among layers: [SimulcastLayer]) -> [Int?] {
        guard let lowest = layers.first else { return [] }
        var rates: [Int?] = Array(repeating: nil, count: layers.count)
        rates[0] = max(min(total, lowest.targetBitrate), 1)
        var below = lowest.targetBitrate
        for index in layers.indices.dropFirst() {
            let layer = layers[index]
            guard below + layer.minimumBitrate <= total else { break }
            // The layer below gets its full target now that one is sent above it.
            rates[index - 1] = layers[index - 1].targetBitrate
            rates[index] = min(total - below, layer.targetBitrate)
            below += layer.targetBitrate
        }
        return rates
    }
}

/// Raw pictures encoded as a simulcast video: each picture scaled to every layer's size and
/// encoded by that layer's encoder, the frames marked with their layer
/// (``EncodedFrame/simulcastLayer``) and sharing the picture's timestamp.
///
/// ``setBitrate(_:)`` takes the whole estimate (REMB) and divides it with
/// ``SimulcastPlan/allocate(_:among:)``; a paused layer is not encoded at all, and starts again
/// with a keyframe, so that a subscriber Janus moves onto it can decode from its first frame.
/// A keyframe request makes every layer's next frame a keyframe: Janus asks on all of a
/// publisher's SSRCs when any subscriber needs one.
public final class SimulcastVideoSource: EncodedFrameSource {
    /// The layers, lowest first.
    public let layers: [SimulcastLayer]
    public let codec: MediaCodec
    /// The bitrate of each layer now, nil for a paused one.
    public private(set) var rates: [Int?]
    private let raw: any VideoFrameSource
    private let encoders: [any VideoEncoding]
    private let scalers: [VideoScaler]
    private var keyframeRequested = false
    /// Layers that must start on a keyframe (resumed after a pause).
    private var resumed: Set<Int> = []
    private var index = 0
    private var queue: [TimedFrame] = []

    /// Encodes `raw` in `layers` (from ``SimulcastPlan/layers(count:width:height:bitrate:)``)
    /// with `codec`'s encoder.
    public init(raw: any VideoFrameSource, codec: MediaCodec, layers: [SimulcastLayer]) throws {
        self.raw = raw
        self.codec = codec
        self.layers = layers
        let frameRate = raw.timeline.rateNumerator
        encoders = try layers.map {
            try VideoEncoderSettings(
                codec: codec,
                width: $0.width,
                height: $0.height,
                frameRate: frameRate,
                bitrate: $0.targetBitrate
            ).makeEncoder()
        }
        scalers = try layers.map { try VideoScaler(width: $0.width, height: $0.height) }
        rates = layers.map(\.targetBitrate)
    }

    public var simulcastLayers: Int { layers.count }

    public var simulcastLayersSent: Int { rates.count { $0 != nil } }

    public func requestKeyframe() { keyframeRequested = true }

    public func setBitrate(_ bitsPerSecond: Int) throws {
        let next = SimulcastPlan.allocate(bitsPerSecond, among: layers)
        for layer in layers.indices where next[layer] != rates[layer] {
            guard let rate = next[layer] else { continue }
            if rates[layer] == nil { resumed.insert(layer) }
            try encoders[layer].setBitrate(rate)
        }
        rates = next
    }

    public func waitUntilReady() async throws {
        if queue.isEmpty { try await raw.waitUntilReady() }
    }

    public func nextFrame() throws -> TimedFrame? {
        while queue.isEmpty {
            guard let picture = try raw.nextFrame() else { return nil }
            let due = raw.timeline.mediaTime(forFrame: index)
            index += 1
            let forced = keyframeRequested
            keyframeRequested = false
            for layer in layers.indices where rates[layer] != nil {
                let scaled = try scalers[layer].scale(picture)
                let force = forced || resumed.remove(layer) != nil
                for var frame in try encoders[layer].encode(scaled, forceKeyframe: force) {
                    frame.simulcastLayer = layer
                    queue.append(TimedFrame(frame: frame, mediaTime: due))
                }
            }
        }
        return queue.removeFirst()
    }
}
