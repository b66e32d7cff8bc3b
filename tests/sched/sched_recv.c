/*
 * sched_recv: a TLS server that reads the scheduler's test messages
 * (sched_wire.h), checks each one, and logs when it arrived.
 *
 * Built twice: against the system's stock libssl (sched_recv_stock: the proof
 * that a legacy receiver reads everything the scheduler sends), and against
 * the fork (sched_recv_utls, -DSCHED_RECV_UTLS), which with --unordered reads
 * one record at a time with SSL_MODE_UNORDERED and a listener tap.
 *
 *   sched_recv --listen IP:PORT [--out FILE] [--ready FILE] [--unordered]
 *              [--expect-stock]
 *
 * --out gets one line per message: "m ID KIND GEN_NS RECV_NS DEADLINE_NS DEP
 * OOO LEN", then "end clean=C messages=N bytes=B bad=X dup=D". Exit status 0
 * only for a clean close_notify with every message intact and none twice.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "test_identity.h"
#ifdef SCHED_RECV_UTLS
# include <openssl/utls.h>
#endif

#include "sched_wire.h"

static void die(const char *what)
{
    fprintf(stderr, "sched_recv: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(2);
}

static void make_cert(SSL_CTX *ctx)
{
    EVP_PKEY *key = NULL;
    X509 *x = NULL;

    if (!ti_make_identity(1, "sched", &key, &x) || SSL_CTX_use_certificate(ctx, x) != 1
        || SSL_CTX_use_PrivateKey(ctx, key) != 1)
        die("certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}


typedef struct {
    FILE *out;
    uint8_t *seen;
    size_t seen_len;
    uint64_t messages, bytes, bad, dup;
} state;

static void on_message(state *st, const uint8_t *p, size_t n, uint64_t t, int ooo)
{
    sw_hdr h;

    if (!sw_parse(p, n, &h)) {
        st->bad++;
        fprintf(stderr, "sched_recv: bad message of %zu bytes\n", n);
        return;
    }
    if (h.id / 8 >= st->seen_len) {
        size_t nl = (h.id / 8 + 1) * 2;
        uint8_t *ns = realloc(st->seen, nl);

        if (ns == NULL)
            die("out of memory");
        memset(ns + st->seen_len, 0, nl - st->seen_len);
        st->seen = ns;
        st->seen_len = nl;
    }
    if (st->seen[h.id / 8] & (1u << (h.id % 8))) {
        st->dup++;
        return;
    }
    st->seen[h.id / 8] |= (uint8_t)(1u << (h.id % 8));
    st->messages++;
    st->bytes += n;
    if (st->out != NULL)
        fprintf(st->out, "m %llu %u %llu %llu %llu %llu %d %zu\n", (unsigned long long)h.id,
                h.kind, (unsigned long long)h.gen_ns, (unsigned long long)t,
                (unsigned long long)h.deadline_ns, (unsigned long long)h.dep, ooo, n);
}

int main(int argc, char **argv)
{
    const char *listen_at = NULL, *out_path = NULL, *ready = NULL;
    int unordered = 0, expect_stock = 0, i, lfd, fd, one = 1, clean = 0;
    struct sockaddr_in sa;
    SSL_CTX *ctx;
    SSL *ssl;
    static uint8_t buf[SW_MAX + 4096], stream[2 * SW_MAX + 8192];
    size_t have = 0;
    state st;
    char path[512];
#ifdef SCHED_RECV_UTLS
    UTLS_TAP_LISTENER *tl = NULL;
    uint64_t start = 0, next_stats = 0;
#endif

    memset(&st, 0, sizeof(st));
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
            listen_at = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out_path = argv[++i];
        else if (strcmp(argv[i], "--ready") == 0 && i + 1 < argc)
            ready = argv[++i];
        else if (strcmp(argv[i], "--unordered") == 0)
            unordered = 1;
        else if (strcmp(argv[i], "--expect-stock") == 0)
            expect_stock = 1;
        else
            die("usage: sched_recv --listen IP:PORT [--out FILE] [--ready FILE] [--unordered] "
                "[--expect-stock]");
    }
    if (listen_at == NULL)
        die("--listen IP:PORT is required");
    ti_maps_libssl("/proc/self/maps", path, sizeof(path), "?");
    if (expect_stock) {
        /* The stock library has no uTLS symbols, and is not the build tree's. */
        if (dlsym(RTLD_DEFAULT, "UTLS_version") != NULL || strstr(path, "/build") != NULL) {
            fprintf(stderr, "sched_recv: not the stock libssl: %s\n", path);
            return 2;
        }
    }
    fprintf(stderr, "sched_recv: libssl %s (%s)\n", path, OpenSSL_version(OPENSSL_VERSION));
#ifndef SCHED_RECV_UTLS
    if (unordered)
        die("--unordered needs the fork (sched_recv_utls)");
#endif
    if (out_path != NULL && (st.out = fopen(out_path, "w")) == NULL)
        die("cannot open --out");

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    {
        char host[64];
        const char *colon = strrchr(listen_at, ':');

        if (colon == NULL || (size_t)(colon - listen_at) >= sizeof(host))
            die("--listen IP:PORT");
        memcpy(host, listen_at, (size_t)(colon - listen_at));
        host[colon - listen_at] = '\0';
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
            die("--listen: not an IPv4 address");
        sa.sin_port = htons((uint16_t)atoi(colon + 1));
    }
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1) != 0)
        die("cannot listen");
#ifdef SCHED_RECV_UTLS
    if (unordered && (tl = UTLS_tap_listen(lfd)) == NULL)
        die("UTLS_tap_listen (needs CAP_NET_RAW)");
