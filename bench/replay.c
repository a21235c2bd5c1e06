/* The broker rows' ceilings (bench/bench.py): a one-thread epoll server on a UNIX socket that
 * answers every request head with the same bytes, the broker's own answer captured once.
 *
 * With two arguments it does nothing a broker must (no store, no keyring, no guarded memory, no
 * audit line), so the clients' rate against it is the most the harness can measure on this
 * machine. With the entry's description, the encrypted file and the key file it also makes every
 * system call the broker's contract asks of a cached answer (man page BROKER and ACCESS CACHE):
 * at accept the peer's credentials and executable (for the audit line); per request the entry's
 * search, description and read, the file store's checks (its directory and file, the key's
 * directory and file: the file's lstat is what binds the entry, so the store's identity, the real
 * path of its directory, is resolved once, as the broker remembers it), the payload wiped, and
 * an audit line written to stderr. It builds no JSON (it replays), so its rate is what any
 * broker that keeps the contract could reach here, less the cost of forming the answer.
 * Usage: replay SOCKET ANSWER-FILE [DESCRIPTION STORE-FILE KEY-FILE] */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *description, *store_file, *key_file;
static char store_dir[PATH_MAX], key_dir[PATH_MAX];
enum { MAX_FD = 4096 };
static struct peer { pid_t pid; char exe[257]; } peers[MAX_FD];

/* At accept, as the broker's admission does: who is asking (SO_PEERCRED) and its executable
 * (for the audit line). */
static int admit(int fd) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (fd >= MAX_FD || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)cred.pid);
    ssize_t n = readlink(path, peers[fd].exe, sizeof peers[fd].exe - 1);
    peers[fd].exe[n > 0 ? n : 0] = 0;
    peers[fd].pid = cred.pid;
    return 0;
}

/* Per request, what the contract asks of a cached answer; 0 when it may be served. */
static int contract(int fd) {
    long key = syscall(SYS_keyctl, KEYCTL_SEARCH, (long)KEY_SPEC_USER_KEYRING, "user", description, 0L);
    if (key < 0) return 1;
    char described[4096];
    if (syscall(SYS_keyctl, KEYCTL_DESCRIBE, key, described, (long)sizeof described) <= 0) return 1;
    static char payload[8192];
    long length = syscall(SYS_keyctl, KEYCTL_READ, key, payload, (long)sizeof payload);
    explicit_bzero(payload, sizeof payload);
    if (length < 0) return 1;
    struct stat st;
    if (stat(store_dir, &st) || lstat(store_file, &st) || stat(key_dir, &st) || lstat(key_file, &st)) return 1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char stamp[32], line[512];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "replay: %s pid=%d exe=%s path=/v1/token status=200 ok\n", stamp, (int)peers[fd].pid, peers[fd].exe);
    return write(2, line, (size_t)n) < 0;
}

int main(int argc, char **argv) {
    static char answer[65536];
    if (argc != 3 && argc != 6) { fprintf(stderr, "usage: replay SOCKET ANSWER-FILE [DESCRIPTION STORE-FILE KEY-FILE]\n"); return 2; }
    if (argc == 6) {
        description = argv[3], store_file = argv[4], key_file = argv[5];
        strncpy(store_dir, store_file, sizeof store_dir - 1);
        strncpy(key_dir, key_file, sizeof key_dir - 1);
        dirname(store_dir);
        dirname(key_dir);
        char *real = realpath(store_dir, NULL);
        if (!real) { perror(store_dir); return 1; }
        free(real);
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    size_t answer_len = fread(answer, 1, sizeof answer, f);
    fclose(f);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, argv[1], sizeof addr.sun_path - 1);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 4096)) { perror(argv[1]); return 1; }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(ep, ready, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int c;
                while ((c = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (description && admit(c)) { close(c); continue; }
                    struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
                }
                continue;
            }
            char head[4096];
            ssize_t got = read(fd, head, sizeof head);
            if (got <= 0) { if (got == 0 || errno != EAGAIN) close(fd); continue; }
            /* The bench's clients send one small head per write and wait for its answer. */
            if (!memmem(head, (size_t)got, "\r\n\r\n", 4)) continue;
            if ((description && contract(fd)) || write(fd, answer, answer_len) < 0) close(fd);
        }
    }
}
