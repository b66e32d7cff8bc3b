/*
 * The unordered receive path (SSL_MODE_UNORDERED).
 *
 * The in-order path is OpenSSL's own record code: it stays authoritative and
 * delivers every record in sequence order. This file adds, past a hole:
 * fragments from the read BIO -> reassembly -> header scan -> sequence
 * prediction -> trial decryption on a copy of the read state -> a queue of
 * verified records, which the next read delivers. A record delivered early is
 * remembered by sequence number and skipped when the in-order path reaches it.
 *
 * The paper's prototype read the socket only when its list of out-of-order
 * records was empty and so locked out in-order data (uTLS report, 7.1). Here
 * every read first drains all fragments that have arrived, then delivers one
 * ready record, and otherwise reads in order; and when the in-order read finds
 * nothing, the fragments are drained again before the read reports
 * SSL_ERROR_WANT_READ. Neither side can starve the other.
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/provider.h>

#include "utls_local.h"

/* One copy of the big-endian helpers for the fork: the provider's (written
 * out, one byte-swapping load; a loop stayed a loop). */
#include "utls-provider/be64.h"
#define be64 utls_load_be64

/* An SSLv2-compatible ClientHello's header (ssl3_record.c keeps it private). */
#define UTLS_SSL2_HEADER_LENGTH 2

/* The sequence number the in-order path will use for its next record. */
static uint64_t utls_inorder_seq(SSL *s)
{
    return be64(RECORD_LAYER_get_read_sequence(&s->rlayer));
}

/* Sequence numbers in the predictor are shifted by one, so that the virtual
 * anchor that marks the start of a key generation can carry "seq -1". */
#define PRED_SEQ(seq) ((seq) + 1)

/* --- Sets of sequence numbers delivered ahead of the in-order path ------ */

