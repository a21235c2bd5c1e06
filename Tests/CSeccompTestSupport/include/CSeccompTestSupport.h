#ifndef CSECCOMP_TEST_SUPPORT_H
#define CSECCOMP_TEST_SUPPORT_H
/* Test-only: what a container's seccomp profile does to the key retention service (Docker's
 * default refuses add_key and keyctl with EPERM), on one thread of the test process. */

#define CSECCOMP_REFUSE_ADD_KEY 1
#define CSECCOMP_REFUSE_KEYCTL  2

/* Installs a seccomp filter on the CALLING THREAD only (no SECCOMP_FILTER_FLAG_TSYNC) that fails
 * the calls named in CALLS (a mask of the values above) with ERROR and allows everything else.
 * It cannot be removed: call it on a thread that ends afterwards. Returns 0, or -1 with errno. */
int cseccomp_refuse_keyring_calls(int calls, int error);

/* Test-only: makes the CALLING THREAD join a new anonymous session keyring that does not link
 * the user keyring (what `keyctl session -` does for a process). Returns the keyring's serial,
 * or -1 with errno. Call it on a thread that ends afterwards. */
int ctest_join_new_session_keyring(void);

#endif
