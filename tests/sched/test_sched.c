/*
 * Unit tests of the send scheduler's policy (priorities, squash, deadlines,
 * playout clocks, dependencies, sub-streams, limits, oversize messages,
 * partial writes) through the public API, on an in-memory TLS 1.3 connection
 * with a fake clock and fake TCP information: the BIO pair stands where the
 * kernel's send buffer would, so "unsent bytes" are what the peer has not
 * read yet.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>
#include <openssl/x509.h>

#include "uharness.h"

#define MS UINT64_C(1000000)

typedef struct {
    SSL_CTX *cctx, *sctx;
    SSL *c, *s;
    BIO *sbio;          /* the server's end of the pair */
    uint64_t now;       /* the fake clock */
    UTLS_TCP_INFO ti;   /* the fake TCP information */
    int unsent_from_bio; /* notsent_bytes = what the server has not read */
    UTLS_SCHED *sch;
    char got[64][64];   /* messages the server read, in order */
    size_t num_got;
} fixture;

static uint64_t fake_now(void *arg)
{
    return ((fixture *)arg)->now;
}

static int fake_tcp_info(void *arg, UTLS_TCP_INFO *out)
{
    fixture *f = arg;

    *out = f->ti;
    if (f->unsent_from_bio) {
        out->notsent_bytes = BIO_ctrl_pending(f->sbio);
    }
    return 1;
}

static void pair_handshake(fixture *f, size_t bio_buf)
{
    EVP_PKEY *key = NULL;
    X509 *cert = NULL;
    BIO *cbio = NULL;
    int i, cdone = 0, sdone = 0;

    assert_true(uh_make_identity(1, &key, &cert));
    f->cctx = SSL_CTX_new(TLS_client_method());
    f->sctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(f->cctx);
    assert_non_null(f->sctx);
    assert_int_equal(SSL_CTX_use_certificate(f->sctx, cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(f->sctx, key), 1);
    X509_free(cert);
    EVP_PKEY_free(key);
    f->c = SSL_new(f->cctx);
    f->s = SSL_new(f->sctx);
    assert_int_equal(BIO_new_bio_pair(&cbio, bio_buf, &f->sbio, bio_buf), 1);
    SSL_set_bio(f->c, cbio, cbio);
    SSL_set_bio(f->s, f->sbio, f->sbio);
    SSL_set_connect_state(f->c);
    SSL_set_accept_state(f->s);
    for (i = 0; i < 100 && !(cdone && sdone); i++) {
        if (!cdone) {
            cdone = SSL_do_handshake(f->c) == 1;
        }
        if (!sdone) {
            sdone = SSL_do_handshake(f->s) == 1;
        }
    }
    assert_true(cdone && sdone);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));

    pair_handshake(f, 64 * 1024);
    f->now = 1000 * MS;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    UTLS_sched_free(f->sch);
    SSL_free(f->c);
    SSL_free(f->s);
    SSL_CTX_free(f->cctx);
    SSL_CTX_free(f->sctx);
    free(f);
    ERR_clear_error();
    return 0;
}

static UTLS_SCHED *sched_for(fixture *f, const UTLS_SCHED_CONFIG *cfg)
{
    UTLS_SCHED_ENV env = {fake_now, fake_tcp_info, f};

    f->sch = UTLS_sched_new(f->c, cfg);
    assert_non_null(f->sch);
    assert_int_equal(UTLS_sched_set_env(f->sch, &env), 1);
    return f->sch;
}

static uint64_t submit(fixture *f, const char *text, const UTLS_SCHED_MSG *m)
{
    uint64_t id = 0;

    assert_int_equal(UTLS_sched_submit(f->sch, text, strlen(text), m, &id), 1);
    assert_true(id > 0);
    return id;
}

static UTLS_SCHED_MSG prio(uint8_t p)
{
    UTLS_SCHED_MSG m;

    memset(&m, 0, sizeof(m));
    m.priority = p;
    return m;
}

/* receive reads every record the server can read now into f->got. */
static void receive(fixture *f)
{
    char buf[20000];
    size_t n;

    while (SSL_read_ex(f->s, buf, sizeof(buf), &n)) {
        assert_true(f->num_got < 64);
        if (n >= sizeof(f->got[0])) {
            snprintf(f->got[f->num_got++], sizeof(f->got[0]), "<%zu bytes>", n);
        } else {
            memcpy(f->got[f->num_got], buf, n);
            f->got[f->num_got++][n] = '\0';
        }
    }
    assert_int_equal(SSL_get_error(f->s, 0), SSL_ERROR_WANT_READ);
}

static void expect(fixture *f, ...)
{
    va_list ap;
    const char *want;
    size_t i = 0;

    receive(f);
    va_start(ap, f);
    while ((want = va_arg(ap, const char *)) != NULL) {
        assert_true(i < f->num_got);
        assert_string_equal(f->got[i], want);
        i++;
    }
    va_end(ap);
    assert_int_equal(i, f->num_got);
    f->num_got = 0;
}

static void expect_error(int reason)
{
    unsigned long e = ERR_peek_last_error();

    assert_int_equal(ERR_GET_LIB(e), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(e), reason);
    ERR_clear_error();
}

static void expect_drop(fixture *f, uint64_t id, UTLS_SCHED_DROP_REASON reason, uint64_t cause)
{
    UTLS_SCHED_DROP d;

    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.id, id);
    assert_int_equal(d.reason, reason);
    assert_int_equal(d.cause_id, cause);
}

static void expect_no_drop(fixture *f)
{
    UTLS_SCHED_DROP d;

    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 0);
}

/* ------------------------------------------------------------------------ */

