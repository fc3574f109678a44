import ConclaveCore
import Testing

/// Fitting pictures into their boxes and the nearest-pixel scaling of I420 planes, with vectors.
struct PictureFitTests {
    @Test("a picture fills its box's width, or its height when that is too tall; aspect kept")
    func fitted() {
        let box = PictureSize(width: 472, height: 262)
        #expect(PictureFit.fitted(width: 640, height: 480, in: box) == PictureSize(width: 349, height: 262))
        #expect(PictureFit.fitted(width: 1280, height: 360, in: box) == PictureSize(width: 472, height: 132))
        #expect(PictureFit.fitted(width: 320, height: 240, in: box) == PictureSize(width: 349, height: 262))
        // No picture size yet: the whole box. Hostile sizes: no trap.
        #expect(PictureFit.fitted(width: 0, height: 480, in: box) == box)
        #expect(PictureFit.fitted(width: 3, height: Int.max, in: box).height == 262)
        #expect(PictureFit.fitted(width: Int.max, height: Int.max, in: box) == box)
    }

    @Test("pictures are scaled down only when larger than their fit, to even sizes")
    func downscaledSize() {
        let box = PictureSize(width: 472, height: 262)
        #expect(PictureFit.downscaledSize(width: 640, height: 480, for: box) == PictureSize(width: 348, height: 262))
        #expect(PictureFit.downscaledSize(width: 320, height: 240, for: box) == nil)
        #expect(PictureFit.downscaledSize(width: 348, height: 262, for: box) == nil)
        #expect(PictureFit.downscaledSize(width: 640, height: 480, for: PictureSize(width: 1, height: 1)) == nil)
        #expect(PictureFit.downscaledSize(width: 640, height: 480, for: PictureSize(width: 0, height: 100)) == nil)
        #expect(PictureFit.downscaledSize(width: -2, height: 480, for: box) == nil)
    }

    /// Scales `source` (`width`×`height`, rows `stride` apart) to `outputWidth`×`outputHeight`.
    static func scale(
        _ source: [UInt8],
        _ width: Int,
        _ height: Int,
        stride: Int? = nil,
        to outputWidth: Int,
        _ outputHeight: Int
    ) -> [UInt8] {
        var output = [UInt8](repeating: 0xAA, count: max(0, outputWidth * outputHeight))
        source.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { output in
                guard let source = source.baseAddress, let output = output.baseAddress else { return }
                PictureFit.scalePlane(
                    source,
                    width: width,
                    height: height,
                    stride: stride ?? width,
                    into: output,
                    width: outputWidth,
                    height: outputHeight
                )
            }
        }
        return output
    }

    @Test("each output pixel is the source pixel nearest its centre")
    func nearestPixels() {
        let source = (0..<16).map { UInt8($0) }
        // 4x4 to 2x2: the centres of 2x2 blocks map to the lower right pixel of each block.
        #expect(Self.scale(source, 4, 4, to: 2, 2) == [5, 7, 13, 15])
        // 4x4 to 3x2: columns at 4/6, 12/6 and 20/6 (0, 2, 3); rows 1 and 3.
        #expect(Self.scale(source, 4, 4, to: 3, 2) == [4, 6, 7, 12, 14, 15])
        // The same size: a copy.
        #expect(Self.scale(source, 4, 4, to: 4, 4) == source)
        // Enlarging repeats pixels.
        #expect(Self.scale([1, 2, 3, 4], 2, 2, to: 4, 2) == [1, 1, 2, 2, 3, 3, 4, 4])
    }

    @Test("the stride's padding is never read into the picture")
    func strideIsHonoured() {
        // 3x3 pixels in rows of 5 bytes: the last two of each row are padding.
        let padded: [UInt8] = [1, 2, 3, 0xEE, 0xEE, 4, 5, 6, 0xEE, 0xEE, 7, 8, 9, 0xEE, 0xEE]
        #expect(Self.scale(padded, 3, 3, stride: 5, to: 3, 3) == [1, 2, 3, 4, 5, 6, 7, 8, 9])
        #expect(Self.scale(padded, 3, 3, stride: 5, to: 2, 2) == [1, 3, 7, 9])
        for width in 1...12 {
            for height in 1...12 {
                let scaled = Self.scale(padded, 3, 3, stride: 5, to: width, height)
                #expect(!scaled.contains(0xEE) && !scaled.contains(0xAA), "\(width)x\(height)")
            }
        }
    }

    @Test("sizes that make no sense write nothing")
    func badSizesWriteNothing() {
        let source = [UInt8](repeating: 9, count: 16)
        #expect(Self.scale(source, 4, 4, stride: 3, to: 2, 2) == [0xAA, 0xAA, 0xAA, 0xAA])
        #expect(Self.scale(source, 0, 4, to: 2, 2) == [0xAA, 0xAA, 0xAA, 0xAA])
        #expect(Self.scale(source, 4, 4, to: 0, 2) == [])
        #expect(Self.scale(source, 1 << 17, 1, to: 2, 1) == [0xAA, 0xAA])
    }

    @Test("a whole I420 picture scales plane by plane, each with its stride; a missing plane is zeros")
    func scaledPicture() {
        // 4x4 luma 0...15 in rows of 6 bytes (two of padding); 2x2 chroma planes 100... and
        // 200... in rows of 3 (one of padding).
        let luma: [UInt8] = (0..<4).flatMap { row in (0..<4).map { UInt8(row * 4 + $0) } + [0xEE, 0xEE] }
        let u: [UInt8] = [100, 101, 0xEE, 102, 103, 0xEE]
        let v: [UInt8] = [200, 201, 0xEE, 202, 203, 0xEE]
        var output = [UInt8](repeating: 0xAA, count: 6)
        luma.withUnsafeBufferPointer { luma in
            u.withUnsafeBufferPointer { u in
                v.withUnsafeBufferPointer { v in
                    output.withUnsafeMutableBufferPointer { output in
                        guard let luma = luma.baseAddress, let u = u.baseAddress, let v = v.baseAddress,
                            let output = output.baseAddress
                        else { return }
                        PictureFit.scalePicture(
                            [(luma, 6), (u, 3), (v, 3)],
                            width: 4,
                            height: 4,
                            into: output,
                            size: PictureSize(width: 2, height: 2)
                        )
                    }
                }
            }
        }
        #expect(output == [5, 7, 13, 15, 103, 203])
        // The V plane missing, the U plane's stride too short: both written as zeros.
        var partial = [UInt8](repeating: 0xAA, count: 24)
        luma.withUnsafeBufferPointer { luma in
            u.withUnsafeBufferPointer { u in
                partial.withUnsafeMutableBufferPointer { output in
                    guard let luma = luma.baseAddress, let u = u.baseAddress, let output = output.baseAddress else {
                        return
                    }
                    PictureFit.scalePicture(
                        [(luma, 6), (u, 1), nil],
                        width: 4,
                        height: 4,
                        into: output,
                        size: PictureSize(width: 4, height: 4)
                    )
                }
            }
        }
        #expect(Array(partial.prefix(16)) == (0..<16).map { UInt8($0) })
        #expect(Array(partial.suffix(8)) == [UInt8](repeating: 0, count: 8))
    }
}
