internal import CFFmpegFilter
internal import CFFmpegFilterShims
import ConclaveAV
import ConclaveCore
import Foundation

/// Turns each output frame's tiles into a picture for the encoder: one libavfilter graph per
/// period of unchanged tiles, names drawn on every tile. The offline composition (`Compositor`)
/// and the live one (`LiveComposite`) both render through it, so a live composite looks like a
/// composed recording. Not thread-safe: its owner's thread owns every libav* object in it.
final class TileRenderer {
    /// One tile of a period: whose, and whether it shows pictures (of which size) or the name.
    struct Tile: Hashable {
        var participant: Int
        /// The size of the pictures fed to a live tile; nil for a plain tile with the name.
        var pictureSize: Size?
    }

    struct Size: Hashable {
        var width: Int
        var height: Int
    }

    /// A graph and the tiles it was built for.
    private struct Period {
        var tiles: [Tile]
        var graph: FilterGraph
        /// Pictures pushed into each input so far (the next pts).
        var pushed = 0
        /// Plain frames of the name tiles and the empty picture, by input.
        var plainFrames: [Int: UnsafeMutablePointer<AVFrame>] = [:]
    }

    private let options: CompositeOptions
    private let encoder: MediaFileEncoder
    /// Per participant: the frame a live tile's picture is copied into and handed over in.
    private var inputs: [Int: UnsafeMutablePointer<AVFrame>] = [:]
    private var period: Period?
    private let output: UnsafeMutablePointer<AVFrame>
    /// The private folder of the names' files (``makeNameFolder()``); removed with the renderer.
    let nameFolder: String
    /// Every graph description used, in order of first use.
    private(set) var graphs: [String] = []

    /// - Parameter names: the display names of the participants known from the start, by index
    ///   (more are added with ``setName(_:of:)``).
    init(options: CompositeOptions, encoder: MediaFileEncoder, names: [String]) throws(ComposeError) {
        self.options = options
        self.encoder = encoder
        guard let output = av_frame_alloc() else { throw ComposeError(path: "composite", reason: "out of memory") }
        self.output = output
        self.nameFolder = try Self.makeNameFolder()
        for (index, name) in names.enumerated() { try setName(name, of: index) }
    }

    deinit {
        closePeriod()
        for var frame in Array(inputs.values) as [UnsafeMutablePointer<AVFrame>?] { av_frame_free(&frame) }
        var output: UnsafeMutablePointer<AVFrame>? = self.output
        av_frame_free(&output)
        // The names are participants' own text: never left behind, however the composite ended
        // (also when its init failed after the folder was made).
        removeNameFiles()
    }

    /// Renders one output frame: `tiles` in layout order, `pictures` by participant for the tiles
    /// that show pictures (each of its tile's `pictureSize`).
    func render(_ tiles: [Tile], pictures: [Int: VideoFrame]) throws(ComposeError) {
        if period?.tiles != tiles {
            try finishPeriod()
            try startPeriod(tiles)
        }
        guard var current = period else { return }
        for (input, tile) in current.tiles.enumerated() {
            if let picture = pictures[tile.participant] {
                // A picture is handed over (drawtext then draws on it without a copy); the tile's
                // frame comes back empty and is filled again for the next output frame.
                let frame = try inputFrame(tile.participant)
                try load(picture, into: frame)
                frame.pointee.pts = Int64(current.pushed)
                try current.graph.push(frame, input: input, keep: false)
            } else if let plain = current.plainFrames[input] {
                plain.pointee.pts = Int64(current.pushed)
                try current.graph.push(plain, input: input, keep: true)
            }
        }
        if current.tiles.isEmpty, let plain = current.plainFrames[0] {
            plain.pointee.pts = Int64(current.pushed)
            try current.graph.push(plain, input: 0, keep: true)
        }
        current.pushed += 1
        period = current
        try drain(current.graph)
    }

    /// Flushes the last period.
    func finish() throws(ComposeError) { try finishPeriod() }

    func removeNameFiles() { try? FileManager.default.removeItem(atPath: nameFolder) }

    private func inputFrame(_ participant: Int) throws(ComposeError) -> UnsafeMutablePointer<AVFrame> {
        if let frame = inputs[participant] { return frame }
        guard let frame = av_frame_alloc() else { throw ComposeError(path: "composite", reason: "out of memory") }
        inputs[participant] = frame
        return frame
    }

