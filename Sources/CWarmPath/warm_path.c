/*
 * The warm path (ARCHITECTURE.md, "The warm path"; man page ACCESS CACHE): the two commands a
 * script runs most — `--version` and a `get` (with `--min-ttl` or not, as Codex's `auth.command`
 * runs it) whose access-cache entry is fresh — answered before
 * the Swift runtime starts, from the executable's .preinit_array, which the dynamic loader runs
 * before any initialiser of the executable (the Swift runtime's are among them). A process start
 * then costs what a C program's does (bench/results.md, issue 31).
 *
 * The rule that keeps it one program: this code answers only when the Swift path would print
 * exactly the same bytes and exit 0, and it decides nothing else. Whenever it is not certain —
 * any other argument, option or verb, a setting it does not read, a store or bus spelled in a
 * way it does not normalise, an entry that is missing, stale, idle, damaged or not exactly as
 * written, a file store whose modes a read would refuse, a caller in a user namespace — it
 * returns having changed nothing the Swift path reads, and the Swift path runs as if it had
 * not been here (it reads the same entry again). So each rule below is a subset of the Swift
 * rule it names, never a second version of it; where the Swift rule is larger (a bus address
 * with several entries, a TCP bus), this path simply declines.
 *
 * Secrets: the entry's payload is read into one buffer on this function's stack after core
 * dumps are turned off (cs_harden_process), and wiped (explicit_bzero) before the process
 * exits or the Swift path starts (SECURITY.md).
 */
#define _GNU_SOURCE
#include "CWarmPath.h"
#include "CKeyring.h"
#include "CSystemShims.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CW_PROGRAM "chatgpt-credential"
#define CW_VERSION "0.2.0"

const char *cw_version(void) { return CW_VERSION; }

/* ---- bounded text ------------------------------------------------------------------------ */

/* The kernel's limit on a key's description (KEY_MAX_DESC_SIZE, with the NUL) bounds every
 * string built here; longer means "decline". */
enum { TEXT_BYTES = 4096 };

struct text {
    char bytes[TEXT_BYTES];
    size_t length;
    int overflowed;
};

static void text_append_bytes(struct text *t, const char *s, size_t n) {
    if (t->overflowed || n >= TEXT_BYTES - t->length) {
        t->overflowed = 1;
        return;
    }
    memcpy(t->bytes + t->length, s, n);
    t->length += n;
    t->bytes[t->length] = 0;
}

static void text_append(struct text *t, const char *s) { text_append_bytes(t, s, strlen(s)); }

/* ---- the rules' small parts (each names the Swift rule it is a subset of) ----------------- */

/* UTF8Scalars.isValid: well-formed UTF-8 (no overlong form, no surrogate, at most U+10FFFF). A
 * string Swift reads with String(cString:) is repaired when it is not; this path declines then. */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xEE && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else return 0;
        if (n - i - 1 < need) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += need + 1;
    }
    return 1;
}

static int valid_utf8_string(const char *s) { return valid_utf8((const unsigned char *)s, strlen(s)); }

/* Settings(environment:): the variable's value, the last one when it is given twice (the
 * environment is read into a dictionary in order), NULL when unset or empty. */
static const char *variable(char **envp, const char *name) {
    size_t n = strlen(name);
    const char *found = NULL;
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') found = *e + n + 1;
    return found && *found ? found : NULL;
}

/* Profile.isValid: 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit. */
static int valid_profile(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return 0;
    }
    return 1;
}

enum store_choice { STORE_INVALID, STORE_AUTO, STORE_SECRET_SERVICE, STORE_FILE };

/* StoreChoice(rawValue:). */
static enum store_choice store_choice(const char *s) {
    if (strcmp(s, "auto") == 0) return STORE_AUTO;
    if (strcmp(s, "secret-service") == 0) return STORE_SECRET_SERVICE;
    if (strcmp(s, "file") == 0) return STORE_FILE;
    return STORE_INVALID;
}

/* Settings.Seconds.cacheTTL: decimal digits only, 1 to 3600. */
static int valid_cache_ttl(const char *s) {
    while (*s == '0') s++;
    size_t n = strlen(s);
    if (n == 0 || n > 4) return 0; /* all zeros is 0, out of range */
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    long v = strtol(s, NULL, 10);
    return v >= 1 && v <= 3600;
}

/* Settings(environment:): 0 when it would refuse a value (exit 2) or diagnostics are asked for
 * (CHATGPT_CREDENTIAL_DEBUG, whatever its value); else the profile and store variables (NULL
 * when unset), both valid. */
