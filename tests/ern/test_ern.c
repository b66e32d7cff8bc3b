/*
 * Explicit record numbers negotiated under encryption (docs/ern.md), in
 * process: two fork endpoints in memory, the client's records through the
 * lossy segment network (tests/common/lossy.h) into the server's segment
 * BIO. With --json FILE it also writes the probes per out-of-order record for
 * constant, variable and mixed record sizes (bench: ern.probes_per_ooo_record,
 * TLS 1.3; ern.probes_per_ooo_record_by_version for TLS 1.3 and TLS 1.2).
 *
 * TLS 1.3 tests run with the default suites; the test_ern12_* ones with TLS 1.2
 * and the suite in g_tls12 (the offer is the explicit nonce of the server's
 * Finished, docs/ern.md "TLS 1.2").
 */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "lossy.h"
#include "uharness.h"

/* NULL: TLS 1.3. Otherwise TLS 1.2 with this cipher list (the server's
 * identity is P-256, so ECDHE-ECDSA suites). Set at the start of every test. */
static const char *g_tls12;
#define GCM128 "ECDHE-ECDSA-AES128-GCM-SHA256"
#define GCM256 "ECDHE-ECDSA-AES256-GCM-SHA384"
#define CHACHA12 "ECDHE-ECDSA-CHACHA20-POLY1305"
#define CCM12 "ECDHE-ECDSA-AES128-CCM"
#define CBC12 "ECDHE-ECDSA-AES128-SHA256"
#define CBC12_SHA1 "ECDHE-ECDSA-AES256-SHA"
#define CAMELLIA12 "ECDHE-ECDSA-CAMELLIA128-SHA256"
/* TLS 1.2 CBC: 1 turns encrypt-then-MAC (RFC 7366, on by default) off, so
 * that MAC-then-encrypt runs. Set at the start of every test. */
static int g_mte;
/* When set, make_pair uses this server context (resumption needs the same
 * session cache); otherwise a new one. Set at the start of every test. */
static SSL_CTX *g_sctx;

typedef struct {
    SSL *c, *s;
    BIO *c_in, *c_out, *seg;
    uint64_t s_off; /* next stream offset of the client's bytes */
    lossy_net *net;
    /* every byte the server sent, for the nonce checks */
    unsigned char *s2c;
    size_t s2c_len;
    /* what the server received */
    int *seen;
    size_t num_apps, got, ooo, bad;
    int fatal;
} pair;

static void make_pair(pair *p, int client_negotiates, int server_negotiates, int tickets)
{
    SSL_CTX *sctx = g_sctx != NULL && SSL_CTX_up_ref(g_sctx) ? g_sctx
                                                             : SSL_CTX_new(TLS_server_method());
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());

    memset(p, 0, sizeof(*p));
    assert_non_null(sctx);
    assert_non_null(cctx);
    assert_true(SSL_CTX_use_certificate(sctx, uh_cert));
    assert_true(SSL_CTX_use_PrivateKey(sctx, uh_key));
    if (g_tls12 == NULL) {
        SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    } else {
        SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION);
        assert_int_equal(SSL_CTX_set_cipher_list(cctx, g_tls12), 1);
        assert_int_equal(SSL_CTX_set_cipher_list(sctx, g_tls12), 1);
        if (g_mte)
            SSL_CTX_set_options(cctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
    }
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
    while ((k = UTLS_BIO_segment_take_output(p->seg, buf, sizeof(buf))) > 0) {
        BIO_write(p->c_in, buf, (int)k);
        p->s2c = realloc(p->s2c, p->s2c_len + k);
        assert_non_null(p->s2c);
        memcpy(p->s2c + p->s2c_len, buf, k);
        p->s2c_len += k;
    }
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
    assert_int_equal(SSL_version(p->c), g_tls12 == NULL ? TLS1_3_VERSION : TLS1_2_VERSION);
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
    free(p->s2c);
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

/* read_expect reads what the server can deliver (read_all) and checks that
 * the connection is not broken, that nothing corrupt or duplicated was
 * delivered, and that |got| messages were delivered in all. */
static void read_expect(pair *p, size_t got)
{
    read_all(p);
    assert_false(p->fatal);
    assert_int_equal(p->bad, 0);
    assert_int_equal(p->got, got);
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

/* [0]: TLS 1.3, [1]: TLS 1.2 AES-GCM, [2]: TLS 1.2 AES-CBC; by record sizes */
static double g_ppr[3][3];

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
    g_ppr[g_tls12 == NULL ? 0 : strstr(g_tls12, "GCM") != NULL ? 1 : 2][kind] =
        (double)st.probes / (double)st.records_out_of_order;
    printf("[ern] %s%s %s: %llu records out of order, %llu probes, %llu block tests\n",
           g_tls12 != NULL ? g_tls12 : "TLS 1.3", g_mte ? " (MtE)" : "",
           kind == SIZES_CBR ? "cbr" : kind == SIZES_VBR ? "vbr" : "mixed",
           (unsigned long long)st.records_out_of_order, (unsigned long long)st.probes,
           (unsigned long long)st.ern_block_checks);
    free_pair(&p);
}

/* PROBES_MESSAGES, PROBES_MIXED_MESSAGES: messages streamed per probes case
 * (mixed sizes reach 16000-byte messages, so fewer of them). */
#define PROBES_MESSAGES 2000
#define PROBES_MIXED_MESSAGES 400

static void probes(int kind)
{
    run_probes_case((enum sizes)kind,
                    kind == SIZES_MIXED ? PROBES_MIXED_MESSAGES : PROBES_MESSAGES);
}

