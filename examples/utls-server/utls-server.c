/*
 * utls-server: an epoll TLS 1.3 message server, and the load client that
 * drives it. One process (or several prefork workers accepting from one
 * listening socket) serves thousands of connections; every record is one
 * message. With the fork and --mode utls, each connection is tapped by the
 * process-wide tap: the server polls the tap's one descriptor next to its
 * sockets and reads the connections UTLS_tap_poll_ready() names, so records
 * past a TCP hole are delivered as soon as they arrive.
 *
 *   utls-server serve --listen ADDR:PORT [--mode tls|utls] [--workers W]
 *                     [--worker-conns K] [--drop-to USER] [--accept-delay-ms MS] [--rtt-ms MS]
 *                     [--size S] [--ready FILE] [--out FILE] [--records FILE] [--quiet]
 *       Serves until SIGTERM or SIGINT, then each worker appends one JSON
 *       line to FILE: connections, records (in and out of order), integrity
 *       (bad, duplicate), stream-offset consistency, latency shares, the
 *       tap's counters, RSS, descriptors, CPU time, uid and capabilities.
 *       --records (--mode utls): also one line per record delivered,
 *       "PEER_PORT STREAM_OFFSET WIRE_LEN SENT_NS DELIVERED_NS OUT_OF_ORDER"
 *       (CLOCK_MONOTONIC), for an oracle computed from a capture
 *       (bench/scale/oracle.py).
 *       --drop-to: open the tap, then setuid to USER with no capabilities
 *       before accepting anything (the tap keeps working). --worker-conns:
 *       a worker stops accepting after K connections (as nginx's
 *       worker_connections), so that prefork workers share the load.
 *   utls-server load --connect ADDR:PORT --conns N --rate R --size S
 *                    --duration-ms D [--burst K] [--out FILE] [--quiet]
 *       Opens N TLS connections (at most 256 handshakes at a time), then
 *       sends R records per second of S bytes in all, dealt round robin over
 *       the connections K at a time (default 1), for D ms, and closes them.
 *       With K > 1 a connection gets K records in a row (still R per second
 *       in all), so that a lost one has records behind it on its own
 *       connection at any N. Each record carries its
 *       connection number, sequence number, send time and a checkable
 *       pattern.
 *
 * utls-server-stock is the same program linked with the system libssl (no
 * uTLS API; --mode tls only): the baseline of bench/scale.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#ifndef UTLS_SERVER_STOCK
# include <openssl/utls.h>
#endif

#include "example_util.h"

#define HDR_LEN 16          /* connection, sequence, send time */
#define MAX_PLAIN 16384
#define MAX_HANDSHAKING 256 /* load: handshakes in flight */

static struct {
    const char *addr, *out, *ready, *drop_to, *mode, *require, *mark, *release, *records;
    long hold_ms;
    long workers, worker_conns, accept_delay_ms, rtt_ms, size, conns, rate, duration_ms, burst;
    int quiet;
} opt = {.workers = 1, .rtt_ms = 100, .size = 1400, .conns = 1, .rate = 100,
         .duration_ms = 1000, .burst = 1, .mode = "tls"};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: utls-server serve --listen ADDR:PORT [--mode tls|utls] [--workers W] [--worker-conns K]\n"
            "                   [--drop-to USER] [--accept-delay-ms MS] [--rtt-ms MS] [--size S]\n"
            "                   [--ready FILE] [--out FILE] [--records FILE] [--quiet]\n"
            "       utls-server load --connect ADDR:PORT --conns N --rate R --size S [--burst K]\n"
            "                   --duration-ms D [--out FILE] [--quiet]\n");
    exit(2);
}

static void raise_nofile(void)
{
    struct rlimit r;

    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
        if (r.rlim_max < 1048576) {
            struct rlimit want = {1048576, 1048576};

            if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                return;
        }
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
    }
}

static unsigned char pattern(uint32_t conn, uint32_t seq, size_t i)
{
    return (unsigned char)(conn * 31u + seq * 7u + (uint32_t)i);
}

/* --- serve ------------------------------------------------------------------- */

typedef struct {
    SSL *ssl;
    int hs_done;
    uint32_t id;
    int id_set;
    unsigned char *seen; /* bitmap of sequence numbers */
    size_t seen_cap;
    int64_t off_base;    /* stream offset minus seq x wire length */
    int off_base_set;
    uint16_t peer_port;
} conn;

