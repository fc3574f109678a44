import ConclaveAudio
import ConclaveCore
import Testing

/// The distance between two instants or the size of a duration, whichever sign.
private func magnitude(_ duration: Duration) -> Duration { duration < .zero ? .zero - duration : duration }

@Suite struct DeviceClockTests {
    static let origin = ContinuousClock.now

    /// Callback times of a device taking 480 samples (10 ms) per call whose thread stalls for
    /// `stall` every 700 ms from 350 ms on: the calls due during a stall all run when it ends,
    /// back to back (the device plays on from its buffer meanwhile).
    static func stalledCalls(count: Int, stall: Duration) -> [ContinuousClock.Instant] {
        (0..<count).map { index in
            let due = Duration.milliseconds(index * 10)
            let cycle = Duration.milliseconds(700)
            let shifted = due + .milliseconds(350)
            let intoCycle = shifted - cycle * Int(shifted / cycle)
            return origin + (intoCycle < stall ? due - intoCycle + stall : due)
        }
    }

    @Test func lateCallbacksStillGetSteadyInstants() {
        var clock = DeviceClock(sampleRate: 48_000)
        let calls = Self.stalledCalls(count: 1_000, stall: .milliseconds(45))
        let heard = calls.map { clock.instant(forCallAt: $0, samples: 480) }
        let steps = zip(heard, heard.dropFirst()).map { $1 - $0 }
        let callSteps = zip(calls, calls.dropFirst()).map { $1 - $0 }
        // The callbacks come 0 to 55 ms apart; the instants stay within a millisecond of 10 ms.
        #expect((callSteps.max() ?? .zero) >= .milliseconds(50) && callSteps.min() == .zero)
        #expect(
            steps.allSatisfy { magnitude($0 - .milliseconds(10)) < .milliseconds(1) },
            "steps from \(String(describing: steps.min())) to \(String(describing: steps.max()))"
        )
        // And they stay near the calls: the clock is not left behind.
        #expect(zip(calls, heard).allSatisfy { magnitude($0 - $1) < .milliseconds(50) })
    }

    @Test func aDeviceThatDriftsIsFollowed() {
        var clock = DeviceClock(sampleRate: 48_000)
        // 0.2% fast: 480 samples every 9.98 ms of the system's clock, for a minute.
        var last = Self.origin
        for index in 0..<6_000 {
            last = Self.origin + .microseconds(Int64(index) * 9_980)
            let heard = clock.instant(forCallAt: last, samples: 480)
            if index > 500 { #expect(magnitude(heard - last) < .milliseconds(2), "call \(index): \(heard - last)") }
        }
    }

    @Test func aStallBeyondTheThresholdStartsANewLine() {
        var clock = DeviceClock(sampleRate: 48_000)
        for index in 0..<100 {
            _ = clock.instant(forCallAt: Self.origin + .milliseconds(index * 10), samples: 480)
        }
        // The device was gone for 300 ms (an underrun, a restarted server).
        let resumed = Self.origin + .milliseconds(1_300)
        #expect(clock.instant(forCallAt: resumed, samples: 480) == resumed)
        #expect(clock.instant(forCallAt: resumed + .milliseconds(10), samples: 480) == resumed + .milliseconds(10))
        // Hostile input: no samples, a call back in time; no trap, and a sane instant.
        _ = clock.instant(forCallAt: resumed, samples: 0)
        let back = Self.origin - .seconds(100)
        #expect(clock.instant(forCallAt: back, samples: -5) == back)
    }
}
