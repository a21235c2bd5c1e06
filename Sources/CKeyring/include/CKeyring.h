#ifndef CKEYRING_H
#define CKEYRING_H
/*
 * The kernel key retention service's system calls, add_key(2) and keyctl(2). glibc wraps
 * neither, and syscall(2) is variadic, which Swift cannot call; libkeyutils would wrap them, but
 * at the price of one more shared library mapped at every start for nine one-line calls.
 *
 * Each function returns what the system call returns: -1 with errno set on failure.
 * The KEY_SPEC_* keyring ids and the KEYCTL_* operations come from <linux/keyctl.h>.
 */
#include <linux/keyctl.h>
#include <stddef.h>
#include <stdint.h>

/* Key permission bits. The kernel defines them in include/linux/key.h, which is not exported to
 * <linux/...>; libkeyutils' <keyutils.h> repeats the same values as KEY_POS_VIEW and so on. The
 * top byte is the possessor's, then the owner's, the group's and everyone else's. */
#define CKEYRING_POS_VIEW    0x01000000u /* see the key's attributes (keyctl describe) */
#define CKEYRING_POS_READ    0x02000000u /* read the payload */
#define CKEYRING_POS_WRITE   0x04000000u /* update the payload, revoke */
#define CKEYRING_POS_SEARCH  0x08000000u /* be found by a search; invalidate */
#define CKEYRING_POS_LINK    0x10000000u /* be linked into a keyring */
#define CKEYRING_POS_SETATTR 0x20000000u /* change the permissions and the timeout */
#define CKEYRING_POS_ALL     0x3f000000u
/* The same rights for the key's owner (a process whose fsuid is the key's uid), one byte down. */
#define CKEYRING_USR_VIEW    0x00010000u
#define CKEYRING_USR_READ    0x00020000u
#define CKEYRING_USR_SEARCH  0x00080000u
#define CKEYRING_USR_LINK    0x00100000u

/* add_key(2): a new key of TYPE in KEYRING, or the payload of the one already there replaced. */
int32_t ckeyring_add(const char *type, const char *description, const void *payload, size_t length,
                     int32_t keyring);
/* KEYCTL_SEARCH without linking the key found anywhere. */
int32_t ckeyring_search(int32_t keyring, const char *type, const char *description);
/* KEYCTL_READ: the payload's full length, of which at most LENGTH bytes were copied. */
long ckeyring_read(int32_t key, void *buffer, size_t length);
/* KEYCTL_DESCRIBE: "type;uid;gid;perm;description" and a NUL; returns the length with the NUL. */
long ckeyring_describe(int32_t key, char *buffer, size_t length);
int ckeyring_setperm(int32_t key, uint32_t permissions);
int ckeyring_set_timeout(int32_t key, unsigned int seconds);
int ckeyring_link(int32_t key, int32_t keyring);
int ckeyring_unlink(int32_t key, int32_t keyring);
int ckeyring_invalidate(int32_t key);

#endif
