#ifndef CWARMPATH_H
#define CWARMPATH_H
/*
 * The warm path (ARCHITECTURE.md, "The warm path"): `--version` and a `get` answered from a fresh
 * access-cache entry, before the Swift runtime starts. It runs from the executable's
 * .preinit_array. Swift calls only what this header names: the version the warm path prints
 * (EndToEndTests compare it with CommandLineSpec.version), and the client-mode request it left
 * to the Swift path (main.swift).
 */

/* "0.2.0": what `chatgpt-credential --version` prints after the program's name. */
const char *cw_version(void);

/* A client-mode `get` whose request the warm path sent and whose answer it left to the Swift
 * path (BrokerClient.get continues on the socket, within the same deadline). */
struct cw_broker_handoff {
    int fd;                 /* connected to the broker, close-on-exec */
    long request_bytes_sent;
    long long deadline_ms;  /* CLOCK_MONOTONIC milliseconds, as Clock.monotonicMillis */
    const char *path;       /* the socket's path, as given after `unix:` */
    const char *target;     /* the request target sent */
};

/* 1 and the handoff, once; 0 when there is none. */
int cw_take_broker_handoff(struct cw_broker_handoff *out);

#endif
