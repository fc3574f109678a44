import ArgumentParser
import ConclaveE2EE
import ConclaveKeyStore
import Foundation

/// `conclave keys`: this device's key pair, and wrapping call keys by hand.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage this device's key pair and wrap or unwrap call keys.",
        subcommands: [
            Init.self, SetDetails.self, Show.self, Export.self, Wrap.self, Unwrap.self, Calls.self, Forget.self,
        ]
    )

    /// `keys init`: create the device key pair.
    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create this device's key pair.",
            discussion: """
                With --force an existing key pair is replaced, but kept in keys/previous/ (0600): \
                call keys stored for it still open, and it can be put back by hand.
                """
        )

        @OptionGroup var global: GlobalOptions

        @Option(help: "Key type: rsa (RSA-2048, the default) or p256.")
        var type: DeviceKeyType = .rsa

        @Option(help: "Our display for calls, USERID:NAME, used by 'join' when nothing else names us.")
        var display: String?

        @Option(
            name: .customLong("device-id"),
            help:
                "This device's id on the signaling broker (ECall's deviceId); with a numeric USERID it enables calls over the broker."
        )
        var deviceID: UInt64?

        @Flag(help: "Replace an existing key pair (kept in keys/previous/). Peers must learn the new public key.")
        var force = false

        func run() throws {
            if let display { try SetDetails.checkDisplay(display) }
            let store = try KeyStoreAccess.store(global)
            try KeyStoreAccess.run {
                let created = try store.initializeDeviceIdentity(
                    type: type,
                    replacing: force,
                    display: display.map(CallOptions.normalizedDisplay),
                    deviceID: deviceID
                )
                global.makeLogger().info("created device key", metadata: ["type": "\(type)"])
                if let replaced = created.replaced {
                    let old = replaced.publicKey.map { "fingerprint \($0.fingerprint)" } ?? "unreadable key"
                    print("Replaced the device key (\(old)); the old key is kept in \(replaced.backup.path)")
                }
                print("Created \(created.identity.type) device key in \(store.deviceKeyFile.path)")
                printSummary(created.identity)
                if let display = created.display { print("Display:     \(display)") }
                if let deviceID = created.deviceID { print("Device id:   \(deviceID)") }
            }
        }
    }

    /// `keys set`: the display and device id of the existing key pair.
    struct SetDetails: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set this device's display (USERID:NAME) or broker device id, keeping its key pair."
        )

        @OptionGroup var global: GlobalOptions

        @Option(help: "Our display for calls, USERID:NAME.")
        var display: String?

        @Option(name: .customLong("device-id"), help: "This device's id on the signaling broker.")
        var deviceID: UInt64?

        func run() throws {
            guard display != nil || deviceID != nil else {
                throw CallCommandError("nothing to set: pass --display USERID:NAME or --device-id N")
            }
            if let display { try Self.checkDisplay(display) }
            let store = try KeyStoreAccess.store(global)
            try KeyStoreAccess.run {
                try store.updateDeviceDetails(display: display.map(CallOptions.normalizedDisplay), deviceID: deviceID)
            }
            if let display { print("Display:     \(CallOptions.normalizedDisplay(display))") }
            if let deviceID { print("Device id:   \(deviceID)") }
        }

        static func checkDisplay(_ display: String) throws {
            guard !display.isEmpty, display.count <= 256, !display.contains(where: \.isNewline) else {
                throw CallCommandError("--display: expected USERID:NAME on one line, at most 256 characters")
            }
        }
    }

    /// `keys show`: the public key and fingerprint.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show this device's public key string and fingerprint."
        )

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print only the public key string, on one line, as ECall publishes it.")
        var `public` = false

        func run() throws {
            let store = try KeyStoreAccess.store(global)
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            if `public` {
                print(identity.publicKeyString)
            } else {
                printSummary(identity)
                if let display = try KeyStoreAccess.run({ try store.deviceDisplay() }) {
                    print("Display:     \(display)")
                }
                if let deviceID = try KeyStoreAccess.run({ try store.deviceID() }) { print("Device id:   \(deviceID)") }
            }
        }
    }

    /// `keys export`: the device key pair for backup.
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print this device's key pair, private key included, as JSON for backup.",
            discussion: "The private key is written to standard output only. Keep the output secret."
        )

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let identity = try KeyStoreAccess.identity(global)
            let export: [String: String] = [
                "type": identity.type.rawValue,
                "publicKey": identity.publicKeyString,
                "publicKeyHash": identity.publicKey.publicKeyHash,
                "privateKey": Data(identity.privateKeyBytes).base64EncodedString(),
                "privateKeyEncoding": identity.type == .rsa ? "PKCS#1 DER, base64" : "P-256 scalar (32 bytes), base64",
            ]
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(export)
            print(String(decoding: data, as: UTF8.self))
        }
    }

    /// `keys wrap`: wrap a call key for a recipient's public key.
    struct Wrap: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Wrap a call key for a recipient and print the wrapped string on one line.",
            discussion: """
                Prefer --key-file FILE, or --key-file - with the key on standard input: a key given \
                with --key is visible to every user of this machine in the process list.
                """
        )

        @OptionGroup var global: GlobalOptions

        @Option(name: .customLong("for"), help: "The recipient's public key string, as ECall publishes it.")
        var recipient: String

        @Option(help: "The call key: 64 hexadecimal characters. Visible to other users: prefer --key-file.")
        var key: String?

        @Option(
            name: .customLong("key-file"),
            help: ArgumentHelp(
                "Read the call key (64 hexadecimal characters) from this file, or from standard input if '-'.",
                valueName: "file"
            )
        )
        var keyFile: String?

        func run() throws {
            guard let hex = try SecretInput.resolve(value: key, file: keyFile, flag: "--key", fileFlag: "--key-file")
            else {
                throw CallCommandError(
                    "no call key: pass --key-file FILE, or --key-file - to read it from standard input"
                )
            }
            try KeyStoreAccess.run {
                let callKey = try CallKey(hex: hex.trimmingCharacters(in: .whitespacesAndNewlines))
                let publicKey = try DevicePublicKey(publicKeyString: recipient)
                print(try KeyWrapping.wrap(callKey, for: publicKey))
            }
        }
    }

    /// `keys unwrap`: unwrap a call key sent to this device.
    struct Unwrap: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unwrap a call key sent to this device and print it as 64 lowercase hex characters."
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The wrapped key string (ECall's encryptedAESKey).")
        var wrapped: String

        func run() throws {
            let store = try KeyStoreAccess.store(global)
            let identity = try KeyStoreAccess.run { try store.loadDeviceIdentity() }
            try KeyStoreAccess.run {
                print(try store.openCallKey(wrapped, with: identity).hexString)
            }
        }
    }

    /// `keys calls`: the calls with stored keys.
    struct Calls: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the calls whose keys are stored (ids and rejoin details, never keys)."
        )

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let store = try KeyStoreAccess.store(global)
            try KeyStoreAccess.run {
                for callID in try store.calls.callIDs() {
                    guard let record = try store.calls.record(for: callID) else { continue }
                    var fields = ["\(callID)", "keys=\(record.history.count)"]
                    if let room = record.room { fields.append("room=\(room)") }
                    if let format = record.cryptoFormat { fields.append("format=\(format)") }
                    if let url = record.janusURL { fields.append("janus=\(url)") }
                    print(fields.joined(separator: " "))
                }
            }
        }
    }
}

