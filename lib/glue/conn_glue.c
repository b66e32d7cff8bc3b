/*
 * The SSL's uTLS state (s->utls, patch 0002) and the settings the runtime
 * reads from the SSL: glue.
 */
#include <string.h>

#include "glue_local.h"

int UTLS_get_limits(const SSL *s, UTLS_LIMITS *out_limits)
{
    if (s == NULL || out_limits == NULL)
        return 0;
    if (s->utls != NULL)
        *out_limits = s->utls->limits;
    else
        UTLS_limits_default(out_limits);
    return 1;
}

/* --- Connection state ---------------------------------------------------- */

/* utls_conn_get returns |s|'s uTLS state, creating it on first use. */
utls_conn *utls_conn_get(SSL *s)
{
    utls_conn *c = s->utls;

    if (c != NULL)
        return c;
    c = OPENSSL_zalloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    UTLS_limits_default(&c->limits);
    c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
    s->utls = c;
    return c;
}

/* --- Statistics ---------------------------------------------------------- */

int UTLS_get_stats(const SSL *s, UTLS_STATS *out_stats)
{
    if (s == NULL || out_stats == NULL)
        return 0;
    if (s->utls != NULL) {
        *out_stats = s->utls->stats;
    } else {
        memset(out_stats, 0, sizeof(*out_stats));
        out_stats->fallback = UTLS_FALLBACK_HANDSHAKE; /* nothing read yet */
    }
    if ((s->mode & SSL_MODE_UNORDERED) == 0)
        out_stats->fallback = UTLS_FALLBACK_NOT_ENABLED;
    return 1;
}

uint32_t utls_ssl_mode(const SSL *s)
{
    return s != NULL ? s->mode : 0;
}

size_t utls_max_pipelines(const SSL *s)
{
    return s->max_pipelines;
}

size_t utls_split_send_fragment(const SSL *s)
{
    return ssl_get_split_send_fragment(s);
}

size_t utls_max_send_fragment(const SSL *s)
{
    return ssl_get_max_send_fragment(s);
}
