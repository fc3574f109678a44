import ConclaveE2EE
import Foundation

/// The call key's lifecycle for one device in one call, as a state machine with no I/O: the time,
/// received messages, room changes, decrypt failures and the rotation timer go in; what to send,
/// which key to install or schedule, what to store and what to log come out.
///
/// It follows ECall's host-based scheme (interop spec §2.6, §2.7, §3.5) and closes its gaps:
/// - **Host**: the roster's host (the creator). When the host leaves, every device picks the same
///   successor without a message: the lowest user id, then device id, among the roster devices
///   seen in the room and not gone (this device counts as present, unless it may not hold the key
///   role: ``Configuration/mayHoldKeyRole``). A signed `handover_host` from
///   the current host moves the role too.
/// - **Rotation**: the host rotates every ``Configuration/rotationPeriod`` and whenever a
///   participant leaves (ECall does not), so a departed member cannot read what follows: a new
///   key, epoch + 1, `keyRotationTimestamp` = now + ``Configuration/rotationLead``, wrapped for each
///   remaining device. Receivers schedule it as the next key at once (usable for decryption
///   immediately) and switch at the timestamp.
/// - **Emergency**: a decrypt failure (already rate-limited by ``KeyRequestLimiter``) asks the host
///   with `request_aes_key`, never as host and never without one; the host answers `send_aes_key`
///   with its current key wrapped for the requesting device itself.
/// - **Rejoin**: a device without the key asks everyone (`participant_request_rejoin`); any
///   participant with the key answers, the first answer to a pending request is used.
/// - **Late answers**: an answer (`send_aes_key`, `participant_accept_rejoin`) carries the key the
///   sender had when it wrote it, and can arrive after this device moved on. Epochs only move
///   forward: an answered epoch older than the current one is kept for decryption only (frames
///   under it may still be in flight), never made current again, never stored as the call's key.
///   ECall has no epochs and installs whatever key an answer brings.
/// - **Signaling outages**: a rotation falling due (or a departure) while the broker is out of
///   reach is not sent into a queue the others may never read, with the host switching to a key
///   nobody else has: it is owed, and made ``Configuration/resumeDelay`` after the channel is back,
///   once the others had time to subscribe again. Meanwhile the current key stays in use.
/// - **Authenticity**: a key change is accepted only when signed by the device entitled to send
///   it (the current host; any roster participant for a rejoin answer) within the replay window,
///   and only for a newer epoch. In ECall-compatible mode an unsigned one is also accepted from the
///   device the roster names as host while it is still host, with a warning. Anything else leaves
///   the key alone and logs one line.
public struct CallKeyLifecycle {
    /// What the lifecycle needs to know about the call and this device.
    public struct Configuration: Sendable {
        public var callId: UInt64
        /// This device.
        public var me: DeviceAddress
        /// How often the host rotates (ECall: 300 s).
        public var rotationPeriod: Double
        /// How far ahead of its use a rotated key is sent (ECall: 10 s).
        public var rotationLead: Double
        /// Rotate when a participant leaves.
        public var rotateOnLeave: Bool
        /// Accept unsigned key messages from the roster's host, as ECall devices send them.
        public var ecallCompatible: Bool
        /// How far a signed send time may be from now, either way.
        public var signatureWindow: Double
        /// A scheduled key is applied no later than this after it arrives (ECall keeps a next key
        /// usable for 60 s), whatever the timestamp says.
        public var maximumLead: Double
        /// How long after signaling comes back a rotation owed from the outage is made: the other
        /// devices reconnect with their own backoff and must have subscribed again to receive it.
        public var resumeDelay: Double
        /// Whether this device may become the key host. A recorder never publishes, so the others
        /// never see it in the room and never count it in the host succession; were it to count
        /// itself (as a participant does), it could name itself host while the others follow
        /// someone else, and would then ignore their rotations. False keeps it out of the
        /// succession, refuses a handover to it and never lets it rotate.
        public var mayHoldKeyRole: Bool

