import ConclaveCore

/// Frames shaped like real codec output: the bytes Janus and our depacketizers look at are
/// valid; the rest is random (Janus relays without decoding).
enum SyntheticFrames {
    static func vp8(_ index: Int, size: Int, using random: inout some RandomNumberGenerator) -> [UInt8] {
        let keyframe = index % 30 == 0
        var frame: [UInt8] =
            keyframe
            ? [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01]  // keyframe, 640x480
            : [0x11, 0x02, 0x00]
        frame += (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        return frame
    }

    /// An Annex-B access unit: SPS, PPS and IDR on keyframes, one P slice otherwise. Payload
    /// bytes avoid zero so no start code appears inside a NAL unit.
    static func h264(_ index: Int, size: Int, using random: inout some RandomNumberGenerator) -> [UInt8] {
        func nal(_ header: UInt8, _ count: Int) -> [UInt8] {
            [0, 0, 0, 1, header] + (0..<count).map { _ in UInt8.random(in: 1...255, using: &random) }
        }
        return index % 30 == 0 ? nal(0x67, 12) + nal(0x68, 4) + nal(0x65, size) : nal(0x41, size)
    }

    static func opus(using random: inout some RandomNumberGenerator) -> [UInt8] {
        [0x78]
            + (0..<Int.random(in: 40...160, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
    }
}
