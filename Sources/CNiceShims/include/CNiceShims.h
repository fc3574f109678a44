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

/// Receive batching for a GLib loop thread whose datagrams may wait a little (a recorder): a
/// GPollFunc that, before blocking, sleeps until `max_delay_us` after its last wakeup, so the
/// datagrams of that span are read in one wakeup instead of one each. The delay shrinks as the
/// datagram rate grows, so that about `datagram_budget` datagrams wait at most, far below what
/// the socket's receive buffer holds. GLib timers still fire on time: the sleep never outlasts
/// the timeout GLib asks for. State is per thread; call these on the loop thread.
void cshim_receive_batching_install(GMainContext *context, gint64 max_delay_us, guint datagram_budget);
/// Counts one datagram read on this thread (feeds the rate estimate).
void cshim_receive_batching_count(void);
/// Raises the receive buffer of the selected pair's UDP socket to at least `bytes` (the kernel
/// caps it at net.core.rmem_max); returns the size now in force, or -1 without a UDP socket.
gint cshim_nice_grow_receive_buffer(NiceAgent *agent, guint stream_id, guint component_id, gint bytes);