        public init(
            callId: UInt64,
            me: DeviceAddress,
            rotationPeriod: Double = 300,
            rotationLead: Double = 10,
            rotateOnLeave: Bool = true,
            ecallCompatible: Bool = false,
            signatureWindow: Double = SignalMessage.defaultSignatureWindow,
            maximumLead: Double = 60,
            resumeDelay: Double = 2,
            mayHoldKeyRole: Bool = true
        ) {
            self.callId = callId
            self.me = me
            self.rotationPeriod = rotationPeriod
            self.rotationLead = rotationLead
            self.rotateOnLeave = rotateOnLeave
            self.ecallCompatible = ecallCompatible
            self.signatureWindow = signatureWindow
            self.maximumLead = maximumLead
            self.resumeDelay = resumeDelay
            self.mayHoldKeyRole = mayHoldKeyRole
        }
    }

    /// Something that happened.
    public enum Input: Sendable {
        /// A message from the broker, already decoded.
        case message(SignalMessage)
        /// A participant's publisher appeared in the room (user id from its `userId:name` display).
        case participantJoined(userId: UInt64)
        /// A participant's publisher left the room.
        case participantLeft(userId: UInt64)
        /// A frame did not decrypt and the rate limits let a request through.
        case keyNeeded(KeyNeededEvent)
        /// This device has no key for the call: ask the participants for it.
        case rejoinNeeded
        /// Time passed (the rotation timer, ``nextDeadline``).
        case tick
        /// The signaling channel went down (`false`: reconnecting, refused) or is up again (`true`).
        case signaling(available: Bool)
    }

    /// How loud a log line is.
    public enum LogLevel: Sendable, Hashable {
        case debug, notice, warning
    }

    /// Something to do.
    public enum Action: Sendable, Hashable {
        /// Send `message` to the device `toDevice`.
        case send(SignalMessage, toDevice: UInt64)
        /// Make `key` current now.
        case install(CallKey, epoch: UInt64)
        /// Make `key` usable for decryption now and current at `at`.
        case schedule(CallKey, epoch: UInt64, at: Date)
        /// Keep `key` usable for decryption only: it arrived after a newer epoch became current.
        case retain(CallKey, epoch: UInt64)
        /// Keep `wrappedKey` (wrapped for this device) as epoch `epoch`, current from `validFrom`.
        case store(epoch: UInt64, wrappedKey: String, validFrom: Date)
        /// A key request was answered (or its answer failed): the next one may go out.
        case keyRequestCompleted
        /// This device now holds the key role.
        case becameHost
        /// This device no longer holds the key role.
        case stoppedBeingHost
        /// One line for the log. Never contains key material.
        case log(LogLevel, String)
    }

    public let configuration: Configuration
    private let identity: DeviceIdentity
    private let roster: [RosterEntry]
    private let makeKey: () -> CallKey
    /// The device the roster names as host, for ECall-compatible mode.
    private let rosterHost: DeviceAddress?
    public private(set) var host: DeviceAddress?
    private var current: (key: CallKey, epoch: UInt64)?
    private var pending: (key: CallKey, epoch: UInt64, at: Date)?
    private var seen: Set<UInt64> = []
    private var gone: Set<UInt64> = []
    private var nextRotation: Date?
    private var awaitingKey = false
    private var awaitingRejoin = false
    /// Whether the signaling channel is up (it is assumed up until told otherwise).
    private var signalingAvailable = true
    /// Why a rotation is owed: it fell due while signaling was down.
    private var owedRotation: String?
    /// Signed rotations from the device that becomes host once the current host leaves, received
    /// before this device saw the host leave: held until it does, or for ``deferral`` at most.
    private var deferred: [(message: SignalMessage, receivedAt: Date)] = []
    /// How long a rotation from the next host is held for the departure that entitles it.
    private let deferral: Double = 5

    /// - Parameters:
    ///   - roster: every invited device with its public key; the entry marked `isHost` starts as host.
    ///   - key: the call key this device has (nil for a device that must rejoin by request).
    ///   - makeKey: where new keys come from (tests pass a deterministic source).
    public init(
        configuration: Configuration,
        identity: DeviceIdentity,
        roster: [RosterEntry],
        key: CallKey?,
        epoch: UInt64 = 0,
        makeKey: @escaping () -> CallKey = { CallKey.random() }
    ) {
        self.configuration = configuration
        self.identity = identity
        self.roster = roster
        self.makeKey = makeKey
        rosterHost = roster.first(where: \.isHost)?.device
        host = configuration.mayHoldKeyRole || rosterHost != configuration.me ? rosterHost : nil
        current = key.map { ($0, epoch) }
    }