static void test_sched_priority_order(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG lo = prio(0), mid = prio(2), hi = prio(200);
    UTLS_SCHED_STATS st;
    size_t n;

    sched_for(f, NULL);
    submit(f, "A", &lo);
    submit(f, "B", &lo);
    submit(f, "Y", &mid);
    submit(f, "C", &lo);
    submit(f, "X", &hi);
    submit(f, "Z", &mid);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 6);
    /* Higher first; in order of submission within a priority. */
    expect(f, "X", "Y", "Z", "A", "B", "C", NULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.submitted, 6);
    assert_int_equal(st.written, 6);
    assert_int_equal(st.written_bytes, 6);
    assert_int_equal(st.overtaken, 3); /* X, Y, Z went before A */
    assert_int_equal(st.queued_messages, 0);
    assert_int_equal(st.queued_bytes, 0);
    expect_no_drop(f);
}

static void test_sched_fifo_within_priority(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG m = prio(7);
    char text[8];
    int i;

    sched_for(f, NULL);
    for (i = 0; i < 20; i++) {
        snprintf(text, sizeof(text), "m%02d", i);
        submit(f, text, &m);
    }
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    receive(f);
    assert_int_equal(f->num_got, 20);
    for (i = 0; i < 20; i++) {
        snprintf(text, sizeof(text), "m%02d", i);
        assert_string_equal(f->got[i], text);
    }
}

/* Late binding: nothing is encrypted while the kernel's unsent bytes are at
 * the low-water mark, so an urgent message submitted later still goes first. */
static void test_sched_lowat_late_binding(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_MSG lo = prio(0), hi = prio(9);
    UTLS_SCHED_STATS st;
    size_t n;
    char bulk[1000];

    UTLS_sched_config_default(&cfg);
    cfg.notsent_lowat = 1500;
    sched_for(f, &cfg);
    f->unsent_from_bio = 1;
    memset(bulk, 'b', sizeof(bulk));
    bulk[sizeof(bulk) - 1] = '\0';
    submit(f, bulk, &lo);
    submit(f, bulk, &lo);
    submit(f, bulk, &lo);
    /* One 1 KB record is below the mark, two are not: two get written. */
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_WRITE);
    assert_int_equal(n, 2);
    submit(f, "urgent", &hi);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_WRITE);
    assert_int_equal(n, 0);
    /* The receiver drains the "kernel": the urgent message overtakes. */
    expect(f, "<999 bytes>", "<999 bytes>", NULL);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 2);
    expect(f, "urgent", "<999 bytes>", NULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.lowat_waits, 2);
    assert_int_equal(st.overtaken, 1);

    /* Without any TCP information (not a TCP socket) nothing gates. */
    f->unsent_from_bio = 0;
}

static void test_sched_squash(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG m = prio(1), other_sub, untagged = prio(1);
    uint64_t v1, v2, v3, o1, u1, v4;
    UTLS_SCHED_STATS st;
    UTLS_SCHED_DROP d;

    sched_for(f, NULL);
    m.squash_tag = 7;
    other_sub = m;
    other_sub.substream = 3;
    v1 = submit(f, "pos v1", &m);
    o1 = submit(f, "other sub v1", &other_sub);
    u1 = submit(f, "untagged", &untagged);
    v2 = submit(f, "pos v2", &m);
    /* v1 went at once; the same tag on another sub-stream, and untagged
     * messages, are left alone. */
    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.id, v1);
    assert_int_equal(d.reason, UTLS_SCHED_DROP_SQUASHED);
    assert_int_equal(d.cause_id, v2);
    assert_int_equal(d.squash_tag, 7);
    assert_int_equal(d.substream, 0);
    assert_int_equal(d.len, 6);
    expect_no_drop(f);
    v3 = submit(f, "pos v3", &m);
    expect_drop(f, v2, UTLS_SCHED_DROP_SQUASHED, v3);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "other sub v1", "untagged", "pos v3", NULL);
    /* What was written is never squashed. */
    v4 = submit(f, "pos v4", &m);
    expect_no_drop(f);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "pos v4", NULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.dropped_squashed, 2);
    (void)o1;
    (void)u1;
    (void)v4;
}

/* Squash never touches the record the socket took in part. */
static void test_sched_partial_record_is_committed(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG m = prio(1), hi = prio(50);
    char big[6000];
    UTLS_SCHED_STATS st;
    size_t n;

    /* A new pair whose "socket" takes only 2000 bytes at a time. */
    SSL_free(f->c);
    SSL_free(f->s);
    SSL_CTX_free(f->cctx);
    SSL_CTX_free(f->sctx);
    pair_handshake(f, 2000);
    sched_for(f, NULL);
    memset(big, 'p', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    m.squash_tag = 5;
    submit(f, big, &m);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_WRITE);
    assert_int_equal(n, 0);
    /* A newer update with the same tag, and an urgent message: the record
     * already partly handed over is completed first, unchanged. */
    submit(f, "p2", &m);
    submit(f, "urgent", &hi);
    expect_no_drop(f);
    while (UTLS_sched_flush(f->sch, &n) == UTLS_SCHED_WANT_WRITE) {
        receive(f);
    }
    receive(f);
    assert_int_equal(f->num_got, 3);
    assert_string_equal(f->got[0], "<5999 bytes>");
    assert_string_equal(f->got[1], "urgent");
    assert_string_equal(f->got[2], "p2");
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.written, 3);
    assert_int_equal(st.dropped_squashed, 0);
}

