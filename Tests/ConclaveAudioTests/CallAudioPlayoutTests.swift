import ConclaveAudio
import ConclaveCore
import Foundation
import Testing

@Suite struct CallAudioPlayoutTests {
    /// Renders 3 s of two participants' packets (one every 20 ms each, 40 ms transit) in chunks
    /// of `chunk` samples, as an output device would.
    private func render(chunk: Int, volumes: [UInt64: Float] = [:]) throws -> ([Int16], CallAudioPlayout) {
        let playout = CallAudioPlayout()
        for (feedID, volume) in volumes { playout.setVolume(volume, feedID: feedID) }
        let alice = try encodedVoice(count: 150, firstTimestamp: 5)
        let bob = try encodedVoice(count: 150, firstTimestamp: 77_777)
        let origin = ContinuousClock.now
        var output: [Int16] = []
        var packet = 0
        var buffer = [Int16](repeating: 0, count: chunk)
        while output.count < 48_000 * 3 {
            let now = origin + .microseconds(Int64(output.count) * 1_000 / 48)
            while packet < 150, origin + .milliseconds(packet * 20 + 40) <= now {
                playout.received(feedID: 1, frame: alice[packet], at: origin + .milliseconds(packet * 20 + 40))
                playout.received(feedID: 2, frame: bob[packet], at: origin + .milliseconds(packet * 20 + 40))
                packet += 1
            }
            buffer.withUnsafeMutableBufferPointer { playout.render(into: $0, now: now) }
            output += buffer
        }
        return (output, playout)
    }

    /// The device may ask for any number of samples: the mix is the same whatever the chunks.
    @Test func anyChunkSizeRendersTheSameMix() throws {
        let (whole, _) = try render(chunk: 960)
        let (small, _) = try render(chunk: 336)
        let (large, _) = try render(chunk: 1_440)
        #expect(rms(whole) > 1_000)
        #expect(small.prefix(whole.count) == whole.prefix(small.count))
        #expect(large.prefix(whole.count) == whole.prefix(large.count))
    }

    @Test func levelsStatisticsAndVolumesArePublishedPerParticipant() throws {
        let (_, playout) = try render(chunk: 480, volumes: [2: 0])
        let participants = playout.participants
        let alice = try #require(participants[1])
        let bob = try #require(participants[2])
        #expect(alice.level.rms > 0.02)
        #expect(bob.level.rms > 0.02)
        #expect(bob.volume == 0)
        #expect(alice.volume == 1)
        #expect(alice.statistics.played >= 140)
        #expect(alice.statistics.late == 0)
        // A packet still in the inbox when the participant leaves does not bring them back.
        playout.received(feedID: 1, frame: try encodedVoice(count: 1)[0])
        playout.participantLeft(feedID: 1)
        #expect(playout.participants[1] == nil)
        var buffer = [Int16](repeating: 0, count: 960)
        buffer.withUnsafeMutableBufferPointer { playout.render(into: $0) }
        #expect(playout.participants[1] == nil)
        #expect(playout.participants[2] != nil)
    }

    /// A muted participant adds nothing: the mix equals the other one alone.
    @Test func aParticipantAtVolumeZeroIsNotHeard() throws {
        let (muted, _) = try render(chunk: 960, volumes: [2: 0])
        let (both, _) = try render(chunk: 960)
        #expect(muted != both)
        #expect(rms(muted) > 500)
    }
}

@Suite struct CallAudioPlayoutDeviceClockTests {
    /// Plays 10 s of one participant's packets (one every 20 ms, 40 or 58 ms transit, so the
    /// buffer keeps a couple) to a device whose callbacks stall as
    /// `DeviceClockTests.stalledCalls` says; the buffer's counts after the first second.
    private func play(stall: Duration, throughDeviceClock: Bool) throws -> PlayoutStatistics {
        let playout = CallAudioPlayout()
        let voice = try encodedVoice(count: 500)
        let origin = DeviceClockTests.origin
        let calls = DeviceClockTests.stalledCalls(count: 980, stall: stall)
        var buffer = [Int16](repeating: 0, count: 480)
        var packet = 0
        func arrival(_ packet: Int) -> ContinuousClock.Instant {
            origin + .milliseconds(packet * 20 + 40 + (packet % 2) * 18)
        }
        var settled = PlayoutStatistics()
        for (index, call) in calls.enumerated() {
            // The first second: the target grows to the arrivals' jitter (a frame or two inserted).
            if index == 100 { settled = try #require(playout.participants[1]).statistics }
            while packet < voice.count, arrival(packet) <= call {
                playout.received(feedID: 1, frame: voice[packet], at: arrival(packet))
                packet += 1
            }
            buffer.withUnsafeMutableBufferPointer {
                if throughDeviceClock {
                    playout.render(into: $0, calledAt: call)
                } else {
                    playout.render(into: $0, now: call)
                }
            }
        }
        var after = try #require(playout.participants[1]).statistics
        after.played -= settled.played
        after.concealed -= settled.concealed
        after.dropped -= settled.dropped
        after.underruns -= settled.underruns
        return after
    }

    /// A device thread that runs 100 ms late every 700 ms (a loaded machine; the device plays on
    /// from its buffer) changes nothing that is heard: no frame dropped or concealed, so the
    /// sound keeps its timing.
    @Test func lateDeviceCallbacksDropAndConcealNothing() throws {
        let steady = try play(stall: .milliseconds(100), throughDeviceClock: true)
        #expect(steady.dropped == 0 && steady.concealed == 0 && steady.played >= 430, "\(steady)")
        // The same callbacks stamped with their own times: the buffer drops and conceals frames
        // (those 50 ms late no longer do: a drop they make due waits for silence, and the voice
        // has none).
        let stamped = try play(stall: .milliseconds(100), throughDeviceClock: false)
        #expect(stamped.dropped + stamped.concealed > 0, "\(stamped)")
    }
}
