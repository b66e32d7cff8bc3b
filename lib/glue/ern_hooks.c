/*
 * Explicit record numbers, negotiated under encryption (uTLS ERN v1).
 * The protocol is docs/ern.md; this file is its glue for TLS 1.3 and for
 * TLS 1.2 with AES-GCM and AES-CBC: the negotiation, the write hooks and the
 * in-order read hooks. The pure parts are in lib/ern/.
 *
 * This code handles secrets: the exporter value and tokens derived from it,
 * and raw traffic keys for the one-block candidate test. All are wiped when
 * no longer needed.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "glue_local.h"
/* The big-endian helpers (core/, one copy for the fork and the provider). */
#include "utls/be64.h"

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

    if (c->ern.tokens_ready)
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
    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) == 0 || !s->server
        || (c = utls_conn_get(s)) == NULL || !ern_tokens(s, c))
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
    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) == 0 || s->server || inlen != UTLS_ERN_TOKEN_LEN
        || (c = utls_conn_get(s)) == NULL || !ern_tokens(s, c)
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
        memcpy(c->ern.tls12_rx_key, key, key_len);
        c->ern.tls12_rx_key_len = key_len;
        memcpy(c->ern.tls12_rx_iv, iv, iv_len);
        c->ern.tls12_rx_valid = 1;
        utls_ern_keys_clear(&c->ern.cur); /* rebuilt from this key when needed */
        return 1;
    }
    /* The server's offer, once per connection, in its first record under
     * the new write key: its Finished. */
    if (!s->server || c->ern.offered || !ern_tokens(s, c))
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
    utls_conn *c = s->utls;

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
        s->ctx->libctx, c->ern.tls12_rx_key_len == 32 ? "AES-256-ECB" : "AES-128-ECB",
        s->ctx->propq);
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

void utls_ern_tls12_record_done(SSL *s, const SSL3_RECORD *rr)
{
    utls_conn *c;
    unsigned char iv_pt[16];
    int kind, seen;

    if (s->server || rr->type != SSL3_RT_HANDSHAKE
        || (kind = tls12_kind(s, s->enc_read_ctx)) == 0 || (c = utls_conn_get(s)) == NULL
        || c->ern.tls12_checked)
        return;
    /* Only the first record under the read key (sequence number 0, counted
     * by decryption already): the server's Finished. */
    if (utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer)) != 1)
        return;
    c->ern.tls12_checked = 1;
    if (!ern_tokens(s, c))
        return;
    if (kind == UTLS_ERN_KIND_GCM12) {
        /* The provider decrypted in place after the explicit nonce, which
         * it leaves as received, just before the plaintext. */
        seen = CRYPTO_memcmp(rr->data - UTLS_GCM12_EXPLICIT_LEN, c->ern.offer12,
                             UTLS_GCM12_EXPLICIT_LEN) == 0;
    } else {
        /*
         * CBC: the block just before the plaintext is the explicit IV block,
         * decrypted in place by the generic provider (the value the sender
         * chose), or left as ciphertext by the stitched AES-CBC-HMAC ones
         * (decrypted here). Either form matching is the offer; a random IV
         * matches one of them with probability 2^-127.
         */
        seen = CRYPTO_memcmp(rr->data - 16, c->ern.offer12, 16) == 0
               || (cbc_first_iv_block(s, c, rr->data - 16, iv_pt)
                   && CRYPTO_memcmp(iv_pt, c->ern.offer12, 16) == 0);
        OPENSSL_cleanse(iv_pt, sizeof(iv_pt));
    }
    if (!seen)
        return; /* a legacy server: its nonce or IV was random */
    c->ern.offered = 1; /* the client saw a valid offer (UTLS_ERN_OFFERED) */
    if (!c->ern.accepted && c->ern.token_due == 0)
        c->ern.token_due = UTLS_ERN_ACCEPT;
}

/* --- Sending ----------------------------------------------------------------- */

int utls_hook_write_bytes(SSL *s)
{
    utls_conn *c = s->utls;

    /* Nothing to send on its own: an owed accept or switch travels in front
     * of the next application record (utls_hook_write_prefix), so that the
     * record count on the wire is what stock OpenSSL would send. */
    if (c != NULL && (c->ern.num_sealed > 0 || c->ern.wpending)) {
        /* Its record would take a number above the sealed ones and the
         * write buffer may hold a partly written sealed record. */
        utls_raise(UTLS_R_ERN_SEALED_PENDING, "%zu sealed records unwritten",
                   c->ern.num_sealed);
        return -1;
    }
    return 1;
}

size_t utls_hook_write_overhead(SSL *s)
{
    utls_conn *c = s->utls;

    if (c == NULL)
        return 0;
    if (c->ern.token_due != 0)
        return UTLS_ERN_TOKEN_LEN + UTLS_ERN_LEN;
    return c->ern.tx ? UTLS_ERN_LEN : 0;
}

