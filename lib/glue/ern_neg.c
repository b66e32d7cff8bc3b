/*
 * Explicit record numbers (docs/ern.md), the parts that are the same on
 * both bases: the tokens, the offer as a NewSessionTicket extension (TLS
 * 1.3), the TLS 1.2 offer (the AES-GCM nonce start or AES-CBC explicit IV
 * of the server's Finished, set and checked), UTLS_ern_status(), what
 * negotiation puts in front of a record's plaintext (written and
 * stripped), and the one-block test's keys. Uses only
 * OpenSSL's public API, the SSL_CTX's library context and WPACKET, so the
 * very same source is compiled into both forks (lib/glue/3.5/ern_neg.c is a
 * one-line wrapper, as conf.c's). What drives the record layer is per base:
 * lib/glue/ern_hooks.c and ern_seal.c (3.0), lib/glue/3.5/ern.c (3.5).
 *
 * This code handles secrets: the exporter value, the tokens derived from
 * it and raw read keys. All are wiped when no longer needed.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "glue_local.h"
/* The big-endian helpers (core/, one copy for the fork and the provider). */
#include "utls/be64.h"

/* --- Tokens ---------------------------------------------------------------- */

/* utls_ern_tokens computes the tokens (offer, accept, switch, TLS 1.2 offer) once
 * the exporter is available: after the TLS 1.3 handshake, or once the TLS 1.2
 * master secret exists. Returns 1 when they are ready. */
int utls_ern_tokens(SSL *s, utls_conn *c)
{
    static const char *const names[4] = {"uTLS ERN v1 offer", "uTLS ERN v1 accept",
                                         "uTLS ERN v1 switch", "uTLS ERN v1 tls12 offer"};
    unsigned char t[32], mac[EVP_MAX_MD_SIZE];
    size_t maclen, i;
    int ok = 0;

    if (c->ern.tokens_ready)
        return 1;
    /* TLS 1.2: RFC 5705, from the master secret, which both sides hold
     * before the first record under the new keys (docs/ern.md). */
    if ((SSL_version(s) != TLS1_3_VERSION && SSL_version(s) != TLS1_2_VERSION)
        || SSL_export_keying_material(s, t, sizeof(t), UTLS_ERN_LABEL,
                                      sizeof(UTLS_ERN_LABEL) - 1, NULL, 0, 0) != 1)
        goto end;
    for (i = 0; i < 4; i++) {
        if (EVP_Q_mac(SSL_get_SSL_CTX(s)->libctx, "HMAC", SSL_get_SSL_CTX(s)->propq, "SHA256", NULL, t, sizeof(t),
                      (const unsigned char *)names[i], strlen(names[i]), mac, sizeof(mac),
                      &maclen) == NULL
            || maclen < UTLS_ERN_TOKEN_LEN)
            goto end;
        if (i < 3)
            memcpy(c->ern.token[i], mac, UTLS_ERN_TOKEN_LEN);
        else
            memcpy(c->ern.offer12, mac, UTLS_ERN_OFFER12_LEN); /* GCM: first 8 */
    }
    c->ern.tokens_ready = 1;
    ok = 1;
end:
    OPENSSL_cleanse(t, sizeof(t));
    OPENSSL_cleanse(mac, sizeof(mac));
    return ok;
}

/* --- The offer: a NewSessionTicket extension ------------------------------ */

static int ern_ext_add(SSL *s, unsigned int ext_type, unsigned int context,
                       const unsigned char **out, size_t *outlen, X509 *x, size_t chainidx,
                       int *al, void *add_arg)
{
    utls_conn *c;

    (void)ext_type, (void)context, (void)x, (void)chainidx, (void)al, (void)add_arg;
    if ((SSL_get_mode(s) & SSL_MODE_UTLS_NEGOTIATE) == 0 || !SSL_is_server(s)
        || (c = utls_conn_get(s)) == NULL || !utls_ern_tokens(s, c))
        return 0; /* not added: the ticket is stock */
    c->ern.offered = 1;
    *out = c->ern.token[UTLS_ERN_OFFER];
    *outlen = UTLS_ERN_TOKEN_LEN;
    return 1;
}

