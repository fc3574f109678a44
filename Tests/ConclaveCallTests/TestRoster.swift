import ConclaveE2EE
import ECallSignaling

/// A call's roster for key tests: users 1…`count`, device `10 × user + 1`, a P-256 key each, user
/// 1 hosting.
struct TestRoster {
    var identities: [UInt64: DeviceIdentity] = [:]
    var entries: [RosterEntry] = []

    init(count: Int) throws {
        for user in 1...UInt64(count) {
            let identity = try DeviceIdentity.generate(.p256)
            identities[user] = identity
            entries.append(
                RosterEntry(
                    userId: user,
                    deviceId: user * 10 + 1,
                    displayName: "user \(user)",
                    publicKey: identity.publicKeyString,
                    isHost: user == 1
                )
            )
        }
    }
}
