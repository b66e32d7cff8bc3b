/*
 * tunnel: an IP tunnel over TLS, one IP packet per TLS record (docs/tunnel.md).
 *
 *   tunnel server --listen ADDR:PORT --tun NAME --local IP --peer IP [options]
 *   tunnel client --connect ADDR:PORT --tun NAME --local IP --peer IP [options]
 *
 * Each end opens a TUN device (IFF_TUN | IFF_NO_PI), gives it a point-to-point
 * address and an MTU, and carries every packet the kernel routes into it as
 * one TLS 1.3 record. There are two TLS connections, one per direction: the
 * client connects the "down" connection (server to client) first, then the
 * "up" connection (client to server). Each direction then has one writer and
 * one reader, each in a thread of its own, each using its SSL from that
 * thread only, and the reader blocks in UTLS_read_record(), which waits on
 * the socket and on the tap at once (docs/unordered.md): a record past a TCP
 * hole is written to the TUN device the moment it is authenticated.
 *
 * --mode tls   plain TLS, records in order (built with -DTUNNEL_STOCK against
 *              the system libssl: tunnel-stock; or the fork with no mode).
 * --mode utls  the fork: SSL_MODE_UNORDERED with a tap on the receiving side,
 *              and SSL_MODE_UTLS_IP_TUNNEL: a packet past a hole goes early
 *              only if it is a datagram (UDP, ICMP); inner TCP stays in order,
 *              so that it never takes the tunnel's reordering for loss.
 *              --no-ip-policy turns the policy off (every packet early), to
 *              measure what it is for. Needs CAP_NET_RAW (the tap) and
 *              CAP_NET_ADMIN (the TUN device), like any tunnel.
 *
 * --log FILE writes one JSON line per received packet that is not inner TCP
 * (time, out of order, the record's stream offset and length, the first 4
 * bytes of the UDP payload): bench/tunnel computes each packet's oracle from
 * it. The last line has the totals. Exit status 0, 1 (the peer closed
 * abnormally), 2 (setup failed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#ifndef TUNNEL_STOCK
#include <openssl/utls.h>
#endif

#include "example_util.h"

/* The largest packet one record carries: the TUN MTU may not exceed it. A
 * TLS record holds 2^14 bytes of plaintext (RFC 8446 5.1). */
#define TUNNEL_MAX_PACKET 16384

static struct {
    int is_server;
    const char *addr, *tun, *local, *peer, *mode, *log, *ready, *require, *cc;
    long mtu, timeout_s;
    int no_ip_policy, quiet, skip_without_tap;
} opt = {.mtu = 1400};

static int tun_fd = -1;
static FILE *logf_;
#ifndef TUNNEL_STOCK
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
#endif
static int utls_mode;

static void usage(void)
{
    fprintf(stderr,
            "usage: tunnel server --listen ADDR:PORT | client --connect ADDR:PORT\n"
            "              --tun NAME --local IP --peer IP [--mtu N] [--mode tls|utls]\n"
            "              [--no-ip-policy] [--log FILE] [--ready FILE] [--require fork|stock]\n"
            "              [--cc NAME] [--timeout S] [--quiet] [--skip-without-tap]\n");
    exit(2);
}

/* ifreq_addr puts the IPv4 address |ip| into |ifr|'s address field. */
static void ifreq_addr(struct ifreq *ifr, const char *ip)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr->ifr_addr;

    memset(&ifr->ifr_addr, 0, sizeof(ifr->ifr_addr));
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
        die("not an IPv4 address: %s", ip);
}

/* open_tun creates the TUN device |name| and sets it up as a point-to-point
 * link |local| -> |peer| with MTU |mtu|. Returns its descriptor. */
static int open_tun(const char *name, const char *local, const char *peer, long mtu)
{
    struct ifreq ifr;
    int fd, s;

    if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) < 0)
        die("open /dev/net/tun: %s", strerror(errno));
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die("TUNSETIFF %s: %s (CAP_NET_ADMIN?)", name, strerror(errno));
    if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        die("socket: %s", strerror(errno));
    ifreq_addr(&ifr, local);
    if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
        die("SIOCSIFADDR %s: %s", local, strerror(errno));
    ifreq_addr(&ifr, peer);
    if (ioctl(s, SIOCSIFDSTADDR, &ifr) < 0)
        die("SIOCSIFDSTADDR %s: %s", peer, strerror(errno));
    ifr.ifr_mtu = (int)mtu;
    if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
        die("SIOCSIFMTU %ld: %s", mtu, strerror(errno));
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        die("SIOCGIFFLAGS: %s", strerror(errno));
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        die("SIOCSIFFLAGS: %s", strerror(errno));
    close(s);
    return fd;
}