    /// Whether this device holds the key role.
    public var isHost: Bool { host == configuration.me }

    /// The epoch of the newest key known (current or scheduled).
    public var latestEpoch: UInt64? { pending?.epoch ?? current?.epoch }

    /// When ``handle(_:now:)`` should next get ``Input/tick``: the host's next rotation.
    public var nextDeadline: Date? { isHost ? nextRotation : nil }

    /// Starts the lifecycle: a host arms its rotation timer.
    public mutating func start(now: Date) -> [Action] {
        guard isHost else { return [] }
        nextRotation = now.addingTimeInterval(configuration.rotationPeriod)
        return [.becameHost]
    }

    /// Handles one input at `now` and returns what to do, in order.
    public mutating func handle(_ input: Input, now: Date) -> [Action] {
        promotePending(now: now)
        return expireDeferred(now: now) + react(to: input, now: now)
    }

    private mutating func react(to input: Input, now: Date) -> [Action] {
        switch input {
        case .message(let message): return received(message, now: now)
        case .participantJoined(let userId):
            guard roster.contains(where: { $0.userId == userId }) else { return [] }
            seen.insert(userId)
            gone.remove(userId)
            return []
        case .participantLeft(let userId): return left(userId, now: now)
        case .keyNeeded(let event): return keyNeeded(event, now: now)
        case .rejoinNeeded: return requestRejoin(now: now)
        case .tick:
            guard isHost, let due = nextRotation, now >= due else { return [] }
            return rotateOrOwe(now: now, reason: owedRotation ?? "rotation period")
        case .signaling(let available): return signalingChanged(available, now: now)
        }
    }

    // MARK: Room changes and the host role

    private mutating func left(_ userId: UInt64, now: Date) -> [Action] {
        guard userId != configuration.me.userId, roster.contains(where: { $0.userId == userId }) else { return [] }
        gone.insert(userId)
        var actions: [Action] = []
        if host?.userId == userId {
            let successor = successor()
            actions.append(
                .log(
                    .notice,
                    "key host \(host.map(\.description) ?? "-") left; "
                        + (successor.map { "\($0) takes over" } ?? "no roster device left to take over")
                )
            )
            actions += setHost(successor, now: now)
        }
        if isHost && configuration.rotateOnLeave {
            actions += rotateOrOwe(now: now, reason: "participant \(userId) left")
        }
        let held = deferred
        deferred = []
        for (message, _) in held { actions += keyRotation(message, now: now) }
        return actions
    }

    /// Whether `sender` becomes host when the current host's user leaves.
    private func isNextHost(_ sender: DeviceAddress) -> Bool {
        guard let host, host != sender, host != configuration.me else { return false }
        let present = roster.filter {
            seen.contains($0.userId) && !gone.contains($0.userId) && $0.userId != host.userId
        }
        return ((present.map(\.device) + candidatesBesidesTheRoom).min()) == sender
    }

    /// This device, when it may hold the key role: it counts itself present in the succession.
    private var candidatesBesidesTheRoom: [DeviceAddress] {
        configuration.mayHoldKeyRole ? [configuration.me] : []
    }

    private mutating func expireDeferred(now: Date) -> [Action] {
        guard !deferred.isEmpty else { return [] }
        let expired = deferred.filter { now.timeIntervalSince($0.receivedAt) > deferral }
        deferred.removeAll { now.timeIntervalSince($0.receivedAt) > deferral }
        let actions = expired.flatMap {
            rejected($0.message, "sent by the next host, but the current host \(hostText) did not leave")
        }
        return actions
    }

    /// The lowest (user id, device id) among the roster devices in the room, this one included
    /// when it may hold the key role; nil when there is none.
    private func successor() -> DeviceAddress? {
        let present = roster.filter { seen.contains($0.userId) && !gone.contains($0.userId) }.map(\.device)
        return (present + candidatesBesidesTheRoom).min()
    }

