/*
 * Explicit record numbers negotiated under encryption (docs/ern.md), in
 * process: two fork endpoints in memory, the client's records through the
 * lossy segment network (tests/unordered/lossy.h) into the server's segment
 * BIO. With --json FILE it also writes the probes per out-of-order record for
 * constant, variable and mixed record sizes (bench: ern.probes_per_ooo_record).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "lossy.h"
#include "uharness.h"

static EVP_PKEY *g_key;
static X509 *g_cert;

typedef struct {
    SSL *c, *s;
    BIO *c_in, *c_out, *seg;
    uint64_t s_off; /* next stream offset of the client's bytes */
    lossy_net *net;
    /* what the server received */
    int *seen;
    size_t num_apps, got, ooo, bad;
    int fatal;
} pair;

static void make_pair(pair *p, int client_negotiates, int server_negotiates, int tickets)
{
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method()), *cctx = SSL_CTX_new(TLS_client_method());

    memset(p, 0, sizeof(*p));
    assert_non_null(sctx);
    assert_non_null(cctx);
    assert_true(SSL_CTX_use_certificate(sctx, g_cert));
    assert_true(SSL_CTX_use_PrivateKey(sctx, g_key));
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    SSL_CTX_set_num_tickets(sctx, (size_t)tickets);
    p->c = SSL_new(cctx);
    p->s = SSL_new(sctx);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    p->c_in = BIO_new(BIO_s_mem());
    p->c_out = BIO_new(BIO_s_mem());
    p->seg = BIO_new(UTLS_BIO_s_segment());
    SSL_set_bio(p->c, p->c_in, p->c_out);
    SSL_set_bio(p->s, p->seg, p->seg);
    SSL_set_mode(p->s, SSL_MODE_UNORDERED);
    if (client_negotiates)
        SSL_set_mode(p->c, SSL_MODE_UTLS_NEGOTIATE);
    if (server_negotiates)
        SSL_set_mode(p->s, SSL_MODE_UTLS_NEGOTIATE);
    SSL_set_connect_state(p->c);
    SSL_set_accept_state(p->s);
}

/* shuttle moves the client's bytes to the server in order (no loss) and the
 * server's to the client. */
static void shuttle(pair *p)
{
    unsigned char buf[16384];
    int n;
    size_t k;

    while ((n = BIO_read(p->c_out, buf, sizeof(buf))) > 0) {
        assert_true(UTLS_BIO_segment_push(p->seg, p->s_off, buf, (size_t)n));
        p->s_off += (uint64_t)n;
    }
    while ((k = UTLS_BIO_segment_take_output(p->seg, buf, sizeof(buf))) > 0)
        BIO_write(p->c_in, buf, (int)k);
}

static void handshake(pair *p)
{
    unsigned char tmp[64];

    for (int i = 0; i < 10; i++) {
        SSL_do_handshake(p->c);
        SSL_do_handshake(p->s);
        shuttle(p);
    }
    assert_true(SSL_is_init_finished(p->c) && SSL_is_init_finished(p->s));
    /* The client reads what the server sent after the handshake (tickets). */
    assert_int_equal(SSL_read(p->c, tmp, sizeof(tmp)), -1);
    assert_int_equal(SSL_get_error(p->c, -1), SSL_ERROR_WANT_READ);
}

static void free_pair(pair *p)
{
    lossy_free(p->net);
    SSL_free(p->c);
    SSL_free(p->s);
    free(p->seen);
}

/* read_all reads every record the server can deliver now. */
static void read_all(pair *p)
{
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    UTLS_RECORD_INFO info;
    size_t n;
    uint32_t idx;

    while (UTLS_read_record(p->s, buf, sizeof(buf), &n, &info)) {
        if (!uh_msg_check(buf, n, &idx) || idx >= p->num_apps || p->seen[idx]) {
            p->bad++;
            continue;
        }
        p->seen[idx] = 1;
        p->got++;
        p->ooo += info.out_of_order != 0;
    }
    if (SSL_get_error(p->s, 0) != SSL_ERROR_WANT_READ)
        p->fatal = 1;
}

static int deliver(void *arg, lossy_delivery *d)
{
    pair *p = arg;

    if (!UTLS_BIO_segment_push(p->seg, p->s_off + d->offset, d->data, d->len))
        return LOSSY_CB_RETRY;
    read_all(p);
    return p->fatal ? LOSSY_CB_ABORT : LOSSY_CB_OK;
}

enum sizes { SIZES_CBR, SIZES_VBR, SIZES_MIXED };