static size_t seqset_lower(const utls_seqset *set, uint64_t seq)
{
    size_t lo = 0, hi = set->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (set->v[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int seqset_contains(const utls_seqset *set, uint64_t seq)
{
    size_t i = seqset_lower(set, seq);

    return i < set->n && set->v[i] == seq;
}

/* seqset_point sets the arrays' pointers to entry |first| of |set|'s
 * memory: sequence numbers, offsets and epochs (uint64_t), then lengths. */
static void seqset_point(utls_seqset *set, size_t first)
{
    uint64_t *m = set->mem;

    set->first = first;
    set->v = m + first;
    set->off = m + UTLS_MAX_DELIVERED_AHEAD + first;
    set->epoch = m + 2 * UTLS_MAX_DELIVERED_AHEAD + first;
    set->wire_len = (size_t *)(void *)(m + 3 * UTLS_MAX_DELIVERED_AHEAD) + first;
}

static int seqset_add(utls_seqset *set, uint64_t seq, uint64_t off, size_t wire_len,
                      uint64_t epoch)
{
    size_t i, tail;

    if (set->mem == NULL) {
        set->mem = OPENSSL_malloc(UTLS_MAX_DELIVERED_AHEAD
                                  * (3 * sizeof(uint64_t) + sizeof(size_t)));
        if (set->mem == NULL)
            return 0;
        set->n = 0;
        seqset_point(set, 0);
    }
    if (set->n == UTLS_MAX_DELIVERED_AHEAD)
        return 0;
    if (set->first + set->n == UTLS_MAX_DELIVERED_AHEAD) {
        /* The end of the memory: the entries move to its start, once per
         * UTLS_MAX_DELIVERED_AHEAD - n entries taken from the front. */
        uint64_t *v = set->v, *o = set->off, *e = set->epoch;
        size_t *w = set->wire_len;

        seqset_point(set, 0);
        memmove(set->v, v, set->n * sizeof(*set->v));
        memmove(set->off, o, set->n * sizeof(*set->off));
        memmove(set->epoch, e, set->n * sizeof(*set->epoch));
        memmove(set->wire_len, w, set->n * sizeof(*set->wire_len));
    }
    i = seqset_lower(set, seq);
    tail = set->n - i;
    memmove(&set->v[i + 1], &set->v[i], tail * sizeof(*set->v));
    memmove(&set->off[i + 1], &set->off[i], tail * sizeof(*set->off));
    memmove(&set->wire_len[i + 1], &set->wire_len[i], tail * sizeof(*set->wire_len));
    memmove(&set->epoch[i + 1], &set->epoch[i], tail * sizeof(*set->epoch));
    set->v[i] = seq;
    set->off[i] = off;
    set->wire_len[i] = wire_len;
    set->epoch[i] = epoch;
    set->n++;
    return 1;
}

/* seqset_remove deletes the |count| entries from index |at| on, keeping the
 * parallel arrays in step. */
static void seqset_remove(utls_seqset *set, size_t at, size_t count)
{
    size_t rest = set->n - at - count;

    if (count == 0)
        return;
    if (at == 0) {
        /* From the front (the in-order path passing records): no move. */
        set->n -= count;
        seqset_point(set, set->n == 0 ? 0 : set->first + count);
        return;
    }

    memmove(&set->v[at], &set->v[at + count], rest * sizeof(*set->v));
    memmove(&set->off[at], &set->off[at + count], rest * sizeof(*set->off));
    memmove(&set->wire_len[at], &set->wire_len[at + count], rest * sizeof(*set->wire_len));
    memmove(&set->epoch[at], &set->epoch[at + count], rest * sizeof(*set->epoch));
    set->n -= count;
}

/* seqset_take removes |seq| and everything below it; returns 1 if |seq| was
 * there. In-order sequence numbers only grow, so lower ones are stale. */
static int seqset_take(utls_seqset *set, uint64_t seq)
{
    size_t i = seqset_lower(set, seq);
    int found = i < set->n && set->v[i] == seq;
    size_t drop = i + (size_t)found;

    if (drop == 0)
        return 0;
    seqset_remove(set, 0, drop);
    return found;
}

/* seqset_take_one removes |seq| only, and what lies a reorder window below
 * it; returns 1 if |seq| was there. With explicit record numbers a sender
 * may write lower numbers later (docs/ern.md). */
static int seqset_take_one(utls_seqset *set, uint64_t seq)
{
    uint64_t floor = seq > UTLS_ERN_REORDER_WINDOW ? seq - UTLS_ERN_REORDER_WINDOW : 0;
    size_t i = seqset_lower(set, seq);
    int found = i < set->n && set->v[i] == seq;

    if (found)
        seqset_remove(set, i, 1);
    seqset_remove(set, 0, seqset_lower(set, floor));
    return found;
}

/* seqset_forget_epochs: the bytes behind these records can no longer be
 * vouched for by a shared store (the read BIO changed). */
static void seqset_forget_epochs(utls_seqset *set)
{
    size_t i;

    for (i = 0; i < set->n; i++)
        set->epoch[i] = UTLS_NO_EPOCH;
}

static int utls_bio_quiet(SSL *s, utls_conn *c);
static int utls_store_refresh(SSL *s, utls_conn *c);
static uint64_t utls_store_epoch(const utls_conn *c);

/* --- Ready records (verified, waiting to be read), sorted by seq --------- */

static int ready_find(const utls_conn *c, uint32_t gen, uint64_t seq)
{
    size_t i;

    for (i = 0; i < c->num_ready; i++)
        if (c->ready[i].seq == seq && c->ready[i].gen == gen)
            return (int)i;
    return -1;
}

static void ready_free_data(utls_conn *c, utls_ready_record *r)
{
    /* Plaintext is wiped as stock OpenSSL wipes its own: only with
     * SSL_OP_CLEANSE_PLAINTEXT. */
    if (c->cleanse_plaintext && r->data != NULL)
        OPENSSL_cleanse(r->data, r->len);
    if (r->buf != NULL && r->buf_is_scratch && c->num_spare < UTLS_MAX_SPARE_BUFS)
        c->spare[c->num_spare++] = r->buf;
    else
        OPENSSL_free(r->buf);
    r->data = NULL;
    r->buf = NULL;
}

static void ready_remove(utls_conn *c, size_t i)
{
    ready_free_data(c, &c->ready[i]);
    memmove(&c->ready[i], &c->ready[i + 1], (c->num_ready - i - 1) * sizeof(*c->ready));
    c->num_ready--;
}

/* ready_add queues the verified record |r| whose plaintext |pt| (r->len
 * bytes) usually lies in c->scratch. Returns 1, or 0 if it cannot be kept. */
static int ready_add(utls_conn *c, const utls_ready_record *r, const unsigned char *pt)
{
    unsigned char *fresh;
    size_t i;

    if (c->ready == NULL) {
        c->ready = OPENSSL_malloc(sizeof(*c->ready) * UTLS_DEFAULT_MAX_READY_RECORDS * 4);
        if (c->ready == NULL)
            return 0;
    }
    if (c->num_ready >= c->limits.max_ready_records
        || c->num_ready >= UTLS_DEFAULT_MAX_READY_RECORDS * 4
        || c->num_ready + c->ahead.n + c->next_ahead.n >= UTLS_MAX_DELIVERED_AHEAD)
        return 0;
    for (i = c->num_ready; i > 0; i--) {
        const utls_ready_record *p = &c->ready[i - 1];

        if (p->gen < r->gen || (p->gen == r->gen && p->seq < r->seq))
            break;
    }
    memmove(&c->ready[i + 1], &c->ready[i], (c->num_ready - i) * sizeof(*c->ready));
    c->ready[i] = *r;
    if (pt >= c->scratch && pt + r->len <= c->scratch + UTLS_SCRATCH_LEN
        && (fresh = c->num_spare > 0 ? c->spare[--c->num_spare]
                                     : OPENSSL_malloc(UTLS_SCRATCH_LEN)) != NULL) {
        /* The plaintext stays where the probe decrypted it: the record takes
         * the probe buffer, and the next probe gets a spare one. */
        c->ready[i].buf = c->scratch;
        c->ready[i].buf_is_scratch = 1;
        c->ready[i].data = (unsigned char *)pt;
        c->scratch = fresh;
    } else if ((c->ready[i].buf = OPENSSL_memdup(pt, r->len)) != NULL) {
        c->ready[i].buf_is_scratch = 0;
        c->ready[i].data = c->ready[i].buf;
    } else {
        memmove(&c->ready[i], &c->ready[i + 1], (c->num_ready - i) * sizeof(*c->ready));
        return 0;
    }
    c->num_ready++;
    return 1;
}

/* ready_add_verified queues the application data record authenticated out of
 * order at stream |offset| (|wire_len| bytes on the wire, number |seq| of key
 * generation |gen|), whose |pt_len| bytes of plaintext are at |pt|. A record
 * that cannot be kept counts its wire bytes in bytes_dropped; the in-order
 * path then delivers it as stock OpenSSL would. */
static void ready_add_verified(utls_conn *c, uint64_t seq, uint32_t gen, uint64_t offset,
                               size_t wire_len, uint64_t arrival_ns,
                               const unsigned char *pt, size_t pt_len)
{
    utls_ready_record rr;

    rr.seq = seq;
    rr.gen = gen;
    rr.offset = offset;
    rr.wire_len = wire_len;
    rr.arrival_ns = arrival_ns;
    rr.len = pt_len;
    rr.data = NULL;
    rr.buf = NULL;
    rr.buf_is_scratch = 0;
    rr.store_epoch = utls_store_epoch(c);
    if (!ready_add(c, &rr, pt))
        c->stats.bytes_dropped += wire_len;
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
    tap = utls_tap_wrap(s->rbio, c->next_offset
                                     + SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer))
                                     + RECORD_LAYER_get_packet_length(&s->rlayer));
    if (tap == NULL) {
        ERR_pop_to_mark(); /* in order, as before */
        return 0;
    }
    ERR_clear_last_mark();
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

    utls_aead_search_free(c->search);
    c->search = NULL;
    if (!c->tls13 || ciph == NULL || EVP_CIPHER_get_mode(ciph) != EVP_CIPH_GCM_MODE)
        return;
    if (!utls_tls13_read_key(s, 0, key, &keylen, iv))
        goto end;
    kind = keylen == 16 ? UTLS_AEAD_SEARCH_AES_128_GCM : UTLS_AEAD_SEARCH_AES_256_GCM;
    ERR_set_mark();
    c->search = utls_aead_search_new(s->ctx->libctx, s->ctx->propq, kind, UTLS_AEAD_SEARCH_TLS13,
                                     key, keylen, iv, sizeof(iv), UTLS_AEAD_SEARCH_PATH_AUTO);
    ERR_pop_to_mark();
    if (c->search != NULL && utls_aead_search_get_path(c->search) != UTLS_AEAD_SEARCH_PATH_PROVIDER) {
        /* Only the provider's shortcut is worth it. */
        utls_aead_search_free(c->search);
        c->search = NULL;
    }
    if (c->search != NULL && c->search_out == NULL
        && (c->search_out = OPENSSL_malloc(UTLS_SCRATCH_LEN)) == NULL) {
        utls_aead_search_free(c->search);
        c->search = NULL;
    }
end:
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(iv, sizeof(iv));
}

/* utls_copy_read_ctx takes the private copy of the read cipher context. */
static void utls_copy_read_ctx(SSL *s, utls_conn *c)
{
    c->probe_ctx_valid = 0;
    c->probe_gcm_inv = UTLS_GCM_INV_UNKNOWN; /* a new copy is primed anew */
    if (s->enc_read_ctx == NULL)
        return;
    if (c->probe_ctx == NULL && (c->probe_ctx = EVP_CIPHER_CTX_new()) == NULL)
        return;
    c->probe_ctx_valid = EVP_CIPHER_CTX_copy(c->probe_ctx, s->enc_read_ctx);
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
static int utls_gen_setup(SSL *s, utls_conn *c)
{
    const EVP_CIPHER *ciph;
    utls_scan_profile prof;
    utls_seqpred_config pc;
    unsigned long mode;
    int taglen = 16, ivlen = 0, blk;
    size_t min_len, max_len;

    if (c->gen_ready)
        return c->ooo_possible;
    c->ooo_possible = 0;
    if (SSL_IS_DTLS(s)) {
        c->stats.fallback = UTLS_FALLBACK_DTLS;
        return 0;
    }
    if (SSL_in_init(s) || s->enc_read_ctx == NULL || !c->offset_known) {
        c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
        return 0; /* decided again later */
    }
    c->gen_ready = 1;
    utls_probe13_setup(s, c);
    if (BIO_get_ktls_recv(s->rbio)) {
        c->stats.fallback = UTLS_FALLBACK_KTLS;
        return 0;
    }
    ciph = EVP_CIPHER_CTX_get0_cipher(s->enc_read_ctx);
    mode = ciph != NULL ? EVP_CIPHER_get_mode(ciph) : 0;
    c->tls13 = SSL_IS_TLS13(s);
    c->aead = ciph != NULL && (EVP_CIPHER_get_flags(ciph) & EVP_CIPH_FLAG_AEAD_CIPHER) != 0;
    c->explicit_nonce = 0;
    blk = ciph != NULL ? EVP_CIPHER_get_block_size(ciph) : 1;
    if (ciph == NULL || EVP_CIPHER_get_nid(ciph) == NID_undef
        || (!c->tls13 && !c->aead && !(mode == EVP_CIPH_CBC_MODE && SSL_USE_EXPLICIT_IV(s)))) {
        /* TLS 1.0 CBC chains its IV across records; stream and null ciphers
         * have no per-record state a copy could resume from. */
        c->stats.fallback = UTLS_FALLBACK_CIPHER;
        return 0;
    }
    if (mode == EVP_CIPH_CCM_MODE && s->s3.tmp.new_cipher != NULL
        && (s->s3.tmp.new_cipher->algorithm_enc & (SSL_AES128CCM8 | SSL_AES256CCM8)))
        taglen = 8;
    if (c->tls13) {
        min_len = 1 + (size_t)taglen;
        max_len = SSL3_RT_MAX_TLS13_ENCRYPTED_LENGTH;
    } else {
        max_len = SSL3_RT_MAX_ENCRYPTED_LENGTH;
#ifndef OPENSSL_NO_COMP
        if (s->expand == NULL)
            max_len -= SSL3_RT_MAX_COMPRESSED_OVERHEAD;
#endif
        if (c->aead) {
            /* GCM and CCM carry an 8-byte explicit nonce; ChaCha20 does not. */
            if (mode == EVP_CIPH_GCM_MODE || mode == EVP_CIPH_CCM_MODE) {
                ivlen = 8;
                c->explicit_nonce = 1;
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
    if (!c->probe_ctx_valid) {
        /* The mode was set after this key was installed. A copy taken now is
         * safe unless the provider holds a MAC buffer (CBC MAC-then-encrypt). */
        if (!c->tls13 && !c->aead && !SSL_READ_ETM(s)) {
            c->stats.fallback = UTLS_FALLBACK_CIPHER;
            return 0;
        }
        utls_copy_read_ctx(s, c);
    }

    memset(&prof, 0, sizeof(prof));
    prof.type_mask = UTLS_SCAN_TYPE(SSL3_RT_APPLICATION_DATA);
    prof.version = c->tls13 ? TLS1_2_VERSION : (uint16_t)s->version;
    prof.min_len = (uint16_t)min_len;
    prof.max_len = (uint16_t)max_len;
    prof.require_whole = 1;
    utls_seqpred_config_default(&pc);
    pc.min_wire_len = SSL3_RT_HEADER_LENGTH + min_len;
    pc.max_wire_len = SSL3_RT_HEADER_LENGTH + max_len;
    pc.max_candidates = c->limits.max_probes_per_record;
    pc.nonce_delta = c->explicit_nonce;

    /* After a key change the held bytes are still good: only the scanner and
     * the predictor start over, and everything held is scanned again. */
    if (!utls_store_refresh(s, c))
        c->store = NULL;
    c->scan = utls_scan_new(&prof, c->next_offset);
    /* A new scanner knows no chain. */
    c->chain_valid = 0;
    c->chain_anchor_pending = 0;
    c->chain_off = c->chain_synced = 0;
    c->chain_min_len = min_len;
    c->chain_max_len = max_len;
    /* After a KeyUpdate, the predictor built for the next key already holds
     * the records verified under it, in the new numbering: it is kept. */
    if (c->pred == NULL)
        c->pred = utls_seqpred_new(&pc);
    c->pred_config = pc;
    if (c->scratch == NULL)
        c->scratch = OPENSSL_malloc(UTLS_SCRATCH_LEN);
    if (c->store == NULL || c->scan == NULL || c->pred == NULL || !c->probe_ctx_valid
        || c->scratch == NULL) {
        utls_ooo_reset(c);
        c->gen_ready = 1;
        c->stats.fallback = UTLS_FALLBACK_RESOURCES;
        return 0;
    }
    /* The first record of this key has sequence number 0 (shifted: 1) and
     * starts at gen_start_offset. */
    if (c->gen_start_known)
        utls_seqpred_add_origin(c->pred, c->gen_start_offset, PRED_SEQ(0));
    c->probe_budget = UTLS_PROBE_BUDGET_BURST;
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

        c->probe_quiet_failure = c->tls13 && mode == EVP_CIPH_GCM_MODE && pname != NULL
            && strcmp(pname, "default") == 0;
    }
    c->ooo_possible = 1;
    c->stats.fallback = UTLS_FALLBACK_NONE;
    return 1;
}

/* --- Past a hole: scan, predict, probe ----------------------------------- */

/* utls_ooo_sync brings the stores up to the in-order point and adds the
 * last in-order records noted since the previous sync as anchors. Everything
 * that reads the stores or the predictor runs after it. */
static void utls_ooo_sync(utls_conn *c)
{
    int i;

    if (!c->stores_stale)
        return;
    if (!c->store_shared)
        utls_reasm_advance(c->store, c->next_offset); /* the BIO trims its own */
    utls_scan_advance(c->scan, c->next_offset);
    for (i = 2 - c->num_idle_anchors; i < 2; i++)
        utls_seqpred_add_anchor(c->pred, &c->idle_anchor[i]);
    utls_seqpred_advance(c->pred, c->next_offset);
    c->num_idle_anchors = 0;
    c->stores_stale = 0;
}

/*
 * utls_chain_sync tells the scanner about the records the chain fast path
 * verified since it last knew of one: [chain_synced, chain_off) is a run of
 * authenticated records, so no position inside it is a header and the next
 * header is at chain_off, exactly what one utls_scan_confirm of the whole run
 * says. Called before anything else reads the scanner.
 */
static void utls_chain_sync(utls_conn *c)
{
    if (c->chain_valid && c->chain_off > c->chain_synced && c->scan != NULL)
        (void)utls_scan_confirm(c->scan, c->chain_synced, (size_t)(c->chain_off - c->chain_synced));
    c->chain_synced = c->chain_off;
    if (c->chain_anchor_pending && c->pred != NULL)
        utls_seqpred_add_anchor(c->pred, &c->chain_anchor);
    c->chain_anchor_pending = 0;
}

/* utls_chain_set puts the chain cursor after the record of |wire_len| bytes
 * at |offset| that verified (or was known) as |seq| of the current key,
 * whose end the scanner already knows (utls_scan_confirm). */
static void utls_chain_set(utls_conn *c, uint64_t offset, size_t wire_len, uint64_t seq)
{
    c->chain_valid = 1;
    c->chain_off = offset + wire_len;
    c->chain_seq = seq + 1;
    c->chain_synced = c->chain_off;
}

/* utls_chain_drop forgets the chain, after telling the scanner about it. */
static void utls_chain_drop(utls_conn *c)
{
    utls_chain_sync(c);
    c->chain_valid = 0;
}

/*
 * utls_verify_candidate runs the full check of the record at |hit| as sequence
 * number |seq| of the current or next key and, if it verifies, records it
 * (anchor, chained header) and queues its plaintext for delivery. With
 * |numbered| the plaintext starts with the record's number, which is removed.
 * A full check uses one of the header's |*allowance| probes. Returns 1 if it
 * verified, -1 to stop trying this record (probe budget, allowance or an
 * internal error), 0 to try the next candidate.
 */
static int utls_verify_candidate(SSL *s, utls_conn *c, int next_key, const utls_scan_hit *hit,
                                 const unsigned char *wire, const utls_seqpred_query *q,
                                 uint64_t arrival_ns, uint64_t seq, int numbered,
                                 size_t *allowance)
{
    utls_seqset *ahead = next_key ? &c->next_ahead : &c->ahead;
    uint32_t gen = c->gen + (next_key ? 1 : 0);
    uint64_t floor = next_key ? 0 : utls_inorder_seq(s);
    const unsigned char *pt;
    size_t pt_len;
    int type, r;

    if (seq < floor)
        return 0; /* processed in order already */
    if (seqset_contains(ahead, seq) || ready_find(c, gen, seq) >= 0) {
        size_t i = seqset_lower(ahead, seq);
        int r = ready_find(c, gen, seq);

        /* This very record (same number, same place) is known: verified
         * before. Nothing to probe, and the next header is known too. */
        if ((i < ahead->n && ahead->v[i] == seq && ahead->off[i] == hit->offset)
            || (r >= 0 && c->ready[r].offset == hit->offset)) {
            utls_scan_confirm(c->scan, hit->offset, q->wire_len);
            if (!next_key && !numbered && hit->offset + q->wire_len > c->chain_off)
                utls_chain_set(c, hit->offset, q->wire_len, seq);
            return 1;
        }
        return 0;
    }
    /* A number the record's position cannot have: a genuine record copied
     * to another offset (its explicit nonce or number would verify). */
    if (!next_key && !utls_seqpred_plausible(c->pred, hit->offset, q->wire_len, PRED_SEQ(seq)))
        return 0;
    if (next_key && c->pred_next != NULL
        && !utls_seqpred_plausible(c->pred_next, hit->offset, q->wire_len, PRED_SEQ(seq)))
        return 0;
    if (c->probe_budget < 1 || *allowance == 0) {
        c->stats.probe_limit_hits++;
        if (c->probe_budget < 1)
            c->budget_starved = 1;
        return -1;
    }
    c->probe_budget -= 1;
    (*allowance)--;
    c->stats.probes++;
    r = utls_probe(s, c, next_key, wire, q->wire_len, seq, &pt, &pt_len, &type);
    if (r < 0)
        return -1;
    if (r == 0) {
        c->stats.soft_failures++;
        return 0;
    }
    if (type == SSL3_RT_APPLICATION_DATA && c->ern_tokens_ready) {
        /* The number (checked by the block test for |numbered|, which the
         * AEAD check now confirmed), or the peer's switch record: stripped
         * here; the switch itself takes effect only in order. Past the
         * peer's switch point (in order) every application record carries
         * its number, also one that verified through the predicted
         * candidates because its number search came up empty (a replayed
         * copy elsewhere had taken the number): it must carry |seq| and
         * lose it, or its number would reach the application. */
        if (utls_ern_strip(s, c, &pt, &pt_len, seq, numbered || c->ern_rx) < 0)
            return 0;
    }
    /* Authenticated: a true record boundary with a known number. */
    {
        utls_seqpred_record a = {0};

        if (next_key && c->pred_next == NULL)
            c->pred_next = utls_seqpred_new(&c->pred_config);
        if (next_key && (!c->next_seen || hit->offset < c->next_seen_offset)) {
            c->next_seen = 1;
            c->next_seen_offset = hit->offset;
        }
        if (next_key ? c->pred_next != NULL : 1) {
            a.offset = hit->offset;
            a.seq = PRED_SEQ(seq);
            a.wire_len = q->wire_len;
            a.has_nonce = q->has_nonce;
            a.explicit_nonce = q->explicit_nonce;
            utls_seqpred_add_anchor(next_key ? c->pred_next : c->pred, &a);
        }
        utls_scan_confirm(c->scan, hit->offset, q->wire_len);
        /* The next record of the chain is verified by the fast path
         * (utls_chain_run); not past a handshake record (a KeyUpdate changes
         * the key after it), nor under the next key or numbered records
         * (their numbers are not the chain's). */
        if (!next_key && !numbered && type == SSL3_RT_APPLICATION_DATA)
            utls_chain_set(c, hit->offset, q->wire_len, seq);
        else if (!next_key)
            c->chain_valid = 0;
        /* Alerts and handshake messages are processed only in order;
         * empty records carry nothing to deliver. */
        if (type == SSL3_RT_APPLICATION_DATA && pt_len > 0)
            ready_add_verified(c, seq, gen, hit->offset, q->wire_len, arrival_ns,
                               pt, pt_len);
        if (c->cleanse_plaintext)
            OPENSSL_cleanse(c->scratch, q->wire_len);
    }
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
static int inorder_partial_anchor(SSL *s, const utls_conn *c, utls_seqpred_record *a)
{
    const SSL3_RECORD *rr = RECORD_LAYER_get_rrec(&s->rlayer);

    if (!c->offset_known || s->max_pipelines > 1
        || RECORD_LAYER_get_rstate(&s->rlayer) != SSL_ST_READ_BODY
        || RECORD_LAYER_get_packet_length(&s->rlayer) < SSL3_RT_HEADER_LENGTH
        || rr->rec_version == SSL2_VERSION)
        return 0;
    memset(a, 0, sizeof(*a));
    a->offset = c->next_offset;
    a->seq = PRED_SEQ(utls_inorder_seq(s));
    a->wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    return 1;
}

static int utls_try_key(SSL *s, utls_conn *c, int next_key, const utls_scan_hit *hit,
                        const unsigned char *wire, const utls_seqpred_query *q,
                        uint64_t arrival_ns, size_t *allowance)
{
    uint64_t cands[UTLS_SEQPRED_MAX_CANDIDATES];
    utls_seqpred *pred = next_key ? c->pred_next : c->pred;
    /* Records below the in-order point's sequence number were processed in
     * order; the next key's numbering starts at 0. */
    uint64_t floor = next_key ? 0 : utls_inorder_seq(s);
    uint64_t tried = 0; /* a candidate tried before the ranking (shifted) */
    size_t limit = *allowance, n, i;

    /* A peer that may number its records: the record's own number, by
     * one-block tests nearest first around the highest number known before
     * it (utls_ern_ooo_find, utls_ern.c). A match settles which key
     * generation the record is under and whether it can go early; only a
     * record without a number (or beyond the span) goes on to the predicted
     * candidates below. */
    if (c->ern_tokens_ready && (s->server ? c->ern_offered : c->ern_accepted)) {
        utls_ern_keys *k = next_key ? &c->ern_next : &c->ern_cur;
        uint64_t guess = UTLS_ERN_NO_GUESS, seq;
        int r;

        if (pred != NULL && utls_seqpred_num_anchors(pred) > 0
            && utls_seqpred_candidates(pred, cands, 1, q) == 1 && cands[0] != 0)
            guess = cands[0] - 1;
        if ((k->valid || utls_ern_keys_setup(s, k, next_key))
            && utls_ern_ooo_find(c, k, wire, q->wire_len, hit->offset, guess, floor,
                                 !next_key, &seq)) {
            if (seq < floor) { /* written after higher numbers: in order */
                c->ern_ooo_verdict = UTLS_ERN_OOO_SETTLED;
                return 0;
            }
            r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, seq, 1, allowance);
            c->ern_ooo_verdict = r < 0 ? UTLS_ERN_OOO_MATCHED : UTLS_ERN_OOO_SETTLED;
            return r > 0;
        }
    }
    if (!next_key && pred != NULL && !c->ern_rx) {
        utls_seqpred_record partial;

        if (inorder_partial_anchor(s, c, &partial))
            (void)utls_seqpred_add_anchor(pred, &partial); /* refused if inconsistent */
    }
    if (pred != NULL && utls_seqpred_num_anchors(pred) > 0) {
        /* The first record past a hole: when the predictor knows its most
         * likely number without ranking the rest (all sizes seen so far
         * equal, the gap a multiple of it), that one is tried first, and the
         * ranking is made only if it fails. */
        if (c->search == NULL && limit > 0 && utls_seqpred_first_candidate(pred, q, &tried)
            && tried != 0) {
            int r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, tried - 1, 0,
                                          allowance);

            if (r != 0)
                return r > 0;
        } else {
            tried = 0;
        }
        n = utls_seqpred_candidates(pred, cands, limit, q);
    } else if (next_key) {
        /* Nothing verified under the next key yet: the KeyUpdate lies
         * somewhere before this record, most likely close before it. */
        for (n = 0; n < limit; n++)
            cands[n] = PRED_SEQ(n);
    } else {
        return 0;
    }
    /* With the provider: one search over all candidates picks the one that
     * authenticates (or none); only that one gets the full record check. */
    if (c->search != NULL && !next_key && n > 0 && c->probe_budget >= 1 && *allowance > 0) {
        uint64_t seqs[UTLS_SEQPRED_MAX_CANDIDATES];
        size_t m = 0, len, idx;

        for (i = 0; i < n; i++)
            if (cands[i] != 0)
                seqs[m++] = cands[i] - 1;
        c->probe_budget -= 1;
        (*allowance)--;
        c->stats.probes++;
        c->stats.provider_searches++;
        switch (utls_aead_search_run(c->search, c->search_out, &len, UTLS_SCRATCH_LEN, &idx, wire,
                                     q->wire_len, seqs, m)) {
        case UTLS_AEAD_SEARCH_FOUND:
            return utls_verify_candidate(s, c, 0, hit, wire, q, arrival_ns, seqs[idx], 0,
                                         allowance) > 0;
        case UTLS_AEAD_SEARCH_NOT_FOUND:
            c->stats.soft_failures++;
            return 0;
        case UTLS_AEAD_SEARCH_ERROR:
        default:
            break; /* one at a time below */
        }
    }
    for (i = 0; i < n; i++) {
        int r;

        if (cands[i] == 0 || cands[i] == tried)
            continue; /* the virtual origin record, or tried above */
        if (*allowance == 0)
            break;
        r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, cands[i] - 1, 0,
                                  allowance);
        if (r != 0)
            return r > 0;
    }
    if (n == limit)
        c->stats.probe_limit_hits++;
    return 0;
}

/*
 * utls_try_record tries to authenticate the record at the plausible header
 * |hit| inside |run|: under the current key, then (TLS 1.3) under the next,
 * with at most |*allowance| full checks (decremented). Returns 1 if it
 * verified.
 */
static int utls_try_record(SSL *s, utls_conn *c, const utls_scan_hit *hit,
                           const utls_reasm_run *run, uint64_t arrival_ns, size_t *allowance)
{
    utls_seqpred_query q;
    const unsigned char *wire = run->data + (hit->offset - run->offset);

    if (hit->offset < c->next_offset)
        return 0;
    memset(&q, 0, sizeof(q));
    q.offset = hit->offset;
    q.wire_len = SSL3_RT_HEADER_LENGTH + hit->len;
    if (c->explicit_nonce && hit->len >= 8) {
        q.has_nonce = 1;
        q.explicit_nonce = be64(wire + SSL3_RT_HEADER_LENGTH);
    }
    /* Past a record that verified under the next key, the current key can
     * no longer be in use: the peer's KeyUpdate lies before it. */
    /* TLS 1.3: half of the allowance is for the next key, in case a
     * KeyUpdate hides in the hole; past a record that verified under it, all
     * of it is (the current key can no longer be in use). */
    {
        int may_be_next = c->tls13 && c->post_handshake;
        int only_next = may_be_next && c->next_seen && hit->offset > c->next_seen_offset;
        size_t next_share = only_next ? *allowance : (may_be_next ? *allowance / 2 : 0);
        size_t cur = *allowance - next_share;
        int ok;

        c->ern_ooo_verdict = UTLS_ERN_OOO_NONE;
        if (!only_next) {
            ok = utls_try_key(s, c, 0, hit, wire, &q, arrival_ns, &cur);
            *allowance = cur + next_share;
            if (ok)
                return 1;
            /* ERN: its number matched under the current key, so no other
             * generation; settled means nothing to retry (utls_ern.c). */
            if (c->ern_ooo_verdict == UTLS_ERN_OOO_SETTLED)
                *allowance = 0;
            if (c->ern_ooo_verdict != UTLS_ERN_OOO_NONE)
                return 0;
        }
        if (next_share == 0 || !(c->next_valid || utls_next_key_setup(s, c)))
            return 0;
        ok = utls_try_key(s, c, 1, hit, wire, &q, arrival_ns, allowance);
        if (!ok && c->ern_ooo_verdict == UTLS_ERN_OOO_SETTLED)
            *allowance = 0;
        return ok;
    }
}

/* failed_add remembers a header whose candidates all failed after |spent|
 * probes; one that has spent its whole allowance is not worth keeping. */
static void failed_add(utls_conn *c, const utls_scan_hit *hit, size_t spent)
{
    if (spent >= c->limits.max_probes_per_record)
        return;
    if (c->ern_ooo_verdict == UTLS_ERN_OOO_SETTLED)
        return; /* ERN: its own number settled it (utls_try_record) */
    if (c->num_failed == UTLS_MAX_FAILED_HITS) {
        memmove(&c->failed[0], &c->failed[1], (c->num_failed - 1) * sizeof(c->failed[0]));
        memmove(&c->failed_spent[0], &c->failed_spent[1],
                (c->num_failed - 1) * sizeof(c->failed_spent[0]));
        c->num_failed--;
    }
    c->failed_spent[c->num_failed] = spent;
    c->failed[c->num_failed++] = *hit;
}

/*
 * failed_retry tries again the remembered headers that lie in held data past
 * the in-order point, now that a new record verified. Returns 1 if any
 * verified (which may in turn pin others: the caller loops).
 */
static int failed_retry(SSL *s, utls_conn *c, uint64_t arrival_ns)
{
    size_t i = 0;
    int progress = 0;

    utls_chain_sync(c);

    while (i < c->num_failed) {
        utls_scan_hit hit = c->failed[i];
        utls_reasm_run run;
        size_t allowance = c->limits.max_probes_per_record - c->failed_spent[i];
        size_t before = allowance;
        int drop = 0;

        if (hit.offset < c->next_offset
            || !utls_reasm_find_run(c->store, &run, hit.offset)
            || run.offset + run.len < hit.offset + SSL3_RT_HEADER_LENGTH + hit.len) {
            drop = 1; /* passed in order, or no longer held */
        } else if (utls_try_record(s, c, &hit, &run, arrival_ns, &allowance)) {
            drop = 1;
            progress = 1;
        } else {
            c->failed_spent[i] += before - allowance;
            drop = allowance == 0; /* its allowance is used up */
        }
        if (drop) {
            memmove(&c->failed[i], &c->failed[i + 1], (c->num_failed - i - 1) * sizeof(hit));
            memmove(&c->failed_spent[i], &c->failed_spent[i + 1],
                    (c->num_failed - i - 1) * sizeof(c->failed_spent[0]));
            c->num_failed--;
        } else {
            i++;
        }
    }
    return progress;
}

/*
 * utls_chain_verify verifies the record of |wire_len| bytes at |wire|, the
 * chain cursor, as number chain_seq of the current key: the one candidate the
 * general path would try first there, with the same checks (not below the
 * in-order point, not known already, a position the anchors allow, the probe
 * budget) and the same bookkeeping (anchor, ready queue) except the
 * scanner's, which utls_chain_sync does later. Returns 1 if it verified an
 * application data record and the chain goes on, 0 to leave this record to
 * the general path (which tries it again, with every candidate).
 */
static int utls_chain_verify(SSL *s, utls_conn *c, const unsigned char *wire, size_t wire_len,
                             uint64_t arrival_ns)
{
    uint64_t seq = c->chain_seq, offset = c->chain_off;
    utls_seqpred_record a = {0};
    const unsigned char *pt;
    size_t pt_len;
    int type, r;

    /* Known already? The chain runs at the front: a number above the
     * highest delivered and the highest ready one needs no search. */
    if (seq < utls_inorder_seq(s)
        || (c->ahead.n > 0 && c->ahead.v[c->ahead.n - 1] >= seq
            && seqset_contains(&c->ahead, seq))
        || (c->num_ready > 0 && (c->ready[c->num_ready - 1].gen > c->gen
                                 || (c->ready[c->num_ready - 1].gen == c->gen
                                     && c->ready[c->num_ready - 1].seq >= seq))
            && ready_find(c, c->gen, seq) >= 0)
        || !utls_seqpred_plausible(c->pred, offset, wire_len, PRED_SEQ(seq))
        || c->probe_budget < 1)
        return 0;
    c->probe_budget -= 1;
    c->stats.headers_found++;
    c->stats.probes++;
    r = utls_probe(s, c, 0, wire, wire_len, seq, &pt, &pt_len, &type);
    if (r <= 0) {
        if (r == 0)
            c->stats.soft_failures++;
        return 0;
    }
    /* The anchor waits for utls_chain_sync. The next record's plausibility
     * check does not need it: between the last anchor and the cursor lie
     * only the chain's records, whose count and sizes fit that gap exactly
     * as the check requires. */
    a.offset = offset;
    a.seq = PRED_SEQ(seq);
    a.wire_len = wire_len;
    c->chain_anchor = a;
    c->chain_anchor_pending = 1;
    c->chain_off = offset + wire_len;
    c->chain_seq = seq + 1;
    if (type == SSL3_RT_APPLICATION_DATA && pt_len > 0)
        ready_add_verified(c, seq, c->gen, offset, wire_len, arrival_ns, pt, pt_len);
    if (c->cleanse_plaintext)
        OPENSSL_cleanse(c->scratch, wire_len);
    /* A handshake record (a KeyUpdate) or an alert: what follows may be
     * under another key, or nothing. */
    return type == SSL3_RT_APPLICATION_DATA;
}

/*
 * utls_chain_run is the fast path for the fragment at |offset|: when it lies
 * at or past the chain cursor in the run that holds the cursor (bytes
 * arriving at the end of a run of verified records), the records completed
 * at the cursor are verified one after the other, each with its one
 * candidate, and nothing is scanned. Returns 1 if that handled the fragment,
 * 0 if the general path must (the chain is then synced or dropped). Anything
 * unusual is left to the general path: a fragment before the cursor or in
 * another run, a header at the cursor the cipher cannot produce, a record
 * that does not verify, the in-order point past the cursor, a key that may
 * have changed, explicit record numbers.
 */
static int utls_chain_run(SSL *s, utls_conn *c, uint64_t offset, uint64_t arrival_ns)
{
    utls_reasm_run run;
    int verified = 0;

    if (!c->chain_valid || !c->tls13 || c->next_seen || c->ern_tokens_ready
        || offset < c->chain_off || c->chain_off < c->next_offset
        || !utls_reasm_find_run(c->store, &run, c->chain_off)
        || offset >= run.offset + run.len)
        return 0;
    for (;;) {
        uint64_t avail = run.offset + run.len - c->chain_off;
        const unsigned char *h = run.data + (c->chain_off - run.offset);
        size_t len;

        if (avail < SSL3_RT_HEADER_LENGTH)
            break; /* the next header is not here yet */
        len = ((size_t)h[3] << 8) | h[4];
        /* RFC 8446 5.1: TLSCiphertext.opaque_type is application_data (23)
         * and legacy_record_version 0x0303; the length within the cipher's
         * bounds (the scan profile). Anything else breaks the chain. */
        if (h[0] != SSL3_RT_APPLICATION_DATA || h[1] != (TLS1_2_VERSION >> 8)
            || h[2] != (TLS1_2_VERSION & 0xff) || len < c->chain_min_len
            || len > c->chain_max_len) {
            utls_chain_drop(c);
            return 0;
        }
        if (avail < SSL3_RT_HEADER_LENGTH + len)
            break; /* the record is not whole yet */
        if (!utls_chain_verify(s, c, h, SSL3_RT_HEADER_LENGTH + len, arrival_ns)) {
            utls_chain_drop(c);
            return 0;
        }
        verified = 1;
    }
    /* As in the general path: a new anchor pins the numbers of headers
     * whose candidates failed. */
    if (verified && c->num_failed > 0) {
        while (failed_retry(s, c, arrival_ns))
            continue;
    }
    return 1;
}

/* utls_process_run scans the run holding |offset| and tries every header. */
static void utls_process_run(SSL *s, utls_conn *c, uint64_t offset, uint64_t arrival_ns)
{
    utls_scan_hit hits[UTLS_SCAN_BATCH];
    utls_reasm_run run;
    size_t n, i;
    int again;

    if (utls_chain_run(s, c, offset, arrival_ns))
        return;
    utls_chain_sync(c);
    do {
        utls_scan_result sr;

        again = 0;
        if (!utls_reasm_find_run(c->store, &run, offset))
            return;
        do {
            sr = utls_scan_feed(c->scan, hits, UTLS_SCAN_BATCH, &n, run.offset, run.data,
                                run.len);
            for (i = 0; i < n; i++) {
                size_t limit = c->limits.max_probes_per_record;
                size_t first = limit > 2 * UTLS_RETRY_RESERVE ? limit - UTLS_RETRY_RESERVE : limit;
                size_t allowance = first;

                c->stats.headers_found++;
                if (utls_try_record(s, c, &hits[i], &run, arrival_ns, &allowance))
                    again = 1; /* the next header is now known (chained) */
                else
                    failed_add(c, &hits[i], first - allowance);
            }
        } while (sr == UTLS_SCAN_MORE);
        /* A new anchor pins the numbers of records next to it: retry. */
        if (again && c->num_failed > 0) {
            while (failed_retry(s, c, arrival_ns))
                continue;
        }
    } while (again);
}

/* utls_forget_bio drops every pointer into the read BIO that |c| knew. */
static void utls_forget_bio(utls_conn *c)
{
    size_t i;

    c->sig = NULL;
    c->sig_bio = NULL;
    c->hooks.read_idle = 0;
    /* Another BIO: its store's epochs say nothing about the bytes verified
     * from the old one. */
    seqset_forget_epochs(&c->ahead);
    seqset_forget_epochs(&c->next_ahead);
    for (i = 0; i < c->num_ready; i++)
        c->ready[i].store_epoch = UTLS_NO_EPOCH;
    if (c->partial_active)
        c->partial.store_epoch = UTLS_NO_EPOCH;
}

/* utls_bio_quiet: the read BIO's signals say no fragment or wake-up waits. */
static int utls_bio_quiet(SSL *s, utls_conn *c)
{
    if (c->sig_bio != s->rbio) {
        utls_forget_bio(c);
        c->sig_bio = s->rbio;
        if (s->rbio == NULL
            || BIO_ctrl(s->rbio, UTLS_BIO_CTRL_GET_SIGNALS, 0, (void *)&c->sig) != 1)
            c->sig = NULL;
    }
    return c->sig != NULL && c->sig->pending == 0;
}

void utls_hook_rbio_changed(SSL *s)
{
    utls_conn *c = s->utls;

    /* The next entry point asks the new BIO (utls_bio_quiet): sig_bio is
     * NULL, so even a BIO at the freed one's address is asked again; and it
     * points c->store anew (utls_store_refresh) before reading it. */
    utls_forget_bio(c);
    if (c->store_shared) {
        c->store = NULL;
        c->store_shared = 0;
    }
}

/*
 * utls_store_refresh points c->store at the store fragments are read from:
 * the read BIO's own when it shares one, else the connection's copy (made
 * here if needed). Called at every entry point that reads the store. Returns
 * 1 if there is a store.
 */
static int utls_store_refresh(SSL *s, utls_conn *c)
{
    utls_reasm_limits rl;

    (void)utls_bio_quiet(s, c);
    if (c->sig != NULL && c->sig->store != NULL) {
        c->store = c->sig->store;
        c->store_shared = 1;
        return 1;
    }
    c->store_shared = 0;
    if (c->reasm == NULL) {
        rl.max_bytes = c->limits.max_bytes_held;
        rl.max_fragments = c->limits.max_fragments;
        rl.max_window = c->limits.max_window;
        c->reasm = utls_reasm_new(&rl, c->next_offset);
    }
    c->store = c->reasm;
    return c->store != NULL;
}

/* utls_store_epoch: the shared store's epoch, for a record verified now. */
static uint64_t utls_store_epoch(const utls_conn *c)
{
    return c->store_shared && c->sig != NULL ? c->sig->store_epoch : UTLS_NO_EPOCH;
}

/* utls_shared_over_limits: with a shared store the BIO's receive window bounds
 * the memory; the connection's limits still bound what the out-of-order side
 * takes on (the bytes it scans and probes). A fragment past them is left to
 * the in-order stream, as a copy would have been dropped. */
static int utls_shared_over_limits(const utls_conn *c, const utls_bio_fragment *f)
{
    return f->offset + f->len - c->next_offset > c->limits.max_window
        || utls_reasm_bytes_held(c->store) > c->limits.max_bytes_held
        || utls_reasm_num_fragments(c->store) > c->limits.max_fragments;
}

/* utls_next_fragment takes the read BIO's next fragment event into |*f|:
 * straight from its store when its signals name one, else through
 * BIO_ctrl(). Returns 1 if there was one. */
static int utls_next_fragment(SSL *s, utls_conn *c, utls_bio_fragment *f)
{
    if (c->sig_bio == s->rbio && c->sig != NULL && c->sig->events != NULL)
        return c->sig->pending != 0 && utls_segstore_take_event(c->sig->events, f);
    return BIO_ctrl(s->rbio, UTLS_BIO_CTRL_NEXT_FRAGMENT, 0, f) == 1;
}

/* utls_pump takes every fragment the read BIO has and processes it. Called
 * only when the BIO is not known to be quiet or a rescan is due. */
static void utls_pump(SSL *s, utls_conn *c)
{
    utls_bio_fragment f;
    int ok;
    utls_reasm_stats before, after;

    ok = utls_gen_setup(s, c) && utls_store_refresh(s, c);
    if (ok && c->rescan_pending) {
        /* A new key: what is held past the hole is scanned again. */
        utls_reasm_run run;
        uint64_t at;
        int more;

        c->rescan_pending = 0;
        utls_ooo_sync(c);
        for (more = utls_reasm_first_run(c->store, &run); more;
             more = utls_reasm_next_run(c->store, &run, at)) {
            at = run.offset;
            utls_process_run(s, c, run.offset, 0);
        }
    }
    if (ok && !c->store_shared)
        utls_reasm_get_stats(c->store, &before);
    for (;;) {
        uint64_t at[UTLS_SCAN_BATCH], latest = 0;
        size_t n = 0, k;

        /*
         * Take a batch of fragments first and credit the probe budget for all
         * of them: with a shared store a run already holds the bytes of
         * fragments not yet taken, and scanning it must not find the budget
         * for those bytes missing. Records found are stamped with the latest
         * arrival of the batch (never earlier than their last byte came).
         */
        while (n < UTLS_SCAN_BATCH && utls_next_fragment(s, c, &f)) {
            c->stats.fragments++;
            if (!ok)
                continue; /* drained: nothing can be delivered early */
            /* The probe budget grows with the bytes received past a hole. */
            c->probe_budget += (double)f.len * (double)c->limits.max_probes_per_kib / 1024.0;
            if (c->probe_budget
                > UTLS_PROBE_BUDGET_BURST + (double)c->limits.max_probes_per_kib * 64)
                c->probe_budget
                    = UTLS_PROBE_BUDGET_BURST + (double)c->limits.max_probes_per_kib * 64;
            if (c->store_shared) {
                /* Already in the store, and new there (the BIO queues an
                 * event only for bytes it stored for the first time). */
                if (utls_shared_over_limits(c, &f)) {
                    c->stats.bytes_dropped += f.len;
                    continue;
                }
            } else if (utls_reasm_insert(c->store, f.offset, f.data, f.len) != UTLS_REASM_STORED) {
                continue;
            }
            at[n++] = f.offset;
            if (f.arrival_ns > latest)
                latest = f.arrival_ns;
        }
        if (n == 0)
            break;
        utls_ooo_sync(c);
        for (k = 0; k < n; k++)
            utls_process_run(s, c, at[k], latest);
    }
    /* Headers parked when the probe budget ran dry get another chance once
     * it has grown back (it grows with the bytes that keep arriving). */
    if (ok && c->budget_starved && c->num_failed > 0 && c->probe_budget >= 1) {
        c->budget_starved = 0;
        utls_ooo_sync(c);
        while (failed_retry(s, c, 0))
            continue;
    }
    if (ok && !c->store_shared) {
        utls_reasm_get_stats(c->store, &after);
        c->stats.bytes_dropped += (after.bytes_dropped_window - before.bytes_dropped_window)
            + (after.bytes_dropped_size - before.bytes_dropped_size)
            + (after.bytes_evicted - before.bytes_evicted);
    }
}

/* --- Hooks --------------------------------------------------------------- */

/* note_record_pos notes that the record read in order now starts at
 * c->next_offset and is |wire_len| bytes long; |body| (NULL for an SSLv2
 * header) is its |body_len| bytes after the header, read for the explicit
 * nonce only. */
static UTLS_HOT inline void note_record_pos(utls_conn *c, size_t wire_len,
                                            const unsigned char *body, size_t body_len)
{
    c->cur_offset = c->next_offset;
    c->cur_wire_len = wire_len;
    c->cur_has_nonce = 0;
    /* The nonce matters only to ciphers with an explicit one (known once the
     * key's out-of-order state is set up, in utls_hook_record_done). */
    if ((!c->gen_ready || c->explicit_nonce) && body_len >= 8 && body != NULL) {
        c->cur_has_nonce = 1;
        c->cur_nonce = be64(body);
    }
    c->next_offset += wire_len;
    /* ssl3_get_record calls utls_hook_skip_decrypt only if this is set. */
    c->hooks.may_skip = c->ahead.n > 0 && c->ooo_possible;
}

UTLS_HOT void utls_hook_record_read(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls != NULL ? s->utls : utls_conn_get(s);
    size_t hdr = rr->rec_version == SSL2_VERSION ? UTLS_SSL2_HEADER_LENGTH : SSL3_RT_HEADER_LENGTH;

    if (c == NULL)
        return;
    if (!c->offset_known) {
        /* The first record seen: where it starts in the BIO's stream is the
         * bytes BIO_read() has returned minus those still buffered. */
        uint64_t read_off = 0;

        if (s->rbio != NULL && BIO_ctrl(s->rbio, UTLS_BIO_CTRL_READ_OFFSET, 0, &read_off) == 1)
            c->next_offset = read_off - SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer))
                - RECORD_LAYER_get_packet_length(&s->rlayer);
        else
            c->next_offset = 0;
        c->offset_known = 1;
    }
    note_record_pos(c, hdr + rr->length,
                    rr->rec_version != SSL2_VERSION
                        ? RECORD_LAYER_get_packet(&s->rlayer) + SSL3_RT_HEADER_LENGTH
                        : NULL,
                    rr->length);
}