static int settings_accepted(char **envp, const char **profile_variable, const char **store_variable) {
    const char *cache = variable(envp, "CHATGPT_CREDENTIAL_CACHE");
    const char *ttl = variable(envp, "CHATGPT_CREDENTIAL_CACHE_TTL");
    *profile_variable = variable(envp, "CHATGPT_CREDENTIAL_PROFILE");
    *store_variable = variable(envp, "CHATGPT_CREDENTIAL_STORE");
    return !variable(envp, "CHATGPT_CREDENTIAL_DEBUG") && (!cache || strcmp(cache, "on") == 0 || strcmp(cache, "off") == 0) &&
           (!ttl || valid_cache_ttl(ttl)) && (!*profile_variable || valid_profile(*profile_variable)) &&
           (!*store_variable || store_choice(*store_variable) != STORE_INVALID);
}

/* Paths.init: XDG_*_HOME when absolute, else HOME (absolute) + the fallback; then the tool's
 * directory under it. Returns 0 when there is none. */
static int tool_directory(struct text *out, const char *xdg, const char *home, const char *fallback) {
    if (xdg && xdg[0] == '/') text_append(out, xdg);
    else if (home && home[0] == '/') { text_append(out, home); text_append(out, fallback); }
    else return 0;
    text_append(out, "/" CW_PROGRAM);
    return !out->overflowed;
}

/* AtomicFile.isLoose and checkOwner together: this user's, and nobody else may access it. */
static int owned_and_private(const struct stat *st) {
    return st->st_uid == geteuid() && (st->st_mode & 077) == 0;
}

/* AtomicFile.checkDirectory(path, create: false): 1 passes, 0 missing, -1 refused. */
static int check_directory(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    return S_ISDIR(st.st_mode) && owned_and_private(&st) ? 1 : -1;
}

/* AtomicFile.checkedFile(path): lstat, no symlink, a regular file of this user nobody else may
 * access, its lstat in `found` (when not NULL). 1 passes, 0 missing, -1 refused. */
static int check_file(const char *path, struct stat *found) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (found) *found = st;
    return S_ISREG(st.st_mode) && owned_and_private(&st) ? 1 : -1;
}

/* SessionBus.escapedAddressValue: bytes outside [-0-9A-Za-z_/\.*] become %XX. */
static void append_escaped(struct text *t, const char *value) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        unsigned char c = *p;
        int plain = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    c == '-' || c == '_' || c == '/' || c == '\\' || c == '.' || c == '*';
        if (plain) {
            char one = (char)c;
            text_append_bytes(t, &one, 1);
        } else {
            char three[3] = {'%', hex[c >> 4], hex[c & 15]};
            text_append_bytes(t, three, 3);
        }
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* StoreIdentity.unescapedAddressValue for [value, end) into `out` (NULL: only checked): 1, or 0
 * for a bad escape. A NUL or invalid UTF-8 after unescaping also declines (Swift would repair it). */
static int unescape(const char *value, const char *end, struct text *out) {
    for (const char *p = value; p < end; p++) {
        char c = *p;
        if (c == '%') {
            if (end - p < 3) return 0;
            int h = hex_value(p[1]), l = hex_value(p[2]);
            if (h < 0 || l < 0) return 0;
            c = (char)(h << 4 | l);
            if (c == 0) return 0;
            p += 2;
        }
        if (out) text_append_bytes(out, &c, 1);
    }
    return !out || (!out->overflowed && valid_utf8((const unsigned char *)out->bytes, out->length));
}

/* StoreIdentity.normalisedBusAddress, for the one shape every session bus here has: a single
 * `unix:` entry naming a `path` (its real path when it exists) or an `abstract` socket, `guid`
 * and every other key dropped, the value escaped canonically. Anything else (several entries,
 * tcp, a unix entry naming neither) declines: 0. */
static int normalised_bus(const char *address, struct text *out) {
    if (strchr(address, ';') || strncmp(address, "unix:", 5) != 0) return 0;
    /* The last `path` and the last `abstract` (a key given twice: the last one stands). */
    const char *path = NULL, *path_end = NULL, *abstract = NULL, *abstract_end = NULL;
    const char *p = address + 5;
    while (*p) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (end > p) {
            const char *eq = memchr(p, '=', (size_t)(end - p));
            if (!eq || eq == p || !unescape(eq + 1, end, NULL)) return 0;
            size_t key = (size_t)(eq - p);
            if (key == 4 && strncmp(p, "path", 4) == 0) { path = eq + 1; path_end = end; }
            else if (key == 8 && strncmp(p, "abstract", 8) == 0) { abstract = eq + 1; abstract_end = end; }
        }
        p = comma ? comma + 1 : end;
    }
    struct text value = {.length = 0};
    if (path) {
        if (!unescape(path, path_end, &value)) return 0;
        text_append(out, "unix:path=");
        char *real = value.bytes[0] == '/' ? realpath(value.bytes, NULL) : NULL;
        if (real && !valid_utf8_string(real)) { free(real); return 0; }
        append_escaped(out, real ? real : value.bytes);
        free(real);
    } else if (abstract) {
        if (!unescape(abstract, abstract_end, &value)) return 0;
        text_append(out, "unix:abstract=");
        append_escaped(out, value.bytes);
    } else {
        return 0;
    }
    return !out->overflowed;
}

