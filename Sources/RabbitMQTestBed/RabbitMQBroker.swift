import Foundation

/// A running broker (``RabbitMQTestBed``, ``RabbitMQCluster``) whose users and queues tests manage.
/// Users live in the cluster's shared schema: made on one node, they log in on all.
///
/// The helpers below call on the node the functions that the `rabbitmqctl` commands of the same
/// name call, through ``evaluate(_:timeout:)`` (`erl_call`, milliseconds) rather than
/// `rabbitmqctl` itself, which boots an Erlang VM for each command.
public protocol RabbitMQBroker: Sendable {
    /// Runs `rabbitmqctl` against the broker (a running node of it); `input` goes to its standard
    /// input, which is how secrets travel (never in arguments).
    @discardableResult
    func rabbitmqctl(_ arguments: [String], input: String?) throws -> String

    /// Evaluates Erlang `expressions` (separated by commas, without the final period; their value
    /// must be `ok`) on a running node of the broker and returns what they printed. They travel
    /// on standard input, never in arguments.
    @discardableResult
    func evaluate(_ expressions: String, timeout: Duration) throws -> String
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
    /// import of definitions (`rabbitmqctl import_definitions`'s `rabbit_definitions:import_raw`),
    /// where separate commands would each be a call. The definitions, passcode included, travel on
    /// standard input, never in arguments, and an error message never contains the passcode.
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
            // Only the reason of a failure is printed (on one line), never the definitions.
            try evaluate(
                """
                try rabbit_definitions:import_raw(\(ErlangCall.binary(String(decoding: json, as: UTF8.self)))) of
                    ok -> ok;
                    Other -> io:format("~0p", [Other]), failed
                catch Class:Reason -> io:format("~0p", [{Class, Reason}]), failed
                end
                """,
                timeout: .seconds(60)
            )
        } catch {
            let message = "\(error)".replacingOccurrences(of: passcode, with: "<passcode>")
            throw RabbitMQTestBedError("cannot create the user \(login): \(message)")
        }
    }

    /// Info item `item` (`messages`, `messages_ready`, `consumers`: a number) of every queue of
    /// ``RabbitMQTestBed/virtualHost``, by queue name, as `rabbitmqctl list_queues` reports it:
    /// each running node reports the queues it leads. The counts of a quorum queue are refreshed
    /// on its tick (config/rabbitmq/advanced.config).
    public func queueInfo(_ item: String) throws -> [String: Int] {
        guard item.allSatisfy({ $0.isLetter || $0 == "_" }) else {
            throw RabbitMQTestBedError("not a queue info item: \(item)")
        }
        let output = try evaluate(
            """
            [io:format("~s\t~p~n", [Name, Value])
                || [{name, {resource, _, queue, Name}}, {_, Value}]
                    <- rabbit_amqqueue:collect_info_all(<<"\(RabbitMQTestBed.virtualHost)">>, [name, \(item)])],
            ok
            """,
            timeout: .seconds(30)
        )
        var values: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            guard fields.count == 2, let value = Int(fields[1]) else {
                throw RabbitMQTestBedError("unexpected queue info line: \(line.prefix(200))")
            }
            values[String(fields[0])] = value
        }
        return values
    }

    /// Messages ready in `queue` (not yet delivered, or returned), as the broker counts them.
    public func readyMessages(in queue: String) throws -> Int {
        guard let count = try queueInfo("messages_ready")[queue] else {
            throw RabbitMQTestBedError("no queue \(queue) in the virtual host \(RabbitMQTestBed.virtualHost)")
        }
        return count
    }

    /// The logins of every user.
    public func users() throws -> [String] {
        try evaluate(
            """
            [io:format("~s~n", [internal_user:get_username(U)]) || U <- rabbit_auth_backend_internal:all_users()],
            ok
            """,
            timeout: .seconds(30)
        ).split(separator: "\n").map(String.init)
    }

    /// Deletes device `id`'s user (as `rabbitmqctl delete_user`): the broker closes its
    /// connections, and later CONNECTs are refused.
    public func revokeDevice(_ id: UInt64) throws {
        let login = RabbitMQTestBed.login(forDevice: id)
        try evaluate(
            "ok = rabbit_auth_backend_internal:delete_user(<<\"\(login)\">>, <<\"conclave-testbed\">>)",
            timeout: .seconds(30)
        )
    }
}