/* note_inorder_anchor notes the in-order record just authenticated as |seq|
 * for the out-of-order side, which takes it up when it next works. */
static void note_inorder_anchor(utls_conn *c, uint64_t seq)
{
    utls_seqpred_record a = {0};

    a.offset = c->cur_offset;
    a.seq = PRED_SEQ(seq);
    a.wire_len = c->cur_wire_len;
    a.has_nonce = c->explicit_nonce && c->cur_has_nonce;
    a.explicit_nonce = c->cur_nonce;
    /* The hot path, with or without a hole: only a note. The stores are
     * brought up to date when the out-of-order side next works
     * (utls_ooo_sync). Adding every in-order record as an anchor while bytes
     * are held past a hole shifted the whole anchor table once per record,
     * and advance() drops all but the last in-order anchor anyway. */
    c->idle_anchor[0] = c->idle_anchor[1];
    c->idle_anchor[1] = a;
    if (c->num_idle_anchors < 2)
        c->num_idle_anchors++;
    c->stores_stale = 1;
    utls_seqpred_observe(c->pred, a.wire_len);
}

/* note_inorder_info keeps the metadata of application record |rr|, read in
 * order as |seq|, for UTLS_read_record(), and counts it. */
static void note_inorder_info(SSL *s, utls_conn *c, const SSL3_RECORD *rr, uint64_t seq)
{
    c->inorder_info.seq = seq;
    c->inorder_info.key_generation = c->gen;
    c->inorder_info.out_of_order = 0;
    c->inorder_info.stream_offset = c->cur_offset;
    c->inorder_info.wire_len = c->cur_wire_len;
    /* Its last byte came with the BIO read that completed it, before this
     * point: a clock read now is never earlier. Read here, once the record
     * authenticated and before its plaintext is copied to the caller, only in
     * a UTLS_read_record() call that asked for metadata: the serialising
     * clock read then waits for the decryption, which has finished, not for
     * a large copy still in flight, as it did when read after SSL_read_ex()
     * returned (or before it, after the push's copy). Any other read leaves 0,
     * and UTLS_read_record() reads the clock when it returns the record. */
    c->inorder_info.arrival_ns = c->stamp_inorder ? utls_now_ns() : 0;
    c->inorder_info_valid = 1;
    /* Counted here, once per record, rather than per read: a record is
     * decrypted in order once, and the reads that return it (in parts, or
     * after a buffer too small) follow. */
    if ((s->mode & SSL_MODE_UNORDERED) != 0 && rr->length > 0)
        c->stats.records_in_order++;
}

