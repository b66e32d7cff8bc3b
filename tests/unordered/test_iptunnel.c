/*
 * SSL_MODE_UTLS_IP_TUNNEL: records that carry IP packets, past a hole. A UDP
 * packet's record is delivered early; an inner TCP packet's record (and a
 * record that is no IP packet) waits for its turn and comes in order; with
 * the mode off every record past the hole comes early. SSL_pending() counts
 * only what can be read now. The UTLS_MODE word "iptunnel" sets the mode.
 *
 * Records 0..4 are written: 0 is the hole; 1 UDP, 2 TCP, 3 UDP, 4 not IP.
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

#include "uharness.h"

#define NREC 5

typedef struct {
    uh_seg_pair tls;
    uint8_t *wire[NREC];
    size_t wire_len[NREC];
    uint64_t wire_off[NREC];
    uint8_t plain[NREC][300];
    size_t plain_len[NREC];
} pair;

/* packet fills |p| with an IPv4 packet of |len| bytes and protocol |proto|
 * (-1: not an IP packet), its first payload byte |tag|. */
static size_t packet(uint8_t *p, int proto, size_t len, uint8_t tag)
{
    memset(p, 0, len);
    if (proto >= 0) {
        p[0] = 0x45;
        p[2] = (uint8_t)(len >> 8);
        p[3] = (uint8_t)len;
        p[8] = 64;
        p[9] = (uint8_t)proto;
    } else {
        p[0] = 0x00;
    }
    p[20] = tag;
    return len;
}

static void pair_new(pair *p, uint64_t mode)
{
    static const int proto[NREC] = {17, 17, 6, 17, -1};

    memset(p, 0, sizeof(*p));
    assert_true(uh_seg_pair_new(&p->tls, uh_key, uh_cert, mode));
    for (int r = 0; r < NREC; r++) {
        p->plain_len[r] = packet(p->plain[r], proto[r], 200 + (size_t)r, (uint8_t)r);
        assert_true(uh_pair_write_record(&p->tls, p->plain[r], p->plain_len[r], &p->wire[r],
                                         &p->wire_len[r], &p->wire_off[r]));
    }
}

static void pair_free(pair *p)
{
    for (int r = 0; r < NREC; r++)
        free(p->wire[r]);
    uh_seg_pair_free(&p->tls);
}

