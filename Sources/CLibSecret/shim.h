#ifndef CLIBSECRET_SHIM_H
#define CLIBSECRET_SHIM_H
#include <libsecret/secret.h>

/* Thin helpers for what Swift cannot express directly (macros). */

/* A string -> string table that owns (g_free) its keys and values: libsecret's attribute shape. */
static inline GHashTable *ccred_attributes_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static inline GQuark ccred_io_error_quark(void) { return G_IO_ERROR; }
static inline GQuark ccred_dbus_error_quark(void) { return G_DBUS_ERROR; }
static inline GQuark ccred_secret_error_quark(void) { return SECRET_ERROR; }

#endif