/* No ticket, no offer: nothing is numbered and everything works. */
static void test_ern_lost_offer(void **state)
{
    pair p;
    UTLS_STATS st;

    (void)state;
    g_tls12 = NULL;
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
static void lost_accept_then_flush(int arg)
{
    (void)arg;
    pair p;
    uint8_t buf[100];

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
static void switch_record_lost(int arg)
{
    (void)arg;
    pair p;
    lossy_params lp;
    uint8_t m[1200];
    unsigned char buf[65536];
    int n;

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
    g_tls12 = NULL;
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
static void wrong_number_is_fatal(int arg)
{
    (void)arg;
    pair p;
    uint8_t m[300], buf[1000];
    size_t n;

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

/* --- TLS 1.2 only -------------------------------------------------------- */

/* exchange: the client sends a line, the server reads it and answers, the
 * client reads the answer; |n| times. Both directions must deliver. */
static void exchange(pair *p, int n)
{
    uint8_t m[500], buf[1000];
    size_t got;

    for (int i = 0; i < n; i++) {
        assert_true(uh_msg_build(m, (uint32_t)i, sizeof(m)));
        assert_int_equal(SSL_write(p->c, m, sizeof(m)), (int)sizeof(m));
        shuttle(p);
        assert_true(SSL_read_ex(p->s, buf, sizeof(buf), &got));
        assert_int_equal(got, sizeof(m));
        assert_memory_equal(buf, m, sizeof(m));
        assert_int_equal(SSL_write(p->s, m, sizeof(m)), (int)sizeof(m));
        shuttle(p);
        assert_true(SSL_read_ex(p->c, buf, sizeof(buf), &got));
        assert_int_equal(got, sizeof(m));
        assert_memory_equal(buf, m, sizeof(m));
    }
}

/* expected_offer12 computes the TLS 1.2 offer independently of the fork's
 * code, from the exporter (docs/ern.md "Keys"). */
static void expected_offer12(SSL *s, unsigned char out[16])
{
    static const char label[] = "EXPORTER-uTLS-ERN-v1", info[] = "uTLS ERN v1 tls12 offer";
    unsigned char t[32], mac[32];
    size_t maclen;

    assert_int_equal(SSL_export_keying_material(s, t, sizeof(t), label, sizeof(label) - 1, NULL,
                                                0, 0), 1);
    assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, t, sizeof(t),
                              (const unsigned char *)info, sizeof(info) - 1, mac, sizeof(mac),
                              &maclen));
    memcpy(out, mac, 16); /* CBC: all 16; GCM: the first 8 */
}

/* server_nonces parses the server's records after its ChangeCipherSpec and
 * returns their explicit nonces (AES-GCM: the first 8 bytes of the body). */
static size_t server_nonces(const pair *p, uint64_t *out, size_t max)
{
    size_t off = 0, n = 0;
    int encrypted = 0;

    while (off + 5 <= p->s2c_len) {
        size_t len = ((size_t)p->s2c[off + 3] << 8) | p->s2c[off + 4];
        uint64_t v = 0;

        assert_true(off + 5 + len <= p->s2c_len);
        if (encrypted) {
            assert_true(len >= 8 + 16);
            assert_true(n < max);
            for (int i = 0; i < 8; i++)
                v = (v << 8) | p->s2c[off + 5 + i];
            out[n++] = v;
        }
        if (p->s2c[off] == SSL3_RT_CHANGE_CIPHER_SPEC)
            encrypted = 1;
        off += 5 + len;
    }
    assert_int_equal(off, p->s2c_len);
    return n;
}

static uint64_t be64(const unsigned char b[8])
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

/* expect_numbered_both_ways: both ends agreed on numbers in both directions
 * (status 0xF) and each sent and received |num| numbered records. */
static void expect_numbered_both_ways(pair *p, uint64_t num)
{
    UTLS_STATS sc, ss;

    assert_int_equal(UTLS_ern_status(p->c), 0xF);
    assert_int_equal(UTLS_ern_status(p->s), 0xF);
    assert_true(UTLS_get_stats(p->c, &sc) && UTLS_get_stats(p->s, &ss));
    assert_int_equal(sc.ern_records_sent, num);
    assert_int_equal(ss.ern_records_received, num);
    assert_int_equal(ss.ern_records_sent, num);
    assert_int_equal(sc.ern_records_received, num);
}

/* Both directions numbered after the negotiation, for AES-128-GCM and
 * AES-256-GCM; the offer is exactly the documented value. */
static void negotiates(int arg)
{
    const char *cipher = g_tls12;

    (void)arg;
    pair p;
    uint64_t nonces[64];
    unsigned char offer[16];

    make_pair(&p, 1, 1, 2);
    handshake(&p);
    assert_int_equal(strcmp(SSL_get_cipher_name(p.c), cipher), 0);
    assert_int_equal(SSL_get_options(p.c) & SSL_OP_NO_ENCRYPT_THEN_MAC ? 1 : 0, g_mte);
    assert_true(UTLS_ern_status(p.s) & UTLS_ERN_OFFERED);
    assert_true(UTLS_ern_status(p.c) & UTLS_ERN_OFFERED);
    assert_int_equal(server_nonces(&p, nonces, 64), 1); /* the Finished */
    expected_offer12(p.c, offer);
    if (strstr(cipher, "GCM") != NULL) {
        assert_true(nonces[0] == be64(offer)); /* the explicit nonce, as sent */
    } else {
        /* CBC: the IV block is encrypted like the others; the offer itself
         * never appears on the wire. */
        assert_true(memmem(p.s2c, p.s2c_len, offer, 16) == NULL);
    }
    exchange(&p, 5);
    /* the client numbers all 5 lines; the server its 5 answers */
    expect_numbered_both_ways(&p, 5);
    free_pair(&p);
}

/* Suites that cannot carry the offer stay legacy and work, both ends
 * negotiating: ChaCha20-Poly1305 (no explicit nonce), CCM (its explicit
 * nonce is the sequence number), CBC with a block cipher other than AES. */
static void stays_legacy(int arg)
{
    const char *cipher = g_tls12;

    (void)arg;
    pair p;
    UTLS_STATS st;

    make_pair(&p, 1, 1, 2);
    handshake(&p);
    assert_int_equal(strcmp(SSL_get_cipher_name(p.c), cipher), 0);
    exchange(&p, 3);
    assert_int_equal(UTLS_ern_status(p.c), 0);
    assert_int_equal(UTLS_ern_status(p.s), 0);
    free_pair(&p);
    /* and out of order through the lossy network */
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    st = stream(&p, 300, SIZES_VBR, 0.02, 21);
    assert_true(st.records_out_of_order > 0);
    assert_int_equal(st.ern_records_received, 0);
    assert_int_equal(UTLS_ern_status(p.s), 0);
    free_pair(&p);
}

/* A legacy peer on either side: nothing numbered, everything delivered, in
 * order and out of order. A legacy server's random nonce start is not the
 * offer; a legacy client ignores the offer. */
static void test_ern12_legacy_peers(void **state)
{
    pair p;
    UTLS_STATS st;
    uint64_t nonces[64];
    unsigned char offer[16];

    (void)state;
    g_tls12 = GCM128;
    /* legacy server, negotiating client */
    make_pair(&p, 1, 0, 2);
    handshake(&p);
    assert_int_equal(server_nonces(&p, nonces, 64), 1);
    expected_offer12(p.c, offer);
    assert_true(nonces[0] != be64(offer));
    exchange(&p, 3);
    assert_int_equal(UTLS_ern_status(p.c), 0);
    assert_int_equal(UTLS_ern_status(p.s), 0);
    free_pair(&p);
    /* negotiating server, legacy client: the offer goes out and is ignored */
    make_pair(&p, 0, 1, 2);
    handshake(&p);
    exchange(&p, 3);
    assert_int_equal(UTLS_ern_status(p.c), 0);
    assert_int_equal(UTLS_ern_status(p.s), UTLS_ERN_OFFERED);
    free_pair(&p);
    make_pair(&p, 0, 1, 2);
    handshake(&p);
    st = stream(&p, 500, SIZES_VBR, 0.02, 22);
    assert_true(st.records_out_of_order > 0);
    assert_int_equal(st.ern_records_received, 0);
    assert_false(UTLS_ern_status(p.s) & UTLS_ERN_RX);
    free_pair(&p);
}

/*
 * err_queue_has: the error queue holds libssl's reason |reason|; the queue
 * is emptied. OpenSSL 3.5's record layer raises the record's own reason and
 * ssl3_read_bytes() then adds SSL_R_RECORD_LAYER_FAILURE after it; 3.0
 * raises the record's reason last.
 */
static int err_queue_has(int reason)
{
    unsigned long e;
    int found = 0;

    while ((e = ERR_get_error()) != 0)
        found |= ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == reason;
    return found;
}

/* The offer cannot be lost in TLS 1.2 (it is the Finished record, which the
 * handshake needs), and it cannot be changed: the GCM explicit nonce is part
 * of the AEAD nonce, the CBC IV block chains into the next block (and EtM's
 * MAC covers it), so a flipped bit fails the record and the handshake, never
 * a silent downgrade. */
static void altered_offer_fails_handshake(int arg)
{
    pair p;
    unsigned char buf[16384];
    size_t k, off, fin = 0;
    int n, ccs = 0;

    (void)arg;
    make_pair(&p, 1, 1, 2);
    /* ClientHello, then the server's flight up to its Finished */
    for (int i = 0; i < 10 && !SSL_is_init_finished(p.s); i++) {
        SSL_do_handshake(p.c);
        while ((n = BIO_read(p.c_out, buf, sizeof(buf))) > 0) {
            assert_true(UTLS_BIO_segment_push(p.seg, p.s_off, buf, (size_t)n));
            p.s_off += (uint64_t)n;
        }
        SSL_do_handshake(p.s);
        if (SSL_is_init_finished(p.s))
            break;
        while ((k = UTLS_BIO_segment_take_output(p.seg, buf, sizeof(buf))) > 0)
            BIO_write(p.c_in, buf, (int)k);
    }
    assert_true(SSL_is_init_finished(p.s));
    k = UTLS_BIO_segment_take_output(p.seg, buf, sizeof(buf));
    /* the server's last flight: ChangeCipherSpec, Finished */
    for (off = 0; off + 5 <= k; off += 5 + (((size_t)buf[off + 3] << 8) | buf[off + 4])) {
        if (ccs && buf[off] == SSL3_RT_HANDSHAKE)
            fin = off;
        ccs |= buf[off] == SSL3_RT_CHANGE_CIPHER_SPEC;
    }
    assert_true(ccs && fin > 0);
    buf[fin + 5 + 7] ^= 1; /* the last byte of the explicit nonce */
    BIO_write(p.c_in, buf, (int)k);
    assert_true(SSL_do_handshake(p.c) <= 0);
    assert_int_equal(SSL_get_error(p.c, 0), SSL_ERROR_SSL);
    assert_true(err_queue_has(SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC));
    assert_int_equal(UTLS_ern_status(p.c), 0);
    free_pair(&p);
}

/* An abbreviated handshake (RFC 5246 7.3: the server sends its
 * ChangeCipherSpec and Finished first): the offer is in that Finished, and
 * the numbers start again in the resumed connection. */
static void resumes(int arg)
{
    pair p;
    SSL_SESSION *sess;

    (void)arg;
    g_sctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(g_sctx);
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    exchange(&p, 2);
    assert_int_equal(UTLS_ern_status(p.c), 0xF);
    /* a clean close keeps the session resumable */
    assert_true(SSL_shutdown(p.c) >= 0);
    shuttle(&p);
    assert_true(SSL_shutdown(p.s) >= 0);
    sess = SSL_get1_session(p.c);
    assert_non_null(sess);
    free_pair(&p);
    make_pair(&p, 1, 1, 2);
    assert_int_equal(SSL_set_session(p.c, sess), 1);
    SSL_SESSION_free(sess);
    handshake(&p);
    assert_true(SSL_session_reused(p.c));
    assert_true(UTLS_ern_status(p.c) & UTLS_ERN_OFFERED);
    exchange(&p, 3);
    assert_int_equal(UTLS_ern_status(p.c), 0xF);
    assert_int_equal(UTLS_ern_status(p.s), 0xF);
    free_pair(&p);
    SSL_CTX_free(g_sctx);
    g_sctx = NULL;
}

/* TLS 1.2 renegotiation after the agreement: no new offer, and the numbers
 * go on as the sequence numbers of the new keys (from 0), in order. */
static void renegotiates(int arg)
{
    pair p;
    unsigned char buf[100];

    (void)arg;
    make_pair(&p, 1, 1, 2);
    /* OpenSSL 3.0 refuses client-initiated renegotiation unless allowed */
    SSL_set_options(p.s, SSL_OP_ALLOW_CLIENT_RENEGOTIATION);
    handshake(&p);
    exchange(&p, 2);
    assert_int_equal(UTLS_ern_status(p.c), 0xF);
    assert_int_equal(SSL_renegotiate(p.c), 1);
    for (int i = 0; i < 20 && SSL_renegotiate_pending(p.c); i++) {
        (void)SSL_do_handshake(p.c);
        shuttle(&p);
        assert_int_equal(SSL_read(p.s, buf, sizeof(buf)), -1); /* handshake only */
        assert_int_equal(SSL_get_error(p.s, -1), SSL_ERROR_WANT_READ);
        shuttle(&p);
    }
    assert_false(SSL_renegotiate_pending(p.c));
    assert_int_equal(SSL_num_renegotiations(p.c), 1);
    exchange(&p, 3);
    expect_numbered_both_ways(&p, 5);
    free_pair(&p);
}

/*
 * GCM nonce uniqueness (docs/ern.md "Nonce uniqueness"): under the server's
 * one write key, every record of the whole connection (Finished, numbered
 * records, UTLS_ern_flush() records, records split at the maximum size) has
 * a different explicit nonce; they count up by one from the offer. The
 * client's, from OpenSSL's random start, are checked the same way.
 */
static void test_ern12_nonces_unique(void **state)
{
    pair p;
    uint64_t nonces[512];
    unsigned char offer[16], *big;
    size_t n, got, bigsz = 3 * 16384 + 100;

    (void)state;
    g_tls12 = GCM128;
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    exchange(&p, 4);
    assert_int_equal(UTLS_ern_flush(p.s), 1); /* nothing owed: no record */
    big = calloc(1, bigsz);
    assert_non_null(big);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(SSL_write(p.s, big, (int)bigsz), (int)bigsz);
        shuttle(&p);
        for (size_t left = bigsz; left > 0; left -= got)
            assert_true(SSL_read_ex(p.c, big, left, &got));
    }
    free(big);
    n = server_nonces(&p, nonces, 512);
    printf("[ern] %zu server records under one key\n", n);
    assert_int_equal(n, 1 + 4 + 20 * 4); /* Finished, answers, 4 records per write */
    expected_offer12(p.c, offer);
    assert_true(nonces[0] == be64(offer));
    for (size_t i = 1; i < n; i++) {
        assert_true(nonces[i] == nonces[0] + i); /* +1 per record: no repeat */
        for (size_t j = 0; j < i; j++)
            assert_true(nonces[i] != nonces[j]);
    }
    assert_int_equal(UTLS_ern_status(p.s), 0xF);
    free_pair(&p);
}

/* reset_globals: every test starts with TLS 1.3 and encrypt-then-MAC. */

/* --- Out-of-sequence sending: UTLS_ern_seal / UTLS_ern_write_sealed ------- */

#define SEAL_BUF (UH_MSG_MAX + UTLS_ERN_SEAL_OVERHEAD)
/* The most one-block number tests per record a lossy shuffled stream may
 * cost the receiver, in order and past holes together (docs/ern.md, "Cost
 * through the tap"): measured 18 to 24; 35 to 57 before the out-of-order
 * search went around the highest known number and settled matched headers. */
#define SEAL_MAX_CHECKS_PER_RECORD 40

/* 1: seal tests read with a server without SSL_MODE_UNORDERED. */
static int g_plain_server;
/* 1: seal_ready's client counts the tickets it receives (g_tickets_seen) and
 * offers post-handshake authentication. */
static int g_count_tickets;
static int g_tickets_seen;
static int count_ticket(SSL *s, SSL_SESSION *sess);

/* seal_ready: a pair whose client numbers its records (message 0 carried the
 * accept) and whose server numbers the client's; room for |num| messages. */
static void seal_ready(pair *p, size_t num)
{
    uint8_t m[UH_MSG_MAX];

    make_pair(p, 1, 1, 2);
    if (g_count_tickets) {
        SSL_CTX_set_session_cache_mode(SSL_get_SSL_CTX(p->c), SSL_SESS_CACHE_CLIENT);
        SSL_CTX_sess_set_new_cb(SSL_get_SSL_CTX(p->c), count_ticket);
        SSL_set_post_handshake_auth(p->c, 1);
    }
    if (g_plain_server) /* the stock in-order read path, no UTLS_read_record */
        SSL_clear_mode(p->s, SSL_MODE_UNORDERED);
    handshake(p);
    p->num_apps = num;
    p->seen = calloc(num, sizeof(*p->seen));
    assert_non_null(p->seen);
    assert_true(uh_msg_build(m, 0, 200));
    assert_int_equal(SSL_write(p->c, m, 200), 200);
    shuttle(p);
    read_all(p);
    assert_int_equal(p->got, 1);
    assert_true(UTLS_ern_status(p->c) & UTLS_ERN_TX);
    assert_true(UTLS_ern_status(p->s) & UTLS_ERN_RX);
}

typedef struct {
    unsigned char rec[SEAL_BUF];
    size_t len;
    uint64_t number;
} sealed_rec;

static void seal_msg(pair *p, uint32_t idx, size_t len, sealed_rec *out)
{
    uint8_t m[UH_MSG_MAX];
    size_t before = BIO_ctrl_pending(p->c_out);

    assert_true(uh_msg_build(m, idx, len));
    assert_int_equal(UTLS_ern_seal(p->c, m, len, out->rec, sizeof(out->rec), &out->len,
                                   &out->number), 1);
    assert_true(out->len > len);
    assert_int_equal(BIO_ctrl_pending(p->c_out), before); /* sealed, not written */
}

/* to_server moves the client's bytes to the server (through the lossy
 * network when there is one) and reads what it can deliver. */
static void to_server(pair *p)
{
    unsigned char buf[65536];
    int n;

    if (p->net == NULL) {
        shuttle(p);
        read_all(p);
        return;
    }
    while ((n = BIO_read(p->c_out, buf, sizeof(buf))) > 0)
        assert_true(lossy_send(p->net, buf, (size_t)n));
}

/* seal_shuffled: |num| messages sealed in batches of 1..48 records, each
 * batch written in a random order; the server delivers each exactly once. */
/* Block tests per record for --seal --json: [0] written in sequence order,
 * [1] shuffled; TLS 1.3, no loss. */
static double g_seal_btpr[2];
static int g_seal_no_shuffle;

static void seal_shuffled(size_t num, double loss, uint64_t seed)
{
    static sealed_rec batch[48];
    size_t order[48], out_of_seq = 0;
    lossy_params lp;
    lossy_rng rng;
    pair p;
    UTLS_STATS st;
    uint32_t idx = 1;

    seal_ready(&p, num + 1);
    lossy_rng_seed(&rng, seed);
    if (loss > 0) {
        lossy_params_default(&lp, loss);
        p.net = lossy_new(&lp, seed, deliver, &p);
        assert_non_null(p.net);
    }
    while (idx <= num) {
        size_t k = 1 + (size_t)lossy_rng_below(&rng, 48), i, j, t;

        if (k > num + 1 - idx)
            k = num + 1 - idx;
        for (i = 0; i < k; i++) {
            seal_msg(&p, idx + (uint32_t)i, 100 + (size_t)lossy_rng_below(&rng, 3000), &batch[i]);
            if (i > 0)
                assert_int_equal(batch[i].number, batch[i - 1].number + 1);
            order[i] = i;
        }
        for (i = k; i > 1 && !g_seal_no_shuffle; i--) { /* Fisher-Yates */
            j = (size_t)lossy_rng_below(&rng, i);
            t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        for (i = 0; i < k; i++) {
            out_of_seq += order[i] != i;
            assert_int_equal(UTLS_ern_write_sealed(p.c, batch[order[i]].rec, batch[order[i]].len),
                             1);
        }
        assert_int_equal(UTLS_ern_num_sealed(p.c), 0);
        to_server(&p);
        idx += (uint32_t)k;
    }
    if (p.net != NULL)
        assert_true(lossy_finish(p.net));
    read_all(&p);
    assert_int_equal(UTLS_get_stats(p.s, &st), 1);
    if (g_seal_no_shuffle) {
        assert_int_equal(out_of_seq, 0);
        /* The window's trivial case: one block test per numbered record. */
        assert_int_equal(st.ern_block_checks, num);
    } else {
        assert_true(out_of_seq > num / 2); /* the order really was shuffled */
    }
    assert_false(p.fatal);
    assert_int_equal(p.bad, 0);
    assert_int_equal(p.got, num + 1); /* every message exactly once */
    for (size_t i = 0; i <= num; i++)
        assert_true(p.seen[i]);
    if (g_tls12 == NULL && loss == 0 && !g_plain_server)
        g_seal_btpr[g_seal_no_shuffle ? 0 : 1] = (double)st.ern_block_checks / (double)num;
    if (loss > 0) /* delivered early past holes, then skipped in order */
        assert_true(st.records_out_of_order > 0 && st.records_skipped > 0);
    if (!g_seal_no_shuffle)
        assert_true(st.ern_block_checks <= (uint64_t)(num + 1) * SEAL_MAX_CHECKS_PER_RECORD);
    printf("[ern-seal] %s%s loss %.2f: %zu records, %zu written out of sequence, "
           "%llu delivered past a hole, %.2f block tests per record\n",
           g_tls12 != NULL ? g_tls12 : "TLS 1.3", g_mte ? " (MtE)" : "", loss, num, out_of_seq,
           (unsigned long long)st.records_out_of_order,
           (double)st.ern_block_checks / (double)(num + 1));
    free_pair(&p);
}

static void shuffled_inorder(int arg)
{
    (void)arg;
    /* The baseline: the same records written in sequence order. */
    g_seal_no_shuffle = 1;
    seal_shuffled(600, 0, 0x5ea1);
    g_seal_no_shuffle = 0;
    seal_shuffled(600, 0, 0x5ea1);
    g_plain_server = 1;
    seal_shuffled(300, 0, 0x5ea3);
    g_plain_server = 0;
}

static void shuffled_lossy(int arg)
{
    (void)arg;
    seal_shuffled(600, 0.03, 0x5ea2);
}

/* A dropped (never written) number is a gap the receiver tolerates; a record
 * is written once; ordinary writes wait until no sealed record is left. */
static void skip_and_single_use(int arg)
{
    (void)arg;
    sealed_rec r[3];
    uint8_t m[300];
    pair p;

    seal_ready(&p, 6);
    seal_msg(&p, 1, 500, &r[0]);
    seal_msg(&p, 2, 600, &r[1]);
    seal_msg(&p, 3, 700, &r[2]);
    assert_int_equal(UTLS_ern_num_sealed(p.c), 3);
    /* SSL_write would take a number above the sealed ones: refused. */
    assert_true(uh_msg_build(m, 4, sizeof(m)));
    assert_true(SSL_write(p.c, m, sizeof(m)) <= 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    /* The most recently sealed record must be written. */
    assert_int_equal(UTLS_ern_drop(p.c, r[2].number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_DROP_LAST));
    assert_int_equal(UTLS_ern_drop(p.c, r[1].number), 1);
    assert_int_equal(UTLS_ern_drop(p.c, r[1].number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_SEALED));
    /* A dropped record cannot be written any more. */
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_SEALED));
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 1);
    /* Single use: the second write of a record is refused. */
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_SEALED));
    /* A record that was never sealed (altered tag) is refused. */
    r[2].rec[r[2].len - 1] ^= 1;
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_SEALED));
    assert_int_equal(UTLS_ern_num_sealed(p.c), 0);
    assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m));
    shuttle(&p);
    read_expect(&p, 4);
    assert_true(p.seen[1] && !p.seen[2] && p.seen[3] && p.seen[4]);
    free_pair(&p);
}

