public import ConclaveCore

/// What a key press in the call window (or closing it) asks of the call. The window handles
/// fullscreen itself and reports it too.
public enum WindowCommand: Sendable, Hashable {
    /// `m`: mute or unmute the microphone.
    case toggleMute
    /// `v`: turn the camera off or on.
    case toggleCamera
    /// `s`: start or stop sharing the screen.
    case toggleScreenShare
    /// `f`: the window went to or left fullscreen.
    case toggleFullscreen
    /// `q`, or the window was closed: leave the call.
    case leave
}

/// The keys the window answers to, for tests that press them without a keyboard.
public enum WindowKey: Sendable, Hashable, CaseIterable {
    case m, v, s, f, q
    /// Held: the status table.
    case tab
}

/// A participant's indicators, drawn at the bottom right of their tile.
public struct ParticipantState: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Their microphone is muted.
    public static let muted = ParticipantState(rawValue: 1 << 0)
    /// They send no video.
    public static let videoOff = ParticipantState(rawValue: 1 << 1)
    /// Their frames do not decrypt: a key problem (the call's key is not the one they use).
    public static let undecryptable = ParticipantState(rawValue: 1 << 2)
    /// Their media arrives with losses or late.
    public static let poorConnection = ParticipantState(rawValue: 1 << 3)
}

/// One indicator: its text and its colour (RGB).
public enum Indicator: Int, Sendable, Hashable, CaseIterable {
    case muted, videoOff, keyProblem, poorConnection

    /// The state bit it shows.
    public var state: ParticipantState {
        switch self {
        case .muted: .muted
        case .videoOff: .videoOff
        case .keyProblem: .undecryptable
        case .poorConnection: .poorConnection
        }
    }

    public var text: String {
        switch self {
        case .muted: "muted"
        case .videoOff: "video off"
        case .keyProblem: "key problem"
        case .poorConnection: "poor connection"
        }
    }

    /// The box's colour: distinct enough to tell apart at a glance (and in a test's pixels).
    public var color: RGB {
        switch self {
        case .muted: RGB(200, 30, 30)
        case .videoOff: RGB(90, 90, 90)
        case .keyProblem: RGB(230, 120, 0)
        case .poorConnection: RGB(200, 190, 0)
        }
    }
}

/// A colour of the window.
public struct RGB: Sendable, Hashable {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8

    public init(_ red: UInt8, _ green: UInt8, _ blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    /// The active speaker's border.
    public static let speaker = RGB(80, 200, 120)
}

/// Where things go in the window: pure geometry, shared by the renderer and by tests that read
/// the window back.
public enum CallWindowLayout {
    /// Space around each picture inside its tile; the active speaker's border is drawn there.
    public static let border = 4
    /// An indicator box's height, and the gap between boxes.
    public static let indicatorHeight = 22
    static let indicatorGap = 4
    static let indicatorWidth = 120

    /// The tiles of `count` participants in a window of `width` x `height`.
    public static func tiles(count: Int, width: Int, height: Int) -> [TileRect] {
        TileGrid.rectangles(count: count, width: width, height: height)
    }

    /// The room a picture has in `tile`: the tile less the border on each side.
    public static func pictureBox(in tile: TileRect) -> PictureSize {
        PictureSize(width: max(1, tile.width - 2 * border), height: max(1, tile.height - 2 * border))
    }

    /// Where a picture of `pictureWidth` x `pictureHeight` is drawn in `tile`: as large as fits
    /// inside the border, aspect ratio kept, centred.
    ///
    /// A picture that is already that size to within a pixel or two (one the decoder scaled down
    /// to this box and rounded to even sizes, ``PictureFit/downscaledSize(width:height:for:)``)
    /// is drawn at its own size: a plain copy, where a stretch by a pixel would cost the software
    /// renderer a scaled copy at every present.
    public static func pictureRect(in tile: TileRect, pictureWidth: Int, pictureHeight: Int) -> TileRect {
        let box = pictureBox(in: tile)
        var fitted = PictureFit.fitted(width: pictureWidth, height: pictureHeight, in: box)
        if pictureWidth > 0, pictureHeight > 0, pictureWidth <= fitted.width, pictureHeight <= fitted.height,
            fitted.width - pictureWidth <= 2, fitted.height - pictureHeight <= 2
        {
            fitted = PictureSize(width: pictureWidth, height: pictureHeight)
        }
        return TileRect(
            x: tile.x + (tile.width - fitted.width) / 2,
            y: tile.y + (tile.height - fitted.height) / 2,
            width: fitted.width,
            height: fitted.height
        )
    }

