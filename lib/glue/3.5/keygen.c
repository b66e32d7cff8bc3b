/*
 * Setting up a key generation for the receive path on the 3.5 base: what
 * the current read key allows, the stores, the private copy of the read
 * cipher context. Glue: reads OpenSSL 3.5's read record layer
 * (OSSL_RECORD_LAYER: its cipher context, static IV and tag length, which
 * new_record_layer() set up from the key it was given).
 *
 * What 3.5 delivers out of order, read through 3.5's own TLS record method
 * one record per batch: TLS 1.3 records of the AEAD suites (AES-GCM,
 * ChaCha20-Poly1305, AES-CCM), TLS 1.2 AEAD and TLS 1.1/1.2 CBC with
 * explicit IVs, as on 3.0. Everything else reads in order, with the reason
 * in UTLS_get_stats(): KTLS (UTLS_FALLBACK_KTLS: the kernel decrypts); read
 * pipelining (UTLS_FALLBACK_CIPHER: the record layer decrypts a batch before
 * the first record is returned); TLS 1.3's integrity-only suites, stream
 * MACs and compression (UTLS_FALLBACK_CIPHER).
 */
#include <string.h>

#include <openssl/err.h>
#include <openssl/provider.h>

#include "glue_local.h"
#include "record/methods/recmethod_local.h" /* OSSL_RECORD_LAYER */

void utls_copy_read_ctx(SSL *s, utls_conn *c)
{
    const OSSL_RECORD_LAYER *rl = utls_rl35(UTLS_SC(s));

    c->probe.ctx_valid = 0;
    c->probe.gcm_inv = UTLS_GCM_INV_UNKNOWN; /* a new copy is primed anew */
    if (rl == NULL || rl->enc_ctx == NULL)
        return;
    if (c->probe.ctx == NULL && (c->probe.ctx = EVP_CIPHER_CTX_new()) == NULL)
        return;
    c->probe.ctx_valid = EVP_CIPHER_CTX_copy(c->probe.ctx, rl->enc_ctx);
}

static int utls_bio_is_fragment_source(const SSL_CONNECTION *sc)
{
    uint64_t off;

    return sc->rbio != NULL && BIO_ctrl(sc->rbio, UTLS_BIO_CTRL_READ_OFFSET, 0, &off) == 1;
}

/*
 * utls_auto_tap puts a tap in front of a plain socket BIO (SSL_set_fd), when
 * the connection's ISN is known (a listener tap or UTLS_tap_connect saw its
 * handshake), as lib/glue/keygen.c does on 3.0. The TLS stream is assumed to
 * start at the first byte of the TCP stream. On 3.5 the read record layer
 * reads through a BIO of its own (OSSL_RECORD_LAYER.bio), which is pointed
 * at the tap too (set1_bio takes a reference; the socket BIO stays the tap's
 * next, freed with the SSL's read BIO chain). Returns 1 if the read BIO is
 * now a tap.
 */
static int utls_auto_tap(SSL_CONNECTION *sc, utls_conn *c, const OSSL_RECORD_LAYER *rl)
{
    BIO *tap;

    if (sc->rbio == NULL || BIO_method_type(sc->rbio) != BIO_TYPE_SOCKET || rl->bio != sc->rbio)
        return 0;
    ERR_set_mark();
    tap = utls_tap_wrap(sc->rbio, c->inorder.next_offset + TLS_BUFFER_get_left(&rl->rbuf)
                                      + rl->packet_length);
    if (tap == NULL) {
        ERR_pop_to_mark(); /* in order, as before */
        return 0;
    }
    ERR_clear_last_mark();
    /* The tap may come in the middle of a read whose socket BIO just said
     * "retry": the tap says it too (SSL_get_error(): SSL_ERROR_WANT_READ). */
    BIO_copy_next_retry(tap);
    sc->rbio = tap; /* the socket BIO is its next */
    if (!sc->rlayer.rrlmethod->set1_bio(sc->rlayer.rrl, tap)) {
        /* Not expected (tls_set1_bio only takes a reference): back to the
         * socket, in order. */
        sc->rbio = BIO_pop(tap);
        BIO_free(tap);
        return 0;
    }
    return 1;
}

/*
 * byte_stream_alpn: the negotiated ALPN protocol is one whose messages may
 * span records (IANA's TLS ALPN registry). Its records must stay in order.
 * The same list as the 3.0 glue's (lib/glue/keygen.c).
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

/* gen_setup_full is utls_gen_setup() for a key generation not set up yet:
 * kept out of the call every pump makes, with its stack canary (the
 * profiles' addresses are taken). */