    // MARK: - Periods

    private func startPeriod(_ tiles: [Tile]) throws(ComposeError) {
        let rectangles = LayoutGeometry.rectangles(
            options.layout,
            count: tiles.count,
            width: options.width,
            height: options.height
        )
        let description = graphDescription(tiles, rectangles)
        if !graphs.contains(description) { graphs.append(description) }
        let graph = try FilterGraph(description: description, inputs: max(1, tiles.count))
        var started = Period(tiles: tiles, graph: graph)
        if tiles.isEmpty {
            started.plainFrames[0] = try Self.plainFrame(width: options.width, height: options.height, luma: 16)
        }
        for (input, tile) in tiles.enumerated() where tile.pictureSize == nil {
            let rectangle = rectangles[input]
            started.plainFrames[input] = try Self.plainFrame(
                width: rectangle.width,
                height: rectangle.height,
                luma: 52
            )
        }
        period = started
    }

    private func finishPeriod() throws(ComposeError) {
        guard let current = period else { return }
        try current.graph.endInputs()
        try drain(current.graph)
        closePeriod()
    }

    private func closePeriod() {
        guard let current = period else { return }
        for var frame in Array(current.plainFrames.values) as [UnsafeMutablePointer<AVFrame>?] {
            av_frame_free(&frame)
        }
        period = nil
    }

    /// Hands every picture the graph has ready to the encoder.
    private func drain(_ graph: FilterGraph) throws(ComposeError) {
        while try graph.pull(into: output) {
            defer { av_frame_unref(output) }
            guard output.pointee.width == Int32(options.width), output.pointee.height == Int32(options.height) else {
                throw ComposeError(
                    path: "filter graph",
                    reason: "the graph made a \(output.pointee.width)x\(output.pointee.height) picture"
                )
            }
            try VideoComposition.write { () throws(MediaFileError) in
                try encoder.writePicture(avFrame: UnsafeMutableRawPointer(output))
            }
        }
    }

    // MARK: - The graph

    /// `buffer@in<i>` per tile, scaled and padded into its rectangle with the name drawn, stacked
    /// with xstack and padded to the output size; an empty call is one black input.
    func graphDescription(_ tiles: [Tile], _ rectangles: [TileRect]) -> String {
        let rate = options.frameRate
        func buffer(_ index: Int, _ width: Int, _ height: Int) -> String {
            "buffer@in\(index)=video_size=\(width)x\(height):pix_fmt=yuv420p:time_base=1/\(rate):pixel_aspect=1/1"
        }
        let sink = "format=pix_fmts=yuv420p,buffersink@out"
        guard !tiles.isEmpty else { return buffer(0, options.width, options.height) + "," + sink }
        var chains: [String] = []
        for (index, tile) in tiles.enumerated() {
            let rectangle = rectangles[index]
            let names = "\(nameFolder)/\(tile.participant).txt"
            let font = "fontfile=\(options.fontFile):textfile=\(names):expansion=none:fontcolor=white"
            if let size = tile.pictureSize {
                let fontSize = max(12, rectangle.height / 14)
                chains.append(
                    buffer(index, size.width, size.height)
                        + ",scale=\(rectangle.width):\(rectangle.height):force_original_aspect_ratio=decrease"
                        + ":force_divisible_by=2"
                        + ",pad=\(rectangle.width):\(rectangle.height):(ow-iw)/2:(oh-ih)/2:color=black"
                        + ",drawtext=\(font):fontsize=\(fontSize):box=1:boxcolor=black@0.55"
                        + ":boxborderw=\(fontSize / 3):x=\(fontSize / 2):y=h-th-\(fontSize / 2)[t\(index)]"
                )
            } else {
                let fontSize = max(14, rectangle.height / 8)
                chains.append(
                    buffer(index, rectangle.width, rectangle.height)
                        + ",drawtext=\(font):fontsize=\(fontSize):x=(w-tw)/2:y=(h-th)/2[t\(index)]"
                )
            }
        }
        let labels = (0..<tiles.count).map { "[t\($0)]" }.joined()
        if tiles.count == 1 {
            let rectangle = rectangles[0]
            chains.append(
                "\(labels)pad=\(options.width):\(options.height):\(rectangle.x):\(rectangle.y):color=black,\(sink)"
            )
        } else {
            let layout = rectangles.map { "\($0.x)_\($0.y)" }.joined(separator: "|")
            chains.append(
                "\(labels)xstack=inputs=\(tiles.count):layout=\(layout):fill=black"
                    + ",pad=\(options.width):\(options.height):0:0:color=black,\(sink)"
            )
        }
        return chains.joined(separator: ";")
    }

