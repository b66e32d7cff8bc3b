/*
 * utls-stream: a timed record stream over TLS, uTLS or DTLS, with a
 * per-record delivery log. Minion's streaming experiment (N records of S
 * bytes every T ms) as one program with two subcommands:
 *
 *   utls-stream recv --mode tls|utls|dtls --listen ADDR:PORT [options]
 *   utls-stream send --mode tls|utls|dtls --connect ADDR:PORT [options]
 *
 * The sender is the TLS (or DTLS) client; it writes one record per SSL_write
 * at fixed times (an absolute schedule: start + i*T) with Nagle off. S is the
 * record's PLAINTEXT size: with TLS 1.3 AES-GCM a record carries 22 bytes more
 * on the wire (5 header, 1 content type, 16 tag), with DTLS 1.2 AES-GCM 37.
 * Every payload starts with the record's index and its send time
 * (CLOCK_MONOTONIC, which is host-wide: network namespaces on one host share
 * it, so the receiver's clock is the sender's) and is otherwise filled with a
 * pattern derived from the index, which the receiver checks.
 *
 * The receiver is the server and writes one JSON line per record delivered:
 *
 *   {"i":17,"send_ns":...,"recv_ns":...,"ooo":1,"arrival_ns":...,"seq":17,
 *    "offset":26054,"ok":1}
 *
 * recv_ns is when the read call returned the record (CLOCK_MONOTONIC). In
 * utls mode ooo/arrival_ns/seq/offset come from UTLS_read_record's
 * UTLS_RECORD_INFO; otherwise ooo is 0 and the others are absent. A first
 * line ("event":"start") names the libssl actually mapped into the process
 * (dladdr of SSL_read) and whether it is the uTLS fork; a last line
 * ("event":"end") has the totals, the uTLS counters and the tap's counters.
 *
 * Modes:
 *   tls   stock in-order TLS: SSL_read on a TCP socket. Build this program
 *         without the fork (-DUTLS_STREAM_STOCK, linked with the system
 *         libssl) to run it; --require stock checks at run time.
 *   utls  the fork: the receiver opens a listener tap (UTLS_tap_listen)
 *         before it accepts, reads through UTLS_BIO_new_tap with
 *         SSL_MODE_UNORDERED, one record per UTLS_read_record. Needs
 *         CAP_NET_RAW.
 *   dtls  DTLS 1.2 over UDP: each record is one datagram; a lost datagram is
 *         lost. The receiver stops at the peer's close_notify, after N
 *         records, or after --idle-ms without data.
 *   ucobs no TLS: plain TCP, one uCOBS datagram per message
 *         (UTLS_ucobs_send); the receiver reads with UTLS_ucobs_recv and the
 *         tap (listener tap before accept, like utls). Needs CAP_NET_RAW.
 *         The payload has no zero byte after its 24-byte header, so every
 *         frame is S + 2 + ceil((S - 24) / 254) bytes: S = 1440 makes 1448.
 *
 * The plumbing (die/note, clocks, addresses, sockets, the certificate, the
 * --ready file) is in ../common/example_util.[ch], shared with the other
 * streaming example; everything uTLS is in this file.
 *
 * Exit status: 0 when every record arrived exactly once and intact (dtls:
 * none duplicated or corrupted), 1 otherwise, 2 on setup errors, 77 when
 * utls mode cannot open the tap (no CAP_NET_RAW) and --skip-without-tap.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "example_util.h"
#ifndef UTLS_STREAM_STOCK
# include <openssl/utls.h>
#endif

#define HDR_LEN 24
#define MAGIC 0x6d727473u /* "strm" little-endian */
#define MAX_PLAIN 16384

enum mode { MODE_TLS, MODE_UTLS, MODE_DTLS, MODE_UCOBS };

static struct {
    enum mode mode;
    const char *addr;
    long count;
    long size;
    double interval_ms;
    const char *out;
    const char *ready;
    const char *require;
    long idle_ms;
    long timeout_s;
    int skip_without_tap;
    int quiet;
    const char *cc;
} opt = {MODE_TLS, NULL, 1000, 1448, 20.0, NULL, NULL, NULL, 3000, 0, 0, 0, NULL};

static FILE *logf_;

/* The --mode names, in the order of enum mode. */
static const char *const mode_names[] = {"tls", "utls", "dtls", "ucobs"};