/* SessionBus.find: the variable, else $XDG_RUNTIME_DIR/bus (followed), else /run/user/UID/bus
 * (not followed), each a socket of this user. */
static int session_bus_address(char **envp, struct text *out) {
    const char *address = variable(envp, "DBUS_SESSION_BUS_ADDRESS");
    if (address) {
        if (!valid_utf8_string(address)) return 0;
        text_append(out, address);
        return !out->overflowed;
    }
    struct text socket_path = {.length = 0};
    struct stat st;
    const char *runtime = variable(envp, "XDG_RUNTIME_DIR");
    if (runtime && runtime[0] == '/') {
        if (!valid_utf8_string(runtime)) return 0;
        text_append(&socket_path, runtime);
        if (runtime[strlen(runtime) - 1] != '/') text_append(&socket_path, "/");
        text_append(&socket_path, "bus");
        if (!socket_path.overflowed && stat(socket_path.bytes, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid()) {
            text_append(out, "unix:path=");
            append_escaped(out, socket_path.bytes);
            return !out->overflowed;
        }
    }
    char per_user[64];
    snprintf(per_user, sizeof per_user, "/run/user/%u/bus", (unsigned)geteuid());
    if (lstat(per_user, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid()) {
        text_append(out, "unix:path=");
        append_escaped(out, per_user);
        return !out->overflowed;
    }
    return 0;
}

/* ---- the entry ---------------------------------------------------------------------------- */

/* CachePayload (version 3) and KernelKeyring.entryPermissions. */
enum {
    PAYLOAD_MAX = 32767,
    PAYLOAD_FIRST_READ = 8192,
    PAYLOAD_TIMES = 3,
    PAYLOAD_FIELDS = 6,
    PAYLOAD_STORE_VERSION = 5,       /* the field naming the store's copy the entry came from */
    REFRESH_MARGIN = 300,            /* TokenDocument.refreshMargin */
    IDLE_REFRESH_INTERVAL = 8 * 86400 /* TokenDocument.idleRefreshInterval */
};
static const unsigned char payload_magic[4] = {'C', 'C', 'A', 3};
#define ENTRY_PERMISSIONS (CKEYRING_USR_VIEW | CKEYRING_USR_READ | CKEYRING_USR_SEARCH | CKEYRING_USR_LINK)

/* KeyringCache.read's check: a `user` key of this user with exactly the entry's permissions and
 * this description ("type;uid;gid;perm;description"). */
static int entry_is_as_written(int32_t key, const char *description) {
    char described[TEXT_BYTES + 64];
    long n = ckeyring_describe(key, described, sizeof described);
    if (n <= 0 || (size_t)n > sizeof described) return 0;
    described[sizeof described - 1] = 0;
    char *fields[5];
    char *p = described;
    for (int i = 0; i < 4; i++) {
        fields[i] = p;
        p = strchr(p, ';');
        if (!p) return 0;
        *p++ = 0;
    }
    fields[4] = p;
    char *end;
    errno = 0;
    unsigned long uid = strtoul(fields[1], &end, 10);
    if (errno || *end || end == fields[1] || uid != (unsigned long)geteuid()) return 0;
    unsigned long perm = strtoul(fields[3], &end, 16);
    if (errno || *end || end == fields[3]) return 0;
    return strcmp(fields[0], "user") == 0 && perm == ENTRY_PERMISSIONS && strcmp(fields[4], description) == 0;
}

static int64_t big_endian64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | b[i];
    return (int64_t)v;
}

/* CachePayload.parse, KeyringCache.lookup's version check, then ServedCredential.isFresh(minTTL:):
 * the access token's range within `payload` when the entry is exactly a version-3 payload filled
 * from `store_version` (the store's copy as it is now) that may be printed now. */
static int fresh_access_token(const unsigned char *payload, size_t n, const char *store_version, int64_t min_ttl,
                              size_t *token_at, size_t *token_length) {
    if (n < sizeof payload_magic + 8 * PAYLOAD_TIMES || n > PAYLOAD_MAX) return 0;
    if (memcmp(payload, payload_magic, sizeof payload_magic) != 0) return 0;
    size_t at = sizeof payload_magic;
    int64_t expires_at = big_endian64(payload + at);
    int64_t last_refresh = big_endian64(payload + at + 8);
    int64_t stored_at = big_endian64(payload + at + 16);
    at += 8 * PAYLOAD_TIMES;
    size_t first_at = 0, first_length = 0;
    for (int f = 0; f < PAYLOAD_FIELDS; f++) {
        if (at + 2 > n) return 0;
        size_t length = (size_t)payload[at] << 8 | payload[at + 1];
        at += 2;
        if (at + length > n || !valid_utf8(payload + at, length)) return 0;
        if (f == 0) { first_at = at; first_length = length; }
        if (f == PAYLOAD_STORE_VERSION && (length != strlen(store_version) || memcmp(payload + at, store_version, length) != 0))
            return 0;
        at += length;
    }
    if (at != n || first_length == 0) return 0;
    /* GetFormatter.safe (Sanitize.isTokenSafe): printable ASCII without spaces, else the Swift
     * path's error. */
    for (size_t i = 0; i < first_length; i++)
        if (payload[first_at + i] <= 0x20 || payload[first_at + i] >= 0x7F) return 0;

    struct timespec now_ts;
    clock_gettime(CLOCK_REALTIME, &now_ts);
    int64_t now = (int64_t)now_ts.tv_sec, remaining;
    if (__builtin_sub_overflow(expires_at, now, &remaining) || remaining < min_ttl) return 0;
    /* CredentialTimes.isIdle: 8 days after the last refresh (else after the store), added with
     * wrap-around as Swift's &+ does. */
    int64_t since = last_refresh > 0 ? last_refresh : (stored_at > 0 ? stored_at : 0);
    if (since > 0 && now >= (int64_t)((uint64_t)since + IDLE_REFRESH_INTERVAL)) return 0;
    *token_at = first_at;
    *token_length = first_length;
    return 1;
}

/* ---- the two answers ---------------------------------------------------------------------- */

/* Every byte written, or exit 1 with the Swift path's message for it (main.swift,
 * StandardConsole.out). SIGPIPE is ignored first, as the Swift path does, so a closed pipe is
 * that message rather than a kill. */
static void write_answer_or_exit(struct iovec *parts, int count, unsigned char *wipe, size_t wipe_length) {
    signal(SIGPIPE, SIG_IGN);
    while (count > 0) {
        ssize_t n = writev(1, parts, count);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            if (wipe) explicit_bzero(wipe, wipe_length);
            dprintf(2, "%s: cannot write to standard output: %s\n", CW_PROGRAM, strerror(e));
            _exit(1);
        }
        while (count > 0 && (size_t)n >= parts->iov_len) {
            n -= (ssize_t)parts->iov_len;
            parts++;
            count--;
        }
        if (count > 0) {
            parts->iov_base = (char *)parts->iov_base + n;
            parts->iov_len -= (size_t)n;
        }
    }
    if (wipe) explicit_bzero(wipe, wipe_length);
    _exit(0);
}

