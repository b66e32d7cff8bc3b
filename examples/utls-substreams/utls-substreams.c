/*
 * utls-substreams: K independent ordered streams of timed messages over one
 * TCP connection, the multistream experiment of docs/substreams.md.
 *
 *   utls-substreams recv --mode tls|utls_streams --listen ADDR:PORT [options]
 *   utls-substreams send --mode tls|utls_streams --connect ADDR:PORT [options]
 *
 * The sender (the TLS client) sends --count messages in total over --streams
 * K streams: stream k gets a message every --interval ms, the streams
 * staggered by interval/K, so message j (j = 0, 1, ...) is stream j % K's
 * message number j / K, due at start + j * interval / K. Each message is one
 * record of --size plaintext bytes carrying its stream, its per-stream
 * number, its send time (CLOCK_MONOTONIC, shared by the network namespaces of
 * one host) and a pattern the receiver checks.
 *
 * Modes:
 *   tls           one stock TLS connection, in order: every message is one
 *                 SSL_write; the receiver frames the byte stream into
 *                 --size messages. Build with -DUTLS_SUBSTREAMS_STOCK against
 *                 the system libssl (utls-substreams-stock).
 *   utls_streams  the fork: the receiver taps the connection
 *                 (UTLS_tap_listen before accept, UTLS_BIO_new_tap),
 *                 sets SSL_MODE_UNORDERED, and both ends use sub-streams
 *                 (UTLS_stream_enable, UTLS_stream_write, UTLS_stream_read).
 *
 * The receiver writes one JSON line per message:
 *   {"s":2,"q":17,"send_ns":...,"recv_ns":...,"held":0,"ooo":1,"off":..,"wl":..,"ok":1}
 * (off, wl: its record's stream offset and wire length, utls_streams mode)
 * and a last line {"event":"end",...} with the totals, per-stream counts and
 * The plumbing (die/note, clocks, addresses, sockets, the certificate, the
 * --ready file) is in ../common/example_util.[ch], shared with the other
 * streaming example; everything uTLS is in this file.
 *
 * the order check: a message whose number is not its stream's next is an
 * "order_violation". Exit status 0 when every message arrived exactly once,
 * intact and in its stream's order; 1 otherwise; 2 on setup errors; 77 in
 * utls_streams mode without CAP_NET_RAW and with --skip-without-tap.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "example_util.h"
#ifndef UTLS_SUBSTREAMS_STOCK
# include <openssl/utls.h>
#endif

#define MSG_HDR 32           /* magic, stream, seq, send_ns, len, pad */
#define MSG_MAGIC 0x6d6d7373u /* "ssmm" */
#define MAX_MSG 16000
#define MAX_STREAMS 64

enum mode { MODE_TLS, MODE_UTLS_STREAMS };

static struct {
    enum mode mode;
    const char *addr, *out, *ready, *require, *cc;
    long count, size, streams, timeout_s;
    double interval_ms;
    int skip_without_tap, quiet;
} opt = {MODE_TLS, NULL, NULL, NULL, NULL, NULL, 1000, 1200, 4, 0, 20.0, 0, 0};

static FILE *logf_;

/* The --mode names, in the order of enum mode. */
static const char *const mode_names[] = {"tls", "utls_streams"};

static const char *mode_name(void)
{
    return mode_names[opt.mode];
}

/* Whether the libssl mapped into this process is the fork (it exports the
 * sub-stream API; a stock libssl does not). */
static int loaded_is_fork(void)
{
    return symbol_loaded("UTLS_stream_read");
}

/* --- Messages ------------------------------------------------------------ */

static unsigned char pattern(uint32_t stream, uint64_t seq, size_t j)
{
    return (unsigned char)(stream * 89u + seq * 131u + j * 7u + (j >> 8));
}

static void msg_fill(unsigned char *p, uint32_t stream, uint64_t seq, uint64_t send_ns)
{
    put32(p, MSG_MAGIC);
    put32(p + 4, stream);
    put64(p + 8, seq);
    put64(p + 16, send_ns);
    put32(p + 24, (uint32_t)opt.size);
    put32(p + 28, 0);
    for (size_t j = MSG_HDR; j < (size_t)opt.size; j++)
        p[j] = pattern(stream, seq, j);
}

/* 1 if |p| is an intact message of this run; sets stream, seq and time. */
static int msg_check(const unsigned char *p, size_t len, uint32_t *stream, uint64_t *seq,
                     uint64_t *send_ns)
{
    if (len != (size_t)opt.size || get32(p) != MSG_MAGIC || get32(p + 24) != len)
        return 0;
    *stream = get32(p + 4);
    *seq = get64(p + 8);
    *send_ns = get64(p + 16);
    if (*stream >= (uint32_t)opt.streams)
        return 0;
    for (size_t j = MSG_HDR; j < len; j++)
        if (p[j] != pattern(*stream, *seq, j))
            return 0;
    return 1;
}