int utls_hook_write_prefix(SSL *s, WPACKET *pkt, int type, size_t pipe, size_t *out_len)
{
    utls_conn *c = s->utls;
    unsigned char *seq = RECORD_LAYER_get_write_sequence(&s->rlayer);
    unsigned char ern[UTLS_ERN_LEN];

    *out_len = 0;
    if (c == NULL || type != SSL3_RT_APPLICATION_DATA || SSL_in_init(s))
        return 1;
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
    /* The number the record is encrypted under: this record's sequence. */
    utls_store_be64(ern, utls_load_be64(seq) + pipe);
    if (!WPACKET_memcpy(pkt, ern, sizeof(ern)))
        return 0;
    if (!c->ern.sealing) /* written now, in sequence (UTLS_ern_seal: later) */
        c->ern.tx_top_next = utls_load_be64(seq) + pipe + 1;
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
    if (c->ern.flush_pending) {
        /* A flush that could not be written at once: same buffer, same length. */
        r = ssl3_write_pending(s, SSL3_RT_APPLICATION_DATA, c->ern.flush_buf, 0, &written);
    } else {
        if (c->ern.token_due == 0 || SSL_in_init(s) || s->rlayer.wbuf[0].left != 0)
            return 1;
        /* An application record with no content: just the owed message and
         * the record's number. */
        r = do_ssl3_write(s, SSL3_RT_APPLICATION_DATA, c->ern.flush_buf, &zero, 1, 0, &written);
    }
    c->ern.flush_pending = r <= 0 && SSL_want_write(s);
    return r > 0;
}

unsigned int UTLS_ern_status(const SSL *s)
{
    const utls_conn *c = s != NULL ? s->utls : NULL;
    unsigned int st = 0;

    if (c == NULL)
        return 0;
    if (c->ern.offered)
        st |= UTLS_ERN_OFFERED;
    if (c->ern.accepted || (s->server && c->ern.rx))
        st |= UTLS_ERN_ACCEPTED;
    if (c->ern.tx)
        st |= UTLS_ERN_TX;
    if (c->ern.rx)
        st |= UTLS_ERN_RX;
    return st;
}

/* --- Receiving in order ------------------------------------------------------ */

/* ern_switch_token: the token that starts the peer's first numbered record. */
static const unsigned char *ern_switch_token(SSL *s, const utls_conn *c)
{
    if (!c->ern.tokens_ready)
        return NULL;
    if (s->server)
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

int utls_ern_inorder(SSL *s, utls_conn *c, SSL3_RECORD *rr, uint64_t seq)
{
    const unsigned char *pt = rr->data;
    size_t len = rr->length;
    int r;

    if (!c->ern.tokens_ready)
        return 1;
    r = utls_ern_strip(s, c, &pt, &len, seq, c->ern.rx);
    if (r < 0) {
        /* A numbered record whose number is not the sequence number counted:
         * the authenticated sender lied. */
        SSLfatal(s, SSL_AD_DECODE_ERROR, SSL_R_BAD_RECORD_TYPE);
        return 0;
    }
    if (r == 2) {
        /* The peer's switch point, in order: numbered from this record on. */
        c->ern.rx = 1;
        if (s->server)
            c->ern.token_due = UTLS_ERN_SWITCH;
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

        if (next || c == NULL || !c->ern.tls12_rx_valid
            || (k->kind = tls12_kind(s, s->enc_read_ctx)) == 0)
            return 0;
        memcpy(k->iv, c->ern.tls12_rx_iv, UTLS_GCM12_SALT_LEN);
        memset(k->iv + UTLS_GCM12_SALT_LEN, 0, sizeof(k->iv) - UTLS_GCM12_SALT_LEN);
        memcpy(key, c->ern.tls12_rx_key, c->ern.tls12_rx_key_len);
        keylen = c->ern.tls12_rx_key_len;
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

    if (c == NULL || !c->ern.rx || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->rec_version == SSL2_VERSION)
        return 1;
    ctr = utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer));
    if (!c->ern.rxw_valid || ctr != c->ern.rx_next) {
        /* The first numbered record, or a new key: numbers restart here. */
        c->ern.rxw_valid = 1;
        c->ern.rx_next = ctr;
        /* Every number below was taken by a record already processed. */
        c->ern.rx_seen = ~(uint64_t)0;
    }
    c->ern.rx_checked = 1;
    k = &c->ern.cur;
    if (!k->valid && !utls_ern_keys_setup(s, k, 0))
        return 1; /* no test possible: in sequence order, as before */
    /* The trivial window: the sender did not reorder. One block. */
    c->stats.ern_block_checks++;
    if (utls_ern_block_matches(k, wire, wire_len, ctr))
        return 1;
    /* The number the out-of-order side found for this record, if it is one
     * the loop below would accept: one block instead of a search. */
    if ((s->mode & SSL_MODE_UNORDERED) != 0 && utls_ern_hint_find(c, c->inorder.cur_offset, &n)
        && n != ctr
        && (n > ctr ? n - ctr < w
                    : ctr - 1 - n < w && ((c->ern.rx_seen >> (ctr - 1 - n)) & 1) == 0)) {
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
        if ((uint64_t)i < ctr && ((c->ern.rx_seen >> i) & 1) == 0) {
            n = ctr - 1 - (uint64_t)i;
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
    }
    /* A number seen before: the same record again. Tested only now, so
     * that an honest sender never pays for it. */
    for (i = 0; i < (int)w && (uint64_t)i < ctr; i++) {
        if (((c->ern.rx_seen >> i) & 1) == 0)
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

/* Between records the read sequence is the highest number seen + 1: a
 * sender that does not reorder is then checked in sequence. */
void utls_ern_rx_done(SSL *s, utls_conn *c, uint64_t seq)
{
    if (utls_ern_window_note(c, seq))
        set_read_seq(s, c->ern.rx_next);
}
