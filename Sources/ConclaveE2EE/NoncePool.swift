import Crypto
import Synchronization

/// Random 12-byte GCM nonces drawn from the kernel in batches.
///
/// `AES.GCM.Nonce()` makes two `getrandom` system calls per nonce, which at audio frame sizes costs
/// more than the encryption itself. This pool makes 256 nonces' worth of random bytes at a time and
/// hands each byte out exactly once, so nonces stay unpredictable and as unique as ECall's.
///
/// Each byte is consumed under the lock, so no two threads ever get the same nonce. The pool would be
/// duplicated by a `fork` without `exec`; Conclave never does that (child processes are spawned).
final class NoncePool: Sendable {
    static let shared = NoncePool()

    private static let batch = 12 * 256
    private let state = Mutex<(bytes: [UInt8], offset: Int)>(([], 0))

    /// Writes the next unused random 12-byte nonce to `destination`.
    func fill(_ destination: UnsafeMutableRawPointer) {
        state.withLock { state in
            if state.offset + 12 > state.bytes.count {
                state.bytes = Self.batchRandom(Self.batch)
                state.offset = 0
            }
            let offset = state.offset
            state.bytes.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                destination.copyMemory(from: base + offset, byteCount: 12)
                // Never hand the same bytes out twice, even by accident.
                (base + offset).initializeMemory(as: UInt8.self, repeating: 0, count: 12)
            }
            state.offset += 12
        }
    }

    /// `count` unpredictable bytes: the AES-256-CTR keystream (GCM's ciphertext of zeros) under a
    /// key and nonce fresh from the system generator, as a CTR-DRBG reseeded for every batch. This
    /// costs six system calls per batch instead of two per nonce.
    private static func batchRandom(_ count: Int) -> [UInt8] {
        let seedKey = SymmetricKey(size: .bits256)
        guard let box = try? AES.GCM.seal([UInt8](repeating: 0, count: count), using: seedKey) else {
            preconditionFailure("AES-GCM seal failed with a valid key")
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(count)
        box.ciphertext.withUnsafeBytes { bytes.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
        return bytes
    }
}