static size_t msg_size(lossy_rng *rng, enum sizes kind, size_t i)
{
    switch (kind) {
    case SIZES_CBR:
        return 1000;
    case SIZES_VBR:
        /* a voice/video codec: a drifting rate with +-15% per record */
        return 400 + (size_t)(300.0 * (1.0 + 0.8 * ((double)(i % 200) / 200.0)))
            + lossy_rng_below(rng, 150);
    case SIZES_MIXED:
    default:
        return 100 + lossy_rng_below(rng, 16000 - 100);
    }
}

/* stream sends |num| messages from client to server through the lossy network
 * at |loss|, both ends negotiating as given. Returns the server's stats. */
static UTLS_STATS stream(pair *p, size_t num, enum sizes kind, double loss, uint64_t seed)
{
    lossy_params lp;
    lossy_rng rng;
    uint8_t m[UH_MSG_MAX];
    unsigned char buf[65536];
    UTLS_STATS st;
    int n;

    lossy_params_default(&lp, loss);
    lossy_rng_seed(&rng, seed ^ 0x5eed);
    p->num_apps = num;
    p->seen = calloc(num, sizeof(*p->seen));
    p->net = lossy_new(&lp, seed, deliver, p);
    assert_non_null(p->net);
    for (size_t i = 0; i < num; i++) {
        size_t len = msg_size(&rng, kind, i);

        assert_true(uh_msg_build(m, (uint32_t)i, len));
        assert_int_equal(SSL_write(p->c, m, (int)len), (int)len);
        while ((n = BIO_read(p->c_out, buf, sizeof(buf))) > 0)
            assert_true(lossy_send(p->net, buf, (size_t)n));
    }
    assert_true(lossy_finish(p->net));
    read_all(p);
    assert_false(p->fatal);
    assert_int_equal(p->bad, 0);
    assert_int_equal(p->got, num); /* every message exactly once */
    assert_int_equal(UTLS_get_stats(p->s, &st), 1);
    return st;
}

static double g_ppr[3];

static void run_probes_case(enum sizes kind, size_t num)
{
    pair p;
    UTLS_STATS st;

    make_pair(&p, 1, 1, 2);
    handshake(&p);
    st = stream(&p, num, kind, 0.02, 0xe4e0 + kind);
    /* Both directions agreed: the client numbers its records. */
    assert_true(UTLS_ern_status(p.c) & UTLS_ERN_TX);
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    assert_true(st.records_out_of_order > 0);
    assert_int_equal(st.ern_records_received + st.records_skipped, num);
    /* The one-block test picks the right candidate: one full check per
     * record delivered out of order, whatever the sizes. */
    assert_int_equal(st.probes, st.records_out_of_order);
    g_ppr[kind] = (double)st.probes / (double)st.records_out_of_order;
    printf("[ern] %s: %llu records out of order, %llu probes, %llu block tests\n",
           kind == SIZES_CBR ? "cbr" : kind == SIZES_VBR ? "vbr" : "mixed",
           (unsigned long long)st.records_out_of_order, (unsigned long long)st.probes,
           (unsigned long long)st.ern_block_checks);
    free_pair(&p);
}

static void test_ern_probes_cbr(void **state)
{
    (void)state;
    run_probes_case(SIZES_CBR, 2000);
}

static void test_ern_probes_vbr(void **state)
{
    (void)state;
    run_probes_case(SIZES_VBR, 2000);
}

static void test_ern_probes_mixed(void **state)
{
    (void)state;
    run_probes_case(SIZES_MIXED, 400);
}

/* No ticket, no offer: nothing is numbered and everything works. */
static void test_ern_lost_offer(void **state)
{
    pair p;
    UTLS_STATS st;

    (void)state;
    make_pair(&p, 1, 1, 0);
    handshake(&p);
    st = stream(&p, 300, SIZES_VBR, 0.02, 11);
    assert_int_equal(UTLS_ern_status(p.c), 0);
    assert_false(UTLS_ern_status(p.s) & (UTLS_ERN_RX | UTLS_ERN_TX));
    assert_int_equal(st.ern_records_received, 0);
    free_pair(&p);
}

/* The client sees the offer but never writes: no accept reaches the server
 * until UTLS_ern_flush() sends it in an empty record. */
static void test_ern_lost_accept_then_flush(void **state)
{
    pair p;
    uint8_t buf[100];

    (void)state;
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_OFFERED);
    assert_false(UTLS_ern_status(p.c) & UTLS_ERN_ACCEPTED);
    shuttle(&p);
    assert_int_equal(SSL_read(p.s, buf, sizeof(buf)), -1);
    assert_false(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    /* The explicit flush: one empty application record carrying the accept. */
    assert_int_equal(UTLS_ern_flush(p.c), 1);
    assert_true(UTLS_ern_status(p.c) & UTLS_ERN_ACCEPTED);
    shuttle(&p);
    assert_int_equal(SSL_read(p.s, buf, sizeof(buf)), -1); /* nothing to deliver */
    assert_int_equal(SSL_get_error(p.s, -1), SSL_ERROR_WANT_READ);
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    free_pair(&p);
}

