#if canImport(Glibc)
import Glibc
#endif

/// Which user namespace this process is in, decided by what the kernel says it is (the inode of
/// `/proc/self/ns/user`), never by the uid the process sees.
public enum UserNamespace {
    /// The inode number the kernel gives the initial user namespace (PROC_USER_INIT_INO).
    static let initialInode: UInt = 0xEFFF_FFFD

    /// True when this process is in the first (initial) user namespace. False in any other —
    /// `unshare -r`, `bwrap --unshare-user`, a rootless container — and when it cannot be told
    /// (no /proc): the kernel keeps a user keyring per namespace, so such a caller keeps out of
    /// the access cache (man page ACCESS CACHE).
    ///
    /// Asked of the kernel once: a process cannot move to another user namespace once it has a
    /// second thread (setns(2) and unshare(2) refuse), and this program never asks to, so the
    /// first answer stays true. The broker's loop would otherwise stat a /proc file per answer.
    public static let isInitial: Bool = probe()

    /// What the kernel says now of the namespace `nsPath` names (`isInitial` is this process's).
    static func probe(nsPath: String = "/proc/self/ns/user") -> Bool {
        var st = stat()
        guard stat(nsPath, &st) == 0 else { return false }
        return UInt(st.st_ino) == initialInode
    }
}
