internal import CFFmpegDevice
internal import CFFmpegDeviceShims
import Foundation

/// What a V4L2 device node says about itself: its name and, for a capture device, its modes.
public struct CameraInfo: Sendable, Hashable {
    /// The device node.
    public var path: String
    /// The camera's name (V4L2's `card`).
    public var name: String
    /// The kernel driver.
    public var driver: String
    /// Every format and size it offers, in the driver's order.
    public var modes: [CameraMode]
}

/// Reads a V4L2 node with the driver's query ioctls, before libavdevice opens it: so a missing,
/// foreign or non-capture node gets its own clear error, and the camera's modes are known for
/// negotiation and for the device list.
enum V4L2Inspection {
    /// Checks that `path` is a V4L2 capture device and lists its modes.
    static func inspect(_ path: String) throws(CaptureError) -> CameraInfo {
        var status = stat()
        guard stat(path, &status) == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                throw CaptureError(.missingDevice, device: path, "no camera at \(path)")
            }
            throw CaptureError(
                .notACaptureDevice,
                device: path,
                "cannot read \(path): \(String(cString: strerror(code)))"
            )
        }
        guard status.st_mode & S_IFMT == S_IFCHR else {
            let what = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a device (a regular file or similar)"
            throw CaptureError(.notACaptureDevice, device: path, "\(path) is not a camera: it is \(what)")
        }
        // Non-blocking: the node is only queried here, and a camera in use must not hang the open.
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EACCES, EPERM:
                throw CaptureError(
                    .permissionDenied,
                    device: path,
                    "cannot open camera \(path): permission denied (is this user in the video group?)"
                )
            case EBUSY:
                throw CaptureError(.busy, device: path, "camera \(path) is busy: another program is using it")
            case ENODEV, ENXIO:
                throw CaptureError(.missingDevice, device: path, "no camera at \(path) (the device is gone)")
            default:
                throw CaptureError(
                    .notACaptureDevice,
                    device: path,
                    "cannot open camera \(path): \(String(cString: strerror(code)))"
                )
            }
        }
        defer { close(fd) }
        var capability = v4l2_capability()
        guard cshim_VIDIOC_QUERYCAP(fd, &capability) == 0 else {
            throw CaptureError(
                .notACaptureDevice,
                device: path,
                "\(path) is not a video capture device (it does not answer V4L2's queries)"
            )
        }
        let capabilities =
            capability.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0
            ? capability.device_caps : capability.capabilities
        let name = cText(capability.card)
        guard capabilities & UInt32(V4L2_CAP_VIDEO_CAPTURE) != 0 else {
            throw CaptureError(
                .notACaptureDevice,
                device: path,
                "\(path) (\(name)) is not a video capture device (a metadata or output node?)"
            )
        }
        return CameraInfo(path: path, name: name, driver: cText(capability.driver), modes: modes(fd))
    }

    /// Every (format, size) with its rates, through VIDIOC_ENUM_FMT, _FRAMESIZES and _FRAMEINTERVALS.
    private static func modes(_ fd: Int32) -> [CameraMode] {
        var modes: [CameraMode] = []
        var formatIndex: UInt32 = 0
        // The bounds keep a driver that never says "no more" from looping forever.
        while formatIndex < 64 {
            var description = v4l2_fmtdesc()
            description.index = formatIndex
            description.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            guard cshim_VIDIOC_ENUM_FMT(fd, &description) == 0 else { break }
            formatIndex += 1
            let fourcc = fourccText(description.pixelformat)
            for size in sizes(fd, pixelFormat: description.pixelformat) {
                modes.append(
                    CameraMode(
                        pixelFormat: CameraPixelFormat(fourcc: fourcc),
                        size: size,
                        frameRates: rates(fd, pixelFormat: description.pixelformat, size: size)
                    )
                )
            }
        }
        return modes
    }

    /// The sizes of one format: the discrete list, or for a stepwise range its largest size and
    /// the common sizes inside it.
    private static func sizes(_ fd: Int32, pixelFormat: UInt32) -> [VideoSize] {
        var sizes: [VideoSize] = []
        var index: UInt32 = 0
        while index < 256 {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = pixelFormat
            guard cshim_VIDIOC_ENUM_FRAMESIZES(fd, &size) == 0 else { break }
            index += 1
            // A size past 16384 either way is a driver's placeholder, not a mode: it is left out.
            if size.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                guard size.discrete.width <= 16_384, size.discrete.height <= 16_384 else { continue }
                sizes.append(VideoSize(width: Int(size.discrete.width), height: Int(size.discrete.height)))
                continue
            }
            let range = size.stepwise
            let common = [(640, 480), (1280, 720), (1920, 1080)].filter { width, height in
                (Int(range.min_width)...Int(max(range.min_width, range.max_width))).contains(width)
                    && (Int(range.min_height)...Int(max(range.min_height, range.max_height))).contains(height)
            }
            sizes += common.map { VideoSize(width: $0.0, height: $0.1) }
            if range.max_width <= 16_384, range.max_height <= 16_384 {
                sizes.append(VideoSize(width: Int(range.max_width), height: Int(range.max_height)))
            }
            break
        }
        return sizes
    }

    /// Whole frame rates of one format and size (an interval of n/d seconds is d/n frames a second).
    private static func rates(_ fd: Int32, pixelFormat: UInt32, size: VideoSize) -> [Int] {
        var rates: Set<Int> = []
        var index: UInt32 = 0
        while index < 64 {
            var interval = v4l2_frmivalenum()
            interval.index = index
            interval.pixel_format = pixelFormat
            interval.width = UInt32(clamping: size.width)
            interval.height = UInt32(clamping: size.height)
            guard cshim_VIDIOC_ENUM_FRAMEINTERVALS(fd, &interval) == 0 else { break }
            index += 1
            if interval.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                if let rate = wholeRate(interval.discrete) { rates.insert(rate) }
                continue
            }
            // A range: its fastest and slowest ends (rates are the inverse of intervals).
            if let fastest = wholeRate(interval.stepwise.min) { rates.insert(fastest) }
            if let slowest = wholeRate(interval.stepwise.max) { rates.insert(slowest) }
            break
        }
        return rates.sorted(by: >)
    }

    private static func wholeRate(_ fraction: v4l2_fract) -> Int? {
        guard fraction.numerator > 0 else { return nil }
        let rate = (Int(fraction.denominator) + Int(fraction.numerator) / 2) / Int(fraction.numerator)
        return rate > 0 ? rate : nil
    }

    /// A fourcc as its four characters (`MJPG`, `YUYV`).
    static func fourccText(_ value: UInt32) -> String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        return String(decoding: bytes.filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self)
    }
}

/// A fixed-size C character array (a tuple) up to its first NUL, as text.
func cText<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { bytes in
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}
