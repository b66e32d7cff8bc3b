/*
 * evloop-recv: an ordinary event-loop TLS server, the kind of program uTLS
 * must reach unmodified (issue 19, docs/evloop.md). It is linked with the
 * system libssl and uses nothing but OpenSSL's stock API: no uTLS header.
 *
 *   evloop-recv --loop epoll|poll [--et] --listen ADDR:PORT --out LOG
 *               --count N --size S [--ready FILE] [--idle-ms MS] [--timeout S]
 *
 * It accepts one connection, makes the socket non-blocking and then waits in
 * epoll_wait (level- or, with --et, edge-triggered) or poll until the socket
 * is readable, and only then calls SSL_read until SSL_ERROR_WANT_READ. Each
 * message is one record of utls-stream's stream format (index, send time,
 * pattern); every delivered message gets a line in LOG in utls-stream's
 * receiver format, so bench/latency/analyze.py reads it unchanged.
 *
 * Run with the fork and the companion library preloaded and
 * UTLS_MODE=unordered,tap, it gets records past a TCP hole as early as a
 * uTLS-aware receiver; run plain, it is stock TLS.
 *
 * Exit status: 0 when every message arrived exactly once and intact, 1
 * otherwise, 2 on setup errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "example_util.h"

#define MAGIC 0x6d727473u /* "strm" little-endian, as utls-stream */
#define HDR_LEN 24

static struct {
    const char *loop, *addr, *out, *ready;
    long count, size, idle_ms, timeout_s;
    int et;
} opt = {.loop = "epoll", .idle_ms = 3000, .timeout_s = 300};

static FILE *logf_;
static record_log rl;

static int payload_ok(const unsigned char *p, size_t len, uint32_t *idx, uint64_t *send_ns)
{
    size_t j;

    if (len != (size_t)opt.size || len < HDR_LEN || get32(p) != MAGIC || get32(p + 16) != len)
        return 0;
    *idx = get32(p + 4);
    *send_ns = get64(p + 8);
    for (j = HDR_LEN; j < len; j++)
        if (p[j] != (unsigned char)(*idx * 131u + j * 7u + (j >> 8)))
            return 0;
    return *idx < (uint64_t)opt.count;
}

static void deliver(const unsigned char *p, size_t len, uint64_t recv_ns)
{
    uint32_t idx = 0;
    uint64_t send_ns = 0;
    int ok = payload_ok(p, len, &idx, &send_ns);

    record_log_add(&rl, logf_, ok, idx, len, send_ns, recv_ns, "");
}

/* wait_in: waits (epoll or poll) until |fd| is readable or |ms| pass;
 * returns 1 if readable, 0 on timeout. */
static int wait_in(int ep, int fd, int ms)
{
    int r;

    if (ep >= 0) {
        struct epoll_event ev;

        while ((r = epoll_wait(ep, &ev, 1, ms)) < 0 && errno == EINTR)
            continue;
    } else {
        struct pollfd p = {.fd = fd, .events = POLLIN};

        while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
            continue;
    }
    if (r < 0)
        die("%s: %s", ep >= 0 ? "epoll_wait" : "poll", strerror(errno));
    return r > 0;
}

static void usage(void)
{
    die("usage: evloop-recv --loop epoll|poll [--et] --listen ADDR:PORT --out LOG --count N "
        "--size S [--ready FILE] [--idle-ms MS] [--timeout S]");
}

