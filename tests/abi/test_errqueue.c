/*
 * test_errqueue: no public uTLS function leaves an error on OpenSSL's error
 * queue when it succeeds.
 *
 * OpenSSL's convention is that a caller looks at the error queue only after
 * a failure; an entry left behind by a call that succeeded is blamed on the
 * next failure anywhere in the program (and SSL_get_error() reads
 * SSL_ERROR_SSL from it). This program calls every function of
 * <openssl/utls.h> in a case where it succeeds -- over real TCP connections
 * on the loopback, TLS 1.3 between two fork endpoints, explicit record
 * numbers negotiated -- and prints one line per call: "ok NAME", or
 * "FAIL NAME: why" when the call failed or left the queue non-empty.
 * check-errqueue.py runs it and also fails if a function the header declares
 * was not called at all. The tap calls need CAP_NET_RAW; without it they are
 * reported as "skip NAME" (never as ok).
 */
#include <openssl/utls.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "test_identity.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

/* report NAME's outcome: it must have succeeded and left nothing queued. */
static void report(const char *name, int succeeded)
{
    unsigned long e = ERR_peek_error();
    char text[256];

    if (!succeeded) {
        printf("FAIL %s: did not succeed\n", name);
        ERR_print_errors_fp(stdout);
        failures++;
    } else if (e != 0) {
        ERR_error_string_n(e, text, sizeof(text));
        printf("FAIL %s: succeeded but left an error queued: %s\n", name, text);
        failures++;
    } else {
        printf("ok %s\n", name);
    }
    ERR_clear_error();
}

static void die(const char *what)
{
    printf("FAIL setup: %s (%s)\n", what, strerror(errno));
    ERR_print_errors_fp(stdout);
    exit(1);
}

static void set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        die("fcntl");
}

static EVP_PKEY *key;
static X509 *cert;

/* A throwaway P-256 key and self-signed certificate for the server. */
static void make_cert(void)
{
    if (!ti_make_identity(1, "errqueue", &key, &cert))
        die("key or certificate");
}

struct pair {
    int lfd, cfd, sfd;
    SSL *client, *server;
    struct sockaddr_in addr;
};

/* A listening socket on 127.0.0.1 and its address. */
static void listen_loopback(struct pair *p)
{
    socklen_t len = sizeof(p->addr);

    memset(&p->addr, 0, sizeof(p->addr));
    p->addr.sin_family = AF_INET;
    p->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&p->addr, sizeof(p->addr)) < 0
        || listen(p->lfd, 4) < 0 || getsockname(p->lfd, (struct sockaddr *)&p->addr, &len) < 0)
        die("listen");
}

static void accept_nonblocking(struct pair *p)
{
    p->sfd = accept(p->lfd, NULL, NULL);
    if (p->sfd < 0)
        die("accept");
    set_nonblocking(p->cfd);
    set_nonblocking(p->sfd);
}

/* Both ends of a TLS 1.3 connection between two fork endpoints. */
static void tls_pair(struct pair *p, long client_mode, long server_mode)
{
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    int cdone = 0, sdone = 0, rounds;

    if (cctx == NULL || sctx == NULL || !SSL_CTX_use_certificate(sctx, cert)
        || !SSL_CTX_use_PrivateKey(sctx, key))
        die("SSL_CTX");
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    p->client = SSL_new(cctx);
    p->server = SSL_new(sctx);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    SSL_set_mode(p->client, client_mode);
    SSL_set_mode(p->server, server_mode);
    if (!SSL_set_fd(p->client, p->cfd) || !SSL_set_fd(p->server, p->sfd))
        die("SSL_set_fd");
    SSL_set_connect_state(p->client);
    SSL_set_accept_state(p->server);
    for (rounds = 0; (!cdone || !sdone) && rounds < 2000; rounds++) {
        if (!cdone)
            cdone = SSL_do_handshake(p->client) == 1;
        if (!sdone)
            sdone = SSL_do_handshake(p->server) == 1;
        if (!cdone || !sdone)
            poll(NULL, 0, 1);
    }
    if (!cdone || !sdone)
        die("handshake");
    ERR_clear_error();
}

/* Reads one record's worth from |s| with SSL_read_ex, waiting up to ~2 s. */
static int pump_read(SSL *s, char *buf, size_t len, size_t *got)
{
    int i;

    for (i = 0; i < 2000; i++) {
        if (SSL_read_ex(s, buf, len, got))
            return 1;
        if (SSL_get_error(s, 0) != SSL_ERROR_WANT_READ)
            return 0;
        ERR_clear_error();
        poll(NULL, 0, 1);
    }
    return 0;
}