static void test_sched_deadline_absolute(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG late = prio(1), ok = prio(1), none = prio(0);
    uint64_t id_late, id_ok, id_later;
    UTLS_SCHED_DROP d;
    UTLS_SCHED_STATS st;

    sched_for(f, NULL);
    f->ti.srtt_us = 100000; /* one-way estimate 50 ms */
    late.flags = UTLS_SCHED_DEADLINE;
    late.deadline_ns = f->now + 40 * MS;
    ok.flags = UTLS_SCHED_DEADLINE;
    ok.deadline_ns = f->now + 60 * MS;
    id_late = submit(f, "late", &late);
    id_ok = submit(f, "ok", &ok);
    submit(f, "no deadline", &none);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "ok", "no deadline", NULL);
    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.id, id_late);
    assert_int_equal(d.reason, UTLS_SCHED_DROP_DEADLINE);
    assert_int_equal(d.deadline_ns, late.deadline_ns);
    assert_int_equal(d.est_arrival_ns, f->now + 50 * MS);
    assert_int_equal(d.dropped_ns, f->now);
    expect_no_drop(f);

    /* A message waiting at the low-water mark expires while it waits. */
    f->ti.notsent_bytes = 1 << 20;
    ok.deadline_ns = f->now + 80 * MS;
    id_later = submit(f, "waits", &ok);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_WANT_WRITE);
    expect_no_drop(f);
    f->now += 31 * MS;
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect_drop(f, id_later, UTLS_SCHED_DROP_DEADLINE, 0);
    /* The margin is added to every estimate. Queued unsent bytes count at the
     * delivery rate unless the sample was application-limited. */
    f->ti.notsent_bytes = 0;
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.dropped_deadline, 2);
    assert_int_equal(st.queued_messages, 0);
    (void)id_ok;
}

static void test_sched_deadline_counts_kernel_backlog(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_MSG m = prio(0);
    uint64_t id;

    UTLS_sched_config_default(&cfg);
    cfg.notsent_lowat = 1 << 20;
    cfg.deadline_margin_ns = 5 * MS;
    sched_for(f, &cfg);
    f->ti.srtt_us = 20000;             /* 10 ms one way */
    f->ti.notsent_bytes = 100000;      /* 100 ms at ... */
    f->ti.delivery_rate = 1000000;     /* ... 1 MB/s */
    m.flags = UTLS_SCHED_DEADLINE;
    m.deadline_ns = f->now + 100 * MS; /* 10 + 100 + 5 > 100 */
    id = submit(f, "x", &m);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect_drop(f, id, UTLS_SCHED_DROP_DEADLINE, 0);
    /* An application-limited rate sample is not trusted: 10 + 5 < 100. */
    f->ti.delivery_rate_app_limited = 1;
    submit(f, "y", &m);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "y", NULL);
    expect_no_drop(f);
    /* ... TCP's pacing rate stands in for it, under the pacing cap. */
    f->ti.pacing_rate = 10000000;     /* 10 ms for the backlog: fits */
    submit(f, "z", &m);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "z", NULL);
    f->ti.max_pacing_rate = 1000000;  /* capped: 100 ms again */
    id = submit(f, "w", &m);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect_drop(f, id, UTLS_SCHED_DROP_DEADLINE, 0);
}

static void test_sched_playout_clock(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG m = prio(0);
    uint64_t t0 = f->now, id0, id1, id2, id3;
    UTLS_SCHED_DROP d;

    sched_for(f, NULL);
    f->ti.srtt_us = 40000; /* 20 ms one way */
    m.flags = UTLS_SCHED_PLAYOUT;
    m.substream = 2;
    /* No clock on the sub-stream: refused. */
    assert_int_equal(UTLS_sched_submit(f->sch, "x", 1, &m, NULL), 0);
    expect_error(UTLS_R_SCHED_NO_CLOCK);
    assert_int_equal(UTLS_sched_set_clock(f->sch, 2, 0, 0), 0);
    expect_error(UTLS_R_SCHED_BAD_MESSAGE);
    /* 90 kHz (MPEG), 100 ms of receiver buffer: the first message starts the
     * timeline at t0 + 20 + 100 ms. */
    assert_int_equal(UTLS_sched_set_clock(f->sch, 2, 90000, 100 * MS), 1);
    m.playout_ts = 1000000;
    id0 = submit(f, "f0", &m); /* deadline t0 + 120 */
    m.playout_ts = 1000000 + 9000;
    id1 = submit(f, "f1", &m); /* t0 + 220 */
    m.playout_ts = 1000000 - 4500;
    id2 = submit(f, "f-1", &m); /* t0 + 70: a B-frame before the origin */
    m.playout_ts = 1000000 + 18000;
    id3 = submit(f, "f2", &m); /* t0 + 320 */
    f->now = t0 + 99 * MS; /* + 20 one way: f0 still fits, f-1 not */
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "f0", "f1", "f2", NULL);
    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.id, id2);
    assert_int_equal(d.reason, UTLS_SCHED_DROP_DEADLINE);
    assert_int_equal(d.substream, 2);
    assert_int_equal(d.deadline_ns, t0 + 70 * MS);
    /* Another sub-stream has a clock of its own (8 kHz audio). */
    assert_int_equal(UTLS_sched_set_clock(f->sch, 3, 8000, 0), 1);
    m.substream = 3;
    m.playout_ts = 42;
    submit(f, "a0", &m); /* starts at now + 20 */
    m.playout_ts = 42 + 400;
    submit(f, "a1", &m); /* + 50 ms */
    f->now += 25 * MS;   /* a0's deadline passed (now + 20 > now0 + 20), a1's not */
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "a1", NULL);
    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.substream, 3);
    assert_int_equal(d.reason, UTLS_SCHED_DROP_DEADLINE);
    (void)id0;
    (void)id1;
    (void)id3;
}

