import ConclaveCore
import ConclaveRTP
import Logging
import Synchronization
import Testing

@testable import ConclavePeerConnection
@testable import ConclaveSDP

/// The receive session's streams belong to the ICE loop thread: packets are handled there, and
/// negotiation, statistics and keyframe requests reach them by posting to it.
@Suite struct RTPReceiveSessionTests {
    static let ssrc: UInt32 = 0x5151

    /// An Opus stream as a subscriber answer negotiates it.
    static let audio = NegotiatedMedia(
        mid: "0",
        index: 0,
        kind: .audio,
        codec: .opus,
        payloadType: 111,
        clockRate: 48_000,
        channels: 2,
        formatParameters: [],
        extensionIDs: [:],
        feedback: [],
        direction: .recvonly,
        remoteSSRC: ssrc,
        remoteRTXSSRC: nil,
        remoteMediaStreamID: nil,
        localSSRC: nil
    )

    static func opusPacket(_ sequence: UInt16) -> [UInt8] {
        RTPHeader(payloadType: 111, sequenceNumber: sequence, timestamp: UInt32(sequence) * 960, ssrc: ssrc)
            .serialize(payload: [0xF8, 0xFF, 0xFE])
    }

    /// A transport that never connects: the session's loop is its ICE agent's.
    static func transport() throws -> MediaTransport {
        try MediaTransport(
            configuration: .init(localAddresses: ["127.0.0.1"]),
            controlling: false,
            logger: Logger(label: "test")
        )
    }

    @Test func packetsHandledOnTheLoopBecomeFramesAndStatistics() async throws {
        let transport = try Self.transport()
        let frames = Mutex<[RTPReceiveSession.Frame]>([])
        let session = RTPReceiveSession(
            transport: transport,
            onFrame: { frame in frames.withLock { $0.append(frame) } },
            onSenderReport: { _ in }
        )
        await session.configure([Self.audio]) { _, _ in RTPReceiveSession.Source(id: 7, mid: "a") }
        // On the loop thread, as the transport's RTP handler calls it.
        await withCheckedContinuation { continuation in
            transport.ice.repeatOnLoop(every: .milliseconds(1)) {
                for sequence in UInt16(1)...5 { session.receiveRTP(Self.opusPacket(sequence)) }
                continuation.resume()
                return false
            }
        }
        let statistics = await session.statistics
        #expect(statistics["0"]?.packets == 5)
        let delivered = frames.withLock { $0 }
        #expect(delivered.count == 5, "each Opus packet is a frame")
        #expect(delivered.allSatisfy { $0.source.id == 7 && $0.mid == "0" && $0.ssrc == Self.ssrc })
        #expect(await !session.requestKeyframe(from: .init(id: 7)), "no video stream to ask a keyframe of")
        await transport.close()
    }

    @Test func aPacketHandledOffTheLoopStopsTheProcess() async throws {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let transport = try MediaTransport(
                configuration: .init(localAddresses: ["127.0.0.1"]),
                controlling: false,
                logger: Logger(label: "test")
            )
            let session = RTPReceiveSession(transport: transport, onFrame: { _ in }, onSenderReport: { _ in })
            // Not on the loop: the per-packet state must refuse.
            session.receiveRTP(
                RTPHeader(payloadType: 111, sequenceNumber: 1, timestamp: 0, ssrc: 1).serialize(payload: [0xF8])
            )
        }
        let message = String(decoding: try #require(result).standardErrorContent, as: UTF8.self)
        #expect(message.contains("LoopBound value touched off its ICE loop thread"), "stderr: \(message)")
    }
}
