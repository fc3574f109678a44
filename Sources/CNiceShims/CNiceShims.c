#include "CNiceShims.h"

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
