/*
 * Explicit record numbers, negotiated under encryption (uTLS ERN v1).
 * The protocol is docs/ern.md; this file is its implementation for TLS 1.3
 * and for TLS 1.2 with AES-GCM and AES-CBC.
 *
 * This code handles secrets: the exporter value and tokens derived from it,
 * and raw traffic keys for the one-block candidate test. All are wiped when
 * no longer needed.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "utls_local.h"
/* The provider's big-endian helpers (prepare.sh links provider/ into the
 * tree root, which is on libssl's include path): one copy for the fork. */
#include "utls-provider/be64.h"

/* RFC 8446 4.2: 65280-65535 are reserved for private use. "u" = 0x75. */
#define UTLS_ERN_EXT_TYPE 0xFF75
#define UTLS_ERN_LABEL "EXPORTER-uTLS-ERN-v1"
#define UTLS_ERN_LEN 8
/* RFC 5288 3: a TLS 1.2 AES-GCM record is explicit nonce (8) || ciphertext
 * || tag; the nonce is salt (4, from the key block) || explicit nonce. */
#define UTLS_GCM12_EXPLICIT_LEN 8
#define UTLS_GCM12_SALT_LEN 4

/* --- Tokens ---------------------------------------------------------------- */

/* ern_tokens computes the tokens (offer, accept, switch, TLS 1.2 offer) once
 * the exporter is available: after the TLS 1.3 handshake, or once the TLS 1.2
 * master secret exists. Returns 1 when they are ready. */
static int ern_tokens(SSL *s, utls_conn *c)
{
    static const char *const names[4] = {"uTLS ERN v1 offer", "uTLS ERN v1 accept",
                                         "uTLS ERN v1 switch", "uTLS ERN v1 tls12 offer"};
    unsigned char t[32], mac[EVP_MAX_MD_SIZE];
    size_t maclen, i;
    int ok = 0;

    if (c->ern_tokens_ready)
        return 1;
    /* TLS 1.2: RFC 5705, from the master secret, which both sides hold
     * before the first record under the new keys (docs/ern.md). */
    if (SSL_IS_DTLS(s) || (!SSL_IS_TLS13(s) && s->version != TLS1_2_VERSION)
        || SSL_export_keying_material(s, t, sizeof(t), UTLS_ERN_LABEL,
                                      sizeof(UTLS_ERN_LABEL) - 1, NULL, 0, 0) != 1)
        goto end;
    for (i = 0; i < 4; i++) {
        if (EVP_Q_mac(s->ctx->libctx, "HMAC", s->ctx->propq, "SHA256", NULL, t, sizeof(t),
                      (const unsigned char *)names[i], strlen(names[i]), mac, sizeof(mac),
                      &maclen) == NULL
            || maclen < UTLS_ERN_TOKEN_LEN)
            goto end;
        if (i < 3)
            memcpy(c->ern_token[i], mac, UTLS_ERN_TOKEN_LEN);
        else
            memcpy(c->ern_offer12, mac, UTLS_ERN_OFFER12_LEN); /* GCM: first 8 */
    }
    c->ern_tokens_ready = 1;
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
    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) == 0 || !s->server
        || (c = utls_conn_get(s)) == NULL || !ern_tokens(s, c))
        return 0; /* not added: the ticket is stock */
    c->ern_offered = 1;
    *out = c->ern_token[UTLS_ERN_OFFER];
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
    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) == 0 || s->server || inlen != UTLS_ERN_TOKEN_LEN
        || (c = utls_conn_get(s)) == NULL || !ern_tokens(s, c)
        || CRYPTO_memcmp(in, c->ern_token[UTLS_ERN_OFFER], inlen) != 0)
        return 1;
    c->ern_offered = 1; /* the client saw a valid offer (UTLS_ERN_OFFERED) */
    if (!c->ern_accepted && c->ern_token_due == 0)
        c->ern_token_due = UTLS_ERN_ACCEPT;
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

/* --- The TLS 1.2 offer: a sender-chosen field of the server's Finished ------ */

/*
 * tls12_kind: how ERN runs on the TLS 1.2 cipher of |ctx|: AES-GCM (the
 * offer is the explicit nonce) or AES-CBC (the offer is the explicit IV), or
 * 0: legacy (docs/ern.md "TLS 1.2": CCM's explicit nonce is the sequence
 * number, ChaCha20-Poly1305 has none, other block ciphers are not AES).
 */
static int tls12_kind(const SSL *s, const EVP_CIPHER_CTX *ctx)
{
    const EVP_CIPHER *ciph;
    const char *name;

    if (SSL_IS_DTLS(s) || s->version != TLS1_2_VERSION || ctx == NULL
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
    int kind = tls12_kind(s, ctx), ok = 0;

    if (kind == 0 || (c = utls_conn_get(s)) == NULL)
        return 1;
    if (iv_len != (kind == UTLS_ERN_KIND_GCM12 ? UTLS_GCM12_SALT_LEN : 16))
        return 1;
    if ((which & SSL3_CC_READ) != 0) {
        /* The one-block test needs the raw key after the key block is gone. */
        if (key_len != 16 && key_len != 32)
            return 1;
        memcpy(c->ern12_rx_key, key, key_len);
        c->ern12_rx_key_len = key_len;
        memcpy(c->ern12_rx_iv, iv, iv_len);
        c->ern12_rx_valid = 1;
        utls_ern_keys_clear(&c->ern_cur); /* rebuilt from this key when needed */
        return 1;
    }
    /* The server's offer, once per connection, in its first record under
     * the new write key: its Finished. */
    if (!s->server || c->ern_offered || !ern_tokens(s, c))
        return 1;
    if (kind == UTLS_ERN_KIND_CBC12) {
        /* Put in place of the random explicit IV by utls_hook_tls12_cbc_iv. */
        c->ern12_cbc_offer_due = 1;
        c->ern_offered = 1;
        return 1;
    }
    /*
     * AES-GCM: the provider adds 1 per record from the explicit nonce it is
     * given, exactly as it does from the random start it would otherwise
     * pick. Nonce uniqueness under this key is therefore the provider's own
     * (docs/ern.md, "Nonce uniqueness").
     */
    memcpy(nonce, iv, UTLS_GCM12_SALT_LEN);
    memcpy(nonce + UTLS_GCM12_SALT_LEN, c->ern_offer12, UTLS_GCM12_EXPLICIT_LEN);
    /* -1: the whole IV (salt || explicit start), as the provider documents
     * for EVP_CTRL_AEAD_SET_IV_FIXED. */
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IV_FIXED, -1, nonce) <= 0)
        goto end;
    c->ern_offered = 1;
    ok = 1;
