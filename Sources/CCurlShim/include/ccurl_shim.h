#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <stddef.h>

/*
 * A tiny, non-variadic front to libcurl for Swift. libcurl is NOT linked: the first call
 * dlopen()s "libcurl.so.4", so a process that never makes a request never loads the network
 * stack. curl_easy_setopt is variadic, which is why the request is assembled here, in C.
 * The implementation is typed by <curl/curl.h>; this header does not include it, so Swift sees
 * only the few declarations below.
 */

/* Why a request failed (ccurl_response.error_kind). */
enum {
    CCURL_OK = 0,
    CCURL_ERR_UNAVAILABLE = 1, /* libcurl.so.4 could not be loaded or initialised */
    CCURL_ERR_TIMEOUT = 2,     /* connect or total timeout reached */
    CCURL_ERR_CONNECT = 3,     /* could not resolve or connect (also proxy) */
    CCURL_ERR_TLS = 4,         /* TLS handshake or certificate verification failed */
    CCURL_ERR_TOO_LARGE = 5,   /* body (or headers) over the caller's limit */
    CCURL_ERR_NETWORK = 6,     /* connection reset, empty reply, partial body, ... */
    CCURL_ERR_OTHER = 7        /* bad URL, bad option, out of memory, ... */
};

typedef struct ccurl_request {
    const char *method;                /* "GET", "POST", ... */
    const char *url;
    const char *const *headers;        /* "Name: value" lines */
    size_t header_count;
    const unsigned char *body;         /* may be NULL when body_length is 0 */
    size_t body_length;
    long connect_timeout_ms;
    long total_timeout_ms;
    size_t max_response_bytes;         /* larger body -> CCURL_ERR_TOO_LARGE, never buffered */
    int bypass_proxy;                  /* 1: ignore proxy environment variables (loopback) */
} ccurl_request;

typedef struct ccurl_response {
    long status;                       /* HTTP status of the final response */
    unsigned char *body;               /* malloc'd; ccurl_response_free zeroes and frees it */
    size_t body_length;
    char *retry_after;                 /* value of Retry-After, or NULL */
    char *content_type;                /* value of Content-Type, or NULL */
    char *location;                    /* value of Location (redirects are not followed), or NULL */
    int error_kind;                    /* CCURL_OK or CCURL_ERR_* */
    int curl_code;                     /* the CURLcode, for diagnostics */
    char error_message[256];           /* NUL-terminated, from libcurl's error buffer */
} ccurl_response;

/* Performs one request. Returns error_kind (CCURL_OK on any HTTP response, whatever its status).
 * Always call ccurl_response_free afterwards. Thread-safe. */
int ccurl_perform(const ccurl_request *request, ccurl_response *response);

void ccurl_response_free(ccurl_response *response);

/* 1 when libcurl has been loaded into this process by the shim. */
int ccurl_is_loaded(void);

#endif
