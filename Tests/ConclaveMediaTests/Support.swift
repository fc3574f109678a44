import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Testing

/// Writes encoded frames as the simplest files ffmpeg reads: raw Annex-B H264, hand-built IVF.
enum RawFiles {
    static func annexB(_ frames: [EncodedFrame], to path: String) throws {
        let bytes = frames.flatMap(\.data)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}

extension URL {
    var pathString: String { path }
}
