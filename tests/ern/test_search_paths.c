/*
 * The fork with and without the uTLS provider (issue 6): the same lossy
 * stream (same seed) is received twice, first with candidates tried one trial
 * decryption at a time, then with the provider loaded into the default
 * library context, where one provider search picks the candidate. Every
 * delivery (which record, in which order, in or out of order) must be the
 * same, and the second run must really have used the provider.
 * Needs OPENSSL_MODULES pointing at the built utls.so (ctest sets it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/provider.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "lossy.h"
#include "uharness.h"

#define NUM_MSGS 600

typedef struct {
    SSL *s;
    BIO *seg;
    uint64_t base;
    uint64_t log[NUM_MSGS * 2]; /* (index << 1 | out_of_order) per delivery */
    size_t num_log;
} run;

static int deliver(void *arg, lossy_delivery *d)
{
    run *r = arg;
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    UTLS_RECORD_INFO info;
    size_t n;
    uint32_t idx;

    if (!UTLS_BIO_segment_push(r->seg, r->base + d->offset, d->data, d->len))
        return LOSSY_CB_RETRY;
    while (UTLS_read_record(r->s, buf, sizeof(buf), &n, &info)) {
        if (!uh_msg_check(buf, n, &idx) || r->num_log == NUM_MSGS * 2)
            return LOSSY_CB_ABORT;
        r->log[r->num_log++] = ((uint64_t)idx << 1) | (info.out_of_order != 0);
    }
    return SSL_get_error(r->s, 0) == SSL_ERROR_WANT_READ ? LOSSY_CB_OK : LOSSY_CB_ABORT;
}

/* one_run streams NUM_MSGS mixed-size messages (same seed every time). */
static void one_run(run *r, UTLS_STATS *out_stats)
{
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method()), *cctx = SSL_CTX_new(TLS_client_method());
    BIO *c_in = BIO_new(BIO_s_mem()), *c_out = BIO_new(BIO_s_mem());
    SSL *c;
    lossy_params lp;
    lossy_net *net;
    lossy_rng rng;
    uint8_t m[UH_MSG_MAX], buf[65536];
    int n;

    memset(r, 0, sizeof(*r));
    assert_true(SSL_CTX_use_certificate(sctx, uh_cert) && SSL_CTX_use_PrivateKey(sctx, uh_key));
    SSL_CTX_set_ciphersuites(cctx, "TLS_AES_128_GCM_SHA256");
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    SSL_CTX_set_num_tickets(sctx, 0);
    c = SSL_new(cctx);
    r->s = SSL_new(sctx);
    r->seg = BIO_new(UTLS_BIO_s_segment());
    SSL_set_bio(c, c_in, c_out);
    SSL_set_bio(r->s, r->seg, r->seg);
    SSL_set_mode(r->s, SSL_MODE_UNORDERED);
    SSL_set_connect_state(c);
    SSL_set_accept_state(r->s);
    for (int i = 0; i < 10; i++) {
        size_t k;

        SSL_do_handshake(c);
        SSL_do_handshake(r->s);
        while ((n = BIO_read(c_out, buf, sizeof(buf))) > 0) {
            UTLS_BIO_segment_push(r->seg, r->base, buf, (size_t)n);
            r->base += (uint64_t)n;
        }
        while ((k = UTLS_BIO_segment_take_output(r->seg, buf, sizeof(buf))) > 0)
            BIO_write(c_in, buf, (int)k);
    }
    assert_true(SSL_is_init_finished(r->s));
    lossy_params_default(&lp, 0.02);
    lossy_rng_seed(&rng, 77);
    net = lossy_new(&lp, 0x5ea4c4, deliver, r);
    assert_non_null(net);
    for (uint32_t i = 0; i < NUM_MSGS; i++) {
        size_t len = 100 + lossy_rng_below(&rng, 6000);

        assert_true(uh_msg_build(m, i, len));
        assert_int_equal(SSL_write(c, m, (int)len), (int)len);
        while ((n = BIO_read(c_out, buf, sizeof(buf))) > 0)
            assert_true(lossy_send(net, buf, (size_t)n));
    }
    assert_true(lossy_finish(net));
    assert_int_equal(UTLS_get_stats(r->s, out_stats), 1);
    lossy_free(net);
    SSL_free(c);
    SSL_free(r->s);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
}

static void test_search_paths_identical(void **state)
{
    static run a, b;
    UTLS_STATS sa, sb;
    OSSL_PROVIDER *utls, *dflt;

    (void)state;
    one_run(&a, &sa);
    assert_int_equal(sa.provider_searches, 0);
    /* Loading a provider explicitly turns off the automatic default one. */
    dflt = OSSL_PROVIDER_load(NULL, "default");
    utls = OSSL_PROVIDER_load(NULL, "utls");
    assert_non_null(dflt);
    if (utls == NULL)
        fail_msg("the utls provider did not load (OPENSSL_MODULES=%s)",
                 getenv("OPENSSL_MODULES") ? getenv("OPENSSL_MODULES") : "unset");
    one_run(&b, &sb);
    printf("[search] EVP: %llu probes; provider: %llu probes of which %llu searches; "
           "%llu records out of order\n",
           (unsigned long long)sa.probes, (unsigned long long)sb.probes,
           (unsigned long long)sb.provider_searches, (unsigned long long)sb.records_out_of_order);
    assert_true(sb.provider_searches > 0);
    assert_true(sa.records_out_of_order > 0);
    assert_int_equal(a.num_log, NUM_MSGS);
    assert_int_equal(b.num_log, a.num_log);
    assert_memory_equal(a.log, b.log, a.num_log * sizeof(a.log[0]));
    assert_int_equal(sa.records_out_of_order, sb.records_out_of_order);
    OSSL_PROVIDER_unload(utls);
    OSSL_PROVIDER_unload(dflt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_paths_identical),
    };

    if (OPENSSL_version_major() == 3 && OPENSSL_version_minor() >= 5) {
        printf("SKIP: the 3.5 base does not use the provider's AEAD candidate search (candidates "
               "are tried one trial decryption at a time: docs/architecture.md, \"Two bases\"), "
               "so there is no second path to compare\n");
        return 77;
    }
    return cmocka_run_group_tests_name("search-paths", tests,
                                       uh_identity_setup, uh_identity_teardown);
}