/* GetCommand's `--min-ttl`: seconds from 0 to 31622400, here in plain decimal digits only (the
 * Swift path also reads a sign); -1 declines. */
static int64_t min_ttl_option(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 8) return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return -1;
    long v = strtol(s, NULL, 10);
    return v <= 366L * 86400 ? v : -1;
}

/* `get` with no format option: the profile's entry for the store `get` would read, printed when
 * it is valid for `min_ttl` more seconds (max(300, --min-ttl)). Returns (declines) in every other case. */
static void answer_get(const char *profile_flag, const char *store_flag, int64_t min_ttl, char **envp) {
    /* Settings(environment:) and Runner.run: anything that is an error, turns the cache off,
     * asks for the broker or for diagnostics, or names an issuer the Swift path must check first. */
    const char *profile_variable, *store_variable, *cache = variable(envp, "CHATGPT_CREDENTIAL_CACHE");
    if (!settings_accepted(envp, &profile_variable, &store_variable) || (cache && strcmp(cache, "on") != 0) ||
        variable(envp, "CHATGPT_CREDENTIAL_BROKER") || variable(envp, "CHATGPT_CREDENTIAL_ISSUER"))
        return;

    const char *profile = profile_flag ? profile_flag : profile_variable ? profile_variable : "default";
    const char *store_name = store_flag ? store_flag : store_variable ? store_variable : "auto";
    enum store_choice choice = store_choice(store_name);
    if (!valid_profile(profile) || choice == STORE_INVALID) return;

    /* UserNamespace.isInitial: the cache is only for the first user namespace. */
    struct stat st;
    if (stat("/proc/self/ns/user", &st) != 0 || st.st_ino != 0xEFFFFFFDu) return;

    const char *home = variable(envp, "HOME");
    const char *data_home = variable(envp, "XDG_DATA_HOME");
    const char *config_home = variable(envp, "XDG_CONFIG_HOME");
    /* Settings.fromCurrentDirectory: a relative one is the Swift path's. */
    if ((data_home && data_home[0] != '/') || (config_home && config_home[0] != '/')) return;
    for (const char *v[] = {home, data_home, config_home}, **q = v; q < v + 3; q++)
        if (*q && !valid_utf8_string(*q)) return;
    struct text data_directory = {.length = 0}, encrypted = {.length = 0};
    int have_data = tool_directory(&data_directory, data_home, home, "/.local/share");
    if (have_data) {
        text_append(&encrypted, data_directory.bytes);
        text_append(&encrypted, "/");
        text_append(&encrypted, profile);
        text_append(&encrypted, ".age");
        if (encrypted.overflowed) return;
    }
    /* StoreSelector.readKind: under auto, the file store when its file exists (one lstat). */
    int file_kind = choice == STORE_FILE || (choice == STORE_AUTO && have_data && lstat(encrypted.bytes, &st) == 0);

    /* StoreIdentity and its key description. */
    struct text description = {.length = 0};
    text_append(&description, CW_PROGRAM ":v2:");
    text_append(&description, profile);
    if (file_kind) {
        if (!have_data) return;
        /* StoreIdentity.file(normalising:): the real path of the directory, then the name. */
        char *real = realpath(data_directory.bytes, NULL);
        if (!real) return;
        int usable = valid_utf8_string(real);
        text_append(&description, ":file:");
        if (strcmp(real, "/") != 0) text_append(&description, real);
        free(real);
        if (!usable) return;
        text_append(&description, "/");
        text_append(&description, profile);
        text_append(&description, ".age");
    } else {
        struct text address = {.length = 0}, normalised = {.length = 0};
        if (!session_bus_address(envp, &address) || !normalised_bus(address.bytes, &normalised)) return;
        text_append(&description, ":secret-service:");
        text_append(&description, normalised.bytes);
    }
    if (description.overflowed) return;
    for (size_t i = 0; i < description.length; i++) {
        unsigned char c = (unsigned char)description.bytes[i];
        if (c < 0x20 || c == 0x7F) return;
    }

    /* AgeFileStore.versionPassingReadChecks: the checks a store read makes before decrypting,
     * and the file's version (AgeFileStore.version(of:)); the Secret Service's is empty. */
    char store_version[128] = "";
    if (file_kind) {
        struct stat file;
        if (check_directory(data_directory.bytes) != 1 || check_file(encrypted.bytes, &file) != 1) return;
        int v = snprintf(store_version, sizeof store_version, "%ju:%ju:%jd:%jd.%ld", (uintmax_t)file.st_dev,
                         (uintmax_t)file.st_ino, (intmax_t)file.st_size, (intmax_t)file.st_mtim.tv_sec, (long)file.st_mtim.tv_nsec);
        if (v < 0 || (size_t)v >= sizeof store_version) return;
        struct text config_directory = {.length = 0}, identity = {.length = 0};
        if (tool_directory(&config_directory, config_home, home, "/.config")) {
            text_append(&identity, config_directory.bytes);
            text_append(&identity, "/identity");
            if (identity.overflowed) return;
            int directory = check_directory(config_directory.bytes);
            if (directory < 0 || (directory == 1 && check_file(identity.bytes, NULL) < 0)) return;
        } else if (config_directory.overflowed) {
            return;
        }
    }

    int32_t key = ckeyring_search(KEY_SPEC_USER_KEYRING, "user", description.bytes);
    if (key < 0 || !entry_is_as_written(key, description.bytes)) return;

    /* From here the process holds a secret: no core dump may hold it (main.swift does the same;
     * cs_harden_process keeps the limit it found first, for `exec`'s child). */
    cs_harden_process();
    /* KeyringCache.read's first guess; a larger entry is the Swift path's. Only the bytes the
     * kernel wrote are wiped, so the pages past them are never touched. */
    unsigned char payload[PAYLOAD_FIRST_READ];
    long n = ckeyring_read(key, payload, sizeof payload);
    size_t written = n < 0 ? 0 : (size_t)n < sizeof payload ? (size_t)n : sizeof payload, at, length;
    if (n < 0 || (size_t)n > sizeof payload || !fresh_access_token(payload, (size_t)n, store_version, min_ttl, &at, &length)) {
        explicit_bzero(payload, written);
        return;
    }
    struct iovec parts[2] = {{payload + at, length}, {"\n", 1}};
    write_answer_or_exit(parts, 2, payload, written);
}

