import ConclaveCore
import Testing

@testable import ConclaveCompose

/// The bounded queue between a call's receive path and the live composite's thread.
@Suite struct LiveCompositeQueueTests {
    func video(_ keyframe: Bool) -> EncodedFrame {
        EncodedFrame(codec: .vp8, data: [1, 2, 3], rtpTimestamp: 0, isKeyframe: keyframe)
    }

    @Test("A full queue drops input video and counts it; that feed resumes at its next keyframe, others at once")
    func fullQueueDropsVideoUntilAKeyframe() throws {
        let inbox = LiveComposite.Inbox()
        let counters = LiveComposite.Counters()
        for _ in 0..<LiveComposite.videoQueueLimit { inbox.add(.frame(1, video(false)), counters: counters) }
        #expect(counters.videoDropped.load(ordering: .relaxed) == 0)
        inbox.add(.frame(2, video(false)), counters: counters)
        inbox.add(.frame(2, video(true)), counters: counters)
        #expect(counters.videoDropped.load(ordering: .relaxed) == 2, "the queue is full: even a keyframe waits")
        // Joins and leaves are never dropped; audio has a queue of its own.
        inbox.add(.left(1), counters: counters)
        inbox.add(
            .frame(1, EncodedFrame(codec: .opus, data: [9], rtpTimestamp: 0, isKeyframe: true)),
            counters: counters
        )
        var batch: [LiveComposite.Event] = []
        #expect(!inbox.take(into: &batch, until: .distantPast))
        #expect(batch.count == LiveComposite.videoQueueLimit + 2)
        // The queue is empty again: feed 2 still waits for a keyframe, feed 3 goes straight in.
        inbox.add(.frame(2, video(false)), counters: counters)
        inbox.add(.frame(3, video(false)), counters: counters)
        inbox.add(.frame(2, video(true)), counters: counters)
        inbox.add(.frame(2, video(false)), counters: counters)
        #expect(counters.videoDropped.load(ordering: .relaxed) == 3)
        batch.removeAll()
        _ = inbox.take(into: &batch, until: .distantPast)
        let kept = batch.compactMap { event -> (UInt64, Bool)? in
            guard case .frame(let feed, let frame) = event else { return nil }
            return (feed, frame.isKeyframe)
        }
        #expect(kept.map(\.0) == [3, 2, 2])
        #expect(kept.map(\.1) == [false, true, false])
    }

    @Test("After the finish nothing is queued, and the thread is told at once")
    func finishStopsTheQueue() {
        let inbox = LiveComposite.Inbox()
        let counters = LiveComposite.Counters()
        inbox.finish()
        inbox.add(.joined(1, "u1:Ann"), counters: counters)
        var batch: [LiveComposite.Event] = []
        #expect(inbox.take(into: &batch, until: .distantFuture))
        #expect(batch.isEmpty)
    }
}
