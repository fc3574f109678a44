import Foundation
import JanusTestBed
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The real Janus that integration tests talk to, in a network namespace of its own.
///
/// One test bed serves the whole test process (tests use rooms of their own, so they do not
/// interfere); it is started on first use and removed when the process exits. Tests that kill,
/// restart or reconfigure Janus start a private one with ``start(_:)`` and stop it themselves.
/// When Janus or the namespace tools are missing, these calls throw: tests that need Janus fail,
/// they never skip.
public enum TestJanus {
    private static let state = Mutex<Result<JanusTestBed, TestBedError>?>(nil)

    /// The shared test bed.
    public static func shared() throws -> JanusTestBed {
        try state.withLock { state in
            if let state { return try state.get() }
            let result: Result<JanusTestBed, TestBedError>
            do {
                result = .success(try JanusTestBed())
            } catch let error as TestBedError {
                result = .failure(error)
            } catch {
                result = .failure(TestBedError("\(error)"))
            }
            state = result
            atexit { TestJanus.stopShared() }
            return try result.get()
        }
    }

    /// A private test bed with its own configuration; the caller stops it.
    public static func start(_ configuration: JanusTestBed.Configuration = .init()) throws -> JanusTestBed {
        try JanusTestBed(configuration: configuration)
    }

    private static func stopShared() {
        state.withLock { state in
            if case .success(let bed) = state { bed.stop() }
        }
    }

    /// A room id unlikely to collide with another test's.
    public static func uniqueRoomID() -> UInt64 { UInt64.random(in: 100_000...9_000_000_000) }
}