/* replay_fatal: a copy of a delivered record, injected into the stream, is
 * fatal at the receiver (UTLS_R_ERN_REPLAY) and delivers nothing twice. */
static void replay_fatal(int plain_server)
{
    sealed_rec r[3];
    pair p;

    g_plain_server = plain_server;
    seal_ready(&p, 4);
    seal_msg(&p, 1, 400, &r[0]);
    seal_msg(&p, 2, 400, &r[1]);
    seal_msg(&p, 3, 400, &r[2]);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 1);
    shuttle(&p);
    read_all(&p);
    assert_int_equal(p.got, 4);
    assert_false(p.fatal);
    ERR_clear_error();
    /* The attacker repeats record 2 (now below the highest number seen). */
    assert_true(UTLS_BIO_segment_push(p.seg, p.s_off, r[1].rec, r[1].len));
    p.s_off += r[1].len;
    read_all(&p);
    assert_true(p.fatal);
    assert_int_equal(p.bad, 0);
    assert_int_equal(p.got, 4);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_REPLAY));
    free_pair(&p);
    g_plain_server = 0;
}

/*
 * A tampered copy of a record past a hole takes the record's number (its
 * first cipher block is intact, so the one-block test matches) and then
 * fails its full check; a genuine copy of the same record at another offset
 * no longer finds that number (taken at another offset) and verifies through
 * the predicted candidates. It must still lose its 8-byte number before it
 * reaches the application (found by fuzz_ern; the input is
 * tests/fuzz/corpus/fuzz_ern/regress-unstripped-number).
 */