/* Messages of stream k: those j < count with j % K == k. */
static uint64_t stream_total(uint32_t k)
{
    return (uint64_t)(opt.count / opt.streams + (k < (uint64_t)(opt.count % opt.streams)));
}

/* --- Receiver ------------------------------------------------------------ */

static uint64_t next_seq[MAX_STREAMS], got[MAX_STREAMS];
static long num_ok, num_dup, num_bad, num_order, num_held, num_ooo;

/* Where the message's record was in the TCP stream (utls_streams mode), for
 * the benchmark's oracle; 0/0 when unknown. */
static uint64_t rec_offset;
static size_t rec_wire_len;

static void deliver(const unsigned char *p, size_t len, uint64_t recv_ns, int have_info,
                    uint32_t info_stream, uint64_t info_seq, int held, int ooo)
{
    uint32_t s;
    uint64_t q, send_ns;

    if (!msg_check(p, len, &s, &q, &send_ns)
        || (have_info && (info_stream != s || info_seq != q))) {
        num_bad++;
        fprintf(logf_, "{\"len\":%zu,\"recv_ns\":%llu,\"ok\":0}\n", len,
                (unsigned long long)recv_ns);
        return;
    }
    if (q < next_seq[s]) {
        num_dup++;
        fprintf(logf_, "{\"s\":%u,\"q\":%llu,\"dup\":1,\"ok\":0}\n", s, (unsigned long long)q);
        return;
    }
    if (q != next_seq[s])
        num_order++; /* a message of this stream is skipped: out of its order */
    next_seq[s] = q + 1;
    got[s]++;
    num_ok++;
    num_held += held;
    num_ooo += ooo;
    fprintf(logf_,
            "{\"s\":%u,\"q\":%llu,\"send_ns\":%llu,\"recv_ns\":%llu,\"held\":%d,\"ooo\":%d",
            s, (unsigned long long)q, (unsigned long long)send_ns, (unsigned long long)recv_ns,
            held, ooo);
    if (rec_wire_len > 0)
        fprintf(logf_, ",\"off\":%llu,\"wl\":%zu", (unsigned long long)rec_offset, rec_wire_len);
    fprintf(logf_, ",\"ok\":1}\n");
    if (!opt.quiet && num_ok % 1000 == 0)
        note("recv %s: %ld messages", mode_name(), num_ok);
}

static void log_end(SSL *ssl, BIO *tap)
{
    long missing = 0;

    for (uint32_t k = 0; k < (uint32_t)opt.streams; k++)
        missing += (long)(stream_total(k) - got[k]);
    fprintf(logf_,
            "{\"event\":\"end\",\"mode\":\"%s\",\"received\":%ld,\"missing\":%ld,"
            "\"duplicates\":%ld,\"bad\":%ld,\"order_violations\":%ld,\"held\":%ld,"
            "\"from_out_of_order_records\":%ld,\"per_stream\":[",
            mode_name(), num_ok, missing, num_dup, num_bad, num_order, num_held, num_ooo);
    for (uint32_t k = 0; k < (uint32_t)opt.streams; k++)
        fprintf(logf_, "%s{\"stream\":%u,\"received\":%llu,\"expected\":%llu}", k ? "," : "", k,
                (unsigned long long)got[k], (unsigned long long)stream_total(k));
    fprintf(logf_, "]");
#ifndef UTLS_SUBSTREAMS_STOCK
    if (opt.mode == MODE_UTLS_STREAMS) {
        UTLS_STATS us;
        UTLS_STREAM_STATS ss;
        UTLS_TAP_STATS ts;

        if (UTLS_get_stats(ssl, &us))
            fprintf(logf_,
                    ",\"utls\":{\"records_in_order\":%llu,\"records_out_of_order\":%llu,"
                    "\"fallback\":\"%s\"}",
                    (unsigned long long)us.records_in_order,
                    (unsigned long long)us.records_out_of_order, UTLS_fallback_string(us.fallback));
        if (UTLS_stream_get_stats(ssl, &ss))
            fprintf(logf_,
                    ",\"streams\":{\"messages_received\":%llu,\"messages_held\":%llu,"
                    "\"max_held\":%zu,\"held_now\":%zu,\"failed_reason\":%d}",
                    (unsigned long long)ss.messages_received,
                    (unsigned long long)ss.messages_held, ss.max_held, ss.held_now,
                    ss.failed_reason);
        if (tap != NULL && UTLS_BIO_tap_get_stats(tap, &ts))
            fprintf(logf_, ",\"tap\":{\"packets\":%llu,\"ring_drops\":%llu}",
                    (unsigned long long)ts.packets, (unsigned long long)ts.ring_drops);
    }
#else
    (void)ssl;
    (void)tap;
#endif
    fprintf(logf_, "}\n");
    fflush(logf_);
    note("recv %s: %ld of %ld messages, %ld missing, %ld duplicates, %ld bad, %ld out of "
         "their stream's order, %ld held",
         mode_name(), num_ok, opt.count, missing, num_dup, num_bad, num_order, num_held);
}

