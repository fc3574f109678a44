import Synchronization

/// One direction of SRTP for one DTLS-SRTP association, shared between threads: an
/// ``SRTPContext`` behind a lock, because a libsrtp context is not thread-safe. The outbound
/// direction is one, since frames are sent from the senders' tasks and RTCP from the ICE loop;
/// the lock is uncontended while one thread sends at a time. A direction used on one thread only
/// (the inbound one, on the ICE loop) takes an ``SRTPContext`` directly and no lock.
///
/// Packets are transformed in place in the caller's buffer, so the hot path allocates nothing.
public final class SRTPSession: Sendable {
    /// Which way packets flow through this session.
    public typealias Direction = SRTPContext.Direction

    /// Room a buffer must have after the packet for `protect` (see ``SRTPContext/trailerCapacity``).
    public static let trailerCapacity = SRTPContext.trailerCapacity

    /// Size of the replay window, in packets (see ``SRTPContext/replayWindow``).
    public static let replayWindow = SRTPContext.replayWindow

    public let profile: SRTPProfile
    public let direction: Direction
    /// The libsrtp context, only used while holding the lock.
    private let context: Mutex<SRTPContext>

    /// Creates a session from a master key followed by its master salt (see
    /// ``SRTPContext/init(profile:direction:keyAndSalt:)``).
    public init(profile: SRTPProfile, direction: Direction, keyAndSalt: [UInt8]) throws(SRTPError) {
        let context = try SRTPContext(profile: profile, direction: direction, keyAndSalt: keyAndSalt)
        self.profile = profile
        self.direction = direction
        self.context = Mutex(context)
    }

    // MARK: In place on a caller buffer (hot path)

    /// Encrypts and authenticates the RTP packet in the first `length` bytes of `buffer`, in place.
    ///
    /// - Returns: the length of the SRTP packet (longer by the profile's RTP trailer).
    /// - Throws: `bufferTooSmall` unless `buffer.count >= length + trailerCapacity`.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        let (address, count) = Self.crossing(buffer)
        return try context.withLock { context throws(SRTPError) in
            try context.protect(Self.buffer(at: address, count: count), length: length)
        }
    }

    /// Verifies and decrypts the SRTP packet in the first `length` bytes of `buffer`, in place.
    ///
    /// - Returns: the length of the plain RTP packet.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        let (address, count) = Self.crossing(buffer)
        return try context.withLock { context throws(SRTPError) in
            try context.unprotect(Self.buffer(at: address, count: count), length: length)
        }
    }

    /// Encrypts and authenticates the RTCP (compound) packet in place; see `protect`.
    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        let (address, count) = Self.crossing(buffer)
        return try context.withLock { context throws(SRTPError) in
            try context.protectRTCP(Self.buffer(at: address, count: count), length: length)
        }
    }

    /// Verifies and decrypts the SRTCP packet in place; see `unprotect`.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        let (address, count) = Self.crossing(buffer)
        return try context.withLock { context throws(SRTPError) in
            try context.unprotectRTCP(Self.buffer(at: address, count: count), length: length)
        }
    }

    /// Raw pointers are not `Sendable`, and region checking keeps the locked context apart from
    /// them; the buffer stays borrowed by the synchronous call, so its address crosses into the
    /// lock's closure as an integer.
    private static func crossing(_ buffer: UnsafeMutableRawBufferPointer) -> (address: UInt, count: Int) {
        (UInt(bitPattern: buffer.baseAddress), buffer.count)
    }

    private static func buffer(at address: UInt, count: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(bitPattern: address), count: count)
    }

    // MARK: Arrays (convenience; allocation only when the array lacks capacity)

    /// Protects the RTP packet held in `packet`, replacing it with the SRTP packet.
    public func protect(_ packet: inout [UInt8]) throws(SRTPError) {
        try context.withLock { context throws(SRTPError) in try context.protect(&packet) }
    }

    /// Unprotects the SRTP packet held in `packet`, replacing it with the RTP packet.
    public func unprotect(_ packet: inout [UInt8]) throws(SRTPError) {
        try context.withLock { context throws(SRTPError) in try context.unprotect(&packet) }
    }

    /// Protects the RTCP packet held in `packet`, replacing it with the SRTCP packet.
    public func protectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try context.withLock { context throws(SRTPError) in try context.protectRTCP(&packet) }
    }

    /// Unprotects the SRTCP packet held in `packet`, replacing it with the RTCP packet.
    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try context.withLock { context throws(SRTPError) in try context.unprotectRTCP(&packet) }
    }
}