/* ---- client mode ------------------------------------------------------------------------- */

/* A `get` asked of the broker (man page BROKER, Client mode) that the Swift path takes over once
 * the request is sent (BrokerClient.get): the connected socket, how much of the request went out,
 * and the deadline that began before connecting. No secret is in it: the answer stays unread in
 * the socket (it is only peeked at here), and the Swift path reads it from the start. */
static struct {
    int taken;
    int fd;
    size_t sent;
    int64_t deadline_ms;
    char path[108];
    char target[160];
} handoff = {.taken = 1, .fd = -1};

int cw_take_broker_handoff(struct cw_broker_handoff *out) {
    if (handoff.taken) return 0;
    handoff.taken = 1;
    out->fd = handoff.fd;
    out->request_bytes_sent = (long)handoff.sent;
    out->deadline_ms = handoff.deadline_ms;
    out->path = handoff.path;
    out->target = handoff.target;
    return 1;
}

enum {
    BROKER_TIMEOUT_MS = 10000, /* BrokerClient.defaultTimeout */
    BROKER_PATH_MAX = 107,     /* BrokerAddress.maxPathBytes */
    ANSWER_PEEK = 8192,
    MEMBERS_MAX = 32
};

/* BrokerAddress.parse: `unix:` and an absolute path of at most 107 bytes, here of printable ASCII
 * only (Sanitize.line leaves those as they are); 0 declines. */
