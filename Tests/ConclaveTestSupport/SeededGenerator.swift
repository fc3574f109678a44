/// A small deterministic random number generator (SplitMix64) for fuzz tests, so that a failing
/// input reproduces from its seed.
public struct SeededGenerator: RandomNumberGenerator {
    /// The generator's state.
    public var state: UInt64

    /// Starts from `seed`.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }

    /// `input` with one to four random edits: a flipped byte, an insertion, a deletion or a truncation.
    public mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        var out = input
        let edits = Int.random(in: 1...4, using: &self)
        for _ in 0..<edits {
            switch Int.random(in: 0..<4, using: &self) {
            case 0 where !out.isEmpty:
                let i = Int.random(in: 0..<out.count, using: &self)
                out[i] ^= UInt8.random(in: 1...255, using: &self)
            case 1:
                let i = Int.random(in: 0...out.count, using: &self)
                out.insert(UInt8.random(in: 0...255, using: &self), at: i)
            case 2 where !out.isEmpty:
                out.remove(at: Int.random(in: 0..<out.count, using: &self))
            default:
                out = Array(out.prefix(Int.random(in: 0...out.count, using: &self)))
            }
        }
        return out
    }
}

/// `count` random bytes from `generator`.
public func randomBytes(_ count: Int, using generator: inout SeededGenerator) -> [UInt8] {
    generator.bytes(count)
}
