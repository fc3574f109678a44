#if canImport(Glibc)
    import Glibc
#endif

/// The cores the process used over a recent window, from its own CPU time: what LiveKit egress
/// admits by, and unlike the machine's load average it is not moved by other processes sharing the
/// cores (a second service on the same machine has a budget of its own).
///
/// Pure: samples are inputs, so tests feed them without waiting.
public struct CPUWindow: Sendable, Hashable {
    /// One reading: seconds of wall clock and seconds of CPU (user + system) since any fixed start.
    public struct Sample: Sendable, Hashable {
        public var wall: Double
        public var cpu: Double

        public init(wall: Double, cpu: Double) {
            self.wall = wall
            self.cpu = cpu
        }
    }

    /// How far back the average reaches.
    public let span: Double
    private var samples: [Sample] = []

    public init(span: Double = 5) { self.span = span }

    /// Adds a reading, dropping those older than the span (one older reading is kept, so the window
    /// always covers the whole span once that much time has passed).
    public mutating func add(_ sample: Sample) {
        if let last = samples.last, sample.wall <= last.wall { return }
        samples.append(sample)
        while samples.count > 2, samples[1].wall <= sample.wall - span { samples.removeFirst() }
    }

    /// The cores used on average over the window; zero before two readings.
    public var cores: Double {
        guard let first = samples.first, let last = samples.last, last.wall > first.wall else { return 0 }
        return max(0, (last.cpu - first.cpu) / (last.wall - first.wall))
    }

    /// This process's CPU time now (`getrusage(RUSAGE_SELF)`, every thread), in seconds.
    public static func processCPUSeconds() -> Double {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}

/// Whether a service takes new jobs: the one rule of admission, pure so that it is tested alone.
public struct Admission: Sendable, Hashable {
    /// At most this many calls at once (the subscription's prefetch as well).
    public var maxCalls: Int
    /// Take new calls only while the process uses fewer cores than this.
    public var cpuBudget: Double

    public init(maxCalls: Int, cpuBudget: Double) {
        self.maxCalls = maxCalls
        self.cpuBudget = cpuBudget
    }

    /// Room for one more call: not draining, a free slot, and the measured CPU under the budget.
    /// A call that just started has not shown its cost yet, so a service that admits one waits for
    /// the next measurement before the next (the caller re-evaluates on every status tick).
    public func admits(active: Int, cores: Double, draining: Bool) -> Bool {
        !draining && active < maxCalls && cores < cpuBudget
    }
}
