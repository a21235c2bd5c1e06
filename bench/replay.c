/* The broker rows' ceiling (bench/bench.py): a one-thread epoll server on a UNIX socket that
 * answers every request head with the same bytes, the broker's own answer captured once. It does
 * nothing a broker must (no store, no keyring, no guarded memory, no audit line), so the clients'
 * rate against it is the most the harness can measure on this machine.
 * Usage: replay SOCKET ANSWER-FILE */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    static char answer[65536];
    if (argc != 3) { fprintf(stderr, "usage: replay SOCKET ANSWER-FILE\n"); return 2; }
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
                    struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
                }
                continue;
            }
            char head[4096];
            ssize_t got = read(fd, head, sizeof head);
            if (got <= 0) { if (got == 0 || errno != EAGAIN) close(fd); continue; }
            /* The bench's clients send one small head per write and wait for its answer. */
            if (memmem(head, (size_t)got, "\r\n\r\n", 4) && write(fd, answer, answer_len) < 0) close(fd);
        }
    }
}
