import ConclaveCore

extension PictureFit {
    /// `picture` scaled to `size` (even, positive) with ``PictureFit/scalePicture(_:width:height:into:size:)``:
    /// the reference the tests compare the decoder's and the window's scaled pictures with.
    public static func scaled(_ picture: VideoFrame, to size: PictureSize) throws(RawMediaError) -> VideoFrame {
        try VideoFrame.validate(width: size.width, height: size.height)
        let count = VideoFrame.byteCount(width: size.width, height: size.height)
        let data = [UInt8](unsafeUninitializedCapacity: count) { output, initialized in
            picture.data.withUnsafeBufferPointer { source in
                guard let output = output.baseAddress, let source = source.baseAddress else { return }
                let chroma = picture.width / 2
                PictureFit.scalePicture(
                    [(source, picture.width), (source + picture.uOffset, chroma), (source + picture.vOffset, chroma)],
                    width: picture.width,
                    height: picture.height,
                    into: output,
                    size: size
                )
                initialized = count
            }
        }
        return try VideoFrame(width: size.width, height: size.height, data: data, rtpTimestamp: picture.rtpTimestamp)
    }
}