static void push(pair *p, int r)
{
    assert_true(UTLS_BIO_segment_push(p->tls.seg, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* expect reads the next record: it must be record |r|, (not) out of order. */
static void expect(pair *p, int r, int out_of_order)
{
    uint8_t buf[400];
    size_t n;
    UTLS_RECORD_INFO info;

    assert_true(uh_read_record(p->tls.s, "iptunnel", r, buf, sizeof(buf), &n, &info));
    assert_int_equal(info.seq, (uint64_t)r);
    assert_int_equal(n, p->plain_len[r]);
    assert_memory_equal(buf, p->plain[r], n);
    assert_int_equal(info.out_of_order != 0, out_of_order);
}

static void expect_want_read(pair *p)
{
    assert_true(uh_read_wants_read(p->tls.s));
}

static void test_iptunnel_datagrams_early_tcp_in_order(void **state)
{
    pair p;
    UTLS_STATS st;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED | SSL_MODE_UTLS_IP_TUNNEL);
    for (int r = 1; r < NREC; r++)
        push(&p, r);
    expect(&p, 1, 1); /* UDP: early */
    expect(&p, 3, 1); /* UDP: early, past the TCP packet */
    /* The TCP packet and the record that is no IP packet wait for the
     * hole: nothing more now, and nothing counted as pending. */
    assert_int_equal(SSL_pending(p.tls.s), 0);
    expect_want_read(&p);
    push(&p, 0);
    expect(&p, 0, 0);
    expect(&p, 2, 0); /* in order, after the hole */
    expect(&p, 4, 0);
    expect_want_read(&p);
    assert_int_equal(UTLS_get_stats(p.tls.s, &st), 1);
    assert_int_equal(st.records_out_of_order, 2);
    assert_int_equal(st.records_in_order, 3);
    pair_free(&p);
}

static void test_iptunnel_off_everything_early(void **state)
{
    pair p;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    for (int r = 1; r < NREC; r++)
        push(&p, r);
    expect(&p, 1, 1);
    expect(&p, 2, 1); /* without the mode, the TCP packet goes early too */
    expect(&p, 3, 1);
    expect(&p, 4, 1);
    push(&p, 0);
    expect(&p, 0, 0);
    expect_want_read(&p);
    pair_free(&p);
}

/* UTLS_MODE's words: "iptunnel" sets the mode; "unordered" alone is refused
 * (no scope), with a scope word it is set. */
static void test_iptunnel_env_words(void **state)
{
    static const struct {
        const char *value;
        uint64_t want;
    } cases[] = {
        {"unordered,iptunnel,all", SSL_MODE_UNORDERED | SSL_MODE_UTLS_IP_TUNNEL},
        {"unordered,iptunnel,port=4433", SSL_MODE_UNORDERED | SSL_MODE_UTLS_IP_TUNNEL},
        {"unordered,alpn=utls-messages,sni=media.example", SSL_MODE_UNORDERED},
        {"unordered,iptunnel", 0},       /* no scope: refused */
        {"unordered", 0},                /* no scope: refused */
        {"unordered,port=0", 0},         /* malformed: the whole setting is ignored */
        {"unordered,port=9-3", 0},
        {"unordered,port=70000", 0},
        {"unordered,sni=", 0},
        {"negotiate", SSL_MODE_UTLS_NEGOTIATE}, /* no reordering: no scope needed */
    };

    (void)state;
    setenv("UTLS_QUIET", "1", 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        SSL_CTX *ctx;

        setenv("UTLS_MODE", cases[i].value, 1);
        ctx = SSL_CTX_new(TLS_server_method());
        unsetenv("UTLS_MODE");
        assert_non_null(ctx);
        if ((SSL_CTX_get_mode(ctx) & (SSL_MODE_UNORDERED | SSL_MODE_UTLS_IP_TUNNEL
                                      | SSL_MODE_UTLS_NEGOTIATE))
            != cases[i].want)
            fail_msg("UTLS_MODE=%s: mode %#lx, expected %#llx", cases[i].value,
                     (unsigned long)SSL_CTX_get_mode(ctx), (unsigned long long)cases[i].want);
        SSL_CTX_free(ctx);
    }
    unsetenv("UTLS_QUIET");
}

/* A connection whose mode came from UTLS_MODE and that matches none of its
 * scope words reads in order (UTLS_FALLBACK_OUT_OF_SCOPE); "all" matches. */
static UTLS_FALLBACK scoped_fallback(const char *mode)
{
    uh_seg_pair p;
    UTLS_STATS st;
    uint8_t buf[300], plain[200];
    size_t n;
    int len;

    setenv("UTLS_MODE", mode, 1);
    /* uh_seg_pair_new makes its contexts after this: they read UTLS_MODE. */
    assert_true(uh_seg_pair_new(&p, uh_key, uh_cert, 0));
    unsetenv("UTLS_MODE");
    memset(plain, 7, sizeof(plain));
    assert_int_equal(SSL_write(p.c, plain, sizeof(plain)), (int)sizeof(plain));
    len = (int)BIO_pending(p.c_out);
    assert_true(len > 0 && len <= (int)sizeof(buf));
    assert_int_equal(BIO_read(p.c_out, buf, len), len);
    assert_true(UTLS_BIO_segment_push(p.seg, p.base, buf, (size_t)len));
    assert_true(SSL_read_ex(p.s, buf, sizeof(buf), &n));
    assert_int_equal(UTLS_get_stats(p.s, &st), 1);
    uh_seg_pair_free(&p);
    return st.fallback;
}

static void test_iptunnel_scope_fallback(void **state)
{
    (void)state;
    /* In memory there is no socket: no port matches. */
    assert_int_equal(scoped_fallback("unordered,port=4433"), UTLS_FALLBACK_OUT_OF_SCOPE);
    assert_int_equal(scoped_fallback("unordered,sni=elsewhere.example"),
                     UTLS_FALLBACK_OUT_OF_SCOPE);
    assert_int_not_equal(scoped_fallback("unordered,all"), UTLS_FALLBACK_OUT_OF_SCOPE);
    assert_string_equal(UTLS_fallback_string(UTLS_FALLBACK_OUT_OF_SCOPE) != NULL ? "set" : "unset",
                        "set");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iptunnel_datagrams_early_tcp_in_order),
        cmocka_unit_test(test_iptunnel_off_everything_early),
        cmocka_unit_test(test_iptunnel_env_words),
        cmocka_unit_test(test_iptunnel_scope_fallback),
    };

    return cmocka_run_group_tests_name("iptunnel", tests, uh_identity_setup, uh_identity_teardown);
}
