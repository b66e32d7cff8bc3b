/*
 * The connection's uTLS state (SSL_CONNECTION.utls, 3.5 patch 0002) and the
 * settings the runtime reads from the SSL: glue for the 3.5 base, where the
 * TLS state sits in SSL_CONNECTION behind the public SSL.
 */
#include <string.h>

#include "glue_local.h"

int UTLS_get_limits(const SSL *s, UTLS_LIMITS *out_limits)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    if (sc == NULL || out_limits == NULL)
        return 0;
    if (sc->utls != NULL)
        *out_limits = sc->utls->limits;
    else
        UTLS_limits_default(out_limits);
    return 1;
}

utls_conn *utls_conn_get(SSL *s)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    utls_conn *c;

    if (sc == NULL)
        return NULL;
    if ((c = sc->utls) != NULL)
        return c;
    c = OPENSSL_zalloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    UTLS_limits_default(&c->limits);
    c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
    sc->utls = c;
    return c;
}

int UTLS_get_stats(const SSL *s, UTLS_STATS *out_stats)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    if (sc == NULL || out_stats == NULL)
        return 0;
    if (sc->utls != NULL) {
        *out_stats = sc->utls->stats;
    } else {
        memset(out_stats, 0, sizeof(*out_stats));
        /* No uTLS state: no record was read with the mode on, so no
         * application key was taken up yet. */
        out_stats->fallback = UTLS_FALLBACK_HANDSHAKE;
    }
    if ((SSL_get_mode((SSL *)s) & SSL_MODE_UNORDERED) == 0)
        out_stats->fallback = UTLS_FALLBACK_NOT_ENABLED;
    return 1;
}

uint32_t utls_ssl_mode(const SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    return sc != NULL ? sc->mode : 0;
}

size_t utls_max_pipelines(const SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    return sc != NULL ? sc->max_pipelines : 0;
}

size_t utls_split_send_fragment(const SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    return sc != NULL ? ssl_get_split_send_fragment(sc) : 0;
}

size_t utls_max_send_fragment(const SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);

    return sc != NULL ? ssl_get_max_send_fragment(sc) : 0;
}
