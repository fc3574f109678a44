import ConclaveAudio
import ConclaveCore
import ConclaveOpus
import Testing

/// What libopus's decoder makes of the packets after a loss, and what the playout does about it:
/// SILK predicts each frame from the ones before, so a decoder that missed or only half saw a
/// frame at a sound's start or end decodes the next ones wrong (too quiet, or far too loud).
@Suite struct PlayoutDecoderStateTests {
    /// The beep track, off the 20 ms grid as a microphone's would be: with this phase the packet
    /// that carries a beep's end also carries 7.5 ms of the silence after it.
    static let phase = 360

    /// Plays `deliveries` through a fresh buffer until all but the last few packets are played:
    /// what was heard and the buffer's figures.
    static func play(
        _ deliveries: [Delivery],
        configuration: PlayoutConfiguration = PlayoutConfiguration()
    ) throws -> (output: [Int16], statistics: PlayoutStatistics) {
        let buffer = try PlayoutBuffer(configuration: configuration)
        var driver = PlayoutDriver(buffer: buffer, deliveries: deliveries)
        driver.run(untilPlayed: deliveries.count - 4, limit: Double(deliveries.count) * 20 + 200)
        return (Array(driver.output.joined()), buffer.statistics)
    }

    /// The packet whose 20 ms hold track sample `sample` (counted before the phase is skipped).
    static func packet(holding sample: Int, phase: Int = PlayoutDecoderStateTests.phase) -> Int {
        (sample - phase) / 960
    }

    /// The largest magnitude in `samples`.
    static func peak(_ samples: some Collection<Int16>) -> Int {
        samples.reduce(0) { max($0, abs(Int($1))) }
    }

    /// The packet carrying a beep's end is lost and rebuilt from its successor's FEC. libopus
    /// 1.3 then decodes the successor, silence, as a low thump reaching 26,482 (three times the
    /// beep; `bench/devices/loss` heard it as a burst at a beep's end): the playout conceals that
    /// frame instead, so nothing is louder than the beep and nothing clicks.
    @Test func aSoundsEndRebuiltFromFECDoesNotThump() throws {
        let frames = try BeepTrack.encoded(count: 200, phase: Self.phase)
        // The packet that carries the end of the 8th beep and 7.5 ms of the silence after it.
        let lost = Self.packet(holding: 7 * BeepTrack.periodSamples + BeepTrack.beepSamples - 1)
        let deliveries = frames.indices.map { index in
            Delivery(frame: frames[index], arrivalMilliseconds: index == lost ? nil : Double(index) * 20 + 40)
        }
        let (output, statistics) = try Self.play(deliveries)
        #expect(statistics.fecRecovered == 1, "\(statistics)")
        #expect(statistics.overshoots == 1, "\(statistics)")
        #expect(Self.peak(output) <= Int(BeepTrack.amplitude * 1.25), "\(statistics)")
        let analysis = BeepAnalysis(output)
        #expect(analysis.jumps.isEmpty, "\(statistics)")
        #expect(analysis.gaps.isEmpty, "\(statistics)")
    }