/* record_done_full is utls_hook_record_done for every case. */
static UTLS_COLD int record_done_full(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c;
    uint64_t seq;
    int i;

    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) != 0)
        utls_ern_tls12_record_done(s, rr); /* TLS 1.2: the offer (utls_ern.c) */
    c = s->utls;
    if (c == NULL || s->enc_read_ctx == NULL)
        return 1;
    seq = utls_inorder_seq(s) - 1; /* decryption counted it */
    if (c->ern_rx) /* numbers may come out of sequence order (utls_ern.c) */
        utls_ern_rx_done(s, c, seq);
    if ((s->mode & SSL_MODE_UNORDERED) != 0 && c->offset_known) {
        if (!c->post_handshake && !SSL_in_init(s))
            c->post_handshake = 1;
        if (utls_gen_setup(s, c))
            note_inorder_anchor(c, seq);
        if (rr->type == SSL3_RT_APPLICATION_DATA && c->ahead.n > 0
            && (c->ern_rx ? seqset_take_one(&c->ahead, seq) : seqset_take(&c->ahead, seq))) {
            /* Delivered out of order already: skip it, exactly once. */
            rr->length = 0;
            rr->read = 1;
            c->stats.records_skipped++;
            return 1;
        }
    }
    if (rr->type != SSL3_RT_APPLICATION_DATA)
        return 1;
    /* Explicit record numbers: negotiation messages and the numbers. */
    if ((s->mode & SSL_MODE_UTLS_NEGOTIATE) != 0) {
        if (!utls_ern_inorder(s, c, rr, seq))
            return 0;
        if (rr->read)
            return 1; /* a negotiation message, consumed */
    }
    if (c->num_ready > 0 && (i = ready_find(c, c->gen, seq)) >= 0)
        ready_remove(c, (size_t)i); /* verified early but not yet read: in order wins */
    note_inorder_info(s, c, rr, seq);
    return 1;
}