extension KeysCommand {
    /// `keys forget CALL_ID`: drop a call's keys.
    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a call's stored keys (and, unless --keep-details, everything stored about it)."
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The call id.")
        var callID: UInt64

        @Flag(
            name: .customLong("keep-details"),
            help: "Keep the room, Janus URL and roster: 'conclave rejoin' then asks the participants for the key."
        )
        var keepDetails = false

        func run() throws {
            let store = try KeyStoreAccess.store(global)
            try KeyStoreAccess.run {
                guard try store.calls.record(for: callID) != nil else {
                    throw KeysCommandError(message: "no call \(callID) in \(store.keysDirectory.path)")
                }
                if keepDetails {
                    try store.calls.forgetKeys(for: callID)
                    print("Forgot the keys of call \(callID); its details are kept")
                } else {
                    try store.calls.remove(callID)
                    print("Forgot call \(callID)")
                }
            }
        }
    }
}

/// Prints the public key string and its fingerprint.
private func printSummary(_ identity: DeviceIdentity) {
    print("Type:        \(identity.type)")
    print("Public key:  \(identity.publicKeyString)")
    print("Fingerprint: \(identity.publicKey.fingerprint)")
}

extension DeviceKeyType: ExpressibleByArgument {}

/// Opens the key store and turns its errors into one clear line on standard error.
enum KeyStoreAccess {
    /// The key store of `--data-dir`, else `configured` (the configuration file's
    /// `dataDirectory`), else the default data directory.
    static func store(_ global: GlobalOptions, configured: String? = nil) throws -> KeyStore {
        try run { KeyStore(dataDirectory: try DataDirectory.resolve(override: global.dataDirectory ?? configured)) }
    }

    static func identity(_ global: GlobalOptions, configured: String? = nil) throws -> DeviceIdentity {
        let store = try store(global, configured: configured)
        return try run { try store.loadDeviceIdentity() }
    }

    /// Runs `body`, reporting a key store or key material error as `conclave: <message>` and exit 1.
    static func run<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as KeyStoreError {
            throw KeysCommandError(message: error.description)
        } catch let error as KeyMaterialError {
            throw KeysCommandError(message: error.description)
        }
    }
}

/// An error shown as its message alone.
struct KeysCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