static void number_stripped_after_tampered_copy(int arg)
{
    (void)arg;
    enum { NUM = 12, LEN = 400 };
    static unsigned char wire[NUM * (LEN + UTLS_ERN_SEAL_OVERHEAD)];
    static unsigned char copy[LEN + UTLS_ERN_SEAL_OVERHEAD];
    size_t off[NUM + 1], wire_len = 0, i;
    uint8_t m[LEN];
    uint64_t base;
    pair p;
    int n;

    seal_ready(&p, NUM + 1);
    for (i = 0; i < NUM; i++) {
        assert_true(uh_msg_build(m, (uint32_t)(i + 1), LEN));
        assert_int_equal(SSL_write(p.c, m, LEN), LEN);
    }
    while ((n = BIO_read(p.c_out, wire + wire_len, (int)(sizeof(wire) - wire_len))) > 0)
        wire_len += (size_t)n;
    for (i = 0, off[0] = 0; i < NUM; i++) {
        assert_true(off[i] + 5 <= wire_len);
        off[i + 1] = off[i] + 5 + ((size_t)wire[off[i] + 3] << 8 | wire[off[i] + 4]);
    }
    assert_int_equal(off[NUM], wire_len);
    /* Equal messages, equal record lengths: a copy fits another's place. */
    assert_int_equal(off[4] - off[3], off[3] - off[2]);
    base = p.s_off;
    /* A hole at records 0..5; records 6.. arrive (anchors for the predictor). */
    assert_true(UTLS_BIO_segment_push(p.seg, base + off[6], wire + off[6], wire_len - off[6]));
    read_all(&p);
    /* Record 2 tampered in its last byte (tag or MAC), at its own place. */
    memcpy(copy, wire + off[2], off[3] - off[2]);
    copy[off[3] - off[2] - 1] ^= 1;
    assert_true(UTLS_BIO_segment_push(p.seg, base + off[2], copy, off[3] - off[2]));
    read_all(&p);
    /* A genuine copy of record 2 in record 4's place. */
    assert_true(UTLS_BIO_segment_push(p.seg, base + off[4], wire + off[2], off[3] - off[2]));
    read_all(&p);
    /* Whatever was delivered is an intact message, each at most once. */
    assert_int_equal(p.bad, 0);
    free_pair(&p);
}

/* A number a whole window above the highest the receiver saw is fatal
 * (UTLS_R_ERN_OUT_OF_WINDOW). A conforming sender cannot produce it: here
 * the record before it is written but never reaches the server. */
static void beyond_window_fatal(int arg)
{
    (void)arg;
    static sealed_rec r[UTLS_ERN_REORDER_WINDOW + 1];
    sealed_rec extra;
    unsigned char sink[65536];
    pair p;
    size_t i;

    seal_ready(&p, UTLS_ERN_REORDER_WINDOW + 2);
    seal_msg(&p, 1, 300, &r[0]);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 1);
    while (BIO_read(p.c_out, sink, sizeof(sink)) > 0)
        ; /* lost for good */
    for (i = 1; i <= UTLS_ERN_REORDER_WINDOW; i++)
        seal_msg(&p, (uint32_t)(i + 1), 100, &r[i]);
    /* The sender's window: a 65th sealed record is refused. */
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, extra.rec, sizeof(extra.rec), &extra.len,
                                   &extra.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_WINDOW));
    assert_int_equal(r[UTLS_ERN_REORDER_WINDOW].number, r[0].number + UTLS_ERN_REORDER_WINDOW);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[UTLS_ERN_REORDER_WINDOW].rec,
                                           r[UTLS_ERN_REORDER_WINDOW].len), 1);
    shuttle(&p);
    ERR_clear_error();
    read_all(&p);
    assert_true(p.fatal);
    assert_int_equal(p.got, 1);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_OUT_OF_WINDOW));
    free_pair(&p);
}

/* Bad arguments and states: nothing sealed, a clear reason. */
static void test_ern_seal_refused(void **state)
{
    static uint8_t big[UTLS_ERN_SEAL_MAX_CONTENT + 1];
    sealed_rec r;
    pair p;

    (void)state;
    g_tls12 = NULL;
    /* A stock server: the client's records are never numbered. */
    make_pair(&p, 1, 0, 2);
    handshake(&p);
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, r.rec, sizeof(r.rec), &r.len, &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_ON));
    assert_int_equal(SSL_write(p.c, "hello", 5), 5);
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, r.rec, sizeof(r.rec), &r.len, &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_ON));
    assert_int_equal(UTLS_ern_write_sealed(p.c, r.rec, 40), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_ON));
    free_pair(&p);
    /* Negotiating, but the accept is not out yet: not on either. */
    make_pair(&p, 1, 1, 2);
    handshake(&p);
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, r.rec, sizeof(r.rec), &r.len, &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_ON));
    free_pair(&p);
    seal_ready(&p, 2);
    assert_int_equal(UTLS_ern_seal(p.c, big, sizeof(big), r.rec, sizeof(r.rec), &r.len,
                                   &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_BAD_ARGUMENT));
    assert_int_equal(UTLS_ern_seal(p.c, big, 0, r.rec, sizeof(r.rec), &r.len, &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_BAD_ARGUMENT));
    assert_int_equal(UTLS_ern_seal(p.c, big, 100, r.rec, 100, &r.len, &r.number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_BAD_ARGUMENT));
    assert_int_equal(UTLS_ern_write_sealed(p.c, r.rec, 0), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_NOT_SEALED));
    /* Nothing was consumed: the next seal has the next number. */
    seal_msg(&p, 1, 100, &r);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r.rec, r.len), 1);
    shuttle(&p);
    read_all(&p);
    assert_int_equal(p.got, 2);
    assert_false(p.fatal);
    free_pair(&p);
}