    /// A beep's first packet is lost and the next one comes 55 ms late, behind its successor:
    /// the first is concealed (as the silence before it) before the second is there. The
    /// decoder, given the lost packet from the late one's FEC before decoding it, plays the beep
    /// from its second packet on at its level; without that it rose from an eighth of it over
    /// 60 ms, since SILK's long-term predictor had never seen the tone.
    @Test func aDecoderThatMissedASoundsStartIsGivenItFromFEC() throws {
        let phase = 840
        let frames = try BeepTrack.encoded(count: 160, phase: phase)
        // The packet that carries the 6th beep's onset, 120 samples into it.
        let lost = Self.packet(holding: 5 * BeepTrack.periodSamples, phase: phase)
        let deliveries = frames.indices.map { index in
            let arrival = Double(index) * 20 + 40 + (index == lost + 1 ? 55 : 0)
            return Delivery(frame: frames[index], arrivalMilliseconds: index == lost ? nil : arrival)
        }
        let (output, statistics) = try Self.play(
            deliveries,
            configuration: PlayoutConfiguration(minimumDelay: .milliseconds(60))
        )
        #expect(statistics.fecCaughtUp == 1, "\(statistics)")
        #expect(statistics.fecRecovered == 0, "\(statistics)")
        // The 6th beep: the first loud sample after the 5th beep's end and the pause.
        let fifthEnd = try #require(
            output.indices.last { $0 < 5 * BeepTrack.periodSamples && abs(Int(output[$0])) > 2_000 }
        )
        let onset = try #require(output.indices.first { $0 > fifthEnd + 4_800 && abs(Int(output[$0])) > 2_000 })
        // Past the 5 ms fade-in from the concealed silence, every 5 ms of its first 20 ms is
        // near the beep's level.
        for start in stride(from: onset + 240, to: onset + 960, by: 240) {
            #expect(Self.peak(output[start..<(start + 240)]) >= 6_000, "at \(start - onset) samples: \(statistics)")
        }
    }

    /// The beep track off the 20 ms grid through 5 % random loss and jitter with spikes (as
    /// `PlayoutSpliceTests` runs it on the grid): FEC at beeps' ends and starts, concealment runs,
    /// drops. Nothing is louder than half again the beep, nothing clicks, and the only quiet
    /// runs inside a beep are where two packets in a row at its start were lost, which no
    /// receiver can rebuild (FEC carries one frame back).
    @Test(arguments: [360, 480], Array(UInt64(1)...4))
    func beepsOffTheGridThroughRandomLossNeitherThumpNorClick(phase: Int, seed: UInt64) throws {
        let count = 1_500
        let frames = try BeepTrack.encoded(count: count, phase: phase)
        var random = SeededGenerator(seed: seed &* 7_919 &+ UInt64(phase))
        var lost = Set<Int>()
        let deliveries = frames.indices.map { index in
            let isLost = index > 10 && Double.random(in: 0..<1, using: &random) < 0.05
            var jitter = Double.random(in: 0...6, using: &random)
            if Double.random(in: 0..<1, using: &random) < 0.02 { jitter += .random(in: 20...60, using: &random) }
            if isLost { lost.insert(index) }
            return Delivery(frame: frames[index], arrivalMilliseconds: isLost ? nil : Double(index) * 20 + 40 + jitter)
        }
        let buffer = try PlayoutBuffer()
        var driver = PlayoutDriver(buffer: buffer, deliveries: deliveries)
        driver.run(untilPlayed: count - 40, limit: Double(count) * 20)
        let statistics = buffer.statistics
        #expect(statistics.fecRecovered > 30, "\(statistics)")
        let output = Array(driver.output.joined())
        // A beep's first packet rebuilt from FEC comes out at a quarter of the level, and libopus
        // decodes the next two up to 1.45 times it (11,614) while its state settles: louder
        // than that is the thump.
        #expect(Self.peak(output) <= Int(BeepTrack.amplitude * 1.5), "\(statistics)")
        let analysis = BeepAnalysis(output)
        #expect(analysis.onsets.count >= count / 25 - 3)
        #expect(analysis.jumps.isEmpty, "clicks at \(analysis.jumps.prefix(5)): \(statistics)")
        for gap in analysis.gaps {
            // The beep it is in: its onset is heard less than 200 ms (the most delay) after the track's.
            let onset = try #require(analysis.onsets.last { $0 <= gap })
            let beep = (onset + phase) / BeepTrack.periodSamples
            let firstFrame = Self.packet(holding: beep * BeepTrack.periodSamples, phase: phase)
            let startLost = (firstFrame - 1...firstFrame + 2).contains { lost.contains($0) && lost.contains($0 + 1) }
            #expect(
                startLost,
                "a gap at \(gap) in beep \(beep), whose start lost no two packets in a row: \(statistics)"
            )
        }
    }
}

extension PlayoutDecoderStateTests {
    /// The two packets after the one carrying a beep's end are lost: the concealment starts from
    /// a last pitch period that holds the tone's last cycles and the silence after them. Repeating
    /// such a period (and correcting its join) rang on after the beep up to 9,300 with steps of
    /// 3,900 (a click `bench/devices/loss` heard in a lossless call, after a concealed frame):
    /// a sound that is ending fades out within 5 ms instead.
    @Test func aConcealmentAtASoundsEndFadesOutInsteadOfRinging() throws {
        let frames = try BeepTrack.encoded(count: 200, phase: Self.phase)
        let end = Self.packet(holding: 7 * BeepTrack.periodSamples + BeepTrack.beepSamples - 1)
        let deliveries = frames.indices.map { index in
            Delivery(
                frame: frames[index],
                arrivalMilliseconds: (end + 1...end + 2).contains(index) ? nil : Double(index) * 20 + 40
            )
        }
        let (output, statistics) = try Self.play(deliveries)
        #expect(statistics.concealed >= 1, "\(statistics)")
        #expect(Self.peak(output) <= Int(BeepTrack.amplitude * 1.1), "\(statistics)")
        let analysis = BeepAnalysis(output)
        #expect(analysis.jumps.isEmpty, "\(statistics)")
        // The 8th beep (its end was in packet `end`) is heard for no more than 10 ms past its end.
        let onset = try #require(analysis.onsets.first { $0 > 7 * BeepTrack.periodSamples - Self.phase })
        let lastLoud = try #require(
            output.indices.last { $0 < onset + BeepTrack.periodSamples / 2 && abs(Int(output[$0])) > 2_000 }
        )
        #expect(lastLoud - onset <= BeepTrack.beepSamples + 480, "\(statistics)")
    }
}