    private mutating func setHost(_ newHost: DeviceAddress?, now: Date) -> [Action] {
        let wasHost = isHost
        host = newHost
        if isHost && !wasHost {
            nextRotation = now.addingTimeInterval(configuration.rotationPeriod)
            return [.becameHost]
        }
        if wasHost && !isHost {
            nextRotation = nil
            return [.stoppedBeingHost]
        }
        return []
    }

    // MARK: Signaling outages

    /// Rotates now, or, while signaling is down, owes the rotation until it is back.
    private mutating func rotateOrOwe(now: Date, reason: String) -> [Action] {
        guard signalingAvailable else {
            let first = owedRotation == nil
            owedRotation = owedRotation ?? reason
            nextRotation = nil
            return first ? [.log(.notice, "rotation (\(reason)) postponed: signaling is down")] : []
        }
        owedRotation = nil
        return rotate(now: now, reason: reason)
    }

    private mutating func signalingChanged(_ available: Bool, now: Date) -> [Action] {
        guard available != signalingAvailable else { return [] }
        signalingAvailable = available
        guard available, isHost, let owed = owedRotation else { return [] }
        nextRotation = now.addingTimeInterval(configuration.resumeDelay)
        return [.log(.notice, "signaling is back: the postponed rotation (\(owed)) follows")]
    }

    // MARK: Sending keys

    private mutating func rotate(now: Date, reason: String) -> [Action] {
        let key = makeKey()
        let epoch = (latestEpoch ?? 0) &+ 1
        let at = now.addingTimeInterval(configuration.rotationLead)
        nextRotation = now.addingTimeInterval(configuration.rotationPeriod)
        var actions: [Action] = [.schedule(key, epoch: epoch, at: at)]
        pending = (key, epoch, at)
        if let own = try? KeyWrapping.wrap(key, for: identity.publicKey) {
            actions.append(.store(epoch: epoch, wrappedKey: own, validFrom: at))
        }
        var sent = 0
        for entry in roster where entry.device != configuration.me && !gone.contains(entry.userId) {
            var message = SignalMessage(type: .keyRotation)
            message.callId = configuration.callId
            message.participantId = entry.userId
            message.participantDeviceId = entry.deviceId
            message.participantName = entry.displayName
            message.keyRotationTimestamp = at.timeIntervalSince1970
            message.epoch = epoch
            switch sealed(message, key: key, for: entry, now: now) {
            case .success(let signed):
                actions.append(.send(signed, toDevice: entry.deviceId))
                sent += 1
            case .failure(let line):
                actions.append(line)
            }
        }
        actions.append(.log(.notice, "rotated the call key to epoch \(epoch) (\(reason)); sent to \(sent) devices"))
        return actions
    }

    /// `message` with the key wrapped for `entry`, this device as sender, signed.
    private func sealed(_ message: SignalMessage, key: CallKey, for entry: RosterEntry, now: Date) -> Outcome<
        SignalMessage, Action
    > {
        var message = message
        message.senderId = configuration.me.userId
        message.senderDeviceId = configuration.me.deviceId
        do {
            message.encryptedAESKey = try KeyWrapping.wrap(
                key,
                for: try DevicePublicKey(publicKeyString: entry.publicKey)
            )
            return .success(try message.signed(by: identity, at: now))
        } catch {
            return .failure(.log(.warning, "cannot send \(message.type) to \(entry.device): \(error)"))
        }
    }

    private mutating func keyNeeded(_ event: KeyNeededEvent, now: Date) -> [Action] {
        guard !isHost else { return [.log(.debug, "a frame from \(event.senderID) failed; the host does not ask")] }
        guard let host else { return [.log(.debug, "a frame from \(event.senderID) failed; no host to ask")] }
        var message = SignalMessage(type: .requestAESKey)
        message.callId = configuration.callId
        message.participantId = host.userId
        message.participantDeviceId = host.deviceId
        message.senderId = configuration.me.userId
        message.senderDeviceId = configuration.me.deviceId
        awaitingKey = true
        let signed = (try? message.signed(by: identity, at: now)) ?? message
        return [
            .send(signed, toDevice: host.deviceId),
            .log(.notice, "asked the key host \(host) for the call key (\(event.ecallReason))"),
        ]
    }

