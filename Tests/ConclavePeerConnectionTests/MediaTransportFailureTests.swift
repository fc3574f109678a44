import ConclavePeerConnection
import Testing

@Suite struct MediaTransportFailureTests {
    /// The failure reason is typed now; people and logs still read the sentences they read when it
    /// was a string.
    @Test func failuresDescribeThemselvesAsBefore() {
        let cases: [(MediaTransportFailure, String)] = [
            (.iceFailed, "ICE failed: no candidate pair works"),
            (.dtls("handshake timed out"), "DTLS: handshake timed out"),
            (
                .unsupportedSRTPProfile("aes256CmSha1_32"),
                "DTLS negotiated an SRTP profile this build cannot use (aes256CmSha1_32)"
            ),
            (.srtp("bad key"), "SRTP: bad key"),
        ]
        for (failure, text) in cases {
            #expect(failure.description == text)
            #expect(MediaTransportState.failed(failure).description == "failed: \(text)")
        }
        #expect(MediaTransportState.failed(.iceFailed) != .failed(.dtls("ICE failed: no candidate pair works")))
    }
}