end:
    OPENSSL_cleanse(nonce, sizeof(nonce));
    return ok;
}

void utls_hook_tls12_cbc_iv(SSL *s, unsigned char *iv, size_t iv_len)
{
    utls_conn *c = s->utls;

    if (c == NULL || !c->ern12_cbc_offer_due || iv_len != UTLS_ERN_OFFER12_LEN)
        return;
    /* The IV block is encrypted under the chaining IV like all the others,
     * so the wire shows E(offer XOR chaining IV): as random as before. */
    memcpy(iv, c->ern_offer12, UTLS_ERN_OFFER12_LEN);
    c->ern12_cbc_offer_due = 0;
}

/*
 * cbc_first_iv_block: the plaintext of the explicit IV block |c0| of the
 * first CBC record under the read key: D(c0) XOR the key block's IV, the
 * chaining IV of that record for sender and receiver alike. Secret.
 */
static int cbc_first_iv_block(SSL *s, const utls_conn *c, const unsigned char *c0,
                              unsigned char out[16])
{
    EVP_CIPHER *blk = EVP_CIPHER_fetch(s->ctx->libctx,
                                       c->ern12_rx_key_len == 32 ? "AES-256-ECB" : "AES-128-ECB",
                                       s->ctx->propq);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int outl, i, ok = 0;

    if (blk == NULL || ctx == NULL || !c->ern12_rx_valid
        || EVP_DecryptInit_ex(ctx, blk, NULL, c->ern12_rx_key, NULL) <= 0
        || EVP_CIPHER_CTX_set_padding(ctx, 0) <= 0
        || EVP_DecryptUpdate(ctx, out, &outl, c0, 16) <= 0 || outl != 16)
        goto end;
    for (i = 0; i < 16; i++)
        out[i] ^= c->ern12_rx_iv[i];
    ok = 1;
end:
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(blk);
    return ok;
}

void utls_ern_tls12_record_done(SSL *s, const SSL3_RECORD *rr)
{
    utls_conn *c;
    unsigned char iv_pt[16];
    int kind, seen;

    if (s->server || rr->type != SSL3_RT_HANDSHAKE
        || (kind = tls12_kind(s, s->enc_read_ctx)) == 0 || (c = utls_conn_get(s)) == NULL
        || c->ern12_checked)
        return;
    /* Only the first record under the read key (sequence number 0, counted
     * by decryption already): the server's Finished. */
    if (utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer)) != 1)
        return;
    c->ern12_checked = 1;
    if (!ern_tokens(s, c))
        return;
    if (kind == UTLS_ERN_KIND_GCM12) {
        /* The provider decrypted in place after the explicit nonce, which
         * it leaves as received, just before the plaintext. */
        seen = CRYPTO_memcmp(rr->data - UTLS_GCM12_EXPLICIT_LEN, c->ern_offer12,
                             UTLS_GCM12_EXPLICIT_LEN) == 0;
    } else {
        /*
         * CBC: the block just before the plaintext is the explicit IV block,
         * decrypted in place by the generic provider (the value the sender
         * chose), or left as ciphertext by the stitched AES-CBC-HMAC ones
         * (decrypted here). Either form matching is the offer; a random IV
         * matches one of them with probability 2^-127.
         */
        seen = CRYPTO_memcmp(rr->data - 16, c->ern_offer12, 16) == 0
               || (cbc_first_iv_block(s, c, rr->data - 16, iv_pt)
                   && CRYPTO_memcmp(iv_pt, c->ern_offer12, 16) == 0);
        OPENSSL_cleanse(iv_pt, sizeof(iv_pt));
    }
    if (!seen)
        return; /* a legacy server: its nonce or IV was random */
    c->ern_offered = 1; /* the client saw a valid offer (UTLS_ERN_OFFERED) */
    if (!c->ern_accepted && c->ern_token_due == 0)
        c->ern_token_due = UTLS_ERN_ACCEPT;
}

/* --- Sending ----------------------------------------------------------------- */

int utls_hook_write_bytes(SSL *s)
{
    utls_conn *c = s->utls;

    /* Nothing to send on its own: an owed accept or switch travels in front
     * of the next application record (utls_hook_write_prefix), so that the
     * record count on the wire is what stock OpenSSL would send. */
    if (c != NULL && (c->ern_num_sealed > 0 || c->ern_wpending)) {
        /* Its record would take a number above the sealed ones and the
         * write buffer may hold a partly written sealed record. */
        utls_raise(UTLS_R_ERN_SEALED_PENDING, "%zu sealed records unwritten",
                   c->ern_num_sealed);
        return -1;
    }
    return 1;
}

size_t utls_hook_write_overhead(SSL *s)
{
    utls_conn *c = s->utls;

    if (c == NULL)
        return 0;
    if (c->ern_token_due != 0)
        return UTLS_ERN_TOKEN_LEN + UTLS_ERN_LEN;
    return c->ern_tx ? UTLS_ERN_LEN : 0;
}

int utls_hook_write_prefix(SSL *s, WPACKET *pkt, int type, size_t pipe, size_t *out_len)
{
    utls_conn *c = s->utls;
    unsigned char *seq = RECORD_LAYER_get_write_sequence(&s->rlayer);
    unsigned char ern[UTLS_ERN_LEN];

    *out_len = 0;
    if (c == NULL || type != SSL3_RT_APPLICATION_DATA || SSL_in_init(s))
        return 1;
    if (c->ern_token_due != 0) {
        /* The switch point: this record starts with the owed message, and
         * from this record on every record carries its number. */
        if (!WPACKET_memcpy(pkt, c->ern_token[c->ern_token_due], UTLS_ERN_TOKEN_LEN))
            return 0;
        *out_len += UTLS_ERN_TOKEN_LEN;
        if (c->ern_token_due == UTLS_ERN_ACCEPT)
            c->ern_accepted = 1;
        c->ern_token_due = 0;
        c->ern_tx = 1;
    }
    if (!c->ern_tx)
        return 1;
    /* The number the record is encrypted under: this record's sequence. */
    utls_store_be64(ern, utls_load_be64(seq) + pipe);
    if (!WPACKET_memcpy(pkt, ern, sizeof(ern)))
        return 0;
    if (!c->ern_sealing) /* written now, in sequence (UTLS_ern_seal: later) */
        c->ern_tx_top_next = utls_load_be64(seq) + pipe + 1;
    *out_len += sizeof(ern);
    c->stats.ern_records_sent++;
    return 1;
}

