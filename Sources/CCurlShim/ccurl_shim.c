#define _GNU_SOURCE
#include "ccurl_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The few libcurl ABI values we use. They have been stable since libcurl 7.16 (soname 4). When the
 * development headers are present they are checked against them at compile time. */
typedef void ccurl_handle;
typedef int ccurl_code;
struct curl_slist;
typedef int64_t ccurl_off_t;

#define C_OPT_WRITEDATA 10001
#define C_OPT_URL 10002
#define C_OPT_PROXY 10004
#define C_OPT_ERRORBUFFER 10010
#define C_OPT_WRITEFUNCTION 20011
#define C_OPT_POSTFIELDS 10015
#define C_OPT_USERAGENT 10018
#define C_OPT_HTTPHEADER 10023
#define C_OPT_HEADERDATA 10029
#define C_OPT_CUSTOMREQUEST 10036
#define C_OPT_NOBODY 44
#define C_OPT_POST 47
#define C_OPT_FOLLOWLOCATION 52
#define C_OPT_SSL_VERIFYPEER 64
#define C_OPT_HEADERFUNCTION 20079
#define C_OPT_HTTPGET 80
#define C_OPT_SSL_VERIFYHOST 81
#define C_OPT_NOSIGNAL 99
#define C_OPT_MAXFILESIZE_LARGE 30117
#define C_OPT_POSTFIELDSIZE_LARGE 30120
#define C_OPT_TIMEOUT_MS 155
#define C_OPT_CONNECTTIMEOUT_MS 156
#define C_OPT_PROTOCOLS 181
#define C_OPT_PROTOCOLS_STR 10318
#define C_INFO_RESPONSE_CODE 0x200002
#define C_GLOBAL_DEFAULT 3L
#define C_PROTO_HTTP 1L
#define C_PROTO_HTTPS 2L

#define C_E_OK 0
#define C_E_UNSUPPORTED_PROTOCOL 1
#define C_E_COULDNT_RESOLVE_PROXY 5
#define C_E_COULDNT_RESOLVE_HOST 6
#define C_E_COULDNT_CONNECT 7
#define C_E_WEIRD_SERVER_REPLY 8
#define C_E_HTTP2 16
#define C_E_PARTIAL_FILE 18
#define C_E_WRITE_ERROR 23
#define C_E_OPERATION_TIMEDOUT 28
#define C_E_SSL_CONNECT_ERROR 35
#define C_E_ABORTED_BY_CALLBACK 42
#define C_E_GOT_NOTHING 52
#define C_E_SEND_ERROR 55
#define C_E_RECV_ERROR 56
#define C_E_SSL_CERTPROBLEM 58
#define C_E_SSL_CIPHER 59
#define C_E_PEER_FAILED_VERIFICATION 60
#define C_E_FILESIZE_EXCEEDED 63
#define C_E_SSL_CACERT_BADFILE 77
#define C_E_SSL_SHUTDOWN_FAILED 80
#define C_E_SSL_CRL_BADFILE 82
#define C_E_SSL_ISSUER_ERROR 83
#define C_E_SSL_PINNEDPUBKEYNOTMATCH 90
#define C_E_SSL_INVALIDCERTSTATUS 91
#define C_E_HTTP2_STREAM 92
#define C_E_PROXY 97
#define C_ERROR_SIZE 256

