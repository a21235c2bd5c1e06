#if canImport(Glibc)
import Glibc
#endif

extension Paths {
    /// The per-user runtime directory of this tool (man page FILES): `/run/user/UID/chatgpt-credential`
    /// when `/run/user/UID` is what logind makes (a real directory of this user that nobody else
    /// can write), else `/tmp/chatgpt-credential-UID`. It depends on the uid alone, never on an
    /// environment string, so every process of the user finds the same place. Callers create it
    /// 0700 and refuse it when it is not a directory of this user that only the user can access.
    public static func userRuntimeDirectory(uid: uid_t = geteuid()) -> String {
        let run = "/run/user/\(uid)"
        var st = stat()
        if lstat(run, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid, st.st_mode & 0o022 == 0 {
            return run + "/chatgpt-credential"
        }
        return "/tmp/chatgpt-credential-\(uid)"
    }
}