static void test_versions_and_strings(void)
{
    report("UTLS_version", UTLS_version(UTLS_VERSION_TEXT) != NULL);
    report("UTLS_version_num", UTLS_version_num() == UTLS_VERSION_NUMBER);
    report("UTLS_base_version_num", UTLS_base_version_num() != 0);
    report("UTLS_get_lib", UTLS_get_lib() > 0);
    report("UTLS_fallback_string", UTLS_fallback_string(UTLS_FALLBACK_NONE) != NULL);
    report("UTLS_sched_drop_reason_string", UTLS_sched_drop_reason_string(0) != NULL);
}

/* Every reason prints its text (lib/reasons.txt), not "reason(106)". */
static void test_reason_texts(void)
{
    static const int reasons[] = {UTLS_R_BUFFER_TOO_SMALL, UTLS_R_TAP_PERMISSION, UTLS_R_TAP_NO_ISN,
                                  UTLS_R_TAP_SYSCALL, UTLS_R_SCHED_TCP_INFO, UTLS_R_UCOBS_SYSCALL,
                                  UTLS_R_STREAM_BUSY, UTLS_R_ERN_HANDSHAKE_DUE};
    size_t i;

    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        const char *t = ERR_reason_error_string(ERR_PACK(UTLS_get_lib(), 0, reasons[i]));

        if (t == NULL) {
            printf("FAIL reason %d has no text\n", reasons[i]);
            failures++;
        }
    }
    printf("reason texts: %zu checked\n", i);
}

static void test_segment_bios(void)
{
    BIO *b = BIO_new(UTLS_BIO_s_segment());
    BIO *out = BIO_new(BIO_s_mem());
    BIO *utcp = BIO_new(UTLS_BIO_f_utcp());
    char buf[16];

    report("UTLS_BIO_s_segment", b != NULL);
    report("UTLS_BIO_f_utcp", utcp != NULL);
    report("UTLS_BIO_segment_set_window", UTLS_BIO_segment_set_window(b, 1 << 20));
    report("UTLS_BIO_segment_push", UTLS_BIO_segment_push(b, 3, "def", 3));
    report("UTLS_BIO_segment_push", UTLS_BIO_segment_push(b, 0, "abc", 3));
    report("UTLS_BIO_segment_push_eof", UTLS_BIO_segment_push_eof(b, 6));
    report("UTLS_BIO_segment_set_output", UTLS_BIO_segment_set_output(b, out));
    BIO_write(b, "xy", 2);
    ERR_clear_error();
    report("UTLS_BIO_segment_take_output", UTLS_BIO_segment_take_output(b, buf, sizeof(buf)) <= 2);
    BIO_free(b);
    BIO_free(out);
    BIO_free(utcp);
}

