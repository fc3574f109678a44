/// Who is speaking, from each participant's level, with hysteresis: a participant takes the floor
/// after being the loudest above the threshold for three checks in a row (300 ms), and the floor
/// is cleared after two seconds of nobody above it, so a cough does not move the highlight.
public struct ActiveSpeakerDetector: Sendable {
    /// The RMS level above which a participant counts as speaking (about -40 dBFS).
    public static let threshold: Float = 0.01
    /// Samples between two checks (100 ms at 48 kHz).
    public static let interval = 4_800

    /// A new speaker (nil: nobody has the floor any more).
    public struct Change: Sendable, Equatable {
        public var speaker: UInt64?

        public init(speaker: UInt64?) { self.speaker = speaker }
    }

    /// Who has the floor.
    public private(set) var speaker: UInt64?
    private var pending = 0
    private var candidate: UInt64?
    private var candidateChecks = 0
    private var silentChecks = 0

    /// Nobody has the floor yet.
    public init() {}

    /// Counts played samples; true when a check is due.
    public mutating func advance(samples: Int) -> Bool {
        pending += samples
        guard pending >= Self.interval else { return false }
        pending %= Self.interval
        return true
    }

    /// Takes one check's levels; the change, if the speaker changes.
    public mutating func decide(_ levels: [UInt64: Float]) -> Change? {
        let loudest = levels.filter { $0.value >= Self.threshold }.max { $0.value < $1.value }?.key
        guard let loudest else {
            candidate = nil
            candidateChecks = 0
            silentChecks += 1
            if speaker != nil, silentChecks >= 20 {
                speaker = nil
                return Change(speaker: nil)
            }
            return nil
        }
        silentChecks = 0
        if let current = speaker, levels[current] == nil { speaker = nil }
        guard loudest != speaker else {
            candidate = nil
            candidateChecks = 0
            return nil
        }
        if candidate == loudest {
            candidateChecks += 1
        } else {
            candidate = loudest
            candidateChecks = 1
        }
        guard candidateChecks >= 3 else { return nil }
        speaker = loudest
        candidate = nil
        candidateChecks = 0
        return Change(speaker: loudest)
    }
}
