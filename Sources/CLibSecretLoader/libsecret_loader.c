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

/* What only this file calls (variadic, or GType plumbing Swift has no use for): not in shim.h. */
#define CCRED_LOADER_FUNCTIONS(X) \
    X(g_dbus_connection_close) \
    X(g_dbus_connection_new_for_address_sync) \
    X(g_dbus_proxy_get_connection) \
    X(g_object_set) \
    X(g_type_class_peek_parent) \
    X(g_type_query) \
    X(g_type_register_static_simple) \
    X(secret_service_get_type) \
    X(secret_service_open_sync)

#define CCRED_DEFINE_LOCAL(name) static __typeof__(name) *ccred_##name;
CCRED_LOADER_FUNCTIONS(CCRED_DEFINE_LOCAL)
#undef CCRED_DEFINE_LOCAL

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
    CCRED_LOADER_FUNCTIONS(CCRED_RESOLVE)
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

/* A SecretService subclass that changes one thing: the connection. libsecret's constructor sets
 * the GDBusProxy's "g-bus-type" to the session bus, which GLib finds from DBUS_SESSION_BUS_ADDRESS
 * only; this one's constructor then sets no bus type and the connection opened for the address
 * found (GDBusProxy uses "g-connection" when no bus type is set). secret_service_open_sync takes
 * "SECRET_TYPE_SERVICE or the type of a derived class". The connection reaches the constructor
 * through a thread-local: construction runs on the calling thread, inside secret_service_open_sync. */
static __thread GDBusConnection *connection_for_new_service;
static GObject *(*libsecret_constructor)(GType, guint, GObjectConstructParam *);
static GType service_type;
static pthread_once_t service_type_once = PTHREAD_ONCE_INIT;

static GObject *service_constructor(GType type, guint n_properties, GObjectConstructParam *properties) {
    GObject *object = libsecret_constructor(type, n_properties, properties);
    ccred_g_object_set(object, "g-bus-type", G_BUS_TYPE_NONE, "g-connection", connection_for_new_service, NULL);
    return object;
}

static void service_class_init(gpointer klass, gpointer data) {
    (void)data;
    libsecret_constructor = ((GObjectClass *)ccred_g_type_class_peek_parent(klass))->constructor;
    ((GObjectClass *)klass)->constructor = service_constructor;
}

static void register_service_type(void) {
    GTypeQuery parent;
    ccred_g_type_query(ccred_secret_service_get_type(), &parent);
    service_type = ccred_g_type_register_static_simple(ccred_secret_service_get_type(), "CcredSecretServiceAt",
                                                       parent.class_size, service_class_init,
                                                       parent.instance_size, NULL, 0);
}

SecretService *ccred_secret_service_open_at(const char *address, GCancellable *cancellable, GError **error) {
    pthread_once(&service_type_once, register_service_type);
    GDBusConnection *connection = ccred_g_dbus_connection_new_for_address_sync(
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, cancellable, error);
    if (!connection) return NULL;
    connection_for_new_service = connection;
    SecretService *service = ccred_secret_service_open_sync(service_type, NULL, SECRET_SERVICE_NONE, cancellable, error);
    connection_for_new_service = NULL;
    if (!service) ccred_g_dbus_connection_close(connection, NULL, NULL, NULL);
    ccred_g_object_unref(connection); /* the proxy holds its own reference */
    return service;
}

void ccred_secret_service_close(SecretService *service) {
    ccred_g_dbus_connection_close(ccred_g_dbus_proxy_get_connection((GDBusProxy *)service), NULL, NULL, NULL);
}
