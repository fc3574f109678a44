/// Loss concealment by pitch repetition (the way G.711 Appendix I and NetEq's expand work): the
/// last pitch period of what was played is repeated, at full level for the first 40 ms and then
/// fading to silence over the next 60 ms.
///
/// The hold is as long as two lost frames: under 5 % loss with FEC, the runs FEC cannot cover are
/// mostly two or three frames long, and a 20 ms hold let a three-frame run fall below a quarter
/// of the level for its last 10 ms (a gap heard in a word). NetEq's expand attenuates as slowly.
/// Longer runs still fade out rather than buzz.
///
/// Used instead of libopus's own concealment, which fades a voiced or tonal signal to half its
/// level within one 20 ms frame and to nothing within two, and whose decoder then ramps the next
/// good frame up from that low level over two more frames: under 5 % random loss that is a dip
/// heard in the middle of a word (a gap) every few seconds. The Opus decoder is not told about
/// the loss; the frame after it is decoded as it comes and crossfaded in from this expansion's
/// continuation (see `PlayoutBuffer`), or rebuilt from its successor's FEC when the run repeats
/// silence (``concealsSilence``).
///
/// Everything is preallocated; searching the pitch costs a few thousand multiplications, once
/// per concealment run. Not thread-safe: the playout buffer's thread owns it.
struct PitchExpander {
    /// Samples of the played signal kept for the pitch search (40 ms at 48 kHz).
    static let historySamples = 1_920
    /// The shortest period searched (2 ms, 500 Hz): shorter periods repeat as a multiple.
    static let minimumLag = 96
    /// The longest period searched (20 ms, 50 Hz).
    static let maximumLag = 960
    /// The stretch compared with its predecessor one period back (10 ms).
    static let window = 480
    /// Samples over which the step where the period repeats is spread (2 ms).
    static let joinSamples = 96
    /// Samples played at full level before fading.
    static let fullLevelSamples = 1_920
    /// Samples over which the level then falls to zero.
    static let fadeSamples = 2_880
    /// The stretch at the history's end compared with the same stretch one period earlier to
    /// tell a sound that is ending (1 ms).
    static let endingWindow = 48
    /// How fast a sound that is ending fades (5 ms, from the first concealed sample).
    static let endingFadeSamples = 240

    private var history = [Int16](repeating: 0, count: historySamples)
    /// The period being repeated (`period[..<lag]`), fixed for a run.
    private var period = [Int16](repeating: 0, count: maximumLag)
    /// The length of `period`; 0 when not concealing.
    private var lag = 0
    /// Samples made so far in the current run.
    private var position = 0
    /// This run's samples at full level and fade length: `fullLevelSamples` and `fadeSamples`,
    /// or none and `endingFadeSamples` for a sound that is ending.
    private var fullLevel = fullLevelSamples
    private var fade = fadeSamples

    /// Whether a concealment run is under way (its output is what the signal continues with).
    var isConcealing: Bool { lag > 0 }

    /// Whether the run under way repeats silence (a period whose peak is at most
    /// ``silencePeak``, about -36 dBFS): a pause was playing when the loss began.
    private(set) var concealsSilence = false

    /// The loudest sample of a period that counts as silence.
    static let silencePeak: Int16 = 512

    /// Notes samples that were played (decoded, recovered or concealed), newest last.
    mutating func record(_ samples: ArraySlice<Int16>) {
        let count = min(samples.count, Self.historySamples)
        let kept = Self.historySamples - count
        history.withUnsafeMutableBufferPointer { history in
            guard let base = history.baseAddress else { return }
            if kept > 0 { base.update(from: base + count, count: kept) }
            var index = kept
            for sample in samples.suffix(count) {
                history[index] = sample
                index += 1
            }
        }
    }

    /// The loudest of the last `count` samples played (at most `historySamples`).
    func peakOfLast(_ count: Int) -> Int16 { history.suffix(count).peakMagnitude }

    /// Ends a concealment run: real audio follows.
    mutating func end() {
        lag = 0
        position = 0
        concealsSilence = false
    }

    /// Appends the next `count` concealed samples to `output`, starting a run if none is under way.
    mutating func conceal(_ count: Int, into output: inout [Int16]) {
        if lag == 0 { begin() }
        for offset in 0..<max(0, count) { output.append(sample(at: position + offset)) }
        position += max(0, count)
    }