static const char *mode_name(enum mode m)
{
    return mode_names[m];
}

/* --- Which libssl is this? ------------------------------------------------ */

/* The fork exports UTLS_version; a stock libssl does not. */
static int loaded_is_fork(void)
{
    return symbol_loaded("UTLS_version");
}

static void check_library(void)
{
    int fork = loaded_is_fork();

    if ((opt.mode == MODE_UTLS || opt.mode == MODE_UCOBS) && !fork)
        die("%s mode needs the uTLS fork, but %s is loaded", mode_name(opt.mode), loaded_libssl());
#ifdef UTLS_STREAM_STOCK
    check_require(opt.require, fork, 1);
#else
    check_require(opt.require, fork, 0);
#endif
}

static void log_start(const char *role)
{
    fprintf(logf_,
            "{\"event\":\"start\",\"role\":\"%s\",\"mode\":\"%s\",\"libssl\":\"%s\",\"fork\":%d,"
            "\"openssl\":\"%s\",\"count\":%ld,\"size\":%ld,\"interval_ms\":%g,"
            "\"real_minus_mono_ns\":%lld,\"pid\":%d}\n",
            role, mode_name(opt.mode), loaded_libssl(), loaded_is_fork(),
            OpenSSL_version(OPENSSL_VERSION), opt.count, opt.size, opt.interval_ms,
            (long long)real_minus_mono_ns(), (int)getpid());
    fflush(logf_);
}

/* --- Payload ---------------------------------------------------------------- */

static unsigned char pattern(uint32_t idx, size_t j)
{
    unsigned char c = (unsigned char)(idx * 131u + j * 7u + (j >> 8));

    /* ucobs: no zero after the header, so every frame has the same size
     * (see ucobs_frame_len) */
    return c == 0 && opt.mode == MODE_UCOBS ? 0xA5 : c;
}

#ifndef UTLS_STREAM_STOCK
/* ucobs_frame_len returns the size on the wire of the uCOBS frame of |p|:
 * the two markers plus its COBS encoding (one code byte per block; a block
 * ends at a zero, or after 254 data bytes). */
static size_t ucobs_frame_len(const unsigned char *p, size_t len)
{
    size_t enc = 0, run = 0, i;
    int last_full = 0;

    for (i = 0; i < len; i++) {
        if (p[i] == 0) {
            enc += run + 1;
            run = 0;
            last_full = 0;
        } else if (++run == 254) {
            enc += 255;
            run = 0;
            last_full = 1;
        } else {
            last_full = 0;
        }
    }
    if (run > 0 || !last_full)
        enc += run + 1;
    return enc + 2;
}
#endif

static void fill_payload(unsigned char *p, size_t len, uint32_t idx, uint64_t send_ns)
{
    size_t j;

    put32(p, MAGIC);
    put32(p + 4, idx);
    put64(p + 8, send_ns);
    put32(p + 16, (uint32_t)len);
    put32(p + 20, 0);
    for (j = HDR_LEN; j < len; j++)
        p[j] = pattern(idx, j);
}

/* Returns 1 if |p| is an intact record of this stream, with its index and time. */
static int check_payload(const unsigned char *p, size_t len, uint32_t *idx, uint64_t *send_ns)
{
    size_t j;

    if (len != (size_t)opt.size || len < HDR_LEN || get32(p) != MAGIC || get32(p + 16) != len)
        return 0;
    *idx = get32(p + 4);
    *send_ns = get64(p + 8);
    for (j = HDR_LEN; j < len; j++)
        if (p[j] != pattern(*idx, j))
            return 0;
    return *idx < (uint64_t)opt.count;
}

/* --- Receiver ---------------------------------------------------------------- */

static record_log rl;
static long num_ooo;

static void deliver(const unsigned char *p, size_t len, uint64_t recv_ns, const char *extra)
{
    uint32_t idx = 0;
    uint64_t send_ns = 0;
    int ok = check_payload(p, len, &idx, &send_ns);

    if (record_log_add(&rl, logf_, ok, idx, len, send_ns, recv_ns, extra) && !opt.quiet &&
        rl.num_ok % 500 == 0)
        note("recv %s: %ld records (%ld out of order)", mode_name(opt.mode), rl.num_ok, num_ooo);
}