    /// The parts of a `width` x `height` window that none of `covered` covers, as rectangles
    /// that overlap neither each other nor `covered`.
    ///
    /// The window paints its background only there: with SDL's software renderer a clear of the
    /// whole window costs as much as a picture's scaled copy, and the pictures repaint most of
    /// it at every present anyway. Found band by band: between consecutive top or bottom edges,
    /// the gaps between the rectangles that span the band.
    public static func uncovered(width: Int, height: Int, by covered: [TileRect]) -> [TileRect] {
        guard width > 0, height > 0 else { return [] }
        let window = TileRect(x: 0, y: 0, width: width, height: height)
        let rects = covered.compactMap { $0.intersection(window) }
        var edges: Set<Int> = [0, height]
        for rect in rects {
            edges.insert(rect.y)
            edges.insert(rect.y + rect.height)
        }
        let rows = edges.sorted()
        var gaps: [TileRect] = []
        for (top, bottom) in zip(rows, rows.dropFirst()) {
            let spans =
                rects
                .filter { $0.y <= top && $0.y + $0.height >= bottom }
                .map { (start: $0.x, end: $0.x + $0.width) }
                .sorted { $0.start < $1.start }
            var x = 0
            for span in spans {
                if span.start > x { gaps.append(TileRect(x: x, y: top, width: span.start - x, height: bottom - top)) }
                x = max(x, span.end)
            }
            if x < width { gaps.append(TileRect(x: x, y: top, width: width - x, height: bottom - top)) }
        }
        return gaps
    }

    /// The boxes of the indicators in `state`, stacked up from the tile's bottom right corner
    /// (away from the top of the picture).
    public static func indicatorRects(in tile: TileRect, state: ParticipantState) -> [Indicator: TileRect] {
        var rects: [Indicator: TileRect] = [:]
        var bottom = tile.y + tile.height - border - indicatorGap
        for indicator in Indicator.allCases where state.contains(indicator.state) {
            let width = min(indicatorWidth, max(1, tile.width - 2 * border))
            rects[indicator] = TileRect(
                x: tile.x + tile.width - border - indicatorGap - width,
                y: bottom - indicatorHeight,
                width: width,
                height: indicatorHeight
            )
            bottom -= indicatorHeight + indicatorGap
        }
        return rects
    }
}

/// The window's pixels and geometry as last drawn: for tests (read back with
/// `SDL_RenderReadPixels`) and diagnostics.
public struct WindowSnapshot: Sendable {
    /// Where one participant's tile was drawn.
    public struct Tile: Sendable, Hashable {
        public var tile: TileRect
        /// Where their picture was drawn; nil when they had none.
        public var picture: TileRect?
        public var indicators: [Indicator: TileRect]
    }

    public var width: Int
    public var height: Int
    /// RGB, 3 bytes a pixel, rows top to bottom, no padding.
    public var rgb: [UInt8]
    /// Participants in grid order.
    public var order: [UInt64]
    public var tiles: [UInt64: Tile]
    /// SDL's name of the renderer that drew it ("software", "opengl", ...).
    public var renderer: String
    /// SDL's name of the pictures' texture format (`SDL_PIXELFORMAT_IYUV`, or the window's own
    /// such as `SDL_PIXELFORMAT_RGB888` with the software renderer).
    public var pictureFormat: String

    /// The pixel at (x, y).
    public func pixel(x: Int, y: Int) -> RGB {
        let offset = (y * width + x) * 3
        return RGB(rgb[offset], rgb[offset + 1], rgb[offset + 2])
    }

    /// The luma (BT.601, limited range like the pictures) of `rect`, resampled to `width` x
    /// `height` by nearest neighbour: a picture shown scaled, read back at its own size.
    public func luma(of rect: TileRect, width outWidth: Int, height outHeight: Int) -> VideoFrame? {
        guard outWidth > 0, outHeight > 0, rect.width > 0, rect.height > 0 else { return nil }
        var data = [UInt8](repeating: 128, count: VideoFrame.byteCount(width: outWidth, height: outHeight))
        for row in 0..<outHeight {
            let y = min(height - 1, rect.y + row * rect.height / outHeight)
            for column in 0..<outWidth {
                let x = min(width - 1, rect.x + column * rect.width / outWidth)
                let color = pixel(x: x, y: y)
                let luma = (66 * Int(color.red) + 129 * Int(color.green) + 25 * Int(color.blue) + 128) >> 8 + 16
                data[row * outWidth + column] = UInt8(min(255, luma))
            }
        }
        return try? VideoFrame(width: outWidth, height: outHeight, data: data, rtpTimestamp: 0)
    }
}

/// The window could not be opened (no display, no renderer) or failed.
public struct WindowError: Error, Sendable, CustomStringConvertible {
    /// What was being done.
    public var stage: String
    /// SDL's own words.
    public var reason: String

    public var description: String { "call window: \(stage): \(reason)" }
}

extension TileRect {
    /// The part of this rectangle inside `other`; nil when they do not overlap.
    fileprivate func intersection(_ other: TileRect) -> TileRect? {
        let left = max(x, other.x)
        let top = max(y, other.y)
        let right = min(x + width, other.x + other.width)
        let bottom = min(y + height, other.y + other.height)
        guard right > left, bottom > top else { return nil }
        return TileRect(x: left, y: top, width: right - left, height: bottom - top)
    }
}