UTLS_HOT int utls_hook_record_done(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    uint64_t seq;

    /*
     * The common case takes a few lines: an application record in order,
     * after the handshake, under a key set up for out-of-order delivery,
     * without record numbers, with nothing delivered early or verified ahead
     * of it. What record_done_full would do then is exactly this.
     */
    if (c == NULL
        || (s->mode & (SSL_MODE_UNORDERED | SSL_MODE_UTLS_NEGOTIATE)) != SSL_MODE_UNORDERED
        || rr->type != SSL3_RT_APPLICATION_DATA || !c->offset_known || !c->post_handshake
        || !c->gen_ready || !c->ooo_possible || c->ern_rx || s->enc_read_ctx == NULL)
        return record_done_full(s, rr);
    seq = utls_inorder_seq(s) - 1; /* decryption counted it */
    if (c->ahead.n > 0 && c->ahead.v[0] == seq) {
        /*
         * The other common case past a hole: the record is the lowest one
         * delivered out of order (utls_hook_skip_decrypt passed it unread).
         * record_done_full would find it at the front of c->ahead, with
         * nothing below it to drop: skip it, exactly once.
         */
        note_inorder_anchor(c, seq);
        seqset_remove(&c->ahead, 0, 1);
        rr->length = 0;
        rr->read = 1;
        c->stats.records_skipped++;
        return 1;
    }
    if (c->ahead.n > 0 || c->num_ready > 0)
        return record_done_full(s, rr);
    note_inorder_anchor(c, seq);
    note_inorder_info(s, c, rr, seq);
    return 1;
}