static int broker_path(const char *value, const char **path) {
    if (strncmp(value, "unix:/", 6) != 0) return 0;
    size_t n = strlen(value + 5);
    if (n > BROKER_PATH_MAX) return 0;
    for (const char *p = value + 5; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7E) return 0;
    *path = value + 5;
    return 1;
}

/* BrokerClient.checkDirectory, the passing case only: the real directory the socket is in is a
 * directory of this user or root that group and others cannot write. Anything else declines
 * (the Swift path refuses, or connects where this path would not know what it reached). */
static int socket_directory_passes(const char *path) {
    char parent[BROKER_PATH_MAX + 1];
    const char *slash = strrchr(path, '/');
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(parent, path, n);
    parent[n] = 0;
    char *real = realpath(parent, NULL);
    if (!real) return 0;
    struct stat st;
    int ok = lstat(real, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == geteuid() || st.st_uid == 0) &&
             (st.st_mode & 022) == 0;
    free(real);
    return ok;
}

static int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int ascii_prefix_nocase(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c != prefix[i]) return 0;
    }
    return 1;
}

/* BrokerClient.parseAnswer for the one answer printed here: a complete `HTTP/1.1 200` answer
 * whose head is printable ASCII, with one `Content-Length` of plain digits and no
 * `Transfer-Encoding`. The body's range within `raw`; 0 for anything else. */
static int complete_200_body(const unsigned char *raw, size_t n, size_t *body_at, size_t *body_length) {
    size_t end = 0;
    for (size_t i = 0; i + 4 <= n; i++)
        if (raw[i] == '\r' && raw[i + 1] == '\n' && raw[i + 2] == '\r' && raw[i + 3] == '\n') { end = i + 4; break; }
    if (end == 0) return 0;
    const char *head = (const char *)raw;
    if (!(end >= 16 && memcmp(head, "HTTP/1.1 200", 12) == 0 && (head[12] == ' ' || head[12] == '\r'))) return 0;
    long long length = -1;
    size_t line = 0;
    while (line < end - 4) {
        size_t stop = line;
        while (stop < end - 4 && !(raw[stop] == '\r' && raw[stop + 1] == '\n')) {
            if (raw[stop] < 0x20 || raw[stop] > 0x7E) return 0;
            stop++;
        }
        if (line > 0) {
            if (ascii_prefix_nocase(head + line, stop - line, "transfer-encoding:")) return 0;
            if (ascii_prefix_nocase(head + line, stop - line, "content-length:")) {
                if (length >= 0) return 0;
                size_t v = line + 15;
                while (v < stop && raw[v] == ' ') v++;
                if (v == stop || stop - v > 12) return 0;
                length = 0;
                for (; v < stop; v++) {
                    if (raw[v] < '0' || raw[v] > '9') return 0;
                    length = length * 10 + (raw[v] - '0');
                }
            }
        }
        line = stop + 2;
    }
    if (length < 0 || (size_t)length > n - end) return 0;
    *body_at = end;
    *body_length = (size_t)length;
    return 1;
}

struct member { size_t key_at, key_length, value_at, value_length; int is_string; };

/* The string opening at b[*i] when it is printable ASCII without an escape: its contents' range,
 * and *i past its closing quote; 0 otherwise. */
static int plain_string(const unsigned char *b, size_t n, size_t *i, size_t *at, size_t *length) {
    size_t k = *i + 1;
    while (k < n && b[k] != '"') {
        if (b[k] < 0x20 || b[k] > 0x7E || b[k] == '\\') return 0;
        k++;
    }
    if (k >= n) return 0;
    *at = *i + 1;
    *length = k - *at;
    *i = k + 1;
    return 1;
}

/* JSON.parse for a flat object only: string members without escapes, control bytes or
 * non-ASCII, integers of at most 15 digits, true, false, null; no key twice. Anything else (a
 * nested value, an escape, a fraction) declines: the Swift parser decides it. */
