/// Text for a terminal, broken at spaces: `--help` and the sign-in prompts fit the width of the
/// terminal (80 columns off one) and never cut a word in two.
public enum TextWrap {
    /// `text` broken at spaces into lines of at most `width` columns, every line indented by
    /// `indent`. A word longer than a line stands alone on its line, never cut.
    public static func wrap(_ text: String, width: Int, indent: Int = 0) -> String {
        var lines: [String] = []
        var line = String(repeating: " ", count: indent)
        var lineHasWord = false
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if lineHasWord && line.count + 1 + word.count > width {
                lines.append(line)
                line = String(repeating: " ", count: indent)
                lineHasWord = false
            }
            line += (lineHasWord ? " " : "") + word
            lineHasWord = true
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    /// Each line of `wrap`, for a console that writes one line at a time.
    public static func lines(_ text: String, width: Int, indent: Int = 0) -> [String] {
        wrap(text, width: width, indent: indent).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}