int UTLS_ern_flush(SSL *s)
{
    utls_conn *c;
    size_t zero = 0, written;
    int r;

    if (s == NULL || (c = s->utls) == NULL)
        return 1;
    if (c->ern_flush_pending) {
        /* A flush that could not be written at once: same buffer, same length. */
        r = ssl3_write_pending(s, SSL3_RT_APPLICATION_DATA, c->ern_flush_buf, 0, &written);
    } else {
        if (c->ern_token_due == 0 || SSL_in_init(s) || s->rlayer.wbuf[0].left != 0)
            return 1;
        /* An application record with no content: just the owed message and
         * the record's number. */
        r = do_ssl3_write(s, SSL3_RT_APPLICATION_DATA, c->ern_flush_buf, &zero, 1, 0, &written);
    }
    c->ern_flush_pending = r <= 0 && SSL_want_write(s);
    return r > 0;
}

unsigned int UTLS_ern_status(const SSL *s)
{
    const utls_conn *c = s != NULL ? s->utls : NULL;
    unsigned int st = 0;

    if (c == NULL)
        return 0;
    if (c->ern_offered)
        st |= UTLS_ERN_OFFERED;
    if (c->ern_accepted || (s->server && c->ern_rx))
        st |= UTLS_ERN_ACCEPTED;
    if (c->ern_tx)
        st |= UTLS_ERN_TX;
    if (c->ern_rx)
        st |= UTLS_ERN_RX;
    return st;
}

/* --- Receiving in order ------------------------------------------------------ */

/* ern_switch_token: the token that starts the peer's first numbered record. */
static const unsigned char *ern_switch_token(SSL *s, const utls_conn *c)
{
    if (!c->ern_tokens_ready)
        return NULL;
    if (s->server)
        return c->ern_offered ? c->ern_token[UTLS_ERN_ACCEPT] : NULL;
    return c->ern_accepted ? c->ern_token[UTLS_ERN_SWITCH] : NULL;
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

int utls_ern_inorder(SSL *s, utls_conn *c, SSL3_RECORD *rr, uint64_t seq)
{
    const unsigned char *pt = rr->data;
    size_t len = rr->length;
    int r;

    if (!c->ern_tokens_ready)
        return 1;
    r = utls_ern_strip(s, c, &pt, &len, seq, c->ern_rx);
    if (r < 0) {
        /* A numbered record whose number is not the sequence number counted:
         * the authenticated sender lied. */
        SSLfatal(s, SSL_AD_DECODE_ERROR, SSL_R_BAD_RECORD_TYPE);
        return 0;
    }
    if (r == 2) {
        /* The peer's switch point, in order: numbered from this record on. */
        c->ern_rx = 1;
        if (s->server)
            c->ern_token_due = UTLS_ERN_SWITCH;
    }
    if (r > 0) {
        rr->data = (unsigned char *)pt;
        rr->length = len;
        c->stats.ern_records_received++;
    }
    return 1;
}

/* --- Receiving out of order: the one-block test ------------------------------ */

int utls_tls13_read_key(SSL *s, int next, unsigned char *key, size_t *keylen,
                        unsigned char iv[12])
{
    /* RFC 8446 7.1-7.3: key and IV from the read traffic secret, or from
     * the next one (7.2: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)). */
    static const unsigned char upd[] = "traffic upd";
    const EVP_MD *md = ssl_handshake_md(s);
    const EVP_CIPHER *ciph = s->s3.tmp.new_sym_enc;
    const unsigned char *secret = s->server ? s->client_app_traffic_secret
                                            : s->server_app_traffic_secret;
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
        if (!tls13_hkdf_expand(s, md, secret, upd, sizeof(upd) - 1, NULL, hashlen, nsecret,
                               hashlen, 0))
            goto end;
        secret = nsecret;
    }
    ok = tls13_derive_key(s, md, secret, key, *keylen) && tls13_derive_iv(s, md, secret, iv, 12);
end:
    OPENSSL_cleanse(nsecret, sizeof(nsecret));
    return ok;
}

/* tls13_kind: the one-block test for a TLS 1.3 AEAD, or 0 for none. */
static int tls13_kind(const EVP_CIPHER *ciph)
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

/*
 * utls_ern_keys_setup derives the raw key and IV of the current read key (or,
 * with |next|, the one a TLS 1.3 KeyUpdate would install) into |k|, for the
 * one-block test; for TLS 1.2 AES-GCM and AES-CBC it uses the key kept at the key change
 * (utls_hook_tls12_key_set). Returns 1 on success.
 */
