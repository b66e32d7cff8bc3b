/*
 * Setting up a key generation for the receive path on the 3.5 base: what
 * the current read key allows, the stores, the private copy of the read
 * cipher context. Glue: reads OpenSSL 3.5's read record layer
 * (OSSL_RECORD_LAYER: its cipher context, static IV and tag length, which
 * new_record_layer() set up from the key it was given).
 *
 * What 3.5 delivers out of order: TLS 1.3 records of the AEAD suites
 * (AES-GCM, ChaCha20-Poly1305, AES-CCM), read through 3.5's own TLS record
 * method, one record per batch. Everything else reads in order, with the
 * reason in UTLS_get_stats(): TLS 1.2 (UTLS_FALLBACK_CIPHER: its record
 * method's AEAD and CBC paths are not probed on this base yet), KTLS
 * (UTLS_FALLBACK_KTLS: the kernel decrypts), read pipelining
 * (UTLS_FALLBACK_CIPHER: the record layer decrypts a batch before the first
 * record is returned), TLS 1.3's integrity-only suites (UTLS_FALLBACK_CIPHER).
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

int utls_gen_setup(SSL *s, utls_conn *c)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl;
    const EVP_CIPHER *ciph;
    utls_scan_profile prof;
    utls_seqpred_config pc;
    size_t min_len, max_len;

    if (sc == NULL)
        return 0;
    c->rx.ip_tunnel = (sc->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    if (c->rx.gen_ready)
        return c->rx.ooo_possible;
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
    /*
     * TLS 1.3 AEAD only (see the top of this file). Read pipelining
     * (SSL_set_max_pipelines()) makes the record layer decrypt a batch of
     * records before ssl3_read_bytes() takes the first, so the in-order
     * counter and the records' positions would run ahead of the record
     * being delivered.
     */
    if (!c->rx.tls13 || !c->rx.aead || rl->mac_ctx != NULL || rl->iv == NULL
        || rl->taglen == 0 || rl->max_pipelines > 1 || sc->max_pipelines > 1) {
        c->stats.fallback = UTLS_FALLBACK_CIPHER;
        return 0;
    }
    min_len = 1 + rl->taglen;
    max_len = SSL3_RT_MAX_TLS13_ENCRYPTED_LENGTH;
    if (!utls_bio_is_fragment_source(sc)) {
        c->stats.fallback = UTLS_FALLBACK_NO_FRAGMENTS;
        return 0;
    }
    if (!c->probe.ctx_valid)
        utls_copy_read_ctx(s, c); /* the mode was set after this key came */
    utls_probe13_setup(s, c);

    memset(&prof, 0, sizeof(prof));
    prof.type_mask = UTLS_SCAN_TYPE(SSL3_RT_APPLICATION_DATA);
    prof.version = TLS1_2_VERSION; /* RFC 8446 5.1: legacy_record_version */
    prof.min_len = (uint16_t)min_len;
    prof.max_len = (uint16_t)max_len;
    prof.require_whole = 1;
    utls_seqpred_config_default(&pc);
    pc.min_wire_len = SSL3_RT_HEADER_LENGTH + min_len;
    pc.max_wire_len = SSL3_RT_HEADER_LENGTH + max_len;
    pc.max_candidates = c->limits.max_probes_per_record;
    pc.nonce_delta = 0;

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
    if (c->rx.scratch == NULL)
        c->rx.scratch = OPENSSL_malloc(UTLS_SCRATCH_LEN);
    if (c->rx.store == NULL || c->rx.scan == NULL || c->rx.pred == NULL || !c->probe.ctx_valid
        || c->probe.tls13_taglen == 0 || c->rx.scratch == NULL) {
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

        c->probe.quiet_failure = EVP_CIPHER_get_mode(ciph) == EVP_CIPH_GCM_MODE
            && pname != NULL && strcmp(pname, "default") == 0;
    }
    c->rx.ooo_possible = 1;
    c->stats.fallback = UTLS_FALLBACK_NONE;
    return 1;
}
