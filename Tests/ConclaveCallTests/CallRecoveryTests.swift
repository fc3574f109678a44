import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging
import Testing

/// Fault drills against a private Janus: the call recovers by itself and media flows again, with
/// the same key, and participants are still recognised by their user id. Recovery times are
/// printed; the only bound is the generous wait.
@Suite(.serialized) struct CallRecoveryTests {
    static let patience = Duration.seconds(30)

    static func logger() -> Logger {
        var logger = Logger(label: "call-test")
        logger.logLevel = ProcessInfo.processInfo.environment["CALL_TEST_LOG"] == nil ? .warning : .info
        return logger
    }

    /// Alice and Bob in a new room of `bed`, sending tone and pattern (H264) with one call key.
    static func startCall(on bed: JanusTestBed) async throws -> (alice: CallSession, bob: CallSession) {
        let room = TestJanus.uniqueRoomID()
        let admin = try await JanusConnection.connect(to: bed.webSocketURL)
        let handle = try await VideoRoomHandle.attach(to: try await admin.createSession())
        let options = VideoRoom.RoomOptions(room: room, videoCodecs: ["h264", "vp8"])
        _ = try await handle.createRoom(options)
        await admin.close()

        let key = CallKey.random()
        var sessions: [CallSession] = []
        for display in ["1:Alice", "2:Bob"] {
            let crypto = CallFrameCrypto(callID: 77, format: .ecall, logger: logger())
            crypto.keyRing.install(key, epoch: 0)
            let video = try #require(
                try CallMediaSources.video(
                    .generated,
                    settings: .init(codec: .h264, width: 320, height: 240, frameRate: 15)
                )
            )
            let audio = try #require(try CallMediaSources.audio(.generated))
            let session = CallSession(
                configuration: .init(
                    janusURL: bed.webSocketURL,
                    room: room,
                    callID: 77,
                    display: display,
                    crypto: crypto,
                    transport: .init(localAddresses: [bed.hostAddress]),
                    roomOptions: options
                ),
                sources: [audio, video],
                logger: logger()
            )
            try await session.join()
            sessions.append(session)
        }
        return (sessions[0], sessions[1])
    }

    static func participant(_ userID: String, of session: CallSession) async -> CallStatus.Participant? {
        await session.status().participants.first { $0.id == userID }
    }

    static func frames(from userID: String, at session: CallSession) async -> Int {
        await participant(userID, of: session)?.framesDecrypted ?? 0
    }

    /// Polls `condition` every 100 ms; returns how long it took, or nil after `patience`.
    static func waitUntil(_ condition: () async -> Bool) async -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < patience {
            if await condition() { return ContinuousClock.now - start }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// Both see more frames from each other than `alice`/`bob` counts now.
    static func mediaFlowsBothWays(_ call: (alice: CallSession, bob: CallSession), beyond margin: Int = 20) async
        -> Duration?
    {
        let fromBob = await frames(from: "2", at: call.alice)
        let fromAlice = await frames(from: "1", at: call.bob)
        return await waitUntil {
            let bob = await frames(from: "2", at: call.alice)
            let alice = await frames(from: "1", at: call.bob)
            return bob > fromBob + margin && alice > fromAlice + margin
        }
    }

    @Test func aDroppedWebSocketIsClaimedAndMediaKeepsFlowing() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await Self.startCall(on: bed)
        #expect(await Self.mediaFlowsBothWays(call) != nil, "media flows before the fault")
        let feed = await call.alice.feedID

        await call.alice.dropJanusConnectionForTesting()
        let claimed = await Self.waitUntil {
            await call.alice.status().recoveries.contains { $0.kind == .claim && $0.recoveredMs != nil }
        }
        #expect(claimed != nil, "the session is claimed on a new WebSocket")
        let resumed = await Self.mediaFlowsBothWays(call)
        #expect(resumed != nil, "media flows after the claim")
        #expect(await call.alice.feedID == feed, "a claimed session keeps its feed")
        let recovery = await call.alice.status().recoveries.first
        print(
            "claim path: signalling back after \(claimed.map { "\($0)" } ?? "-"), "
                + "status: started \(recovery?.startedMs ?? -1) ms, recovered \(recovery?.recoveredMs ?? -1) ms"
        )
        #expect(await Self.participant("2", of: call.alice)?.undecryptable == 0)
        await call.alice.leave()
        await call.bob.leave()
    }

    @Test func afterJanusRestartsTheCallContinuesWithNewSessionsAndTheSameKey() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await Self.startCall(on: bed)
        #expect(await Self.mediaFlowsBothWays(call) != nil, "media flows before the fault")
        let aliceFeed = await call.alice.feedID
        let bobFeed = await call.bob.feedID

        let restart = ContinuousClock.now
        try bed.restartJanus()
        let janusBack = ContinuousClock.now - restart
        let resumed = await Self.mediaFlowsBothWays(call, beyond: 5)
        #expect(resumed != nil, "media flows again after Janus restarted: \(bed.logTail(lines: 40))")
        print(
            "new-session path: Janus back after \(janusBack), media both ways \(resumed.map { "\($0)" } ?? "never") "
                + "after the restart began"
        )
        #expect(await call.alice.feedID != aliceFeed, "a new session publishes a new feed")
        #expect(await call.bob.feedID != bobFeed)
        let bobAsSeenByAlice = try #require(await Self.participant("2", of: call.alice))
        #expect(bobAsSeenByAlice.feeds.count >= 2, "Bob's new feed is the same participant: \(bobAsSeenByAlice.feeds)")
        #expect(bobAsSeenByAlice.undecryptable == 0, "the same key decrypts after recovery")
        #expect(await call.alice.status().participants.count == 1)
        let recovery = try #require(await call.alice.status().recoveries.last)
        #expect(recovery.kind == .newSession)
        #expect(recovery.mediaResumedMs != nil)
        await call.alice.leave()
        await call.bob.leave()
    }

    /// A screen shared during the call (a second pattern here: the session does not care what
    /// the pictures are) is a feed of its own, "1-screen"; Janus's restart publishes it again
    /// with the call's feed, and stopping the share takes it out of the room.
    @Test func aSharedScreenIsPublishedAgainAfterJanusRestartsAndLeavesWhenStopped() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await Self.startCall(on: bed)
        #expect(await Self.mediaFlowsBothWays(call) != nil, "media flows before the share")
        let screen = try #require(
            try CallMediaSources.video(
                .generated,
                settings: .init(codec: .h264, width: 320, height: 240, frameRate: 15)
            )
        )
        try await call.alice.shareScreen(screen)
        await #expect(throws: CallError.self) { try await call.alice.shareScreen(screen) }
        let firstScreenFeed = try #require(await call.alice.status().screenFeed)
        let aliceFeed = await call.alice.feedID
        #expect(firstScreenFeed != aliceFeed)
        let shown = await Self.waitUntil { await Self.frames(from: "1-screen", at: call.bob) > 20 }
        let seenByBob = await call.bob.status().participants.map(\.id)
        #expect(shown != nil, "Bob receives Alice's screen: \(seenByBob)")

        try bed.restartJanus()
        #expect(await Self.mediaFlowsBothWays(call, beyond: 5) != nil, "media flows again after Janus restarted")
        let before = await Self.frames(from: "1-screen", at: call.bob)
        let again = await Self.waitUntil { await Self.frames(from: "1-screen", at: call.bob) > before + 20 }
        #expect(again != nil, "the screen is shared again after the restart")
        let screenAfter = try #require(await call.alice.status().screenFeed)
        #expect(screenAfter != firstScreenFeed)
        #expect(await Self.participant("1-screen", of: call.bob)?.undecryptable == 0)

        await call.alice.stopSharingScreen()
        #expect(await call.alice.status().screenFeed == nil)
        let gone = await Self.waitUntil { await Self.participant("1-screen", of: call.bob)?.present == false }
        #expect(gone != nil, "the screen's feed leaves the room")
        #expect(await Self.mediaFlowsBothWays(call) != nil, "the call goes on without the screen")
        // Alice never subscribed to her own screen.
        let seenByAlice = await call.alice.status().participants.map(\.id)
        #expect(seenByAlice == ["2"])
        await call.alice.leave()
        await call.bob.leave()
    }

    @Test func afterTheLinkIsDownForFiveSecondsMediaFlowsAgain() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await Self.startCall(on: bed)
        #expect(await Self.mediaFlowsBothWays(call) != nil, "media flows before the fault")
        try bed.setLink(up: false)
        try await Task.sleep(for: .seconds(5))
        try bed.setLink(up: true)
        let resumed = await Self.mediaFlowsBothWays(call, beyond: 5)
        #expect(resumed != nil, "media flows again after the link came back")
        print("link down 5 s: media both ways \(resumed.map { "\($0)" } ?? "never") after the link came back")
        #expect(await Self.participant("2", of: call.alice)?.undecryptable == 0)
        await call.alice.leave()
        await call.bob.leave()
    }

    /// ICE fails during a long outage: the call restarts ICE (same feed), or joins again on a new
    /// session when the restart cannot bring media back.
    @Test func afterALongOutageFailsICETheCallRecoversByICERestartOrRejoin() async throws {
        let bed = try TestJanus.start()
        defer { bed.stop() }
        let call = try await Self.startCall(on: bed)
        #expect(await Self.mediaFlowsBothWays(call) != nil, "media flows before the fault")
        let feed = await call.alice.feedID
        try bed.setLink(up: false)
        try await Task.sleep(for: .seconds(12))
        try bed.setLink(up: true)
        let resumed = await Self.mediaFlowsBothWays(call, beyond: 5)
        #expect(resumed != nil, "media flows again after the link came back")
        print("link down 12 s: media both ways \(resumed.map { "\($0)" } ?? "never") after the link came back")
        let kinds = await call.alice.status().recoveries.map(\.kind)
        print("link down 12 s: recoveries \(kinds)")
        let rejoined = kinds.contains(.mediaRejoin) || kinds.contains(.newSession)
        #expect(kinds.contains(.iceRestart) || rejoined, "ICE failed, so ICE restart or a new session: \(kinds)")
        if rejoined { #expect(await call.alice.feedID != feed) } else { #expect(await call.alice.feedID == feed) }
        #expect(await Self.participant("2", of: call.alice)?.undecryptable == 0)
        await call.alice.leave()
        await call.bob.leave()
    }
}
