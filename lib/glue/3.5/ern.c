/*
 * Explicit record numbers (docs/ern.md) on the 3.5 base: not offered. The
 * 3.0 glue writes and reads numbered records inside the 3.0 record layer
 * (do_ssl3_write, ssl3_get_record, tls1_change_cipher_state); 3.5 moved all
 * of that into OSSL_RECORD_METHOD (ssl/record/methods/), and the hooks for it
 * are not written yet. So the extension is never registered: a 3.5 endpoint
 * looks to a uTLS peer like a legacy one (its offer is not answered, both
 * sides stay unnumbered, RFC-conformant TLS), and the sealing calls fail as
 * they do on any connection whose numbers are off.
 */
#include "glue_local.h"

void utls_ern_register(SSL_CTX *ctx)
{
    (void)ctx;
}

int UTLS_ern_flush(SSL *s)
{
    (void)s;
    return 1; /* nothing is ever owed */
}

unsigned int UTLS_ern_status(const SSL *s)
{
    (void)s;
    return 0;
}

/* ern_not_on raises what every sealing call raises when numbers are off. */
static int ern_not_on(void)
{
    utls_raise(UTLS_R_ERN_NOT_ON, "UTLS_ERN_TX is off (explicit record numbers are not "
                                  "available on the OpenSSL 3.5 base)");
    return 0;
}

int UTLS_ern_seal(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                  size_t *out_len, uint64_t *out_number)
{
    (void)s, (void)buf, (void)len, (void)out, (void)out_cap, (void)out_len, (void)out_number;
    return ern_not_on();
}

int UTLS_ern_write_sealed(SSL *s, const unsigned char *rec, size_t len)
{
    (void)s, (void)rec, (void)len;
    return ern_not_on();
}

int UTLS_ern_drop(SSL *s, uint64_t number)
{
    (void)s, (void)number;
    return ern_not_on();
}

size_t UTLS_ern_num_sealed(const SSL *s)
{
    (void)s;
    return 0;
}

size_t utls_hook_write_overhead(SSL *s)
{
    (void)s;
    return 0; /* no record carries a number */
}

int utls_ern_strip(SSL *s, const utls_conn *c, const unsigned char **pt, size_t *len,
                   uint64_t seq, int numbered)
{
    (void)s, (void)c, (void)pt, (void)len, (void)seq, (void)numbered;
    return 0; /* a plain record */
}

int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next)
{
    (void)s, (void)k, (void)next;
    return 0;
}

int utls_tls13_read_key(SSL *s, int next, unsigned char *key, size_t *keylen,
                        unsigned char iv[12])
{
    (void)s, (void)next, (void)key, (void)keylen, (void)iv;
    return 0;
}