static void log_end(SSL *ssl, BIO *tapbio, uint64_t first_ns, uint64_t last_ns)
{
    long missing = 0, i;

    for (i = 0; i < opt.count; i++)
        missing += !rl.seen[i];
    fprintf(logf_,
            "{\"event\":\"end\",\"mode\":\"%s\",\"received\":%ld,\"missing\":%ld,\"duplicates\":%ld,"
            "\"bad\":%ld,\"out_of_order\":%ld,\"duration_s\":%.3f",
            mode_name(opt.mode), rl.num_ok, missing, rl.num_dup, rl.num_bad, num_ooo,
            last_ns > first_ns ? (double)(last_ns - first_ns) / 1e9 : 0.0);
#ifndef UTLS_STREAM_STOCK
    if (ssl != NULL && opt.mode == MODE_UTLS) {
        UTLS_STATS st;
        UTLS_TAP_STATS ts;

        if (UTLS_get_stats(ssl, &st))
            fprintf(logf_,
                    ",\"utls\":{\"records_in_order\":%llu,\"records_out_of_order\":%llu,"
                    "\"records_skipped\":%llu,\"probes\":%llu,\"soft_failures\":%llu,"
                    "\"fragments\":%llu,\"bytes_dropped\":%llu,\"fallback\":\"%s\"}",
                    (unsigned long long)st.records_in_order,
                    (unsigned long long)st.records_out_of_order,
                    (unsigned long long)st.records_skipped, (unsigned long long)st.probes,
                    (unsigned long long)st.soft_failures, (unsigned long long)st.fragments,
                    (unsigned long long)st.bytes_dropped, UTLS_fallback_string(st.fallback));
        if (tapbio != NULL && UTLS_BIO_tap_get_stats(tapbio, &ts))
            fprintf(logf_,
                    ",\"tap\":{\"packets\":%llu,\"payload_bytes\":%llu,\"fragments\":%llu,"
                    "\"ring_drops\":%llu,\"malformed\":%llu,\"last_byte_ns\":%llu}",
                    (unsigned long long)ts.packets, (unsigned long long)ts.payload_bytes,
                    (unsigned long long)ts.fragments, (unsigned long long)ts.ring_drops,
                    (unsigned long long)ts.malformed, (unsigned long long)ts.last_byte_ns);
    }
#else
    (void)ssl;
    (void)tapbio;
#endif
    fprintf(logf_, "}\n");
    fflush(logf_);
    note("recv %s: %ld of %ld records, %ld out of order, %ld missing, %ld duplicates, %ld bad",
         mode_name(opt.mode), rl.num_ok, opt.count, num_ooo, missing, rl.num_dup, rl.num_bad);
}

#ifndef UTLS_STREAM_STOCK
/* recv_ucobs: plain TCP, one uCOBS datagram per message, read with the tap
 * (UTLS_ucobs_new requires it). */