int main(int argc, char **argv)
{
    static unsigned char buf[1 << 15];
    SSL_CTX *ctx;
    SSL *ssl;
    int lfd, fd, ep = -1, i, done = 0, handshaken = 0;
    uint64_t last = 0, start;
    long missing = 0;
    const example_option opts[] = {
        {"--et", EXAMPLE_OPT_FLAG, &opt.et},
        {"--loop", EXAMPLE_OPT_STR, &opt.loop},
        {"--listen", EXAMPLE_OPT_STR, &opt.addr},
        {"--out", EXAMPLE_OPT_STR, &opt.out},
        {"--ready", EXAMPLE_OPT_STR, &opt.ready},
        {"--count", EXAMPLE_OPT_LONG, &opt.count},
        {"--size", EXAMPLE_OPT_LONG, &opt.size},
        {"--idle-ms", EXAMPLE_OPT_LONG, &opt.idle_ms},
        {"--timeout", EXAMPLE_OPT_LONG, &opt.timeout_s},
    };

    example_name = "evloop-recv";
    parse_options(argc, argv, 1, opts, sizeof(opts) / sizeof(opts[0]), usage);
    if (opt.addr == NULL || opt.out == NULL || opt.count <= 0 || opt.size < HDR_LEN
        || (strcmp(opt.loop, "epoll") != 0 && strcmp(opt.loop, "poll") != 0))
        usage();
    if ((logf_ = fopen(opt.out, "w")) == NULL || (rl.seen = calloc((size_t)opt.count, 1)) == NULL)
        die("%s: %s", opt.out, strerror(errno));
    /* The context first: a library configured from the environment may start
     * watching connections from here on (as any server creates it first). */
    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    make_cert(ctx, "evloop-recv");
    lfd = listen_tcp(opt.addr);
    fprintf(logf_,
            "{\"event\":\"start\",\"role\":\"recv\",\"mode\":\"evloop_%s\",\"libssl\":\"%s\","
            "\"fork\":%d,\"openssl\":\"%s\",\"count\":%ld,\"size\":%ld,\"interval_ms\":0,"
            "\"real_minus_mono_ns\":%lld,\"pid\":%d}\n",
            opt.loop, loaded_libssl(), symbol_loaded("UTLS_version"),
            OpenSSL_version(OPENSSL_VERSION), opt.count, opt.size,
            (long long)real_minus_mono_ns(), (int)getpid());
    fflush(logf_);
    touch_ready(opt.ready, lfd);
    if (!wait_readable(lfd, opt.timeout_s * 1000))
        die("no connection within %ld s", opt.timeout_s);
    fd = accept_tcp(lfd);
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl: %s", strerror(errno));
    if ((ssl = SSL_new(ctx)) == NULL || !SSL_set_fd(ssl, fd))
        die("SSL_new");
    if (strcmp(opt.loop, "epoll") == 0) {
        struct epoll_event ev = {.events = EPOLLIN | (opt.et ? EPOLLET : 0), .data.fd = fd};

        if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            die("epoll: %s", strerror(errno));
    }
    start = last = now_ns();
    while (!done) {
        if (!wait_in(ep, fd, 100)) {
            if (now_ns() - last > (uint64_t)opt.idle_ms * 1000000u
                || now_ns() - start > (uint64_t)opt.timeout_s * 1000000000u)
                break;
            if (!opt.et)
                continue;
            /* Edge-triggered: a wait that timed out reads once anyway, as a
             * careful program does. */
        }
        if (!handshaken) {
            int r = SSL_accept(ssl);

            if (r == 1) {
                handshaken = 1;
            } else {
                int e = SSL_get_error(ssl, r);

                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                    die("SSL_accept failed (%d)", e);
                continue;
            }
        }
        /* Read until the library says it has nothing more now. */
        for (;;) {
            size_t n = 0;

            if (SSL_read_ex(ssl, buf, sizeof(buf), &n)) {
                last = now_ns();
                deliver(buf, n, last);
                if (rl.num_ok == opt.count)
                    done = 1;
                continue;
            }
            switch (SSL_get_error(ssl, 0)) {
            case SSL_ERROR_WANT_READ:
            case SSL_ERROR_WANT_WRITE:
                break;
            case SSL_ERROR_ZERO_RETURN:
                done = 1;
                break;
            default:
                ERR_print_errors_fp(stderr);
                die("SSL_read failed (%d)", SSL_get_error(ssl, 0));
            }
            break;
        }
    }
    for (i = 0; i < opt.count; i++)
        missing += !rl.seen[i];
    fprintf(logf_,
            "{\"event\":\"end\",\"mode\":\"evloop_%s\",\"received\":%ld,\"missing\":%ld,"
            "\"duplicates\":%ld,\"bad\":%ld}\n",
            opt.loop, rl.num_ok, missing, rl.num_dup, rl.num_bad);
    fclose(logf_);
    note("%s: %ld of %ld messages, %ld missing, %ld duplicates, %ld bad", opt.loop, rl.num_ok,
         opt.count, missing, rl.num_dup, rl.num_bad);
    (void)SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    close(lfd);
    if (ep >= 0)
        close(ep);
    return missing == 0 && rl.num_dup == 0 && rl.num_bad == 0 ? 0 : 1;
}
