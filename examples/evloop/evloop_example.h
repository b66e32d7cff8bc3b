/*
 * evloop_example.h: what the two event-loop examples (evloop-epoll.c,
 * evloop-libevent.c) share: the server's setup (a listener tap, one
 * connection in SSL_MODE_UNORDERED on a non-blocking socket) and the read of
 * everything the connection has now. Their event loops are in their own
 * files: that is what they show (docs/evloop.md).
 */
#ifndef UTLS_EVLOOP_EXAMPLE_H
#define UTLS_EVLOOP_EXAMPLE_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "example_util.h"

typedef struct {
    SSL_CTX *ctx;
    SSL *ssl;
    int lfd, fd;
    UTLS_TAP_LISTENER *tap;
    long count, size, received, out_of_order, bad;
    unsigned char *seen;
    int done;
} evx_server;

static void evx_usage(void)
{
    die("usage: %s --listen ADDR:PORT --count N --size S [--ready FILE]", example_name);
}

/* evx_accept: options, the listener tap, one accepted connection. */
static void evx_accept(evx_server *s, int argc, char **argv)
{
    const char *addr = NULL, *ready = NULL;

    memset(s, 0, sizeof(*s));
    parse_receiver_options(argc, argv, 1, &addr, &ready, &s->count, &s->size, evx_usage);
    if (addr == NULL || s->count <= 0 || s->size < 8
        || (s->seen = calloc((size_t)s->count, 1)) == NULL)
        evx_usage();
    s->ssl = new_tls13_server(example_name, &s->ctx);
    s->lfd = listen_tcp(addr);
    /* The listener tap records each connection's ISN: SSL_set_fd then gets
     * a tap at the first read after the handshake. Without CAP_NET_RAW the
     * example still works, in order. */
    if ((s->tap = UTLS_tap_listen(s->lfd)) == NULL)
        note("no tap (%s): records come in order",
             ERR_reason_error_string(ERR_peek_last_error()));
    ERR_clear_error();
    touch_ready(ready, s->lfd);
    if (!wait_readable(s->lfd, 30000))
        die("no connection");
    s->fd = accept_tcp(s->lfd);
    if (fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl: %s", strerror(errno));
    SSL_set_mode(s->ssl, SSL_MODE_UNORDERED);
    if (!SSL_set_fd(s->ssl, s->fd))
        die("SSL_set_fd");
}

/* evx_read_all: the handshake, then every record the connection has now,
 * until SSL_ERROR_WANT_READ. */
static void evx_read_all(evx_server *s)
{
    static unsigned char buf[1 << 15];

    if (!SSL_is_init_finished(s->ssl)) {
        int r = SSL_accept(s->ssl), e = SSL_get_error(s->ssl, r);

        if (r != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            die("SSL_accept failed (%d)", e);
        if (r != 1)
            return;
    }
    for (;;) {
        UTLS_RECORD_INFO info;
        size_t n = 0;
        uint32_t idx;

        if (UTLS_read_record(s->ssl, buf, sizeof(buf), &n, &info)) {
            idx = get32(buf + 4);
            if (n != (size_t)s->size || idx >= (uint32_t)s->count || s->seen[idx]) {
                s->bad++;
                continue;
            }
            s->seen[idx] = 1;
            s->received++;
            s->out_of_order += info.out_of_order != 0;
            if (s->received == s->count)
                s->done = 1;
            continue;
        }
        switch (SSL_get_error(s->ssl, 0)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
            return;
        case SSL_ERROR_ZERO_RETURN:
            s->done = 1;
            return;
        default:
            die("SSL_read failed (%d)", SSL_get_error(s->ssl, 0));
        }
    }
}

/* evx_finish: prints the counts; returns the exit status (0: every message
 * once, and with a tap some of them out of order). */
static int evx_finish(evx_server *s)
{
    UTLS_STATS st;
    int rc;

    (void)UTLS_get_stats(s->ssl, &st);
    printf("%s: %ld of %ld messages, %ld out of order, %ld bad\n", example_name, s->received,
           s->count, s->out_of_order, s->bad);
    rc = s->received == s->count && s->bad == 0 && (s->tap == NULL || s->out_of_order > 0) ? 0 : 1;
    (void)SSL_shutdown(s->ssl);
    SSL_free(s->ssl);
    SSL_CTX_free(s->ctx);
    UTLS_tap_listener_free(s->tap);
    close(s->fd);
    close(s->lfd);
    free(s->seen);
    return rc;
}

#endif