/* skip_mark_read accounts for the in-order record |rr|, already delivered
 * out of order, as if decrypted (the read sequence number counts it) and
 * marks it read and empty; then utls_hook_record_done skips it. */
static void skip_mark_read(SSL *s, utls_conn *c, SSL3_RECORD *rr)
{
    unsigned char *rseq = RECORD_LAYER_get_read_sequence(&s->rlayer);
    size_t i;

    for (i = SEQ_NUM_SIZE; i > 0; i--)
        if (++rseq[i - 1] != 0)
            break;
    rr->type = SSL3_RT_APPLICATION_DATA;
    rr->length = 0;
    rr->off = 0;
    rr->read = 1;
    RECORD_LAYER_reset_empty_record_count(&s->rlayer);
    RECORD_LAYER_set_numrpipes(&s->rlayer, 1);
    c->stats.decryptions_saved++;
    utls_hook_record_done(s, rr); /* anchors, stores, and the skip itself */
}

int utls_hook_skip_decrypt(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    utls_reasm_run run;
    uint64_t seq;
    size_t i;

    if (c == NULL || c->ahead.n == 0 || !c->ooo_possible || rr->rec_version == SSL2_VERSION)
        return 0;
    seq = utls_inorder_seq(s);
    i = seqset_lower(&c->ahead, seq);
    if (i == c->ahead.n || c->ahead.v[i] != seq || c->ahead.off[i] != c->cur_offset
        || c->ahead.wire_len[i] != c->cur_wire_len || !utls_store_refresh(s, c)) {
        return 0;
    }
    if (c->store_shared && c->ahead.epoch[i] != UTLS_NO_EPOCH
        && c->ahead.epoch[i] == c->sig->store_epoch) {
        /*
         * One store (utls_bio_signals.store): the in-order stream of this BIO
         * is built from the very store the record was authenticated from, and
         * a byte there keeps the value it first arrived with; only an
         * eviction or a new store could change one, and either moves the
         * epoch. So these are the authenticated bytes, unread.
         */
    } else if (c->store_shared
               || !utls_reasm_find_run(c->store, &run, c->cur_offset)
               || run.offset + run.len < c->cur_offset + c->cur_wire_len
               /* Ciphertext on both sides: public bytes, no need for constant
                * time (CRYPTO_memcmp's byte loop would cost more than the
                * decryption). */
               || memcmp(run.data + (c->cur_offset - run.offset),
                         RECORD_LAYER_get_packet(&s->rlayer), c->cur_wire_len) != 0) {
        /*
         * A private copy (the tap: the kernel socket is the authority, and the
         * capture may have seen an injected copy) keeps the first bytes that
         * arrived at this offset, never overwritten, and those authenticated
         * as |seq|. Bytes equal to them authenticate too; any difference (an
         * injected copy, a store that dropped them, a changed epoch) and the
         * record is decrypted as usual, failing exactly as it would in stock
         * OpenSSL (and if it authenticates, it is still not delivered twice:
         * utls_hook_record_done finds it in c->ahead).
         */
        return 0;
    }
    skip_mark_read(s, c, rr);
    return 1;
}

