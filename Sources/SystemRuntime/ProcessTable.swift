import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// The user's processes, read from `/proc` (best effort: nothing when it is not mounted).
public enum ProcessTable {
    /// The pids of this user's processes running one of `names`: the program's file name
    /// (`/proc/PID/cmdline`'s first word), or the script an interpreter runs (its second word,
    /// `python3 /usr/bin/chatmock`).
    public static func running(_ names: Set<String>, procRoot: String = "/proc") -> [(pid: Int32, name: String)] {
        guard let dir = opendir(procRoot) else { return [] }
        defer { closedir(dir) }
        let me = getuid(), myPid = getpid()
        var found: [(Int32, String)] = []
        while let entry = readdir(dir) {
            let name = FileSystem.entryName(entry)
            guard let pid = Int32(name), pid > 0, pid != myPid else { continue }
            var st = stat()
            guard stat("\(procRoot)/\(name)", &st) == 0, st.st_uid == me else { continue }
            guard let bytes = try? FileSystem.readSmallFile("\(procRoot)/\(name)/cmdline", limit: 64 * 1024) else { continue }
            let words = bytes.withUnsafeBytes { raw in
                raw.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false).prefix(2).map { String(decoding: $0, as: UTF8.self) }
            }
            for word in words {
                let base = word.split(separator: "/").last.map(String.init) ?? word
                if names.contains(base) { found.append((pid, base)); break }
            }
        }
        return found
    }
}
