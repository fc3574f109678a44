public import ConclaveCore

/// The layout of the machine-readable code strip at the top of every `pattern` picture.
///
/// The strip is two rows of 16 square cells, each cell either black (Y 16) or white (Y 235),
/// reading the 32 bits MSB first, row by row: a 24-bit frame number and a CRC-8 of it. Cells are at
/// least 4 pixels and usually 8 to 40, so several whole macroblocks of flat colour survive even
/// harsh lossy coding; the reader samples only the centre of each cell.
public struct PatternLayout: Sendable, Hashable {
    /// Cells per row.
    public static let columns = 16
    /// Rows of cells.
    public static let rows = 2
    /// Bits of frame number (the rest of the 32 is the CRC).
    public static let numberBits = 24
    /// Luma of a 0 bit.
    public static let black: UInt8 = 16
    /// Luma of a 1 bit, and of the flash.
    public static let white: UInt8 = 235

    /// Picture width.
    public let width: Int
    /// Picture height.
    public let height: Int
    /// Side of a cell in pixels.
    public let cell: Int

    /// The layout for a picture size; fails when the picture is odd-sized or too small for the strip.
    public init(width: Int, height: Int) throws(RawMediaError) {
        try VideoFrame.validate(width: width, height: height)
        let cell = (width / PatternLayout.columns) & ~1
        guard cell >= 4, height >= cell * PatternLayout.rows + 8 else {
            throw .unsupportedResolution(
                width: width,
                height: height,
                reason: "the test pattern needs at least 64x16 pixels"
            )
        }
        self.width = width
        self.height = height
        self.cell = cell
    }

    /// Height of the code strip.
    public var stripHeight: Int { cell * PatternLayout.rows }

    /// The 32 bits that encode `frameNumber` (mod 2^24).
    public static func codeWord(for frameNumber: Int) -> UInt32 {
        let number = UInt32(truncatingIfNeeded: frameNumber) & 0xFF_FFFF
        return number << 8 | UInt32(crc8(number))
    }

    /// CRC-8 (polynomial 0x07) over the three bytes of a 24-bit number.
    static func crc8(_ number: UInt32) -> UInt8 {
        var crc: UInt8 = 0xA5  // non-zero start: an all-black or blank strip never checks out
        for shift in [16, 8, 0] {
            crc ^= UInt8(truncatingIfNeeded: number >> UInt32(shift))
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return crc
    }
}

/// The `pattern` video source: a moving test picture carrying its frame number, with a white flash
/// at every whole second in step with the `tone` source's beep.
///
/// Below the code strip the picture is a diagonal luma ramp that scrolls by 4 pixels per frame, a
/// colour wash, and a dark square bouncing across, so encoders do real motion work. On the first
/// frame of each second everything below the strip is white instead: measuring when that frame is
/// shown against when the beep is heard gives the A/V offset of a recording.
public final class PatternSource: VideoFrameSource {
    public let timeline: FrameTimeline
    public var width: Int { layout.width }
    public var height: Int { layout.height }
    /// The strip geometry.
    public let layout: PatternLayout
    /// How many frames to produce; nil for an endless stream.
    public let frameLimit: Int?
    /// The number of the next frame.
    public private(set) var frameIndex = 0

    /// The frame rate when none is asked for: 30, what cameras and every peer send by default, so
    /// that a test call looks and loads the network like a real one.
    public static let defaultFrameRate = 30

    /// Creates a pattern of the given size and rate.
    public init(
        width: Int,
        height: Int,
        frameRate: Int = PatternSource.defaultFrameRate,
        frameLimit: Int? = nil,
        initialTimestamp: UInt32 = 0
    )
        throws(RawMediaError)
    {
        guard frameRate > 0, frameRate <= 240 else {
            throw .unsupportedResolution(width: width, height: height, reason: "frame rate \(frameRate) out of range")
        }
        self.layout = try PatternLayout(width: width, height: height)
        self.timeline = .video(frameRate: frameRate, initialTimestamp: initialTimestamp)
        self.frameLimit = frameLimit
    }

    public func nextFrame() throws -> VideoFrame? {
        if let frameLimit, frameIndex >= frameLimit { return nil }
        let index = frameIndex
        frameIndex += 1
        return try PatternSource.render(
            layout: layout,
            frameNumber: index,
            flash: timeline.startsSecond(frame: index),
            rtpTimestamp: timeline.rtpTimestamp(forFrame: index)
        )
    }