/* TLS 1.3 KeyUpdate is refused while sealed records are unwritten; once they
 * are written it runs, and sealing goes on under the new key (numbers
 * restart at 0). */
static void test_ern_seal_keyupdate(void **state)
{
    sealed_rec r[4];
    uint8_t m[200];
    pair p;

    (void)state;
    g_tls12 = NULL;
    seal_ready(&p, 8);
    seal_msg(&p, 1, 300, &r[0]);
    seal_msg(&p, 2, 300, &r[1]);
    assert_int_equal(SSL_key_update(p.c, SSL_KEY_UPDATE_NOT_REQUESTED), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
    assert_int_equal(SSL_key_update(p.c, SSL_KEY_UPDATE_NOT_REQUESTED), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    /* A gap below: the KeyUpdate record (no number) still gets the number
     * the server counts next. */
    assert_int_equal(UTLS_ern_drop(p.c, r[0].number), 1);
    assert_int_equal(SSL_key_update(p.c, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
    assert_true(uh_msg_build(m, 3, sizeof(m)));
    assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m)); /* KeyUpdate + record 0 */
    seal_msg(&p, 4, 300, &r[2]);
    seal_msg(&p, 5, 300, &r[3]);
    assert_int_equal(r[2].number, 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[3].rec, r[3].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 1);
    shuttle(&p);
    read_expect(&p, 5);
    assert_false(p.seen[1]);
    free_pair(&p);
}

/* TLS 1.2 renegotiation is refused while sealed records are unwritten. */
static void test_ern12_seal_renegotiation_refused(void **state)
{
    sealed_rec r;
    pair p;

    (void)state;
    g_tls12 = GCM128;
    seal_ready(&p, 3);
    seal_msg(&p, 1, 300, &r);
    assert_int_equal(SSL_renegotiate(p.c), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(UTLS_ern_write_sealed(p.c, r.rec, r.len), 1);
    shuttle(&p);
    read_all(&p);
    assert_int_equal(p.got, 2);
    free_pair(&p);
}

/* small_wbio gives the client |p| a write BIO that takes at most |size|
 * bytes at a time (a BIO pair; the SSL owns its half and frees the old
 * c_out), so that writes stop half-way. Returns the other half, which is
 * also p->c_out now; the caller owns it and frees it with BIO_free. */
static BIO *small_wbio(pair *p, size_t size)
{
    BIO *small, *peer;

    assert_int_equal(BIO_new_bio_pair(&small, size, &peer, 0), 1);
    SSL_set0_wbio(p->c, small);
    p->c_out = peer;
    return peer;
}

/* peer_to_server moves what the client wrote into |peer| (from small_wbio)
 * to the server's segment BIO, in order. */
static void peer_to_server(pair *p, BIO *peer)
{
    unsigned char buf[4096];
    int n;

    while ((n = BIO_read(peer, buf, sizeof(buf))) > 0) {
        assert_true(UTLS_BIO_segment_push(p->seg, p->s_off, buf, (size_t)n));
        p->s_off += (uint64_t)n;
    }
}

/* A BIO that takes a few bytes at a time: the sealed record is completed
 * before anything else is written. */
static void test_ern_seal_partial_write(void **state)
{
    sealed_rec r[2];
    BIO *peer;
    uint8_t m[100];
    pair p;
    int ret, rounds = 0;

    (void)state;
    g_tls12 = NULL;
    seal_ready(&p, 4);
    peer = small_wbio(&p, 64);
    seal_msg(&p, 1, 1000, &r[0]);
    seal_msg(&p, 2, 1000, &r[1]);
    while ((ret = UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len)) != 1) {
        assert_int_equal(SSL_get_error(p.c, ret), SSL_ERROR_WANT_WRITE);
        /* Only this record may go on meanwhile. */
        assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 0);
        assert_true(uh_utls_error_queued(UTLS_R_ERN_WRITE_PENDING));
        assert_true(uh_msg_build(m, 3, sizeof(m)));
        assert_true(SSL_write(p.c, m, sizeof(m)) <= 0);
        assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
        peer_to_server(&p, peer);
        rounds++;
    }
    assert_true(rounds > 10);
    while ((ret = UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len)) != 1 ||
           BIO_ctrl_pending(peer) > 0) {
        peer_to_server(&p, peer);
        if (ret == 1)
            break;
    }
    read_expect(&p, 3);
    BIO_free(peer);
    free_pair(&p);
}

/* --- What else writes records while sealed records are unwritten ---------- */

static int count_ticket(SSL *s, SSL_SESSION *sess)
{
    (void)s, (void)sess;
    g_tickets_seen++;
    return 0; /* not kept */
}

/*
 * server_tx_ready: a seal_ready pair whose server numbers its records too
 * (its message carried the switch) and whose client reads them; the
 * client's messages delivered so far are counted in p->got.
 */
static void server_tx_ready(pair *p, size_t num)
{
    uint8_t m[UH_MSG_MAX];

    seal_ready(p, num);
    assert_true(uh_msg_build(m, 0, 100));
    assert_int_equal(SSL_write(p->s, m, 100), 100);
    shuttle(p);
    assert_int_equal(SSL_read(p->c, m, sizeof(m)), 100);
    assert_true(UTLS_ern_status(p->s) & UTLS_ERN_TX);
    assert_true(UTLS_ern_status(p->c) & UTLS_ERN_RX);
}

/* seal_on: seal_msg for either endpoint. */
static void seal_on(SSL *s, uint32_t idx, size_t len, sealed_rec *out)
{
    uint8_t m[UH_MSG_MAX];

    assert_true(uh_msg_build(m, idx, len));
    assert_int_equal(UTLS_ern_seal(s, m, len, out->rec, sizeof(out->rec), &out->len,
                                   &out->number), 1);
}

/* client_reads: every message the client can read now; |*out_got| counts
 * them, |seen| marks their indexes. Returns SSL_get_error() of the last read. */
static int client_reads(pair *p, int *seen, size_t num, size_t *out_got)
{
    uint8_t buf[UH_MSG_MAX];
    uint32_t idx;
    int n;

    while ((n = SSL_read(p->c, buf, sizeof(buf))) > 0) {
        assert_true(uh_msg_check(buf, (size_t)n, &idx));
        assert_true(idx < num && !seen[idx]);
        seen[idx] = 1;
        (*out_got)++;
    }
    return SSL_get_error(p->c, n);
}

/* SSL_shutdown() is refused while sealed records are unwritten (its
 * close_notify would take a number above them); once they are written or
 * dropped it goes out and the receiver sees a clean close, not a
 * bad_record_mac. After it, nothing more can be sealed. */
static void shutdown_waits(int arg)
{
    (void)arg;
    sealed_rec r[3];
    pair p;
    size_t before;

    seal_ready(&p, 4);
    seal_msg(&p, 1, 300, &r[0]);
    seal_msg(&p, 2, 300, &r[1]);
    before = BIO_ctrl_pending(p.c_out);
    ERR_clear_error();
    assert_true(SSL_shutdown(p.c) < 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(SSL_get_shutdown(p.c) & SSL_SENT_SHUTDOWN, 0);
    assert_int_equal(BIO_ctrl_pending(p.c_out), before); /* nothing went out */
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
    assert_true(SSL_shutdown(p.c) < 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(UTLS_ern_drop(p.c, r[0].number), 1);
    assert_int_equal(SSL_shutdown(p.c), 0); /* sent; the peer's is not in yet */
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, r[2].rec, sizeof(r[2].rec), &r[2].len,
                                   &r[2].number), 0);
    ERR_clear_error();
    shuttle(&p);
    read_all(&p);
    assert_int_equal(SSL_get_error(p.s, 0), SSL_ERROR_ZERO_RETURN);
    assert_true(SSL_get_shutdown(p.s) & SSL_RECEIVED_SHUTDOWN);
    assert_int_equal(p.bad, 0);
    assert_int_equal(p.got, 2);
    assert_true(p.seen[0] && !p.seen[1] && p.seen[2]);
    free_pair(&p);
}

/* A TLS 1.3 server: SSL_new_session_ticket() and post-handshake
 * authentication are refused while sealed records are unwritten; a ticket
 * asked for with none sealed goes out in front of the next sealed record. */
