/// What `--video camera...` or `--video screen...` asks for, parsed without touching a device.
///
/// Spellings:
/// - `camera[:/dev/videoN][@WxH[/FPS]]`: a V4L2 camera (default `/dev/video0`), optionally asking
///   it for a size and a rate;
/// - `screen[:DISPLAY[+x,y,WxH]]`: an X display (default `$DISPLAY`), whole or a rectangle of it.
///
/// Any other text is not a live device (a file or a generated source): ``parse(_:)`` returns nil
/// for it, so the caller falls back to its own choices.
public enum LiveVideoRequest: Sendable, Hashable {
    /// A camera.
    case camera(CameraRequest)
    /// A screen.
    case screen(ScreenRequest)

    /// Parses `text`; nil when it names no live device, an error line when it names one badly.
    public static func parse(_ text: String) throws(LiveVideoRequestError) -> LiveVideoRequest? {
        if let rest = Self.rest(of: text, after: "camera") {
            return .camera(try CameraRequest(parsing: rest, whole: text))
        }
        if let rest = Self.rest(of: text, after: "screen") {
            return .screen(try ScreenRequest(parsing: rest, whole: text))
        }
        return nil
    }

    /// What follows `keyword` when `text` is `keyword` alone or `keyword` then `:` or `@`.
    private static func rest(of text: String, after keyword: String) -> Substring? {
        guard text.hasPrefix(keyword) else { return nil }
        let rest = text.dropFirst(keyword.count)
        guard rest.isEmpty || rest.first == ":" || rest.first == "@" else { return nil }
        return rest
    }
}

/// `--video` given once or twice: the video of our feed, and a screen shared beside it as a
/// second stream (`--video camera --video screen`).
public struct VideoChoices: Sendable, Hashable {
    /// What our feed's video is: `pattern`, a file, `camera...`, `screen...` or `none`.
    public var main: String
    /// The screen shared beside it, when `--video` was given twice.
    public var screen: ScreenRequest?

    /// Creates choices from their parts.
    public init(main: String, screen: ScreenRequest? = nil) {
        self.main = main
        self.screen = screen
    }

    /// Parses the `--video` values: none means the pattern; two must be a screen and something
    /// else (in either order).
    public init(parsing values: [String]) throws(LiveVideoRequestError) {
        switch values.count {
        case 0:
            main = "pattern"
        case 1:
            main = values[0]
        case 2:
            let screens = try values.map { (text) throws(LiveVideoRequestError) -> Bool in
                if case .screen = try LiveVideoRequest.parse(text) { return true }
                return false
            }
            guard screens.filter({ $0 }).count == 1, let index = screens.firstIndex(of: true),
                case .screen(let request) = try LiveVideoRequest.parse(values[index])
            else {
                throw LiveVideoRequestError(
                    values.joined(separator: " --video "),
                    "two streams are a video and a screen shared beside it (--video camera --video screen)"
                )
            }
            main = values[1 - index]
            screen = request
        default:
            throw LiveVideoRequestError(
                values.joined(separator: " --video "),
                "at most two: a video and a screen shared beside it"
            )
        }
    }
}

/// A camera and the mode asked of it.
public struct CameraRequest: Sendable, Hashable {
    /// The camera used when none is named.
    public static let defaultDevice = "/dev/video0"

    /// The V4L2 device node.
    public var device: String
    /// The picture size asked for, if any.
    public var size: VideoSize?
    /// The frame rate asked for, if any.
    public var frameRate: Int?

    /// Creates a request.
    public init(device: String = CameraRequest.defaultDevice, size: VideoSize? = nil, frameRate: Int? = nil) {
        self.device = device
        self.size = size
        self.frameRate = frameRate
    }

    /// Parses what follows `camera`: `[:PATH][@WxH[/FPS]]`.
    init(parsing rest: Substring, whole: String) throws(LiveVideoRequestError) {
        var path = rest
        var mode: Substring?
        if let at = rest.firstIndex(of: "@") {
            path = rest[..<at]
            mode = rest[rest.index(after: at)...]
        }
        if path.first == ":" { path = path.dropFirst() }
        if !rest.isEmpty, rest.first == ":", path.isEmpty {
            throw LiveVideoRequestError(whole, "no device after `camera:` (expected camera:/dev/videoN)")
        }
        device = path.isEmpty ? CameraRequest.defaultDevice : String(path)
        guard device.hasPrefix("/") else {
            throw LiveVideoRequestError(whole, "the camera must be a device path such as /dev/video0")
        }
        guard let mode else { return }
        let parts = mode.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        size = try VideoSize(parsing: parts[0], whole: whole)
        if parts.count == 2 {
            guard let rate = Int(parts[1]), (1...240).contains(rate) else {
                throw LiveVideoRequestError(whole, "the frame rate must be a whole number from 1 to 240")
            }
            frameRate = rate
        }
    }
}

