internal import CFFmpegFilterShims

/// EBU R128 loudness normalisation of a stream of 48 kHz Float32 blocks through libavfilter:
/// `loudnorm` (dynamic, one pass: it needs no second reading of the inputs) and `aresample` back
/// to 48 kHz, since `loudnorm` works at 192 kHz for its true-peak limit.
///
/// `loudnorm` holds about three seconds before it returns anything, so output lags input; the
/// caller pushes until enough is available and calls `finish()` at the end to flush the rest.
/// Not thread-safe: one task owns a filter.
final class AudioLoudnessFilter {
    private let channels: Int
    private let path: String
    private let graph: UnsafeMutablePointer<AVFilterGraph>
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private var pushed: Int64 = 0
    /// Filtered samples not yet taken, interleaved, from `outputRead` on.
    private var output: [Float] = []
    private var outputRead = 0
    private(set) var finished = false

    /// The filter chain after the source: the loudness target of podcasts and voice (-16 LUFS),
    /// true peak at -1.5 dBTP.
    static let chain = "loudnorm=I=-16:TP=-1.5:LRA=11,aresample=48000,aformat=sample_fmts=flt:channel_layouts="

    /// Builds the graph; `path` names the recording in errors.
    init(channels: Int, directory path: String) throws(ComposeError) {
        self.channels = channels
        self.path = path
        let layout = channels == 1 ? "mono" : "stereo"
        guard let graph = avfilter_graph_alloc() else { throw ComposeError(path: path, reason: "out of memory") }
        var graphOwner: UnsafeMutablePointer<AVFilterGraph>? = graph
        var created: UnsafeMutablePointer<AVFilterContext>?
        var rc = avfilter_graph_create_filter(
            &created,
            avfilter_get_by_name("abuffer"),
            "in",
            "sample_rate=48000:sample_fmt=flt:channel_layout=\(layout):time_base=1/48000",
            nil,
            graph
        )
        let source = created
        created = nil
        if rc >= 0 {
            rc = avfilter_graph_create_filter(&created, avfilter_get_by_name("abuffersink"), "out", nil, nil, graph)
        }
        let sink = created
        var inputs = avfilter_inout_alloc()
        var outputs = avfilter_inout_alloc()
        defer {
            avfilter_inout_free(&inputs)
            avfilter_inout_free(&outputs)
        }
        if rc >= 0, let source, let sink, let sinkEnd = inputs, let sourceEnd = outputs {
            // Named from the chain's side: the source feeds the chain's input, the sink takes its output.
            sourceEnd.pointee.name = av_strdup("in")
            sourceEnd.pointee.filter_ctx = source
            sourceEnd.pointee.pad_idx = 0
            sourceEnd.pointee.next = nil
            sinkEnd.pointee.name = av_strdup("out")
            sinkEnd.pointee.filter_ctx = sink
            sinkEnd.pointee.pad_idx = 0
            sinkEnd.pointee.next = nil
            rc = avfilter_graph_parse_ptr(graph, Self.chain + layout, &inputs, &outputs, nil)
            if rc >= 0 { rc = avfilter_graph_config(graph, nil) }
        } else if rc >= 0 {
            rc = -1
        }
        guard rc >= 0, let source, let sink, let frame = av_frame_alloc() else {
            avfilter_graph_free(&graphOwner)
            throw ComposeError(
                path: path,
                reason: "cannot build the loudness filter (libavfilter \(FilterLibrary.version)): code \(rc)"
            )
        }
        self.graph = graph
        self.source = source
        self.sink = sink
        self.frame = frame
        output.reserveCapacity(48_000 * channels)
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
        var graph: UnsafeMutablePointer<AVFilterGraph>? = self.graph
        avfilter_graph_free(&graph)
    }

    /// Samples per channel filtered and not yet taken.
    var availableFrames: Int { (output.count - outputRead) / channels }

    /// Filters interleaved samples; what comes out waits for `take`.
    func push(_ samples: UnsafeBufferPointer<Float>) throws(ComposeError) {
        let frames = samples.count / channels
        guard frames > 0, let base = samples.baseAddress else { return }
        frame.pointee.nb_samples = Int32(frames)
        frame.pointee.format = AV_SAMPLE_FMT_FLT.rawValue
        frame.pointee.sample_rate = 48_000
        av_channel_layout_default(&frame.pointee.ch_layout, Int32(channels))
        frame.pointee.pts = pushed
        var rc = av_frame_get_buffer(frame, 0)
        if rc >= 0, let data = frame.pointee.extended_data?[0] {
            UnsafeMutableRawPointer(data).assumingMemoryBound(to: Float.self).update(
                from: base,
                count: frames * channels
            )
            // The source takes the frame's buffers and leaves the frame blank.
            rc = av_buffersrc_add_frame(source, frame)
        }
        av_frame_unref(frame)
        guard rc >= 0 else { throw ComposeError(path: path, reason: "the loudness filter failed: code \(rc)") }
        pushed += Int64(frames)
        try drain()
    }

    /// Ends the input and collects the rest of the output.
    func finish() throws(ComposeError) {
        guard !finished else { return }
        let rc = av_buffersrc_add_frame(source, nil)
        guard rc >= 0 else { throw ComposeError(path: path, reason: "the loudness filter failed: code \(rc)") }
        try drain()
        finished = true
    }

    /// Moves up to `frames` samples per channel into `target` (zero-filling what the filter does
    /// not have, which happens only at the very end).
    func take(into target: UnsafeMutableBufferPointer<Float>, frames: Int) {
        let count = min(frames * channels, target.count)
        let available = min(count, output.count - outputRead)
        for index in 0..<available { target[index] = output[outputRead + index] }
        for index in available..<count { target[index] = 0 }
        outputRead += available
        if outputRead > 0 && outputRead * 2 >= output.count {
            output.removeFirst(outputRead)
            outputRead = 0
        }
    }

    private func drain() throws(ComposeError) {
        while true {
            let rc = av_buffersink_get_frame(sink, frame)
            if rc == cshim_filter_AVERROR_EAGAIN() || rc == cshim_filter_AVERROR_EOF() { return }
            guard rc >= 0 else { throw ComposeError(path: path, reason: "the loudness filter failed: code \(rc)") }
            defer { av_frame_unref(frame) }
            let count = Int(frame.pointee.nb_samples) * channels
            guard count > 0, let data = frame.pointee.extended_data?[0] else { continue }
            let samples = UnsafeBufferPointer(
                start: UnsafeRawPointer(data).assumingMemoryBound(to: Float.self),
                count: count
            )
            output.append(contentsOf: samples)
        }
    }
}