static int recv_ucobs(int fd)
{
    static unsigned char buf[MAX_PLAIN];
    uint64_t first_ns = 0, last_ns = 0;
    UTLS_UCOBS *u = UTLS_ucobs_new(fd, UTLS_UCOBS_REQUIRE_TAP);
    UTLS_UCOBS_STATS st;
    long missing = 0, i;

    if (u == NULL)
        die("UTLS_ucobs_new failed");
    note("recv ucobs: connected, reading with the tap");
    while (rl.num_ok + rl.num_bad + rl.num_dup < opt.count) {
        UTLS_UCOBS_INFO info;
        size_t n = 0;
        char extra[256];
        UTLS_UCOBS_RESULT r = UTLS_ucobs_recv(u, buf, sizeof(buf), &n, &info);
        uint64_t t = now_ns();

        if (r == UTLS_UCOBS_EOF) {
            note("recv ucobs: the sender closed");
            break;
        }
        if (r != UTLS_UCOBS_OK) {
            ERR_print_errors_fp(stderr);
            note("recv ucobs: read failed (%d)", (int)r);
            break;
        }
        num_ooo += info.out_of_order != 0;
        snprintf(extra, sizeof(extra),
                 ",\"ooo\":%d,\"arrival_ns\":%llu,\"offset\":%llu,\"wire_len\":%zu",
                 info.out_of_order != 0, (unsigned long long)info.arrival_ns,
                 (unsigned long long)info.offset, ucobs_frame_len(buf, n));
        if (first_ns == 0)
            first_ns = t;
        last_ns = t;
        deliver(buf, n, t, extra);
    }
    for (i = 0; i < opt.count; i++)
        missing += !rl.seen[i];
    UTLS_ucobs_get_stats(u, &st);
    fprintf(logf_,
            "{\"event\":\"end\",\"mode\":\"ucobs\",\"received\":%ld,\"missing\":%ld,"
            "\"duplicates\":%ld,\"bad\":%ld,\"out_of_order\":%ld,\"duration_s\":%.3f,"
            "\"ucobs\":{\"datagrams_in_order\":%llu,\"datagrams_out_of_order\":%llu,"
            "\"framing_errors\":%llu,\"held_back\":%llu,\"bytes_read\":%llu,"
            "\"fragment_bytes\":%llu,\"tapped\":%d},"
            "\"tap\":{\"packets\":%llu,\"payload_bytes\":%llu,\"fragments\":%llu,"
            "\"ring_drops\":%llu,\"malformed\":%llu}}\n",
            rl.num_ok, missing, rl.num_dup, rl.num_bad, num_ooo,
            last_ns > first_ns ? (double)(last_ns - first_ns) / 1e9 : 0.0,
            (unsigned long long)st.datagrams_in_order, (unsigned long long)st.datagrams_out_of_order,
            (unsigned long long)st.framing_errors, (unsigned long long)st.held_back,
            (unsigned long long)st.bytes_read, (unsigned long long)st.fragment_bytes, st.tapped,
            (unsigned long long)st.tap.packets, (unsigned long long)st.tap.payload_bytes,
            (unsigned long long)st.tap.fragments, (unsigned long long)st.tap.ring_drops,
            (unsigned long long)st.tap.malformed);
    fflush(logf_);
    note("recv ucobs: %ld of %ld datagrams, %ld out of order, %ld missing, %ld duplicates, %ld bad",
         rl.num_ok, opt.count, num_ooo, missing, rl.num_dup, rl.num_bad);
    UTLS_ucobs_free(u);
    return rl.num_ok == opt.count && rl.num_bad == 0 && rl.num_dup == 0 ? 0 : 1;
}
#endif

