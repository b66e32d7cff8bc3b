/*
 * Setting up a key generation for the receive path: what the current read
 * key allows (cipher, KTLS, DTLS), the stores, the private copy of the read
 * cipher context, the provider's candidate search; and what the runtime
 * asks of the record layer (the in-order read sequence, the record being
 * read). Reads OpenSSL's internals: glue.
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/provider.h>

#include "glue_local.h"

/* One copy of the big-endian helpers for the fork and the provider (core/:
 * written out, one byte-swapping load; a loop stayed a loop). */
#include "utls/be64.h"
#define be64 utls_load_be64

/* The sequence number the in-order path will use for its next record. */
uint64_t utls_inorder_seq(SSL *s)
{
    return be64(RECORD_LAYER_get_read_sequence(&s->rlayer));
}

/* --- Setting up a key generation ----------------------------------------- */

/*
 * utls_auto_tap puts a tap in front of a plain socket BIO (SSL_set_fd), when
 * the connection's ISN is known (a listener tap or UTLS_tap_connect saw its
 * handshake). The TLS stream is assumed to start at the first byte of the TCP
 * stream. Returns 1 if the read BIO is now a tap.
 */
static int utls_auto_tap(SSL *s, utls_conn *c)
{
    BIO *tap;

    if (s->rbio == NULL || BIO_method_type(s->rbio) != BIO_TYPE_SOCKET)
        return 0;
    ERR_set_mark();
    tap = utls_tap_wrap(s->rbio, c->inorder.next_offset
                                     + SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer))
                                     + RECORD_LAYER_get_packet_length(&s->rlayer));
    if (tap == NULL) {
        ERR_pop_to_mark(); /* in order, as before */
        return 0;
    }
    ERR_clear_last_mark();
    /* The tap may come in the middle of a read whose socket BIO just said
     * "retry" (a non-blocking socket with nothing to read): the tap says it
     * too, or SSL_get_error() would see no retry flag on the new read BIO and
     * report SSL_ERROR_SYSCALL instead of SSL_ERROR_WANT_READ. */
    BIO_copy_next_retry(tap);
    s->rbio = tap; /* the socket BIO is its next; SSL_free frees the chain */
    return 1;
}

/*
 * utls_search_setup makes a candidate-search context for the current read
 * key when it is TLS 1.3 AES-GCM and the uTLS provider can be fetched from
 * the SSL_CTX's library context (OSSL_PROVIDER_load or openssl.cnf). Without
 * it, candidates are tried one trial decryption at a time; either way the
 * chosen candidate is confirmed by OpenSSL's own record check, so the results
 * are the same.
 */
static void utls_search_setup(SSL *s, utls_conn *c)
{
    const EVP_CIPHER *ciph = s->s3.tmp.new_sym_enc;
    unsigned char key[EVP_MAX_KEY_LENGTH], iv[12];
    size_t keylen;
    int kind;

    utls_aead_search_free(c->probe.search);
    c->probe.search = NULL;
    if (!c->rx.tls13 || ciph == NULL || EVP_CIPHER_get_mode(ciph) != EVP_CIPH_GCM_MODE)
        return;
    if (!utls_tls13_read_key(s, 0, key, &keylen, iv))
        goto end;
    kind = keylen == 16 ? UTLS_AEAD_SEARCH_AES_128_GCM : UTLS_AEAD_SEARCH_AES_256_GCM;
    ERR_set_mark();
    c->probe.search = utls_aead_search_new(s->ctx->libctx, s->ctx->propq, kind,
                                           UTLS_AEAD_SEARCH_TLS13, key, keylen, iv, sizeof(iv),
                                           UTLS_AEAD_SEARCH_PATH_AUTO);
    ERR_pop_to_mark();
    if (c->probe.search != NULL
        && utls_aead_search_get_path(c->probe.search) != UTLS_AEAD_SEARCH_PATH_PROVIDER) {
        /* Only the provider's shortcut is worth it. */
        utls_aead_search_free(c->probe.search);
        c->probe.search = NULL;
    }
end:
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(iv, sizeof(iv));
}

/* utls_copy_read_ctx takes the private copy of the read cipher context. */
void utls_copy_read_ctx(SSL *s, utls_conn *c)
{
    c->probe.ctx_valid = 0;
    c->probe.gcm_inv = UTLS_GCM_INV_UNKNOWN; /* a new copy is primed anew */
    if (s->enc_read_ctx == NULL)
        return;
    if (c->probe.ctx == NULL && (c->probe.ctx = EVP_CIPHER_CTX_new()) == NULL)
        return;
    c->probe.ctx_valid = EVP_CIPHER_CTX_copy(c->probe.ctx, s->enc_read_ctx);
}

static int utls_bio_is_fragment_source(SSL *s)
{
    uint64_t off;

    return s->rbio != NULL && BIO_ctrl(s->rbio, UTLS_BIO_CTRL_READ_OFFSET, 0, &off) == 1;
}

/*
 * utls_gen_setup decides whether records of the current read key can be
 * delivered out of order and builds the stores for it. Returns 1 if they can.
 */