static void test_sched_dependencies(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG key = prio(1), dep = prio(1), indep = prio(1);
    uint64_t a, b, c, d_id, e, g;
    UTLS_SCHED_STATS st;

    sched_for(f, NULL);
    f->ti.srtt_us = 100000;
    key.flags = UTLS_SCHED_DEADLINE;
    key.deadline_ns = f->now + 10 * MS; /* cannot make it: 50 ms one way */
    a = submit(f, "I", &key);
    dep.flags = UTLS_SCHED_DEPENDS;
    dep.depends_on = a;
    b = submit(f, "P1", &dep);
    d_id = submit(f, "other", &indep);
    dep.depends_on = b;
    c = submit(f, "P2", &dep);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "other", NULL);
    expect_drop(f, a, UTLS_SCHED_DROP_DEADLINE, 0);
    expect_drop(f, b, UTLS_SCHED_DROP_DEPENDENCY, a);
    expect_drop(f, c, UTLS_SCHED_DROP_DEPENDENCY, b);
    expect_no_drop(f);
    /* Submitted after its dependency was dropped: accepted, dropped at once. */
    dep.depends_on = c;
    e = submit(f, "P3", &dep);
    expect_drop(f, e, UTLS_SCHED_DROP_DEPENDENCY, c);
    /* Depending on a message that was written is fine. */
    dep.depends_on = d_id;
    submit(f, "after other", &dep);
    /* Unknown ids are refused: the future, and 0. */
    dep.depends_on = 1000;
    assert_int_equal(UTLS_sched_submit(f->sch, "x", 1, &dep, NULL), 0);
    expect_error(UTLS_R_SCHED_BAD_DEPENDENCY);
    dep.depends_on = 0;
    assert_int_equal(UTLS_sched_submit(f->sch, "x", 1, &dep, NULL), 0);
    expect_error(UTLS_R_SCHED_BAD_DEPENDENCY);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "after other", NULL);
    /* A squashed message takes its dependents along. */
    key.flags = 0;
    key.squash_tag = 9;
    g = submit(f, "state v1", &key);
    dep.depends_on = g;
    e = submit(f, "delta on v1", &dep);
    c = submit(f, "state v2", &key);
    expect_drop(f, g, UTLS_SCHED_DROP_SQUASHED, c);
    expect_drop(f, e, UTLS_SCHED_DROP_DEPENDENCY, g);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "state v2", NULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.dropped_dependency, 4);
    assert_int_equal(st.refused, 2);
}

/* A dependent never goes before its dependency, whatever their priorities. */
static void test_sched_dependency_pulls_ahead(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG lo = prio(0), hi = prio(100);
    uint64_t a;

    sched_for(f, NULL);
    submit(f, "bulk", &lo);
    a = submit(f, "base", &lo);
    hi.flags = UTLS_SCHED_DEPENDS;
    hi.depends_on = a;
    submit(f, "urgent delta", &hi);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "base", "urgent delta", "bulk", NULL);
}

static void test_sched_limits(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_STATS st;
    UTLS_SCHED_DROP d;
    UTLS_SCHED_MSG m = prio(0);
    int i;

    /* Invalid configurations. */
    UTLS_sched_config_default(&cfg);
    cfg.max_messages = 0;
    assert_null(UTLS_sched_new(f->c, &cfg));
    expect_error(UTLS_R_SCHED_INVALID_CONFIG);
    UTLS_sched_config_default(&cfg);
    cfg.notsent_lowat = 0;
    assert_null(UTLS_sched_new(f->c, &cfg));
    expect_error(UTLS_R_SCHED_INVALID_CONFIG);
    assert_null(UTLS_sched_new(NULL, NULL));
    expect_error(UTLS_R_SCHED_INVALID_CONFIG);

    UTLS_sched_config_default(&cfg);
    assert_int_equal(cfg.max_messages, 4096);
    assert_int_equal(cfg.max_bytes, 4 * 1024 * 1024);
    assert_int_equal(cfg.notsent_lowat, 16384);
    cfg.max_messages = 3;
    cfg.max_bytes = 10;
    sched_for(f, &cfg);
    f->ti.notsent_bytes = 1 << 20; /* nothing leaves */
    submit(f, "1234", &m);
    submit(f, "5678", &m);
    assert_int_equal(UTLS_sched_submit(f->sch, "abc", 3, &m, NULL), 0); /* 11 bytes */
    expect_error(UTLS_R_SCHED_QUEUE_FULL);
    submit(f, "ab", &m);
    assert_int_equal(UTLS_sched_submit(f->sch, "c", 1, &m, NULL), 0); /* 4 messages */
    expect_error(UTLS_R_SCHED_QUEUE_FULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.queued_messages, 3);
    assert_int_equal(st.queued_bytes, 10);
    assert_int_equal(st.refused, 2);
    /* Once written, room again. */
    f->ti.notsent_bytes = 0;
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "1234", "5678", "ab", NULL);
    submit(f, "c", &m);
    UTLS_sched_free(f->sch);

    /* The drop report ring keeps the newest 1024 and counts the rest. */
    UTLS_sched_config_default(&cfg);
    sched_for(f, &cfg);
    m.squash_tag = 1;
    for (i = 0; i < 1030; i++) {
        submit(f, "s", &m);
    }
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.dropped_squashed, 1029);
    assert_int_equal(st.drop_reports_lost, 5);
    assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    assert_int_equal(d.id, 6); /* ids 1..5 were forgotten */
    for (i = 1; i < 1024; i++) {
        assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
    }
    assert_int_equal(d.id, 1029);
    expect_no_drop(f);
}

/* The window reserve: priority-0 messages leave window_reserve_segs segments
 * of the congestion window free (BBR's ProbeRTT: 4 segments), so a later
 * urgent message goes out at once; it never holds while nothing is in flight,
 * and is off by default. */