/* ip_proto returns the transport protocol of the IP packet |p| (|n| bytes),
 * and in |*out_l4| where its header starts; -1 if it is not IPv4/IPv6. IPv6
 * extension headers are not walked: this is for the log only. */
static int ip_proto(const unsigned char *p, size_t n, size_t *out_l4)
{
    if (n >= 20 && (p[0] >> 4) == 4) {
        *out_l4 = (size_t)(p[0] & 15) * 4;
        return p[9];
    }
    if (n >= 40 && (p[0] >> 4) == 6) {
        *out_l4 = 40;
        return p[6];
    }
    return -1;
}

/* The totals of one direction's reader. */
static struct {
    uint64_t packets, out_of_order, bytes, tcp, tcp_out_of_order;
} rx;

#ifndef TUNNEL_STOCK
static void log_packet(const unsigned char *p, size_t n, uint64_t t, const UTLS_RECORD_INFO *info)
{
    size_t l4 = 0;
    int proto = ip_proto(p, n, &l4);
    unsigned long head = 0;

    if (logf_ == NULL || proto == 6)
        return;
    if (proto == 17 && n >= l4 + 12)
        head = (unsigned long)p[l4 + 8] << 24 | (unsigned long)p[l4 + 9] << 16
            | (unsigned long)p[l4 + 10] << 8 | p[l4 + 11];
    pthread_mutex_lock(&log_lock);
    fprintf(logf_,
            "{\"t\":%llu,\"proto\":%d,\"len\":%zu,\"head\":%lu,\"ooo\":%d,\"seq\":%llu,"
            "\"offset\":%llu,\"wire_len\":%zu,\"arrival_ns\":%llu}\n",
            (unsigned long long)t, proto, n, head, info->out_of_order != 0,
            (unsigned long long)info->seq, (unsigned long long)info->stream_offset,
            info->wire_len, (unsigned long long)info->arrival_ns);
    pthread_mutex_unlock(&log_lock);
}
#endif

/* reader: records of |ssl| to the TUN device, until the peer closes. */
static void *reader(void *arg)
{
    SSL *ssl = arg;
    static unsigned char buf[TUNNEL_MAX_PACKET];

    for (;;) {
        size_t n = 0, l4;
        int ok, out_of_order = 0;

#ifndef TUNNEL_STOCK
        UTLS_RECORD_INFO info;

        if (utls_mode) {
            ok = UTLS_read_record(ssl, buf, sizeof(buf), &n, &info);
            if (ok) {
                out_of_order = info.out_of_order != 0;
                log_packet(buf, n, now_ns(), &info);
            }
        } else
#endif
        {
            ok = SSL_read_ex(ssl, buf, sizeof(buf), &n);
        }
        if (!ok) {
            int e = SSL_get_error(ssl, 0);

            if (e == SSL_ERROR_ZERO_RETURN)
                return (void *)0;
            note("reader: SSL_read failed (SSL_get_error %d)", e);
            ERR_print_errors_fp(stderr);
            return (void *)1;
        }
        rx.packets++;
        rx.bytes += n;
        rx.out_of_order += out_of_order;
        if (ip_proto(buf, n, &l4) == 6) {
            rx.tcp++;
            rx.tcp_out_of_order += out_of_order;
        }
        /* One record, one packet: a write to a TUN device injects exactly
         * one packet. A failed write is a dropped packet, as on any link. */
        if (write(tun_fd, buf, n) < 0 && errno != EINVAL)
            note("write to %s: %s", opt.tun, strerror(errno));
    }
}

/* writer: packets of the TUN device to |ssl|, one record each. */
static void *writer(void *arg)
{
    SSL *ssl = arg;
    static unsigned char buf[TUNNEL_MAX_PACKET];

    for (;;) {
        ssize_t n = read(tun_fd, buf, sizeof(buf));
        size_t w;

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return (void *)1;
        if (!SSL_write_ex(ssl, buf, (size_t)n, &w))
            return (void *)0; /* the peer went away: the reader reports it */
    }
}

static int is_fork(void)
{
    return symbol_loaded("UTLS_version");
}

/* reader_modes: the receiving side's modes, set before the handshake. */
static void reader_modes(SSL *ssl)
{
#ifndef TUNNEL_STOCK
    if (utls_mode) {
        SSL_set_mode(ssl, SSL_MODE_UNORDERED);
        if (!opt.no_ip_policy)
            SSL_set_mode(ssl, SSL_MODE_UTLS_IP_TUNNEL);
    }
#else
    (void)ssl;
#endif
}

#ifndef TUNNEL_STOCK
static void skip_without_tap(void)
{
    if (opt.skip_without_tap) {
        fprintf(stderr, "tunnel: SKIP: the tap needs CAP_NET_RAW\n");
        exit(77);
    }
}
#endif