    private mutating func requestRejoin(now: Date) -> [Action] {
        awaitingRejoin = true
        var message = SignalMessage(type: .participantRequestRejoin)
        message.callId = configuration.callId
        message.participantId = configuration.me.userId
        message.calleeDeviceId = configuration.me.deviceId
        let signed = (try? message.signed(by: identity, at: now)) ?? message
        var actions: [Action] = []
        for entry in roster where entry.device != configuration.me && !gone.contains(entry.userId) {
            actions.append(.send(signed, toDevice: entry.deviceId))
        }
        actions.append(.log(.notice, "asked \(actions.count) participants for the call key (rejoin)"))
        return actions
    }

    // MARK: Receiving

    private mutating func received(_ message: SignalMessage, now: Date) -> [Action] {
        if case .unknown(let name) = message.type {
            return [.log(.notice, "dropped a signaling message of unknown type '\(name)'")]
        }
        guard message.type == .callInvitation || message.callId == configuration.callId else {
            return [.log(.debug, "ignored \(message.type) for call \(message.callId.map(String.init) ?? "-")")]
        }
        switch message.type {
        case .keyRotation: return keyRotation(message, now: now)
        case .requestAESKey: return keyRequest(message, now: now)
        case .sendAESKey: return keyAnswer(message, now: now)
        case .participantRequestRejoin: return rejoinRequest(message, now: now)
        case .participantAcceptRejoin: return rejoinAnswer(message, now: now)
        case .handoverHost: return handover(message, now: now)
        default: return [.log(.debug, "ignored \(message.type)")]
        }
    }

    /// Whether `message` is addressed to this device (`participantId`, and the device id when given).
    private func addressedToMe(_ message: SignalMessage, deviceId: UInt64?) -> Bool {
        message.participantId == configuration.me.userId
            && (deviceId == nil || deviceId == configuration.me.deviceId)
    }

    /// The reason `message` may not change the key, or nil when it may. `entitled` says which
    /// senders may send it; the roster supplies their keys.
    private func rejection(of message: SignalMessage, now: Date, entitled: (DeviceAddress) -> Bool) -> String? {
        if message.signature != nil {
            guard let userId = message.senderId, let deviceId = message.senderDeviceId else {
                return "signed but names no sender"
            }
            let sender = DeviceAddress(userId: userId, deviceId: deviceId)
            guard let entry = roster.first(where: { $0.device == sender }) else {
                return "sender \(sender) is not in the call's roster"
            }
            guard entitled(sender) else { return "sender \(sender) may not send it (key host: \(hostText))" }
            do {
                try message.verifySignature(publicKey: entry.publicKey, now: now, window: configuration.signatureWindow)
            } catch {
                return "sender \(sender): \(error)"
            }
            return nil
        }
        guard configuration.ecallCompatible else { return "not signed" }
        guard let rosterHost, host == rosterHost, entitled(rosterHost) else {
            return "not signed, and the roster's host no longer holds the key role"
        }
        if let deviceId = message.senderDeviceId, deviceId != rosterHost.deviceId {
            return "not signed, and not from the roster's host \(rosterHost)"
        }
        return nil
    }

    private var hostText: String { host.map(\.description) ?? "none" }

    private func rejected(_ message: SignalMessage, _ reason: String) -> [Action] {
        let from =
            message.senderId.map { "\($0)_\(message.senderDeviceId.map(String.init) ?? "?")" } ?? "unknown sender"
        return [
            .log(
                .warning,
                "rejected \(message.type) from \(from) for call \(configuration.callId): \(reason); key unchanged"
            )
        ]
    }

    /// A warning for an accepted unsigned message (ECall-compatible mode), or nothing.
    private func unsignedWarning(_ message: SignalMessage) -> [Action] {
        guard message.signature == nil else { return [] }
        return [.log(.warning, "accepted an unsigned \(message.type) from the roster's host (ECall-compatible mode)")]
    }

    /// The epoch a received key takes: the signed one, or the next one for ECall's unsigned messages.
    private func epoch(of message: SignalMessage) -> UInt64 {
        message.epoch ?? ((latestEpoch ?? 0) &+ 1)
    }

    private func unwrap(_ message: SignalMessage) -> Outcome<CallKey, String> {
        guard let wrapped = message.encryptedAESKey else { return .failure("no encryptedAESKey") }
        do {
            return .success(try KeyWrapping.unwrap(wrapped, with: identity))
        } catch {
            return .failure("the key does not open: \(error)")
        }
    }

