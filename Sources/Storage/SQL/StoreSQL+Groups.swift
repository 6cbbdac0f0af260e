/// Statements over many rows at once: a pushed batch is read and written a few statements per
/// kind, not one per row, since on PostgreSQL every statement is a round trip to the server and its
/// own executor start, the larger part of what a row costs there.
///
/// Rows go in groups of at most `largestGroup`, each group's size a power of two, so that a
/// connection prepares at most seven statements of a kind, however the counts vary.
extension StoreSQL {
    static let largestGroup = 64

    /// `values` in groups for a statement that a repeated row does not change (an `IN` list, an
    /// update to the same values): a group is filled up to its size with copies of its last value.
    static func paddedGroups<T>(_ values: [T]) -> [[T]] {
        stride(from: 0, to: values.count, by: largestGroup).map { start in
            var group = Array(values[start..<min(start + largestGroup, values.count)])
            let size = groupSize(atLeast: group.count)
            group.append(contentsOf: repeatElement(group[group.count - 1], count: size - group.count))
            return group
        }
    }

    /// `values` in groups for a statement in which every row counts (an insert): full groups, then the
    /// rest split by the binary digits of its count.
    static func exactGroups<T>(_ values: [T]) -> [ArraySlice<T>] {
        var groups: [ArraySlice<T>] = []
        var start = 0
        while start < values.count {
            let remaining = values.count - start
            let size =
                remaining >= largestGroup ? largestGroup : 1 << (Int.bitWidth - 1 - remaining.leadingZeroBitCount)
            groups.append(values[start..<start + size])
            start += size
        }
        return groups
    }

    /// `?, ?, ?` for an `IN` list of `count`.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// `(?, ?), (?, ?)` for `rows` rows of `columns`; `row` is one row's text when its columns need more
    /// than a bare placeholder (a cast that PostgreSQL needs to type a `VALUES` list).
    static func rowPlaceholders(rows: Int, row: String) -> String {
        Array(repeating: "(\(row))", count: rows).joined(separator: ", ")
    }

    private static func groupSize(atLeast count: Int) -> Int {
        var size = 1
        while size < count { size <<= 1 }
        return size
    }
}
