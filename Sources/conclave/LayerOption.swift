import ArgumentParser
import ConclaveCall

/// `--layer`: which simulcast layer to receive of each participant's video.
struct LayerOption: ParsableArguments {
    @Option(
        name: .customLong("layer"),
        help: ArgumentHelp(
            "Simulcast layer to receive: high, medium, low or auto; WHO=LAYER for one participant (USERID or name; repeatable).",
            valueName: "layer"
        )
    )
    var layer: [String] = []

    /// Refuses a bad value before anything touches the network.
    func validate() throws {
        _ = try selection(standard: .auto)
    }

    /// The layers asked for, `standard` for everyone not named.
    func selection(standard: VideoLayer) throws -> LayerSelection {
        do {
            return try LayerSelection(parsing: layer, standard: standard)
        } catch {
            throw ValidationError(error.description)
        }
    }
}
