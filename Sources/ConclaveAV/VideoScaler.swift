internal import CFFmpeg
public import ConclaveCore

/// A video picture scaling failed.
public struct VideoScalerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, with the sizes involved.
    public var reason: String

    public var description: String { "cannot scale video: \(reason)" }
}

/// Scales I420 pictures to one output size with libswscale: the smaller pictures of a simulcast
/// sender's lower layers.
///
/// The area filter averages every source pixel a destination pixel covers, which for the halving
/// steps of simulcast is the box filter encoders expect (bilinear would skip pixels and alias
/// the pattern's fine detail). Not thread-safe: one per sending thread, like the encoders.
public final class VideoScaler {
    /// The output width.
    public let width: Int
    /// The output height.
    public let height: Int
    private var context: OpaquePointer?
    /// The output planes' strides and where the U and V planes start: fixed by the output size,
    /// so worked out once rather than per picture.
    private let outputStrides: [Int32]
    private let outputPlaneOffsets: (u: Int, v: Int)

    /// A scaler to `width`×`height` (even, positive).
    public init(width: Int, height: Int) throws(VideoScalerError) {
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else {
            throw VideoScalerError(reason: "output size \(width)x\(height) is not even and positive")
        }
        self.width = width
        self.height = height
        outputStrides = [Int32(width), Int32(width / 2), Int32(width / 2), 0]
        outputPlaneOffsets = (width * height, width * height + (width / 2) * (height / 2))
    }

    deinit { sws_freeContext(context) }

    /// `frame` at the output size, with the same timestamp.
    public func scale(_ frame: VideoFrame) throws(VideoScalerError) -> VideoFrame {
        if frame.width == width && frame.height == height { return frame }
        // Cached: the same context serves every picture for as long as the input size holds.
        context = sws_getCachedContext(
            context,
            Int32(frame.width),
            Int32(frame.height),
            AV_PIX_FMT_YUV420P,
            Int32(width),
            Int32(height),
            AV_PIX_FMT_YUV420P,
            SWS_AREA,
            nil,
            nil,
            nil
        )
        guard let context else {
            throw VideoScalerError(reason: "libswscale refused \(frame.width)x\(frame.height) to \(width)x\(height)")
        }
        let sourceStrides: [Int32] = [Int32(frame.width), Int32(frame.width / 2), Int32(frame.width / 2), 0]
        let (outputStrides, offsets) = (self.outputStrides, outputPlaneOffsets)
        var rows: Int32 = 0
        // libswscale writes every byte of the three planes, so the buffer is not cleared first.
        let data = [UInt8](unsafeUninitializedCapacity: VideoFrame.byteCount(width: width, height: height)) {
            output,
            initialized in
            guard let outputBase = output.baseAddress else { return }
            frame.data.withUnsafeBufferPointer { source in
                guard let sourceBase = source.baseAddress else { return }
                let sources: [UnsafePointer<UInt8>?] = [
                    sourceBase, sourceBase + frame.uOffset, sourceBase + frame.vOffset, nil,
                ]
                let outputs: [UnsafeMutablePointer<UInt8>?] = [
                    outputBase, outputBase + offsets.u, outputBase + offsets.v, nil,
                ]
                rows = sws_scale(context, sources, sourceStrides, 0, Int32(frame.height), outputs, outputStrides)
            }
            initialized = rows == Int32(height) ? output.count : 0
        }
        guard rows == Int32(height) else {
            throw VideoScalerError(reason: "libswscale wrote \(rows) of \(height) rows")
        }
        do {
            return try VideoFrame(width: width, height: height, data: data, rtpTimestamp: frame.rtpTimestamp)
        } catch {
            throw VideoScalerError(reason: "\(error)")
        }
    }
}