static int flat_object(const unsigned char *b, size_t n, struct member *members, int *count) {
    size_t i = 0;
    *count = 0;
    while (i < n && is_space(b[i])) i++;
    if (i >= n || b[i++] != '{') return 0;
    while (i < n && is_space(b[i])) i++;
    if (i < n && b[i] == '}') { i++; goto trailing; }
    for (;;) {
        if (*count == MEMBERS_MAX) return 0;
        struct member *m = &members[*count];
        while (i < n && is_space(b[i])) i++;
        if (i >= n || b[i] != '"' || !plain_string(b, n, &i, &m->key_at, &m->key_length)) return 0;
        for (int k = 0; k < *count; k++)
            if (members[k].key_length == m->key_length && memcmp(b + members[k].key_at, b + m->key_at, m->key_length) == 0) return 0;
        while (i < n && is_space(b[i])) i++;
        if (i >= n || b[i++] != ':') return 0;
        while (i < n && is_space(b[i])) i++;
        if (i >= n) return 0;
        m->is_string = b[i] == '"';
        if (m->is_string) {
            if (!plain_string(b, n, &i, &m->value_at, &m->value_length)) return 0;
        } else if (b[i] == '-' || (b[i] >= '0' && b[i] <= '9')) {
            m->value_at = i;
            if (b[i] == '-') i++;
            if (i >= n) return 0;
            if (b[i] == '0') i++;
            else if (b[i] >= '1' && b[i] <= '9') while (i < n && b[i] >= '0' && b[i] <= '9') i++;
            else return 0;
            m->value_length = i - m->value_at;
            if (m->value_length > 15 || (i < n && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'))) return 0;
        } else {
            static const char *const words[] = {"true", "false", "null"};
            size_t k = 0;
            while (k < 3 && !(n - i >= strlen(words[k]) && memcmp(b + i, words[k], strlen(words[k])) == 0)) k++;
            if (k == 3) return 0;
            m->value_at = i;
            m->value_length = strlen(words[k]);
            i += m->value_length;
        }
        (*count)++;
        while (i < n && is_space(b[i])) i++;
        if (i >= n) return 0;
        if (b[i] == ',') { i++; continue; }
        if (b[i] == '}') { i++; break; }
        return 0;
    }
trailing:
    while (i < n && is_space(b[i])) i++;
    return i == n;
}

static const struct member *find_member(const unsigned char *b, const struct member *members, int count, const char *key) {
    for (int k = 0; k < count; k++)
        if (members[k].key_length == strlen(key) && memcmp(b + members[k].key_at, key, members[k].key_length) == 0)
            return &members[k];
    return NULL;
}

/* Clock.parseRFC3339 for the one form the broker writes (Clock.rfc3339): YYYY-MM-DDTHH:MM:SSZ,
 * with the Swift function's ranges and its days-from-civil arithmetic; 0 declines. */
static int rfc3339_utc(const unsigned char *s, size_t n, int64_t *out) {
    if (n != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z') return 0;
    static const int at[] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        if (s[at[k]] < '0' || s[at[k]] > '9') return 0;
#define D(i) ((int64_t)(s[i] - '0'))
    int64_t y = D(0) * 1000 + D(1) * 100 + D(2) * 10 + D(3), mo = D(5) * 10 + D(6), d = D(8) * 10 + D(9);
    int64_t h = D(11) * 10 + D(12), mi = D(14) * 10 + D(15), sec = D(17) * 10 + D(18);
#undef D
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h >= 24 || mi >= 60 || sec >= 61) return 0;
    int64_t yy = mo <= 2 ? y - 1 : y;
    int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
    int64_t yoe = yy - era * 400;
    int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    *out = (era * 146097 + doe - 719468) * 86400 + h * 3600 + mi * 60 + sec;
    return 1;
}

/* Runner.getThroughBroker and brokerToken for the answer printed here: a 200 whose object has
 * a non-empty access token a bearer header can carry (GetFormatter.safe), a string account id
 * and an expiry after now — and, with --min-ttl, at least that many seconds ahead (else the
 * Swift path prints its notice). The token's range within `raw`; 0 for anything else. */
static int printable_token_answer(const unsigned char *raw, size_t n, int64_t required_ttl, size_t *token_at, size_t *token_length) {
    size_t body_at, body_length;
    if (!complete_200_body(raw, n, &body_at, &body_length)) return 0;
    const unsigned char *body = raw + body_at;
    struct member members[MEMBERS_MAX];
    int count;
    if (!flat_object(body, body_length, members, &count)) return 0;
    const struct member *access = find_member(body, members, count, "access_token");
    const struct member *account = find_member(body, members, count, "account_id");
    const struct member *expires = find_member(body, members, count, "expires_at");
    if (!access || !access->is_string || access->value_length == 0 || !account || !account->is_string || !expires ||
        !expires->is_string)
        return 0;
    for (size_t i = 0; i < access->value_length; i++)
        if (body[access->value_at + i] <= 0x20 || body[access->value_at + i] >= 0x7F) return 0;
    int64_t expires_at;
    if (!rfc3339_utc(body + expires->value_at, expires->value_length, &expires_at)) return 0;
    struct timespec now_ts;
    clock_gettime(CLOCK_REALTIME, &now_ts);
    int64_t now = (int64_t)now_ts.tv_sec;
    if (expires_at <= now || (required_ttl >= 0 && expires_at - now < required_ttl)) return 0;
    *token_at = body_at + access->value_at;
    *token_length = access->value_length;
    return 1;
}

/* `get` in client mode: the request is sent here; a complete 200 answer of the kind above is
 * printed; anything else after the request went out is handed to the Swift path with the socket
 * (cw_take_broker_handoff), so no request is ever made twice. Before it went out, every failure
 * declines and the Swift path starts afresh (it connects and reports as always). */
static void answer_get_through_broker(const char *profile_flag, const char *path, int64_t required_ttl, char **envp) {
    const char *profile_variable, *store_variable;
    if (!settings_accepted(envp, &profile_variable, &store_variable)) return;
    const char *profile = profile_flag ? profile_flag : profile_variable ? profile_variable : "default";
    if (!valid_profile(profile) || !socket_directory_passes(path)) return;

    /* BrokerClient.token and get: the target, then the request as the Swift path writes it. */
    char target[sizeof handoff.target];
    int t = required_ttl >= 0 ? snprintf(target, sizeof target, "/v1/token?profile=%s&min_ttl=%lld", profile, (long long)required_ttl)
                              : snprintf(target, sizeof target, "/v1/token?profile=%s", profile);
    char request[sizeof target + 128];
    int r = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: chatgpt-credential\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
                     target);
    if (t < 0 || (size_t)t >= sizeof target || r < 0 || (size_t)r >= sizeof request) return;

    cs_harden_process(); /* the answer carries a token */
    int64_t deadline = monotonic_ms() + BROKER_TIMEOUT_MS;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path));
    /* Connected at once, or declined with nothing sent (a full backlog, a missing socket: the
     * Swift path waits or reports). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return; }
    ssize_t sent = send(fd, request, (size_t)r, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent <= 0) { close(fd); return; }

    handoff.fd = fd;
    handoff.sent = (size_t)sent;
    handoff.deadline_ms = deadline;
    memcpy(handoff.path, path, strlen(path) + 1);
    memcpy(handoff.target, target, (size_t)t + 1);
    handoff.taken = 0;
    if (sent != r) return;

    /* One wait for the answer (the broker sends head and body in one sendmsg), one look at it. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready;
    do {
        int64_t left = deadline - monotonic_ms();
        if (left <= 0) return;
        ready = poll(&p, 1, (int)left);
    } while (ready < 0 && errno == EINTR);
    if (ready != 1) return;
    unsigned char answer[ANSWER_PEEK];
    ssize_t n = recv(fd, answer, sizeof answer, MSG_PEEK | MSG_DONTWAIT);
    size_t seen = n > 0 ? (size_t)n : 0, at, length;
    if (n <= 0 || !printable_token_answer(answer, seen, required_ttl, &at, &length)) {
        explicit_bzero(answer, seen);
        return;
    }
    struct iovec parts[2] = {{answer + at, length}, {"\n", 1}};
    write_answer_or_exit(parts, 2, answer, seen);
}

/* glibc calls the executable's .preinit_array functions with (argc, argv, envp) before any
 * initialiser, its own libraries' aside (csu/libc-start.c, elf/dl-init.c). */
