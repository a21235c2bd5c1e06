#define _GNU_SOURCE
#include "ccurl_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* libcurl's own header types every function and constant used below, so the compiler checks
 * each call against libcurl's declarations (the CLibSecret pattern). Nothing here references a
 * libcurl symbol: the pointers are typed with __typeof__, which is not evaluated, and filled in
 * by dlsym(), so the binary does not link libcurl. CURL_DISABLE_DEPRECATION: CURLOPT_PROTOCOLS is
 * still needed as the fallback for a libcurl older than 7.85 (no CURLOPT_PROTOCOLS_STR). */
#define CURL_NO_OLDIES 1
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>

#define CCURL_FUNCTIONS(X) \
    X(curl_global_init) \
    X(curl_easy_init) \
    X(curl_easy_setopt) \
    X(curl_easy_perform) \
    X(curl_easy_getinfo) \
    X(curl_easy_cleanup) \
    X(curl_slist_append) \
    X(curl_slist_free_all) \
    X(curl_easy_strerror)

/* One pointer per function: dl_curl_easy_init has the type of &curl_easy_init. (Prefixed, so that
 * a libcurl header that makes curl_easy_setopt a type-checking macro never rewrites our calls.) */
#define CCURL_POINTER(name) static __typeof__(name) *dl_##name;
CCURL_FUNCTIONS(CCURL_POINTER)
#undef CCURL_POINTER

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded = 0;
static char load_error[200];

static void load_libcurl(void) {
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "cannot load libcurl.so.4 (install libcurl4)");
        return;
    }
#define CCURL_RESOLVE(name)                                                               \
    if (!(dl_##name = (__typeof__(name) *)dlsym(h, #name))) {                            \
        snprintf(load_error, sizeof load_error, "libcurl.so.4 lacks %s", #name);          \
        return;                                                                           \
    }
    CCURL_FUNCTIONS(CCURL_RESOLVE)
#undef CCURL_RESOLVE
    if (dl_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "libcurl failed to initialise");
        return;
    }
    loaded = 1; /* published by pthread_once */
}

int ccurl_is_loaded(void) { return loaded; }

/* Zeroes and frees a buffer that held (part of) a response body: bodies carry tokens. */
static void wipe_free(unsigned char *p, size_t n) {
    if (!p) return;
    explicit_bzero(p, n);
    free(p);
}

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
        /* Not realloc: it may move the body and free the old block unwiped. */
        unsigned char *grown = malloc(cap ? cap : 1);
        if (!grown) return 0;
        if (s->length) memcpy(grown, s->data, s->length);
        wipe_free(s->data, s->capacity);
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

static int classify(CURLcode rc, const sink *s) {
    if (s->too_large) return CCURL_ERR_TOO_LARGE;
    switch (rc) {
    case CURLE_OK: return CCURL_OK;
    case CURLE_OPERATION_TIMEDOUT: return CCURL_ERR_TIMEOUT;
    case CURLE_FILESIZE_EXCEEDED: return CCURL_ERR_TOO_LARGE;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PROXY: return CCURL_ERR_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS: return CCURL_ERR_TLS;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2_STREAM: return CCURL_ERR_NETWORK;
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

    CURL *h = dl_curl_easy_init();
    if (!h) return fail(resp, CCURL_ERR_OTHER, "curl_easy_init failed");

    sink s = {0};
    s.limit = req->max_response_bytes;
    char errbuf[CURL_ERROR_SIZE];
    errbuf[0] = 0;
    struct curl_slist *headers = NULL;
    int ok = 1;

    /* curl_easy_setopt is variadic: every value is passed as the type libcurl reads for that
     * option (long, a pointer, curl_off_t or a callback). */
    ok &= dl_curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_URL, req->url) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK;
    CURLcode protocols = CURLE_UNKNOWN_OPTION;
#if LIBCURL_VERSION_NUM >= 0x075500
    protocols = dl_curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (protocols != CURLE_OK) { /* a libcurl older than 7.85 at run time */
        ok &= dl_curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK;
    }
    ok &= dl_curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->total_timeout_ms > 0 ? req->total_timeout_ms : 30000L) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_response_bytes) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, (curl_write_callback)write_body) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)&s) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, (curl_write_callback)write_header) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_HEADERDATA, (void *)&s) == CURLE_OK;
    ok &= dl_curl_easy_setopt(h, CURLOPT_USERAGENT, "chatgpt-credential") == CURLE_OK;
    /* Proxies come from the environment as curl does; "" disables them (used for loopback). */
    if (req->bypass_proxy) ok &= dl_curl_easy_setopt(h, CURLOPT_PROXY, "") == CURLE_OK;

    for (size_t i = 0; i < req->header_count; i++) {
        struct curl_slist *next = dl_curl_slist_append(headers, req->headers[i]);
        if (!next) { ok = 0; break; }
        headers = next;
    }
    /* No "Expect: 100-continue" round trip. */
    struct curl_slist *next = dl_curl_slist_append(headers, "Expect:");
    if (next) headers = next; else ok = 0;
    ok &= dl_curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers) == CURLE_OK;

    if (strcmp(req->method, "GET") == 0) {
        ok &= dl_curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) == CURLE_OK;
    } else {
        static const unsigned char empty[1] = {0};
        ok &= dl_curl_easy_setopt(h, CURLOPT_POST, 1L) == CURLE_OK;
        ok &= dl_curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_length) == CURLE_OK;
        /* POSTFIELDS (not COPYPOSTFIELDS): libcurl sends from the caller's buffer, no copy. */
        ok &= dl_curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const void *)(req->body ? req->body : empty)) == CURLE_OK;
        if (strcmp(req->method, "POST") != 0) ok &= dl_curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method) == CURLE_OK;
    }

    if (!ok) {
        fail(resp, CCURL_ERR_OTHER, "libcurl rejected an option");
    } else {
        CURLcode rc = dl_curl_easy_perform(h);
        resp->curl_code = (int)rc;
        resp->error_kind = classify(rc, &s);
        if (resp->error_kind == CCURL_OK) {
            long status = 0;
            dl_curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
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
            snprintf(resp->error_message, sizeof resp->error_message, "%s", errbuf[0] ? errbuf : dl_curl_easy_strerror(rc));
        }
    }
    wipe_free(s.data, s.capacity); /* a failed transfer may have received part of a body */
    free(s.retry_after);
    free(s.content_type);
    free(s.location);
    /* curl_slist_append strdup()s each line: the copy of the Authorization line is zeroed before
     * libcurl frees it (libcurl's own request buffer, built from it, is libcurl's to manage). */
    for (struct curl_slist *line = headers; line; line = line->next) {
        if (line->data) explicit_bzero(line->data, strlen(line->data));
    }
    dl_curl_slist_free_all(headers);
    dl_curl_easy_cleanup(h);
    return resp->error_kind;
}

void ccurl_response_free(ccurl_response *r) {
    if (!r) return;
    wipe_free(r->body, r->body_length); /* only [0, length) was ever written */
    free(r->retry_after);
    free(r->content_type);
    free(r->location);
    r->location = NULL;
    r->body = NULL;
    r->retry_after = NULL;
    r->content_type = NULL;
    r->body_length = 0;
}