int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next)
{
    const EVP_CIPHER *ciph = s->s3.tmp.new_sym_enc;
    unsigned char key[EVP_MAX_KEY_LENGTH];
    size_t keylen;
    int ok = 0;
    EVP_CIPHER *blk = NULL;

    k->valid = 0;
    if (ciph == NULL)
        return 0;
    if (!SSL_IS_TLS13(s)) {
        /* TLS 1.2: the key kept at the key change. No KeyUpdate in TLS 1.2,
         * so no next key. */
        utls_conn *c = s->utls;

        if (next || c == NULL || !c->ern12_rx_valid
            || (k->kind = tls12_kind(s, s->enc_read_ctx)) == 0)
            return 0;
        memcpy(k->iv, c->ern12_rx_iv, UTLS_GCM12_SALT_LEN);
        memset(k->iv + UTLS_GCM12_SALT_LEN, 0, sizeof(k->iv) - UTLS_GCM12_SALT_LEN);
        memcpy(key, c->ern12_rx_key, c->ern12_rx_key_len);
        keylen = c->ern12_rx_key_len;
    } else if ((k->kind = tls13_kind(ciph)) == 0
               || !utls_tls13_read_key(s, next, key, &keylen, k->iv) || keylen > sizeof(k->key)) {
        goto end;
    }
    if (k->ctx == NULL && (k->ctx = EVP_CIPHER_CTX_new()) == NULL)
        goto end;
    if (k->kind == UTLS_ERN_KIND_CHACHA) {
        blk = EVP_CIPHER_fetch(s->ctx->libctx, "ChaCha20", s->ctx->propq);
        memcpy(k->key, key, keylen);
    } else {
        blk = EVP_CIPHER_fetch(s->ctx->libctx, keylen == 32 ? "AES-256-ECB" : "AES-128-ECB",
                               s->ctx->propq);
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
    OPENSSL_cleanse(key, sizeof(key));
    return ok;
}

void utls_ern_keys_clear(utls_ern_keys *k)
{
    EVP_CIPHER_CTX_free(k->ctx);
    OPENSSL_cleanse(k, sizeof(*k));
}

/*
 * utls_ern_block_matches: does the record |wire| decrypt, in its first 8
 * plaintext bytes and under the nonce for |seq|, to |seq| itself? One block
 * cipher operation; no tag is checked (the full AEAD check follows).
 */
int utls_ern_block_matches(utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                           uint64_t seq)
{
    unsigned char nonce[12], blk[16], ks[64], want[UTLS_ERN_LEN];
    /* where the plaintext starts, for keystream; 0 when |ks| is plaintext */
    size_t pt_off = SSL3_RT_HEADER_LENGTH;
    int outl, i;

    if (!k->valid || wire_len < SSL3_RT_HEADER_LENGTH + UTLS_ERN_LEN)
        return 0;
    /* RFC 8446 5.3: nonce = iv XOR (0^4 || seq) */
    memcpy(nonce, k->iv, 12);
    for (i = 0; i < 8; i++)
        nonce[4 + i] ^= (unsigned char)(seq >> (56 - 8 * i));
    switch (k->kind) {
    case UTLS_ERN_KIND_GCM12:
        /* RFC 5288 3: nonce = salt || the record's explicit nonce, whatever
         * |seq| is; only the comparison depends on the candidate. */
        if (wire_len < SSL3_RT_HEADER_LENGTH + UTLS_GCM12_EXPLICIT_LEN + UTLS_ERN_LEN)
            return 0;
        memcpy(blk, k->iv, UTLS_GCM12_SALT_LEN);
        memcpy(blk + UTLS_GCM12_SALT_LEN, wire + SSL3_RT_HEADER_LENGTH, UTLS_GCM12_EXPLICIT_LEN);
        blk[12] = blk[13] = blk[14] = 0;
        blk[15] = 2;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        pt_off += UTLS_GCM12_EXPLICIT_LEN;
        break;
    case UTLS_ERN_KIND_CBC12:
        /* RFC 5246 6.2.3.2: IV || blocks; P1 = D(C1) XOR IV, whatever |seq|
         * is; the IV is the wire's first block. The MAC check follows. */
        if (wire_len < SSL3_RT_HEADER_LENGTH + 2 * 16)
            return 0;
        if (EVP_CipherUpdate(k->ctx, ks, &outl, wire + SSL3_RT_HEADER_LENGTH + 16, 16) <= 0
            || outl != 16)
            return 0;
        /* The plaintext itself, not keystream: XOR the IV in, no ciphertext. */
        for (i = 0; i < UTLS_ERN_LEN; i++)
            ks[i] ^= wire[SSL3_RT_HEADER_LENGTH + i];
        pt_off = 0;
        break;
    case UTLS_ERN_KIND_GCM:
        /* NIST SP 800-38D: J0 = nonce || 1; the first plaintext block uses 2. */
        memcpy(blk, nonce, 12);
        blk[12] = blk[13] = blk[14] = 0;
        blk[15] = 2;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        break;
    case UTLS_ERN_KIND_CCM:
        /* RFC 3610: A_i = flags(L-1 = 2) || nonce || i, first payload block i = 1. */
        blk[0] = 2;
        memcpy(blk + 1, nonce, 12);
        blk[13] = blk[14] = 0;
        blk[15] = 1;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        break;
    case UTLS_ERN_KIND_CHACHA: {
        /* RFC 8439 2.8: the payload starts at block counter 1. */
        unsigned char iv[16] = {1, 0, 0, 0};
        static const unsigned char zero[UTLS_ERN_LEN];

        memcpy(iv + 4, nonce, 12);
        if (EVP_EncryptInit_ex(k->ctx, NULL, NULL, k->key, iv) <= 0
            || EVP_EncryptUpdate(k->ctx, ks, &outl, zero, UTLS_ERN_LEN) <= 0)
            return 0;
        break;
    }
    default:
        return 0;
    }
    utls_store_be64(want, seq);
    if (pt_off != 0) /* keystream: the plaintext is it XOR the ciphertext */
        for (i = 0; i < UTLS_ERN_LEN; i++)
            ks[i] ^= wire[pt_off + i];
    return CRYPTO_memcmp(ks, want, UTLS_ERN_LEN) == 0;
}

/* --- Sending out of sequence order (docs/ern.md) ---------------------------- */

/*
 * Window rules (docs/ern.md, "Sending out of sequence order"). The receiver
 * accepts a number n if UTLS_ERN_REORDER_WINDOW > n - top > -UTLS_ERN_REORDER_WINDOW
 * (top: the highest number it has seen) and n was not seen. The sender keeps
 * every record it writes inside that: a number m is sealed only if
 *   m < lowest sealed unwritten + UTLS_ERN_REORDER_WINDOW   (not too far behind
 *                                              what may be written after it), and
 *   m < highest written + 1 + UTLS_ERN_REORDER_WINDOW        (not too far ahead).
 * The highest written only grows, so both still hold when the record is
 * written later.
 */

/* ern_seal_low: the lowest sealed unwritten number, or |dflt| if none. */
static uint64_t ern_seal_low(const utls_conn *c, uint64_t dflt)
{
    uint64_t low = dflt;
    size_t i;

    for (i = 0; i < UTLS_ERN_REORDER_WINDOW; i++)
        if (c->ern_slot[i].state == UTLS_ERN_SLOT_SEALED && c->ern_slot[i].number < low)
            low = c->ern_slot[i].number;
    return low;
}

static void ern_slots_clear(utls_conn *c)
{
    OPENSSL_cleanse(c->ern_slot, sizeof(c->ern_slot));
    c->ern_num_sealed = 0;
    c->ern_wpending = 0;
}

/*
 * ern_tx_usable: this direction's numbers are on. Not refused in a
 * handshake after the first: sealing sends what is owed first
 * (ern_send_owed), and writing or dropping sealed records must stay possible
 * while a handshake message waits for them (utls_hook_write_record_allowed);
 * the write key cannot change before that message is out.
 */
static utls_conn *ern_tx_usable(SSL *s)
{
    utls_conn *c = s != NULL ? s->utls : NULL;

    if (c == NULL || !c->ern_tx || c->ern_token_due != 0
        || (s->wbio != NULL && BIO_get_ktls_send(s->wbio))) {
        utls_raise(UTLS_R_ERN_NOT_ON, "UTLS_ERN_TX is off (status 0x%x)",
                   s != NULL ? UTLS_ern_status(s) : 0);
        return NULL;
    }
    return c;
}

/*
 * ern_send_owed: before a new number is taken, send what the library owes
 * the peer, as SSL_write() would: a KeyUpdate the peer asked for (RFC 8446
 * 4.6.3: "prior to sending its next Application Data record"), a ticket
 * (SSL_new_session_ticket), a CertificateRequest. With sealed records
 * unwritten it cannot (it would take a number above them, or change the key
 * under them): UTLS_R_ERN_HANDSHAKE_DUE until they are written or dropped.
 * Returns 1 when nothing is owed any more, 0 otherwise (SSL_get_error()
 * tells a retry from an error).
 */
static int ern_send_owed(SSL *s, utls_conn *c)
{
    int r;

    if (s->key_update == SSL_KEY_UPDATE_NONE && s->ext.extra_tickets_expected == 0
        && !SSL_in_init(s))
        return 1;
    if (c->ern_num_sealed > 0) {
        utls_raise(UTLS_R_ERN_HANDSHAKE_DUE, "%zu sealed records unwritten",
                   c->ern_num_sealed);
        return 0;
    }
    /* The same steps as ssl3_write_bytes() before an application record. */
    if (!SSL_in_init(s)) {
        if (RECORD_LAYER_write_pending(&s->rlayer) || c->ern_wpending) {
            /* Enter the state machine only with nothing half written (as
             * ssl3_write_bytes): finish the pending write first. */
            utls_raise(UTLS_R_ERN_WRITE_PENDING, "complete the pending write first");
            return 0;
        }
        ossl_statem_set_in_init(s, 1);
    }
    /* Also resumes a message the state machine wrote only partly. */
    r = s->handshake_func(s);
    if (r <= 0)
        return 0; /* SSLfatal() called, or a retry (SSL_ERROR_WANT_*) */
    if (SSL_in_init(s) || s->key_update != SSL_KEY_UPDATE_NONE) {
        utls_raise(UTLS_R_ERN_HANDSHAKE_DUE, "a handshake is in progress");
        return 0;
    }
    return 1;
}

int UTLS_ern_seal(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                  size_t *out_len, uint64_t *out_number)
{
    utls_conn *c;
    SSL3_BUFFER *wb;
    uint64_t m;
    size_t written = 0, pipelen = len, slot, need;
    int r;

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    if ((s->shutdown & SSL_SENT_SHUTDOWN) != 0) {
        /* As SSL_write(): nothing after our close_notify. */
        ERR_raise(ERR_LIB_SSL, SSL_R_PROTOCOL_IS_SHUTDOWN);
        return 0;
    }
    /*
     * TLS 1.3 record padding (a callback or block padding, applied by
     * do_ssl3_write) pads up to the maximum fragment whatever the content:
     * then only UTLS_ERN_SEAL_MAX_RECORD bounds the record. Checked before a
     * number is taken, so a small buffer loses nothing.
     */
    need = SSL_IS_TLS13(s) && (s->record_padding_cb != NULL || s->block_padding > 0)
               ? UTLS_ERN_SEAL_MAX_RECORD
               : len + UTLS_ERN_SEAL_OVERHEAD;
    if (buf == NULL || out == NULL || out_len == NULL || out_number == NULL || len == 0
        || len > UTLS_ERN_SEAL_MAX_CONTENT || len + UTLS_ERN_LEN > ssl_get_max_send_fragment(s)
        || out_cap < need) {
        utls_raise(UTLS_R_ERN_BAD_ARGUMENT, "content %zu bytes, buffer %zu (needs %zu)", len,
                   out_cap, need);
        return 0;
    }
    if (!ern_send_owed(s, c))
        return 0;
    if (RECORD_LAYER_write_pending(&s->rlayer) || c->ern_wpending) {
        utls_raise(UTLS_R_ERN_WRITE_PENDING, "complete the pending write first");
        return 0;
    }
    m = utls_load_be64(RECORD_LAYER_get_write_sequence(&s->rlayer));
    if (c->ern_num_sealed == 0 && m < c->ern_tx_top_next)
        c->ern_tx_top_next = m; /* a new key: its numbers restart at 0 */
    if (c->ern_num_sealed > 0 && m != c->ern_seal_next) {
        /* Something else was written after the last seal (a KeyUpdate,
         * renegotiation, an alert): the sealed records cannot be written. */
        ern_slots_clear(c);
        utls_raise(UTLS_R_ERN_STALE, "write sequence %llu, sealed up to %llu",
                   (unsigned long long)m, (unsigned long long)c->ern_seal_next);
        return 0;
    }
    if (m - ern_seal_low(c, m) >= UTLS_ERN_REORDER_WINDOW
        || m >= c->ern_tx_top_next + UTLS_ERN_REORDER_WINDOW || m == UINT64_MAX) {
        utls_raise(UTLS_R_ERN_WINDOW, "number %llu: write or drop older sealed records first",
                   (unsigned long long)m);
        return 0;
    }
    slot = (size_t)(m % UTLS_ERN_REORDER_WINDOW);
    if (c->ern_slot[slot].state != UTLS_ERN_SLOT_FREE) { /* excluded by the window */
        utls_raise(UTLS_R_ERN_WINDOW, "slot of %llu in use", (unsigned long long)m);
        return 0;
    }
    /*
     * do_ssl3_write() with |create_empty_fragment| builds one record in the
     * write buffer and returns without writing it (OpenSSL uses this for
     * its CBC empty fragments). The record number goes in front of the
     * content through utls_hook_write_prefix, as for any record.
     */
    c->ern_sealing = 1;
    r = do_ssl3_write(s, SSL3_RT_APPLICATION_DATA, buf, &pipelen, 1, 1, &written);
    c->ern_sealing = 0;
    if (r <= 0)
        return 0; /* SSLfatal() already called */
    wb = &s->rlayer.wbuf[0];
    if (written < SSL3_RT_HEADER_LENGTH + UTLS_ERN_SEAL_TAIL || written > out_cap
        || utls_load_be64(RECORD_LAYER_get_write_sequence(&s->rlayer)) != m + 1) {
        SSLfatal(s, SSL_AD_INTERNAL_ERROR, ERR_R_INTERNAL_ERROR);
        return 0;
    }
    memcpy(out, SSL3_BUFFER_get_buf(wb) + SSL3_BUFFER_get_offset(wb), written);
    SSL3_BUFFER_set_offset(wb, 0);
    SSL3_BUFFER_set_left(wb, 0);
    c->ern_slot[slot].state = UTLS_ERN_SLOT_SEALED;
    c->ern_slot[slot].number = m;
    c->ern_slot[slot].len = written;
    memcpy(c->ern_slot[slot].tail, out + written - UTLS_ERN_SEAL_TAIL, UTLS_ERN_SEAL_TAIL);
    c->ern_num_sealed++;
    c->ern_seal_next = m + 1;
    *out_len = written;
    *out_number = m;
    return 1;
}

/* ern_find_sealed: the slot holding sealed record |rec|, or -1. */
static int ern_find_sealed(const utls_conn *c, const unsigned char *rec, size_t len)
{
    size_t i;

    if (rec == NULL || len < SSL3_RT_HEADER_LENGTH + UTLS_ERN_SEAL_TAIL)
        return -1;
    for (i = 0; i < UTLS_ERN_REORDER_WINDOW; i++)
        if (c->ern_slot[i].state == UTLS_ERN_SLOT_SEALED && c->ern_slot[i].len == len
            && memcmp(c->ern_slot[i].tail, rec + len - UTLS_ERN_SEAL_TAIL, UTLS_ERN_SEAL_TAIL)
                   == 0)
            return (int)i;
    return -1;
}

int UTLS_ern_write_sealed(SSL *s, const unsigned char *rec, size_t len)
{
    utls_conn *c;
    SSL3_BUFFER *wb;
    size_t written;
    int slot, r;

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    /* Ciphertext compared with ciphertext: public bytes, memcmp is fine. */
    slot = ern_find_sealed(c, rec, len);
    if (c->ern_wpending) {
        /* A partial write: only the same record may go on. */
        if (slot < 0 || c->ern_slot[slot].number != c->ern_wpending_number) {
            utls_raise(UTLS_R_ERN_WRITE_PENDING, "record %llu is partly written",
                       (unsigned long long)c->ern_wpending_number);
            return 0;
        }
        goto write;
    }
    if (slot < 0) {
        utls_raise(UTLS_R_ERN_NOT_SEALED, "%zu bytes", len);
        return 0;
    }
    if (RECORD_LAYER_write_pending(&s->rlayer)) {
        utls_raise(UTLS_R_ERN_WRITE_PENDING, "an SSL_write() is pending: complete it first");
        return 0;
    }
    if (utls_load_be64(RECORD_LAYER_get_write_sequence(&s->rlayer)) != c->ern_seal_next) {
        /* The key changed or another record took a number: this record's
         * nonce and number belong to a state the peer has left. */
        ern_slots_clear(c);
        utls_raise(UTLS_R_ERN_STALE, "sealed records are void");
        return 0;
    }
    if (s->rlayer.numwpipes == 0 && !ssl3_setup_write_buffer(s, 1, 0))
        return 0;
    wb = &s->rlayer.wbuf[0];
    if (len > SSL3_BUFFER_get_len(wb)) {
        utls_raise(UTLS_R_ERN_BAD_ARGUMENT, "%zu bytes do not fit the write buffer", len);
        return 0;
    }
    memcpy(SSL3_BUFFER_get_buf(wb), rec, len);
    SSL3_BUFFER_set_offset(wb, 0);
    SSL3_BUFFER_set_left(wb, len);
    s->rlayer.wpend_tot = len;
    s->rlayer.wpend_buf = c->ern_flush_buf; /* ours: SSL_write() cannot resume it */
    s->rlayer.wpend_type = SSL3_RT_APPLICATION_DATA;
    s->rlayer.wpend_ret = len;
    c->ern_wpending = 1;
    c->ern_wpending_number = c->ern_slot[slot].number;
    if (c->ern_slot[slot].number >= c->ern_tx_top_next)
        c->ern_tx_top_next = c->ern_slot[slot].number + 1;
write:
    r = ssl3_write_pending(s, SSL3_RT_APPLICATION_DATA, c->ern_flush_buf, len, &written);
    if (r <= 0)
        return r; /* SSL_get_error(): retry with the same record */
    c->ern_wpending = 0;
    OPENSSL_cleanse(&c->ern_slot[slot], sizeof(c->ern_slot[slot]));
    c->ern_num_sealed--;
    return 1;
}

int UTLS_ern_drop(SSL *s, uint64_t number)
{
    utls_conn *c;
    size_t slot = (size_t)(number % UTLS_ERN_REORDER_WINDOW);

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    if (c->ern_slot[slot].state != UTLS_ERN_SLOT_SEALED || c->ern_slot[slot].number != number
        || (c->ern_wpending && c->ern_wpending_number == number)) {
        utls_raise(UTLS_R_ERN_NOT_SEALED, "number %llu", (unsigned long long)number);
        return 0;
    }
    /*
     * The most recently sealed record is always written: then, once no sealed
     * record is left, the next record of any kind (application data, and
     * also a KeyUpdate, ticket or alert, which carry no number) has the
     * number after the peer's highest, the one it counts; and the next
     * number never runs ahead of the window.
     */
    if (number + 1 == c->ern_seal_next) {
        utls_raise(UTLS_R_ERN_DROP_LAST, "number %llu", (unsigned long long)number);
        return 0;
    }
    OPENSSL_cleanse(&c->ern_slot[slot], sizeof(c->ern_slot[slot]));
    c->ern_num_sealed--;
    return 1;
}

size_t UTLS_ern_num_sealed(const SSL *s)
{
    const utls_conn *c = s != NULL ? s->utls : NULL;

    return c != NULL ? c->ern_num_sealed : 0;
}

int utls_hook_no_sealed_records(SSL *s)
{
    utls_conn *c = s->utls;

    if (c == NULL || c->ern_num_sealed == 0)
        return 1;
    utls_raise(UTLS_R_ERN_SEALED_PENDING, "%zu sealed records unwritten", c->ern_num_sealed);
    return 0;
}

int utls_hook_write_record_allowed(SSL *s, int type)
{
    utls_conn *c = s->utls;

    /* The sealed record being built, or nothing sealed: any record goes. */
    if (c == NULL || c->ern_num_sealed == 0
        || (c->ern_sealing && type == SSL3_RT_APPLICATION_DATA))
        return 1;
    /*
     * Any other record (a handshake message the library answers with, an
     * alert) would take a number above the sealed ones; the peer, still
     * counting below them, would fail it with bad_record_mac. It waits: the
     * call that wanted it fails, and the next call after the sealed records
     * are written or dropped sends it (the state machine resumes where it
     * stopped, as after a partial write).
     */
    utls_raise(UTLS_R_ERN_SEALED_PENDING, "record type %d waits for %zu sealed records", type,
               c->ern_num_sealed);
    return 0;
}

/* --- Receiving numbers out of sequence order --------------------------------- */

static int ern_hint_find(const utls_conn *c, uint64_t offset, uint64_t *out_n);

static void set_read_seq(SSL *s, uint64_t v)
{
    utls_store_be64(RECORD_LAYER_get_read_sequence(&s->rlayer), v);
}

int utls_hook_ern_pre_decrypt(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    const unsigned char *wire = RECORD_LAYER_get_packet(&s->rlayer);
    size_t wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    uint64_t ctr, n, w = UTLS_ERN_REORDER_WINDOW;
    utls_ern_keys *k;
    int i;

    if (c == NULL || !c->ern_rx || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->rec_version == SSL2_VERSION)
        return 1;
    ctr = utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer));
    if (!c->ern_rxw_valid || ctr != c->ern_rx_next) {
        /* The first numbered record, or a new key: numbers restart here. */
        c->ern_rxw_valid = 1;
        c->ern_rx_next = ctr;
        /* Every number below was taken by a record already processed. */
        c->ern_rx_seen = ~(uint64_t)0;
    }
    c->ern_rx_checked = 1;
    k = &c->ern_cur;
    if (!k->valid && !utls_ern_keys_setup(s, k, 0))
        return 1; /* no test possible: in sequence order, as before */
    /* The trivial window: the sender did not reorder. One block. */
    c->stats.ern_block_checks++;
    if (utls_ern_block_matches(k, wire, wire_len, ctr))
        return 1;
    /* The number the out-of-order side found for this record, if it is one
     * the loop below would accept: one block instead of a search. */
    if ((s->mode & SSL_MODE_UNORDERED) != 0 && ern_hint_find(c, c->cur_offset, &n) && n != ctr
        && (n > ctr ? n - ctr < w
                    : ctr - 1 - n < w && ((c->ern_rx_seen >> (ctr - 1 - n)) & 1) == 0)) {
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, n))
            goto found;
    }
    /*
     * Nearest first: ahead of the highest number seen (top = ctr - 1), and
     * the unseen numbers behind it, by distance. A sender that reorders
     * within a short span pays a few block tests, not a window's worth.
     */
    for (i = 0; i < (int)w; i++) {
        n = ctr + (uint64_t)i;
        if (i > 0 && n > ctr) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
        if ((uint64_t)i < ctr && ((c->ern_rx_seen >> i) & 1) == 0) {
            n = ctr - 1 - (uint64_t)i;
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
    }
    /* A number seen before: the same record again. Tested only now, so
     * that an honest sender never pays for it. */
    for (i = 0; i < (int)w && (uint64_t)i < ctr; i++) {
        if (((c->ern_rx_seen >> i) & 1) == 0)
            continue;
        n = ctr - 1 - (uint64_t)i;
        if (utls_ern_block_matches(k, wire, wire_len, n)) {
            utls_raise(UTLS_R_ERN_REPLAY, "record number %llu", (unsigned long long)n);
            SSLfatal_alert(s, SSL_AD_DECODE_ERROR);
            return 0;
        }
    }
    /*
     * No number in the window. Records without a number (TLS 1.3 handshake
     * messages, alerts) and damaged ones are decrypted with the counted
     * sequence and pass or fail the AEAD/MAC check as before. Only to name
     * the error, look one window further each way: a sender that keeps the
     * rules never writes there.
     */
    for (n = ctr + w; n < ctr + 2 * w && n > ctr; n++)
        if (utls_ern_block_matches(k, wire, wire_len, n))
            goto outside;
    for (i = 0; i < (int)w && ctr > w + (uint64_t)i; i++) {
        n = ctr - w - 1 - (uint64_t)i;
        if (utls_ern_block_matches(k, wire, wire_len, n))
            goto outside;
    }
    return 1;
found:
    set_read_seq(s, n);
    return 1;
outside:
    utls_raise(UTLS_R_ERN_OUT_OF_WINDOW, "record number %llu, highest seen + 1 = %llu",
               (unsigned long long)n, (unsigned long long)ctr);
    SSLfatal_alert(s, SSL_AD_DECODE_ERROR);
    return 0;
}