/* tls_new: an SSL of |ctx| over |bio| (both directions, owned by it), with
 * the reader's modes when |reads|: what the client and the server side share
 * before their handshakes. */
static SSL *tls_new(SSL_CTX *ctx, BIO *bio, int reads)
{
    SSL *ssl;

    if ((ssl = SSL_new(ctx)) == NULL)
        die("SSL_new");
    SSL_set_bio(ssl, bio, bio);
    if (reads)
        reader_modes(ssl);
    return ssl;
}

/* tls_connect: the client side of one direction's connection; |reads|: this
 * end reads it (with a tap in utls mode). */
static SSL *tls_connect(SSL_CTX *ctx, const struct sockaddr_storage *ss, socklen_t sl, int reads)
{
    SSL *ssl;
    BIO *bio = NULL;
    int fd;

#ifndef TUNNEL_STOCK
    if (reads && utls_mode) {
        int one = 1;

        if ((fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            die("socket: %s", strerror(errno));
        /* The tap must see the SYN-ACK: it opens before the connect. */
        if (!UTLS_tap_connect(fd, ss, sl))
            die("connect %s: %s", opt.addr, strerror(errno));
        if ((bio = UTLS_BIO_new_tap(fd, BIO_CLOSE)) == NULL) {
            skip_without_tap();
            die("UTLS_BIO_new_tap failed");
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (opt.cc != NULL)
            (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, opt.cc, strlen(opt.cc));
    }
#endif
    if (bio == NULL) {
        fd = connect_retry(SOCK_STREAM, ss, sl, opt.addr, opt.cc);
        if ((bio = BIO_new_socket(fd, BIO_CLOSE)) == NULL)
            die("BIO_new_socket");
    }
    ssl = tls_new(ctx, bio, reads);
    if (SSL_connect(ssl) != 1)
        die("TLS handshake failed");
    return ssl;
}

/* tls_accept: the server side of one direction's connection. */
static SSL *tls_accept(SSL_CTX *ctx, int lfd, int reads)
{
    int fd = accept_tcp(lfd);
    SSL *ssl;
    BIO *bio = NULL;

    if (opt.cc != NULL)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, opt.cc, strlen(opt.cc));
#ifndef TUNNEL_STOCK
    if (reads && utls_mode && (bio = UTLS_BIO_new_tap(fd, BIO_CLOSE)) == NULL)
        die("UTLS_BIO_new_tap failed");
#endif
    if (bio == NULL && (bio = BIO_new_socket(fd, BIO_CLOSE)) == NULL)
        die("BIO_new_socket");
    ssl = tls_new(ctx, bio, reads);
    if (SSL_accept(ssl) != 1)
        die("TLS handshake failed");
    return ssl;
}

int main(int argc, char **argv)
{
    const example_option opts[] = {
        {"--listen", EXAMPLE_OPT_STR, &opt.addr},   {"--connect", EXAMPLE_OPT_STR, &opt.addr},
        {"--tun", EXAMPLE_OPT_STR, &opt.tun},       {"--local", EXAMPLE_OPT_STR, &opt.local},
        {"--peer", EXAMPLE_OPT_STR, &opt.peer},     {"--mtu", EXAMPLE_OPT_LONG, &opt.mtu},
        {"--mode", EXAMPLE_OPT_STR, &opt.mode},     {"--log", EXAMPLE_OPT_STR, &opt.log},
        {"--ready", EXAMPLE_OPT_STR, &opt.ready},   {"--require", EXAMPLE_OPT_STR, &opt.require},
        {"--cc", EXAMPLE_OPT_STR, &opt.cc},         {"--timeout", EXAMPLE_OPT_LONG, &opt.timeout_s},
        {"--no-ip-policy", EXAMPLE_OPT_FLAG, &opt.no_ip_policy},
        {"--quiet", EXAMPLE_OPT_FLAG, &opt.quiet},
        {"--skip-without-tap", EXAMPLE_OPT_FLAG, &opt.skip_without_tap},
    };
    struct sockaddr_storage ss;
    socklen_t sl;
    SSL_CTX *ctx = NULL;
    SSL *up, *down, *in, *out;
    pthread_t rt, wt;
    void *rres = NULL;
    int lfd = -1;
#ifndef TUNNEL_STOCK
    UTLS_TAP_LISTENER *tl = NULL;
#endif

    example_name = "tunnel";
    if (argc < 2)
        usage();
    opt.is_server = parse_role(strcmp(argv[1], "server") == 0 ? "recv"
                               : strcmp(argv[1], "client") == 0 ? "send" : argv[1],
                               usage) == 0;
    parse_options(argc, argv, 2, opts, sizeof(opts) / sizeof(opts[0]), usage);
    example_quiet = opt.quiet;
    if (opt.addr == NULL || opt.tun == NULL || opt.local == NULL || opt.peer == NULL)
        usage();
    if (opt.mtu < 68 || opt.mtu > TUNNEL_MAX_PACKET)
        die("--mtu must be 68..%d", TUNNEL_MAX_PACKET);
    if (opt.mode == NULL || strcmp(opt.mode, "tls") == 0) {
        utls_mode = 0;
    } else if (strcmp(opt.mode, "utls") == 0) {
#ifdef TUNNEL_STOCK
        die("--mode utls needs the uTLS build (tunnel, not tunnel-stock)");
#endif
        utls_mode = 1;
    } else {
        usage();
    }
#ifdef TUNNEL_STOCK
    check_require(opt.require, is_fork(), 1);
#else
    check_require(opt.require, is_fork(), 0);
#endif
    logf_ = start_log(opt.log, opt.timeout_s);
    if (opt.log == NULL)
        logf_ = NULL; /* start_log's stdout: no log asked for */
    else
        setvbuf(logf_, NULL, _IOLBF, 0); /* complete lines, even when killed */
    parse_addr(opt.addr, SOCK_STREAM, &ss, &sl);
    tun_fd = open_tun(opt.tun, opt.local, opt.peer, opt.mtu);

    if (opt.is_server) {
        lfd = listen_socket(SOCK_STREAM, &ss, sl, opt.addr);
#ifndef TUNNEL_STOCK
        if (utls_mode && (tl = UTLS_tap_listen(lfd)) == NULL) {
            skip_without_tap();
            die("UTLS_tap_listen failed");
        }
#endif
        touch_ready(opt.ready, lfd);
        down = NULL;
        up = NULL;
        /* The client connects "down" first, then "up". */
        {
            SSL *first;

            first = new_tls13_server("tunnel", &ctx);
            SSL_free(first); /* only the context is wanted */
        }
        /* No session tickets: nobody resumes, and the reader of the "down"
         * connection would never read them. */
        SSL_CTX_set_num_tickets(ctx, 0);
        down = tls_accept(ctx, lfd, 0);
        up = tls_accept(ctx, lfd, 1);
        in = up;
        out = down;
    } else {
        ctx = SSL_CTX_new(TLS_client_method());
        if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION))
            die("SSL_CTX_new");
        down = tls_connect(ctx, &ss, sl, 1);
        up = tls_connect(ctx, &ss, sl, 0);
        touch_ready(opt.ready, SSL_get_fd(up));
        in = down;
        out = up;
    }
    note("%s: tunnel %s %s -> %s over %s (%s, %s; reads with %s)",
         opt.is_server ? "server" : "client", opt.tun, opt.local, opt.peer, opt.addr,
         SSL_get_version(in), SSL_get_cipher_name(in), loaded_libssl());
    if (pthread_create(&wt, NULL, writer, out) != 0 || pthread_create(&rt, NULL, reader, in) != 0)
        die("pthread_create");
    pthread_join(rt, &rres);
#ifndef TUNNEL_STOCK
    if (logf_ != NULL) {
        UTLS_STATS st;

        memset(&st, 0, sizeof(st));
        if (utls_mode)
            (void)UTLS_get_stats(in, &st);
        pthread_mutex_lock(&log_lock);
        fprintf(logf_,
                "{\"event\":\"end\",\"packets\":%llu,\"out_of_order\":%llu,\"bytes\":%llu,"
                "\"tcp\":%llu,\"tcp_out_of_order\":%llu,\"utls\":{\"in_order\":%llu,"
                "\"out_of_order\":%llu,\"skipped\":%llu,\"probes\":%llu,\"bytes_dropped\":%llu,"
                "\"fallback\":\"%s\"}}\n",
                (unsigned long long)rx.packets, (unsigned long long)rx.out_of_order,
                (unsigned long long)rx.bytes, (unsigned long long)rx.tcp,
                (unsigned long long)rx.tcp_out_of_order, (unsigned long long)st.records_in_order,
                (unsigned long long)st.records_out_of_order,
                (unsigned long long)st.records_skipped, (unsigned long long)st.probes,
                (unsigned long long)st.bytes_dropped, UTLS_fallback_string(st.fallback));
        pthread_mutex_unlock(&log_lock);
    }
    UTLS_tap_listener_free(tl);
#endif
    if (logf_ != NULL)
        end_log(logf_);
    note("reader done: %llu packets, %llu out of order (%llu inner TCP, %llu of them out of order)",
         (unsigned long long)rx.packets, (unsigned long long)rx.out_of_order,
         (unsigned long long)rx.tcp, (unsigned long long)rx.tcp_out_of_order);
    /* The writer may be blocked in read(): the process ends it. */
    return rres == NULL ? 0 : 1;
}
