/// Why a camera or screen cannot be captured, as one line for the user.
public struct CaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure callers may act on.
    public enum Kind: String, Sendable, Hashable {
        /// Nothing at the device path.
        case missingDevice
        /// Something is there, but it does not capture video (a regular file, `/dev/null`, a V4L2
        /// output or metadata node).
        case notACaptureDevice
        /// Another program holds the camera.
        case busy
        /// The device exists but this user may not open it.
        case permissionDenied
        /// The X display does not answer (no server, no `DISPLAY`, a refused connection).
        case unreachableDisplay
        /// The device works but not in a way Conclave can use (no decoder, a region off the screen).
        case unsupported
        /// The device stopped delivering while it was captured (unplugged).
        case deviceLost
    }

    /// What went wrong.
    public var kind: Kind
    /// The device or display concerned.
    public var device: String
    /// The line shown to the user.
    public var message: String

    /// Creates an error.
    public init(_ kind: Kind, device: String, _ message: String) {
        self.kind = kind
        self.device = device
        self.message = message
    }

    public var description: String { message }
}