extension PlayoutDecoderStateTests {
    /// Two packets in a row lost inside a beep, at several places and phases: the first is
    /// concealed, the second rebuilt into the decoder from the third's FEC before the third is
    /// decoded. No 5 ms of the beep falls below 4,000 (half its level) and nothing clicks: the
    /// 10-16 ms dips `bench/devices/loss` once heard at loss runs are not this.
    @Test(arguments: [0, 360, 840], [2, 4, 6])
    func twoPacketsLostInsideABeepAreBridged(phase: Int, offset: Int) throws {
        let frames = try BeepTrack.encoded(count: 200, phase: phase)
        let first = Self.packet(holding: 7 * BeepTrack.periodSamples, phase: phase) + offset
        let deliveries = frames.indices.map { index in
            Delivery(
                frame: frames[index],
                arrivalMilliseconds: (first...first + 1).contains(index) ? nil : Double(index) * 20 + 40
            )
        }
        let (output, statistics) = try Self.play(deliveries)
        #expect(statistics.lossRuns == 1, "\(statistics)")
        let analysis = BeepAnalysis(output)
        #expect(analysis.jumps.isEmpty, "\(statistics)")
        #expect(analysis.gaps.isEmpty, "\(statistics)")
        // The 8th beep, as heard, 5 ms at a time.
        let onset = try #require(analysis.onsets.first { $0 > 7 * BeepTrack.periodSamples - phase - 2_400 })
        for start in stride(from: onset + 240, to: onset + BeepTrack.beepSamples - 480, by: 240) {
            #expect(Self.peak(output[start..<(start + 240)]) >= 4_000, "at \(start - onset): \(statistics)")
        }
    }
}

extension PlayoutDecoderStateTests {
    /// The network holds every packet for 60 ms (a stall), at places that sweep a beep period,
    /// in a call that loses a packet every two seconds (in the pauses, where it costs nothing):
    /// the held packets raise the target delay, and as it decays over the next seconds the
    /// buffer is left frames above it, with a loss too recent for the frame of slack to be
    /// given back in a pause. The frames that bring the delay back are silence from the pauses,
    /// not sound: every beep is heard whole (a frame dropped from a beep cut it by 20 ms;
    /// `bench/devices/loss` heard one that lost its start).
    @Test(arguments: [0, 360])
    func framesDroppedAfterAStallAreSilenceNotSound(phase: Int) throws {
        let frames = try BeepTrack.encoded(count: 500, phase: phase)
        // A packet in the middle of every fourth pause.
        let pauseMiddle = (BeepTrack.beepSamples + BeepTrack.periodSamples) / 2
        let lost = Set(
            stride(from: 0, to: 20, by: 4).map {
                Self.packet(holding: $0 * BeepTrack.periodSamples + pauseMiddle, phase: phase)
            }
        )
        var dropped = 0
        for stallStart in stride(from: 0, to: 500, by: 40) {
            let start = Double(100 * 20 + 40 + stallStart)
            let deliveries = frames.indices.map { index in
                let nominal = Double(index) * 20 + 40
                let arrival = nominal >= start && nominal < start + 60 ? start + 60 : nominal
                return Delivery(frame: frames[index], arrivalMilliseconds: lost.contains(index) ? nil : arrival)
            }
            let (output, statistics) = try Self.play(deliveries)
            dropped += statistics.dropped
            let analysis = BeepAnalysis(output)
            #expect(analysis.jumps.isEmpty, "stall at \(stallStart) ms into a beep: \(statistics)")
            let lastOnset = analysis.onsets.last ?? output.count
            #expect(
                analysis.gaps.allSatisfy { $0 > lastOnset },
                "gaps at \(analysis.gaps), stall at \(stallStart) ms: \(statistics)"
            )
            // Every beep but the last (cut by the end of the output) lasts its 200 ms or more
            // (a concealment may lengthen the one the stall hit).
            let short = analysis.lengths.dropLast().filter { $0 < BeepTrack.beepSamples - 480 }
            #expect(short.isEmpty, "stall at \(stallStart) ms: beeps of \(short) samples, \(statistics)")
        }
        #expect(dropped > 0, "no stall left the delay above its target")
    }
}
