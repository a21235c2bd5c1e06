#if canImport(Glibc)
import Glibc
#endif

/// This process's effective user, asked of the kernel once. Nothing in the tool changes its
/// uid, and the owner checks that compare with it run several times for every answer the broker
/// gives from the access cache (ARCHITECTURE.md, "A broker request"): one system call each, for
/// a value that cannot change.
public enum ProcessUser {
    public static let effectiveID: uid_t = geteuid()
}