    // MARK: - Frames

    /// Copies a decoded picture into a tile's frame (given a buffer when it has none or one of
    /// another size, made writable when something still holds the buffer).
    private func load(_ picture: VideoFrame, into frame: UnsafeMutablePointer<AVFrame>) throws(ComposeError) {
        if frame.pointee.width != Int32(picture.width) || frame.pointee.height != Int32(picture.height)
            || frame.pointee.data.0 == nil
        {
            av_frame_unref(frame)
            frame.pointee.width = Int32(picture.width)
            frame.pointee.height = Int32(picture.height)
            frame.pointee.format = cshim_filter_AV_PIX_FMT_YUV420P()
            guard av_frame_get_buffer(frame, 0) >= 0 else {
                throw ComposeError(path: "composite", reason: "out of memory")
            }
        } else if av_frame_make_writable(frame) < 0 {
            throw ComposeError(path: "composite", reason: "out of memory")
        }
        guard let y = frame.pointee.data.0, let u = frame.pointee.data.1, let v = frame.pointee.data.2 else {
            throw ComposeError(path: "composite", reason: "out of memory")
        }
        let width = picture.width
        let height = picture.height
        picture.data.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress else { return }
            Self.copy(base, width, y, Int(frame.pointee.linesize.0), width, height)
            Self.copy(base + picture.uOffset, width / 2, u, Int(frame.pointee.linesize.1), width / 2, height / 2)
            Self.copy(base + picture.vOffset, width / 2, v, Int(frame.pointee.linesize.2), width / 2, height / 2)
        }
    }

    private static func copy(
        _ source: UnsafePointer<UInt8>,
        _ sourceStride: Int,
        _ destination: UnsafeMutablePointer<UInt8>,
        _ destinationStride: Int,
        _ width: Int,
        _ height: Int
    ) {
        for row in 0..<height {
            (destination + row * destinationStride).update(from: source + row * sourceStride, count: width)
        }
    }

    /// A flat grey (or black) picture: the background of a name tile, or of an empty call.
    private static func plainFrame(width: Int, height: Int, luma: UInt8) throws(ComposeError)
        -> UnsafeMutablePointer<AVFrame>
    {
        guard let frame = av_frame_alloc() else { throw ComposeError(path: "composite", reason: "out of memory") }
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        frame.pointee.format = cshim_filter_AV_PIX_FMT_YUV420P()
        guard av_frame_get_buffer(frame, 0) >= 0, let y = frame.pointee.data.0, let u = frame.pointee.data.1,
            let v = frame.pointee.data.2
        else {
            var doomed: UnsafeMutablePointer<AVFrame>? = frame
            av_frame_free(&doomed)
            throw ComposeError(path: "composite", reason: "out of memory")
        }
        for row in 0..<height { (y + row * Int(frame.pointee.linesize.0)).update(repeating: luma, count: width) }
        for row in 0..<(height / 2) {
            (u + row * Int(frame.pointee.linesize.1)).update(repeating: 128, count: width / 2)
            (v + row * Int(frame.pointee.linesize.2)).update(repeating: 128, count: width / 2)
        }
        return frame
    }

    /// A private temporary folder (0700, in `TMPDIR`) for the names, one file each for drawtext's
    /// `textfile`: a name is the participant's own text, and a file needs no escaping for the
    /// graph parser.
    private static func makeNameFolder() throws(ComposeError) -> String {
        let parent = FileManager.default.temporaryDirectory.path
        var template = Array("\(parent)/conclave-compose-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw ComposeError(
                path: parent,
                reason: "cannot create a temporary folder: \(String(cString: strerror(errno)))"
            )
        }
        return String(cString: created)
    }

    /// Writes participant `index`'s name for its tiles (before the first period that shows it).
    func setName(_ name: String, of index: Int) throws(ComposeError) {
        // One line: control characters (a newline would start a second line) become spaces.
        let line = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }
            )
        )
        let path = "\(nameFolder)/\(index).txt"
        guard
            FileManager.default.createFile(
                atPath: path,
                contents: Data(line.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else {
            throw ComposeError(path: path, reason: "cannot write a name for the tiles")
        }
    }
}
