import ConclaveAV
import ConclaveCore
import Foundation

/// The picture side of a composition of a recording: decides each output frame's tiles from the
/// participants' segments and decoded pictures, and has a `TileRenderer` make the picture.
final class Compositor {
    typealias Tile = TileRenderer.Tile

    private let timeline: CompositionTimeline
    private let options: CompositeOptions
    private let speakers: (any SpeakerSource)?
    private let videos: [ParticipantVideo]
    /// Per participant: the spans (seconds) in which the tile is shown.
    private let presence: [[Range<Double>]]
    private let renderer: TileRenderer
    private var speaker: Int?

    /// Every graph description used, in order of first use.
    var graphs: [String] { renderer.graphs }

    init(
        timeline: CompositionTimeline,
        options: CompositeOptions,
        speakers: (any SpeakerSource)?,
        encoder: MediaFileEncoder
    ) throws(ComposeError) {
        self.timeline = timeline
        self.options = options
        self.speakers = speakers
        let stillWriting = timeline.manifest.status == "recording"
        self.videos = timeline.participants.map { ParticipantVideo($0, stillWriting: stillWriting) }
        let frame = 1 / Double(options.frameRate)
        self.presence = timeline.participants.map { participant in
            participant.segments.map { segment in
                let end = max(segment.startOffset, segment.endOffset ?? timeline.duration) + frame
                return (segment.startOffset - ParticipantVideo.tolerance)..<end
            }
        }
        self.renderer = try TileRenderer(
            options: options,
            encoder: encoder,
            names: timeline.participants.map(\.name)
        )
    }

    var problems: [String] { videos.flatMap(\.problems) }

    /// Composes output picture `index`.
    func compose(frame index: Int) throws(ComposeError) {
        let time = Double(index) / Double(options.frameRate)
        var tiles: [Tile] = []
        var pictures: [Int: VideoFrame] = [:]
        for (participant, video) in videos.enumerated()
        where presence[participant].contains(where: { $0.contains(time) }) {
            var tile = Tile(participant: participant, pictureSize: nil)
            if let picture = video.picture(at: time), time - picture.time <= VideoComposition.staleAfter {
                tile.pictureSize = .init(width: picture.frame.width, height: picture.frame.height)
                pictures[participant] = picture.frame
            }
            tiles.append(tile)
        }
        if options.layout == .speaker { tiles = speakerFirst(tiles, at: time) }
        try renderer.render(tiles, pictures: pictures)
    }

    /// Flushes the last period.
    func finish() throws(ComposeError) { try renderer.finish() }

    /// The speaker's tile first (the large one); the last speaker stays while nobody speaks.
    private func speakerFirst(_ tiles: [Tile], at time: Double) -> [Tile] {
        if let key = speakers?.speaker(at: time),
            let index = timeline.participants.firstIndex(where: { $0.key == key })
        {
            speaker = index
        }
        guard let speaker, let position = tiles.firstIndex(where: { $0.participant == speaker }) else { return tiles }
        var ordered = tiles
        let chosen = ordered.remove(at: position)
        return [chosen] + ordered
    }
}