static void test_sched_window_reserve(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_MSG lo = prio(0), hi = prio(1);
    UTLS_SCHED_STATS st;
    size_t n;

    UTLS_sched_config_default(&cfg);
    cfg.window_reserve_segs = 17; /* over UTLS_SCHED_MAX_WINDOW_RESERVE */
    assert_null(UTLS_sched_new(f->c, &cfg));
    expect_error(UTLS_R_SCHED_INVALID_CONFIG);
    assert_int_equal(cfg.notsent_lowat, 16384);
    UTLS_sched_config_default(&cfg);
    assert_int_equal(cfg.window_reserve_segs, 0);

    /* Off by default: a full window holds nothing back. */
    sched_for(f, NULL);
    f->ti.mss = 1000;
    f->ti.cwnd_segs = 4;
    f->ti.bytes_in_flight = 4000;
    submit(f, "bulk0", &lo);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 1);
    expect(f, "bulk0", NULL);
    UTLS_sched_free(f->sch);

    cfg.window_reserve_segs = 1;
    sched_for(f, &cfg);
    /* 3 segments in flight of 4: a 5-byte message would use the reserve. */
    f->ti.bytes_in_flight = 3000;
    submit(f, "bulk1", &lo);
    submit(f, "bulk2-long", &lo); /* 10 bytes: 5 more than the room left below */
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 0);
    /* An urgent message is not held: it is what the reserve is for. */
    submit(f, "urgent", &hi);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 1);
    expect(f, "urgent", NULL);
    /* Unsent kernel bytes count against the window like bytes in flight. */
    f->ti.bytes_in_flight = 2000;
    f->ti.notsent_bytes = 996;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 0);
    f->ti.notsent_bytes = 995; /* 2000 + 995 + 5 + 1000 = the window */
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 1);
    expect(f, "bulk1", NULL);
    /* Nothing in flight: no acknowledgement would open the window, so the
     * reserve never stalls the connection (a window of 1 after a timeout). */
    f->ti.cwnd_segs = 1;
    f->ti.bytes_in_flight = 0;
    f->ti.notsent_bytes = 0;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 1);
    expect(f, "bulk2-long", NULL);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.window_waits, 4);
    assert_int_equal(st.written, 3);
    /* Without a window (not reported), nothing is held. */
    f->ti.cwnd_segs = 0;
    f->ti.bytes_in_flight = 5000;
    submit(f, "bulk3", &lo);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    expect(f, "bulk3", NULL);
    /* drain waits out UTLS_SCHED_WANT_TIMER and gives up at its timeout. */
    f->ti.cwnd_segs = 4;
    submit(f, "bulk4", &lo);
    assert_int_equal(UTLS_sched_drain(f->sch, 5), UTLS_SCHED_WANT_TIMER);
    f->ti.bytes_in_flight = 1000;
    assert_int_equal(UTLS_sched_drain(f->sch, 5), UTLS_SCHED_IDLE);
    expect(f, "bulk4", NULL);
}

/* ---- Draining ahead of BBR's ProbeRTT (probe_rtt_drain) ---------------- */

/* bbr_path sets the fake TCP information of a BBR connection in steady
 * state: a window of 100 segments of 1000 bytes, 50 in flight, 60 ms RTT. */
static void bbr_path(fixture *f)
{
    memset(&f->ti, 0, sizeof(f->ti));
    f->ti.mss = 1000;
    f->ti.cwnd_segs = 100;
    f->ti.bytes_in_flight = 50000;
    f->ti.srtt_us = 60000;
    f->ti.cc_is_bbr = 1;
    strcpy(f->ti.congestion_control, "bbr");
    f->ti.bbr_min_rtt_us = 60100;
}

/* flush_at moves the fake clock to |now| (ns) and returns what a flush
 * returns there. */
static UTLS_SCHED_RESULT flush_at(fixture *f, uint64_t now)
{
    size_t n;

    f->now = now;
    return UTLS_sched_flush(f->sch, &n);
}

/* observe_at moves the fake clock to |ms| and lets the scheduler look at the
 * TCP information (a flush with nothing queued still observes). */
static void observe_at(fixture *f, uint64_t ms)
{
    size_t n;

    f->now = ms * MS;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 0);
}

/* observe_cwnd_at: observe_at with a window of |cwnd_segs| segments. */
static void observe_cwnd_at(fixture *f, uint32_t cwnd_segs, uint64_t ms)
{
    f->ti.cwnd_segs = cwnd_segs;
    observe_at(f, ms);
}

static UTLS_SCHED_STATS stats_of(fixture *f)
{
    UTLS_SCHED_STATS st;

    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    return st;
}

/* The lead of a drain at 60 ms RTT: srtt + srtt/4 + 20 ms of slack. */
#define DRAIN_LEAD_MS 95

/* bbr_sched makes |f|'s scheduler with the defaults and a window reserve of
 * one segment, on a BBR path (bbr_path). */
static void bbr_sched(fixture *f)
{
    UTLS_SCHED_CONFIG cfg;

    UTLS_sched_config_default(&cfg);
    cfg.window_reserve_segs = 1;
    sched_for(f, &cfg);
    bbr_path(f);
}

/* learn_stamp lets the scheduler look at 1 s (the stamp of BBR's min_rtt
 * filter unknown), then at 2 s after a lower RTT sample: the filter was
 * refreshed at 2 s, so ProbeRTT is predicted at 12 s. */
static void learn_stamp(fixture *f)
{
    observe_at(f, 1000);
    f->ti.bbr_min_rtt_us = 60000;
    observe_at(f, 2000);
}

