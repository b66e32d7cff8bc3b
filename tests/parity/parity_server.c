/*
 * parity_server: the server under test of the differential parity suite
 * (tests/parity/README.md). It is linked against the system's libssl; the
 * driver runs it once as it is (the distribution's libssl3) and once with
 * LD_PRELOAD=<build>/lib/libssl.so.3 (the fork), and feeds both the same
 * hostile peers.
 *
 * TLS over TCP or DTLS 1.2 over UDP; after the handshake every record it
 * reads is echoed back. For each connection it prints one JSON line of what
 * the library did: alerts sent and received (info callback), the handshake
 * result, how many reads were echoed, SSL_get_error of the read that ended
 * the connection and the reason strings on the error queue.
 *
 *   parity_server --proto tls|dtls --cert F --key F [--cert2 F --key2 F]
 *                 [--cipher LIST] [--suites LIST] [--min 1.2|1.3] [--max 1.2|1.3]
 *                 [--no-etm] [--count N] [--idle-ms N] [--mtu N (DTLS)] [--bind IPv4 (TLS)]
 *
 * First line on stdout: {"event":"start","port":P,"libssl":"<path>",...}
 * where libssl is the libssl.so.3 that /proc/self/maps shows really mapped.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
/* Only for the types and the mode bit: no UTLS_ symbol is linked, the fork's
 * functions are looked up at run time (absent from the system library). */
#include <openssl/utls.h>

#include "test_identity.h"

struct obs {
    char alerts_sent[1024];
    char alerts_recv[1024];
};

static int g_conn_idx;

/* Appends a JSON string (escaped) to buf. */
static void jcat(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (n + 2 >= cap)
        return;
    buf[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", c);
        } else {
            buf[n++] = (char)c;
        }
    }
    buf[n++] = '"';
    buf[n] = 0;
}

static void list_add(char *list, size_t cap, const char *item)
{
    if (list[0])
        strncat(list, ",", cap - strlen(list) - 1);
    jcat(list, cap, item);
}

static void info_cb(const SSL *s, int where, int ret)
{
    struct obs *o = SSL_get_ex_data(s, g_conn_idx);
    char item[128];

    if (o == NULL || !(where & SSL_CB_ALERT))
        return;
    snprintf(item, sizeof(item), "%s:%d:%s", SSL_alert_type_string_long(ret), ret & 0xff,
             SSL_alert_desc_string_long(ret));
    if (where & SSL_CB_WRITE)
        list_add(o->alerts_sent, sizeof(o->alerts_sent), item);
    else
        list_add(o->alerts_recv, sizeof(o->alerts_recv), item);
}

static const char *ssl_error_name(int e)
{
    switch (e) {
    case SSL_ERROR_NONE: return "SSL_ERROR_NONE";
    case SSL_ERROR_SSL: return "SSL_ERROR_SSL";
    case SSL_ERROR_WANT_READ: return "SSL_ERROR_WANT_READ";
    case SSL_ERROR_WANT_WRITE: return "SSL_ERROR_WANT_WRITE";
    case SSL_ERROR_SYSCALL: return "SSL_ERROR_SYSCALL";
    case SSL_ERROR_ZERO_RETURN: return "SSL_ERROR_ZERO_RETURN";
    default: return "SSL_ERROR_OTHER";
    }
}

/* Drains the error queue into a JSON list of reason strings. */
static void drain_errors(char *list, size_t cap)
{
    unsigned long e;
    char item[160];

    while ((e = ERR_get_error()) != 0) {
        const char *r = ERR_reason_error_string(e);
        if (r != NULL)
            snprintf(item, sizeof(item), "%s", r);
        else
            snprintf(item, sizeof(item), "lib %d reason %d", ERR_GET_LIB(e), ERR_GET_REASON(e));
        list_add(list, cap, item);
    }
}


struct cfg {
    int dtls;
    const char *cert, *key, *cert2, *key2;
    const char *cipher, *suites;
    int min_v, max_v;
    int no_etm;
    int count;
    int idle_ms;
    int mtu;
    const char *bind_addr;
};