    private mutating func keyRotation(_ message: SignalMessage, now: Date) -> [Action] {
        guard addressedToMe(message, deviceId: message.participantDeviceId) else {
            return rejected(message, "addressed to another device")
        }
        if let reason = rejection(of: message, now: now, entitled: { $0 == host }) {
            // The new host may rotate before this device sees the old one leave: hold it.
            if let userId = message.senderId, let deviceId = message.senderDeviceId,
                isNextHost(DeviceAddress(userId: userId, deviceId: deviceId)),
                rejection(of: message, now: now, entitled: { _ in true }) == nil
            {
                deferred.append((message, now))
                return [.log(.debug, "held a rotation from the next host until the key host's departure is seen")]
            }
            return rejected(message, reason)
        }
        let epoch = epoch(of: message)
        if let latest = latestEpoch, epoch <= latest, message.signature != nil {
            return rejected(message, "epoch \(epoch) is not newer than \(latest) (a replay)")
        }
        let key: CallKey
        switch unwrap(message) {
        case .success(let opened): key = opened
        case .failure(let reason): return rejected(message, reason)
        }
        let requested = message.keyRotationTimestamp.map { Date(timeIntervalSince1970: $0) } ?? now
        let at = min(max(requested, now), now.addingTimeInterval(configuration.maximumLead))
        pending = (key, epoch, at)
        return unsignedWarning(message) + [
            .schedule(key, epoch: epoch, at: at),
            .store(epoch: epoch, wrappedKey: message.encryptedAESKey ?? "", validFrom: at),
            .log(.notice, "call key epoch \(epoch) scheduled for \(at.timeIntervalSince1970)"),
        ]
    }

    private mutating func keyRequest(_ message: SignalMessage, now: Date) -> [Action] {
        guard isHost else { return [.log(.debug, "ignored request_aes_key: not the key host")] }
        guard let userId = message.senderId, let deviceId = message.senderDeviceId,
            let entry = roster.first(where: { $0.device == DeviceAddress(userId: userId, deviceId: deviceId) })
        else {
            return rejected(message, "the requesting device is not in the call's roster")
        }
        guard let current else { return [.log(.warning, "cannot answer request_aes_key: no current key")] }
        var answer = SignalMessage(type: .sendAESKey)
        answer.callId = configuration.callId
        answer.participantId = entry.userId
        answer.participantDeviceId = entry.deviceId
        answer.epoch = current.epoch
        switch sealed(answer, key: current.key, for: entry, now: now) {
        case .success(let signed):
            return [
                .send(signed, toDevice: entry.deviceId),
                .log(.notice, "sent the current key (epoch \(current.epoch)) to \(entry.device) on request"),
            ]
        case .failure(let line): return [line]
        }
    }

    private mutating func keyAnswer(_ message: SignalMessage, now: Date) -> [Action] {
        guard addressedToMe(message, deviceId: message.participantDeviceId) else {
            return rejected(message, "addressed to another device")
        }
        guard awaitingKey else { return rejected(message, "no key request is pending") }
        if let reason = rejection(of: message, now: now, entitled: { $0 == host }) { return rejected(message, reason) }
        let epoch = message.epoch ?? current?.epoch ?? 0
        awaitingKey = false
        switch unwrap(message) {
        case .success(let key):
            return unsignedWarning(message)
                + take(
                    key,
                    epoch: epoch,
                    answer: message,
                    now: now,
                    line: "installed the key host's current key (epoch \(epoch))"
                )
                + [.keyRequestCompleted]
        case .failure(let reason):
            return [.keyRequestCompleted] + rejected(message, reason)
        }
    }

    private mutating func rejoinRequest(_ message: SignalMessage, now: Date) -> [Action] {
        guard let userId = message.participantId, let deviceId = message.calleeDeviceId,
            let entry = roster.first(where: { $0.device == DeviceAddress(userId: userId, deviceId: deviceId) }),
            entry.device != configuration.me
        else {
            return rejected(message, "the requesting device is not in the call's roster")
        }
        guard let current else { return [.log(.debug, "cannot answer a rejoin request: no key")] }
        var answer = message
        answer.type = .participantAcceptRejoin
        answer.signature = nil
        answer.epoch = current.epoch
        switch sealed(answer, key: current.key, for: entry, now: now) {
        case .success(let signed):
            return [
                .send(signed, toDevice: entry.deviceId),
                .log(.notice, "answered \(entry.device)'s rejoin request with epoch \(current.epoch)"),
            ]
        case .failure(let line): return [line]
        }
    }