static UTLS_NOINLINE int gen_setup_full(SSL *s, SSL_CONNECTION *sc, utls_conn *c)
{
    const OSSL_RECORD_LAYER *rl;
    const EVP_CIPHER *ciph;
    utls_scan_profile prof;
    utls_seqpred_config pc;
    size_t min_len, max_len;
    unsigned long mode;
    int ivlen = 0, blk;

    c->rx.ooo_possible = 0;
    if (SSL_CONNECTION_IS_DTLS(sc)) {
        c->stats.fallback = UTLS_FALLBACK_DTLS;
        return 0;
    }
    rl = utls_rl35(sc);
    if (SSL_in_init(s) || !c->inorder.offset_known
        || (rl != NULL && rl->enc_ctx == NULL && rl->mac_ctx == NULL)) {
        c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
        return 0; /* decided again later */
    }
    c->rx.gen_ready = 1;
    if (utls_mode_from_config(s) && byte_stream_alpn(s)) {
        c->stats.fallback = UTLS_FALLBACK_BYTE_STREAM;
        return 0;
    }
    if (utls_mode_from_config(s) && !utls_conf_in_scope(s)) {
        c->stats.fallback = UTLS_FALLBACK_OUT_OF_SCOPE;
        return 0;
    }
    if (rl == NULL) {
        /* Another record method: after the handshake on a TLS connection,
         * that is KTLS's (ktls_meth.c), where the kernel decrypts. */
        c->stats.fallback = UTLS_FALLBACK_KTLS;
        return 0;
    }
    ciph = rl->enc_ctx != NULL ? EVP_CIPHER_CTX_get0_cipher(rl->enc_ctx) : NULL;
    c->rx.tls13 = rl->version == TLS1_3_VERSION;
    c->rx.aead = ciph != NULL && (EVP_CIPHER_get_flags(ciph) & EVP_CIPH_FLAG_AEAD_CIPHER) != 0;
    c->rx.explicit_nonce = 0;
    mode = ciph != NULL ? EVP_CIPHER_get_mode(ciph) : 0;
    /*
     * Read pipelining (SSL_set_max_pipelines()) makes the record layer
     * decrypt a batch of records before ssl3_read_bytes() takes the first,
     * so the in-order counter and the records' positions would run ahead of
     * the record being delivered. TLS 1.0 CBC chains its IV across records;
     * stream and null ciphers have no per-record state a copy could resume
     * from; TLS 1.3's integrity-only suites are not probed; a stream MAC
     * (GOST) is updated in place; compression changes lengths.
     */
    if (ciph == NULL || EVP_CIPHER_get_nid(ciph) == NID_undef || rl->mac_ctx != NULL
        || rl->max_pipelines > 1 || sc->max_pipelines > 1 || rl->stream_mac
        || rl->compctx != NULL
        || (c->rx.tls13 && (!c->rx.aead || rl->iv == NULL || rl->taglen == 0))
        || (!c->rx.tls13 && !c->rx.aead
            && !(mode == EVP_CIPH_CBC_MODE && RLAYER_USE_EXPLICIT_IV(rl)))) {
        c->stats.fallback = UTLS_FALLBACK_CIPHER;
        return 0;
    }
    blk = EVP_CIPHER_get_block_size(ciph);
    if (c->rx.tls13) {
        min_len = 1 + rl->taglen;
        max_len = SSL3_RT_MAX_TLS13_ENCRYPTED_LENGTH;
    } else {
        /* As the record layer bounds it (tls_default_validate_record_header,
         * no compression). */
        max_len = SSL3_RT_MAX_ENCRYPTED_LENGTH - SSL3_RT_MAX_COMPRESSED_OVERHEAD;
        if (c->rx.aead) {
            /* GCM and CCM carry an 8-byte explicit nonce; ChaCha20 does not.
             * The tag: 16 bytes, CCM-8's 8. */
            int taglen = EVP_CIPHER_CTX_get_tag_length(rl->enc_ctx);

            if (taglen <= 0)
                taglen = 16;
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
    if (!utls_bio_is_fragment_source(sc) && !utls_auto_tap(sc, c, rl)) {
        c->stats.fallback = UTLS_FALLBACK_NO_FRAGMENTS;
        return 0;
    }
    if (!c->probe.ctx_valid) {
        /* The mode was set after this key was installed. A copy taken now is
         * safe unless the provider holds a MAC buffer (CBC MAC-then-encrypt,
         * lib/glue/utls_glue.h). */
        if (!c->rx.tls13 && !c->rx.aead && !rl->use_etm) {
            c->stats.fallback = UTLS_FALLBACK_CIPHER;
            return 0;
        }
        utls_copy_read_ctx(s, c);
    }
    utls_probe13_setup(s, c);

    memset(&prof, 0, sizeof(prof));
    prof.type_mask = UTLS_SCAN_TYPE(SSL3_RT_APPLICATION_DATA);
    /* RFC 8446 5.1: TLS 1.3's legacy_record_version is TLS 1.2's. */
    prof.version = c->rx.tls13 ? TLS1_2_VERSION : (uint16_t)rl->version;
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
    /* The probe buffer is made when a probe first needs it (utls_rx_scratch). */
    if (c->rx.store == NULL || c->rx.scan == NULL || c->rx.pred == NULL || !c->probe.ctx_valid
        || (c->rx.tls13 && c->probe.tls13_taglen == 0)) {
        utls_ooo_reset(c);
        c->rx.gen_ready = 1;
        c->stats.fallback = UTLS_FALLBACK_RESOURCES;
        return 0;
    }
    if (c->rx.gen_start_known)
        utls_seqpred_add_origin(c->rx.pred, c->rx.gen_start_offset, PRED_SEQ(0));
    c->rx.probe_budget = UTLS_PROBE_BUDGET_BURST;
    /* No provider candidate search on this base (lib/glue/keygen.c's
     * utls_search_setup): candidates are tried one trial decryption at a
     * time, with the same result. A failed tag check of OpenSSL's own
     * AES-GCM pushes nothing onto the error queue (ciphercommon_gcm.c). */
    {
        const OSSL_PROVIDER *prov = EVP_CIPHER_get0_provider(ciph);
        const char *pname = prov != NULL ? OSSL_PROVIDER_get0_name(prov) : NULL;

        c->probe.quiet_failure = c->rx.tls13 && mode == EVP_CIPH_GCM_MODE && pname != NULL
            && strcmp(pname, "default") == 0;
    }
    c->rx.ooo_possible = 1;
    c->stats.fallback = UTLS_FALLBACK_NONE;
    return 1;
}

UTLS_HOT int utls_gen_setup(SSL *s, utls_conn *c)
{
    SSL_CONNECTION *sc = UTLS_SC(s);

    if (sc == NULL)
        return 0;
    c->rx.ip_tunnel = (sc->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    if (c->rx.gen_ready)
        return c->rx.ooo_possible;
    return gen_setup_full(s, sc, c);
}