#if defined(__has_include)
#if __has_include(<curl/curl.h>)
#define CURL_DISABLE_TYPECHECK 1
#define CURL_NO_OLDIES 1
#include <curl/curl.h>
_Static_assert(C_OPT_WRITEDATA == CURLOPT_WRITEDATA, "curl ABI");
_Static_assert(C_OPT_URL == CURLOPT_URL, "curl ABI");
_Static_assert(C_OPT_PROXY == CURLOPT_PROXY, "curl ABI");
_Static_assert(C_OPT_ERRORBUFFER == CURLOPT_ERRORBUFFER, "curl ABI");
_Static_assert(C_OPT_WRITEFUNCTION == CURLOPT_WRITEFUNCTION, "curl ABI");
_Static_assert(C_OPT_POSTFIELDS == CURLOPT_POSTFIELDS, "curl ABI");
_Static_assert(C_OPT_USERAGENT == CURLOPT_USERAGENT, "curl ABI");
_Static_assert(C_OPT_HTTPHEADER == CURLOPT_HTTPHEADER, "curl ABI");
_Static_assert(C_OPT_HEADERDATA == CURLOPT_HEADERDATA, "curl ABI");
_Static_assert(C_OPT_CUSTOMREQUEST == CURLOPT_CUSTOMREQUEST, "curl ABI");
_Static_assert(C_OPT_NOBODY == CURLOPT_NOBODY, "curl ABI");
_Static_assert(C_OPT_POST == CURLOPT_POST, "curl ABI");
_Static_assert(C_OPT_FOLLOWLOCATION == CURLOPT_FOLLOWLOCATION, "curl ABI");
_Static_assert(C_OPT_SSL_VERIFYPEER == CURLOPT_SSL_VERIFYPEER, "curl ABI");
_Static_assert(C_OPT_HEADERFUNCTION == CURLOPT_HEADERFUNCTION, "curl ABI");
_Static_assert(C_OPT_HTTPGET == CURLOPT_HTTPGET, "curl ABI");
_Static_assert(C_OPT_SSL_VERIFYHOST == CURLOPT_SSL_VERIFYHOST, "curl ABI");
_Static_assert(C_OPT_NOSIGNAL == CURLOPT_NOSIGNAL, "curl ABI");
_Static_assert(C_OPT_MAXFILESIZE_LARGE == CURLOPT_MAXFILESIZE_LARGE, "curl ABI");
_Static_assert(C_OPT_POSTFIELDSIZE_LARGE == CURLOPT_POSTFIELDSIZE_LARGE, "curl ABI");
_Static_assert(C_OPT_TIMEOUT_MS == CURLOPT_TIMEOUT_MS, "curl ABI");
_Static_assert(C_OPT_CONNECTTIMEOUT_MS == CURLOPT_CONNECTTIMEOUT_MS, "curl ABI");
_Static_assert(C_OPT_PROTOCOLS == CURLOPT_PROTOCOLS, "curl ABI");
#if LIBCURL_VERSION_NUM >= 0x075500
_Static_assert(C_OPT_PROTOCOLS_STR == CURLOPT_PROTOCOLS_STR, "curl ABI");
#endif
_Static_assert(C_INFO_RESPONSE_CODE == CURLINFO_RESPONSE_CODE, "curl ABI");
_Static_assert(C_GLOBAL_DEFAULT == CURL_GLOBAL_DEFAULT, "curl ABI");
_Static_assert(C_E_COULDNT_CONNECT == (int)CURLE_COULDNT_CONNECT, "curl ABI");
_Static_assert(C_E_WRITE_ERROR == CURLE_WRITE_ERROR, "curl ABI");
_Static_assert(C_E_OPERATION_TIMEDOUT == CURLE_OPERATION_TIMEDOUT, "curl ABI");
_Static_assert(C_E_SSL_CONNECT_ERROR == CURLE_SSL_CONNECT_ERROR, "curl ABI");
_Static_assert(C_E_ABORTED_BY_CALLBACK == CURLE_ABORTED_BY_CALLBACK, "curl ABI");
_Static_assert(C_E_PEER_FAILED_VERIFICATION == CURLE_PEER_FAILED_VERIFICATION, "curl ABI");
_Static_assert(C_E_FILESIZE_EXCEEDED == CURLE_FILESIZE_EXCEEDED, "curl ABI");
_Static_assert(C_E_PROXY == CURLE_PROXY, "curl ABI");
_Static_assert(C_ERROR_SIZE == CURL_ERROR_SIZE, "curl ABI");
#endif
#endif

typedef size_t (*ccurl_write_cb)(char *, size_t, size_t, void *);

static struct {
    ccurl_code (*global_init)(long);
    ccurl_handle *(*easy_init)(void);
    ccurl_code (*easy_setopt)(ccurl_handle *, int, ...);
    ccurl_code (*easy_perform)(ccurl_handle *);
    ccurl_code (*easy_getinfo)(ccurl_handle *, int, ...);
    void (*easy_cleanup)(ccurl_handle *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    const char *(*easy_strerror)(ccurl_code);
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded = 0;
static char load_error[200];

static void load_libcurl(void) {
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "cannot load libcurl.so.4 (install libcurl4)");
        return;
    }
#define SYM(field, name)                                                                   \
    do {                                                                                   \
        *(void **)(&api.field) = dlsym(h, name);                                           \
        if (!api.field) {                                                                  \
            snprintf(load_error, sizeof load_error, "libcurl.so.4 lacks %s", name);        \
            return;                                                                        \
        }                                                                                  \
    } while (0)
    SYM(global_init, "curl_global_init");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
    SYM(easy_strerror, "curl_easy_strerror");
#undef SYM
    if (api.global_init(C_GLOBAL_DEFAULT) != C_E_OK) {
        snprintf(load_error, sizeof load_error, "libcurl failed to initialise");
        return;
    }
    loaded = 1; /* published by pthread_once */
}

int ccurl_is_loaded(void) { return loaded; }