void utls_ern_rx_done(SSL *s, utls_conn *c, uint64_t seq)
{
    uint64_t shift;

    if (!c->ern_rx || !c->ern_rxw_valid)
        return;
    if (!c->ern_rx_checked) {
        /* Not looked at before decryption (a handshake record, or one under
         * a new key): decrypted under the counted sequence. In sequence, it
         * extends the window; otherwise numbering restarts with the next
         * record (utls_hook_ern_pre_decrypt). */
        if (seq != c->ern_rx_next) {
            c->ern_rxw_valid = 0;
            return;
        }
    }
    c->ern_rx_checked = 0;
    if (seq >= c->ern_rx_next) {
        shift = seq - c->ern_rx_next + 1;
        c->ern_rx_seen = shift >= 64 ? 0 : c->ern_rx_seen << shift;
        c->ern_rx_seen |= 1;
        c->ern_rx_next = seq + 1;
    } else if (c->ern_rx_next - 1 - seq < UTLS_ERN_REORDER_WINDOW) {
        c->ern_rx_seen |= (uint64_t)1 << (c->ern_rx_next - 1 - seq);
    }
    /* Between records the read sequence is the highest number seen + 1:
     * a sender that does not reorder is then checked in sequence. */
    set_read_seq(s, c->ern_rx_next);
}