static void warm_path(int argc, char **argv, char **envp) {
    if (argc < 2 || !argv || !argv[0]) return;
    /* ArgumentParser: under a helper's name (git-credential-*, docker-credential-*) `get` is that
     * protocol's verb, which reads a request on stdin. Declined wherever the name appears in
     * argv[0], a superset of the Swift rule (its last path component's prefix). */
    if (strstr(argv[0], "git-credential-") || strstr(argv[0], "docker-credential-")) return;
    /* main.swift: a standard descriptor the caller closed is the Swift path's to handle. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1) return;

    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        static char line[] = CW_PROGRAM " " CW_VERSION "\n";
        struct iovec part = {line, sizeof line - 1};
        write_answer_or_exit(&part, 1, NULL, 0);
    }

    /* ArgumentParser: `[--profile NAME] [--store STORE] get [--min-ttl SECONDS]`, each option at
     * most once and in its two-word form; anything else is the Swift path's. */
    const char *profile = NULL, *store = NULL, *broker = NULL;
    int i = 1;
    while (i + 1 < argc) {
        if (strcmp(argv[i], "--profile") == 0 && !profile) profile = argv[i + 1];
        else if (strcmp(argv[i], "--store") == 0 && !store) store = argv[i + 1];
        else if (strcmp(argv[i], "--broker") == 0 && !broker) broker = argv[i + 1];
        else break;
        i += 2;
    }
    if (i >= argc || strcmp(argv[i], "get") != 0) return;
    int64_t requested = -1;
    if (i + 3 == argc && strcmp(argv[i + 1], "--min-ttl") == 0) {
        requested = min_ttl_option(argv[i + 2]);
        if (requested < 0) return;
    } else if (i + 1 != argc) {
        return;
    }
    /* Client mode: `--broker`, else CHATGPT_CREDENTIAL_BROKER (which must be valid either way). */
    const char *broker_variable = variable(envp, "CHATGPT_CREDENTIAL_BROKER"), *path = NULL;
    if (broker_variable && !broker_path(broker_variable, &path)) return;
    if (broker || broker_variable) {
        if (store || (broker && !broker_path(broker, &path))) return;
        answer_get_through_broker(profile, path, requested, envp);
        return;
    }
    answer_get(profile, store, requested > REFRESH_MARGIN ? requested : REFRESH_MARGIN, envp);
}

__attribute__((section(".preinit_array"), used))
static void (*const warm_path_entry)(int, char **, char **) = warm_path;
