internal import CFFmpegFilter
internal import CFFmpegFilterShims
import ConclaveCore

/// A libavfilter graph from a textual description whose sources are `buffer@in0` ... and whose
/// sink is `buffersink@out`: frames are pushed in and pulled out on the caller's thread.
///
/// Not thread-safe: the composition's thread owns it.
final class FilterGraph {
    let description: String
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private let sources: [UnsafeMutablePointer<AVFilterContext>]
    private let sink: UnsafeMutablePointer<AVFilterContext>

    /// Parses and configures the graph; `inputs` is how many `buffer@in<i>` sources it has.
    init(description: String, inputs: Int) throws(ComposeError) {
        self.description = description
        guard let graph = avfilter_graph_alloc() else {
            throw ComposeError(path: "filter graph", reason: "out of memory")
        }
        self.graph = graph
        // One thread: the composition is measured on one core and owns the graph.
        graph.pointee.nb_threads = 1
        var open: UnsafeMutablePointer<AVFilterInOut>?
        var close: UnsafeMutablePointer<AVFilterInOut>?
        var rc = avfilter_graph_parse2(graph, description, &open, &close)
        avfilter_inout_free(&open)
        avfilter_inout_free(&close)
        if rc >= 0 { rc = avfilter_graph_config(graph, nil) }
        guard rc >= 0 else {
            var doomed: UnsafeMutablePointer<AVFilterGraph>? = graph
            avfilter_graph_free(&doomed)
            throw ComposeError(path: "filter graph", reason: "libavfilter refused the graph: \(Self.errorText(rc))")
        }
        // The parser names a `filter@id` instance `Parsed_<filter>_<n>@id`.
        var named: [String: UnsafeMutablePointer<AVFilterContext>] = [:]
        for index in 0..<Int(graph.pointee.nb_filters) {
            guard let filter = graph.pointee.filters[index], let name = filter.pointee.name else { continue }
            let full = String(cString: name)
            if let at = full.lastIndex(of: "@") { named[String(full[full.index(after: at)...])] = filter }
        }
        let sources = (0..<inputs).compactMap { named["in\($0)"] }
        guard sources.count == inputs, let sink = named["out"] else {
            var doomed: UnsafeMutablePointer<AVFilterGraph>? = graph
            avfilter_graph_free(&doomed)
            throw ComposeError(path: "filter graph", reason: "the graph lacks its buffer sources or its sink")
        }
        self.sources = sources
        self.sink = sink
    }

    deinit { avfilter_graph_free(&graph) }

    /// Hands a frame to source `input`. With `keep`, the graph takes a new reference and the
    /// caller keeps its own (a frame pushed again and again); without, the graph takes the
    /// caller's reference and `frame` comes back empty, so the filters may draw on the buffer
    /// without copying it first.
    func push(_ frame: UnsafeMutablePointer<AVFrame>, input: Int, keep: Bool) throws(ComposeError) {
        let flags = keep ? Int32(AV_BUFFERSRC_FLAG_KEEP_REF) : 0
        let rc = av_buffersrc_add_frame_flags(sources[input], frame, flags)
        guard rc >= 0 else {
            throw ComposeError(path: "filter graph", reason: "cannot feed input \(input): \(Self.errorText(rc))")
        }
    }

    /// Ends every input, so the graph flushes what it holds.
    func endInputs() throws(ComposeError) {
        for (index, source) in sources.enumerated() {
            let rc = av_buffersrc_add_frame_flags(source, nil, 0)
            guard rc >= 0 else {
                throw ComposeError(path: "filter graph", reason: "cannot end input \(index): \(Self.errorText(rc))")
            }
        }
    }

    /// Takes the next output frame into `frame` (unreferenced first); false when the graph needs
    /// more input or has ended.
    func pull(into frame: UnsafeMutablePointer<AVFrame>) throws(ComposeError) -> Bool {
        av_frame_unref(frame)
        let rc = av_buffersink_get_frame(sink, frame)
        if rc == cshim_filter_AVERROR_EAGAIN() || rc == cshim_filter_AVERROR_EOF() { return false }
        guard rc >= 0 else {
            throw ComposeError(path: "filter graph", reason: "filtering failed: \(Self.errorText(rc))")
        }
        return true
    }

    static func errorText(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = av_strerror(code, &buffer, buffer.count)
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