/* --- Out of order: the record's own number ----------------------------------- */

/* ern_inorder_seen: the in-order side authenticated |n| under the current key
 * (n is in the window below ern_rx_next and marked), or |n| lies below that
 * window (processed, or a gap that can no longer be filled). Only meaningful
 * while the read sequence is ern_rx_next (between records, same key). */
static int ern_inorder_seen(const utls_conn *c, uint64_t n)
{
    uint64_t d;

    if (n >= c->ern_rx_next)
        return 0;
    d = c->ern_rx_next - 1 - n;
    return d >= UTLS_ERN_REORDER_WINDOW || ((c->ern_rx_seen >> d) & 1) != 0;
}

/* ern_hint_find: the number found before for the record at |offset| under
 * the current key generation. Returns 1 and sets |*out_n| if there is one. */
static int ern_hint_find(const utls_conn *c, uint64_t offset, uint64_t *out_n)
{
    size_t i;

    for (i = 0; i < c->ern_num_hints; i++)
        if (c->ern_hint[i].offset == offset && c->ern_hint[i].gen == c->gen) {
            *out_n = c->ern_hint[i].number;
            return 1;
        }
    return 0;
}

/* ern_hint_add remembers |n| for the record at |offset| (replacing what was
 * remembered there, else the oldest entry). */
