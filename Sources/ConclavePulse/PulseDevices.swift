internal import CPulse

/// A sample format as the server reports it.
public struct PulseSampleSpec: Sendable, Hashable, CustomStringConvertible {
    /// libpulse's name of the format, e.g. `s16le`, `float32le`.
    public var format: String
    /// Samples per second.
    public var rate: Int
    /// Channels.
    public var channels: Int

    public var description: String { "\(format) \(channels)ch \(rate)Hz" }
}

/// A microphone (source) or a speaker (sink) on the server.
public struct PulseDevice: Sendable, Hashable {
    /// The server's name for it: what `--audio mic:NAME` and `--speaker NAME` take.
    public var name: String
    /// A human description.
    public var description: String
    /// Its native sample format.
    public var sampleSpec: PulseSampleSpec
    /// A source that records what a sink plays (`NAME.monitor`), not a microphone.
    public var isMonitor: Bool
    /// The server's default of its kind.
    public var isDefault: Bool
}

/// What a server offers: sources (microphones and monitors) and sinks (speakers).
public struct PulseDeviceList: Sendable, Hashable {
    /// Sources, in the server's order.
    public var sources: [PulseDevice]
    /// Sinks, in the server's order.
    public var sinks: [PulseDevice]
}

extension PulseConnection {
    /// Lists the server's sources and sinks, the defaults marked.
    public func devices() async throws(PulseError) -> PulseDeviceList {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<PulseDeviceList, PulseError>, Never>) in
            withLock {
                guard let context = readyContext else {
                    continuation.resume(returning: .failure(PulseError(.server, "not connected to \(serverAddress)")))
                    return
                }
                let query = DeviceQuery(continuation)
                let userdata = Unmanaged.passRetained(query).toOpaque()
                // Three operations answered in order on the pulse thread; the query releases
                // itself after the last one.
                let operations = [
                    pa_context_get_server_info(context, serverInfoReceived, userdata),
                    pa_context_get_source_info_list(context, sourceInfoReceived, userdata),
                    pa_context_get_sink_info_list(context, sinkInfoReceived, userdata),
                ]
                for operation in operations {
                    if let operation { pa_operation_unref(operation) } else { query.fail(context) }
                }
            }
        }
        return try result.get()
    }
}

/// One device listing in progress, on the pulse thread.
private final class DeviceQuery {
    private var continuation: CheckedContinuation<Result<PulseDeviceList, PulseError>, Never>?
    private var pending = 3
    var defaultSource = ""
    var defaultSink = ""
    var sources: [PulseDevice] = []
    var sinks: [PulseDevice] = []

    init(_ continuation: CheckedContinuation<Result<PulseDeviceList, PulseError>, Never>) {
        self.continuation = continuation
    }

    /// An operation could not start (the server went away): answer with its reason now.
    func fail(_ context: OpaquePointer) {
        let reason = String(cString: pa_strerror(pa_context_errno(context)))
        continuation?.resume(returning: .failure(PulseError(.server, "cannot list PulseAudio devices: \(reason)")))
        continuation = nil
        finishOne()
    }

    /// One of the three operations ended; the last answers and releases the query.
    func finishOne() {
        pending -= 1
        guard pending == 0 else { return }
        for index in sources.indices { sources[index].isDefault = sources[index].name == defaultSource }
        for index in sinks.indices { sinks[index].isDefault = sinks[index].name == defaultSink }
        continuation?.resume(returning: .success(PulseDeviceList(sources: sources, sinks: sinks)))
        continuation = nil
        Unmanaged.passUnretained(self).release()
    }
}

private func sampleSpec(_ spec: pa_sample_spec) -> PulseSampleSpec {
    PulseSampleSpec(
        format: pa_sample_format_to_string(spec.format).map { String(cString: $0) } ?? "unknown",
        rate: Int(spec.rate),
        channels: Int(spec.channels)
    )
}

private func string(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }

/// `pa_server_info_cb_t`: `void (*)(pa_context *, const pa_server_info *, void *userdata)`.
private func serverInfoReceived(
    _ context: OpaquePointer?,
    _ info: UnsafePointer<pa_server_info>?,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    let query = Unmanaged<DeviceQuery>.fromOpaque(userdata).takeUnretainedValue()
    if let info {
        query.defaultSource = string(info.pointee.default_source_name)
        query.defaultSink = string(info.pointee.default_sink_name)
    }
    query.finishOne()
}

/// `pa_source_info_cb_t`: called once per source, then with `eol` set.
private func sourceInfoReceived(
    _ context: OpaquePointer?,
    _ info: UnsafePointer<pa_source_info>?,
    _ eol: Int32,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    let query = Unmanaged<DeviceQuery>.fromOpaque(userdata).takeUnretainedValue()
    if eol != 0 {
        query.finishOne()
        return
    }
    guard let info else { return }
    query.sources.append(
        PulseDevice(
            name: string(info.pointee.name),
            description: string(info.pointee.description),
            sampleSpec: sampleSpec(info.pointee.sample_spec),
            isMonitor: info.pointee.monitor_of_sink != UInt32.max,
            isDefault: false
        )
    )
}

/// `pa_sink_info_cb_t`: called once per sink, then with `eol` set.
private func sinkInfoReceived(
    _ context: OpaquePointer?,
    _ info: UnsafePointer<pa_sink_info>?,
    _ eol: Int32,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    let query = Unmanaged<DeviceQuery>.fromOpaque(userdata).takeUnretainedValue()
    if eol != 0 {
        query.finishOne()
        return
    }
    guard let info else { return }
    query.sinks.append(
        PulseDevice(
            name: string(info.pointee.name),
            description: string(info.pointee.description),
            sampleSpec: sampleSpec(info.pointee.sample_spec),
            isMonitor: false,
            isDefault: false
        )
    )
}