    private mutating func rejoinAnswer(_ message: SignalMessage, now: Date) -> [Action] {
        guard addressedToMe(message, deviceId: message.calleeDeviceId), message.calleeDeviceId != nil else {
            return rejected(message, "addressed to another device")
        }
        guard awaitingRejoin else { return [.log(.debug, "ignored a rejoin answer: none pending (first one used)")] }
        let me = configuration.me
        if let reason = rejection(of: message, now: now, entitled: { $0 != me }) { return rejected(message, reason) }
        let key: CallKey
        switch unwrap(message) {
        case .success(let opened): key = opened
        case .failure(let reason): return rejected(message, reason)
        }
        awaitingRejoin = false
        // ECall's answers name no epoch: the current one, as for send_aes_key (the first answer
        // to a device without a key is epoch 0).
        let epoch = message.epoch ?? current?.epoch ?? 0
        return unsignedWarning(message)
            + take(key, epoch: epoch, answer: message, now: now, line: "rejoined with the key of epoch \(epoch)")
    }

    /// Takes the key of epoch `epoch` that `answer` brought (a key request's or a rejoin's).
    ///
    /// An answer holds the key its sender had when writing it, and a device that asked can move on
    /// before it arrives: a rotation applies meanwhile, or the second of two answers (a rejoining
    /// device asks everyone, and the key host when its first frames fail) comes after one. Made
    /// current, an older epoch would be the sending key again after a newer one, and the newer key
    /// would be lost for good. So an older epoch is kept for decryption only. The current epoch
    /// again is installed: a key request exists to repair a key that does not work. A newer one is
    /// installed and replaces a scheduled key that is not newer still (applied at its time, that
    /// one would be the step back). The key store gets the key only when no newer one is scheduled:
    /// its last entry is the key the call goes on with.
    private mutating func take(_ key: CallKey, epoch: UInt64, answer: SignalMessage, now: Date, line: String)
        -> [Action]
    {
        if let have = current?.epoch, epoch < have {
            return [
                .retain(key, epoch: epoch),
                .log(
                    .notice,
                    "kept the key of epoch \(epoch) from a late \(answer.type) for decryption only; epoch \(have) stays current"
                ),
            ]
        }
        current = (key, epoch)
        if let pending, pending.epoch <= epoch { self.pending = nil }
        var actions: [Action] = [.install(key, epoch: epoch)]
        if pending == nil {
            actions.append(.store(epoch: epoch, wrappedKey: answer.encryptedAESKey ?? "", validFrom: now))
        }
        actions.append(.log(.notice, line))
        return actions
    }

    private mutating func handover(_ message: SignalMessage, now: Date) -> [Action] {
        guard let userId = message.participantId else { return rejected(message, "names no new host") }
        let deviceId = message.participantDeviceId
        guard
            let entry = roster.filter({ $0.userId == userId && (deviceId == nil || $0.deviceId == deviceId) })
                .min(by: { $0.device < $1.device })
        else {
            return rejected(message, "the new host \(userId) is not in the call's roster")
        }
        if let reason = rejection(of: message, now: now, entitled: { $0 == host }) { return rejected(message, reason) }
        if entry.device == configuration.me && !configuration.mayHoldKeyRole {
            return rejected(message, "this device may not hold the key role")
        }
        return unsignedWarning(message) + [.log(.notice, "key host handed over to \(entry.device)")]
            + setHost(entry.device, now: now)
    }

    /// A value or what went wrong instead (`Result` needs an `Error`).
    private enum Outcome<Value, Failure> {
        case success(Value)
        case failure(Failure)
    }

    /// A scheduled key whose time has come is current.
    private mutating func promotePending(now: Date) {
        guard let pending, now >= pending.at else { return }
        current = (pending.key, pending.epoch)
        self.pending = nil
    }
}
