import ConclaveCore

/// How the tiles of a composite are arranged.
public enum CompositeLayout: String, Sendable, CaseIterable {
    /// Everyone in equal tiles, re-laid out whenever someone joins or leaves.
    case grid
    /// The active speaker large, the others in a strip below.
    case speaker
}

/// Where each tile goes for a number of tiles: pure geometry, no state.
enum LayoutGeometry {
    /// Rectangles for `count` tiles on a `width` x `height` picture; with `.speaker` the first
    /// rectangle is the speaker's.
    static func rectangles(_ layout: CompositeLayout, count: Int, width: Int, height: Int) -> [TileRect] {
        guard count > 0 else { return [] }
        switch layout {
        case .grid:
            return grid(count: count, x: 0, y: 0, width: width, height: height)
        case .speaker:
            guard count > 1 else { return [TileRect(x: 0, y: 0, width: even(width), height: even(height))] }
            let stripHeight = even(height / 4)
            let main = TileRect(x: 0, y: 0, width: even(width), height: even(height - stripHeight))
            let others = count - 1
            let tileWidth = even(min(width / others, stripHeight * 16 / 9))
            let left = offset((width - tileWidth * others) / 2)
            let strip = (0..<others).map {
                TileRect(x: left + $0 * tileWidth, y: main.height, width: tileWidth, height: stripHeight)
            }
            return [main] + strip
        }
    }

    /// Equal tiles (ConclaveCore's `TileGrid`, shared with the call window).
    static func grid(count: Int, x: Int, y: Int, width: Int, height: Int) -> [TileRect] {
        TileGrid.rectangles(count: count, x: x, y: y, width: width, height: height)
    }

    /// A size: even, at least 2.
    static func even(_ value: Int) -> Int { TileGrid.even(value) }
    /// A position: even, at least 0.
    static func offset(_ value: Int) -> Int { TileGrid.offset(value) }
}