/// An X display and the part of it to capture.
public struct ScreenRequest: Sendable, Hashable {
    /// The display (`:N` or `:N.S`, with a host before the colon for a remote X server); nil for
    /// the `DISPLAY` environment variable.
    public var display: String?
    /// The rectangle to capture; nil for the whole screen.
    public var region: ScreenRegion?

    /// Creates a request.
    public init(display: String? = nil, region: ScreenRegion? = nil) {
        self.display = display
        self.region = region
    }

    /// Parses what follows `screen`: `[:DISPLAY[+x,y,WxH]]`.
    init(parsing rest: Substring, whole: String) throws(LiveVideoRequestError) {
        guard !rest.isEmpty else { return }
        guard rest.first == ":" else {
            throw LiveVideoRequestError(whole, "expected screen or screen:DISPLAY[+x,y,WxH]")
        }
        var display = rest.dropFirst()
        if let plus = display.firstIndex(of: "+") {
            region = try ScreenRegion(parsing: display[display.index(after: plus)...], whole: whole)
            display = display[..<plus]
        }
        if display.isEmpty {
            guard region != nil else { throw LiveVideoRequestError(whole, "no display after `screen:`") }
            return
        }
        guard Self.isDisplayName(display) else {
            throw LiveVideoRequestError(whole, "`\(display)` is not an X display (expected :N or :N.S)")
        }
        self.display = String(display)
    }

    /// `[host]:N[.S]` with decimal N and S.
    static func isDisplayName(_ text: Substring) -> Bool {
        guard let colon = text.lastIndex(of: ":") else { return false }
        let host = text[..<colon]
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }) else { return false }
        let numbers = text[text.index(after: colon)...].split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(numbers.count) else { return false }
        return numbers.allSatisfy { !$0.isEmpty && $0.count <= 5 && $0.allSatisfy(\.isASCIIDigit) }
    }
}

/// A rectangle of a screen: its top-left corner and size.
public struct ScreenRegion: Sendable, Hashable {
    /// Left edge, in pixels from the screen's left.
    public var x: Int
    /// Top edge, in pixels from the screen's top.
    public var y: Int
    /// Size of the rectangle.
    public var size: VideoSize

    /// Creates a region.
    public init(x: Int, y: Int, size: VideoSize) {
        self.x = x
        self.y = y
        self.size = size
    }

    /// Parses `x,y,WxH`.
    init(parsing text: Substring, whole: String) throws(LiveVideoRequestError) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw LiveVideoRequestError(whole, "the screen region must be +x,y,WxH")
        }
        guard let x = Self.coordinate(parts[0]), let y = Self.coordinate(parts[1]) else {
            throw LiveVideoRequestError(whole, "the region's corner must be two whole numbers from 0 to 65535")
        }
        self.x = x
        self.y = y
        size = try VideoSize(parsing: parts[2], whole: whole)
    }

    private static func coordinate(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCIIDigit), let value = Int(text) else { return nil }
        return value <= 65_535 ? value : nil
    }
}

/// A picture size that I420 can carry: even, from 2 to 8192 pixels each way.
public struct VideoSize: Sendable, Hashable, CustomStringConvertible {
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int

    /// Creates a size (not validated: sizes from devices may be odd).
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Parses `WxH`.
    init(parsing text: Substring, whole: String) throws(LiveVideoRequestError) {
        let parts = text.split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let width = Self.dimension(parts[0]), let height = Self.dimension(parts[1]) else {
            throw LiveVideoRequestError(whole, "the size must be WxH, even numbers from 2 to 8192 (e.g. 1280x720)")
        }
        self.width = width
        self.height = height
    }

    private static func dimension(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 4, text.allSatisfy(\.isASCIIDigit), let value = Int(text) else { return nil }
        return (2...8192).contains(value) && value % 2 == 0 ? value : nil
    }

    public var description: String { "\(width)x\(height)" }
}

/// A `--video` device spelling that cannot be used: one line naming the text and what is wrong.
public struct LiveVideoRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The whole text given.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    init(_ text: String, _ reason: String) {
        self.text = text
        self.reason = reason
    }

    public var description: String { "--video \(text): \(reason)" }
}

extension Character {
    /// 0 to 9 only (`isNumber` also accepts other scripts' digits and fractions).
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
