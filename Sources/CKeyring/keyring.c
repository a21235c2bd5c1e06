#include "CKeyring.h"
#include <sys/syscall.h>
#include <unistd.h>

/* syscall(2) reads every argument as a long: integers are widened explicitly, not left to the
 * variadic promotion (which leaves the upper half of a register unspecified). */

int32_t ckeyring_add(const char *type, const char *description, const void *payload, size_t length,
                     int32_t keyring) {
    return (int32_t)syscall(SYS_add_key, type, description, payload, length, (long)keyring);
}

int32_t ckeyring_search(int32_t keyring, const char *type, const char *description) {
    return (int32_t)syscall(SYS_keyctl, KEYCTL_SEARCH, (long)keyring, type, description, 0L);
}

long ckeyring_read(int32_t key, void *buffer, size_t length) {
    return syscall(SYS_keyctl, KEYCTL_READ, (long)key, buffer, length);
}

long ckeyring_describe(int32_t key, char *buffer, size_t length) {
    return syscall(SYS_keyctl, KEYCTL_DESCRIBE, (long)key, buffer, length);
}

int ckeyring_setperm(int32_t key, uint32_t permissions) {
    return (int)syscall(SYS_keyctl, KEYCTL_SETPERM, (long)key, (unsigned long)permissions);
}

int ckeyring_set_timeout(int32_t key, unsigned int seconds) {
    return (int)syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, (long)key, (unsigned long)seconds);
}

int ckeyring_link(int32_t key, int32_t keyring) {
    return (int)syscall(SYS_keyctl, KEYCTL_LINK, (long)key, (long)keyring);
}

int ckeyring_unlink(int32_t key, int32_t keyring) {
    return (int)syscall(SYS_keyctl, KEYCTL_UNLINK, (long)key, (long)keyring);
}

int ckeyring_invalidate(int32_t key) {
    return (int)syscall(SYS_keyctl, KEYCTL_INVALIDATE, (long)key);
}