static int ern_ext_parse(SSL *s, unsigned int ext_type, unsigned int context,
                         const unsigned char *in, size_t inlen, X509 *x, size_t chainidx,
                         int *al, void *parse_arg)
{
    utls_conn *c;

    (void)ext_type, (void)context, (void)x, (void)chainidx, (void)al, (void)parse_arg;
    /* RFC 8446 4.6.1: clients MUST ignore unrecognized extensions; an offer
     * that does not verify is treated as unrecognized. */
    if ((SSL_get_mode(s) & SSL_MODE_UTLS_NEGOTIATE) == 0 || SSL_is_server(s) || inlen != UTLS_ERN_TOKEN_LEN
        || (c = utls_conn_get(s)) == NULL || !utls_ern_tokens(s, c)
        || CRYPTO_memcmp(in, c->ern.token[UTLS_ERN_OFFER], inlen) != 0)
        return 1;
    c->ern.offered = 1; /* the client saw a valid offer (UTLS_ERN_OFFERED) */
    if (!c->ern.accepted && c->ern.token_due == 0)
        c->ern.token_due = UTLS_ERN_ACCEPT;
    return 1;
}

void utls_ern_register(SSL_CTX *ctx)
{
    /* Dormant unless SSL_MODE_UTLS_NEGOTIATE is set: add returns 0 (nothing
     * sent) and parse ignores everything. NewSessionTicket only: the
     * ClientHello and ServerHello never carry it. */
    ERR_set_mark();
    (void)SSL_CTX_add_custom_ext(ctx, UTLS_ERN_EXT_TYPE, SSL_EXT_TLS1_3_NEW_SESSION_TICKET,
                                 ern_ext_add, NULL, NULL, ern_ext_parse, NULL);
    ERR_pop_to_mark();
}

unsigned int UTLS_ern_status(const SSL *s)
{
    const utls_conn *c = s != NULL ? UTLS_CONN_OF(s) : NULL;
    unsigned int st = 0;

    if (c == NULL)
        return 0;
    if (c->ern.offered)
        st |= UTLS_ERN_OFFERED;
    if (c->ern.accepted || (SSL_is_server(s) && c->ern.rx))
        st |= UTLS_ERN_ACCEPTED;
    if (c->ern.tx)
        st |= UTLS_ERN_TX;
    if (c->ern.rx)
        st |= UTLS_ERN_RX;
    return st;
}


/* --- Sending and receiving in order ------------------------------------------ */

size_t utls_hook_write_overhead(SSL *s)
{
    const utls_conn *c = UTLS_CONN_OF(s);

    if (c == NULL)
        return 0;
    if (c->ern.token_due != 0)
        return UTLS_ERN_TOKEN_LEN + UTLS_ERN_LEN;
    return c->ern.tx ? UTLS_ERN_LEN : 0;
}

int utls_ern_put_prefix(utls_conn *c, WPACKET *pkt, uint64_t seq, size_t *out_len)
{
    unsigned char ern[UTLS_ERN_LEN];

    *out_len = 0;
    if (c->ern.token_due != 0) {
        /* The switch point: this record starts with the owed message, and
         * from this record on every record carries its number. */
        if (!WPACKET_memcpy(pkt, c->ern.token[c->ern.token_due], UTLS_ERN_TOKEN_LEN))
            return 0;
        *out_len += UTLS_ERN_TOKEN_LEN;
        if (c->ern.token_due == UTLS_ERN_ACCEPT)
            c->ern.accepted = 1;
        c->ern.token_due = 0;
        c->ern.tx = 1;
    }
    if (!c->ern.tx)
        return 1;
    utls_store_be64(ern, seq);
    if (!WPACKET_memcpy(pkt, ern, sizeof(ern)))
        return 0;
    if (!c->ern.sealing) /* written now, in sequence (UTLS_ern_seal: later) */
        c->ern.tx_top_next = seq + 1;
    *out_len += sizeof(ern);
    c->stats.ern_records_sent++;
    return 1;
}

/* ern_switch_token: the token that starts the peer's first numbered record. */
static const unsigned char *ern_switch_token(SSL *s, const utls_conn *c)
{
    if (!c->ern.tokens_ready)
        return NULL;
    if (SSL_is_server(s))
        return c->ern.offered ? c->ern.token[UTLS_ERN_ACCEPT] : NULL;
    return c->ern.accepted ? c->ern.token[UTLS_ERN_SWITCH] : NULL;
}