/* The client's switch record (its first numbered one) is lost: the numbered
 * records after it arrive first, are recognised by the number test and
 * delivered; the switch takes effect when it arrives in order. */
static void test_ern_switch_record_lost(void **state)
{
    pair p;
    lossy_params lp;
    uint8_t m[1200];
    unsigned char buf[65536];
    int n;

    (void)state;
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    lossy_params_lossless(&lp);
    lp.rtt = 20;
    p.num_apps = 40;
    p.seen = calloc(p.num_apps, sizeof(*p.seen));
    p.net = lossy_new(&lp, 3, deliver, &p);
    assert_non_null(p.net);
    /* Lose the first record written after the offer: it carries the accept. */
    lossy_drop_range(p.net, 0, 1);
    for (uint32_t i = 0; i < p.num_apps; i++) {
        assert_true(uh_msg_build(m, i, sizeof(m)));
        assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m));
        while ((n = BIO_read(p.c_out, buf, sizeof(buf))) > 0)
            assert_true(lossy_send(p.net, buf, (size_t)n));
        if (i == 10) {
            /* Records past the lost switch record came out of order, while the
             * server did not know yet that the client numbers its records. */
            assert_true(p.ooo > 0);
            assert_false(UTLS_ern_status(p.s) & UTLS_ERN_RX);
        }
    }
    assert_true(lossy_finish(p.net));
    read_all(&p);
    assert_int_equal(p.bad, 0);
    assert_int_equal(p.got, p.num_apps);
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    free_pair(&p);
}

/* A legacy client (no negotiation) padding its records at random: the
 * negotiating server never mistakes anything for numbers. */
static size_t random_padding(SSL *s, int type, size_t len, void *arg)
{
    (void)s, (void)type, (void)len;
    return (size_t)lossy_rng_below(arg, 200);
}

static void test_ern_legacy_random_padding(void **state)
{
    pair p;
    lossy_rng rng;
    UTLS_STATS st;

    (void)state;
    make_pair(&p, 0, 1, 2);
    lossy_rng_seed(&rng, 99);
    SSL_set_record_padding_callback(p.c, random_padding);
    SSL_set_record_padding_callback_arg(p.c, &rng);
    handshake(&p);
    st = stream(&p, 500, SIZES_VBR, 0.02, 12);
    assert_true(st.records_out_of_order > 0);
    assert_false(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    assert_int_equal(st.ern_records_received, 0);
    free_pair(&p);
}

/* Once numbered, a record without its number (a sender that lied, here one
 * that switched numbering off) is a fatal decode_error in order. */
static void test_ern_wrong_number_is_fatal(void **state)
{
    pair p;
    uint8_t m[300], buf[1000];
    size_t n;

    (void)state;
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    assert_true(uh_msg_build(m, 0, sizeof(m)));
    assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m));
    shuttle(&p);
    assert_true(SSL_read_ex(p.s, buf, sizeof(buf), &n));
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    SSL_clear_mode(p.c, SSL_MODE_UTLS_NEGOTIATE); /* the sender stops numbering */
    assert_true(uh_msg_build(m, 1, sizeof(m)));
    assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m));
    shuttle(&p);
    assert_false(SSL_read_ex(p.s, buf, sizeof(buf), &n));
    assert_int_equal(SSL_get_error(p.s, 0), SSL_ERROR_SSL);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), SSL_R_BAD_RECORD_TYPE);
    ERR_clear_error();
    free_pair(&p);
}

static int setup(void **state)
{
    (void)state;
    return uh_make_identity(1, &g_key, &g_cert) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(g_key);
    X509_free(g_cert);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ern_probes_cbr),
        cmocka_unit_test(test_ern_probes_vbr),
        cmocka_unit_test(test_ern_probes_mixed),
        cmocka_unit_test(test_ern_lost_offer),
        cmocka_unit_test(test_ern_lost_accept_then_flush),
        cmocka_unit_test(test_ern_switch_record_lost),
        cmocka_unit_test(test_ern_legacy_random_padding),
        cmocka_unit_test(test_ern_wrong_number_is_fatal),
    };
    int r = cmocka_run_group_tests_name("ern", tests, setup, teardown);

    if (argc == 3 && strcmp(argv[1], "--json") == 0 && r == 0) {
        FILE *f = fopen(argv[2], "w");

        if (f == NULL)
            return 1;
        fprintf(f, "{\"probes_per_ooo_record\": {\"cbr\": %.4f, \"vbr\": %.4f, \"mixed\": %.4f}, "
                   "\"loss\": 0.02}\n", g_ppr[SIZES_CBR], g_ppr[SIZES_VBR], g_ppr[SIZES_MIXED]);
        fclose(f);
    }
    return r;
}
