/// How the tiles of a composite are arranged.
public enum CompositeLayout: String, Sendable, CaseIterable {
    /// Everyone in equal tiles, re-laid out whenever someone joins or leaves.
    case grid
    /// The active speaker large, the others in a strip below.
    case speaker
}

/// A rectangle of the output picture, in pixels (even numbers, for 4:2:0).
struct TileRect: Sendable, Hashable {
    var x: Int
    var y: Int
    var width: Int
    var height: Int
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

    /// Equal tiles, rows filled left to right, a last row that is not full centered.
    static func grid(count: Int, x: Int, y: Int, width: Int, height: Int) -> [TileRect] {
        var columns = 1
        while columns * columns < count { columns += 1 }
        let rows = (count + columns - 1) / columns
        let tileWidth = even(width / columns)
        let tileHeight = even(height / rows)
        var rectangles: [TileRect] = []
        for index in 0..<count {
            let row = index / columns
            let column = index % columns
            let inRow = row == rows - 1 ? count - row * columns : columns
            let left = offset((width - inRow * tileWidth) / 2)
            rectangles.append(
                TileRect(
                    x: x + left + column * tileWidth,
                    y: y + row * tileHeight,
                    width: tileWidth,
                    height: tileHeight
                )
            )
        }
        return rectangles
    }

    /// A size: even, at least 2.
    static func even(_ value: Int) -> Int { max(2, value & ~1) }
    /// A position: even, at least 0.
    static func offset(_ value: Int) -> Int { max(0, value & ~1) }
}
