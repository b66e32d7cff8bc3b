/*
 * base.inorder_info: what both bases promise for records read in order with
 * SSL_MODE_UNORDERED (the 3.5 base has no out-of-order delivery yet, so this
 * is all it promises; docs/architecture.md, "Two bases"): UTLS_read_record()
 * describes each application record (sequence numbers one apart under one
 * key, generation 0 for the first application key, +1 and the sequence from
 * 0 again after the peer's KeyUpdate, never out of order), UTLS_get_stats()
 * counts each record once, and with the mode off the metadata is zeroed.
 * Two SSLs over memory BIOs in one process, a real TLS 1.3 handshake.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "uharness.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* move: what |from| wrote goes to |to|'s read BIO. */
static void move(BIO *from, BIO *to)
{
    char buf[16384];
    int n;

    while ((n = BIO_read(from, buf, sizeof(buf))) > 0)
        BIO_write(to, buf, n);
}

struct pair {
    SSL *client, *server;
    BIO *c_in, *c_out, *s_in, *s_out;
};

static void pump(struct pair *p)
{
    move(p->c_out, p->s_in);
    move(p->s_out, p->c_in);
}

static int pair_new(struct pair *p, SSL_CTX *cctx, SSL_CTX *sctx)
{
    int i, rc, rs;

    p->client = SSL_new(cctx);
    p->server = SSL_new(sctx);
    p->c_in = BIO_new(BIO_s_mem());
    p->c_out = BIO_new(BIO_s_mem());
    p->s_in = BIO_new(BIO_s_mem());
    p->s_out = BIO_new(BIO_s_mem());
    if (p->client == NULL || p->server == NULL || p->c_in == NULL || p->c_out == NULL
        || p->s_in == NULL || p->s_out == NULL)
        return 0;
    SSL_set_bio(p->client, p->c_in, p->c_out);
    SSL_set_bio(p->server, p->s_in, p->s_out);
    BIO_up_ref(p->c_in), BIO_up_ref(p->c_out), BIO_up_ref(p->s_in), BIO_up_ref(p->s_out);
    SSL_set_connect_state(p->client);
    SSL_set_accept_state(p->server);
    for (i = 0; i < 100; i++) {
        rc = SSL_do_handshake(p->client);
        rs = SSL_do_handshake(p->server);
        pump(p);
        if (rc == 1 && rs == 1)
            return 1;
    }
    return 0;
}

static void pair_free(struct pair *p)
{
    SSL_free(p->client);
    SSL_free(p->server);
    BIO_free(p->c_in), BIO_free(p->c_out), BIO_free(p->s_in), BIO_free(p->s_out);
}

/* server_send writes |n| one-record messages; read_one reads one with its
 * metadata into |*info|. */
static int server_send(struct pair *p, int n)
{
    size_t w;
    int i;

    for (i = 0; i < n; i++)
        if (!SSL_write_ex(p->server, "message", 7, &w))
            return 0;
    pump(p);
    return 1;
}

static int read_one(struct pair *p, UTLS_RECORD_INFO *info)
{
    char buf[64];
    size_t got = 0;
    int i;

    for (i = 0; i < 4; i++) {
        if (UTLS_read_record(p->client, buf, sizeof(buf), &got, info))
            return got == 7 && memcmp(buf, "message", 7) == 0;
        ERR_clear_error();
        pump(p); /* a ticket, a KeyUpdate answer */
    }
    return 0;
}

int main(void)
{
    EVP_PKEY *key = NULL;
    X509 *cert = NULL;
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method()), *sctx = SSL_CTX_new(TLS_server_method());
    struct pair p;
    UTLS_RECORD_INFO info, prev;
    UTLS_STATS st;
    int i;

    if (cctx == NULL || sctx == NULL || !uh_make_identity(1, &key, &cert)
        || !SSL_CTX_use_certificate(sctx, cert) || !SSL_CTX_use_PrivateKey(sctx, key)
        || !SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION)) {
        printf("FAIL setup\n");
        return 1;
    }
    printf("base: %s\n", UTLS_version(UTLS_FULL_VERSION));

    /* Mode on: one description per record, counted once. */
    SSL_CTX_set_mode(cctx, SSL_MODE_UNORDERED);
    if (!pair_new(&p, cctx, sctx)) {
        printf("FAIL handshake\n");
        return 1;
    }
    CHECK(server_send(&p, 3), "write");
    for (i = 0; i < 3; i++) {
        CHECK(read_one(&p, &info), "read %d", i);
        CHECK(info.out_of_order == 0 && info.key_generation == 0, "record %d: generation %u, ooo %d",
              i, info.key_generation, info.out_of_order);
        CHECK(info.wire_len > 7 && info.arrival_ns != 0, "record %d: wire_len %zu arrival %llu", i,
              info.wire_len, (unsigned long long)info.arrival_ns);
        CHECK(i == 0 || info.seq == prev.seq + 1, "record %d: seq %llu after %llu", i,
              (unsigned long long)info.seq, (unsigned long long)prev.seq);
        prev = info;
    }
    /* The server's KeyUpdate: a new key generation, its sequence from 0. */
    CHECK(SSL_key_update(p.server, SSL_KEY_UPDATE_NOT_REQUESTED), "key update");
    CHECK(server_send(&p, 2), "write after key update");
    for (i = 0; i < 2; i++) {
        CHECK(read_one(&p, &info), "read after key update %d", i);
        CHECK(info.key_generation == 1 && info.seq == (uint64_t)i,
              "after key update %d: generation %u seq %llu", i, info.key_generation,
              (unsigned long long)info.seq);
    }
    CHECK(UTLS_get_stats(p.client, &st) && st.records_in_order == 5 && st.records_out_of_order == 0,
          "stats: %llu in order, %llu out of order", (unsigned long long)st.records_in_order,
          (unsigned long long)st.records_out_of_order);
    pair_free(&p);

    /* Mode off: stock reading, no metadata. */
    SSL_CTX_clear_mode(cctx, SSL_MODE_UNORDERED);
    if (!pair_new(&p, cctx, sctx)) {
        printf("FAIL handshake (mode off)\n");
        return 1;
    }
    CHECK(server_send(&p, 1), "write (mode off)");
    memset(&info, 0xff, sizeof(info));
    CHECK(read_one(&p, &info), "read (mode off)");
    CHECK(info.seq == 0 && info.wire_len == 0 && info.arrival_ns == 0, "mode off: metadata not zeroed");
    CHECK(UTLS_get_stats(p.client, &st) && st.fallback == UTLS_FALLBACK_NOT_ENABLED,
          "mode off: fallback %d", (int)st.fallback);
    pair_free(&p);

    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    EVP_PKEY_free(key);
    X509_free(cert);
    printf(failures == 0 ? "base.inorder_info: OK\n" : "base.inorder_info: %d failure(s)\n", failures);
    return failures != 0;
}