typedef struct {
    uint64_t lat_ns, at_ns;
    uint32_t id, seq;
    int ooo;
    uint16_t port;       /* the client's port: the flow in a capture */
    uint32_t wire_len;   /* 0: no record metadata (stock) */
    uint64_t offset;     /* the record's stream offset */
} sample;

static struct {
    conn *c;              /* by descriptor */
    size_t cap;
    uint64_t conns, tapped, untapped, open_now, closed, hs_fail;
    uint64_t records, ooo, bad, dup, offset_errors, read_errors;
    sample *samples;
    size_t num_samples, samples_cap;
    double cpu_at_first_ms; /* CPU time when the first message arrived */
    uint64_t max_open;
    uint32_t *ids;        /* the connection numbers this worker served */
    size_t num_ids, ids_cap;
} W;

/* grow: |arr| (|*cap| elements of |elem| bytes) reallocated to twice its
 * size, or to |first| elements when empty; updates |*cap| and returns the new
 * array, or NULL (|arr| and |*cap| untouched) when memory runs out. */
static void *grow(void *arr, size_t *cap, size_t elem, size_t first)
{
    size_t n = *cap ? 2 * *cap : first;
    void *p = realloc(arr, n * elem);

    if (p != NULL)
        *cap = n;
    return p;
}

static void sample_add(uint64_t lat, int ooo, uint32_t id, uint32_t seq, uint64_t at,
                       uint16_t port, uint64_t offset, size_t wire_len)
{
    if (W.num_samples == W.samples_cap) {
        sample *s = grow(W.samples, &W.samples_cap, sizeof(*s), 4096);

        if (s == NULL)
            return;
        W.samples = s;
    }
    W.samples[W.num_samples].lat_ns = lat;
    W.samples[W.num_samples].at_ns = at;
    W.samples[W.num_samples].id = id;
    W.samples[W.num_samples].seq = seq;
    W.samples[W.num_samples].port = port;
    W.samples[W.num_samples].offset = offset;
    W.samples[W.num_samples].wire_len = (uint32_t)wire_len;
    W.samples[W.num_samples++].ooo = ooo;
}

static void id_add(uint32_t id)
{
    if (W.num_ids == W.ids_cap) {
        uint32_t *p = grow(W.ids, &W.ids_cap, sizeof(*p), 1024);

        if (p == NULL)
            return;
        W.ids = p;
    }
    W.ids[W.num_ids++] = id;
}

static void conn_close(int ep, int fd)
{
    conn *c = &W.c[fd];

    (void)epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    SSL_free(c->ssl);
    free(c->seen);
    memset(c, 0, sizeof(*c));
    close(fd);
    W.open_now--;
    W.closed++;
}

/* record_check: one delivered message. */
static double cpu_ms(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
           + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void record_check(conn *c, const unsigned char *p, size_t n, int ooo, int has_info,
                         uint64_t tls_seq, uint64_t offset, size_t wire_len)
{
    uint32_t id, seq;
    uint64_t sent, now = now_ns();
    size_t i;

    if (W.records == 0)
        W.cpu_at_first_ms = cpu_ms(); /* the handshakes are done */
    W.records++;
    W.ooo += ooo != 0;
    if (n < HDR_LEN) {
        W.bad++;
        return;
    }
    id = get32(p);
    seq = get32(p + 4);
    sent = get64(p + 8);
    for (i = HDR_LEN; i < n; i++) {
        if (p[i] != pattern(id, seq, i)) {
            W.bad++;
            return;
        }
    }
    if (!c->id_set) {
        c->id = id;
        c->id_set = 1;
        id_add(id);
    } else if (c->id != id) {
        W.bad++; /* another connection's message */
        return;
    }
    if (seq / 8 >= c->seen_cap) {
        size_t ncap = (seq / 8 + 1) * 2;
        unsigned char *s = realloc(c->seen, ncap);

        if (s == NULL)
            return;
        memset(s + c->seen_cap, 0, ncap - c->seen_cap);
        c->seen = s;
        c->seen_cap = ncap;
    }
    if ((c->seen[seq / 8] & (1u << (seq % 8))) != 0) {
        W.dup++;
        return;
    }
    c->seen[seq / 8] |= (unsigned char)(1u << (seq % 8));
    if (has_info) {
        /* Every message has the same size: record k starts k wire lengths
         * after record 0, in order or not. */
        int64_t base = (int64_t)offset - (int64_t)(tls_seq * wire_len);

        if (!c->off_base_set) {
            c->off_base = base;
            c->off_base_set = 1;
        } else if (base != c->off_base) {
            W.offset_errors++;
        }
    }
    sample_add(now > sent ? now - sent : 0, ooo, id, seq, now, c->peer_port,
               has_info ? offset : 0, has_info ? wire_len : 0);
}

static void conn_service(int ep, int fd)
{
    conn *c = &W.c[fd];
    static unsigned char buf[MAX_PLAIN + 64];

    if (c->ssl == NULL)
        return;
    if (!c->hs_done) {
        int r = SSL_accept(c->ssl);

        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);

            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return;
            W.hs_fail++;
            ERR_clear_error();
            conn_close(ep, fd);
            return;
        }
        c->hs_done = 1;
    }
    for (;;) {
        size_t n = 0;
        int ok, e;

        (void)n;

#ifndef UTLS_SERVER_STOCK
        if (strcmp(opt.mode, "utls") == 0) {
            UTLS_RECORD_INFO info;

            ok = UTLS_read_record(c->ssl, buf, sizeof(buf), &n, &info);
            if (ok) {
                record_check(c, buf, n, info.out_of_order, 1, info.seq, info.stream_offset,
                             info.wire_len);
                continue;
            }
        } else
#endif
        {
            int r = SSL_read(c->ssl, buf, sizeof(buf));

            ok = r > 0;
            if (ok) {
                record_check(c, buf, (size_t)r, 0, 0, 0, 0, 0);
                continue;
            }
        }
        e = SSL_get_error(c->ssl, 0);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return;
        if (e != SSL_ERROR_ZERO_RETURN && e != SSL_ERROR_SYSCALL)
            W.read_errors++;
        ERR_clear_error();
        conn_close(ep, fd);
        return;
    }
}