static void test_sched_probe_rtt_drain_predicts_and_holds(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_MSG lo = prio(0), hi = prio(1);
    UTLS_SCHED_STATS st;
    size_t n;

    UTLS_sched_config_default(&cfg);
    assert_int_equal(cfg.probe_rtt_drain, 1);
    cfg.probe_rtt_drain = 2;
    assert_null(UTLS_sched_new(f->c, &cfg));
    expect_error(UTLS_R_SCHED_INVALID_CONFIG);
    cfg.probe_rtt_drain = 1;
    cfg.window_reserve_segs = 1;
    sched_for(f, &cfg);
    bbr_path(f);

    /* The stamp of BBR's min_rtt filter is unknown: no prediction. */
    observe_at(f, 1000);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_next_ns, 0);
    assert_int_equal(st.probe_rtt_interval_ns, 10000 * MS);
    /* A lower RTT sample: the filter was refreshed now; ProbeRTT is due
     * 10 s later. */
    f->ti.bbr_min_rtt_us = 60000;
    observe_at(f, 2000);
    assert_int_equal(stats_of(f).probe_rtt_next_ns, 12000 * MS);

    /* Just before the drain: bulk fills the window as usual. */
    submit(f, "bulk0", &lo);
    f->now = (12000 - DRAIN_LEAD_MS - 1) * MS;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 1);
    expect(f, "bulk0", NULL);
    /* A round trip and a bit before it: bulk waits while more than the
     * ProbeRTT window less the reserve (3 segments) is in flight... */
    submit(f, "bulk1", &lo);
    f->now = (12000 - DRAIN_LEAD_MS) * MS;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 0);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_drains, 1);
    assert_int_equal(st.probe_rtt_drain_waits, 1);
    assert_int_equal(st.window_waits, 0);
    /* ...while urgent messages go at once. */
    submit(f, "urgent0", &hi);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(n, 1);
    expect(f, "urgent0", NULL);
    /* Acknowledgements come: 2 segments + 5 bytes + the reserve fit 4. */
    f->now += 30 * MS;
    f->ti.bytes_in_flight = 2995;
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    assert_int_equal(n, 1);
    expect(f, "bulk1", NULL);
    /* Nothing in flight: never held (no acknowledgement would come). */
    f->ti.bytes_in_flight = 0;
    f->ti.notsent_bytes = 0;
    submit(f, "bulk2", &lo);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    expect(f, "bulk2", NULL);

    /* BBR enters ProbeRTT: the drain met it. The window itself now holds
     * bulk (the plain window reserve). */
    f->ti.cwnd_segs = 4;
    f->ti.bytes_in_flight = 3000;
    f->ti.bbr_min_rtt_us = 60150; /* the expired filter takes the sample */
    observe_at(f, 12004);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_seen, 1);
    assert_int_equal(st.probe_rtt_predicted, 1);
    assert_int_equal(st.probe_rtt_drains_wasted, 0);
    assert_int_equal(st.probe_rtt_drain_ns, (DRAIN_LEAD_MS + 4) * MS);
    assert_int_equal(st.probe_rtt_held_bytes, 5); /* bulk1 waited */
    assert_int_equal(st.probe_rtt_next_ns, 0);    /* in ProbeRTT */
    /* Learned 10.004 s, but the history is not full: 10 s still counts. */
    assert_int_equal(st.probe_rtt_interval_ns, 10000 * MS);
    submit(f, "bulk3", &lo);
    assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_WANT_TIMER);
    st = stats_of(f);
    assert_int_equal(st.window_waits, 1);
    assert_int_equal(st.probe_rtt_drain_waits, 2); /* bulk1, twice */
    /* ProbeRTT ends (bbr_check_probe_rtt_done: min_rtt_stamp = now). */
    f->ti.cwnd_segs = 100;
    assert_int_equal(flush_at(f, 12300 * MS), UTLS_SCHED_IDLE);
    expect(f, "bulk3", NULL);
    assert_int_equal(stats_of(f).probe_rtt_next_ns, 22300 * MS);
}

static void test_sched_probe_rtt_drain_wasted(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG lo = prio(0);
    UTLS_SCHED_STATS st;

    bbr_sched(f);
    learn_stamp(f);
    /* A drain starts; then a lower sample refreshes the filter: the
     * ProbeRTT it was for will not come, bulk is released at once. */
    submit(f, "bulk0", &lo);
    assert_int_equal(flush_at(f, 11950 * MS), UTLS_SCHED_WANT_TIMER);
    f->ti.bbr_min_rtt_us = 59990;
    assert_int_equal(flush_at(f, 11960 * MS), UTLS_SCHED_IDLE);
    expect(f, "bulk0", NULL);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_drains, 1);
    assert_int_equal(st.probe_rtt_drains_wasted, 1);
    assert_int_equal(st.probe_rtt_predicted, 0);
    assert_int_equal(st.probe_rtt_drain_ns, 10 * MS);
    assert_int_equal(st.probe_rtt_next_ns, 21960 * MS);

    /* A refresh the scheduler cannot see (a sample equal to min_rtt): the
     * drain waits a lead past the predicted entry, then gives up. One drain
     * per stamp: no second one. */
    submit(f, "bulk1", &lo);
    assert_int_equal(flush_at(f, (21960 - DRAIN_LEAD_MS) * MS), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(flush_at(f, (21960 + DRAIN_LEAD_MS) * MS), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(flush_at(f, f->now + 1 * MS), UTLS_SCHED_IDLE);
    expect(f, "bulk1", NULL);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_drains, 2);
    assert_int_equal(st.probe_rtt_drains_wasted, 2);
    observe_at(f, 22100);
    assert_int_equal(stats_of(f).probe_rtt_drains, 2);
    /* The ProbeRTT comes later: seen, not predicted (missed). */
    observe_cwnd_at(f, 4, 25000);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_seen, 1);
    assert_int_equal(st.probe_rtt_predicted, 0);
}

static void test_sched_probe_rtt_drain_learns_interval(void **state)
{
    fixture *f = *state;
    uint64_t t = 1000;
    int i;

    bbr_sched(f);
    observe_at(f, t);
    observe_cwnd_at(f, 4, t += 100); /* a first ProbeRTT, its stamp unknown: not learned */
    /* Four ProbeRTTs 12 s after each end (a BBR with a longer filter): once
     * the history is full, the prior 10 s no longer counts. */
    for (i = 0; i < 4; i++) {
        observe_cwnd_at(f, 100, t += 300); /* ProbeRTT ends: the stamp */
        assert_int_equal(stats_of(f).probe_rtt_interval_ns, 10000 * MS);
        observe_cwnd_at(f, 4, t += 12000);
    }
    observe_cwnd_at(f, 100, t += 300);
    assert_int_equal(stats_of(f).probe_rtt_interval_ns, 12000 * MS);
    assert_int_equal(stats_of(f).probe_rtt_next_ns, (t + 12000) * MS);
    assert_int_equal(stats_of(f).probe_rtt_seen, 5);
    /* An interval below 2 s is not BBR's timer (nor one a peer may force
     * on the scheduler): not learned. */
    observe_cwnd_at(f, 4, t += 1000);
    observe_cwnd_at(f, 100, t += 300);
    assert_int_equal(stats_of(f).probe_rtt_interval_ns, 12000 * MS);
    /* Shorter intervals replace longer ones at once (an unseen refresh only
     * ever lengthens one). */
    observe_cwnd_at(f, 4, t += 9000);
    observe_cwnd_at(f, 100, t += 300);
    assert_int_equal(stats_of(f).probe_rtt_interval_ns, 9000 * MS);
}

