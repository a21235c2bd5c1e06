/// The files `make docs` writes (`ccred-docs`), by their path in the repository: the three shells'
/// completions, whole, and the man page with its generated regions rewritten (`ManPage`).
public enum GeneratedFiles {
    public static let manPage = "man/chatgpt-credential.1"
    public static let paths = ["completions/chatgpt-credential.bash", "completions/_chatgpt-credential",
                               "completions/chatgpt-credential.fish", manPage]

    /// What the file at `path` should hold, given what it holds now (`current`; only the man page's
    /// own prose is read from it).
    public static func text(of path: String, current: String) throws -> String {
        switch path {
        case "completions/chatgpt-credential.bash": return try BashCompletion.text()
        case "completions/_chatgpt-credential": return try ZshCompletion.text()
        case "completions/chatgpt-credential.fish": return try FishCompletion.text()
        case manPage: return try ManPage.updating(current)
        default: throw DocsError("\(path) is not a generated file")
        }
    }
}
