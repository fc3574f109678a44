public import ConclaveE2EE

/// The recorder fleet's one device identity: every service holds the same device key (copied as a
/// TLS certificate is copied across a server fleet), so a job's wrapped key opens on whichever
/// service takes it, and on the one that takes it over.
///
/// Kept as its key type and bytes because ``DeviceIdentity`` is not Sendable; an identity is made
/// for each unwrap.
public struct FleetIdentity: Sendable {
    /// The fleet device's id, when it has one: a job naming another device is refused by name.
    public var deviceID: UInt64?
    public var type: DeviceKeyType
    private let privateKeyBytes: [UInt8]

    public init(deviceID: UInt64?, identity: DeviceIdentity) {
        self.deviceID = deviceID
        type = identity.type
        privateKeyBytes = identity.privateKeyBytes
    }

    /// Opens a job's wrapped call key. Throws one line naming why: a key for another device id,
    /// or one that does not open with this key (wrapped for another device's public key).
    func unwrap(_ wrapped: String, for recorderDeviceID: UInt64?) throws(RecorderServiceError) -> CallKey {
        if let wanted = recorderDeviceID, let deviceID, wanted != deviceID {
            throw RecorderServiceError(
                "recorderDeviceID: the key is wrapped for device \(wanted), this fleet's recorder device is \(deviceID)"
            )
        }
        do {
            return try KeyWrapping.unwrap(wrapped, with: try deviceIdentity())
        } catch {
            throw RecorderServiceError(
                "wrappedKey: the call key does not open with this fleet's \(type) device key (wrapped for another device?): \(error)"
            )
        }
    }

    /// The device identity itself, made anew for each caller (it is not Sendable).
    func deviceIdentity() throws(KeyMaterialError) -> DeviceIdentity {
        try DeviceIdentity(type: type, privateKeyBytes: privateKeyBytes)
    }
}
