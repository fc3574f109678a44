#pragma once
// GLib / libnice shims, used only by ConclaveICE.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
#include <nice/agent.h>
#include <glib-object.h>

/// g_signal_connect is a macro over g_signal_connect_data; this typed form also takes the
/// destroy-notify that releases the context object handed to each connection.
gulong cshim_g_signal_connect(gpointer instance, const gchar *detailed_signal, GCallback handler,
                              gpointer data, GClosureNotify destroy);

/// g_object_set is variadic; these set one property of a given type (used for NiceAgent
/// properties such as "controlling-mode", "ice-tcp", "stun-server", "stun-server-port").
void cshim_g_object_set_boolean(gpointer object, const gchar *property, gboolean value);
void cshim_g_object_set_uint(gpointer object, const gchar *property, guint value);
void cshim_g_object_set_string(gpointer object, const gchar *property, const gchar *value);