static void test_ern_seal_server_ticket(void **state)
{
    sealed_rec r[4];
    int seen[8] = {0};
    size_t got = 0;
    pair p;

    (void)state;
    g_tls12 = NULL;
    g_tickets_seen = 0;
    g_count_tickets = 1;
    server_tx_ready(&p, 8);
    g_count_tickets = 0;
    assert_int_equal(g_tickets_seen, 2); /* the handshake's (and the offer) */
    seal_on(p.s, 1, 300, &r[0]);
    seal_on(p.s, 2, 300, &r[1]);
    /* Configured so that, sealed records aside, the request would go out. */
    SSL_set_verify(p.s, SSL_VERIFY_PEER | SSL_VERIFY_POST_HANDSHAKE, NULL);
    ERR_clear_error();
    assert_int_equal(SSL_new_session_ticket(p.s), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(SSL_verify_client_post_handshake(p.s), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_int_equal(UTLS_ern_write_sealed(p.s, r[1].rec, r[1].len), 1);
    assert_int_equal(UTLS_ern_drop(p.s, r[0].number), 1);
    /* None sealed: the ticket is owed, and goes out before the next record. */
    assert_int_equal(SSL_new_session_ticket(p.s), 1);
    seal_on(p.s, 3, 300, &r[2]);
    seal_on(p.s, 4, 300, &r[3]);
    assert_int_equal(r[2].number, r[1].number + 2); /* the ticket took one */
    assert_int_equal(UTLS_ern_write_sealed(p.s, r[3].rec, r[3].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.s, r[2].rec, r[2].len), 1);
    shuttle(&p);
    assert_int_equal(client_reads(&p, seen, 8, &got), SSL_ERROR_WANT_READ);
    assert_int_equal(g_tickets_seen, 3);
    assert_int_equal(got, 3);
    assert_true(!seen[1] && seen[2] && seen[3] && seen[4]);
    free_pair(&p);
}

/* The peer asks for a KeyUpdate (update_requested) while sealed records are
 * unwritten: the answer waits (RFC 8446 4.6.3: before the next application
 * record *sent*; the sealed ones were encrypted before), the sealed records
 * are written under the old key, new ones are refused until none is left,
 * and the next seal sends the KeyUpdate first and numbers from 0. */
static void test_ern_seal_peer_keyupdate(void **state)
{
    sealed_rec r[4];
    uint8_t m[200];
    pair p;
    size_t before;

    (void)state;
    g_tls12 = NULL;
    seal_ready(&p, 8);
    seal_msg(&p, 1, 300, &r[0]);
    seal_msg(&p, 2, 300, &r[1]);
    assert_int_equal(SSL_key_update(p.s, SSL_KEY_UPDATE_REQUESTED), 1);
    assert_true(uh_msg_build(m, 0, sizeof(m)));
    assert_int_equal(SSL_write(p.s, m, sizeof(m)), (int)sizeof(m));
    shuttle(&p);
    before = BIO_ctrl_pending(p.c_out);
    assert_int_equal(SSL_read(p.c, m, sizeof(m)), (int)sizeof(m));
    assert_int_equal(SSL_get_key_update_type(p.c), SSL_KEY_UPDATE_NOT_REQUESTED);
    assert_true(SSL_read(p.c, m, sizeof(m)) <= 0); /* nothing more; nothing written */
    assert_int_equal(BIO_ctrl_pending(p.c_out), before);
    ERR_clear_error();
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
    assert_int_equal(UTLS_ern_seal(p.c, "x", 1, r[2].rec, sizeof(r[2].rec), &r[2].len,
                                   &r[2].number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_HANDSHAKE_DUE));
    assert_int_equal(UTLS_ern_drop(p.c, r[0].number), 1);
    seal_on(p.c, 3, 300, &r[2]); /* KeyUpdate first (written), then this record */
    assert_true(BIO_ctrl_pending(p.c_out) > before);
    assert_int_equal(SSL_get_key_update_type(p.c), SSL_KEY_UPDATE_NONE);
    assert_int_equal(r[2].number, 0);
    seal_msg(&p, 4, 300, &r[3]);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[3].rec, r[3].len), 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 1);
    shuttle(&p);
    read_expect(&p, 4);
    assert_true(p.seen[0] && !p.seen[1] && p.seen[2] && p.seen[3] && p.seen[4]);
    free_pair(&p);
}

/* The owed KeyUpdate goes out through a BIO that takes 8 bytes at a time:
 * UTLS_ern_seal() reports SSL_ERROR_WANT_WRITE and, called again, finishes
 * the KeyUpdate and seals under the new key. */
static void test_ern_seal_owed_keyupdate_partial(void **state)
{
    sealed_rec r;
    BIO *peer;
    uint8_t m[200];
    pair p;
    int ret, rounds = 0;

    (void)state;
    g_tls12 = NULL;
    seal_ready(&p, 4);
    assert_int_equal(SSL_key_update(p.s, SSL_KEY_UPDATE_REQUESTED), 1);
    assert_true(uh_msg_build(m, 0, sizeof(m)));
    assert_int_equal(SSL_write(p.s, m, sizeof(m)), (int)sizeof(m));
    shuttle(&p);
    assert_int_equal(SSL_read(p.c, m, sizeof(m)), (int)sizeof(m));
    peer = small_wbio(&p, 8);
    assert_true(uh_msg_build(m, 1, 100));
    while ((ret = UTLS_ern_seal(p.c, m, 100, r.rec, sizeof(r.rec), &r.len, &r.number)) != 1) {
        assert_int_equal(SSL_get_error(p.c, ret), SSL_ERROR_WANT_WRITE);
        peer_to_server(&p, peer);
        rounds++;
        assert_true(rounds < 100);
    }
    assert_true(rounds > 1);
    assert_int_equal(r.number, 0); /* under the new key */
    assert_int_equal(SSL_get_key_update_type(p.c), SSL_KEY_UPDATE_NONE);
    while ((ret = UTLS_ern_write_sealed(p.c, r.rec, r.len)) != 1 || BIO_ctrl_pending(peer) > 0) {
        peer_to_server(&p, peer);
        if (ret == 1)
            break;
        assert_int_equal(SSL_get_error(p.c, ret), SSL_ERROR_WANT_WRITE);
    }
    read_expect(&p, 2);
    BIO_free(peer);
    free_pair(&p);
}

/* TLS 1.2: the client renegotiates while the server has sealed records
 * unwritten. The server's answer (ServerHello...) would take a number above
 * them: it waits, SSL_read() reports UTLS_R_ERN_SEALED_PENDING, and once the
 * sealed records are written or dropped the renegotiation completes. */
