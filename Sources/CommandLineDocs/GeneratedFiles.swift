/// The files `make docs` writes (`ccred-docs`), by their path in the repository: the three shells'
/// completions, whole, and the man pages with their generated regions rewritten (`ManPage`).
public enum GeneratedFiles {
    public static let completions = ["completions/chatgpt-credential.bash", "completions/_chatgpt-credential",
                                     "completions/chatgpt-credential.fish"]
    /// The man pages that hold the generated regions (each region in one of them).
    public static let manPages = ["man/chatgpt-credential.1"]
    public static var paths: [String] { completions + manPages }

    /// What each generated file should hold, by path, given what each holds now (`current`, by
    /// path; only the man pages' own prose is read from it, and a missing file is empty).
    public static func texts(current: [String: String]) throws -> [String: String] {
        var texts = [completions[0]: try BashCompletion.text(), completions[1]: try ZshCompletion.text(),
                     completions[2]: try FishCompletion.text()]
        for (path, text) in zip(manPages, try ManPage.updating(manPages.map { current[$0] ?? "" })) { texts[path] = text }
        return texts
    }
}
