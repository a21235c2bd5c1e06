#ifndef CLIBSECRET_SHIM_H
#define CLIBSECRET_SHIM_H
/* The D-Bus-path calls (secret-paths.h: one SearchItems answer with locked and unlocked paths, one
 * GetSecrets for a path, without building a proxy per item) sit behind this acknowledgement; they
 * have been exported by libsecret-1.so.0 since 0.7. */
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>

/*
 * libsecret is NOT linked (see Package.swift): linking it makes the dynamic loader map and
 * initialise glib, gobject, gio and gcrypt at every start, ~1.6 ms and ~4 MB even for a `get`
 * that only reads the encrypted file. Instead CLibSecretLoader dlopen()s "libsecret-1.so.0" on
 * the first Secret Service operation and fills in one pointer per function below.
 *
 * Each entry declares `ccred_NAME`, a pointer whose type is `__typeof__(NAME) *`: exactly the
 * header's own signature, so Swift type-checks every call against libsecret's declarations, and
 * (typeof being unevaluated) nothing here references the real symbol. Swift code calls
 * `ccred_NAME(...)` only after `ccred_libsecret_load()` returned 0; the real `NAME` must not be
 * used at all (the link would fail: nothing provides it).
 */
#define CCRED_LIBSECRET_FUNCTIONS(X) \
    X(g_cancellable_cancel) \
    X(g_cancellable_new) \
    X(g_dbus_error_get_remote_error) \
    X(g_dbus_error_quark) \
    X(g_dbus_proxy_get_object_path) \
    X(g_error_free) \
    X(g_free) \
    X(g_hash_table_insert) \
    X(g_hash_table_lookup) \
    X(g_hash_table_new_full) \
    X(g_hash_table_unref) \
    X(g_io_error_quark) \
    X(g_list_free_full) \
    X(g_object_ref) \
    X(g_object_unref) \
    X(g_str_equal) \
    X(g_str_hash) \
    X(g_strdup) \
    X(g_strfreev) \
    X(secret_collection_for_alias_sync) \
    X(secret_collection_get_locked) \
    X(secret_error_get_quark) \
    X(secret_item_delete_sync) \
    X(secret_item_get_attributes) \
    X(secret_item_get_label) \
    X(secret_item_get_locked) \
    X(secret_item_get_secret) \
    X(secret_item_set_label_sync) \
    X(secret_item_set_secret_sync) \
    X(secret_service_get_secret_for_dbus_path_sync) \
    X(secret_service_search_for_dbus_paths_sync) \
    X(secret_service_search_sync) \
    X(secret_service_store_sync) \
    X(secret_value_get) \
    X(secret_value_new) \
    X(secret_value_unref)

/* Swift 6 sees each pointer as `nonisolated(unsafe)`: it is written only inside
 * ccred_libsecret_load()'s pthread_once, and Swift reads it only after that call returned 0, so
 * every read happens after the one write (pthread_once's guarantee) and nothing writes it again. */
#if defined(__has_attribute) && __has_attribute(swift_attr)
#define CCRED_SET_ONCE __attribute__((swift_attr("nonisolated(unsafe)")))
#else
#define CCRED_SET_ONCE
#endif
#define CCRED_DECLARE(name) extern __typeof__(name) *ccred_##name CCRED_SET_ONCE;
CCRED_LIBSECRET_FUNCTIONS(CCRED_DECLARE)
#undef CCRED_DECLARE

/* Loads libsecret once (thread-safe) and resolves every function above. 0 on success; otherwise
 * -1 and ccred_libsecret_error() says why (e.g. "libsecret-1.so.0: cannot open shared object
 * file"). A failed load is remembered: later calls fail the same way. */
int ccred_libsecret_load(void);
const char *ccred_libsecret_error(void);

/* A SecretService proxy of its own on a connection of its own to the D-Bus address given (man
 * page STORES, "Finding the Secret Service"; ARCHITECTURE.md, "The session bus"): libsecret's
 * secret_service_get/open always use the session bus GLib finds from DBUS_SESSION_BUS_ADDRESS,
 * and its shared default proxy lives until the process exits. Every libsecret call made with this
 * service (items, collections, prompts) uses its connection. The connection does not end the
 * process when it closes. Returns a new reference, or NULL and `error`. Only after a load. */
SecretService *ccred_secret_service_open_at(const char *address, GCancellable *cancellable, GError **error);

/* Closes `service`'s connection (without waiting): calls still made on it fail at once, and it
 * goes away with its last reference. */
void ccred_secret_service_close(SecretService *service);

/* Thin helpers for what Swift cannot express directly (macros). Only after a successful load. */

/* A string -> string table that owns (g_free) its keys and values: libsecret's attribute shape. */
static inline GHashTable *ccred_attributes_new(void) {
    return ccred_g_hash_table_new_full(ccred_g_str_hash, ccred_g_str_equal, ccred_g_free, ccred_g_free);
}

static inline GQuark ccred_io_error_quark(void) { return ccred_g_io_error_quark(); }           /* G_IO_ERROR */
static inline GQuark ccred_dbus_error_quark(void) { return ccred_g_dbus_error_quark(); }       /* G_DBUS_ERROR */
static inline GQuark ccred_secret_error_quark(void) { return ccred_secret_error_get_quark(); } /* SECRET_ERROR */

#endif
