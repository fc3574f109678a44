import ConclaveCapture

/// The video half of `conclave devices`: cameras with their formats, and screens with their size.
enum VideoDevices {
    /// The lines `conclave devices` prints for cameras and screens.
    static func lines() -> [String] { VideoDeviceList.current().textLines }

    /// The value `conclave devices --json` encodes for cameras and screens
    /// (`{"cameras": [...], "screens": [...]}`).
    static func listing() -> VideoDeviceList { VideoDeviceList.current() }
}
