import Logging
import Testing

@testable import ConclaveICE

/// `LoopBound`: a value only the ICE loop touches, reached from elsewhere by posting.
@Suite("Loop-bound state")
struct LoopBoundTests {
    static func agent() throws -> ICEAgent {
        try ICEAgent(
            configuration: .init(role: .controlling, localAddresses: ["127.0.0.1"]),
            logger: Logger(label: "test")
        )
    }

    @Test("posted work runs on the loop thread, and loop code reaches the value directly")
    func postedWorkRunsOnTheLoop() async throws {
        let agent = try Self.agent()
        let bound = LoopBound(0, on: agent)
        #expect(!bound.isOnLoop, "a test task is not the loop")
        let onLoop = await bound.run { value in
            value += 1
            return bound.isOnLoop && agent.loop.isCurrentThread
        }
        #expect(onLoop)
        // Loop code (a timer here, the datagram handler in a transport) calls withValue directly.
        let seen = await withCheckedContinuation { continuation in
            agent.repeatOnLoop(every: .milliseconds(1)) {
                continuation.resume(returning: bound.withValue { $0 })
                return false
            }
        }
        #expect(seen == 1, "withValue on the loop sees what the posted work changed")
        await agent.close()
    }

    @Test("posts run in the order posted, from any thread")
    func postsRunInOrder() async throws {
        let agent = try Self.agent()
        let bound = LoopBound([Int](), on: agent)
        for index in 0..<500 { bound.execute { $0.append(index) } }
        #expect(await bound.run { $0 } == Array(0..<500))
        await agent.close()
    }

    @Test("a post from the loop runs after the current work, never inline")
    func postsFromTheLoopDoNotNest() async throws {
        let agent = try Self.agent()
        let bound = LoopBound([String](), on: agent)
        let during = await bound.run { value in
            bound.execute { $0.append("posted") }
            value.append("current")
            return value
        }
        #expect(during == ["current"], "the posted work has not run inside the current work")
        #expect(await bound.run { $0 } == ["current", "posted"])
        await agent.close()
    }

    @Test("after the agent closes, posted work still runs, one job at a time, as the owner")
    func workAfterCloseRuns() async throws {
        let agent = try Self.agent()
        let bound = LoopBound(0, on: agent)
        await agent.close()
        #expect(agent.loop.hasExited)
        for _ in 0..<100 { bound.execute { $0 += 1 } }
        let (value, owner) = await bound.run { ($0, bound.isOnLoop) }
        #expect(value == 100)
        #expect(owner, "the queue that takes the loop's late work owns the value")
        #expect(!bound.isOnLoop)
    }

    @Test("the value touched off the loop stops the process, saying why")
    func touchingTheValueOffTheLoopTraps() async throws {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let agent = try ICEAgent(
                configuration: .init(role: .controlling, localAddresses: ["127.0.0.1"]),
                logger: Logger(label: "test")
            )
            let bound = LoopBound(0, on: agent)
            bound.withValue { $0 += 1 }
        }
        let message = String(decoding: try #require(result).standardErrorContent, as: UTF8.self)
        #expect(message.contains("LoopBound value touched off its ICE loop thread"), "stderr: \(message)")
    }
}