int utls_ern_strip(SSL *s, const utls_conn *c, const unsigned char **pt, size_t *len,
                   uint64_t seq, int numbered)
{
    const unsigned char *tok = ern_switch_token(s, c);
    int is_switch = 0;

    if (!numbered && tok != NULL && *len >= UTLS_ERN_TOKEN_LEN + UTLS_ERN_LEN
        && CRYPTO_memcmp(*pt, tok, UTLS_ERN_TOKEN_LEN) == 0) {
        *pt += UTLS_ERN_TOKEN_LEN;
        *len -= UTLS_ERN_TOKEN_LEN;
        numbered = 1;
        is_switch = 1;
    }
    if (!numbered)
        return 0;
    if (*len < UTLS_ERN_LEN || utls_load_be64(*pt) != seq)
        return -1;
    *pt += UTLS_ERN_LEN;
    *len -= UTLS_ERN_LEN;
    return is_switch ? 2 : 1;
}

int utls_ern_inorder_data(SSL *s, utls_conn *c, const unsigned char **pt, size_t *len,
                          uint64_t seq)
{
    int r;

    if (!c->ern.tokens_ready)
        return 0;
    r = utls_ern_strip(s, c, pt, len, seq, c->ern.rx);
    if (r < 0)
        return -1;
    if (r == 2) {
        /* The peer's switch point, in order: numbered from this record on. */
        c->ern.rx = 1;
        if (SSL_is_server(s))
            c->ern.token_due = UTLS_ERN_SWITCH;
    }
    if (r > 0)
        c->stats.ern_records_received++;
    return r > 0;
}

/* --- TLS 1.2: the offer in a sender-chosen field of the server's Finished --- */

int utls_ern_tls12_kind(const SSL *s, const EVP_CIPHER_CTX *ctx)
{
    const EVP_CIPHER *ciph;
    const char *name;

    if (SSL_is_dtls(s) || SSL_version(s) != TLS1_2_VERSION || ctx == NULL
        || (ciph = EVP_CIPHER_CTX_get0_cipher(ctx)) == NULL)
        return 0;
    switch (EVP_CIPHER_get_mode(ciph)) {
    case EVP_CIPH_GCM_MODE:
        return UTLS_ERN_KIND_GCM12;
    case EVP_CIPH_CBC_MODE:
        /* AES-128/256-CBC, also the stitched AES-CBC-HMAC-SHA1/256 ciphers
         * OpenSSL picks for MAC-then-encrypt: the one-block test is AES. */
        name = EVP_CIPHER_get0_name(ciph);
        return name != NULL && OPENSSL_strncasecmp(name, "AES-", 4) == 0
                       && EVP_CIPHER_get_block_size(ciph) == 16
                   ? UTLS_ERN_KIND_CBC12
                   : 0;
    default:
        return 0;
    }
}

int utls_hook_tls12_key_set(SSL *s, int which, EVP_CIPHER_CTX *ctx, const unsigned char *key,
                            size_t key_len, const unsigned char *iv, size_t iv_len)
{
    utls_conn *c;
    unsigned char nonce[UTLS_GCM12_SALT_LEN + UTLS_GCM12_EXPLICIT_LEN];
    int kind = utls_ern_tls12_kind(s, ctx), ok = 0;

    if (kind == 0 || (c = utls_conn_get(s)) == NULL)
        return 1;
    if (iv_len != (kind == UTLS_ERN_KIND_GCM12 ? UTLS_GCM12_SALT_LEN : 16))
        return 1;
    if ((which & SSL3_CC_READ) != 0) {
        /* The one-block test needs the raw key after the key block is gone. */
        if (key_len != 16 && key_len != 32)
            return 1;
        memcpy(c->ern.tls12_rx_key, key, key_len);
        c->ern.tls12_rx_key_len = key_len;
        memcpy(c->ern.tls12_rx_iv, iv, iv_len);
        c->ern.tls12_rx_valid = 1;
        utls_ern_keys_clear(&c->ern.cur); /* rebuilt from this key when needed */
        return 1;
    }
    /* The server's offer, once per connection, in its first record under
     * the new write key: its Finished. */
    if (!SSL_is_server(s) || c->ern.offered || !utls_ern_tokens(s, c))
        return 1;
    if (kind == UTLS_ERN_KIND_CBC12) {
        /* Put in place of the random explicit IV by utls_hook_tls12_cbc_iv. */
        c->ern.tls12_cbc_offer_due = 1;
        c->ern.offered = 1;
        return 1;
    }
    /*
     * AES-GCM: the provider adds 1 per record from the explicit nonce it is
     * given, exactly as it does from the random start it would otherwise
     * pick. Nonce uniqueness under this key is therefore the provider's own
     * (docs/ern.md, "Nonce uniqueness").
     */
    memcpy(nonce, iv, UTLS_GCM12_SALT_LEN);
    memcpy(nonce + UTLS_GCM12_SALT_LEN, c->ern.offer12, UTLS_GCM12_EXPLICIT_LEN);
    /* -1: the whole IV (salt || explicit start), as the provider documents
     * for EVP_CTRL_AEAD_SET_IV_FIXED. */
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IV_FIXED, -1, nonce) <= 0)
        goto end;
    c->ern.offered = 1;
    ok = 1;