/* The receive side, explicit record numbers and the tap. */
static void test_unordered_ern_tap(int have_tap)
{
    struct pair p;
    UTLS_TAP_LISTENER *l = NULL;
    UTLS_LIMITS lim;
    UTLS_STATS st;
    UTLS_RECORD_INFO info;
    UTLS_TAP_STATS ts;
    unsigned char sealed[2][64 + UTLS_ERN_SEAL_OVERHEAD];
    size_t sealed_len[2], got = 0;
    uint64_t num[2];
    char buf[16384];
    int i, ok;
    BIO *tb;

    listen_loopback(&p);
    if (have_tap) {
        l = UTLS_tap_listen(p.lfd);
        report("UTLS_tap_listen", l != NULL);
    } else {
        printf("skip UTLS_tap_listen: no CAP_NET_RAW\n");
    }
    p.cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p.cfd < 0)
        die("socket");
    /*
     * Without CAP_NET_RAW the connection is made and the tap is not: that is
     * a success (the connection runs in order), so nothing may be queued.
     */
    report("UTLS_tap_connect", UTLS_tap_connect(p.cfd, &p.addr, sizeof(p.addr)));
    accept_nonblocking(&p);
    if (have_tap) {
        tb = UTLS_BIO_new_tap(p.cfd, BIO_NOCLOSE);
        report("UTLS_BIO_new_tap", tb != NULL);
        report("UTLS_BIO_tap_get_stats", tb != NULL && UTLS_BIO_tap_get_stats(tb, &ts));
        report("UTLS_BIO_tap_get_stats_ex",
               tb != NULL && UTLS_BIO_tap_get_stats_ex(tb, &ts, sizeof(ts)));
        {
            UTLS_TAP_CHECK_STATS cs;

            report("UTLS_BIO_tap_get_check_stats",
                   tb != NULL && UTLS_BIO_tap_get_check_stats(tb, &cs, sizeof(cs)));
        }
        BIO_free(tb);
    } else {
        printf("skip UTLS_BIO_new_tap: no CAP_NET_RAW\n");
        printf("skip UTLS_BIO_tap_get_stats: no CAP_NET_RAW\n");
        printf("skip UTLS_BIO_tap_get_stats_ex: no CAP_NET_RAW\n");
        printf("skip UTLS_BIO_tap_get_check_stats: no CAP_NET_RAW\n");
    }
    if (have_tap) {
        report("UTLS_tap_open", UTLS_tap_open());
        report("UTLS_tap_get_fd", UTLS_tap_get_fd() >= 0);
    } else {
        printf("skip UTLS_tap_open: no CAP_NET_RAW\n");
        printf("skip UTLS_tap_get_fd: no CAP_NET_RAW\n");
    }
    {
        UTLS_TAP_GLOBAL_STATS gs;
        int ready_fds[4];
        size_t num_ready = 0;

        /* Both succeed without the tap too: nothing is open, nothing ready. */
        report("UTLS_tap_poll_ready", UTLS_tap_poll_ready(ready_fds, 4, &num_ready));
        report("UTLS_tap_get_global_stats", UTLS_tap_get_global_stats(&gs, sizeof(gs)));
    }
    tls_pair(&p, SSL_MODE_UTLS_UNORDERED | SSL_MODE_UTLS_NEGOTIATE, SSL_MODE_UTLS_NEGOTIATE);

    UTLS_limits_default(&lim);
    report("UTLS_limits_default", lim.max_bytes_held > 0);
    report("UTLS_set_limits", UTLS_set_limits(p.client, &lim));
    report("UTLS_get_limits", UTLS_get_limits(p.client, &lim));
    report("UTLS_limits_default_ex", UTLS_limits_default_ex(&lim, sizeof(lim)));
    report("UTLS_set_limits_ex", UTLS_set_limits_ex(p.client, &lim, sizeof(lim)));
    report("UTLS_get_limits_ex", UTLS_get_limits_ex(p.client, &lim, sizeof(lim)));

    /* The server offers in its tickets; the client sees the offer, accepts. */
    if (!SSL_write_ex(p.server, "hello", 5, &got))
        die("SSL_write");
    ok = 0;
    for (i = 0; i < 2000 && !ok; i++) {
        ok = UTLS_read_record(p.client, buf, sizeof(buf), &got, &info);
        if (!ok) {
            if (SSL_get_error(p.client, 0) != SSL_ERROR_WANT_READ)
                break;
            ERR_clear_error();
            poll(NULL, 0, 1);
        }
    }
    report("UTLS_read_record", ok && got == 5);
    report("UTLS_ern_status", (UTLS_ern_status(p.client) & UTLS_ERN_OFFERED) != 0);
    report("UTLS_ern_flush", UTLS_ern_flush(p.client));
    report("UTLS_get_stats", UTLS_get_stats(p.client, &st) && st.records_in_order >= 1);
    report("UTLS_get_stats_ex", UTLS_get_stats_ex(p.client, &st, sizeof(st)));
    /* The server reads the answer and numbers its records from its next write. */
    for (i = 0; i < 2000 && !(UTLS_ern_status(p.server) & UTLS_ERN_ACCEPTED); i++) {
        if (!SSL_read_ex(p.server, buf, sizeof(buf), &got))
            ERR_clear_error();
        poll(NULL, 0, 1);
    }
    if (!SSL_write_ex(p.server, "x", 1, &got) || !pump_read(p.client, buf, sizeof(buf), &got))
        die("write after the answer");
    if (!(UTLS_ern_status(p.server) & UTLS_ERN_TX)) {
        printf("FAIL UTLS_ern_seal: explicit record numbers were not negotiated (status %#x)\n",
               UTLS_ern_status(p.server));
        failures++;
    } else {
        for (i = 0; i < 2; i++)
            report("UTLS_ern_seal", UTLS_ern_seal(p.server, "sealed", 6, sealed[i], sizeof(sealed[i]),
                                                  &sealed_len[i], &num[i]));
        report("UTLS_ern_num_sealed", UTLS_ern_num_sealed(p.server) == 2);
        report("UTLS_ern_drop", UTLS_ern_drop(p.server, num[0]));
        report("UTLS_ern_write_sealed", UTLS_ern_write_sealed(p.server, sealed[1], sealed_len[1]) == 1);
        report("UTLS_read_record", pump_read(p.client, buf, sizeof(buf), &got) && got == 6);
    }
    SSL_free(p.client);
    SSL_free(p.server);
    /* NULL-safe like every _free: without the tap there is no listener. */
    UTLS_tap_listener_free(l);
    report("UTLS_tap_listener_free", 1);
    close(p.cfd);
    close(p.sfd);
    close(p.lfd);
}