static int do_recv(void)
{
    int lfd, fd;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *bio = NULL, *tap = NULL;
    static unsigned char buf[SSL3_RT_MAX_PLAIN_LENGTH], msg[MAX_MSG];
    size_t have = 0;
#ifndef UTLS_SUBSTREAMS_STOCK
    UTLS_TAP_LISTENER *tl = NULL;
#endif

    lfd = listen_tcp(opt.addr);
#ifndef UTLS_SUBSTREAMS_STOCK
    if (opt.mode == MODE_UTLS_STREAMS && (tl = UTLS_tap_listen(lfd)) == NULL) {
        unsigned long e = ERR_peek_error();

        if (opt.skip_without_tap && ERR_GET_LIB(e) == UTLS_get_lib()
            && ERR_GET_REASON(e) == UTLS_R_TAP_PERMISSION) {
            fprintf(stderr, "utls-substreams: SKIP: the tap needs CAP_NET_RAW\n");
            exit(77);
        }
        die("UTLS_tap_listen failed");
    }
#endif
    touch_ready(opt.ready, lfd);
    fd = accept_tcp(lfd);
    ssl = new_tls13_server("utls-substreams", &ctx);
#ifndef UTLS_SUBSTREAMS_STOCK
    if (opt.mode == MODE_UTLS_STREAMS) {
        SSL_set_mode(ssl, SSL_MODE_UNORDERED);
        if ((tap = UTLS_BIO_new_tap(fd, BIO_CLOSE)) == NULL)
            die("UTLS_BIO_new_tap failed");
        bio = tap;
        if (!UTLS_stream_enable(ssl, 1))
            die("UTLS_stream_enable failed");
    }
#endif
    accept_tls(ssl, bio, fd, mode_name());
    while (num_ok + num_bad + num_dup < opt.count) {
        size_t n = 0;
        int ok;
        uint64_t t;

#ifndef UTLS_SUBSTREAMS_STOCK
        if (opt.mode == MODE_UTLS_STREAMS) {
            UTLS_STREAM_INFO info;

            ok = UTLS_stream_read(ssl, buf, sizeof(buf), &n, &info);
            t = now_ns();
            if (ok) {
                rec_offset = info.record.stream_offset;
                rec_wire_len = info.record.wire_len;
                deliver(buf, n, t, 1, info.stream_id, info.seq, info.held,
                        info.record.out_of_order != 0);
                continue;
            }
        } else
#endif
        {
            ok = SSL_read_ex(ssl, buf, sizeof(buf), &n);
            t = now_ns();
            if (ok) {
                /* One ordered byte stream: cut it into --size messages. */
                for (size_t k = 0; k < n;) {
                    if (frame_take(msg, &have, (size_t)opt.size, buf, n, &k))
                        deliver(msg, (size_t)opt.size, t, 0, 0, 0, 0, 0);
                }
                continue;
            }
        }
        switch (SSL_get_error(ssl, 0)) {
        case SSL_ERROR_WANT_READ:
            continue;
        case SSL_ERROR_ZERO_RETURN:
            note("recv %s: the sender closed", mode_name());
            goto done;
        default:
            ERR_print_errors_fp(stderr);
            note("recv %s: read failed", mode_name());
            goto done;
        }
    }
done:
    log_end(ssl, tap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(lfd);
#ifndef UTLS_SUBSTREAMS_STOCK
    UTLS_tap_listener_free(tl);
#endif
    return num_ok == opt.count && num_bad == 0 && num_dup == 0 && num_order == 0 ? 0 : 1;
}

/* --- Sender -------------------------------------------------------------- */

static int do_send(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    static unsigned char m[MAX_MSG];
    uint64_t start;
    double step_ns = opt.interval_ms * 1e6 / (double)opt.streams;

    parse_addr(opt.addr, SOCK_STREAM, &ss, &sl);
    /* TCP_NODELAY; --cc picks the congestion control (see bench/latency). */
    fd = connect_retry(SOCK_STREAM, &ss, sl, opt.addr, opt.cc);
    if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
        die("SSL_CTX_new");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if ((ssl = SSL_new(ctx)) == NULL || !SSL_set_fd(ssl, fd))
        die("SSL_new");
    if (SSL_connect(ssl) != 1)
        die("handshake with %s failed", opt.addr);
#ifndef UTLS_SUBSTREAMS_STOCK
    if (opt.mode == MODE_UTLS_STREAMS && !UTLS_stream_enable(ssl, 1))
        die("UTLS_stream_enable failed");
#endif
    note("send %s: %ld messages of %ld bytes over %ld streams, each stream every %g ms",
         mode_name(), opt.count, opt.size, opt.streams, opt.interval_ms);
    start = now_ns() + 10000000u;
    for (long j = 0; j < opt.count; j++) {
        uint64_t due = start + (uint64_t)((double)j * step_ns);
        uint32_t k = (uint32_t)(j % opt.streams);
        uint64_t seq = (uint64_t)(j / opt.streams);
        size_t w;
        int ok;

        sleep_until(due);
        msg_fill(m, k, seq, now_ns());
#ifndef UTLS_SUBSTREAMS_STOCK
        if (opt.mode == MODE_UTLS_STREAMS)
            ok = UTLS_stream_write(ssl, k, m, (size_t)opt.size);
        else
#endif
            ok = SSL_write_ex(ssl, m, (size_t)opt.size, &w) && w == (size_t)opt.size;
        if (!ok)
            die("write of message %ld failed", j);
    }
    fprintf(logf_, "{\"event\":\"end\",\"sent\":%ld}\n", opt.count);
    fflush(logf_);
    SSL_shutdown(ssl);
    drain_until_closed(fd, m, sizeof(m));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: utls-substreams send|recv --mode tls|utls_streams (--listen|--connect) "
            "HOST:PORT\n"
            "         [--count N] [--streams K] [--size S] [--interval MS] [--out FILE]\n"
            "         [--ready FILE] [--require fork|stock] [--timeout S] [--skip-without-tap]\n"
            "         [--quiet] [--cc NAME]\n"
            "  N messages in total (default 1000) over K streams (default 4, at most %d), each\n"
            "  stream a message every MS ms (default 20), S plaintext bytes each (default\n"
            "  1200, %d..%d). JSON lines go to --out (default stdout). --cc sets the\n"
            "  sender's TCP congestion control (TCP_CONGESTION).\n",
            MAX_STREAMS, MSG_HDR, MAX_MSG);
    exit(2);
}