    /// Writes the next `count` concealed samples into `output` (cleared first) without using them
    /// up: what the signal would continue with, for a crossfade. Starts a run if none is under way.
    mutating func peek(_ count: Int, into output: inout [Int16]) {
        if lag == 0 { begin() }
        output.removeAll(keepingCapacity: true)
        for offset in 0..<max(0, count) { output.append(sample(at: position + offset)) }
    }

    private func sample(at index: Int) -> Int16 {
        let fading = index - fullLevel
        guard fading > 0 else { return period[index % lag] }
        guard fading < fade else { return 0 }
        let level = Int32(fade - fading)
        return Int16(truncatingIfNeeded: Int32(period[index % lag]) * level / Int32(fade))
    }

    /// Finds the pitch period of the end of the history and copies it into `period`.
    ///
    /// A signal that changes within the period (a note ending, a crossfade, a fade) does not meet
    /// itself where the period repeats: the repeated period's first sample follows the played
    /// signal's last one, and itself, with a step as large as the change over one period (a click,
    /// measured up to 3,100 on a beep's end under 5 % loss). The difference between the period's
    /// last sample and the one before its start is added to its first samples, fading out, so both
    /// joins keep the signal's own slope. (`PlayoutSpliceTests.droppedFramesAreSplicedWithoutAClick`
    /// steps by 2,144 without it, with the 40 ms hold.)
    ///
    /// A sound that is ending (its last millisecond a tenth as loud as the same stretch one period
    /// earlier, as when a word or a tone stops just before the loss) is not periodic: repeated, its
    /// last cycles and the silence after them rang on for 40 ms, and the join correction pushed
    /// them up to 9,300 on an 8,000 beep. Such a run fades out within `endingFadeSamples`
    /// instead, and no repeated sample is louder than the period itself was.
    private mutating func begin() {
        lag = bestLag()
        position = 0
        let start = Self.historySamples - lag
        let offset = Int32(history[Self.historySamples - 1]) - Int32(history[start - 1])
        let ramp = Int32(min(lag / 2, Self.joinSamples))
        let rawPeak = Int32(history[start...].peakMagnitude)
        for index in 0..<lag {
            var sample = Int32(history[start + index])
            if index < ramp { sample += offset * (ramp - Int32(index)) / ramp }
            period[index] = Int16(clamping: max(-rawPeak, min(rawPeak, sample)))
        }
        concealsSilence = rawPeak <= Int32(Self.silencePeak)
        let ending = isEnding()
        fullLevel = ending ? 0 : Self.fullLevelSamples
        fade = ending ? Self.endingFadeSamples : Self.fadeSamples
    }

    /// Whether the history's last `endingWindow` samples hold less than a tenth of the energy of
    /// the same stretch one period (`lag`) earlier.
    private func isEnding() -> Bool {
        let end = Self.historySamples
        var last = 0.0
        var earlier = 0.0
        for index in (end - Self.endingWindow)..<end {
            last += Double(history[index]) * Double(history[index])
            earlier += Double(history[index - lag]) * Double(history[index - lag])
        }
        return last * 10 < earlier
    }

    /// The lag (in samples) at which the last `window` samples best match the samples one lag
    /// earlier (normalised cross-correlation), searched on every fourth lag and then refined.
    private func bestLag() -> Int {
        history.withUnsafeBufferPointer { history in
            let end = Self.historySamples
            func score(_ lag: Int, step: Int) -> Double {
                var cross = 0.0
                var energy = 0.0
                var index = end - Self.window
                while index < end {
                    let earlier = Double(history[index - lag])
                    cross += Double(history[index]) * earlier
                    energy += earlier * earlier
                    index += step
                }
                return energy > 0 ? cross / energy.squareRoot() : 0
            }
            var best = Self.minimumLag
            var bestScore = -Double.infinity
            for lag in stride(from: Self.minimumLag, through: Self.maximumLag, by: 4) {
                let value = score(lag, step: 4)
                if value > bestScore { (best, bestScore) = (lag, value) }
            }
            let coarse = best
            bestScore = -Double.infinity
            for lag in max(Self.minimumLag, coarse - 3)...min(Self.maximumLag, coarse + 3) {
                let value = score(lag, step: 1)
                if value > bestScore { (best, bestScore) = (lag, value) }
            }
            return best
        }
    }
}

extension Collection<Int16> {
    /// The largest magnitude among the samples (-32768 counts as 32767), 0 when there are none.
    var peakMagnitude: Int16 {
        var peak: Int16 = 0
        for sample in self { peak = Swift.max(peak, sample == .min ? .max : abs(sample)) }
        return peak
    }
}