/* The send scheduler, TCP information and sub-streams. */
static void test_sched_streams(void)
{
    struct pair p;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_STATS sst;
    UTLS_SCHED_DROP drop;
    UTLS_TCP_INFO ti;
    UTLS_STREAM_INFO sinfo;
    UTLS_STREAM_STATS stst;
    UTLS_SCHED_RESULT r;
    UTLS_SCHED *sch;
    uint64_t id;
    char buf[16384];
    size_t got = 0, written = 0;
    int i, ok;

    listen_loopback(&p);
    p.cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p.cfd < 0 || connect(p.cfd, (struct sockaddr *)&p.addr, sizeof(p.addr)) < 0)
        die("connect");
    accept_nonblocking(&p);
    tls_pair(&p, SSL_MODE_UTLS_UNORDERED, 0);

    report("UTLS_tcp_get_info", UTLS_tcp_get_info(p.sfd, &ti));
    report("UTLS_tcp_get_info_ex", UTLS_tcp_get_info_ex(p.sfd, &ti, sizeof(ti)));
    report("UTLS_tcp_set_window_clamp", UTLS_tcp_set_window_clamp(p.sfd, 1 << 20));
    report("UTLS_tcp_set_max_pacing_rate", UTLS_tcp_set_max_pacing_rate(p.sfd, 1ULL << 30));

    UTLS_sched_config_default(&cfg);
    report("UTLS_sched_config_default", cfg.max_messages > 0);
    report("UTLS_sched_config_default_ex", UTLS_sched_config_default_ex(&cfg, sizeof(cfg)));
    sch = UTLS_sched_new_ex(p.server, &cfg, sizeof(cfg));
    report("UTLS_sched_new_ex", sch != NULL);
    UTLS_sched_free(sch);
    sch = UTLS_sched_new(p.server, &cfg);
    report("UTLS_sched_new", sch != NULL);
    if (sch == NULL)
        return;
    report("UTLS_sched_set_env", UTLS_sched_set_env(sch, NULL));
    report("UTLS_sched_set_clock", UTLS_sched_set_clock(sch, 1, 90000, 0));
    report("UTLS_sched_max_message", UTLS_sched_max_message(sch) > 0);
    report("UTLS_sched_submit", UTLS_sched_submit(sch, "scheduled", 9, NULL, &id));
    r = UTLS_sched_flush(sch, &written);
    report("UTLS_sched_flush", r != UTLS_SCHED_ERROR);
    report("UTLS_sched_drain", UTLS_sched_drain(sch, 2000) == UTLS_SCHED_IDLE);
    /* "nothing to report" is not a failure and must leave nothing queued */
    report("UTLS_sched_next_drop", UTLS_sched_next_drop(sch, &drop) == 0 && ERR_peek_error() == 0);
    report("UTLS_sched_get_stats", UTLS_sched_get_stats(sch, &sst));
    report("UTLS_sched_get_tcp_info", UTLS_sched_get_tcp_info(sch, &ti));
    report("UTLS_sched_get_stats_ex", UTLS_sched_get_stats_ex(sch, &sst, sizeof(sst)));
    report("UTLS_sched_get_tcp_info_ex", UTLS_sched_get_tcp_info_ex(sch, &ti, sizeof(ti)));
    UTLS_sched_free(sch);
    report("UTLS_sched_free", 1);
    if (!pump_read(p.client, buf, sizeof(buf), &got) || got != 9)
        die("reading the scheduled message");

    report("UTLS_stream_enable", UTLS_stream_enable(p.client, 1));
    report("UTLS_stream_enable", UTLS_stream_enable(p.server, 1));
    report("UTLS_stream_max_message", UTLS_stream_max_message(p.server) > 0);
    report("UTLS_stream_write", UTLS_stream_write(p.server, 3, "sub", 3) == 1);
    ok = 0;
    for (i = 0; i < 2000 && !ok; i++) {
        ok = UTLS_stream_read(p.client, buf, sizeof(buf), &got, &sinfo);
        if (!ok) {
            if (SSL_get_error(p.client, 0) != SSL_ERROR_WANT_READ)
                break;
            ERR_clear_error();
            poll(NULL, 0, 1);
        }
    }
    report("UTLS_stream_read", ok && got == 3 && sinfo.stream_id == 3);
    report("UTLS_stream_get_stats", UTLS_stream_get_stats(p.client, &stst));
    report("UTLS_stream_get_stats_ex", UTLS_stream_get_stats_ex(p.client, &stst, sizeof(stst)));
    SSL_free(p.client);
    SSL_free(p.server);
    close(p.cfd);
    close(p.sfd);
    close(p.lfd);
}

