/* The floor under `get` (make bench): the least a process can do to answer from the access cache.
 *
 * Built by bench/bench.py with `cc -static -O2` (no loader, no relocations to speak of, no
 * libraries), it does what a warm `get` does with the kernel (man page ACCESS CACHE): search the
 * user keyring for the profile's `user` key by its description, describe it (the owner and
 * permission check `get` makes), read its payload and write it to stdout. It parses nothing: the
 * payload is written as it is, so every row of the bench's start-up table is a ratio to the bare
 * cost of a process plus these three keyctl(2) calls.
 *
 * Usage: floor DESCRIPTION   (exit 0: the payload was written; 1: no such key or unreadable)
 * Not shipped, not installed; keyctl(2) through syscall(2) directly, as Sources/CKeyring does. */
#include <linux/keyctl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fputs("usage: floor DESCRIPTION\n", stderr);
        return 2;
    }
    long key = syscall(SYS_keyctl, KEYCTL_SEARCH, (long)KEY_SPEC_USER_KEYRING, "user", argv[1], 0L);
    if (key < 0) return 1;
    char described[4096];
    long n = syscall(SYS_keyctl, KEYCTL_DESCRIBE, key, described, (long)sizeof described);
    /* "user;UID;GID;PERM;DESCRIPTION": the same check as get's, on the type and the description. */
    if (n <= 0 || strncmp(described, "user;", 5) != 0) return 1;
    static char payload[8192];
    long length = syscall(SYS_keyctl, KEYCTL_READ, key, payload, (long)sizeof payload);
    if (length < 0 || length > (long)sizeof payload) return 1;
    for (long off = 0; off < length;) {
        ssize_t w = write(1, payload + off, (size_t)(length - off));
        if (w <= 0) return 1;
        off += w;
    }
    return 0;
}