static SSL_CTX *server_ctx;

static void conn_accept(int ep, int lfd)
{
    for (;;) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
        conn *c;
        BIO *bio = NULL;
        int fd, one = 1;

        if (opt.worker_conns > 0 && W.conns >= (uint64_t)opt.worker_conns) {
            (void)epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL); /* the others take the rest */
            return;
        }
        fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if ((size_t)fd >= W.cap) {
            size_t ncap = (size_t)fd * 2 + 64;
            conn *n = realloc(W.c, ncap * sizeof(*n));

            if (n == NULL) {
                close(fd);
                return;
            }
            memset(n + W.cap, 0, (ncap - W.cap) * sizeof(*n));
            W.c = n;
            W.cap = ncap;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = &W.c[fd];
        memset(c, 0, sizeof(*c));
        {
            struct sockaddr_storage peer;
            socklen_t pl = sizeof(peer);

            if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0)
                c->peer_port = ntohs(peer.ss_family == AF_INET6
                                         ? ((struct sockaddr_in6 *)&peer)->sin6_port
                                         : ((struct sockaddr_in *)&peer)->sin_port);
        }
        if ((c->ssl = SSL_new(server_ctx)) == NULL)
            die("SSL_new");
#ifndef UTLS_SERVER_STOCK
        if (strcmp(opt.mode, "utls") == 0) {
            SSL_set_mode(c->ssl, SSL_MODE_UNORDERED);
            bio = UTLS_BIO_new_tap(fd, BIO_NOCLOSE);
            if (bio == NULL) {
                W.untapped++;
                ERR_clear_error();
            } else {
                W.tapped++;
            }
        }
#endif
        if (bio == NULL && (bio = BIO_new_socket(fd, BIO_NOCLOSE)) == NULL)
            die("BIO_new_socket");
        SSL_set_bio(c->ssl, bio, bio);
        SSL_set_accept_state(c->ssl);
        ev.data.fd = fd;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            die("epoll_ctl");
        W.conns++;
        if (++W.open_now > W.max_open)
            W.max_open = W.open_now;
    }
}

static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    return v;
}

static unsigned long long cap_eff(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = ~0ULL;

    if (f == NULL)
        return v;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "CapEff:", 7) == 0)
            v = strtoull(line + 7, NULL, 16);
    fclose(f);
    return v;
}