static void test_ern12_seal_peer_renegotiation_waits(void **state)
{
    sealed_rec r[2];
    unsigned char buf[UH_MSG_MAX];
    int seen[4] = {0};
    size_t got = 0;
    pair p;

    (void)state;
    g_tls12 = GCM128;
    server_tx_ready(&p, 2);
    /* OpenSSL 3.0 refuses client-initiated renegotiation unless allowed
     * (its no_renegotiation alert would wait for the sealed records too). */
    SSL_set_options(p.s, SSL_OP_ALLOW_CLIENT_RENEGOTIATION);
    seal_on(p.s, 1, 300, &r[0]);
    seal_on(p.s, 2, 300, &r[1]);
    assert_int_equal(SSL_renegotiate(p.c), 1);
    assert_true(SSL_do_handshake(p.c) <= 0); /* ClientHello out */
    shuttle(&p);
    ERR_clear_error();
    assert_true(SSL_read(p.s, buf, sizeof(buf)) <= 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
    assert_true(SSL_in_init(p.s)); /* the answer waits in the state machine */
    assert_int_equal(UTLS_BIO_segment_take_output(p.seg, buf, sizeof(buf)), 0);
    assert_int_equal(UTLS_ern_write_sealed(p.s, r[1].rec, r[1].len), 1);
    assert_int_equal(UTLS_ern_drop(p.s, r[0].number), 1);
    for (int i = 0; i < 20 && (SSL_in_init(p.c) || SSL_in_init(p.s)); i++) {
        assert_int_equal(SSL_read(p.s, buf, sizeof(buf)), -1); /* handshake only */
        assert_int_equal(SSL_get_error(p.s, -1), SSL_ERROR_WANT_READ);
        shuttle(&p);
        assert_int_equal(client_reads(&p, seen, 4, &got), SSL_ERROR_WANT_READ);
        shuttle(&p);
    }
    ERR_clear_error();
    assert_true(SSL_is_init_finished(p.c) && SSL_is_init_finished(p.s));
    assert_int_equal(SSL_renegotiate_pending(p.c), 0);
    assert_int_equal(got, 1);
    assert_true(!seen[1] && seen[2]);
    /* The new keys work, numbered, in both directions. */
    assert_true(uh_msg_build(buf, 3, 100));
    assert_int_equal(SSL_write(p.s, buf, 100), 100);
    shuttle(&p);
    assert_int_equal(client_reads(&p, seen, 4, &got), SSL_ERROR_WANT_READ);
    assert_int_equal(got, 2);
    free_pair(&p);
}

/* Plain SSL_write() between batches of sealed records: allowed whenever no
 * sealed record is left (it takes the next number, the one the receiver
 * counts), refused in the middle of a batch; the receiver gets every
 * message once. */
static void interleaved_ssl_write(int arg)
{
    (void)arg;
    sealed_rec r[3];
    uint8_t m[400];
    uint32_t idx = 1;
    pair p;

    seal_ready(&p, 1 + 20 * 4);
    for (int round = 0; round < 20; round++) {
        assert_true(uh_msg_build(m, idx++, sizeof(m)));
        assert_int_equal(SSL_write(p.c, m, sizeof(m)), (int)sizeof(m));
        for (int i = 0; i < 3; i++)
            seal_msg(&p, idx++, 200 + 50 * (size_t)i, &r[i]);
        assert_true(uh_msg_build(m, 999, sizeof(m)));
        assert_true(SSL_write(p.c, m, sizeof(m)) <= 0);
        assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
        assert_int_equal(UTLS_ern_write_sealed(p.c, r[2].rec, r[2].len), 1);
        assert_int_equal(UTLS_ern_write_sealed(p.c, r[0].rec, r[0].len), 1);
        assert_true(SSL_write(p.c, m, sizeof(m)) <= 0); /* r[1] still sealed */
        assert_true(uh_utls_error_queued(UTLS_R_ERN_SEALED_PENDING));
        assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
        if (round % 4 == 3)
            to_server(&p);
    }
    to_server(&p);
    assert_false(p.fatal);
    assert_int_equal(p.bad, 0);
    assert_int_equal(p.got, 1 + 20 * 4);
    free_pair(&p);
}

/* A record padding callback or block padding (TLS 1.3) decides the record's
 * length, so UTLS_ERN_SEAL_OVERHEAD no longer bounds it: sealing then needs
 * room for UTLS_ERN_SEAL_MAX_RECORD and refuses a smaller buffer before it
 * takes a number. */
static size_t pad_4000(SSL *s, int type, size_t len, void *arg)
{
    (void)s, (void)type, (void)len, (void)arg;
    return 4000;
}

static void padding_bounded(int block)
{
    static unsigned char big[UTLS_ERN_SEAL_MAX_RECORD];
    sealed_rec r[2];
    uint8_t m[100];
    size_t big_len;
    uint64_t big_number;
    pair p;
    /* OpenSSL 3.5 hands the padding settings to the write record layer when
     * it installs a write key, so there a change applies from the next key,
     * for SSL_write() as for sealing (stock 3.5): a KeyUpdate, which
     * UTLS_ern_seal() sends first, installs one (and numbers restart at 0). */
    int next_key = OPENSSL_version_major() == 3 && OPENSSL_version_minor() >= 5;

    g_tls12 = NULL;
    seal_ready(&p, 4);
    if (block)
        assert_int_equal(SSL_set_block_padding(p.c, 4096), 1);
    else
        SSL_set_record_padding_callback(p.c, pad_4000);
    if (next_key)
        assert_int_equal(SSL_key_update(p.c, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
    assert_true(uh_msg_build(m, 1, sizeof(m)));
    ERR_clear_error();
    assert_int_equal(UTLS_ern_seal(p.c, m, sizeof(m), r[0].rec, sizeof(m) + UTLS_ERN_SEAL_OVERHEAD,
                                   &r[0].len, &r[0].number), 0);
    assert_true(uh_utls_error_queued(UTLS_R_ERN_BAD_ARGUMENT));
    /* Nothing consumed, the connection is fine: with room it seals. */
    assert_int_equal(UTLS_ern_seal(p.c, m, sizeof(m), big, sizeof(big), &big_len, &big_number),
                     1);
    assert_true(big_len > sizeof(m) + UTLS_ERN_SEAL_OVERHEAD);
    assert_true(big_len <= UTLS_ERN_SEAL_MAX_RECORD);
    assert_int_equal(UTLS_ern_write_sealed(p.c, big, big_len), 1);
    if (next_key && !block) {
        /* Stock OpenSSL 3.5 calls the callback of the SSL through a wrapper
         * the write record layer keeps: clearing it while that layer lives
         * crashes the next write, uTLS or not. Not done there. */
        shuttle(&p);
        read_expect(&p, 2);
        free_pair(&p);
        return;
    }
    /* Padding off again: the usual bound. */
    if (block)
        assert_int_equal(SSL_set_block_padding(p.c, 0), 1);
    else
        SSL_set_record_padding_callback(p.c, NULL);
    if (next_key) {
        /* Sent now: seal_msg() checks that sealing writes nothing. */
        assert_int_equal(SSL_key_update(p.c, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
        assert_int_equal(SSL_do_handshake(p.c), 1);
        shuttle(&p);
    }
    seal_msg(&p, 2, 100, &r[1]);
    assert_int_equal(r[1].number, next_key ? 0 : big_number + 1);
    assert_int_equal(UTLS_ern_write_sealed(p.c, r[1].rec, r[1].len), 1);
    shuttle(&p);
    read_expect(&p, 3);
    free_pair(&p);
}

static int reset_globals(void **state)
{
    (void)state;
    g_tls12 = NULL;
    g_mte = 0;
    SSL_CTX_free(g_sctx);
    g_sctx = NULL;
    return 0;
}

/* ern_run: one configuration a test body runs under. */
typedef struct {
    const char *tls12; /* becomes g_tls12: NULL for TLS 1.3 */
    int mte;           /* becomes g_mte */
    int arg;           /* passed to the body */
} ern_run;

/* ERN_MAX_RUNS: the most configurations one test runs its body under (a
 * longer list is an excess-initializer warning, not a silent cut). */
#define ERN_MAX_RUNS 8

/* ern_case: a test body and the configurations it runs under, in turn. */
typedef struct {
    void (*body)(int arg);
    size_t num_runs;
    ern_run runs[ERN_MAX_RUNS];
} ern_case;

/* g_only: the record protections this process covers (--only, to run one
 * half by hand): all, TLS 1.3 or TLS 1.2. */
enum { ONLY_ALL, ONLY_TLS13, ONLY_TLS12 };
static int g_only = ONLY_ALL;

/* run_selected: |r| is a configuration this process covers. */
static int run_selected(const ern_run *r)
{
    return g_only == ONLY_ALL || (g_only == ONLY_TLS12) == (r->tls12 != NULL);
}

static void run_ern_case(void **state)
{
    const ern_case *c = *state;

    assert_true(c->num_runs > 0 && c->num_runs <= ERN_MAX_RUNS);
    for (size_t i = 0; i < c->num_runs; i++) {
        if (!run_selected(&c->runs[i]))
            continue;
        g_tls12 = c->runs[i].tls12;
        g_mte = c->runs[i].mte;
        c->body(c->runs[i].arg);
    }
}

/* ERN_CASE: the test |name| runs |body| once per ern_run given after it. */
#define ERN_CASE(name, body, ...)                                                                  \
    {                                                                                              \
        #name, run_ern_case, reset_globals, NULL,                                                  \
            &(ern_case){ body, sizeof((ern_run[]){ __VA_ARGS__ }) / sizeof(ern_run),               \
                         { __VA_ARGS__ } }                                                         \
    }
#define TLS13 { NULL, 0, 0 }
/* Every record protection the seal path has: TLS 1.3, TLS 1.2 AES-GCM, CBC
 * encrypt-then-MAC, CBC MAC-then-encrypt (OpenSSL's stitched AES-CBC-HMAC-SHA1). */
#define EACH_VERSION(arg)                                                                          \
    { NULL, 0, arg }, { GCM128, 0, arg }, { CBC12, 0, arg }, { CBC12_SHA1, 1, arg }

/*
 * select_tests copies into |out| the tests of |in| (|n|) that this process
 * covers: an ERN_CASE with at least one selected configuration, any other
 * test by its name (test_ern12_*: TLS 1.2). Returns how many.
 */
static size_t select_tests(const struct CMUnitTest *in, size_t n, struct CMUnitTest *out)
{
    size_t i, j, k = 0;

    for (i = 0; i < n; i++) {
        int take = g_only == ONLY_ALL;

        if (!take && in[i].test_func == run_ern_case) {
            const ern_case *c = in[i].initial_state;

            for (j = 0; j < c->num_runs; j++)
                take |= run_selected(&c->runs[j]);
        } else if (!take) {
            take = (g_only == ONLY_TLS12) == (strstr(in[i].name, "ern12") != NULL);
        }
        if (take)
            out[k++] = in[i];
    }
    return k;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        ERN_CASE(test_ern_probes_cbr, probes, { NULL, 0, SIZES_CBR }),
        ERN_CASE(test_ern_probes_vbr, probes, { NULL, 0, SIZES_VBR }),
        ERN_CASE(test_ern_probes_mixed, probes, { NULL, 0, SIZES_MIXED }),
        cmocka_unit_test_setup(test_ern_lost_offer, reset_globals),
        ERN_CASE(test_ern_lost_accept_then_flush, lost_accept_then_flush, TLS13),
        ERN_CASE(test_ern_switch_record_lost, switch_record_lost, TLS13),
        cmocka_unit_test_setup(test_ern_legacy_random_padding, reset_globals),
        ERN_CASE(test_ern_wrong_number_is_fatal, wrong_number_is_fatal, TLS13),
        ERN_CASE(test_ern12_probes_cbr, probes, { GCM128, 0, SIZES_CBR }),
        ERN_CASE(test_ern12_probes_vbr, probes, { GCM256, 0, SIZES_VBR }),
        ERN_CASE(test_ern12_probes_mixed, probes, { GCM128, 0, SIZES_MIXED }),
        ERN_CASE(test_ern12_negotiates_aes128gcm, negotiates, { GCM128, 0, 0 }),
        ERN_CASE(test_ern12_negotiates_aes256gcm, negotiates, { GCM256, 0, 0 }),
        ERN_CASE(test_ern12_negotiates_cbc_etm, negotiates, { CBC12, 0, 0 }, { CBC12_SHA1, 0, 0 }),
        ERN_CASE(test_ern12_negotiates_cbc_mte, negotiates, { CBC12, 1, 0 }, { CBC12_SHA1, 1, 0 }),
        /* CBC12: encrypt-then-MAC; CBC12_SHA1 with MtE: OpenSSL's stitched
         * AES-CBC-HMAC-SHA1 */
        ERN_CASE(test_ern12_cbc_probes_cbr, probes, { CBC12, 0, SIZES_CBR }),
        ERN_CASE(test_ern12_cbc_probes_vbr, probes, { CBC12_SHA1, 1, SIZES_VBR }),
        ERN_CASE(test_ern12_cbc_probes_mixed, probes, { CBC12, 1, SIZES_MIXED }),
        ERN_CASE(test_ern12_lost_accept_then_flush, lost_accept_then_flush, { GCM128, 0, 0 },
                 { CBC12, 0, 0 }),
        ERN_CASE(test_ern12_switch_record_lost, switch_record_lost, { GCM256, 0, 0 },
                 { CBC12, 0, 0 }, { CBC12, 1, 0 }),
        ERN_CASE(test_ern12_wrong_number_is_fatal, wrong_number_is_fatal, { GCM128, 0, 0 },
                 { CBC12, 0, 0 }, { CBC12, 1, 0 }),
        ERN_CASE(test_ern12_chacha20_stays_legacy, stays_legacy, { CHACHA12, 0, 0 }),
        ERN_CASE(test_ern12_ccm_stays_legacy, stays_legacy, { CCM12, 0, 0 }),
        ERN_CASE(test_ern12_camellia_cbc_stays_legacy, stays_legacy, { CAMELLIA12, 0, 0 }),
        cmocka_unit_test_setup(test_ern12_legacy_peers, reset_globals),
        ERN_CASE(test_ern12_altered_offer_fails_handshake, altered_offer_fails_handshake,
                 { GCM128, 0, 0 }, { CBC12, 0, 0 }, { CBC12, 1, 0 }, { CBC12_SHA1, 1, 0 }),
        cmocka_unit_test_setup(test_ern12_nonces_unique, reset_globals),
        ERN_CASE(test_ern12_resumption_gcm, resumes, { GCM128, 0, 0 }),
        ERN_CASE(test_ern12_resumption_cbc, resumes, { CBC12, 0, 0 }),
        ERN_CASE(test_ern12_renegotiation, renegotiates, { GCM128, 0, 0 }, { CBC12, 0, 0 }),
    };
    const struct CMUnitTest seal_tests[] = {
        ERN_CASE(test_ern_seal_shuffled, shuffled_inorder, EACH_VERSION(0)),
        ERN_CASE(test_ern_seal_shuffled_lossy, shuffled_lossy, EACH_VERSION(0)),
        ERN_CASE(test_ern_seal_skip_and_single_use, skip_and_single_use, EACH_VERSION(0)),
        /* through the fork's out-of-order reader, then the stock in-order one */
        ERN_CASE(test_ern_seal_replay_fatal, replay_fatal, EACH_VERSION(0), EACH_VERSION(1)),
        ERN_CASE(test_ern_seal_beyond_window_fatal, beyond_window_fatal, EACH_VERSION(0)),
        ERN_CASE(test_ern_number_stripped_after_tampered_copy, number_stripped_after_tampered_copy,
                 EACH_VERSION(0)),
        cmocka_unit_test_setup(test_ern_seal_refused, reset_globals),
        cmocka_unit_test_setup(test_ern_seal_keyupdate, reset_globals),
        cmocka_unit_test_setup(test_ern12_seal_renegotiation_refused, reset_globals),
        cmocka_unit_test_setup(test_ern_seal_partial_write, reset_globals),
        ERN_CASE(test_ern_seal_interleaved_ssl_write, interleaved_ssl_write, EACH_VERSION(0)),
        ERN_CASE(test_ern_seal_shutdown_waits, shutdown_waits, EACH_VERSION(0)),
        cmocka_unit_test_setup(test_ern_seal_server_ticket, reset_globals),
        cmocka_unit_test_setup(test_ern_seal_peer_keyupdate, reset_globals),
        cmocka_unit_test_setup(test_ern_seal_owed_keyupdate_partial, reset_globals),
        cmocka_unit_test_setup(test_ern12_seal_peer_renegotiation_waits, reset_globals),
        ERN_CASE(test_ern_seal_padding_callback, padding_bounded, TLS13),
        ERN_CASE(test_ern_seal_block_padding, padding_bounded, { NULL, 0, 1 }),
    };
    struct CMUnitTest sel[sizeof(tests) / sizeof(tests[0]) + sizeof(seal_tests) / sizeof(seal_tests[0])];
    size_t nsel;
    int r;

    /* --only tls13|tls12, last: one half of the configurations. */
    if (argc >= 3 && strcmp(argv[argc - 2], "--only") == 0) {
        g_only = strcmp(argv[argc - 1], "tls12") == 0   ? ONLY_TLS12
                 : strcmp(argv[argc - 1], "tls13") == 0 ? ONLY_TLS13
                                                        : -1;
        if (g_only < 0) {
            fprintf(stderr, "test_ern: --only tls13 or --only tls12\n");
            return 2;
        }
        argc -= 2;
    }
    /* --seal: out-of-sequence sending (ctest ern.seal) */
    if (argc >= 2 && strcmp(argv[1], "--seal") == 0) {
        nsel = select_tests(seal_tests, sizeof(seal_tests) / sizeof(seal_tests[0]), sel);
        r = _cmocka_run_group_tests("ern_seal", sel, nsel, uh_identity_setup,
                                    uh_identity_teardown);
        if (argc == 4 && strcmp(argv[2], "--json") == 0 && r == 0) {
            FILE *f = fopen(argv[3], "w");

            if (f == NULL)
                return 1;
            /* One run, side by side: the receiver's one-block tests per
             * record when the sender writes sealed records in sequence order
             * and when it shuffles batches of 1..48 (TLS 1.3, no loss). */
            fprintf(f, "{\"ern_seal_block_tests_per_record\": {\"in_sequence\": %.4f, "
                       "\"shuffled\": %.4f, \"ratio_shuffled_to_in_sequence\": %.4f}}\n",
                    g_seal_btpr[0], g_seal_btpr[1],
                    g_seal_btpr[0] > 0 ? g_seal_btpr[1] / g_seal_btpr[0] : 0.0);
            fclose(f);
        }
        return r;
    }
    nsel = select_tests(tests, sizeof(tests) / sizeof(tests[0]), sel);
    r = _cmocka_run_group_tests("ern", sel, nsel, uh_identity_setup, uh_identity_teardown);

    if (argc == 3 && strcmp(argv[1], "--json") == 0 && r == 0) {
        FILE *f = fopen(argv[2], "w");

        if (f == NULL)
            return 1;
        /* probes_per_ooo_record: TLS 1.3, as before; by_version adds TLS 1.2
         * (AES-GCM, the offer in the explicit nonce). */
        fprintf(f, "{\"probes_per_ooo_record\": {\"cbr\": %.4f, \"vbr\": %.4f, \"mixed\": %.4f}, "
                   "\"probes_per_ooo_record_by_version\": {"
                   "\"tls1.3\": {\"cbr\": %.4f, \"vbr\": %.4f, \"mixed\": %.4f}, "
                   "\"tls1.2_aes_gcm\": {\"cbr\": %.4f, \"vbr\": %.4f, \"mixed\": %.4f}, "
                   "\"tls1.2_aes_cbc\": {\"cbr\": %.4f, \"vbr\": %.4f, \"mixed\": %.4f}}, "
                   "\"loss\": 0.02}\n", g_ppr[0][SIZES_CBR], g_ppr[0][SIZES_VBR], g_ppr[0][SIZES_MIXED],
                g_ppr[0][SIZES_CBR], g_ppr[0][SIZES_VBR], g_ppr[0][SIZES_MIXED],
                g_ppr[1][SIZES_CBR], g_ppr[1][SIZES_VBR], g_ppr[1][SIZES_MIXED],
                g_ppr[2][SIZES_CBR], g_ppr[2][SIZES_VBR], g_ppr[2][SIZES_MIXED]);
        fclose(f);
    }
    return r;
}