static int recv_tcp(void)
{
    int lfd, fd;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *bio = NULL, *tapbio = NULL;
    static unsigned char buf[MAX_PLAIN + 64], msg[MAX_PLAIN];
    size_t have = 0;
    uint64_t first_ns = 0, last_ns = 0;
#ifndef UTLS_STREAM_STOCK
    UTLS_TAP_LISTENER *tl = NULL;
#endif

    lfd = listen_tcp(opt.addr);
#ifndef UTLS_STREAM_STOCK
    if (opt.mode == MODE_UTLS || opt.mode == MODE_UCOBS) {
        /* Before any SYN can arrive: the tap needs the ISN from the SYN. */
        tl = UTLS_tap_listen(lfd);
        if (tl == NULL) {
            unsigned long e = ERR_peek_error();

            if (opt.skip_without_tap && ERR_GET_LIB(e) == UTLS_get_lib()
                && ERR_GET_REASON(e) == UTLS_R_TAP_PERMISSION) {
                fprintf(stderr, "utls-stream: SKIP: the tap needs CAP_NET_RAW\n");
                ERR_print_errors_fp(stderr);
                exit(77);
            }
            die("UTLS_tap_listen failed");
        }
    }
#endif
    touch_ready(opt.ready, lfd);
    note("recv %s: listening on %s", mode_name(opt.mode), opt.addr);
    fd = accept_tcp(lfd);
#ifndef UTLS_STREAM_STOCK
    if (opt.mode == MODE_UCOBS) {
        int rc = recv_ucobs(fd);

        close(fd);
        close(lfd);
        UTLS_tap_listener_free(tl);
        return rc;
    }
#endif

    ssl = new_tls13_server("utls-stream", &ctx);
#ifndef UTLS_STREAM_STOCK
    if (opt.mode == MODE_UTLS) {
        SSL_set_mode(ssl, SSL_MODE_UNORDERED);
        if ((tapbio = UTLS_BIO_new_tap(fd, BIO_CLOSE)) == NULL)
            die("UTLS_BIO_new_tap failed");
        bio = tapbio;
    }
#endif
    accept_tls(ssl, bio, fd, mode_name(opt.mode));

    while (rl.num_ok + rl.num_bad + rl.num_dup < opt.count) {
        size_t n = 0;
        int ok;
        uint64_t t;

        if (opt.mode == MODE_UTLS) {
#ifndef UTLS_STREAM_STOCK
            UTLS_RECORD_INFO info;
            char extra[256];

            ok = UTLS_read_record(ssl, buf, sizeof(buf), &n, &info);
            t = now_ns();
            if (ok) {
                num_ooo += info.out_of_order != 0;
                snprintf(extra, sizeof(extra),
                         ",\"ooo\":%d,\"arrival_ns\":%llu,\"seq\":%llu,\"offset\":%llu,\"wire_len\":%zu",
                         info.out_of_order != 0, (unsigned long long)info.arrival_ns,
                         (unsigned long long)info.seq, (unsigned long long)info.stream_offset,
                         info.wire_len);
                if (first_ns == 0)
                    first_ns = t;
                last_ns = t;
                deliver(buf, n, t, extra);
                continue;
            }
#else
            ok = 0;
#endif
        } else {
            ok = SSL_read_ex(ssl, buf, sizeof(buf), &n);
            t = now_ns();
            if (ok) {
                /* A byte stream: frame it into records of opt.size bytes. */
                size_t k = 0;

                if (first_ns == 0)
                    first_ns = t;
                last_ns = t;
                while (k < n) {
                    if (frame_take(msg, &have, (size_t)opt.size, buf, n, &k))
                        deliver(msg, (size_t)opt.size, t, ",\"ooo\":0");
                }
                continue;
            }
        }
        switch (SSL_get_error(ssl, 0)) {
        case SSL_ERROR_ZERO_RETURN:
            note("recv %s: the sender closed", mode_name(opt.mode));
            goto done;
        case SSL_ERROR_WANT_READ:
            continue;
        default:
            ERR_print_errors_fp(stderr);
            note("recv %s: read failed", mode_name(opt.mode));
            goto done;
        }
    }
done:
    log_end(ssl, tapbio, first_ns, last_ns);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(lfd);
#ifndef UTLS_STREAM_STOCK
    UTLS_tap_listener_free(tl);
#endif
    return rl.num_ok == opt.count && rl.num_bad == 0 && rl.num_dup == 0 ? 0 : 1;
}

static int recv_dtls(void)
{
    struct sockaddr_storage ss, peer;
    socklen_t sl, pl = sizeof(peer);
    int fd, rc;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *bio;
    static unsigned char buf[MAX_PLAIN + 64];
    uint64_t first_ns = 0, last_ns = 0;
    struct timeval tv;

    parse_addr(opt.addr, SOCK_DGRAM, &ss, &sl);
    fd = listen_socket(SOCK_DGRAM, &ss, sl, opt.addr);
    touch_ready(opt.ready, fd);
    note("recv dtls: listening on %s", opt.addr);
    /* The first datagram (a ClientHello) names the peer: talk only to it. */
    if (recvfrom(fd, buf, sizeof(buf), MSG_PEEK, (struct sockaddr *)&peer, &pl) < 0)
        die("recvfrom: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&peer, pl) != 0)
        die("connect: %s", strerror(errno));
    if ((ctx = SSL_CTX_new(DTLS_server_method())) == NULL)
        die("SSL_CTX_new");
    make_cert(ctx, "utls-stream");
    SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION);
    SSL_CTX_set_read_ahead(ctx, 1);
    if ((ssl = SSL_new(ctx)) == NULL || (bio = BIO_new_dgram(fd, BIO_CLOSE)) == NULL)
        die("SSL_new");
    BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &peer);
    SSL_set_bio(ssl, bio, bio);
    SSL_set_options(ssl, SSL_OP_NO_QUERY_MTU);
    DTLS_set_link_mtu(ssl, 1500);
    if (SSL_accept(ssl) != 1)
        die("DTLS handshake failed");
    note("recv dtls: handshake done (%s, %s)", SSL_get_version(ssl), SSL_get_cipher_name(ssl));
    /* From here on, blocking reads that give up after --idle-ms without data. */
    tv.tv_sec = opt.idle_ms / 1000;
    tv.tv_usec = (opt.idle_ms % 1000) * 1000;
    BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_RECV_TIMEOUT, 0, &tv);

    while (rl.num_ok + rl.num_dup < opt.count) {
        size_t n = 0;
        uint64_t t;

        if (SSL_pending(ssl) == 0 && !wait_readable(fd, opt.idle_ms)) {
            note("recv dtls: nothing for %ld ms, stopping", opt.idle_ms);
            break;
        }
        rc = SSL_read_ex(ssl, buf, sizeof(buf), &n);
        t = now_ns();
        if (rc) {
            if (first_ns == 0)
                first_ns = t;
            last_ns = t;
            deliver(buf, n, t, ",\"ooo\":0");
            continue;
        }
        rc = SSL_get_error(ssl, 0);
        if (rc == SSL_ERROR_ZERO_RETURN) {
            note("recv dtls: the sender closed");
            break;
        }
        if (rc == SSL_ERROR_WANT_READ)
            continue;
        ERR_print_errors_fp(stderr);
        note("recv dtls: read failed (%d)", rc);
        break;
    }
    log_end(ssl, NULL, first_ns, last_ns);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    /* Datagrams may be lost: only corruption or duplicates are failures. */
    return rl.num_bad == 0 && rl.num_dup == 0 ? 0 : 1;
}

