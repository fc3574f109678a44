import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpus

/// What a recorded file shows when decoded: pattern frame numbers, flashes and beeps, with times
/// on the call timeline (the file's start offset plus the packet's time in the file).
///
/// Shared by the recorder's tests (Conclave's own publishers) and the browser tests (Chromium
/// playing the same pattern and tone from files), so both measure A/V sync the same way.
public struct RecordedFileAnalysis {
    /// The frame number of each decoded picture, -1 where the code strip does not read.
    public private(set) var frameNumbers: [Int] = []
    /// Presentation times (seconds) of the pictures that flash.
    public private(set) var flashTimes: [Double] = []
    /// Presentation times (seconds) of the beeps' onsets.
    public private(set) var beepTimes: [Double] = []
    /// Packets of the first audio stream.
    public private(set) var audioPackets = 0

    public init(path: String, startOffset: Double) throws {
        let demuxer = try MediaDemuxer(path: path)
        if let video = demuxer.firstStream(of: .video) {
            let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: video)
            var outputs: [MediaStreamDecoder.Output] = []
            while let packet = try demuxer.readPacket() {
                guard packet.streamIndex == video.index else { continue }
                outputs += try decoder.decode(packet)
            }
            outputs += try decoder.decode(nil)
            for case .video(let picture, let time) in outputs {
                guard let reading = PatternReader.read(picture) else {
                    frameNumbers.append(-1)
                    continue
                }
                frameNumbers.append(reading.frameNumber)
                if reading.isFlash { flashTimes.append(startOffset + time / .seconds(1)) }
            }
        }
        try demuxer.rewind()
        if let audio = demuxer.firstStream(of: .audio) {
            let times = try FFmpeg.audioPacketTimes(path)
            let opus = try OpusAudioDecoder(channels: 1)
            var detector = BeepDetector()
            var index = 0
            var fed = 0
            var packetStarts: [(sample: Int, time: Double)] = []
            while let packet = try demuxer.readPacket() {
                guard packet.streamIndex == audio.index else { continue }
                let pcm = try opus.decode(
                    EncodedFrame(codec: .opus, data: packet.data, rtpTimestamp: 0, isKeyframe: true)
                )
                let time = index < times.count ? times[index] : 0
                packetStarts.append((fed, time))
                for onset in detector.feed(pcm.samples, channels: 1) {
                    // The decoder lags the encoder by its lookahead (312 samples of pre-skip): the
                    // onset is found in the output of one packet and happened 312 samples earlier.
                    let start = packetStarts.last { $0.sample <= onset } ?? packetStarts[0]
                    beepTimes.append(startOffset + start.time + Double(onset - start.sample - 312) / 48_000)
                }
                fed += pcm.samplesPerChannel
                index += 1
            }
            audioPackets = index
        }
    }
}