static void test_sched_probe_rtt_drain_bounded(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG lo = prio(0);
    UTLS_SCHED_STATS st;
    size_t n;

    /* An RTT of 5 s (a peer that delays its ACKs): the drain still starts
     * at most 250 ms before the predicted entry and ends at most 250 ms
     * after it. */
    bbr_sched(f);
    f->ti.srtt_us = 5000000;
    learn_stamp(f);
    submit(f, "bulk0", &lo);
    assert_int_equal(flush_at(f, (12000 - 251) * MS), UTLS_SCHED_IDLE);
    expect(f, "bulk0", NULL);
    submit(f, "bulk1", &lo);
    assert_int_equal(flush_at(f, (12000 - 250) * MS), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(flush_at(f, (12000 + 250) * MS), UTLS_SCHED_WANT_TIMER);
    assert_int_equal(flush_at(f, f->now + 1), UTLS_SCHED_IDLE);
    expect(f, "bulk1", NULL);
    st = stats_of(f);
    assert_int_equal(st.probe_rtt_drains, 1);
    assert_int_equal(st.probe_rtt_drains_wasted, 1);
    assert_int_equal(st.probe_rtt_drain_ns, 500 * MS + 1);
    /* A min_rtt that changes on every flush (forged or real) only moves the
     * stamp: no drain starts before the interval has nearly passed. */
    for (f->now = 13000 * MS; f->now < 30000 * MS; f->now += 100 * MS) {
        f->ti.bbr_min_rtt_us ^= 1;
        assert_int_equal(UTLS_sched_flush(f->sch, &n), UTLS_SCHED_IDLE);
    }
    assert_int_equal(stats_of(f).probe_rtt_drains, 1);
}

static void test_sched_probe_rtt_drain_only_with_bbr(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_MSG lo = prio(0);
    UTLS_SCHED_STATS st;
    int round;

    /* Not BBR, no window reserve, or switched off: nothing is predicted or
     * held at the time a drain would be. */
    for (round = 0; round < 3; round++) {
        UTLS_sched_config_default(&cfg);
        cfg.window_reserve_segs = round == 1 ? 0 : 1;
        cfg.probe_rtt_drain = round == 2 ? 0 : 1;
        sched_for(f, &cfg);
        bbr_path(f);
        if (round == 0) {
            f->ti.cc_is_bbr = 0;
            strcpy(f->ti.congestion_control, "cubic");
        }
        learn_stamp(f);
        submit(f, "bulk", &lo);
        assert_int_equal(flush_at(f, 11950 * MS), UTLS_SCHED_IDLE);
        expect(f, "bulk", NULL);
        st = stats_of(f);
        assert_int_equal(st.probe_rtt_drains, 0);
        assert_int_equal(st.probe_rtt_next_ns, 0);
        UTLS_sched_free(f->sch);
        f->sch = NULL;
    }

    /* Loss recovery with a small window (what was in flight) is not
     * ProbeRTT; a ProbeRTT that began during it is seen when it ends. */
    UTLS_sched_config_default(&cfg);
    cfg.window_reserve_segs = 1;
    sched_for(f, &cfg);
    bbr_path(f);
    observe_at(f, 1000);
    f->ti.ca_state = 3;
    observe_cwnd_at(f, 3, 1100);
    assert_int_equal(stats_of(f).probe_rtt_seen, 0);
    f->ti.ca_state = 0;
    observe_cwnd_at(f, 4, 1160);
    assert_int_equal(stats_of(f).probe_rtt_seen, 1);
    /* A timeout's window of 1 (the loss state) is not ProbeRTT either. */
    observe_cwnd_at(f, 50, 1400);
    f->ti.ca_state = 4;
    observe_cwnd_at(f, 1, 1500);
    assert_int_equal(stats_of(f).probe_rtt_seen, 1);
    /* The congestion control changes under the scheduler: all forgotten. */
    f->ti.ca_state = 0;
    observe_cwnd_at(f, 50, 1600);
    assert_true(stats_of(f).probe_rtt_next_ns != 0);
    f->ti.cc_is_bbr = 0;
    observe_at(f, 1700);
    assert_int_equal(stats_of(f).probe_rtt_next_ns, 0);
    assert_int_equal(stats_of(f).probe_rtt_interval_ns, 0);
}

static void test_sched_oversize_and_bad_messages(void **state)
{
    fixture *f = *state;
    static unsigned char big[16385];
    UTLS_SCHED_MSG m = prio(0);
    UTLS_SCHED_STATS st;
    uint64_t id = 99;

    sched_for(f, NULL);
    assert_int_equal(UTLS_sched_max_message(f->sch), 16384);
    /* RFC 8446 5.1: 2^14 is the largest plaintext; one more is refused, not
     * split. */
    assert_int_equal(UTLS_sched_submit(f->sch, big, sizeof(big), &m, &id), 0);
    expect_error(UTLS_R_SCHED_MESSAGE_TOO_LARGE);
    assert_int_equal(id, 99);
    assert_int_equal(UTLS_sched_submit(f->sch, big, 0xffff, &m, NULL), 0);
    expect_error(UTLS_R_SCHED_MESSAGE_TOO_LARGE);
    assert_int_equal(UTLS_sched_submit(f->sch, big, 16384, &m, &id), 1);
    assert_int_equal(id, 1);
    assert_int_equal(UTLS_sched_submit(f->sch, big, 0, &m, NULL), 0);
    expect_error(UTLS_R_SCHED_BAD_MESSAGE);
    m.flags = 0x80;
    assert_int_equal(UTLS_sched_submit(f->sch, "x", 1, &m, NULL), 0);
    expect_error(UTLS_R_SCHED_BAD_MESSAGE);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "<16384 bytes>", NULL);
    /* A smaller record limit is honoured. */
    assert_int_equal(SSL_set_max_send_fragment(f->c, 512), 1);
    assert_int_equal(UTLS_sched_max_message(f->sch), 512);
    m.flags = 0;
    assert_int_equal(UTLS_sched_submit(f->sch, big, 513, &m, NULL), 0);
    expect_error(UTLS_R_SCHED_MESSAGE_TOO_LARGE);
    assert_int_equal(UTLS_sched_submit(f->sch, big, 512, &m, NULL), 1);
    /* ... also for what was queued before the limit shrank. */
    assert_int_equal(SSL_set_max_send_fragment(f->c, 16384), 1);
    id = submit(f, "later", &m);
    assert_int_equal(UTLS_sched_submit(f->sch, big, 1000, &m, &id), 1);
    assert_int_equal(SSL_set_max_send_fragment(f->c, 600), 1);
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "<512 bytes>", "later", NULL);
    expect_drop(f, id, UTLS_SCHED_DROP_TOO_LARGE, 0);
    assert_int_equal(UTLS_sched_get_stats(f->sch, &st), 1);
    assert_int_equal(st.refused, 5);
    assert_int_equal(st.dropped_too_large, 1);
    assert_string_equal(UTLS_sched_drop_reason_string(UTLS_SCHED_DROP_DEADLINE),
                        "would arrive after its deadline");
    assert_string_equal(UTLS_sched_drop_reason_string((UTLS_SCHED_DROP_REASON)77), "unknown");
}

