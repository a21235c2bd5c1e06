#define _GNU_SOURCE
#include "../CLibSecret/shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* One pointer per function, typed from libsecret's own header (see shim.h). */
#define CCRED_DEFINE(name) __typeof__(name) *ccred_##name;
CCRED_LIBSECRET_FUNCTIONS(CCRED_DEFINE)
#undef CCRED_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];

static void load(void) {
    /* libsecret's DT_NEEDED brings glib, gobject and gio; dlsym on the handle searches them too. */
    void *handle = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "%s", why ? why : "libsecret-1.so.0 could not be loaded");
        return;
    }
#define CCRED_RESOLVE(name)                                                              \
    if (!(ccred_##name = (__typeof__(name) *)dlsym(handle, #name))) {                     \
        snprintf(failure, sizeof failure, "libsecret-1.so.0 has no symbol %s", #name);     \
        return;                                                                           \
    }
    CCRED_LIBSECRET_FUNCTIONS(CCRED_RESOLVE)
#undef CCRED_RESOLVE
    loaded = 1; /* the handle stays open for the life of the process */
}

int ccred_libsecret_load(void) {
    pthread_once(&once, load);
    return loaded ? 0 : -1;
}

const char *ccred_libsecret_error(void) {
    return loaded ? NULL : (failure[0] ? failure : "libsecret has not been loaded");
}
