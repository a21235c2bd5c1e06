#include "CSystemShims.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* The spend-to-save window (see SignalDeferral.swift): the handler only records the first
   signal and, on a terminal, says once that the save is being finished. Everything it touches
   is a volatile sig_atomic_t or write(2): async-signal-safe. */

static const int deferred_signals[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static struct sigaction previous[4];
static int installed[4];
static int depth;
static volatile sig_atomic_t recorded;
static volatile sig_atomic_t announce;

static const char notice[] =
    "chatgpt-credential: signal received; finishing saving the new tokens the issuer has just issued, then exiting\n";

static void on_deferred_signal(int sig) {
    int saved = errno;
    if (recorded == 0) {
        recorded = sig;
        if (announce) {
            ssize_t n = write(2, notice, sizeof notice - 1);
            (void)n;
        }
    }
    errno = saved;
}

void cs_defer_signals_begin(int announce_on_stderr) {
    if (depth++ > 0) return;
    announce = announce_on_stderr;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deferred_signal;
    sigfillset(&sa.sa_mask);
    /* Interrupted reads and writes of the exchange and the save carry on where they were. */
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 4; i++) {
        installed[i] = 0;
        if (sigaction(deferred_signals[i], NULL, &previous[i]) != 0) continue;
        /* A signal the caller chose to ignore (nohup, a background job) stays ignored. */
        if (previous[i].sa_handler == SIG_IGN) continue;
        if (sigaction(deferred_signals[i], &sa, NULL) == 0) installed[i] = 1;
    }
}

void cs_defer_signals_end(void) {
    if (depth == 0 || --depth > 0) return;
    for (int i = 0; i < 4; i++) {
        if (installed[i]) sigaction(deferred_signals[i], &previous[i], NULL);
        installed[i] = 0;
    }
}

int cs_deferred_signal(void) { return recorded; }

int cs_defer_signals_depth(void) { return depth; }