static int cmp_conn_time(const void *a, const void *b)
{
    const sample *x = a, *y = b;

    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->at_ns < y->at_ns ? -1 : x->at_ns > y->at_ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* drop_privileges: setuid to |user| with no capabilities left. */
static void drop_privileges(const char *user)
{
    struct passwd *pw = getpwnam(user);

    if (pw == NULL)
        die("no user %s", user);
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
        die("cannot drop to %s: %s", user, strerror(errno));
    /* setuid from root to another user clears every capability set. */
    (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (setuid(0) == 0)
        die("still able to become root after dropping to %s", user);
}

static int worker(int lfd, int index)
{
    struct epoll_event ev, evs[256];
    int ep, hubfd = -1, can_raw;
    struct rusage ru;
    FILE *out;
    size_t i, late_rtt = 0, held = 0;
    uint64_t base = UINT64_MAX;
    uint64_t *lats;

    if (opt.drop_to != NULL)
        drop_privileges(opt.drop_to);
    /* Proof that the capture could not be opened now. */
    can_raw = socket(AF_PACKET, SOCK_DGRAM, 0);
    if (can_raw >= 0)
        close(can_raw);
    can_raw = can_raw >= 0;
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("epoll_create1");
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
        die("epoll_ctl listen");
#ifndef UTLS_SERVER_STOCK
    if (strcmp(opt.mode, "utls") == 0 && (hubfd = UTLS_tap_get_fd()) >= 0) {
        ev.events = EPOLLIN;
        ev.data.fd = hubfd;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, hubfd, &ev) != 0)
            die("epoll_ctl tap");
    }
#endif
    if (opt.accept_delay_ms > 0)
        sleep_until(now_ns() + (uint64_t)opt.accept_delay_ms * 1000000u);
    while (!stop) {
        int n = epoll_wait(ep, evs, 256, 100), k;

        for (k = 0; k < n; k++) {
            int fd = evs[k].data.fd;

            if (fd == lfd) {
                conn_accept(ep, lfd);
            } else if (fd == hubfd) {
#ifndef UTLS_SERVER_STOCK
                int ready[1024];
                size_t num = 0, j;

                do {
                    if (!UTLS_tap_poll_ready(ready, 1024, &num))
                        die("UTLS_tap_poll_ready");
                    for (j = 0; j < num; j++)
                        conn_service(ep, ready[j]);
                } while (num == 1024);
#endif
            } else {
                conn_service(ep, fd);
            }
        }
    }
    /* Latency: the smallest is the path's one-way delay. */
    lats = malloc((W.num_samples + 1) * sizeof(*lats));
    for (i = 0; i < W.num_samples; i++) {
        if (W.samples[i].lat_ns < base)
            base = W.samples[i].lat_ns;
        lats[i] = W.samples[i].lat_ns;
    }
    for (i = 0; i < W.num_samples; i++)
        late_rtt += W.samples[i].lat_ns - base > (uint64_t)opt.rtt_ms * 1000000u;
    /*
     * Records held behind a hole and delivered in order: late by more than
     * half an RTT, and delivered right after (within 2 ms of) an earlier
     * message of the same connection that was late too: the lost one, which
     * itself is not past a hole. The share of records past a hole delivered
     * out of order is ooo / (ooo + held_in_order).
     */
    qsort(W.samples, W.num_samples, sizeof(*W.samples), cmp_conn_time);
    for (i = 1; i < W.num_samples; i++) {
        const sample *x = &W.samples[i], *p = &W.samples[i - 1];
        uint64_t half = (uint64_t)opt.rtt_ms * 500000u;

        held += !x->ooo && x->lat_ns - base > half && p->id == x->id && p->seq < x->seq
                && p->lat_ns - base > half && x->at_ns - p->at_ns < 2000000u;
    }
    qsort(lats, W.num_samples, sizeof(*lats), cmp_u64);
    getrusage(RUSAGE_SELF, &ru);
    if ((out = opt.out != NULL ? fopen(opt.out, "a") : stdout) == NULL)
        die("cannot open %s", opt.out);
    {
        char line[8192];
        int len = snprintf(
            line, sizeof(line),
            "{\"event\":\"worker\",\"worker\":%d,\"pid\":%d,\"uid\":%d,\"cap_eff\":\"%llx\","
            "\"can_open_packet_socket\":%d,\"libssl\":\"%s\",\"mode\":\"%s\",\"conns\":%llu,"
            "\"tapped\":%llu,\"untapped\":%llu,\"hs_fail\":%llu,\"records\":%llu,\"ooo\":%llu,"
            "\"held_in_order\":%zu,\"bad\":%llu,\"dup\":%llu,\"offset_errors\":%llu,"
            "\"read_errors\":%llu,\"delayed_gt_rtt\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,"
            "\"base_ms\":%.2f,\"rss_kb\":%ld,\"rss_peak_kb\":%ld,\"fds\":%ld,"
            "\"cpu_ms\":%.1f,\"data_cpu_ms\":%.1f,\"max_open\":%llu,\"open_at_end\":%llu",
            index, (int)getpid(), (int)getuid(), cap_eff(), can_raw, loaded_libssl(), opt.mode,
            (unsigned long long)W.conns, (unsigned long long)W.tapped,
            (unsigned long long)W.untapped, (unsigned long long)W.hs_fail,
            (unsigned long long)W.records, (unsigned long long)W.ooo, held,
            (unsigned long long)W.bad, (unsigned long long)W.dup,
            (unsigned long long)W.offset_errors, (unsigned long long)W.read_errors, late_rtt,
            W.num_samples ? lats[W.num_samples / 2] / 1e6 : 0.0,
            W.num_samples ? lats[W.num_samples * 99 / 100] / 1e6 : 0.0,
            W.num_samples ? base / 1e6 : 0.0, status_kb("VmRSS"), status_kb("VmHWM"),
            count_open_fds(),
            (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
                + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3,
            W.records > 0 ? cpu_ms() - W.cpu_at_first_ms : 0.0, (unsigned long long)W.max_open,
            (unsigned long long)W.open_now);
#ifndef UTLS_SERVER_STOCK
        {
            UTLS_TAP_GLOBAL_STATS st;

            if (UTLS_tap_get_global_stats(&st, sizeof(st)))
                len += snprintf(line + len, sizeof(line) - (size_t)len,
                                ",\"tap\":{\"open\":%d,\"flows\":%zu,\"attached\":%zu,"
                                "\"unattached\":%zu,\"ports\":%zu,\"kernel_bytes\":%llu,"
                                "\"packets\":%llu,\"foreign\":%llu,\"ring_drops\":%llu,"
                                "\"inbox_drops\":%llu,\"isn_from_kernel\":%llu,"
                                "\"isn_sockops\":%d,\"isn_from_sockops\":%llu}",
                                st.open, st.flows, st.attached, st.unattached, st.ports,
                                (unsigned long long)st.kernel_bytes,
                                (unsigned long long)st.packets, (unsigned long long)st.foreign,
                                (unsigned long long)st.ring_drops,
                                (unsigned long long)st.inbox_drops,
                                (unsigned long long)st.isn_from_kernel, st.isn_sockops,
                                (unsigned long long)st.isn_from_sockops);
            ERR_clear_error();
        }
#endif
        len += snprintf(line + len, sizeof(line) - (size_t)len, ",\"ids\":[");
        /* The connection numbers (prefork: which worker served which). */
        for (i = 0; i < W.num_ids && len < (int)sizeof(line) - 32; i++)
            len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%u", i ? "," : "",
                            W.ids[i]);
        snprintf(line + len, sizeof(line) - (size_t)len, "]}\n");
        fputs(line, out);
    }
    if (out != stdout)
        fclose(out);
    free(lats);
    if (opt.records != NULL) {
        FILE *rf = fopen(opt.records, "a");

        if (rf == NULL)
            die("cannot open %s", opt.records);
        /* CLOCK_REALTIME - CLOCK_MONOTONIC: a capture's timestamps are the
         * former, these times the latter. */
        fprintf(rf, "# real_minus_mono_ns %lld\n", (long long)real_minus_mono_ns());
        for (i = 0; i < W.num_samples; i++) {
            const sample *x = &W.samples[i];

            if (x->wire_len > 0)
                fprintf(rf, "%u %llu %u %llu %llu %d\n", (unsigned)x->port,
                        (unsigned long long)x->offset, (unsigned)x->wire_len,
                        (unsigned long long)(x->at_ns - x->lat_ns),
                        (unsigned long long)x->at_ns, x->ooo != 0);
        }
        fclose(rf);
    }
    return 0;
}