/* uCOBS datagrams on plain TCP (no TLS). */
static void test_ucobs(void)
{
    struct pair p;
    UTLS_UCOBS *u;
    UTLS_UCOBS_INFO info;
    UTLS_UCOBS_STATS st;
    UTLS_UCOBS_RESULT r = UTLS_UCOBS_ERROR;
    char buf[256];
    size_t got = 0;
    int i;

    listen_loopback(&p);
    p.cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p.cfd < 0 || connect(p.cfd, (struct sockaddr *)&p.addr, sizeof(p.addr)) < 0)
        die("connect");
    accept_nonblocking(&p);
    report("UTLS_ucobs_send", UTLS_ucobs_send(p.cfd, "datagram", 8));
    u = UTLS_ucobs_new(p.sfd, UTLS_UCOBS_NO_TAP);
    report("UTLS_ucobs_new", u != NULL);
    if (u == NULL)
        return;
    report("UTLS_ucobs_get_poll_fd", UTLS_ucobs_get_poll_fd(u) >= 0);
    for (i = 0; i < 2000; i++) {
        r = UTLS_ucobs_recv(u, buf, sizeof(buf), &got, &info);
        if (r != UTLS_UCOBS_WANT_READ)
            break;
        poll(NULL, 0, 1);
    }
    report("UTLS_ucobs_recv", r == UTLS_UCOBS_OK && got == 8);
    report("UTLS_ucobs_get_stats", UTLS_ucobs_get_stats(u, &st));
    report("UTLS_ucobs_get_stats_ex", UTLS_ucobs_get_stats_ex(u, &st, sizeof(st)));
    UTLS_ucobs_free(u);
    report("UTLS_ucobs_free", 1);
    close(p.cfd);
    close(p.sfd);
    close(p.lfd);
}

/* The readiness calls on what has no tap: "nothing to poll, nothing ready",
 * and nothing on the error queue (they never queue one). */
static void test_evloop(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    SSL *s = ctx != NULL ? SSL_new(ctx) : NULL;
    uint64_t token = 0, wakeups = 0, spurious = 0;

    if (s == NULL)
        die("SSL_new");
    report("UTLS_evloop_get_fd", UTLS_evloop_get_fd(s) == -1);
    report("UTLS_evloop_ready", UTLS_evloop_ready(s) == 0);
    (void)UTLS_evloop_generation(); /* a number: any value is right */
    report("UTLS_evloop_generation", 1);
    report("UTLS_evloop_fd_get_capture_fd", UTLS_evloop_fd_get_capture_fd(0) == -1);
    report("UTLS_evloop_fd_ready", UTLS_evloop_fd_ready(0, &token) == 0);
    report("UTLS_evloop_get_wakeups", UTLS_evloop_get_wakeups(0, &wakeups, &spurious) == 0);
    SSL_free(s);
    SSL_CTX_free(ctx);
}

int main(void)
{
    /* The tap needs CAP_NET_RAW: an AF_PACKET socket tells whether we have it. */
    int probe = socket(AF_PACKET, SOCK_RAW, 0);
    int have_tap = probe >= 0;

    if (probe >= 0)
        close(probe);
    make_cert();
    ERR_clear_error();
    test_versions_and_strings();
    test_reason_texts();
    test_segment_bios();
    test_unordered_ern_tap(have_tap);
    test_sched_streams();
    test_ucobs();
    test_evloop();
    printf("%d failure(s)\n", failures);
    EVP_PKEY_free(key);
    X509_free(cert);
    return failures == 0 ? 0 : 1;
}