/* Sub-streams label messages: reported back, scoping squash tags and clocks
 * (above); they do not change the order. */
static void test_sched_substream_tagging(void **state)
{
    fixture *f = *state;
    UTLS_SCHED_MSG m = prio(4);
    UTLS_SCHED_DROP d;
    int sub;

    sched_for(f, NULL);
    f->ti.srtt_us = 10000;
    for (sub = 250; sub < 256; sub++) {
        m.substream = (uint8_t)sub;
        m.flags = UTLS_SCHED_DEADLINE;
        m.deadline_ns = sub % 2 ? f->now : f->now + MS * 100;
        submit(f, sub % 2 ? "odd" : "even", &m);
    }
    assert_int_equal(UTLS_sched_flush(f->sch, NULL), UTLS_SCHED_IDLE);
    expect(f, "even", "even", "even", NULL);
    for (sub = 251; sub < 256; sub += 2) {
        assert_int_equal(UTLS_sched_next_drop(f->sch, &d), 1);
        assert_int_equal(d.substream, sub);
        assert_int_equal(d.priority, 4);
    }
    expect_no_drop(f);
}

/* UTLS_tcp_get_info and the safe controls on a real loopback connection. */
static void test_sched_tcp_info_and_control(void **state)
{
    int lfd, cfd, afd, p[2];
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    UTLS_TCP_INFO ti;
    char buf[1000];

    (void)state;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 1), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    cfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(write(cfd, buf, sizeof(buf)), sizeof(buf));
    assert_int_equal(read(afd, buf, sizeof(buf)) > 0, 1);
    assert_int_equal(UTLS_tcp_get_info(cfd, &ti), 1);
    assert_true(ti.mss > 0);
    assert_true(ti.cwnd_segs > 0);
    assert_true(ti.srtt_us > 0);
    assert_int_equal(ti.max_pacing_rate, UINT64_MAX);
    /* The congestion control's name and, for BBR, its state (TCP_CC_INFO). */
    assert_true(ti.congestion_control[0] != '\0');
    assert_int_equal(ti.cc_is_bbr, strcmp(ti.congestion_control, "bbr") == 0);
    assert_int_equal(ti.bbr_min_rtt_us > 0, ti.cc_is_bbr);
    if (setsockopt(cfd, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) == 0) {
        assert_int_equal(UTLS_tcp_get_info(cfd, &ti), 1);
        assert_string_equal(ti.congestion_control, "bbr");
        assert_int_equal(ti.cc_is_bbr, 1);
    }
    if (setsockopt(cfd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5) == 0) {
        assert_int_equal(UTLS_tcp_get_info(cfd, &ti), 1);
        assert_string_equal(ti.congestion_control, "cubic");
        assert_int_equal(ti.cc_is_bbr, 0);
        assert_int_equal(ti.bbr_min_rtt_us, 0);
        assert_int_equal(ti.bbr_bw, 0);
    }
    /* Safe control: a pacing cap and a window clamp only restrain. */
    assert_int_equal(UTLS_tcp_set_max_pacing_rate(cfd, 1000000), 1);
    assert_int_equal(UTLS_tcp_get_info(cfd, &ti), 1);
    assert_int_equal(ti.max_pacing_rate, 1000000);
    assert_int_equal(UTLS_tcp_set_max_pacing_rate(cfd, UINT64_MAX), 1);
    assert_int_equal(UTLS_tcp_set_window_clamp(afd, 65536), 1);
    assert_int_equal(UTLS_tcp_set_window_clamp(afd, 0), 0);
    expect_error(UTLS_R_SCHED_TCP_INFO);
    /* Not a TCP socket. */
    assert_int_equal(pipe(p), 0);
    assert_int_equal(UTLS_tcp_get_info(p[0], &ti), 0);
    expect_error(UTLS_R_SCHED_TCP_INFO);
    assert_int_equal(UTLS_tcp_get_info(-1, &ti), 0);
    expect_error(UTLS_R_SCHED_TCP_INFO);
    close(p[0]);
    close(p[1]);
    close(cfd);
    close(afd);
    close(lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sched_priority_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_fifo_within_priority, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_lowat_late_binding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_squash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_partial_record_is_committed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_deadline_absolute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_deadline_counts_kernel_backlog, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_playout_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_dependencies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_dependency_pulls_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_window_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_probe_rtt_drain_predicts_and_holds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_probe_rtt_drain_wasted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_probe_rtt_drain_learns_interval, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_probe_rtt_drain_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_probe_rtt_drain_only_with_bbr, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_oversize_and_bad_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_substream_tagging, setup, teardown),
        cmocka_unit_test(test_sched_tcp_info_and_control),
    };

    return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
