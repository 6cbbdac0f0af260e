/// Rewrites the parameters of SQL written for SQLite in PostgreSQL's spelling: `?` becomes `$1`,
/// `$2`, … left to right, `?N` becomes `$N`; what is quoted (`'…'`, `"…"`) or commented out
/// (`-- …`) is left alone.
enum PlaceholderNumbering {
    static func numbered(_ sql: String) -> String {
        let characters = Array(sql)
        var output = ""
        output.reserveCapacity(characters.count + 16)
        var number = 0
        var quote: Character?
        var inComment = false
        var index = 0
        while index < characters.count {
            let character = characters[index]
            index += 1
            if inComment {
                if character == "\n" { inComment = false }
            } else if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "-", output.last == "-" {
                inComment = true
            } else if character == "?" {
                if index < characters.count, characters[index].isASCII, characters[index].isNumber {
                    output.append("$")  // `?N` names its parameter: `$N`, the digits follow as they are
                } else {
                    number += 1
                    output += "$\(number)"
                }
                continue
            }
            output.append(character)
        }
        return output
    }
}
