import Testing

@testable import ConclaveICE

/// The receive-batching policy alone, on exact vectors: time and datagram counts in, sleep and
/// the poll's remaining timeout out (40 ms at most, a budget of 24 datagrams, started at 0).
@Suite("Receive batching policy")
struct ReceiveBatchingPolicyTests {
    typealias Wait = ReceiveBatchingPolicy.Wait

    private static func fresh() -> ReceiveBatchingPolicy {
        ReceiveBatchingPolicy(maximumDelay: 40_000, budget: 24, now: 0)
    }

    @Test("before any rate is known, the thread sleeps until the maximum delay after its last wakeup")
    func waitsTheMaximumAtFirst() {
        var policy = Self.fresh()
        #expect(policy.beforePoll(now: 10_000, datagrams: 0, timeout: -1) == Wait(sleep: 30_000, timeout: -1))
        #expect(policy.delay == 40_000)
        policy.woke(at: 41_000, datagrams: 3)
        #expect(policy.beforePoll(now: 42_000, datagrams: 4, timeout: -1) == Wait(sleep: 39_000, timeout: -1))
    }

    @Test("GLib's timeout bounds the sleep, and what the sleep used is taken off the poll's timeout")
    func timeoutBoundsTheSleep() {
        var policy = Self.fresh()
        #expect(
            policy.beforePoll(now: 10_000, datagrams: 0, timeout: 0) == Wait(sleep: 0, timeout: 0),
            "a non-blocking poll never sleeps"
        )
        #expect(policy.beforePoll(now: 10_000, datagrams: 0, timeout: 5) == Wait(sleep: 5_000, timeout: 0))
        #expect(policy.beforePoll(now: 10_000, datagrams: 0, timeout: 50) == Wait(sleep: 30_000, timeout: 20))
        #expect(policy.beforePoll(now: 10_000, datagrams: 0, timeout: 30) == Wait(sleep: 30_000, timeout: 0))
        #expect(
            policy.beforePoll(now: 50_000, datagrams: 0, timeout: 7) == Wait(sleep: 0, timeout: 7),
            "past the delay: poll at once"
        )
    }

    @Test("over a half-second window the delay becomes budget / rate")
    func delayFollowsTheRate() {
        var policy = Self.fresh()
        // 24 datagrams every 5 ms, woken every 5 ms: 4800 a second, no sudden rise.
        for step in 1..<100 {
            _ = policy.beforePoll(now: Int64(step) * 5_000, datagrams: Int64(step) * 24, timeout: -1)
            policy.woke(at: Int64(step) * 5_000, datagrams: Int64(step) * 24)
            #expect(policy.delay == 40_000, "no estimate before the window ends (step \(step))")
        }
        #expect(policy.beforePoll(now: 500_000, datagrams: 2_400, timeout: -1) == Wait(sleep: 0, timeout: -1))
        #expect(policy.delay == 5_000, "24 / 4800 per second")
        policy.woke(at: 500_000, datagrams: 2_400)
        #expect(policy.beforePoll(now: 501_000, datagrams: 2_401, timeout: -1) == Wait(sleep: 4_000, timeout: -1))
    }

    @Test("more than twice the budget since the last wakeup shrinks the delay at once")
    func suddenRiseShrinks() {
        var policy = Self.fresh()
        #expect(
            policy.beforePoll(now: 1_000, datagrams: 48, timeout: -1) == Wait(sleep: 39_000, timeout: -1),
            "twice the budget is no rise"
        )
        #expect(policy.delay == 40_000)
        #expect(policy.beforePoll(now: 1_000, datagrams: 96, timeout: -1) == Wait(sleep: 9_000, timeout: -1))
        #expect(policy.delay == 10_000, "40 ms * 24 / 96")
        policy.woke(at: 2_000, datagrams: 96)
        #expect(policy.beforePoll(now: 3_000, datagrams: 96 + 240, timeout: -1) == Wait(sleep: 0, timeout: -1))
        #expect(policy.delay == 1_000, "10 ms * 24 / 240")
    }

    @Test("a slow or silent window brings the delay back to the maximum, never above")
    func capsAtTheMaximum() {
        var policy = Self.fresh()
        _ = policy.beforePoll(now: 10_000, datagrams: 240, timeout: -1)
        #expect(policy.delay == 4_000)
        policy.woke(at: 10_000, datagrams: 240)
        // 240 datagrams in the window: 24 / 480 per second would be 50 ms.
        _ = policy.beforePoll(now: 500_000, datagrams: 240, timeout: -1)
        #expect(policy.delay == 40_000)
        policy.woke(at: 500_000, datagrams: 240)
        _ = policy.beforePoll(now: 1_000_000, datagrams: 240, timeout: -1)
        #expect(policy.delay == 40_000, "no datagram in the window")
    }

    @Test("a budget below one counts as one")
    func budgetAtLeastOne() {
        let policy = ReceiveBatchingPolicy(maximumDelay: 40_000, budget: 0, now: 0)
        #expect(policy.budget == 1)
    }
}
