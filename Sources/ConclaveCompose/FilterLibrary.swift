internal import CFFmpegFilterShims

/// The libavfilter this build runs with, for error lines and reports.
public enum FilterLibrary {
    /// `major.minor.micro` of the libavfilter headers built against.
    public static var version: String {
        let packed = cshim_LIBAVFILTER_VERSION_INT()
        return "\(packed >> 16).\((packed >> 8) & 0xff).\(packed & 0xff)"
    }
}
