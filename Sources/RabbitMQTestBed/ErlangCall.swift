import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Evaluates Erlang expressions on a running RabbitMQ node with `erl_call`.
///
/// Every `rabbitmqctl` boots an Erlang VM and the Elixir CLI before it does anything: 1 s of a
/// core on an idle machine, 2–3 s on a loaded one, taken from the broker and the test beside it.
/// A test that creates five users and polls a queue count did most of its waiting in those boots.
/// `erl_call` (Erlang's base package) is a small C program that connects to the node as a hidden
/// node over the same Erlang distribution and runs the expressions there, in about 10 ms. The test
/// beds call the functions that the `rabbitmqctl` commands they replace call
/// (`rabbit_definitions:import_raw`, `rabbit_amqqueue:collect_info_all`,
/// `rabbit:await_startup`…), so the broker sees the same requests.
///
/// The expressions travel on standard input (secrets never appear in arguments); the cookie is
/// read by `erl_call` from the home of the `rabbitmq` user, whose nodes these are. What the
/// expressions print comes back (`-fetch_stdout`); their value must be `ok`, and anything else (a
/// failed match, an exception) is an error with what they printed and the value.
enum ErlangCall {
    /// The node could not be reached (not started yet, or gone), or the call failed.
    struct Failure: Error, CustomStringConvertible {
        /// `erl_call` could not connect: the node's distribution is not up (yet).
        var unreachable: Bool
        var description: String
    }

    /// Runs `expressions` (Erlang expressions separated by commas, without the final period) on
    /// `node`, inside `namespace` if given, and returns what they printed. `environment` must name
    /// the node's epmd (`ERL_EPMD_PORT`) when it is not on the default port.
    static func evaluate(
        _ expressions: String,
        node: String,
        longName: Bool,
        environment: [String: String],
        namespace: String? = nil,
        timeout: Duration = .seconds(120)
    ) throws -> String {
        var environment = environment
        environment["HOME"] = cookieHome
        let seconds = max(Int(timeout.components.seconds), 1)
        let call =
            [try RabbitMQTestBed.which("erl_call"), longName ? "-name" : "-sname", node, "-e", "-fetch_stdout"]
            + ["-timeout", "\(seconds)"]
        let command = namespace.map { ["netns", "exec", $0] + call } ?? call
        let result: (status: Int32, output: String, errors: String)
        do {
            result = try RabbitMQTestBed.execute(
                namespace == nil ? call[0] : try RabbitMQTestBed.which("ip"),
                namespace == nil ? Array(call.dropFirst()) : command,
                input: expressions + ".\n",
                environment: environment
            )
        } catch {
            throw Failure(unreachable: false, description: "\(error)")
        }
        let output = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0 else {
            let errors = result.errors.trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(
                unreachable: errors.contains("failed to connect"),
                description: "erl_call to \(node) failed (\(result.status)): \((errors + " " + output).prefix(2000))"
            )
        }
        // What was printed, then the value as `{ok, Value}` or `{error, Reason}`.
        guard output.hasSuffix("{ok, ok}") else {
            throw Failure(unreachable: false, description: "on \(node): \(output.suffix(2000))")
        }
        return String(output.dropLast("{ok, ok}".count))
    }

    /// Where `erl_call` finds the cookie: the home of the user the nodes run as (Debian's
    /// `rabbitmq-server` switches to `rabbitmq`, which creates its cookie there at the first boot).
    static var cookieHome: String {
        if let entry = getpwnam("rabbitmq"), let directory = entry.pointee.pw_dir {
            return String(cString: directory)
        }
        return "/var/lib/rabbitmq"
    }

    /// `text` as an Erlang binary literal that needs no escaping (base64 in the expression).
    static func binary(_ text: String) -> String {
        "base64:decode(<<\"\(Data(text.utf8).base64EncodedString())\">>)"
    }
}
