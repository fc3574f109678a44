import Foundation

/// A running broker (``RabbitMQTestBed``, ``RabbitMQCluster``) whose users and queues tests manage
/// with `rabbitmqctl`. Users live in the cluster's shared schema: made on one node, they log in on all.
public protocol RabbitMQBroker: Sendable {
    /// Runs `rabbitmqctl` against the broker (a running node of it); `input` goes to its standard
    /// input, which is how secrets travel (never in arguments).
    @discardableResult
    func rabbitmqctl(_ arguments: [String], input: String?) throws -> String
}

extension RabbitMQBroker {
    /// Creates the user of device `id` with a random passcode (given to `rabbitmqctl` on standard
    /// input, never in its arguments), and the permissions of config/rabbitmq/README.md: write to
    /// `ecall.signal.in`, declare its subscription queues, read only its own routing key on
    /// `ecall.signal.out`. Returns the passcode.
    @discardableResult
    public func addDevice(_ id: UInt64, passcode: String? = nil) throws -> String {
        try addUser(device: id, passcode: passcode, write: ["ecall\\.signal\\.in"], read: ["ecall\\.signal\\.out"])
    }

    /// Creates the user of the recorder fleet's device `id` (every service of the fleet logs in
    /// as it, as a server fleet shares one certificate): a device's signaling permissions (so key
    /// rotations reach each service), plus reading jobs from `recorder.jobs`, announcing on
    /// `recorder.events` and reading it (services may watch each other). Returns the passcode.
    @discardableResult
    public func addRecorder(_ id: UInt64, passcode: String? = nil) throws -> String {
        try addUser(
            device: id,
            passcode: passcode,
            write: ["ecall\\.signal\\.in", "recorder\\.events"],
            read: ["ecall\\.signal\\.out", "recorder\\.jobs", "recorder\\.events"]
        )
    }

    /// Creates the user of device `id` allowed to submit record jobs (through the
    /// `recorder.submit` exchange, which routes to `recorder.jobs` only) and to watch
    /// `recorder.events` (`conclave recorder status`), besides a device's signaling. Returns the passcode.
    @discardableResult
    public func addSubmitter(_ id: UInt64, passcode: String? = nil) throws -> String {
        try addUser(
            device: id,
            passcode: passcode,
            write: ["ecall\\.signal\\.in", "recorder\\.submit"],
            read: ["ecall\\.signal\\.out", "recorder\\.events"]
        )
    }

    /// A device's user with `write` and `read` (regular expressions of exchange and queue names)
    /// besides its own subscription queues, and its own routing key on `ecall.signal.out`.
    func addUser(device id: UInt64, passcode: String?, write: [String], read: [String]) throws -> String {
        let passcode = passcode ?? RabbitMQTestBed.randomPasscode()
        let login = RabbitMQTestBed.login(forDevice: id)
        func pattern(_ names: [String]) -> String {
            "^(" + (names + ["stomp-subscription-.*"]).joined(separator: "|") + ")$"
        }
        try importUser(
            login: login,
            passcode: passcode,
            permissions: (configure: "^stomp-subscription-.*$", write: pattern(write), read: pattern(read)),
            topicRead: "^\(id)$"
        )
        return passcode
    }

    /// Creates (or replaces) a user with its permissions on ``RabbitMQTestBed/virtualHost`` and,
    /// with `topicRead`, its read permission on `ecall.signal.out` (writing none there), in one
    /// `rabbitmqctl import_definitions`: each rabbitmqctl boots an Erlang VM (1–3 s on a loaded
    /// machine), and the three separate commands this replaces were most of a test's set-up time.
    /// The definitions, passcode included, travel on standard input, never in arguments, and an
    /// error message never contains the passcode.
    public func importUser(
        login: String,
        passcode: String,
        permissions: (configure: String, write: String, read: String),
        topicRead: String? = nil
    ) throws {
        let vhost = RabbitMQTestBed.virtualHost
        var definitions: [String: Any] = [
            "users": [["name": login, "password": passcode, "tags": ""]],
            "permissions": [
                [
                    "user": login, "vhost": vhost, "configure": permissions.configure, "write": permissions.write,
                    "read": permissions.read,
                ]
            ],
        ]
        if let topicRead {
            definitions["topic_permissions"] = [
                ["user": login, "vhost": vhost, "exchange": "ecall.signal.out", "write": "^$", "read": topicRead]
            ]
        }
        let json = try JSONSerialization.data(withJSONObject: definitions, options: [.sortedKeys])
        do {
            try rabbitmqctl(["import_definitions"], input: String(decoding: json, as: UTF8.self))
        } catch {
            let message = "\(error)".replacingOccurrences(of: passcode, with: "<passcode>")
            throw RabbitMQTestBedError("cannot create the user \(login): \(message)")
        }
    }

    /// Messages ready in `queue` (not yet delivered, or returned), as the broker counts them.
    public func readyMessages(in queue: String) throws -> Int {
        let output = try rabbitmqctl(
            [
                "list_queues", "-p", RabbitMQTestBed.virtualHost, "--no-table-headers", "name", "messages_ready",
            ],
            input: nil
        )
        for line in output.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            if fields.count == 2, fields[0] == queue, let count = Int(fields[1]) { return count }
        }
        throw RabbitMQTestBedError("no queue \(queue) in the virtual host \(RabbitMQTestBed.virtualHost)")
    }

    /// Deletes device `id`'s user: the broker closes its connections, and later CONNECTs are refused.
    public func revokeDevice(_ id: UInt64) throws {
        try rabbitmqctl(["delete_user", RabbitMQTestBed.login(forDevice: id)], input: nil)
    }
}