    /// Draws one picture.
    public static func render(layout: PatternLayout, frameNumber: Int, flash: Bool, rtpTimestamp: UInt32)
        throws(RawMediaError) -> VideoFrame
    {
        let width = layout.width
        let height = layout.height
        var data = [UInt8](repeating: 128, count: VideoFrame.byteCount(width: width, height: height))
        let word = PatternLayout.codeWord(for: frameNumber)
        let strip = layout.stripHeight
        let chromaWidth = width / 2
        data.withUnsafeMutableBufferPointer { pixels in
            // Code strip: luma cells; chroma stays neutral (128) so colour never disturbs the bits.
            let codeWidth = layout.cell * PatternLayout.columns
            for y in 0..<strip {
                let row = y / layout.cell
                for x in 0..<width {
                    let value: UInt8
                    if x < codeWidth {
                        let bit = row * PatternLayout.columns + x / layout.cell
                        value = (word >> UInt32(31 - bit)) & 1 == 1 ? PatternLayout.white : PatternLayout.black
                    } else {
                        value = PatternLayout.black
                    }
                    pixels[y * width + x] = value
                }
            }
            let box = max(8, height / 6) & ~1
            let travel = max(1, width - box)
            let phase = (frameNumber * 6) % (2 * travel)
            let boxX = phase < travel ? phase : 2 * travel - phase
            let boxY = strip + (height - strip - box) / 2
            for y in strip..<height {
                for x in 0..<width {
                    let value: UInt8
                    if flash {
                        value = PatternLayout.white
                    } else if x >= boxX, x < boxX + box, y >= boxY, y < boxY + box {
                        value = 40
                    } else {
                        value = UInt8(48 + (x + y + frameNumber * 4) % 128)
                    }
                    pixels[y * width + x] = value
                }
            }
            guard !flash else { return }
            let uBase = layout.width * layout.height
            let vBase = uBase + chromaWidth * (height / 2)
            for y in (strip / 2)..<(height / 2) {
                for x in 0..<chromaWidth {
                    pixels[uBase + y * chromaWidth + x] = UInt8(96 + (x * 64 / max(1, chromaWidth)))
                    pixels[vBase + y * chromaWidth + x] = UInt8(96 + ((y + frameNumber) % 64))
                }
            }
        }
        return try VideoFrame(width: width, height: height, data: data, rtpTimestamp: rtpTimestamp)
    }
}

/// What a decoded `pattern` picture says about itself.
public struct PatternReading: Sendable, Hashable {
    /// The frame number (mod 2^24) from the code strip.
    public var frameNumber: Int
    /// Whether the picture is a sync flash (white below the strip).
    public var isFlash: Bool
}

/// Recovers the frame number and flash state from a decoded `pattern` picture.
public enum PatternReader {
    /// Reads a picture; returns nil when the code strip's CRC does not match (not a pattern picture,
    /// or damaged beyond recognition).
    public static func read(_ frame: VideoFrame) -> PatternReading? {
        guard let layout = try? PatternLayout(width: frame.width, height: frame.height) else { return nil }
        var word: UInt32 = 0
        let margin = layout.cell / 4
        for bit in 0..<(PatternLayout.rows * PatternLayout.columns) {
            let row = bit / PatternLayout.columns
            let column = bit % PatternLayout.columns
            let left = column * layout.cell + margin
            let top = row * layout.cell + margin
            let span = layout.cell - 2 * margin
            var sum = 0
            for y in top..<(top + span) {
                for x in left..<(left + span) { sum += Int(frame.data[y * frame.width + x]) }
            }
            let mean = sum / max(1, span * span)
            word = word << 1 | (mean >= 128 ? 1 : 0)
        }
        let number = word >> 8
        guard UInt8(word & 0xFF) == PatternLayout.crc8(number) else { return nil }
        // Flash: sample a sparse grid below the strip.
        var sum = 0
        var count = 0
        var y = layout.stripHeight + 2
        while y < frame.height {
            var x = 1
            while x < frame.width {
                sum += Int(frame.data[y * frame.width + x])
                count += 1
                x += 7
            }
            y += 5
        }
        let isFlash = count > 0 && sum / count >= 200
        return PatternReading(frameNumber: Int(number), isFlash: isFlash)
    }
}