end:
    OPENSSL_cleanse(nonce, sizeof(nonce));
    return ok;
}

void utls_hook_tls12_cbc_iv(SSL *s, unsigned char *iv, size_t iv_len)
{
    utls_conn *c = UTLS_CONN_OF(s);

    if (c == NULL || !c->ern.tls12_cbc_offer_due || iv_len != UTLS_ERN_OFFER12_LEN)
        return;
    /* The IV block is encrypted under the chaining IV like all the others,
     * so the wire shows E(offer XOR chaining IV): as random as before. */
    memcpy(iv, c->ern.offer12, UTLS_ERN_OFFER12_LEN);
    c->ern.tls12_cbc_offer_due = 0;
}

/*
 * cbc_first_iv_block: the plaintext of the explicit IV block |c0| of the
 * first CBC record under the read key: D(c0) XOR the key block's IV, the
 * chaining IV of that record for sender and receiver alike. Secret.
 */
static int cbc_first_iv_block(SSL *s, const utls_conn *c, const unsigned char *c0,
                              unsigned char out[16])
{
    EVP_CIPHER *blk = EVP_CIPHER_fetch(
        SSL_get_SSL_CTX(s)->libctx,
        c->ern.tls12_rx_key_len == 32 ? "AES-256-ECB" : "AES-128-ECB", SSL_get_SSL_CTX(s)->propq);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int outl, i, ok = 0;

    if (blk == NULL || ctx == NULL || !c->ern.tls12_rx_valid
        || EVP_DecryptInit_ex(ctx, blk, NULL, c->ern.tls12_rx_key, NULL) <= 0
        || EVP_CIPHER_CTX_set_padding(ctx, 0) <= 0
        || EVP_DecryptUpdate(ctx, out, &outl, c0, 16) <= 0 || outl != 16)
        goto end;
    for (i = 0; i < 16; i++)
        out[i] ^= c->ern.tls12_rx_iv[i];
    ok = 1;
end:
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(blk);
    return ok;
}

void utls_ern_tls12_offer_check(SSL *s, utls_conn *c, int kind, const unsigned char *pt)
{
    unsigned char iv_pt[16];
    int seen;

    c->ern.tls12_checked = 1;
    if (!utls_ern_tokens(s, c))
        return;
    if (kind == UTLS_ERN_KIND_GCM12) {
        /* The provider decrypted in place after the explicit nonce, which
         * it leaves as received, just before the plaintext. */
        seen = CRYPTO_memcmp(pt - UTLS_GCM12_EXPLICIT_LEN, c->ern.offer12,
                             UTLS_GCM12_EXPLICIT_LEN) == 0;
    } else {
        /*
         * CBC: the block just before the plaintext is the explicit IV block,
         * decrypted in place by the generic provider (the value the sender
         * chose), or left as ciphertext by the stitched AES-CBC-HMAC ones
         * (decrypted here). Either form matching is the offer; a random IV
         * matches one of them with probability 2^-127.
         */
        seen = CRYPTO_memcmp(pt - 16, c->ern.offer12, 16) == 0
               || (cbc_first_iv_block(s, c, pt - 16, iv_pt)
                   && CRYPTO_memcmp(iv_pt, c->ern.offer12, 16) == 0);
        OPENSSL_cleanse(iv_pt, sizeof(iv_pt));
    }
    if (!seen)
        return; /* a legacy server: its nonce or IV was random */
    c->ern.offered = 1; /* the client saw a valid offer (UTLS_ERN_OFFERED) */
    if (!c->ern.accepted && c->ern.token_due == 0)
        c->ern.token_due = UTLS_ERN_ACCEPT;
}