typedef struct sink {
    unsigned char *data;
    size_t length;
    size_t capacity;
    size_t limit;
    size_t header_bytes;
    int too_large;
    char *retry_after;
    char *content_type;
    char *location;
} sink;

static size_t write_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
    sink *s = (sink *)userdata;
    size_t n = size * nmemb;
    if (n > s->limit - s->length) { /* length <= limit always holds */
        s->too_large = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (s->length + n > s->capacity) {
        size_t cap = s->capacity ? s->capacity : 16384;
        while (cap < s->length + n) cap *= 2;
        if (cap > s->limit) cap = s->limit;
        unsigned char *grown = realloc(s->data, cap ? cap : 1);
        if (!grown) return 0;
        s->data = grown;
        s->capacity = cap;
    }
    if (n) memcpy(s->data + s->length, ptr, n);
    s->length += n;
    return n;
}

/* Copies a header's value (after "Name:"), trimmed; NULL when it does not match. */
static char *header_value(const char *line, size_t len, const char *name) {
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0) return NULL;
    size_t a = nl + 1, b = len;
    while (a < b && (line[a] == ' ' || line[a] == '\t')) a++;
    while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ' || line[b - 1] == '\t')) b--;
    if (b - a > 4096) b = a + 4096;
    char *v = malloc(b - a + 1);
    if (!v) return NULL;
    memcpy(v, line + a, b - a);
    v[b - a] = 0;
    return v;
}

static size_t write_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
    sink *s = (sink *)userdata;
    size_t n = size * nmemb;
    s->header_bytes += n;
    if (s->header_bytes > 64 * 1024) {
        s->too_large = 1;
        return 0;
    }
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue or a proxy's CONNECT): forget earlier headers. */
        free(s->retry_after);
        s->retry_after = NULL;
        free(s->content_type);
        s->content_type = NULL;
        free(s->location);
        s->location = NULL;
        return n;
    }
    char *v;
    if ((v = header_value(ptr, n, "Retry-After"))) {
        free(s->retry_after);
        s->retry_after = v;
    } else if ((v = header_value(ptr, n, "Content-Type"))) {
        free(s->content_type);
        s->content_type = v;
    } else if ((v = header_value(ptr, n, "Location"))) {
        free(s->location);
        s->location = v;
    }
    return n;
}

static int classify(ccurl_code rc, const sink *s) {
    if (s->too_large) return CCURL_ERR_TOO_LARGE;
    switch (rc) {
    case C_E_OK: return CCURL_OK;
    case C_E_OPERATION_TIMEDOUT: return CCURL_ERR_TIMEOUT;
    case C_E_FILESIZE_EXCEEDED: return CCURL_ERR_TOO_LARGE;
    case C_E_COULDNT_RESOLVE_PROXY:
    case C_E_COULDNT_RESOLVE_HOST:
    case C_E_COULDNT_CONNECT:
    case C_E_PROXY: return CCURL_ERR_CONNECT;
    case C_E_SSL_CONNECT_ERROR:
    case C_E_SSL_CERTPROBLEM:
    case C_E_SSL_CIPHER:
    case C_E_PEER_FAILED_VERIFICATION:
    case C_E_SSL_CACERT_BADFILE:
    case C_E_SSL_SHUTDOWN_FAILED:
    case C_E_SSL_CRL_BADFILE:
    case C_E_SSL_ISSUER_ERROR:
    case C_E_SSL_PINNEDPUBKEYNOTMATCH:
    case C_E_SSL_INVALIDCERTSTATUS: return CCURL_ERR_TLS;
    case C_E_WEIRD_SERVER_REPLY:
    case C_E_HTTP2:
    case C_E_PARTIAL_FILE:
    case C_E_GOT_NOTHING:
    case C_E_SEND_ERROR:
    case C_E_RECV_ERROR:
    case C_E_HTTP2_STREAM: return CCURL_ERR_NETWORK;
    default: return CCURL_ERR_OTHER;
    }
}

static int fail(ccurl_response *r, int kind, const char *message) {
    r->error_kind = kind;
    snprintf(r->error_message, sizeof r->error_message, "%s", message);
    return kind;
}