static void ern_hint_add(utls_conn *c, uint64_t offset, uint64_t n)
{
    size_t i;

    for (i = 0; i < c->ern_num_hints; i++)
        if (c->ern_hint[i].offset == offset)
            break;
    if (i == c->ern_num_hints) {
        i = c->ern_hint_next;
        c->ern_hint_next = (c->ern_hint_next + 1) % UTLS_ERN_HINTS;
        if (c->ern_num_hints < UTLS_ERN_HINTS)
            c->ern_num_hints++;
    }
    c->ern_hint[i].offset = offset;
    c->ern_hint[i].number = n;
    c->ern_hint[i].gen = c->gen;
}

int utls_ern_ooo_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                      uint64_t offset, uint64_t guess, uint64_t floor, int current,
                      uint64_t *out_seq)
{
    /* Below the in-order window: processed in order, or a gap that can no
     * longer be filled (docs/ern.md, "Receiving"). The next key starts at 0. */
    uint64_t lo = current && floor > UTLS_ERN_REORDER_WINDOW ? floor - UTLS_ERN_REORDER_WINDOW : 0;
    /* The bitmap speaks for the current key only while the read sequence is
     * its ern_rx_next (after a KeyUpdate it is stale until the next numbered
     * record resets it). */
    int use_seen = current && c->ern_rxw_valid && c->ern_rx_next == floor;
    /* Numbers found at other offsets, relative to |base|. */
    uint64_t taken[(UTLS_ERN_OOO_MAX_CHECKS + 63) / 64] = {0};
    uint64_t center = guess == UTLS_ERN_NO_GUESS ? 0 : guess, base, d, n;
    uint64_t tested = UTLS_ERN_NO_GUESS; /* the guess, once tested */
    size_t i;

    if (current) {
        /*
         * Around the highest number known before this record in the stream
         * + 1, as the in-order check searches around top + 1: the sender
         * writes within a window of the highest number it had written. The
         * predictor's guess (exact for TLS 1.2 AES-GCM, whose explicit nonce
         * pins the number) is tested first.
         */
        center = floor;
        for (i = 0; i < c->ern_num_hints; i++)
            if (c->ern_hint[i].gen == c->gen && c->ern_hint[i].offset < offset
                && c->ern_hint[i].number >= center)
                center = c->ern_hint[i].number + 1;
        if (ern_hint_find(c, offset, &n)) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
    }
    base = center > UTLS_ERN_OOO_SPAN ? center - UTLS_ERN_OOO_SPAN : 0;
    for (i = 0; current && i < c->ern_num_hints; i++) {
        n = c->ern_hint[i].number;
        if (c->ern_hint[i].gen == c->gen && c->ern_hint[i].offset != offset && n >= base
            && n - base < UTLS_ERN_OOO_MAX_CHECKS)
            taken[(n - base) / 64] |= (uint64_t)1 << ((n - base) % 64);
    }
    if (current && guess != UTLS_ERN_NO_GUESS && guess != center && guess >= lo
        && !(use_seen && ern_inorder_seen(c, guess))) {
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, guess)) {
            n = guess;
            goto found;
        }
        tested = guess;
    }
    for (d = 0; d <= UTLS_ERN_OOO_SPAN; d++) {
        /* Nearest first: center + d, then center - d. */
        n = center + d;
        if (n >= center && n != tested
            && ((taken[(n - base) / 64] >> ((n - base) % 64)) & 1) == 0) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
        if (d == 0 || d > center || (n = center - d) < lo || n == tested
            || (use_seen && ern_inorder_seen(c, n))
            || ((taken[(n - base) / 64] >> ((n - base) % 64)) & 1) != 0)
            continue;
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, n))
            goto found;
    }
    return 0;
found:
    if (current)
        ern_hint_add(c, offset, n);
    *out_seq = n;
    return 1;
}