static int parse_version(const char *s, int dtls)
{
    if (dtls)
        return DTLS1_2_VERSION;
    if (strcmp(s, "1.2") == 0)
        return TLS1_2_VERSION;
    if (strcmp(s, "1.3") == 0)
        return TLS1_3_VERSION;
    fprintf(stderr, "parity_server: bad version %s\n", s);
    exit(2);
}

static void die_ssl(const char *what)
{
    fprintf(stderr, "parity_server: %s failed\n", what);
    ERR_print_errors_fp(stderr);
    exit(2);
}

static SSL_CTX *make_ctx(const struct cfg *c)
{
    SSL_CTX *ctx = SSL_CTX_new(c->dtls ? DTLS_server_method() : TLS_server_method());

    if (ctx == NULL)
        die_ssl("SSL_CTX_new");
    if (SSL_CTX_use_certificate_file(ctx, c->cert, SSL_FILETYPE_PEM) != 1
        || SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM) != 1)
        die_ssl("loading the certificate");
    if (c->cert2 != NULL
        && (SSL_CTX_use_certificate_file(ctx, c->cert2, SSL_FILETYPE_PEM) != 1
            || SSL_CTX_use_PrivateKey_file(ctx, c->key2, SSL_FILETYPE_PEM) != 1))
        die_ssl("loading the second certificate");
    if (c->cipher != NULL && SSL_CTX_set_cipher_list(ctx, c->cipher) != 1)
        die_ssl("SSL_CTX_set_cipher_list");
    if (c->suites != NULL && SSL_CTX_set_ciphersuites(ctx, c->suites) != 1)
        die_ssl("SSL_CTX_set_ciphersuites");
    if (c->min_v && !SSL_CTX_set_min_proto_version(ctx, c->min_v))
        die_ssl("min version");
    if (c->max_v && !SSL_CTX_set_max_proto_version(ctx, c->max_v))
        die_ssl("max version");
    if (c->no_etm)
        SSL_CTX_set_options(ctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
    /* The same tickets and no session cache either way: each case is alone. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_info_callback(ctx, info_cb);
    return ctx;
}

/* What the fork reports about its own mode (absent on the system library). */
static void fork_mode(SSL *s, char *out, size_t cap)
{
    typedef int (*tap_fn)(BIO *, UTLS_TAP_STATS *);
    tap_fn tap_stats = (tap_fn)dlsym(RTLD_DEFAULT, "UTLS_BIO_tap_get_stats");
    UTLS_TAP_STATS ts;
    typedef int (*stats_fn)(const SSL *, UTLS_STATS *);
    typedef const char *(*fb_fn)(UTLS_FALLBACK);
    stats_fn get_stats = (stats_fn)dlsym(RTLD_DEFAULT, "UTLS_get_stats");
    fb_fn fb_string = (fb_fn)dlsym(RTLD_DEFAULT, "UTLS_fallback_string");
    UTLS_STATS stats;

    if (get_stats == NULL) {
        snprintf(out, cap, "{\"fork\":false}");
        return;
    }
    memset(&stats, 0, sizeof(stats));
    memset(&ts, 0, sizeof(ts));
    get_stats(s, &stats);
    if (tap_stats != NULL && SSL_get_rbio(s) != NULL)
        tap_stats(SSL_get_rbio(s), &ts); /* 0 (and zeros) when the read BIO is no tap */
    snprintf(out, cap, "{\"fork\":true,\"unordered\":%s,\"tap_packets\":%llu,\"tap_fragments\":%llu,"
             "\"fragments\":%llu,\"headers_found\":%llu,"
             "\"soft_failures\":%llu,\"records_out_of_order\":%llu,\"fallback\":",
             (SSL_get_mode(s) & SSL_MODE_UNORDERED) ? "true" : "false",
             (unsigned long long)ts.packets, (unsigned long long)ts.fragments,
             (unsigned long long)stats.fragments, (unsigned long long)stats.headers_found,
             (unsigned long long)stats.soft_failures, (unsigned long long)stats.records_out_of_order);
    jcat(out, cap, fb_string != NULL && fb_string(stats.fallback) != NULL ? fb_string(stats.fallback) : "?");
    strncat(out, "}", cap - strlen(out) - 1);
}

static void set_rcvtimeo(int fd, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/*
 * Runs one connection on fd (a connected TCP socket or a connected UDP
 * socket) and prints its JSON line.
 */
static void serve(SSL_CTX *ctx, const struct cfg *c, int fd, int n)
{
    struct obs o;
    SSL *s = SSL_new(ctx);
    static unsigned char buf[65536];
    char errors[2048] = "", mode[256] = "";
    const char *hs = "ok";
    int echoes = 0, ret, err = SSL_ERROR_NONE, sys_errno = 0;
    const char *end = "";

    memset(&o, 0, sizeof(o));
    ERR_clear_error();
    SSL_set_ex_data(s, g_conn_idx, &o);
    if (c->dtls) {
        BIO *b = BIO_new_dgram(fd, BIO_NOCLOSE);
        struct sockaddr_storage peer;
        socklen_t pl = sizeof(peer);
        getpeername(fd, (struct sockaddr *)&peer, &pl);
        BIO_ctrl(b, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &peer);
        SSL_set_bio(s, b, b);
    } else {
        SSL_set_fd(s, fd);
    }
    set_rcvtimeo(fd, c->idle_ms);
    if (c->dtls && c->mtu > 0) {
        /* a small path MTU: the server's flight goes out in many fragments */
        SSL_set_options(s, SSL_OP_NO_QUERY_MTU);
        DTLS_set_link_mtu(s, c->mtu);
    }

    ret = SSL_accept(s);
    if (ret != 1) {
        err = SSL_get_error(s, ret);
        sys_errno = errno;
        hs = "failed";
        drain_errors(errors, sizeof(errors));
        end = "handshake";
    } else {
        for (;;) {
            size_t got = 0;
            ret = SSL_read_ex(s, buf, sizeof(buf), &got);
            if (ret != 1) {
                err = SSL_get_error(s, ret);
                sys_errno = errno;
                drain_errors(errors, sizeof(errors));
                end = "read";
                break;
            }
            echoes++;
            if (SSL_write(s, buf, (int)got) <= 0) {
                err = SSL_get_error(s, -1);
                sys_errno = errno;
                drain_errors(errors, sizeof(errors));
                end = "write";
                break;
            }
        }
    }
    fork_mode(s, mode, sizeof(mode));
    if (err == SSL_ERROR_ZERO_RETURN)
        SSL_shutdown(s); /* answer close_notify, as a typical server does */

    printf("{\"event\":\"conn\",\"n\":%d,\"handshake\":\"%s\",\"version\":\"%s\",\"cipher\":\"%s\","
           "\"echoes\":%d,\"end\":\"%s\",\"ssl_error\":\"%s\",\"errno\":%d,\"errors\":[%s],"
           "\"alerts_sent\":[%s],\"alerts_recv\":[%s],\"mode\":%s}\n",
           n, hs, SSL_get_version(s), SSL_get_cipher_name(s) ? SSL_get_cipher_name(s) : "",
           echoes, end, ssl_error_name(err),
           err == SSL_ERROR_SYSCALL ? sys_errno : 0, errors, o.alerts_sent, o.alerts_recv, mode);
    fflush(stdout);
    SSL_free(s);
}

/* Half-close and wait for the peer to close, so that no RST eats an alert. */
static void linger_close(int fd, int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    char junk[4096];

    shutdown(fd, SHUT_WR);
    while (poll(&p, 1, ms) > 0) {
        ssize_t r = read(fd, junk, sizeof(junk));
        if (r <= 0)
            break;
    }
    close(fd);
}

static int udp_bound(int port)
{
    struct sockaddr_in a;
    int one = 1, fd = socket(AF_INET, SOCK_DGRAM, 0);

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("parity_server: bind udp");
        exit(2);
    }
    return fd;
}

int main(int argc, char **argv)
{
    struct cfg c;
    SSL_CTX *ctx;
    char lib[512];
    int lfd, port, i, next;
    struct sockaddr_in a;
    socklen_t al = sizeof(a);

    memset(&c, 0, sizeof(c));
    c.count = 1;
    c.idle_ms = 4000;
    for (i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--no-etm") == 0) {
            c.no_etm = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "parity_server: %s needs a value\n", k);
            return 2;
        }
        i++;
        if (strcmp(k, "--proto") == 0)
            c.dtls = strcmp(v, "dtls") == 0;
        else if (strcmp(k, "--cert") == 0)
            c.cert = v;
        else if (strcmp(k, "--key") == 0)
            c.key = v;
        else if (strcmp(k, "--cert2") == 0)
            c.cert2 = v;
        else if (strcmp(k, "--key2") == 0)
            c.key2 = v;
        else if (strcmp(k, "--cipher") == 0)
            c.cipher = v;
        else if (strcmp(k, "--suites") == 0)
            c.suites = v;
        else if (strcmp(k, "--min") == 0)
            c.min_v = parse_version(v, c.dtls);
        else if (strcmp(k, "--max") == 0)
            c.max_v = parse_version(v, c.dtls);
        else if (strcmp(k, "--count") == 0)
            c.count = atoi(v);
        else if (strcmp(k, "--idle-ms") == 0)
            c.idle_ms = atoi(v);
        else if (strcmp(k, "--mtu") == 0)
            c.mtu = atoi(v);
        else if (strcmp(k, "--bind") == 0)
            c.bind_addr = v;
        else {
            fprintf(stderr, "parity_server: unknown option %s\n", k);
            return 2;
        }
    }
    if (c.cert == NULL || c.key == NULL) {
        fprintf(stderr, "parity_server: --cert and --key are required\n");
        return 2;
    }
    g_conn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    ctx = make_ctx(&c);
    ti_maps_libssl("/proc/self/maps", lib, sizeof(lib), "?");

    if (c.dtls) {
        lfd = udp_bound(0);
    } else {
        int one = 1;
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (c.bind_addr != NULL && inet_pton(AF_INET, c.bind_addr, &a.sin_addr) != 1) {
            fprintf(stderr, "parity_server: bad --bind %s\n", c.bind_addr);
            return 2;
        }
        if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 16) != 0) {
            perror("parity_server: listen");
            return 2;
        }
    }
    getsockname(lfd, (struct sockaddr *)&a, &al);
    port = ntohs(a.sin_port);
    {
        char jlib[600] = "";
        jcat(jlib, sizeof(jlib), lib);
        printf("{\"event\":\"start\",\"port\":%d,\"proto\":\"%s\",\"libssl\":%s,\"version\":\"%s\"}\n",
               port, c.dtls ? "dtls" : "tls", jlib, OpenSSL_version(OPENSSL_VERSION));
        fflush(stdout);
    }

    for (i = 0; i < c.count; i++) {
        if (c.dtls) {
            /* One client at a time: connect the socket to the first sender,
             * then bind a fresh socket for the next connection. */
            struct sockaddr_in peer;
            socklen_t pl;
            unsigned char d[32];
            ssize_t got;
            /* Only a ClientHello (handshake record, epoch 0, msg_type 1) starts a
             * connection: late datagrams of the previous peer are dropped. */
            for (;;) {
                pl = sizeof(peer);
                got = recvfrom(lfd, d, sizeof(d), MSG_PEEK | MSG_TRUNC, (struct sockaddr *)&peer, &pl);
                if (got < 0) {
                    perror("parity_server: recvfrom");
                    return 2;
                }
                if (got >= 14 && d[0] == 22 && d[3] == 0 && d[4] == 0 && d[13] == 1)
                    break;
                recv(lfd, d, sizeof(d), 0);
            }
            if (connect(lfd, (struct sockaddr *)&peer, pl) != 0) {
                perror("parity_server: connect udp");
                return 2;
            }
            /* The next client's first datagram must find a socket: bind it
             * now (the connected one only matches this peer). */
            next = udp_bound(port);
            serve(ctx, &c, lfd, i);
            close(lfd);
            lfd = next;
        } else {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0) {
                perror("parity_server: accept");
                return 2;
            }
            serve(ctx, &c, fd, i);
            linger_close(fd, 1500);
        }
    }
    close(lfd);
    SSL_CTX_free(ctx);
    return 0;
}
