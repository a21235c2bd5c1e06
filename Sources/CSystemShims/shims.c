#define _GNU_SOURCE
#include "CSystemShims.h"
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static struct rlimit original_core;
static int have_original_core;

int cs_harden_process(void) {
    int rc = 0;
    /* The limit the process started with is recorded once: the warm path (CWarmPath) may have
     * hardened the process already before handing it to main.swift, which calls this again. */
    if (have_original_core || getrlimit(RLIMIT_CORE, &original_core) == 0) {
        have_original_core = 1;
        /* Only the soft limit: the hard one stays, so `exec`'s child can get its own limit back. */
        struct rlimit none = {0, original_core.rlim_max};
        if (setrlimit(RLIMIT_CORE, &none) != 0) rc = -1;
    } else {
        rc = -1;
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) rc = -1;
    return rc;
}

void cs_restore_core_limit(void) {
    if (have_original_core) setrlimit(RLIMIT_CORE, &original_core);
}

/* The process's own argv, captured before main: glibc calls every .init_array function of the
 * executable with (argc, argv, envp), dynamically and statically linked alike. The Swift
 * runtime's CommandLine.arguments reads /proc/self/cmdline instead, which is absent where /proc
 * is not mounted (a chroot, early boot): the tool would see no arguments at all. */
static int saved_argc;
static char **saved_argv;

static void capture_arguments(int argc, char **argv, char **envp) {
    (void)envp;
    saved_argc = argc;
    saved_argv = argv;
}

__attribute__((section(".init_array"), used))
static void (*const capture_arguments_entry)(int, char **, char **) = capture_arguments;

int cs_argc(void) { return saved_argv ? saved_argc : -1; }

const char *cs_argv(int index) {
    if (!saved_argv || index < 0 || index >= saved_argc) return 0;
    return saved_argv[index];
}

#include <sys/xattr.h>

int cs_lsetxattr(const char *path, const char *name, const void *value, unsigned long size) {
    return lsetxattr(path, name, value, (size_t)size, 0);
}

long cs_getxattr(const char *path, const char *name, void *value, unsigned long size) {
    return (long)getxattr(path, name, value, (size_t)size);
}

int cs_execvpe(const char *file, char *const argv[], char *const envp[]) {
    return execvpe(file, argv, envp);
}

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fs.h>

int cs_rename_exchange(const char *a, const char *b) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

int cs_rename_noreplace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

#include <sys/socket.h>

int cs_accept_nonblocking(int listen_fd) {
    return accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
