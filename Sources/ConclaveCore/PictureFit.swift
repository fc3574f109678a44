/// A width and height in pixels: a picture's, or the room it is drawn in.
public struct PictureSize: Sendable, Hashable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)x\(height)" }
}

/// A decoded picture and the size it was decoded at: the picture itself may have been scaled
/// down on the decoding thread to the size it is drawn at.
///
/// The decoded size is what layer selection compares the drawn size with; the picture's own size
/// is only how many pixels travel on.
public struct DecodedPicture: Sendable, Hashable {
    public var picture: VideoFrame
    public var decodedSize: PictureSize

    /// A picture at the size it was decoded at.
    public init(_ picture: VideoFrame) {
        self.picture = picture
        decodedSize = PictureSize(width: picture.width, height: picture.height)
    }

    /// A picture scaled down from `decodedSize`.
    public init(_ picture: VideoFrame, decodedSize: PictureSize) {
        self.picture = picture
        self.decodedSize = decodedSize
    }
}

/// Fitting pictures into the room they are drawn in, and scaling them down to it.
///
/// A call window without a GPU draws every picture with a software stretch at every present,
/// from a texture of the full decoded size. Scaling the decoded I420 planes down once, on the
/// decoding thread, to the size the picture is drawn at makes the window's colour conversion
/// smaller by the same factor and turns its stretches into plain copies (bench/devices: the
/// window thread's CPU fell by half).
public enum PictureFit {
    /// The size a `width`×`height` picture fills inside `box`, aspect ratio kept: as wide as the
    /// box, or as tall when that is too tall. The call window's layout uses the same rule.
    public static func fitted(width: Int, height: Int, in box: PictureSize) -> PictureSize {
        let boxWidth = max(1, box.width)
        let boxHeight = max(1, box.height)
        guard width > 0, height > 0 else { return PictureSize(width: boxWidth, height: boxHeight) }
        let (tallWidth, tallOverflow) = boxWidth.multipliedReportingOverflow(by: height)
        guard !tallOverflow else { return PictureSize(width: boxWidth, height: boxHeight) }
        let fittedHeight = tallWidth / width
        if fittedHeight <= boxHeight {
            return PictureSize(width: boxWidth, height: max(1, fittedHeight))
        }
        let (wide, wideOverflow) = boxHeight.multipliedReportingOverflow(by: width)
        guard !wideOverflow else { return PictureSize(width: boxWidth, height: boxHeight) }
        return PictureSize(width: max(1, wide / height), height: boxHeight)
    }

    /// The even size to scale a `width`×`height` picture down to for `box`; nil when the picture
    /// is not larger than that (it is drawn as it is, or enlarged by the renderer).
    public static func downscaledSize(width: Int, height: Int, for box: PictureSize) -> PictureSize? {
        guard width > 0, height > 0, box.width > 0, box.height > 0 else { return nil }
        let fit = fitted(width: width, height: height, in: box)
        let target = PictureSize(width: fit.width & ~1, height: fit.height & ~1)
        guard target.width >= 2, target.height >= 2, target.width < width, target.height < height else { return nil }
        return target
    }

    /// Scales one plane down (or copies it) by picking the nearest source pixel for each output
    /// pixel: the sampling SDL's software renderer uses for its stretches, done before the colour
    /// conversion instead of after it.
    ///
    /// `source` holds `sourceHeight` rows of `sourceWidth` bytes, `sourceStride` apart;
    /// `destination` receives `width`×`height` bytes, packed. Nothing is written when a size is not
    /// positive, larger than 65,536, or the stride is shorter than a row.
    public static func scalePlane(
        _ source: UnsafePointer<UInt8>,
        width sourceWidth: Int,
        height sourceHeight: Int,
        stride sourceStride: Int,
        into destination: UnsafeMutablePointer<UInt8>,
        width: Int,
        height: Int
    ) {
        let limit = 1 << 16  // far above any picture; keeps the index arithmetic from overflowing
        guard sourceWidth > 0, sourceHeight > 0, width > 0, height > 0, sourceStride >= sourceWidth,
            sourceWidth <= limit, sourceHeight <= limit, width <= limit, height <= limit
        else { return }
        // The centre of each output pixel, mapped back: (2i + 1) · source / (2 · output).
        let columns = (0..<width).map { min(sourceWidth - 1, (2 * $0 + 1) * sourceWidth / (2 * width)) }
        columns.withUnsafeBufferPointer { columns in
            for row in 0..<height {
                let sourceRow =
                    source + min(sourceHeight - 1, (2 * row + 1) * sourceHeight / (2 * height)) * sourceStride
                let output = destination + row * width
                if width == sourceWidth {
                    output.initialize(from: sourceRow, count: width)
                } else {
                    for column in 0..<width { output[column] = sourceRow[columns[column]] }
                }
            }
        }
    }

    /// Scales a `width`×`height` I420 picture (even sizes), given as its Y, U and V planes, each
    /// with its own stride, into packed I420 of `size` (even) at `destination`, plane by plane
    /// with ``scalePlane(_:width:height:stride:into:width:height:)`` (a copy where the sizes
    /// match). A missing plane (nil, or fewer than three given) or one whose stride is shorter than
    /// its rows is written as zeros, so every byte of the destination is written.
    public static func scalePicture(
        _ planes: [(base: UnsafePointer<UInt8>, stride: Int)?],
        width: Int,
        height: Int,
        into destination: UnsafeMutablePointer<UInt8>,
        size: PictureSize
    ) {
        var offset = 0
        for plane in 0..<3 {
            let (sourceWidth, sourceHeight) = plane == 0 ? (width, height) : (width / 2, height / 2)
            let (outputWidth, outputHeight) = plane == 0 ? (size.width, size.height) : (size.width / 2, size.height / 2)
            if plane < planes.count, let source = planes[plane], source.stride >= sourceWidth, sourceWidth > 0 {
                scalePlane(
                    source.base,
                    width: sourceWidth,
                    height: sourceHeight,
                    stride: source.stride,
                    into: destination + offset,
                    width: outputWidth,
                    height: outputHeight
                )
            } else {
                (destination + offset).initialize(repeating: 0, count: max(0, outputWidth * outputHeight))
            }
            offset += outputWidth * outputHeight
        }
    }
}
