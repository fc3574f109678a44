/// Bytes from a hex string; spaces and other non-hex characters are ignored.
func hex(_ string: String) -> [UInt8] {
    let digits = string.filter { $0.isHexDigit }
    var out: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        out.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return out
}
