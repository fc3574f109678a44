/// A rectangle of a picture or window, in pixels (even numbers, for 4:2:0).
public struct TileRect: Sendable, Hashable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// Equal tiles for everyone in a call: the arithmetic the composite recording and the call window
/// share, so a participant sits in the same place in both.
public enum TileGrid {
    /// Equal tiles, rows filled left to right, a last row that is not full centered; as many
    /// columns as the smallest square that holds `count`.
    public static func rectangles(count: Int, x: Int = 0, y: Int = 0, width: Int, height: Int) -> [TileRect] {
        guard count > 0 else { return [] }
        var columns = 1
        while columns * columns < count { columns += 1 }
        let rows = (count + columns - 1) / columns
        let tileWidth = even(width / columns)
        let tileHeight = even(height / rows)
        var rectangles: [TileRect] = []
        rectangles.reserveCapacity(count)
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
    public static func even(_ value: Int) -> Int { max(2, value & ~1) }
    /// A position: even, at least 0.
    public static func offset(_ value: Int) -> Int { max(0, value & ~1) }
}