int utls_ern_tls12_keys_setup(SSL *s, utls_ern_keys *k, const EVP_CIPHER_CTX *read_ctx)
{
    const utls_conn *c = UTLS_CONN_OF(s);
    unsigned char key[32];
    size_t keylen;
    int ok;

    k->valid = 0;
    if (c == NULL || !c->ern.tls12_rx_valid
        || (k->kind = utls_ern_tls12_kind(s, read_ctx)) == 0)
        return 0;
    /* GCM: the salt, then the record's own explicit nonce (window.c). */
    memcpy(k->iv, c->ern.tls12_rx_iv, UTLS_GCM12_SALT_LEN);
    memset(k->iv + UTLS_GCM12_SALT_LEN, 0, sizeof(k->iv) - UTLS_GCM12_SALT_LEN);
    keylen = c->ern.tls12_rx_key_len;
    memcpy(key, c->ern.tls12_rx_key, keylen);
    ok = utls_ern_keys_init(s, k, key, keylen);
    OPENSSL_cleanse(key, sizeof(key));
    return ok;
}

/* --- The one-block test's key ------------------------------------------------ */

int utls_tls13_read_key(SSL *s, int next, unsigned char *key, size_t *keylen,
                        unsigned char iv[12])
{
    /* RFC 8446 7.1-7.3: key and IV from the read traffic secret, or from
     * the next one (7.2: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)). */
    static const unsigned char upd[] = "traffic upd";
    UTLS_TLS_CONN *sc = UTLS_TLS_OF(s);
    const EVP_MD *md = ssl_handshake_md(sc);
    const EVP_CIPHER *ciph = sc->s3.tmp.new_sym_enc;
    const unsigned char *secret = sc->server ? sc->client_app_traffic_secret
                                             : sc->server_app_traffic_secret;
    unsigned char nsecret[EVP_MAX_MD_SIZE];
    size_t hashlen;
    int l, ok = 0;

    if (md == NULL || ciph == NULL || (l = EVP_MD_get_size(md)) <= 0)
        return 0;
    hashlen = (size_t)l;
    *keylen = (size_t)EVP_CIPHER_get_key_length(ciph);
    if (*keylen > EVP_MAX_KEY_LENGTH)
        return 0;
    if (next) {
        if (!tls13_hkdf_expand(sc, md, secret, upd, sizeof(upd) - 1, NULL, hashlen, nsecret,
                               hashlen, 0))
            goto end;
        secret = nsecret;
    }
    ok = tls13_derive_key(sc, md, secret, key, *keylen) && tls13_derive_iv(sc, md, secret, iv, 12);
end:
    OPENSSL_cleanse(nsecret, sizeof(nsecret));
    return ok;
}

/* utls_ern_tls13_kind: the one-block test for a TLS 1.3 AEAD, or 0 for none. */
int utls_ern_tls13_kind(const EVP_CIPHER *ciph)
{
    switch (EVP_CIPHER_get_mode(ciph)) {
    case EVP_CIPH_GCM_MODE:
        return UTLS_ERN_KIND_GCM;
    case EVP_CIPH_CCM_MODE:
        return UTLS_ERN_KIND_CCM;
    default:
        return EVP_CIPHER_get_nid(ciph) == NID_chacha20_poly1305 ? UTLS_ERN_KIND_CHACHA : 0;
    }
}

/* utls_ern_keys_init keys |k| (whose kind is set) for the one-block test
 * with the raw read key |key| (|keylen| bytes). Returns 1 on success. */
int utls_ern_keys_init(SSL *s, utls_ern_keys *k, const unsigned char *key, size_t keylen)
{
    OSSL_LIB_CTX *libctx = SSL_get_SSL_CTX(s)->libctx;
    const char *propq = SSL_get_SSL_CTX(s)->propq;
    EVP_CIPHER *blk = NULL;
    int ok = 0;

    k->valid = 0;
    if (keylen > sizeof(k->key))
        return 0;
    if (k->ctx == NULL && (k->ctx = EVP_CIPHER_CTX_new()) == NULL)
        goto end;
    if (k->kind == UTLS_ERN_KIND_CHACHA) {
        blk = EVP_CIPHER_fetch(libctx, "ChaCha20", propq);
        memcpy(k->key, key, keylen);
    } else {
        blk = EVP_CIPHER_fetch(libctx, keylen == 32 ? "AES-256-ECB" : "AES-128-ECB",
                               propq);
    }
    /* CBC: the test decrypts one block; every other kind makes keystream. */
    if (blk == NULL
        || EVP_CipherInit_ex(k->ctx, blk, NULL, k->kind == UTLS_ERN_KIND_CHACHA ? NULL : key, NULL,
                             k->kind == UTLS_ERN_KIND_CBC12 ? 0 : 1) <= 0)
        goto end;
    EVP_CIPHER_CTX_set_padding(k->ctx, 0);
    k->valid = 1;
    ok = 1;
end:
    EVP_CIPHER_free(blk);
    return ok;
}
