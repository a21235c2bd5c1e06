#include "CSeccompTestSupport.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/keyctl.h>
#include <unistd.h>

#if defined(__x86_64__)
#define CSECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CSECCOMP_ARCH AUDIT_ARCH_AARCH64
#else
#error "add this architecture's AUDIT_ARCH_ value"
#endif

int cseccomp_refuse_keyring_calls(int calls, int error) {
    const unsigned int refuse = SECCOMP_RET_ERRNO | ((unsigned int)error & SECCOMP_RET_DATA);
    const unsigned int add_key = (calls & CSECCOMP_REFUSE_ADD_KEY) ? refuse : SECCOMP_RET_ALLOW;
    const unsigned int keyctl = (calls & CSECCOMP_REFUSE_KEYCTL) ? refuse : SECCOMP_RET_ALLOW;
    struct sock_filter filter[] = {
        /* Another architecture's system call numbers mean other calls: allow them. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CSECCOMP_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_add_key, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, add_key),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_keyctl, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, keyctl),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = { .len = sizeof filter / sizeof filter[0], .filter = filter };
    /* Needed without CAP_SYS_ADMIN; like the filter, it holds for this thread only. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}

int ctest_join_new_session_keyring(void) {
    return (int)syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, (long)0);
}