#endif
    if (ready != NULL) {
        FILE *f = fopen(ready, "w");

        if (f != NULL)
            fclose(f);
    }
    if ((fd = accept(lfd, NULL, NULL)) < 0)
        die("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        die("SSL_CTX_new");
    make_cert(ctx);
    if ((ssl = SSL_new(ctx)) == NULL)
        die("SSL_new");
#ifdef SCHED_RECV_UTLS
    if (unordered) {
        BIO *b;

        UTLS_LIMITS lim;

        SSL_set_mode(ssl, SSL_MODE_UNORDERED);
        /* A 10 Mbit/s x 60 ms path holds more past a hole than the defaults
         * allow for; this receiver trusts its (emulated) network. */
        UTLS_limits_default(&lim);
        lim.max_bytes_held *= 4;
        lim.max_fragments *= 4;
        lim.max_window *= 4;
        lim.max_ready_records = 1024;
        if (!UTLS_set_limits(ssl, &lim))
            die("UTLS_set_limits");
        if ((b = UTLS_BIO_new_tap(fd, BIO_CLOSE)) == NULL)
            die("UTLS_BIO_new_tap");
        SSL_set_bio(ssl, b, b);
    } else
#endif
        SSL_set_fd(ssl, fd);
    if ((i = SSL_accept(ssl)) != 1) {
        fprintf(stderr, "sched_recv: SSL_accept: SSL_get_error %d, errno %d (%s)\n",
                SSL_get_error(ssl, i), errno, strerror(errno));
        die("TLS handshake");
    }
    fprintf(stderr, "sched_recv: %s %s%s\n", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
            unordered ? " unordered" : "");
#ifdef SCHED_RECV_UTLS
    start = sw_now_ns();
    next_stats = start + 10000000000ull;
#endif

    for (;;) {
        size_t n = 0;
        int ok, ooo = 0;
        uint64_t t;

#ifdef SCHED_RECV_UTLS
        if (unordered) {
            UTLS_RECORD_INFO info;

            ok = UTLS_read_record(ssl, buf, sizeof(buf), &n, &info);
            ooo = ok ? info.out_of_order : 0;
        } else
#endif
            ok = SSL_read_ex(ssl, buf, sizeof(buf), &n);
        t = sw_now_ns();
#ifdef SCHED_RECV_UTLS
        if (unordered && t >= next_stats) {
            /* Every 10 s: whether, and from how many bytes on, the
             * out-of-order side drops (see docs/sched.md, MEASUREMENTS). */
            UTLS_STATS us;

            if (UTLS_get_stats(ssl, &us))
                fprintf(stderr, "sched_recv: t=%llus bytes=%llu out_of_order=%llu "
                        "bytes_dropped=%llu\n", (unsigned long long)((t - start) / 1000000000u),
                        (unsigned long long)st.bytes, (unsigned long long)us.records_out_of_order,
                        (unsigned long long)us.bytes_dropped);
            next_stats = t + 10000000000ull;
        }
#endif
        if (!ok) {
            int e = SSL_get_error(ssl, 0);

            if (e == SSL_ERROR_WANT_READ)
                continue;
            clean = e == SSL_ERROR_ZERO_RETURN;
            if (!clean) {
                fprintf(stderr, "sched_recv: SSL_read failed: SSL_get_error %d\n", e);
                ERR_print_errors_fp(stderr);
            }
            break;
        }
        if (unordered) {
            /* One record is one message. */
            on_message(&st, buf, n, t, ooo);
            continue;
        }
        /* In order: the byte stream may cut messages anywhere. */
        if (have + n > sizeof(stream)) {
            st.bad++;
            break;
        }
        memcpy(stream + have, buf, n);
        have += n;
        for (;;) {
            size_t len = sw_peek_len(stream, have);

            if (len == (size_t)-1) {
                st.bad++;
                have = 0;
                break;
            }
            if (len == 0 || len > have)
                break;
            on_message(&st, stream, len, t, 0);
            memmove(stream, stream + len, have - len);
            have -= len;
        }
    }
    if (have != 0)
        st.bad++;
    if (st.out != NULL) {
        fprintf(st.out, "end clean=%d messages=%llu bytes=%llu bad=%llu dup=%llu\n", clean,
                (unsigned long long)st.messages, (unsigned long long)st.bytes,
                (unsigned long long)st.bad, (unsigned long long)st.dup);
        fclose(st.out);
    }
#ifdef SCHED_RECV_UTLS
    if (unordered) {
        UTLS_STATS us;

        if (UTLS_get_stats(ssl, &us))
            fprintf(stderr,
                    "sched_recv: unordered: in_order=%llu out_of_order=%llu probes=%llu "
                    "bytes_dropped=%llu probe_limit_hits=%llu fallback=%s\n",
                    (unsigned long long)us.records_in_order,
                    (unsigned long long)us.records_out_of_order, (unsigned long long)us.probes,
                    (unsigned long long)us.bytes_dropped, (unsigned long long)us.probe_limit_hits,
                    UTLS_fallback_string(us.fallback));
    }
#endif
    fprintf(stderr, "sched_recv: clean=%d messages=%llu bytes=%llu bad=%llu dup=%llu\n", clean,
            (unsigned long long)st.messages, (unsigned long long)st.bytes,
            (unsigned long long)st.bad, (unsigned long long)st.dup);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
#ifdef SCHED_RECV_UTLS
    UTLS_tap_listener_free(tl);
#endif
    close(lfd);
    free(st.seen);
    return clean && st.bad == 0 && st.dup == 0 ? 0 : 1;
}