int main(int argc, char **argv)
{
    int sender, rc;
    const char *mode = "tls";
    const example_option opts[] = {
        EXAMPLE_STREAM_OPTIONS(opt, mode),
        {"--streams", EXAMPLE_OPT_LONG, &opt.streams},
    };

    example_name = "utls-substreams";
    sender = parse_role(argc >= 2 ? argv[1] : NULL, usage);
    parse_options(argc, argv, 2, opts, sizeof(opts) / sizeof(opts[0]), usage);
    example_quiet = opt.quiet;
    opt.mode = (enum mode)parse_choice(mode, mode_names, sizeof(mode_names) / sizeof(mode_names[0]),
                                       usage);
    if (opt.addr == NULL || opt.count <= 0 || opt.streams <= 0 || opt.streams > MAX_STREAMS
        || opt.size < MSG_HDR || opt.size > MAX_MSG || opt.interval_ms < 0)
        usage();
#ifdef UTLS_SUBSTREAMS_STOCK
    if (opt.mode == MODE_UTLS_STREAMS)
        die("utls_streams mode: this is the stock build; use utls-substreams");
    check_require(opt.require, loaded_is_fork(), 1);
#else
    check_require(opt.require, loaded_is_fork(), 0);
#endif
    logf_ = start_log(opt.out, opt.timeout_s);
    {
        /* real_minus_mono_ns maps capture timestamps onto this log's clock. */
        fprintf(logf_,
                "{\"event\":\"start\",\"role\":\"%s\",\"mode\":\"%s\",\"libssl\":\"%s\","
                "\"fork\":%d,\"count\":%ld,\"streams\":%ld,\"size\":%ld,\"interval_ms\":%g,"
                "\"real_minus_mono_ns\":%lld}\n",
                sender ? "send" : "recv", mode_name(), loaded_libssl(), loaded_is_fork(),
                opt.count, opt.streams, opt.size, opt.interval_ms,
                (long long)real_minus_mono_ns());
    }
    fflush(logf_);
    rc = sender ? do_send() : do_recv();
    end_log(logf_);
    return rc;
}