int ccurl_perform(const ccurl_request *req, ccurl_response *resp) {
    memset(resp, 0, sizeof *resp);
    pthread_once(&load_once, load_libcurl);
    if (!loaded) return fail(resp, CCURL_ERR_UNAVAILABLE, load_error);
    if (!req || !req->url || !req->method) return fail(resp, CCURL_ERR_OTHER, "incomplete request");

    ccurl_handle *h = api.easy_init();
    if (!h) return fail(resp, CCURL_ERR_OTHER, "curl_easy_init failed");

    sink s = {0};
    s.limit = req->max_response_bytes;
    char errbuf[C_ERROR_SIZE];
    errbuf[0] = 0;
    struct curl_slist *headers = NULL;
    int ok = 1;

    /* Every option below is long, pointer or curl_off_t, passed exactly as libcurl reads it. */
    ok &= api.easy_setopt(h, C_OPT_ERRORBUFFER, errbuf) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_URL, req->url) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_NOSIGNAL, 1L) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_FOLLOWLOCATION, 0L) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_SSL_VERIFYPEER, 1L) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_SSL_VERIFYHOST, 2L) == C_E_OK;
    if (api.easy_setopt(h, C_OPT_PROTOCOLS_STR, "http,https") != C_E_OK) {
        ok &= api.easy_setopt(h, C_OPT_PROTOCOLS, C_PROTO_HTTP | C_PROTO_HTTPS) == C_E_OK;
    }
    ok &= api.easy_setopt(h, C_OPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_TIMEOUT_MS, req->total_timeout_ms > 0 ? req->total_timeout_ms : 30000L) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_MAXFILESIZE_LARGE, (ccurl_off_t)req->max_response_bytes) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_WRITEFUNCTION, (ccurl_write_cb)write_body) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_WRITEDATA, (void *)&s) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_HEADERFUNCTION, (ccurl_write_cb)write_header) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_HEADERDATA, (void *)&s) == C_E_OK;
    ok &= api.easy_setopt(h, C_OPT_USERAGENT, "chatgpt-credential") == C_E_OK;
    /* Proxies come from the environment as curl does; "" disables them (used for loopback). */
    if (req->bypass_proxy) ok &= api.easy_setopt(h, C_OPT_PROXY, "") == C_E_OK;

    for (size_t i = 0; i < req->header_count; i++) {
        struct curl_slist *next = api.slist_append(headers, req->headers[i]);
        if (!next) { ok = 0; break; }
        headers = next;
    }
    /* No "Expect: 100-continue" round trip. */
    struct curl_slist *next = api.slist_append(headers, "Expect:");
    if (next) headers = next; else ok = 0;
    ok &= api.easy_setopt(h, C_OPT_HTTPHEADER, headers) == C_E_OK;

    if (strcmp(req->method, "GET") == 0) {
        ok &= api.easy_setopt(h, C_OPT_HTTPGET, 1L) == C_E_OK;
    } else {
        static const unsigned char empty[1] = {0};
        ok &= api.easy_setopt(h, C_OPT_POST, 1L) == C_E_OK;
        ok &= api.easy_setopt(h, C_OPT_POSTFIELDSIZE_LARGE, (ccurl_off_t)req->body_length) == C_E_OK;
        ok &= api.easy_setopt(h, C_OPT_POSTFIELDS, (const void *)(req->body ? req->body : empty)) == C_E_OK;
        if (strcmp(req->method, "POST") != 0) ok &= api.easy_setopt(h, C_OPT_CUSTOMREQUEST, req->method) == C_E_OK;
    }

    if (!ok) {
        fail(resp, CCURL_ERR_OTHER, "libcurl rejected an option");
    } else {
        ccurl_code rc = api.easy_perform(h);
        resp->curl_code = rc;
        resp->error_kind = classify(rc, &s);
        if (resp->error_kind == CCURL_OK) {
            long status = 0;
            api.easy_getinfo(h, C_INFO_RESPONSE_CODE, &status);
            resp->status = status;
            resp->body = s.data;
            resp->body_length = s.length;
            resp->retry_after = s.retry_after;
            resp->content_type = s.content_type;
            resp->location = s.location;
            s.data = NULL;
            s.retry_after = NULL;
            s.content_type = NULL;
            s.location = NULL;
        } else if (resp->error_kind == CCURL_ERR_TOO_LARGE) {
            snprintf(resp->error_message, sizeof resp->error_message, "response larger than %zu bytes", req->max_response_bytes);
        } else {
            snprintf(resp->error_message, sizeof resp->error_message, "%s", errbuf[0] ? errbuf : api.easy_strerror(rc));
        }
    }
    free(s.data);
    free(s.retry_after);
    free(s.content_type);
    free(s.location);
    api.slist_free_all(headers);
    api.easy_cleanup(h);
    return resp->error_kind;
}

void ccurl_response_free(ccurl_response *r) {
    if (!r) return;
    if (r->body) explicit_bzero(r->body, r->body_length); /* bodies carry tokens */
    free(r->body);
    free(r->retry_after);
    free(r->content_type);
    free(r->location);
    r->location = NULL;
    r->body = NULL;
    r->retry_after = NULL;
    r->content_type = NULL;
    r->body_length = 0;
}
