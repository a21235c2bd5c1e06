import CredentialCore

/// The shell command that removes one store's copy of a profile and nothing else: `erase`
/// removes every copy (man page, `erase`), so a notice about a leftover copy in one store
/// suggests this instead.
public enum CopyRemoval {
    public static func command(_ store: CredentialStore, _ profile: Profile) -> String {
        if let file = store as? AgeFileStore, let path = file.path(for: profile) {
            return "rm -- " + shellWord(path)
        }
        return "secret-tool clear service \(SecretServiceStore.serviceName) profile \(profile.name)"
    }

    /// `s` as one shell word: bare when it holds only safe characters, else single-quoted.
    static func shellWord(_ s: String) -> String {
        let safe = s.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "/._-+=@%:,".unicodeScalars.contains($0) }
        return safe ? s : "'" + s.map { $0 == "'" ? "'\\''" : String($0) }.joined() + "'"
    }
}