int utls_hook_skip_body(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    utls_reasm_run run;
    uint64_t seq, body_off;
    size_t i, wire_len;
    unsigned char nonce[8];
    size_t nonce_len;
    utls_bio_discard discard;

    /*
     * Only where utls_hook_skip_decrypt would skip without looking at the
     * bytes, and only for the first record of a read without pipelining
     * (ssl3_get_record then reads one record), a plain header just read with
     * nothing behind it in the read buffer (no read-ahead), no explicit record
     * numbers (the record's number is in its body) and no SSLv2 header.
     */
    if (c == NULL || (s->mode & SSL_MODE_UNORDERED) == 0 || s->max_pipelines > 1
        || rr != RECORD_LAYER_get_rrec(&s->rlayer)
        || c->ahead.n == 0 || !c->ooo_possible || !c->offset_known
        || (s->mode & SSL_MODE_UTLS_NEGOTIATE) != 0 || c->ern_rx || s->enc_read_ctx == NULL
        || rr->rec_version == SSL2_VERSION || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->length == 0
        || RECORD_LAYER_get_packet_length(&s->rlayer) != SSL3_RT_HEADER_LENGTH
        || SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer)) != 0)
        return 0;
    wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    seq = utls_inorder_seq(s);
    i = seqset_lower(&c->ahead, seq);
    if (i == c->ahead.n || c->ahead.v[i] != seq || c->ahead.off[i] != c->next_offset
        || c->ahead.wire_len[i] != wire_len || !utls_store_refresh(s, c) || !c->store_shared
        || c->sig == NULL || c->ahead.epoch[i] == UTLS_NO_EPOCH
        || c->ahead.epoch[i] != c->sig->store_epoch)
        return 0;
    /*
     * One store, same epoch (see utls_hook_skip_decrypt): the BIO's in-order
     * bytes at this offset are the very bytes authenticated as |seq|, the
     * header just read included.
     */
    body_off = c->next_offset + SSL3_RT_HEADER_LENGTH;
    nonce_len = 0;
    if (!c->gen_ready || c->explicit_nonce) {
        /* The explicit nonce (TLS 1.2 AEAD) for the predictor: the body's
         * first bytes, from the store, which still holds them (the reader has
         * not passed them, and nothing evicted them, or the epoch would have
         * moved). Not read otherwise: the body is not in cache. */
        if (!utls_reasm_find_run(c->store, &run, body_off)
            || run.offset + run.len - body_off < rr->length)
            return 0;
        nonce_len = rr->length < sizeof(nonce) ? rr->length : sizeof(nonce);
        memcpy(nonce, run.data + (body_off - run.offset), nonce_len);
    }
    /* The BIO refuses unless its read point is the body's first byte and
     * the whole body is in order there: then nothing changed, read it.
     * Straight to its store when its signals name it (utls_next_fragment). */
    discard.offset = body_off;
    discard.len = rr->length;
    if (c->sig_bio == s->rbio && c->sig->events != NULL
            ? !utls_segstore_discard(c->sig->events, body_off, rr->length)
            : BIO_ctrl(s->rbio, UTLS_BIO_CTRL_DISCARD, 0, &discard) != 1)
        return 0;
    note_record_pos(c, wire_len, nonce_len > 0 ? nonce : NULL, nonce_len);
    /* The record is complete, its body not in the read buffer: the record
     * layer reads the next header next. */
    rr->input = rr->data = RECORD_LAYER_get_packet(&s->rlayer) + SSL3_RT_HEADER_LENGTH;
    rr->orig_len = 0;
    RECORD_LAYER_set_rstate(&s->rlayer, SSL_ST_READ_HEADER);
    RECORD_LAYER_reset_packet_length(&s->rlayer);
    RECORD_LAYER_clear_first_record(&s->rlayer);
    c->stats.bodies_skipped++;
    skip_mark_read(s, c, rr);
    return 1;
}

/* The metadata UTLS_read_record() reports for (a part of) ready record |r|. */
static void ready_info(utls_conn *c, const utls_ready_record *r)
{
    c->last_info.seq = r->seq;
    c->last_info.key_generation = r->gen;
    c->last_info.out_of_order = 1;
    c->last_info.stream_offset = r->offset;
    c->last_info.wire_len = r->wire_len;
    c->last_info.arrival_ns = r->arrival_ns;
    c->last_info_valid = 1;
}

/* Remembers ready record |r| as delivered, so the in-order path skips it. */
static int mark_delivered(utls_conn *c, const utls_ready_record *r)
{
    /* The next in-order record may be one: ssl3_get_record asks (it tests
     * may_skip before reading the body, utls_hook_skip_body). */
    if (r->gen == c->gen)
        c->hooks.may_skip = c->ooo_possible;
    return seqset_add(r->gen == c->gen ? &c->ahead : &c->next_ahead, r->seq, r->offset,
                      r->wire_len, r->store_epoch);
}

/* SSL_MODE_UNORDERED_PARTIAL: the next part of the record being returned. */
static int partial_read(utls_conn *c, unsigned char *buf, size_t len, int peek,
                        size_t *readbytes, int *out_ret)
{
    utls_ready_record *r = &c->partial;
    size_t n = r->len - c->partial_pos;

    if (n > len)
        n = len;
    memcpy(buf, r->data + c->partial_pos, n);
    *readbytes = n;
    ready_info(c, r);
    if (!peek) {
        c->partial_pos += n;
        if (c->partial_pos == r->len) {
            ready_free_data(c, r);
            c->partial_active = 0;
        }
    }
    *out_ret = 1;
    return UTLS_HOOK_HANDLED;
}

