#include "CNiceShims.h"

#include <sys/socket.h>

gulong cshim_g_signal_connect(gpointer instance, const gchar *detailed_signal, GCallback handler,
                              gpointer data, GClosureNotify destroy) {
    return g_signal_connect_data(instance, detailed_signal, handler, data, destroy, (GConnectFlags)0);
}

void cshim_g_object_set_boolean(gpointer object, const gchar *property, gboolean value) {
    g_object_set(G_OBJECT(object), property, value, NULL);
}

void cshim_g_object_set_uint(gpointer object, const gchar *property, guint value) {
    g_object_set(G_OBJECT(object), property, value, NULL);
}

void cshim_g_object_set_string(gpointer object, const gchar *property, const gchar *value) {
    g_object_set(G_OBJECT(object), property, value, NULL);
}

typedef struct {
    gint64 max_delay_us;
    gint64 budget;
    gint64 delay_us;
    /// Datagrams read on this thread so far, and that count at the window's start and at the
    /// last wakeup.
    gint64 datagrams;
    gint64 window_datagrams;
    gint64 wakeup_datagrams;
    gint64 window_start;
    gint64 last_wakeup;
} cshim_receive_batching;

static __thread cshim_receive_batching batching;

/// The rate is re-estimated twice a second: long enough to average bursts, short enough to follow
/// participants joining and leaving.
#define CSHIM_BATCHING_WINDOW_US 500000

static gint cshim_batching_poll(GPollFD *fds, guint count, gint timeout) {
    gint64 now = g_get_monotonic_time();
    gint64 read = batching.datagrams - batching.wakeup_datagrams;
    if (read > 2 * batching.budget) {
        // A sudden rise (media starting on many feeds at once): shrink now, not at the window's end.
        batching.delay_us = batching.delay_us * batching.budget / read;
    }
    if (now - batching.window_start >= CSHIM_BATCHING_WINDOW_US) {
        gint64 span = now - batching.window_start;
        gint64 seen = batching.datagrams - batching.window_datagrams;
        // delay = budget / rate, with rate = seen / span.
        gint64 delay = seen > 0 ? batching.budget * span / seen : batching.max_delay_us;
        batching.delay_us = delay < batching.max_delay_us ? delay : batching.max_delay_us;
        batching.window_datagrams = batching.datagrams;
        batching.window_start = now;
    }
    gint64 wait = batching.last_wakeup + batching.delay_us - now;
    if (timeout != 0 && wait > 0) {
        if (timeout > 0 && wait > (gint64)timeout * 1000) wait = (gint64)timeout * 1000;
        g_usleep((gulong)wait);
        if (timeout > 0) {
            gint64 left = (gint64)timeout - wait / 1000;
            timeout = left > 0 ? (gint)left : 0;
        }
    }
    gint result = g_poll(fds, count, timeout);
    batching.last_wakeup = g_get_monotonic_time();
    batching.wakeup_datagrams = batching.datagrams;
    return result;
}

void cshim_receive_batching_install(GMainContext *context, gint64 max_delay_us, guint datagram_budget) {
    batching.max_delay_us = max_delay_us;
    batching.budget = datagram_budget;
    batching.delay_us = max_delay_us;
    batching.datagrams = 0;
    batching.window_datagrams = 0;
    batching.wakeup_datagrams = 0;
    batching.window_start = g_get_monotonic_time();
    batching.last_wakeup = batching.window_start;
    g_main_context_set_poll_func(context, cshim_batching_poll);
}

void cshim_receive_batching_count(void) { batching.datagrams++; }

gint cshim_nice_grow_receive_buffer(NiceAgent *agent, guint stream_id, guint component_id, gint bytes) {
    GSocket *socket = nice_agent_get_selected_socket(agent, stream_id, component_id);
    if (socket == NULL) return -1;
    int fd = g_socket_get_fd(socket);
    int current = 0;
    socklen_t length = sizeof current;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &current, &length) == 0 && current < bytes) {
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
        length = sizeof current;
        (void)getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &current, &length);
    }
    g_object_unref(socket);
    return current;
}
