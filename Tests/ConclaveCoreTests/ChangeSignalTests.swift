import Foundation
import Testing

@testable import ConclaveCore

/// `ChangeSignal`, which the waits for local candidates and transport states wake on instead of
/// polling.
@Suite struct ChangeSignalTests {
    @Test func aWaitEndsWhenTheChangeComesNotAtItsDeadline() async throws {
        let signal = ChangeSignal()
        let generation = signal.generation
        let started = ContinuousClock.now
        // The change comes from another thread, as a libnice callback's would.
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.05)  // the scenario: a change 50 ms later
            signal.notify()
        }
        let changed = try await signal.wait(after: generation, until: started + .seconds(30))
        #expect(changed)
        #expect(ContinuousClock.now - started < .seconds(10), "woken by the change, not by the deadline")
        #expect(signal.generation == generation + 1)
    }

    @Test func aChangeBeforeTheWaitIsNotMissed() async throws {
        let signal = ChangeSignal()
        let generation = signal.generation
        signal.notify()  // between reading the generation and waiting
        let started = ContinuousClock.now
        #expect(try await signal.wait(after: generation, until: started + .seconds(30)))
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aWaitWithoutAChangeEndsAtItsDeadline() async throws {
        let signal = ChangeSignal()
        let started = ContinuousClock.now
        let changed = try await signal.wait(after: signal.generation, until: started + .milliseconds(200))
        #expect(!changed)
        #expect(ContinuousClock.now - started >= .milliseconds(200))
    }

    @Test func cancellingAWaitThrowsCancellationError() async throws {
        let signal = ChangeSignal()
        let waiting = Task {
            try await signal.wait(after: signal.generation, until: .now + .seconds(30))
        }
        waiting.cancel()
        let started = ContinuousClock.now
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func everyWaiterWakes() async throws {
        let signal = ChangeSignal()
        let generation = signal.generation
        let deadline = ContinuousClock.now + .seconds(30)
        let started = ContinuousClock.now
        let waiters = (0..<8).map { _ in Task { try await signal.wait(after: generation, until: deadline) } }
        signal.notify()
        for waiter in waiters { #expect(try await waiter.value) }
        #expect(ContinuousClock.now - started < .seconds(10), "every waiter woken by the change, none by the deadline")
    }
}