static int serve(void)
{
    int lfd;
    long i;
    pid_t *kids;
#ifndef UTLS_SERVER_STOCK
    UTLS_TAP_LISTENER *tl = NULL;
#endif

    raise_nofile();
    lfd = listen_tcp(opt.addr);
    if (listen(lfd, 65535) != 0)
        die("listen");
    (void)fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    server_ctx = NULL;
    SSL_free(new_tls13_server("utls-server", &server_ctx));
    if (strcmp(opt.mode, "utls") == 0) {
#ifndef UTLS_SERVER_STOCK
        /* Opened here, while privileged; the workers (children of fork())
         * each open their own at once, and keep it after dropping root. */
        if ((tl = UTLS_tap_listen(lfd)) == NULL)
            die("UTLS_tap_listen");
#else
        die("--mode utls needs the fork build");
#endif
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    touch_ready(opt.ready, lfd);
    note("serve %s on %s, %ld worker(s)", opt.mode, opt.addr, opt.workers);
    if (opt.workers <= 1)
        return worker(lfd, 0);
    kids = calloc((size_t)opt.workers, sizeof(*kids));
    for (i = 0; i < opt.workers; i++) {
        if ((kids[i] = fork()) < 0)
            die("fork");
        if (kids[i] == 0)
            _exit(worker(lfd, (int)i));
    }
#ifndef UTLS_SERVER_STOCK
    /* The master accepts nothing: its capture stops taking the port. */
    UTLS_tap_listener_free(tl);
#endif
    while (!stop)
        pause();
    for (i = 0; i < opt.workers; i++)
        kill(kids[i], SIGTERM);
    for (i = 0; i < opt.workers; i++)
        waitpid(kids[i], NULL, 0);
    return 0;
}

/* --- load -------------------------------------------------------------------- */

/* host_cpu: the whole host's CPU counters from /proc/stat, in clock ticks.
 * busy_ticks is the tick-sampled busy time (user, nice, system, irq, softirq,
 * steal); idle_ticks (idle + iowait) is kept by the tickless-idle code from
 * the exact moments each CPU enters and leaves idle.  On a VM with tickless
 * idle, work done in short bursts between halts is mostly missed by the
 * sampling tick (measured here: 150-380 ms sampled against 1.9-2.0 s from
 * the idle time over the same 4 s), so the load's busy time is taken as
 * online CPUs x wall time - idle, and the sampled figure is only reported. */
typedef struct {
    unsigned long long busy_ticks, idle_ticks;
} host_cpu;

/* tcp_segs: this network namespace's TCP segments received and sent
 * (/proc/net/snmp InSegs, OutSegs): over the load's window, in the sender's
 * namespace, OutSegs are the data segments and retransmissions, InSegs the
 * receiver's ACKs, each of which the testbed also forwards. */
static void tcp_segs(unsigned long long *in, unsigned long long *out)
{
    FILE *f = fopen("/proc/net/snmp", "r");
    char line[1024], head[1024] = "";

    *in = *out = 0;
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Tcp: ", 5) != 0)
            continue;
        if (head[0] == '\0') {
            memcpy(head, line, sizeof(head));
            continue;
        }
        {
            char *hs, *vs, *h = strtok_r(head + 5, " \n", &hs), *v = strtok_r(line + 5, " \n", &vs);

            for (; h != NULL && v != NULL; h = strtok_r(NULL, " \n", &hs), v = strtok_r(NULL, " \n", &vs)) {
                if (strcmp(h, "InSegs") == 0)
                    *in = strtoull(v, NULL, 10);
                else if (strcmp(h, "OutSegs") == 0)
                    *out = strtoull(v, NULL, 10);
            }
        }
        break;
    }
    fclose(f);
}