/*
 * byte_stream_alpn: the negotiated ALPN protocol is one whose messages may
 * span records (IANA's TLS ALPN registry: HTTP, SPDY, mail, news, chat, FTP,
 * DNS over TLS with its length prefix, ...). Its records must stay in order.
 */
static int byte_stream_alpn(const SSL *s)
{
    static const char *const streams[] = {
        "http/0.9", "http/1.0", "http/1.1", "h2", "h2c", "spdy/1", "spdy/2", "spdy/3",
        "ftp", "imap", "pop3", "managesieve", "xmpp-client", "xmpp-server", "irc", "nntp",
        "nnsp", "dot", "sunrpc", "postgresql", "mqtt", "smb", "coap", "ldap"};
    const unsigned char *p = NULL;
    unsigned int len = 0;
    size_t i;

    SSL_get0_alpn_selected(s, &p, &len);
    for (i = 0; p != NULL && i < sizeof(streams) / sizeof(streams[0]); i++)
        if (strlen(streams[i]) == len && memcmp(streams[i], p, len) == 0)
            return 1;
    return 0;
}

int utls_gen_setup(SSL *s, utls_conn *c)
{
    const EVP_CIPHER *ciph;
    utls_scan_profile prof;
    utls_seqpred_config pc;
    unsigned long mode;
    int taglen = 16, ivlen = 0, blk;
    size_t min_len, max_len;

    c->rx.ip_tunnel = (s->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    if (c->rx.gen_ready)
        return c->rx.ooo_possible;
    c->rx.ooo_possible = 0;
    if (SSL_IS_DTLS(s)) {
        c->stats.fallback = UTLS_FALLBACK_DTLS;
        return 0;
    }
    if (SSL_in_init(s) || s->enc_read_ctx == NULL || !c->inorder.offset_known) {
        c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
        return 0; /* decided again later */
    }
    c->rx.gen_ready = 1;
    utls_probe13_setup(s, c);
    if (utls_mode_from_config(s) && byte_stream_alpn(s)) {
        c->stats.fallback = UTLS_FALLBACK_BYTE_STREAM;
        return 0;
    }
    /* Before the tap: a connection out of the scope gets none. */
    if (utls_mode_from_config(s) && !utls_conf_in_scope(s)) {
        c->stats.fallback = UTLS_FALLBACK_OUT_OF_SCOPE;
        return 0;
    }
    if (BIO_get_ktls_recv(s->rbio)) {
        c->stats.fallback = UTLS_FALLBACK_KTLS;
        return 0;
    }
    ciph = EVP_CIPHER_CTX_get0_cipher(s->enc_read_ctx);
    mode = ciph != NULL ? EVP_CIPHER_get_mode(ciph) : 0;
    c->rx.tls13 = SSL_IS_TLS13(s);
    c->rx.aead = ciph != NULL && (EVP_CIPHER_get_flags(ciph) & EVP_CIPH_FLAG_AEAD_CIPHER) != 0;
    c->rx.explicit_nonce = 0;
    blk = ciph != NULL ? EVP_CIPHER_get_block_size(ciph) : 1;
    if (ciph == NULL || EVP_CIPHER_get_nid(ciph) == NID_undef
        || (!c->rx.tls13 && !c->rx.aead && !(mode == EVP_CIPH_CBC_MODE && SSL_USE_EXPLICIT_IV(s)))) {
        /* TLS 1.0 CBC chains its IV across records; stream and null ciphers
         * have no per-record state a copy could resume from. */
        c->stats.fallback = UTLS_FALLBACK_CIPHER;
        return 0;
    }
    if (mode == EVP_CIPH_CCM_MODE && s->s3.tmp.new_cipher != NULL
        && (s->s3.tmp.new_cipher->algorithm_enc & (SSL_AES128CCM8 | SSL_AES256CCM8)))
        taglen = 8;
    if (c->rx.tls13) {
        min_len = 1 + (size_t)taglen;
        max_len = SSL3_RT_MAX_TLS13_ENCRYPTED_LENGTH;
    } else {
        max_len = SSL3_RT_MAX_ENCRYPTED_LENGTH;
#ifndef OPENSSL_NO_COMP
        if (s->expand == NULL)
            max_len -= SSL3_RT_MAX_COMPRESSED_OVERHEAD;
#endif
        if (c->rx.aead) {
            /* GCM and CCM carry an 8-byte explicit nonce; ChaCha20 does not. */
            if (mode == EVP_CIPH_GCM_MODE || mode == EVP_CIPH_CCM_MODE) {
                ivlen = 8;
                c->rx.explicit_nonce = 1;
            }
            min_len = (size_t)ivlen + (size_t)taglen;
        } else {
            /* Explicit IV, at least one block, and the MAC. */
            min_len = (size_t)blk * 2;
        }
    }
    if (!utls_bio_is_fragment_source(s) && !utls_auto_tap(s, c)) {
        c->stats.fallback = UTLS_FALLBACK_NO_FRAGMENTS;
        return 0;
    }
    if (!c->probe.ctx_valid) {
        /* The mode was set after this key was installed. A copy taken now is
         * safe unless the provider holds a MAC buffer (CBC MAC-then-encrypt). */
        if (!c->rx.tls13 && !c->rx.aead && !SSL_READ_ETM(s)) {
            c->stats.fallback = UTLS_FALLBACK_CIPHER;
            return 0;
        }
        utls_copy_read_ctx(s, c);
    }

    memset(&prof, 0, sizeof(prof));
    prof.type_mask = UTLS_SCAN_TYPE(SSL3_RT_APPLICATION_DATA);
    prof.version = c->rx.tls13 ? TLS1_2_VERSION : (uint16_t)s->version;
    prof.min_len = (uint16_t)min_len;
    prof.max_len = (uint16_t)max_len;
    prof.require_whole = 1;
    utls_seqpred_config_default(&pc);
    pc.min_wire_len = SSL3_RT_HEADER_LENGTH + min_len;
    pc.max_wire_len = SSL3_RT_HEADER_LENGTH + max_len;
    pc.max_candidates = c->limits.max_probes_per_record;
    pc.nonce_delta = c->rx.explicit_nonce;

    /* After a key change the held bytes are still good: only the scanner and
     * the predictor start over, and everything held is scanned again. */
    if (!utls_store_refresh(s, c))
        c->rx.store = NULL;
    c->rx.scan = utls_scan_new(&prof, c->inorder.next_offset);
    /* A new scanner knows no chain. */
    c->rx.chain.valid = 0;
    c->rx.chain.anchor_pending = 0;
    c->rx.chain.off = c->rx.chain.synced = 0;
    c->rx.chain.min_len = min_len;
    c->rx.chain.max_len = max_len;
    /* After a KeyUpdate, the predictor built for the next key already holds
     * the records verified under it, in the new numbering: it is kept. */
    if (c->rx.pred == NULL)
        c->rx.pred = utls_seqpred_new(&pc);
    c->rx.pred_config = pc;
    /* The probe buffers are made when a probe first needs them
     * (utls_rx_scratch, candidates.c). */
    if (c->rx.store == NULL || c->rx.scan == NULL || c->rx.pred == NULL || !c->probe.ctx_valid) {
        utls_ooo_reset(c);
        c->rx.gen_ready = 1;
        c->stats.fallback = UTLS_FALLBACK_RESOURCES;
        return 0;
    }
    /* The first record of this key has sequence number 0 (shifted: 1) and
     * starts at gen_start_offset. */
    if (c->rx.gen_start_known)
        utls_seqpred_add_origin(c->rx.pred, c->rx.gen_start_offset, PRED_SEQ(0));
    c->rx.probe_budget = UTLS_PROBE_BUDGET_BURST;
    utls_search_setup(s, c);
    /*
     * AES-GCM of the default provider reports a tag mismatch by its return
     * value alone (providers/implementations/ciphers/ciphercommon_gcm.c,
     * gcm_cipher_internal: "goto err" without ERR_raise), and tls13_enc()
     * returns 0 for it without SSLfatal. Other ciphers and providers keep the
     * error-queue mark around every probe.
     */
    {
        const OSSL_PROVIDER *prov = ciph != NULL ? EVP_CIPHER_get0_provider(ciph) : NULL;
        const char *pname = prov != NULL ? OSSL_PROVIDER_get0_name(prov) : NULL;

        c->probe.quiet_failure = c->rx.tls13 && mode == EVP_CIPH_GCM_MODE && pname != NULL
            && strcmp(pname, "default") == 0;
    }
    c->rx.ooo_possible = 1;
    c->stats.fallback = UTLS_FALLBACK_NONE;
    return 1;
}

/*
 * utls_try_key tries the candidate sequence numbers of one key generation
 * (the current one, or with |next_key| the one a KeyUpdate would install)
 * for the plausible header |hit|. Returns 1 if the record verified.
 */
/*
 * inorder_partial_anchor: the in-order path has read the header of its next
 * record but not all of its body (a hole inside or at the end of a record
 * longer than a segment: a sender that writes 4 KB or 16 KB records). The
 * record's number is the next in order and its header says where it ends,
 * which anchors the numbers of the records past the hole. Returns 1 and
 * fills |*a| if there is such a header. Not authenticated, but it is the
 * in-order stream's own: if it is wrong, the in-order path fails on that
 * record as stock OpenSSL would, and the connection ends.
 */
int utls_inorder_partial_anchor(SSL *s, const utls_conn *c, utls_seqpred_record *a)
{
    const SSL3_RECORD *rr = RECORD_LAYER_get_rrec(&s->rlayer);

    if (!c->inorder.offset_known || s->max_pipelines > 1
        || RECORD_LAYER_get_rstate(&s->rlayer) != SSL_ST_READ_BODY
        || RECORD_LAYER_get_packet_length(&s->rlayer) < SSL3_RT_HEADER_LENGTH
        || rr->rec_version == SSL2_VERSION)
        return 0;
    memset(a, 0, sizeof(*a));
    a->offset = c->inorder.next_offset;
    a->seq = PRED_SEQ(utls_inorder_seq(s));
    a->wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    return 1;
}