int utls_hook_read_bytes(SSL *s, unsigned char *buf, size_t len, int peek, size_t *readbytes,
                         int *out_ret)
{
    utls_conn *c;
    utls_ready_record *r;
    size_t n;

    if (SSL_in_init(s) || (s->shutdown & SSL_RECEIVED_SHUTDOWN) || ossl_statem_in_error(s))
        return UTLS_HOOK_PASS;
    if ((c = s->utls) == NULL && (c = utls_conn_get(s)) == NULL)
        return UTLS_HOOK_PASS;
    c->hooks.read_idle = 0;
    c->cleanse_plaintext = (s->options & SSL_OP_CLEANSE_PLAINTEXT) != 0;
    c->post_handshake = 1;
    if (c->partial_active)
        return partial_read(c, buf, len, peek, readbytes, out_ret);
    /* The hot path in order: the BIO's signals, read in place, say nothing
     * waits; no call. */
    if (s->rbio != NULL
        && (c->rescan_pending
            || !((c->sig_bio == s->rbio && c->sig != NULL && c->sig->pending == 0)
                 || utls_bio_quiet(s, c))))
        utls_pump(s, c);
    while (c->num_ready > 0 && c->ready[0].gen < c->gen)
        ready_remove(c, 0); /* records of an older key were read in order */
    if (c->num_ready == 0) {
        /* Before the in-order read (not after it failed: SSL_READING), with
         * no in-order byte in the segment BIO and none in OpenSSL's buffer,
         * that read could only fail with the retry flag: say so without it.
         * After a record delivered out of order the application's next read
         * comes here. */
        if (s->rwstate == SSL_NOTHING && c->sig_bio == s->rbio && c->sig != NULL
            && c->sig->read_is_push_only
            && utls_segstore_read_would_block(c->sig->events)
            && SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer)) == 0
            && RECORD_LAYER_get_packet_length(&s->rlayer) == 0) {
            BIO_clear_retry_flags(s->rbio);
            BIO_set_retry_read(s->rbio);
            s->rwstate = SSL_READING;
            *out_ret = -1;
            return UTLS_HOOK_HANDLED;
        }
        /* A blocking fragment source woke the read for fragments that
         * completed no record: go back to waiting in order. */
        if (s->rbio != NULL
            && !((c->sig_bio == s->rbio && c->sig != NULL && c->sig->pending == 0)
                 || utls_bio_quiet(s, c))
            && BIO_ctrl(s->rbio, UTLS_BIO_CTRL_TAKE_WAKEUP, 0, NULL) == 1)
            return UTLS_HOOK_RETRY;
        /*
         * Nothing is held for the reader. Until the BIO signals a fragment or
         * a wake-up (or a key change or reset clears this), the next call
         * would pass as well: ssl3_read_bytes tests that in place
         * (utls_hook_read_idle) instead of calling, twice per record.
         */
        if (!c->partial_active && !c->rescan_pending && c->sig != NULL && c->sig_bio == s->rbio
            && c->sig->pending == 0) {
            c->hooks.idle_bio = s->rbio;
            c->hooks.idle_pending = &c->sig->pending;
            c->hooks.read_idle = 1;
        }
        return UTLS_HOOK_PASS;
    }
    r = &c->ready[0];
    n = r->len;
    if (len < n) {
        if ((s->mode & SSL_MODE_UNORDERED_PARTIAL) == 0) {
            utls_raise(UTLS_R_BUFFER_TOO_SMALL, "record of %zu bytes, buffer of %zu", r->len,
                       len);
            *out_ret = -1;
            return UTLS_HOOK_HANDLED;
        }
        n = len; /* the first part; the rest follows (or, peeking, stays) */
    }
    if (!peek && !mark_delivered(c, r)) {
        /* Cannot remember it: let the in-order path deliver it instead. */
        ready_remove(c, 0);
        c->last_info_valid = 0;
        return UTLS_HOOK_PASS;
    }
    memcpy(buf, r->data, n);
    *readbytes = n;
    ready_info(c, r);
    if (!peek) {
        c->stats.records_out_of_order++;
        if (n < r->len) {
            /* SSL_MODE_UNORDERED_PARTIAL: the next reads return the rest
             * before anything else. */
            c->partial = *r;
            c->partial_pos = n;
            c->partial_active = 1;
            r->data = NULL; /* now owned by c->partial */
            r->buf = NULL;
            r->len = 0;
        }
        ready_remove(c, 0);
    }
    s->rwstate = SSL_NOTHING;
    *out_ret = 1;
    return UTLS_HOOK_HANDLED;
}

int utls_hook_deliver_inorder(SSL *s, SSL3_RECORD *rr, size_t len)
{
    if (len < rr->length && (s->mode & SSL_MODE_UNORDERED_PARTIAL) == 0) {
        utls_raise(UTLS_R_BUFFER_TOO_SMALL, "record of %zu bytes, buffer of %zu",
                   rr->length, len);
        return 0;
    }
    return 1;
}

size_t utls_hook_pending(const SSL *s)
{
    const utls_conn *c = s->utls;
    size_t i, num = 0;

    if (c == NULL || (s->mode & SSL_MODE_UNORDERED) == 0)
        return 0;
    if (c->partial_active)
        num += c->partial.len - c->partial_pos;
    for (i = 0; i < c->num_ready; i++)
        if (c->ready[i].gen >= c->gen)
            num += c->ready[i].len;
    return num;
}

void utls_hook_read_key_changed(SSL *s)
{
    utls_conn *c = utls_conn_get(s);
    utls_seqpred *next_pred;
    size_t i;

    if (c == NULL)
        return;
    c->hooks.read_idle = 0; /* a rescan may be due */
    if (c->post_handshake) {
        /* A KeyUpdate (or renegotiation): what was delivered under the next
         * key now belongs to the current one. */
        utls_seqset t = c->ahead;

        c->gen++;
        c->ahead = c->next_ahead;
        c->next_ahead = t;
    } else {
        c->ahead.n = 0;
    }
    c->next_ahead.n = 0;
    next_pred = c->pred_next;
    c->pred_next = NULL;
    c->next_valid = 0;
    c->next_seen = 0;
    if (c->post_handshake) {
        /* The next key's test keys become the current ones. */
        utls_ern_keys t = c->ern_cur;

        c->ern_cur = c->ern_next;
        c->ern_next = t;
        c->ern_next.valid = 0;
    } else {
        c->ern_cur.valid = 0;
    }
    c->gen_start_known = c->offset_known;
    c->gen_start_offset = c->next_offset;
    c->num_failed = 0;
    utls_aead_search_free(c->search); /* made again for the new key */
    c->search = NULL;
    /* New scanner; the predictor of what was the next key becomes the current
     * one (or a new one is made); the held bytes stay and are scanned again
     * under the new key (utls_pump). */
    utls_scan_free(c->scan);
    utls_seqpred_free(c->pred);
    c->scan = NULL;
    c->pred = NULL;
    if (c->post_handshake) {
        c->pred = next_pred;
        next_pred = NULL;
    }
    c->gen_ready = 0;
    c->num_idle_anchors = 0;
    c->stores_stale = 0;
    c->chain_valid = 0; /* the scanner it was synced with is gone */
    c->chain_anchor_pending = 0; /* numbered under the old key */
    /* With a shared store the bytes the reader has not taken stay held there
     * too; the pass is cheap when nothing is held (one sync of the noted
     * in-order records). */
    c->rescan_pending = c->store != NULL && utls_store_refresh(s, c);
    if (c->rescan_pending) {
        /* The rescan is paid for like the bytes' first arrival: a key change
         * is authenticated (it comes in order), so this is bounded by the
         * bytes held, once per key. */
        c->probe_budget += (double)utls_reasm_bytes_held(c->store)
            * (double)c->limits.max_probes_per_kib / 1024.0;
    }
    utls_seqpred_free(next_pred); /* not kept (handshake, renegotiation) */
    utls_copy_read_ctx(s, c); /* the key has not decrypted anything yet */
    for (i = c->num_ready; i > 0; i--)
        if (c->ready[i - 1].gen < c->gen)
            ready_remove(c, i - 1);
}

/* --- Public read call ---------------------------------------------------- */

/*
 * read_cannot_progress returns 1 when SSL_read_ex() on |s| could do nothing
 * but fail with SSL_ERROR_WANT_READ: the handshake is over and nothing
 * special is pending (no early data, renegotiation or async job, no shutdown
 * received, no error), OpenSSL holds no unread record or raw byte, uTLS
 * holds no record for the reader and no unprocessed fragment, and the
 * segment BIO has no in-order byte and has not reached its end. After every
 * record the application reads once more to learn this; the answer then
 * costs no pass through ssl3_read_bytes(), ssl3_get_record() and BIO_read().
 * Anything else, and any read BIO other than the one whose signals uTLS
 * reads, returns 0: the full read decides.
 */
static UTLS_HOT int read_cannot_progress(SSL *s, const utls_conn *c)
{
    SSL3_RECORD *rr = RECORD_LAYER_get_rrec(&s->rlayer);
    size_t i, num_recs = RECORD_LAYER_get_numrpipes(&s->rlayer);

    /* Records ssl3_read_bytes() has read to the end stay counted until its
     * next call: only those may be there. */
    for (i = 0; i < num_recs; i++) {
        if (!SSL3_RECORD_is_read(&rr[i]) || SSL3_RECORD_get_length(&rr[i]) != 0)
            return 0;
    }
    return (s->mode & (SSL_MODE_UNORDERED | SSL_MODE_ASYNC)) == SSL_MODE_UNORDERED
        && c->post_handshake && c->num_ready == 0 && !c->partial_active && !c->rescan_pending
        && c->sig != NULL && s->rbio != NULL && c->sig_bio == s->rbio
        && c->sig->read_is_push_only && c->sig->pending == 0
        && utls_segstore_read_would_block(c->sig->events)
        && s->handshake_func != NULL && !SSL_in_init(s) && !ossl_statem_in_error(s)
        && (s->shutdown & SSL_RECEIVED_SHUTDOWN) == 0
        && s->early_data_state == SSL_EARLY_DATA_NONE && !s->s3.renegotiate
        && SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer)) == 0
        && RECORD_LAYER_get_packet_length(&s->rlayer) == 0;
}

UTLS_HOT int UTLS_read_record(SSL *s, void *buf, size_t len, size_t *out_read,
                              UTLS_RECORD_INFO *out_info)
{
    utls_conn *c;
    int ret;

    if (s == NULL)
        return 0;
    if ((c = s->utls) == NULL && (c = utls_conn_get(s)) == NULL)
        return 0;
    c->last_info_valid = 0;
    if (read_cannot_progress(s, c)) {
        /* What the failed read would leave: the BIO's retry flag, SSL_READING
         * (SSL_get_error() reports SSL_ERROR_WANT_READ), errno cleared. */
        errno = 0;
        BIO_clear_retry_flags(s->rbio);
        BIO_set_retry_read(s->rbio);
        s->rwstate = SSL_READING;
        return 0;
    }
    c->stamp_inorder = out_info != NULL; /* note_inorder_info reads the clock */
    ret = SSL_read_ex(s, buf, len, out_read);
    c->stamp_inorder = 0;
    if (ret > 0 && out_info != NULL) {
        if (c->last_info_valid) {
            *out_info = c->last_info; /* out of order (utls_hook_read_bytes) */
        } else if ((s->mode & SSL_MODE_UNORDERED) != 0 && c->inorder_info_valid) {
            *out_info = c->inorder_info; /* in order (utls_hook_record_done) */
        } else {
            memset(out_info, 0, sizeof(*out_info)); /* mode off: no metadata */
            return ret;
        }
        if (out_info->arrival_ns == 0)
            out_info->arrival_ns = utls_now_ns(); /* decrypted unasked: now */
    }
    return ret;
}
