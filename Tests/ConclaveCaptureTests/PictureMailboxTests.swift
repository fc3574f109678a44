import ConclaveCore
import Foundation
import Testing

@testable import ConclaveCapture

/// The slot between a capture thread and the sender: newest picture only, a waiter woken by the
/// first picture, by the device's end, or by cancellation.
@Suite struct PictureMailboxTests {
    private func picture(_ luma: UInt8) throws -> VideoFrame {
        var data = [UInt8](repeating: 128, count: VideoFrame.byteCount(width: 4, height: 4))
        for index in 0..<16 { data[index] = luma }
        return try VideoFrame(width: 4, height: 4, data: data, rtpTimestamp: 0)
    }

    @Test func keepsOnlyTheNewestPictureAndRepeatsIt() throws {
        let mailbox = PictureMailbox()
        #expect(mailbox.latest == nil)
        for luma in [10, 20, 30] as [UInt8] { mailbox.post(try picture(luma)) }
        #expect(mailbox.latest?.data.first == 30)
        #expect(mailbox.latest?.data.first == 30, "read again: the same picture")
        #expect(mailbox.posted == 3)
    }

    @Test func aWaiterIsWokenByTheFirstPicture() async throws {
        let mailbox = PictureMailbox()
        let first = try picture(50)
        async let waited: Void = mailbox.waitForFirstPicture()
        // Posting from another thread, as the capture does; the waiter may or may not be parked
        // yet, and either way it returns.
        Thread.detachNewThread { mailbox.post(first) }
        try await waited
        #expect(mailbox.latest?.data.first == 50)
        try await mailbox.waitForFirstPicture()
    }

    @Test func aDeviceThatEndsBeforeAnyPictureFailsTheWaiter() async throws {
        let mailbox = PictureMailbox()
        let lost = CaptureError(.deviceLost, device: "/dev/video9", "camera /dev/video9 stopped delivering")
        let waiter = Task { try await mailbox.waitForFirstPicture() }
        mailbox.end(lost)
        await #expect(throws: lost) { try await waiter.value }
        await #expect(throws: lost) { try await mailbox.waitForFirstPicture() }
    }

    @Test func aDeviceThatEndsAfterAPictureKeepsIt() async throws {
        let mailbox = PictureMailbox()
        mailbox.post(try picture(70))
        mailbox.end(CaptureError(.deviceLost, device: "/dev/video9", "gone"))
        try await mailbox.waitForFirstPicture()
        #expect(mailbox.latest?.data.first == 70)
        #expect(mailbox.ended?.kind == .deviceLost)
    }

    @Test func cancellationEndsTheWait() async {
        let mailbox = PictureMailbox()
        let waiter = Task { try await mailbox.waitForFirstPicture() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
    }
}
