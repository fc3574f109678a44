/// A pixel format a camera can deliver.
public enum CameraPixelFormat: Sendable, Hashable, CustomStringConvertible {
    /// Motion JPEG: compressed, so cameras offer large sizes at full rate this way.
    case mjpeg
    /// Packed 4:2:2 YUYV: uncompressed, cheap to convert, limited by USB bandwidth.
    case yuyv
    /// Any other format, by its V4L2 fourcc (listed, never chosen).
    case other(String)

    /// The format a V4L2 fourcc names.
    public init(fourcc: String) {
        switch fourcc {
        case "MJPG", "JPEG": self = .mjpeg
        case "YUYV": self = .yuyv
        default: self = .other(fourcc)
        }
    }

    /// The name libavdevice's `input_format` option takes, for the formats Conclave converts.
    public var inputFormatName: String? {
        switch self {
        case .mjpeg: "mjpeg"
        case .yuyv: "yuyv422"
        case .other: nil
        }
    }

    public var description: String {
        switch self {
        case .mjpeg: "mjpeg"
        case .yuyv: "yuyv"
        case .other(let fourcc): fourcc
        }
    }
}

/// One size of one pixel format a camera offers, with the frame rates it offers there.
public struct CameraMode: Sendable, Hashable {
    /// The pixel format.
    public var pixelFormat: CameraPixelFormat
    /// The picture size.
    public var size: VideoSize
    /// Whole frames per second offered at this size, highest first; empty when the camera does
    /// not say.
    public var frameRates: [Int]

    /// Creates a mode.
    public init(pixelFormat: CameraPixelFormat, size: VideoSize, frameRates: [Int]) {
        self.pixelFormat = pixelFormat
        self.size = size
        self.frameRates = frameRates.sorted(by: >)
    }
}

/// The mode to ask a camera for.
public struct CameraChoice: Sendable, Hashable {
    /// The pixel format to ask for.
    public var pixelFormat: CameraPixelFormat
    /// The size to ask for.
    public var size: VideoSize
    /// The rate to ask for; nil when the camera did not list its rates.
    public var frameRate: Int?

    /// Creates a choice.
    public init(pixelFormat: CameraPixelFormat, size: VideoSize, frameRate: Int?) {
        self.pixelFormat = pixelFormat
        self.size = size
        self.frameRate = frameRate
    }
}

/// Picks the camera mode closest to what the call wants, from the modes the camera lists.
///
/// The call's pictures are converted to the wanted size whatever the camera gives, so the choice
/// is about quality and cost, in this order:
/// 1. a mode that reaches the wanted rate (a slower camera makes the call repeat pictures);
/// 2. the wanted size exactly, else the smallest size at least as large both ways (scaling down
///    keeps detail), else the largest smaller one;
/// 3. YUYV before MJPEG at equal merit: no JPEG decoding and no compression artefacts. Cameras
///    offer large sizes at full rate only as MJPEG, and rule 1 then picks MJPEG.
///
/// Formats Conclave does not convert are never chosen; nil when none is left, and the camera is
/// then opened with only the size and rate asked, leaving the format to libavdevice.
public enum CameraNegotiation {
    /// The best of `modes` for `size` at `frameRate`.
    public static func choose(from modes: [CameraMode], size: VideoSize, frameRate: Int) -> CameraChoice? {
        let usable = modes.filter { $0.pixelFormat.inputFormatName != nil }
        let best = usable.min {
            rank($0, size: size, frameRate: frameRate).lexicographicallyPrecedes(
                rank($1, size: size, frameRate: frameRate)
            )
        }
        guard let best else { return nil }
        return CameraChoice(
            pixelFormat: best.pixelFormat,
            size: best.size,
            frameRate: rate(of: best, wanted: frameRate)
        )
    }

    /// The rate to ask of `mode`: the wanted one if offered, else the slowest faster one, else
    /// the fastest.
    static func rate(of mode: CameraMode, wanted: Int) -> Int? {
        guard !mode.frameRates.isEmpty else { return nil }
        if mode.frameRates.contains(wanted) { return wanted }
        return mode.frameRates.filter { $0 > wanted }.min() ?? mode.frameRates.max()
    }

    /// Sort key: smaller is better (see the type's rules).
    private static func rank(_ mode: CameraMode, size: VideoSize, frameRate: Int) -> [Int] {
        let reachesRate = mode.frameRates.isEmpty || (mode.frameRates.max() ?? 0) >= frameRate
        // Sizes come from drivers: bounded before they are multiplied, so none can overflow.
        let width = min(max(mode.size.width, 0), 65_536)
        let height = min(max(mode.size.height, 0), 65_536)
        let sizeClass: Int
        let distance: Int
        if width == size.width && height == size.height {
            sizeClass = 0
            distance = 0
        } else if width >= size.width && height >= size.height {
            sizeClass = 1
            distance = width * height - size.width * size.height
        } else {
            sizeClass = 2
            distance = size.width * size.height - min(width, size.width) * min(height, size.height)
        }
        let format = mode.pixelFormat == .yuyv ? 0 : 1
        return [reachesRate ? 0 : 1, sizeClass, distance, format]
    }
}

/// The size pictures are sent at.
public enum CaptureOutputSize: Sendable, Hashable {
    /// Exactly this size (converted from whatever the device gives).
    case fixed(VideoSize)
    /// The device's own size, made even and scaled down (keeping its shape) to fit `limit`.
    case native(limit: VideoSize)

    /// The size for pictures of `width` x `height` from the device.
    public func resolve(width: Int, height: Int) -> VideoSize {
        switch self {
        case .fixed(let size):
            return size
        case .native(let limit):
            guard width > 0, height > 0 else { return limit }
            var outWidth = width
            var outHeight = height
            if outWidth > limit.width || outHeight > limit.height {
                // Scale by the tighter of the two limits, in integers (no rounding up past the limit).
                if outWidth * limit.height >= outHeight * limit.width {
                    outHeight = outHeight * limit.width / outWidth
                    outWidth = limit.width
                } else {
                    outWidth = outWidth * limit.height / outHeight
                    outHeight = limit.height
                }
            }
            return VideoSize(width: max(2, outWidth & ~1), height: max(2, outHeight & ~1))
        }
    }
}