static host_cpu host_cpu_now(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    host_cpu h = {0, 0};

    if (f == NULL)
        return h;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7])
        != 8)
        memset(v, 0, sizeof(v));
    fclose(f);
    h.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    h.idle_ticks = v[3] + v[4];
    return h;
}

typedef struct {
    int fd;
    SSL *ssl;
    int state; /* 0 connecting, 1 handshaking, 2 ready, 3 failed */
    uint32_t seq;
} lconn;

static int load(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    lconn *L;
    SSL_CTX *ctx;
    int ep;
    long started = 0, ready = 0, failed = 0, i, in_burst = 0;
    lconn *cur = NULL;
    uint64_t t0, deadline, sent = 0, write_fail = 0, next, interval, send_t0, send_t1;
    host_cpu cpu0, cpu1;
    unsigned long long in0, out0, in1, out1;
    double tck, busy_ms;
    long ncpu;
    unsigned char *msg;
    struct epoll_event evs[256];
    FILE *out;

    raise_nofile();
    parse_addr(opt.addr, SOCK_STREAM, &ss, &sl);
    if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
        die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    L = calloc((size_t)opt.conns, sizeof(*L));
    msg = malloc((size_t)opt.size);
    if (L == NULL || msg == NULL || opt.size < HDR_LEN || opt.size > MAX_PLAIN)
        die("bad --conns or --size");
    if (opt.burst < 1 || opt.burst > 1000)
        die("--burst wants 1 to 1000 records in a row");
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("epoll_create1");
    t0 = now_ns();
    /* Handshakes, at most MAX_HANDSHAKING at a time. */
    while (ready + failed < opt.conns && now_ns() - t0 < 120000000000ull) {
        int n, k;

        while (started < opt.conns && started - ready - failed < MAX_HANDSHAKING) {
            lconn *c = &L[started];
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT};
            int one = 1;

            c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c->fd < 0)
                die("socket: %s", strerror(errno));
            (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            if (connect(c->fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS)
                die("connect: %s", strerror(errno));
            c->ssl = SSL_new(ctx);
            SSL_set_fd(c->ssl, c->fd);
            SSL_set_connect_state(c->ssl);
            ev.data.u64 = (uint64_t)started;
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            started++;
        }
        n = epoll_wait(ep, evs, 256, 100);
        for (k = 0; k < n; k++) {
            lconn *c = &L[evs[k].data.u64];
            int r;

            if (c->state >= 2)
                continue;
            r = SSL_connect(c->ssl);
            if (r == 1) {
                struct epoll_event ev = {.events = EPOLLIN};

                c->state = 2;
                ready++;
                ev.data.u64 = evs[k].data.u64;
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            } else {
                int e = SSL_get_error(c->ssl, r);

                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                    c->state = 3;
                    failed++;
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    ERR_clear_error();
                }
            }
        }
    }
    note("load: %ld connections ready, %ld failed, in %.1f s", ready, failed,
         (now_ns() - t0) / 1e9);
    /* The load: records dealt round robin over the ready connections,
     * opt.burst in a row to each. */
    interval = 1000000000ull / (uint64_t)(opt.rate > 0 ? opt.rate : 1);
    cpu0 = host_cpu_now();
    tcp_segs(&in0, &out0);
    send_t0 = now_ns();
    next = now_ns();
    deadline = next + (uint64_t)opt.duration_ms * 1000000u;
    i = 0;
    while (next < deadline && !stop) {
        lconn *c;
        long tries = 0;
        size_t j;
        int r;

        sleep_until(next);
        next += interval;
        if (in_burst > 0 && cur != NULL && cur->state == 2) {
            c = cur;
        } else {
            do {
                c = &L[i];
                i = (i + 1) % opt.conns;
            } while (c->state != 2 && ++tries < opt.conns);
            if (c->state != 2)
                break;
            cur = c;
            in_burst = opt.burst;
        }
        in_burst--;
        put32(msg, (uint32_t)(c - L));
        put32(msg + 4, c->seq);
        for (j = HDR_LEN; j < (size_t)opt.size; j++)
            msg[j] = pattern((uint32_t)(c - L), c->seq, j);
        put64(msg + 8, now_ns());
        r = SSL_write(c->ssl, msg, (int)opt.size);
        if (r == (int)opt.size) {
            c->seq++;
            sent++;
        } else {
            /* a full socket buffer: this load is too much for the path */
            write_fail++;
            ERR_clear_error();
        }
    }
    /* Let the last records and their retransmissions arrive: until the
     * server's kernel has acknowledged every byte sent (a tail loss can take
     * several retransmission timeouts), at most 20 s, then one RTT for the
     * server to read them. Connections checked once stay done: nothing more
     * is sent on them. */
    {
        uint64_t give_up = now_ns() + 20000000000ull;
        long k = 0;

        while (k < opt.conns && now_ns() < give_up && !stop) {
            int unacked = 0;

            if (L[k].state == 2 && ioctl(L[k].fd, SIOCOUTQ, &unacked) == 0 && unacked > 0) {
                sleep_until(now_ns() + 50000000u);
                continue;
            }
            k++;
        }
        sleep_until(now_ns() + (uint64_t)opt.rtt_ms * 1000000u + 200000000u);
    }
    cpu1 = host_cpu_now();
    tcp_segs(&in1, &out1);
    send_t1 = now_ns();
    if (opt.mark != NULL) {
        FILE *m = fopen(opt.mark, "w");

        if (m != NULL)
            fclose(m);
    }
    /* Connections open and idle, e.g. while bench/scale measures another flow. */
    if (opt.hold_ms > 0) {
        uint64_t until = now_ns() + (uint64_t)opt.hold_ms * 1000000u;

        /* ... until then, or until the --release file appears */
        while (now_ns() < until && !stop
               && (opt.release == NULL || access(opt.release, F_OK) != 0))
            sleep_until(now_ns() + 100000000u);
    }
    for (i = 0; i < opt.conns; i++) {
        if (L[i].ssl != NULL) {
            if (L[i].state == 2)
                (void)SSL_shutdown(L[i].ssl);
            SSL_free(L[i].ssl);
            close(L[i].fd);
        }
    }
    tck = (double)sysconf(_SC_CLK_TCK);
    ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    busy_ms = (double)ncpu * (double)(send_t1 - send_t0) / 1e6
              - (double)(cpu1.idle_ticks - cpu0.idle_ticks) * 1000.0 / tck;
    if (busy_ms < 0)
        busy_ms = 0;
    if ((out = opt.out != NULL ? fopen(opt.out, "a") : stdout) == NULL)
        die("cannot open %s", opt.out);
    fprintf(out,
            "{\"event\":\"load\",\"conns\":%ld,\"ready\":%ld,\"failed\":%ld,\"sent\":%llu,"
            "\"write_fail\":%llu,\"rate\":%ld,\"burst\":%ld,\"size\":%ld,\"duration_ms\":%ld,"
            "\"host_cpu_ms\":%.1f,\"host_cpu_sampled_ms\":%.1f,\"cpus\":%ld,"
            "\"segs_out\":%llu,\"segs_in\":%llu,"
            "\"window_s\":%.3f,\"handshake_s\":%.2f}\n",
            opt.conns, ready, failed, (unsigned long long)sent, (unsigned long long)write_fail,
            opt.rate, opt.burst, opt.size, opt.duration_ms, busy_ms,
            (double)(cpu1.busy_ticks - cpu0.busy_ticks) * 1000.0 / tck, ncpu, out1 - out0, in1 - in0,
            (send_t1 - send_t0) / 1e9, (send_t0 - t0) / 1e9);
    if (out != stdout)
        fclose(out);
    SSL_CTX_free(ctx);
    return failed == 0 && write_fail == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const example_option opts[] = {
        {"--listen", EXAMPLE_OPT_STR, &opt.addr},
        {"--connect", EXAMPLE_OPT_STR, &opt.addr},
        {"--mode", EXAMPLE_OPT_STR, &opt.mode},
        {"--workers", EXAMPLE_OPT_LONG, &opt.workers},
        {"--worker-conns", EXAMPLE_OPT_LONG, &opt.worker_conns},
        {"--drop-to", EXAMPLE_OPT_STR, &opt.drop_to},
        {"--accept-delay-ms", EXAMPLE_OPT_LONG, &opt.accept_delay_ms},
        {"--rtt-ms", EXAMPLE_OPT_LONG, &opt.rtt_ms},
        {"--size", EXAMPLE_OPT_LONG, &opt.size},
        {"--conns", EXAMPLE_OPT_LONG, &opt.conns},
        {"--rate", EXAMPLE_OPT_LONG, &opt.rate},
        {"--burst", EXAMPLE_OPT_LONG, &opt.burst},
        {"--duration-ms", EXAMPLE_OPT_LONG, &opt.duration_ms},
        {"--hold-ms", EXAMPLE_OPT_LONG, &opt.hold_ms},
        {"--mark", EXAMPLE_OPT_STR, &opt.mark},
        {"--release", EXAMPLE_OPT_STR, &opt.release},
        {"--ready", EXAMPLE_OPT_STR, &opt.ready},
        {"--out", EXAMPLE_OPT_STR, &opt.out},
        {"--records", EXAMPLE_OPT_STR, &opt.records},
        {"--require", EXAMPLE_OPT_STR, &opt.require},
        {"--quiet", EXAMPLE_OPT_FLAG, &opt.quiet},
    };
    int role;

    example_name = "utls-server";
    if (argc < 2)
        usage();
    if (strcmp(argv[1], "serve") == 0)
        role = 0;
    else if (strcmp(argv[1], "load") == 0)
        role = 1;
    else
        usage();
    parse_options(argc, argv, 2, opts, sizeof(opts) / sizeof(opts[0]), usage);
    example_quiet = opt.quiet;
    if (opt.addr == NULL || (strcmp(opt.mode, "tls") != 0 && strcmp(opt.mode, "utls") != 0))
        usage();
    signal(SIGPIPE, SIG_IGN);
    if (role == 1) {
        signal(SIGTERM, on_signal);
        return load();
    }
    return serve();
}