/* --- Sender ------------------------------------------------------------------ */

#ifndef UTLS_STREAM_STOCK
/* send_ucobs: one UTLS_ucobs_send (one frame, one send call) per message. */
static int send_ucobs(int fd)
{
    static unsigned char rec[MAX_PLAIN];
    uint64_t start, period = (uint64_t)(opt.interval_ms * 1e6), late_max = 0;
    long i;

    fprintf(logf_, "{\"event\":\"handshake\",\"version\":\"ucobs\",\"first_app_offset\":0}\n");
    note("send ucobs: connected, %ld datagrams of %ld bytes every %g ms", opt.count, opt.size,
         opt.interval_ms);
    start = now_ns() + 10000000u;
    for (i = 0; i < opt.count; i++) {
        uint64_t due = start + (uint64_t)i * period, t;

        sleep_until(due);
        t = now_ns();
        if (t - due > late_max)
            late_max = t - due;
        fill_payload(rec, (size_t)opt.size, (uint32_t)i, t);
        if (!UTLS_ucobs_send(fd, rec, (size_t)opt.size))
            die("send of datagram %ld failed: %s", i, strerror(errno));
        fprintf(logf_, "{\"i\":%ld,\"send_ns\":%llu,\"wire_len\":%zu}\n", i,
                (unsigned long long)t, ucobs_frame_len(rec, (size_t)opt.size));
        if (!opt.quiet && (i + 1) % 500 == 0)
            note("send ucobs: %ld datagrams", i + 1);
    }
    fprintf(logf_, "{\"event\":\"end\",\"sent\":%ld,\"max_late_ms\":%.3f}\n", opt.count,
            (double)late_max / 1e6);
    fflush(logf_);
    drain_until_closed(fd, rec, sizeof(rec));
    close(fd);
    return 0;
}
#endif

