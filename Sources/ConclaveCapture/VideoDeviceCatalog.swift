internal import CFFmpegDevice
import Foundation

/// The cameras and screens of this machine, for `conclave devices` and for error messages.
///
/// Listing opens each device briefly (a V4L2 query, an X connection), so it blocks for as long as
/// that takes: call it from a command, not from a call's hot path.
public enum VideoDeviceCatalog {
    /// Every `/dev/videoN` that is a capture device, in number order, with its modes. Nodes that
    /// are not capture devices (a UVC camera's metadata node) are left out; one that cannot be
    /// queried is listed with its problem.
    public static func cameras(directory: String = "/dev") -> [CameraListing] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let numbered = names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix("video"), let number = Int(name.dropFirst(5)) else { return nil }
            return (number, "\(directory)/\(name)")
        }
        return numbered.sorted { $0.0 < $1.0 }.compactMap { _, path in
            do throws(CaptureError) {
                return CameraListing(try V4L2Inspection.inspect(path))
            } catch {
                guard error.kind != .notACaptureDevice else { return nil }
                return CameraListing(path: path, problem: error.message)
            }
        }
    }

    /// The X displays this machine runs: `DISPLAY` first, then every `/tmp/.X11-unix/XN` socket,
    /// each with its screen size (or why it did not answer).
    public static func screens(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        socketDirectory: String = "/tmp/.X11-unix"
    ) -> [ScreenListing] {
        var displays: [String] = []
        if let display = environment["DISPLAY"], !display.isEmpty { displays.append(display) }
        let sockets = (try? FileManager.default.contentsOfDirectory(atPath: socketDirectory)) ?? []
        let numbers = sockets.compactMap { $0.hasPrefix("X") ? Int($0.dropFirst()) : nil }.sorted()
        for number in numbers where !displays.contains(":\(number)") && !displays.contains(":\(number).0") {
            displays.append(":\(number)")
        }
        return displays.map(screen)
    }

    /// One display's size through x11grab (it reads the screen's geometry when it opens).
    static func screen(_ display: String) -> ScreenListing {
        let input = CaptureInput(
            role: "screen",
            format: "x11grab",
            url: display,
            options: [],
            outputSize: .native(limit: VideoSize(width: 65_536, height: 65_536)),
            openError: { code in screenOpenError(code, display: display, region: nil) }
        )
        do throws(CaptureError) {
            let opened = try OpenedInput(input)
            return ScreenListing(display: display, size: opened.inputSize, problem: nil)
        } catch {
            return ScreenListing(display: display, size: nil, problem: error.message)
        }
    }

    /// Cameras and screens as lines of text for `conclave devices`.
    public static func textLines(cameras: [CameraListing], screens: [ScreenListing]) -> [String] {
        var lines: [String] = []
        for camera in cameras {
            if let problem = camera.problem {
                lines.append("camera \(camera.path)  (\(problem))")
                continue
            }
            lines.append("camera \(camera.path)  \(camera.name ?? "")  [\(camera.driver ?? "")]")
            for format in camera.formats {
                let sizes = format.sizes.map { size in
                    size.frameRates.isEmpty
                        ? size.size : "\(size.size)@\(size.frameRates.map(String.init).joined(separator: ","))"
                }
                lines.append("  \(format.format): \(sizes.joined(separator: " "))")
            }
        }
        if cameras.isEmpty { lines.append("camera: none found in /dev/video*") }
        for screen in screens {
            if let size = screen.size {
                lines.append("screen \(screen.display)  \(size)")
            } else {
                lines.append("screen \(screen.display)  (\(screen.problem ?? "no answer"))")
            }
        }
        if screens.isEmpty { lines.append("screen: no X display (DISPLAY unset, no /tmp/.X11-unix/X*)") }
        return lines
    }
}

/// Every camera and screen, as `conclave devices --json` prints them.
public struct VideoDeviceList: Sendable, Hashable, Encodable {
    /// The capture devices among `/dev/video*`.
    public var cameras: [CameraListing]
    /// The X displays.
    public var screens: [ScreenListing]

    /// Creates a list.
    public init(cameras: [CameraListing], screens: [ScreenListing]) {
        self.cameras = cameras
        self.screens = screens
    }

    /// The devices of this machine now (see ``VideoDeviceCatalog``: this blocks briefly).
    public static func current() -> VideoDeviceList {
        VideoDeviceList(cameras: VideoDeviceCatalog.cameras(), screens: VideoDeviceCatalog.screens())
    }

    /// The list as lines of text.
    public var textLines: [String] { VideoDeviceCatalog.textLines(cameras: cameras, screens: screens) }
}

/// A camera as `conclave devices` lists it (JSON-encodable).
public struct CameraListing: Sendable, Hashable, Encodable {
    /// One pixel format and its sizes.
    public struct Format: Sendable, Hashable, Encodable {
        /// `mjpeg`, `yuyv` or the V4L2 fourcc.
        public var format: String
        /// Its sizes with their rates.
        public var sizes: [Size]
    }

    /// One size and its whole frame rates, fastest first.
    public struct Size: Sendable, Hashable, Encodable {
        /// `WxH`.
        public var size: String
        /// Frames per second offered.
        public var frameRates: [Int]
    }

    /// The device node.
    public var path: String
    /// The camera's name.
    public var name: String?
    /// Its kernel driver.
    public var driver: String?
    /// Its formats, in the driver's order.
    public var formats: [Format]
    /// Why it could not be queried, if it could not.
    public var problem: String?

    /// The listing of an inspected camera.
    public init(_ info: CameraInfo) {
        path = info.path
        name = info.name
        driver = info.driver
        var formats: [Format] = []
        for mode in info.modes {
            let size = Size(size: "\(mode.size)", frameRates: mode.frameRates)
            if let last = formats.indices.last, formats[last].format == mode.pixelFormat.description {
                formats[last].sizes.append(size)
            } else {
                formats.append(Format(format: mode.pixelFormat.description, sizes: [size]))
            }
        }
        self.formats = formats
        problem = nil
    }

    /// A camera that could not be queried.
    public init(path: String, problem: String) {
        self.path = path
        self.formats = []
        self.problem = problem
    }
}

/// An X display as `conclave devices` lists it (JSON-encodable).
public struct ScreenListing: Sendable, Hashable, Encodable {
    /// The display name (`:N`).
    public var display: String
    /// Its screen size (`WxH`), when it answered.
    public var size: String?
    /// Why it did not answer, if it did not.
    public var problem: String?

    init(display: String, size: VideoSize?, problem: String?) {
        self.display = display
        self.size = size?.description
        self.problem = problem
    }
}
