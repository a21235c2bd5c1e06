#ifndef CSYSTEMSHIMS_H
#define CSYSTEMSHIMS_H
/* Thin wrappers over libc calls Swift cannot reach directly (variadic or macro-only). */

/* Disables core dumps (soft RLIMIT_CORE 0) and makes the process non-dumpable (no ptrace attach by
   other processes of the same user, /proc/PID owned by root). Returns 0 on success. */
int cs_harden_process(void);

/* Puts back the core-dump limit the process started with, for the program `exec` runs. */
void cs_restore_core_limit(void);

/* The arguments the process was started with, as glibc handed them to the executable's
   initialisers (not read from /proc). cs_argc() is -1 when they were not captured; cs_argv(i) is
   NULL outside 0..argc-1. */
int cs_argc(void);
const char *cs_argv(int index);
/* The spend-to-save window: from _begin until the matching _end, SIGINT, SIGTERM, SIGHUP and
   SIGQUIT (those not ignored) are recorded instead of acted on; the first one is kept. With
   announce_on_stderr, the handler says once on stderr that the save is being finished. Nested
   calls are counted; the outermost _end puts the previous dispositions back. */
void cs_defer_signals_begin(int announce_on_stderr);
void cs_defer_signals_end(void);
/* The first signal recorded in any window of this process, or 0. */
int cs_deferred_signal(void);
/* How many windows are open (0 outside). */
int cs_defer_signals_depth(void);

/* The broker's --allow-uid (man page BROKER): lsetxattr(2) and getxattr(2) of a POSIX ACL
   (`system.posix_acl_access`), which Glibc's Swift module does not export. -1 and errno on failure;
   cs_getxattr returns the value's length. */
int cs_lsetxattr(const char *path, const char *name, const void *value, unsigned long size);
long cs_getxattr(const char *path, const char *name, void *value, unsigned long size);

/* Sinks (man page SINKS): renameat2(2) with RENAME_EXCHANGE (swap two names atomically) and with
   RENAME_NOREPLACE (rename unless the new name exists), made with syscall(2) so an older glibc
   needs no wrapper. -1 and errno on failure (EINVAL where the filesystem cannot). */
int cs_rename_exchange(const char *a, const char *b);
int cs_rename_noreplace(const char *from, const char *to);

/* The broker (man page BROKER): accept4(2) with SOCK_NONBLOCK and SOCK_CLOEXEC, which Glibc's
   Swift module does not export: one call per connection instead of accept and three fcntls.
   -1 and errno on failure. */
int cs_accept_nonblocking(int listen_fd);

#endif

/* execvpe(3) (a GNU extension the Swift Glibc module does not declare): exec's program with the
   environment built by ProcessImage, whose secret entries point into guarded memory. Returns
   only on failure, with errno set. */
int cs_execvpe(const char *file, char *const argv[], char *const envp[]);