static int do_send(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, dtls = opt.mode == MODE_DTLS;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *bio;
    static unsigned char rec[MAX_PLAIN];
    uint64_t start, period = (uint64_t)(opt.interval_ms * 1e6), late_max = 0;
    long i;

    parse_addr(opt.addr, dtls ? SOCK_DGRAM : SOCK_STREAM, &ss, &sl);
    fd = connect_retry(dtls ? SOCK_DGRAM : SOCK_STREAM, &ss, sl, opt.addr, opt.cc);
#ifndef UTLS_STREAM_STOCK
    if (opt.mode == MODE_UCOBS)
        return send_ucobs(fd);
#endif
    if ((ctx = SSL_CTX_new(dtls ? DTLS_client_method() : TLS_client_method())) == NULL)
        die("SSL_CTX_new");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(ctx, dtls ? DTLS1_2_VERSION : TLS1_3_VERSION);
    if ((ssl = SSL_new(ctx)) == NULL)
        die("SSL_new");
    if (dtls) {
        if ((bio = BIO_new_dgram(fd, BIO_CLOSE)) == NULL)
            die("BIO_new_dgram");
        BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &ss);
        SSL_set_bio(ssl, bio, bio);
        SSL_set_options(ssl, SSL_OP_NO_QUERY_MTU);
        DTLS_set_link_mtu(ssl, 1500);
    } else {
        SSL_set_fd(ssl, fd);
    }
    if (SSL_connect(ssl) != 1)
        die("handshake with %s failed", opt.addr);
    fprintf(logf_,
            "{\"event\":\"handshake\",\"version\":\"%s\",\"cipher\":\"%s\",\"first_app_offset\":%lu}\n",
            SSL_get_version(ssl), SSL_get_cipher_name(ssl),
            (unsigned long)BIO_number_written(SSL_get_wbio(ssl)));
    note("send %s: connected (%s, %s), %ld records of %ld bytes every %g ms", mode_name(opt.mode),
         SSL_get_version(ssl), SSL_get_cipher_name(ssl), opt.count, opt.size, opt.interval_ms);

    start = now_ns() + 10000000u;
    for (i = 0; i < opt.count; i++) {
        uint64_t due = start + (uint64_t)i * period, t;
        size_t w;

        sleep_until(due);
        t = now_ns();
        if (t - due > late_max)
            late_max = t - due;
        fill_payload(rec, (size_t)opt.size, (uint32_t)i, t);
        if (!SSL_write_ex(ssl, rec, (size_t)opt.size, &w) || w != (size_t)opt.size)
            die("write of record %ld failed", i);
        fprintf(logf_, "{\"i\":%ld,\"send_ns\":%llu}\n", i, (unsigned long long)t);
        if (!opt.quiet && (i + 1) % 500 == 0)
            note("send %s: %ld records", mode_name(opt.mode), i + 1);
    }
    fprintf(logf_, "{\"event\":\"end\",\"sent\":%ld,\"max_late_ms\":%.3f}\n", opt.count,
            (double)late_max / 1e6);
    fflush(logf_);
    SSL_shutdown(ssl);
    if (!dtls)
        drain_until_closed(fd, rec, sizeof(rec));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return 0;
}

/* --- main -------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: utls-stream send|recv --mode tls|utls|dtls|ucobs (--listen|--connect) HOST:PORT\n"
            "         [--count N] [--size S] [--interval MS] [--out FILE] [--ready FILE]\n"
            "         [--require fork|stock] [--idle-ms MS] [--timeout S] [--skip-without-tap]\n"
            "         [--cc CONGESTION_CONTROL (send)]\n"
            "         [--quiet]\n"
            "  recv --ready FILE: FILE gets the bound port once the receiver listens\n"
            "  (and, in utls mode, its listener tap is open); port 0 picks a free one.\n"
            "  S is the plaintext size of every record (default 1448); N records (default\n"
            "  1000), one every MS milliseconds (default 20). JSON lines go to --out\n"
            "  (default stdout); progress to stderr.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int rc, sender;
    const char *mode = "tls";
    const example_option opts[] = {
        EXAMPLE_STREAM_OPTIONS(opt, mode),
        {"--idle-ms", EXAMPLE_OPT_LONG, &opt.idle_ms},
    };

    example_name = "utls-stream";
    sender = parse_role(argc >= 2 ? argv[1] : NULL, usage);
    parse_options(argc, argv, 2, opts, sizeof(opts) / sizeof(opts[0]), usage);
    example_quiet = opt.quiet;
    opt.mode = (enum mode)parse_choice(mode, mode_names, sizeof(mode_names) / sizeof(mode_names[0]),
                                       usage);
    if (opt.addr == NULL || opt.count <= 0 || opt.size < HDR_LEN || opt.size > MAX_PLAIN
        || opt.interval_ms < 0)
        usage();
#ifdef UTLS_STREAM_STOCK
    if (opt.mode == MODE_UTLS || opt.mode == MODE_UCOBS)
        die("%s mode: this is the stock build (no uTLS); use utls-stream", mode_name(opt.mode));
#endif
    logf_ = start_log(opt.out, opt.timeout_s);
    check_library();
    log_start(sender ? "send" : "recv");
    if (sender) {
        rc = do_send();
    } else {
        if ((rl.seen = calloc((size_t)opt.count, 1)) == NULL)
            die("out of memory");
        rc = opt.mode == MODE_DTLS ? recv_dtls() : recv_tcp();
    }
    end_log(logf_);
    return rc;
}
