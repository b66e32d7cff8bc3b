/*
 * The read side of SSL_MODE_UNORDERED on the 3.5 base: ssl3_read_bytes'
 * hooks (deliver a verified record past a hole, or read in order; patch
 * 0005), the in-order records as the receive path sees them (where each
 * lies in the stream, its sequence number, the skip of a record already
 * delivered out of order; patches 0004-0005), SSL_pending, the read key
 * changing, and UTLS_read_record().
 *
 * 3.5's record layer (ssl/record/methods/, OSSL_RECORD_METHOD) reads,
 * authenticates and decrypts a record before ssl3_read_bytes() sees it, and
 * keeps its own read sequence number and keys (OSSL_RECORD_LAYER). So the
 * in-order hooks work one step later than 3.0's (lib/glue/inorder.c): on the
 * record the record layer returned, whose wire length it kept (orig_len).
 * Two hooks sit inside the record method (patch 0006): a record already
 * delivered out of order is not decrypted again (utls_hook35_skip_decrypt)
 * and, when the read BIO's own store still holds it unchanged, not even
 * read (utls_hook35_skip_body, as 3.0's utls_hook_skip_body).
 *
 * Glue: reads OpenSSL 3.5's record layer and SSL_CONNECTION.
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>

#include "glue_local.h"
#include "record/methods/recmethod_local.h" /* OSSL_RECORD_LAYER, TLS_RL_RECORD */

/* One copy of the big-endian helpers for the fork and the provider. */
#include "utls/be64.h"

/* An SSLv2-compatible ClientHello's header (the record layer keeps it
 * private). */
#define UTLS_SSL2_HEADER_LENGTH 2

/* rl35 (utls_rl35 outside this file) returns the read record layer of |sc|
 * when it is 3.5's own TLS record method (the one whose state uTLS reads:
 * not KTLS's, not DTLS's, not QUIC's), NULL otherwise. */
static ossl_inline const OSSL_RECORD_LAYER *rl35(const SSL_CONNECTION *sc)
{
    if (sc == NULL || sc->rlayer.rrlmethod != &ossl_tls_record_method)
        return NULL;
    return sc->rlayer.rrl;
}

const OSSL_RECORD_LAYER *utls_rl35(const SSL_CONNECTION *sc)
{
    return rl35(sc); /* inlined into this file's per-record hooks */
}

uint64_t utls_inorder_seq(SSL *s)
{
    const OSSL_RECORD_LAYER *rl = rl35(UTLS_SC(s));

    /* The record layer's counter is the number of its next record: records
     * it decrypted but ssl3_read_bytes() has not taken yet exist only with
     * pipelining, which utls_gen_setup() refuses. */
    return rl != NULL ? utls_load_be64(rl->sequence) : 0;
}

/* record_seq: the sequence number of the record the read record layer |rl|
 * returned last. Its counter is past every record it has decrypted, and it
 * decrypts a batch (pipelining) before returning the first. */
static uint64_t record_seq(const OSSL_RECORD_LAYER *rl)
{
    return utls_load_be64(rl->sequence) - 1 - (rl->num_recs - rl->curr_rec);
}

/* in_order_bytes_buffered: bytes the record layer of |sc| read from the BIO
 * and has not returned as a record (read-ahead, a partial record); unknown
 * (another record method) counts as some. */
static size_t in_order_bytes_buffered(const SSL_CONNECTION *sc)
{
    const OSSL_RECORD_LAYER *rl = rl35(sc);

    if (rl == NULL)
        return 1;
    return TLS_BUFFER_get_left(&rl->rbuf) + rl->packet_length;
}

int utls_inorder_partial_anchor(SSL *s, const utls_conn *c, utls_seqpred_record *a)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl = utls_rl35(sc);

    /*
     * The record layer has read the header of its next record but not all
     * of its body (a hole inside a record longer than a segment). Its number
     * is the next in order and its header says where it ends, which anchors
     * the records past the hole. Not authenticated, but the in-order
     * stream's own: if it is wrong, the in-order path fails on that record
     * as stock OpenSSL would.
     */
    if (rl == NULL || !c->inorder.offset_known || rl->max_pipelines > 1
        || rl->rstate != SSL_ST_READ_BODY || rl->packet_length < SSL3_RT_HEADER_LENGTH
        || rl->packet == NULL || rl->is_first_record)
        return 0;
    memset(a, 0, sizeof(*a));
    a->offset = c->inorder.next_offset;
    a->seq = PRED_SEQ(utls_inorder_seq(s));
    a->wire_len = SSL3_RT_HEADER_LENGTH + (((size_t)rl->packet[3] << 8) | rl->packet[4]);
    return 1;
}

/* --- In-order records (patches 0004, 0005) --------------------------------- */

/* note_record_start_from_bio sets where the record the record layer |rl|
 * just returned (|wire_len| bytes) starts, from the read BIO's offset (see
 * note_record_pos). Split off the per-record path: the offset's address is
 * taken, which would put a stack canary into every record's hook. */
static UTLS_NOINLINE void note_record_start_from_bio(SSL_CONNECTION *sc, utls_conn *c,
                                                     const OSSL_RECORD_LAYER *rl,
                                                     size_t wire_len)
{
    uint64_t read_off = 0;
    size_t left = TLS_BUFFER_get_left(&rl->rbuf);

    if (rl->num_recs == 1 && rl->prev == NULL && sc->rbio != NULL
        && BIO_ctrl(sc->rbio, UTLS_BIO_CTRL_READ_OFFSET, 0, &read_off) == 1
        && read_off >= (uint64_t)left + wire_len) {
        c->inorder.next_offset = read_off - left - wire_len;
        c->inorder.offset_known = 1;
    } else if (!c->inorder.offset_known) {
        /* A BIO that reports no offsets (no fragments either): counted
         * from here, as on 3.0. */
        c->inorder.next_offset = 0;
        c->inorder.offset_known = 1;
    }
}

/* note_record_pos notes where the record the record layer |rl| just
 * returned lies in the read BIO's stream: it is |wire_len| bytes long and
 * ends where the bytes the record layer read and still buffers begin. */
static ossl_inline void note_record_pos(SSL_CONNECTION *sc, utls_conn *c,
                                        const OSSL_RECORD_LAYER *rl, size_t wire_len)
{
    /*
     * The first record seen, and every record of the handshake: the bytes
     * BIO_read() returned, minus those the record layer holds past this
     * record (from a batch of one record, the record the layer read last).
     * During the handshake the record layer consumes records it never
     * returns (TLS 1.3's compatibility ChangeCipherSpec, early data it
     * cannot decrypt), so counting the records returned would fall behind;
     * there it reads no byte ahead (read-ahead starts with the application
     * keys), so the BIO's count is exact. After the handshake every record
     * is returned: the lengths are added up, which read-ahead and a new
     * record layer's carried-over bytes do not disturb.
     */
    if (!c->inorder.offset_known || !c->rx.post_handshake)
        note_record_start_from_bio(sc, c, rl, wire_len);
    c->inorder.cur_offset = c->inorder.next_offset;
    c->inorder.cur_wire_len = wire_len;
    c->inorder.cur_has_nonce = 0;
    /* TLS 1.2 AEAD: the explicit nonce, for the predictor (the record's
     * first 8 body bytes, which decryption in place leaves in the packet). */
    if ((!c->rx.gen_ready || c->rx.explicit_nonce) && rl->version != TLS1_3_VERSION
        && rl->num_recs == 1 && rl->packet != NULL
        && wire_len >= SSL3_RT_HEADER_LENGTH + 8) {
        c->inorder.cur_has_nonce = 1;
        c->inorder.cur_nonce = utls_load_be64(rl->packet + SSL3_RT_HEADER_LENGTH);
    }
    c->inorder.next_offset += wire_len;
}

/* note_inorder_info keeps the metadata of application record |rr|, read in
 * order as |seq|, for UTLS_read_record(), and counts it. */
static void note_inorder_info(utls_conn *c, const TLS_RECORD *rr, uint64_t seq, int pos_known)
{
    c->inorder.info.seq = seq;
    c->inorder.info.key_generation = c->rx.gen;
    c->inorder.info.out_of_order = 0;
    c->inorder.info.stream_offset = pos_known ? c->inorder.cur_offset : 0;
    c->inorder.info.wire_len = pos_known ? c->inorder.cur_wire_len : 0;
    /* As on 3.0 (lib/glue/inorder.c): the clock is read only in a
     * UTLS_read_record() call that asked for metadata. */
    c->inorder.info.arrival_ns = c->inorder.stamp ? utls_now_ns() : 0;
    c->inorder.info_valid = 1;
    if (rr->length > 0)
        c->stats.records_in_order++;
}

/*
 * skip_delivered empties record |rr|, which was already delivered out of
 * order, in ssl3_read_bytes()'s copy and in the record layer's own record:
 * ssl3_read_bytes() then releases it like any empty record (the record
 * layer counts it released) and reads on. Its plaintext is wiped when the
 * application asked for it (SSL_OP_CLEANSE_PLAINTEXT), as a release would.
 */
static void skip_delivered(utls_conn *c, TLS_RECORD *rr)
{
    TLS_RL_RECORD *rec = rr->rechandle;

    if (c->rx.cleanse_plaintext && rec->data != NULL)
        OPENSSL_cleanse(rec->data + rec->off, rec->length);
    rec->off += rec->length;
    rec->length = 0;
    rr->length = 0;
    rr->off = 0;
    c->stats.records_skipped++;
}

/* cbc_explicit_iv_len: the bytes of a TLS 1.1+ CBC record's explicit IV,
 * which tls1_cipher() takes off the record's orig_len when it decrypts
 * (3.5's orig_len is the wire length of the body otherwise); 0 for every
 * other cipher. */
static UTLS_NOINLINE size_t cbc_explicit_iv_len_12(const OSSL_RECORD_LAYER *rl)
{
    const EVP_CIPHER *ciph;
    int mode, bs;

    if (rl->enc_ctx == NULL || !RLAYER_USE_EXPLICIT_IV(rl)
        || (ciph = EVP_CIPHER_CTX_get0_cipher(rl->enc_ctx)) == NULL)
        return 0;
    mode = EVP_CIPHER_get_mode(ciph);
    bs = EVP_CIPHER_get_block_size(ciph);
    if (mode == EVP_CIPH_GCM_MODE || mode == EVP_CIPH_CCM_MODE || bs <= 1)
        return 0;
    return (size_t)bs;
}

static ossl_inline size_t cbc_explicit_iv_len(const OSSL_RECORD_LAYER *rl)
{
    return rl->version == TLS1_3_VERSION ? 0 : cbc_explicit_iv_len_12(rl);
}

/* take_ahead is utls_seqset_take() on the records delivered ahead |ahead|
 * (not empty) for in-order record |seq|. Past a hole the in-order path
 * reaches them in sequence: the first one is usually |seq|, found without
 * the search. */
static ossl_inline int take_ahead(utls_seqset *ahead, uint64_t seq)
{
    if (ahead->v[0] != seq)
        return utls_seqset_take(ahead, seq);
    utls_seqset_remove(ahead, 0, 1);
    return 1;
}

/* gen_ready is utls_gen_setup() (keygen.c) for the in-order hook: once the
 * key generation is set up, its answer without the call. */
static ossl_inline int gen_ready(SSL *s, const SSL_CONNECTION *sc, utls_conn *c)
{
    if (!c->rx.gen_ready)
        return utls_gen_setup(s, c);
    c->rx.ip_tunnel = (sc->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    return c->rx.ooo_possible;
}

UTLS_HOT int utls_hook35_record_read(SSL_CONNECTION *sc, TLS_RECORD *rr)
{
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    utls_conn *c = sc->utls != NULL ? sc->utls : utls_conn_get(s);
    const OSSL_RECORD_LAYER *rl = rl35(sc);
    const TLS_RL_RECORD *rec = rr->rechandle;
    uint64_t seq = 0;
    int pos_known = 0, i;

    if (c == NULL)
        return 1;
    if (rl != NULL && rec != NULL) {
        size_t hdr = rr->version == SSL2_VERSION ? UTLS_SSL2_HEADER_LENGTH
                                                 : SSL3_RT_HEADER_LENGTH;

        note_record_pos(sc, c, rl, hdr + rec->orig_len + cbc_explicit_iv_len(rl));
        pos_known = c->inorder.offset_known;
        seq = record_seq(rl);
    }
    if (rl != NULL && rec != NULL && pos_known && rl->enc_ctx != NULL) {
        if (!c->rx.post_handshake && !SSL_in_init(s))
            c->rx.post_handshake = 1;
        if (gen_ready(s, sc, c))
            utls_note_inorder_anchor(c, seq);
        /* A peer that numbers its records may write lower numbers later:
         * forget only this one (lib/glue/3.5/ern.c). */
        if (rr->type == SSL3_RT_APPLICATION_DATA && c->rx.ahead.n > 0
            && (c->ern.rx ? utls_seqset_take_one(&c->rx.ahead, seq, UTLS_ERN_REORDER_WINDOW)
                          : take_ahead(&c->rx.ahead, seq))) {
            /* Delivered out of order already: skip it, exactly once. Its
             * number still moves the receive window; nothing is stripped
             * from the emptied record (as 3.0's record_done_full()). */
            skip_delivered(c, rr);
            return (sc->mode & SSL_MODE_UTLS_NEGOTIATE) == 0 || utls_hook35_ern_record(sc, rr);
        }
    }
    /* Explicit record numbers (lib/glue/3.5/ern.c): the receive window, the
     * peer's switch token and the number, before anything below looks at
     * the record's plaintext. */
    if ((sc->mode & SSL_MODE_UTLS_NEGOTIATE) != 0 && !utls_hook35_ern_record(sc, rr))
        return 0;
    if (rr->type != SSL3_RT_APPLICATION_DATA)
        return 1;
    c->rx.post_handshake = 1;
    if (c->rx.ready.num > 0 && (i = utls_ready_find(c, c->rx.gen, seq)) >= 0)
        utls_ready_remove(c, (size_t)i); /* verified early but not yet read: in order wins */
    note_inorder_info(c, rr, rl != NULL && rec != NULL ? seq : 0, pos_known);
    return 1;
}

/* skip_decrypt is utls_hook35_skip_decrypt() once something was delivered
 * ahead: kept out of the hook, which every record passes through, with its
 * stack canary (|run|'s address is taken). */
static UTLS_NOINLINE int skip_decrypt(OSSL_RECORD_LAYER *rl, TLS_RL_RECORD *rr)
{
    SSL_CONNECTION *sc = rl->cbarg;
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    utls_conn *c = sc->utls;
    utls_reasm_run run;
    uint64_t seq, off;
    size_t i, wire_len;

    /* Only application data is ever delivered out of order (c->rx.ahead),
     * only from 3.5's own TLS record method, one record per batch. RFC 8446
     * 5.1: a record of another type between the fragments of a handshake
     * message ends the connection; one delivered ahead is left to that
     * check (ssl3_read_bytes()). */
    if (c == NULL || c->rx.ahead.n == 0 || !c->rx.ooo_possible || !c->inorder.offset_known
        || sc->rlayer.rrl != rl || sc->rlayer.rrlmethod != &ossl_tls_record_method
        || rr->type != SSL3_RT_APPLICATION_DATA || rr->rec_version == SSL2_VERSION
        || rl->packet == NULL || cbc_explicit_iv_len(rl) != 0
        || (sc->rlayer.handshake_fragment_len > 0 && SSL_CONNECTION_IS_TLS13(sc)))
        return 0;
    seq = utls_load_be64(rl->sequence);
    off = c->inorder.next_offset;
    wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    /* The first record delivered ahead is usually this one (take_ahead). */
    i = c->rx.ahead.v[0] == seq ? 0 : utls_seqset_lower(&c->rx.ahead, seq);
    if (i == c->rx.ahead.n || c->rx.ahead.v[i] != seq || c->rx.ahead.off[i] != off
        || c->rx.ahead.wire_len[i] != wire_len || !utls_store_refresh(s, c))
        return 0;
    if (c->rx.store_shared && c->rx.ahead.epoch[i] != UTLS_NO_EPOCH
        && c->rx.ahead.epoch[i] == c->rx.sig->store_epoch) {
        /* One store (utls_bio_signals.store), the same epoch: the in-order
         * bytes are the very bytes authenticated then (lib/glue/inorder.c). */
    } else if (c->rx.store_shared || !utls_reasm_find_run(c->rx.store, &run, off)
               || run.offset + run.len < off + wire_len
               /* Ciphertext on both sides: public bytes. */
               || memcmp(run.data + (off - run.offset), rl->packet, wire_len) != 0) {
        /* Any difference (an injected copy, a store that dropped them, a
         * moved epoch): decrypted as usual, failing as stock would, and if it
         * authenticates, still not delivered twice (c->rx.ahead). */
        return 0;
    }
    if (!tls_increment_sequence_ctr(rl))
        return 0; /* RLAYERfatal() already called: the wrap stock would hit */
    /* The record is complete and counted; its body is not needed. */
    rr->data = rr->input;
    rr->length = 0;
    rr->off = 0;
    c->stats.decryptions_saved++;
    return 1;
}

UTLS_HOT int utls_hook35_skip_decrypt(OSSL_RECORD_LAYER *rl, TLS_RL_RECORD *rr)
{
    const utls_conn *c = ((SSL_CONNECTION *)rl->cbarg)->utls;

    /* Nothing delivered ahead (every record in order): nothing to skip. */
    if (c == NULL || c->rx.ahead.n == 0 || !c->rx.ooo_possible)
        return 0;
    return skip_decrypt(rl, rr);
}

/* skip_body: utls_hook35_skip_body() once something was delivered ahead,
 * out of the hook every header passes (|nonce|: a stack canary). */
static UTLS_NOINLINE int skip_body(OSSL_RECORD_LAYER *rl, TLS_RL_RECORD *rr)
{
    SSL_CONNECTION *sc = rl->cbarg;
    utls_conn *c = sc->utls;
    uint64_t seq, off, body_off;
    size_t i, wire_len, nonce_len;
    unsigned char nonce[8];

    /*
     * As utls_hook35_skip_decrypt() would skip without looking at the
     * bytes, and only where the record layer has read this header alone:
     * one record per batch (no pipelining), nothing behind the header in
     * the read buffer (no read-ahead) and no previous epoch's buffered
     * bytes (rl->prev), the BIO read being the connection's read BIO. No
     * explicit record numbers (the number is in the body); no TLS 1.1/1.2
     * CBC record (tls1_cipher() takes its IV off orig_len, which
     * utls_hook35_record_read() adds back for a decrypted record only).
     */
    if (c == NULL || c->rx.ahead.n == 0 || !c->rx.ooo_possible || !c->inorder.offset_known
        || !c->rx.post_handshake || sc->rlayer.rrl != rl
        || sc->rlayer.rrlmethod != &ossl_tls_record_method || rl->max_pipelines > 1
        || sc->max_pipelines > 1 || rl->prev != NULL || rl->bio == NULL || rl->bio != sc->rbio
        || rr != &rl->rrec[0] || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->rec_version == SSL2_VERSION || rr->length == 0 || rl->packet == NULL
        || rl->rstate != SSL_ST_READ_BODY || rl->packet_length != SSL3_RT_HEADER_LENGTH
        || TLS_BUFFER_get_left(&rl->rbuf) != 0 || cbc_explicit_iv_len(rl) != 0
        || (sc->mode & SSL_MODE_UTLS_NEGOTIATE) != 0 || c->ern.rx
        || (sc->rlayer.handshake_fragment_len > 0 && SSL_CONNECTION_IS_TLS13(sc)))
        return 0;
    seq = utls_load_be64(rl->sequence);
    if (seq == UINT64_MAX)
        return 0; /* the counter would wrap: the usual path fails as stock does */
    off = c->inorder.next_offset;
    wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    /* The first record delivered ahead is usually this one (take_ahead). */
    i = c->rx.ahead.v[0] == seq ? 0 : utls_seqset_lower(&c->rx.ahead, seq);
    /* The read BIO's own store from its signals, not utls_store_refresh():
     * another BIO's would fail the epoch test anyway (utls_forget_bio). */
    if (i == c->rx.ahead.n || c->rx.ahead.v[i] != seq || c->rx.ahead.off[i] != off
        || c->rx.ahead.wire_len[i] != wire_len || c->rx.sig == NULL
        || c->rx.sig_bio != rl->bio || c->rx.sig->store == NULL
        || c->rx.ahead.epoch[i] == UTLS_NO_EPOCH
        || c->rx.ahead.epoch[i] != c->rx.sig->store_epoch)
        return 0;
    c->rx.store = c->rx.sig->store; /* as utls_store_refresh() */
    c->rx.store_shared = 1;
    /*
     * One store, the same epoch (lib/glue/inorder.c, utls_hook_skip_body):
     * the BIO's in-order bytes at |off| are the very bytes authenticated as
     * |seq|, the header just read included. TLS 1.2 AEAD: the explicit
     * nonce is what utls_hook35_record_read() reads from the packet for the
     * predictor; it is taken from the store, which still holds it (the
     * reader has not passed it, and an eviction would have moved the
     * epoch), before the discard lets the store drop it, and written to the
     * packet once the body is skipped. The record layer's buffer holds a
     * whole record from the packet on (the header's length was checked
     * against it).
     */
    body_off = off + SSL3_RT_HEADER_LENGTH;
    if (!utls_skip_body_discard(c, rl->bio, body_off, rr->length,
                                (!c->rx.gen_ready || c->rx.explicit_nonce)
                                    && rl->version != TLS1_3_VERSION,
                                nonce, &nonce_len))
        return 0;
    if (nonce_len > 0)
        memcpy(rl->packet + SSL3_RT_HEADER_LENGTH, nonce, nonce_len);
    if (!tls_increment_sequence_ctr(rl))
        return 0; /* not reached: |seq| is below UINT64_MAX */
    /* A whole record, as the body read would leave it (tls_get_more_records),
     * counted and empty. */
    rl->rstate = SSL_ST_READ_HEADER;
    rl->packet_length = 0;
    rl->is_first_record = 0;
    rr->input = rr->data = rl->packet + SSL3_RT_HEADER_LENGTH;
    rr->orig_len = rr->length;
    rr->length = 0;
    rr->off = 0;
    c->stats.decryptions_saved++;
    c->stats.bodies_skipped++;
    return 1;
}

UTLS_HOT int utls_hook35_skip_body(OSSL_RECORD_LAYER *rl, TLS_RL_RECORD *rr)
{
    const utls_conn *c = ((SSL_CONNECTION *)rl->cbarg)->utls;

    /* Nothing delivered ahead (every record in order): nothing to skip. */
    if (c == NULL || c->rx.ahead.n == 0)
        return 0;
    return skip_body(rl, rr);
}

int utls_hook35_deliver_inorder(SSL_CONNECTION *sc, TLS_RECORD *rr, size_t len)
{
    if (len < rr->length && (sc->mode & SSL_MODE_UNORDERED_PARTIAL) == 0) {
        utls_raise(UTLS_R_BUFFER_TOO_SMALL, "record of %zu bytes, buffer of %zu", rr->length,
                   len);
        return 0;
    }
    return 1;
}

/* --- ssl3_read_bytes (patch 0005) ------------------------------------------ */

/*
 * evloop_note_read publishes, for a poller thread (lib/bio/evloop.c), how many
 * records this SSL holds for the reader, and counts a read after a readiness
 * report for captured bytes alone that delivered no early record (a spurious
 * wake-up). |delivered_early|: this read returns a record verified past a
 * hole.
 */
static void evloop_note_read(SSL_CONNECTION *sc, utls_conn *c, int delivered_early)
{
    utls_bio_signals *sig;

    if (c->rx.sig == NULL || c->rx.sig_bio != sc->rbio)
        return;
    sig = (utls_bio_signals *)c->rx.sig; /* the fields below are the SSL's to write */
    __atomic_store_n(&sig->held_for_reader,
                     c->rx.ready.num + (c->rx.ready.partial_active ? 1 : 0), __ATOMIC_RELEASE);
    if (delivered_early) {
        __atomic_store_n(&sig->offered, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&sig->spurious_run, 0, __ATOMIC_RELAXED);
    } else if (__atomic_exchange_n(&sig->offered, 0, __ATOMIC_ACQ_REL)) {
        __atomic_add_fetch(&sig->spurious, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&sig->spurious_run, 1, __ATOMIC_RELAXED);
    }
}

/*
 * inorder_goes_first: among records deliverable now, the lowest sequence
 * number goes first. When a retransmission has filled the hole before ready
 * record |r| (the read BIO can return every byte up to the end of |r| without
 * waiting), the in-order path reads the records below |r| first (skipping
 * those delivered ahead) and reaches |r| in order; also when |r| is next (a
 * skipped record brings ssl3_read_bytes() back here, where 3.0 read on), and
 * when |r| is of a later key (no ERN): the in-order path reads the KeyUpdate.
 */
static int inorder_goes_first(SSL *s, SSL_CONNECTION *sc, const utls_conn *c,
                              const utls_ready_record *r)
{
    uint64_t end = 0;

    if (r->gen < c->rx.gen || sc->rbio == NULL || (r->gen > c->rx.gen && c->ern.rx)
        || (r->gen == c->rx.gen && utls_inorder_seq(s) > r->seq))
        return 0;
    if (!utls_bio_inorder_end(c, sc->rbio, &end))
        return 0;
    return end >= r->offset + r->wire_len;
}

int utls_hook_read_bytes(SSL *s, unsigned char *buf, size_t len, int peek, size_t *readbytes,
                         int *out_ret)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    utls_conn *c;
    utls_ready_record *r;
    int ret;

    /* SSL_in_init(), ossl_statem_in_error() read in place: two calls saved */
    if (sc == NULL || sc->statem.in_init || (sc->shutdown & SSL_RECEIVED_SHUTDOWN)
        || sc->statem.state == MSG_FLOW_ERROR)
        return UTLS_HOOK_PASS;
    if ((c = sc->utls) == NULL && (c = utls_conn_get(s)) == NULL)
        return UTLS_HOOK_PASS;
    c->hooks.read_idle = 0;
    c->rx.cleanse_plaintext = (sc->options & SSL_OP_CLEANSE_PLAINTEXT) != 0;
    c->rx.ip_tunnel = (sc->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    c->rx.post_handshake = 1;
    if (c->rx.ready.partial_active) {
        ret = utls_ready_partial_read(c, buf, len, peek, readbytes, out_ret);
        evloop_note_read(sc, c, 1);
        return ret;
    }
    /* The BIO's signals, read in place, say whether anything waits. */
    if (sc->rbio != NULL
        && (c->rx.rescan_pending
            || !((c->rx.sig_bio == sc->rbio && c->rx.sig != NULL && c->rx.sig->pending == 0)
                 || utls_bio_quiet(s, c))))
        utls_pump(s, c);
    while (c->rx.ready.num > 0 && c->rx.ready.rec[0].gen < c->rx.gen)
        utls_ready_remove(c, 0); /* records of an older key were read in order */
    if (c->rx.ready.num == 0) {
        evloop_note_read(sc, c, 0);
        /* Before the in-order read, with no in-order byte in the segment BIO
         * and none in the record layer, that read could only fail with the
         * retry flag: say so without it. */
        if (sc->rwstate == SSL_NOTHING && c->rx.sig_bio == sc->rbio && c->rx.sig != NULL
            && c->rx.sig->read_is_push_only
            && utls_segstore_read_would_block(c->rx.sig->events)
            && in_order_bytes_buffered(sc) == 0) {
            BIO_clear_retry_flags(sc->rbio);
            BIO_set_retry_read(sc->rbio);
            sc->rwstate = SSL_READING;
            *out_ret = -1;
            return UTLS_HOOK_HANDLED;
        }
        /* A blocking fragment source woke the read for fragments that
         * completed no record: go back to waiting in order. */
        if (sc->rbio != NULL
            && !((c->rx.sig_bio == sc->rbio && c->rx.sig != NULL && c->rx.sig->pending == 0)
                 || utls_bio_quiet(s, c))
            && BIO_ctrl(sc->rbio, UTLS_BIO_CTRL_TAKE_WAKEUP, 0, NULL) == 1)
            return UTLS_HOOK_RETRY;
        /* Nothing is held for the reader: until the BIO signals a fragment
         * or a wake-up (or a key change or reset clears this), the next call
         * would pass as well (utls_hook_read_idle). */
        if (!c->rx.ready.partial_active && !c->rx.rescan_pending && c->rx.sig != NULL
            && c->rx.sig_bio == sc->rbio && c->rx.sig->pending == 0) {
            c->hooks.idle_bio = sc->rbio;
            c->hooks.idle_pending = &c->rx.sig->pending;
            c->hooks.read_idle = 1;
        }
        return UTLS_HOOK_PASS;
    }
    r = &c->rx.ready.rec[0];
    if (inorder_goes_first(s, sc, c, r)) {
        evloop_note_read(sc, c, 1); /* a record is delivered, in order */
        return UTLS_HOOK_PASS;
    }
    switch (utls_ready_deliver(c, (sc->mode & SSL_MODE_UNORDERED_PARTIAL) != 0, buf, len, peek,
                               readbytes)) {
    case UTLS_READY_TOO_SMALL:
        *out_ret = -1;
        return UTLS_HOOK_HANDLED;
    case UTLS_READY_IN_ORDER:
        return UTLS_HOOK_PASS;
    case UTLS_READY_DELIVERED:
        break;
    }
    evloop_note_read(sc, c, 1);
    sc->rwstate = SSL_NOTHING;
    *out_ret = 1;
    return UTLS_HOOK_HANDLED;
}

int utls_hook35_wakeup_only(SSL_CONNECTION *sc)
{
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    utls_conn *c = sc->utls;

    if (sc->rbio == NULL || (c == NULL && (c = utls_conn_get(s)) == NULL))
        return 0;
    /*
     * A blocking tap returns from a read when captured segments wait, for
     * utls_hook_read_bytes() to look at them; a handshake read has no use
     * for them (no application key yet, or a post-handshake message): the
     * pump takes them (before the handshake ends it keeps nothing, and the
     * bytes come in order), and then the tap waits for in-order bytes again.
     */
    if (!utls_bio_quiet(s, c))
        utls_pump(s, c);
    return BIO_ctrl(sc->rbio, UTLS_BIO_CTRL_TAKE_WAKEUP, 0, NULL) == 1;
}

size_t utls_hook_pending(const SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC((SSL *)s);
    const utls_conn *c = sc != NULL ? sc->utls : NULL;
    size_t i, num = 0;

    if (c == NULL || (sc->mode & SSL_MODE_UNORDERED) == 0)
        return 0;
    if (c->rx.ready.partial_active)
        num += c->rx.ready.partial.len - c->rx.ready.partial_pos;
    for (i = 0; i < c->rx.ready.num; i++)
        if (c->rx.ready.rec[i].gen >= c->rx.gen)
            num += c->rx.ready.rec[i].len;
    return num;
}

void utls_hook_rbio_changed(SSL *s)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    utls_conn *c = sc != NULL ? sc->utls : NULL;

    if (c == NULL)
        return;
    /* The next entry point asks the new BIO (utls_bio_quiet), even one at
     * the freed one's address, and points c->rx.store anew. */
    utls_forget_bio(c);
    if (c->rx.store_shared) {
        c->rx.store = NULL;
        c->rx.store_shared = 0;
    }
}

/* --- Key changes (patch 0004) ---------------------------------------------- */

void utls_hook35_read_key_changed(SSL_CONNECTION *sc, int level)
{
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    utls_conn *c = sc->utls;
    utls_seqpred *next_pred;
    int update;
    size_t i;

    if (c == NULL || level == OSSL_RECORD_PROTECTION_LEVEL_NONE)
        return;
    c->hooks.read_idle = 0; /* a rescan may be due */
    c->inorder.info_valid = 0;
    /* A KeyUpdate (or a renegotiation): what was delivered under the next
     * key now belongs to the current one. */
    update = c->rx.post_handshake && level == OSSL_RECORD_PROTECTION_LEVEL_APPLICATION;
    if (update) {
        utls_seqset t = c->rx.ahead;

        c->rx.gen++;
        c->rx.ahead = c->rx.next.ahead;
        c->rx.next.ahead = t;
    } else {
        c->rx.ahead.n = 0;
    }
    c->rx.next.ahead.n = 0;
    next_pred = c->rx.next.pred;
    c->rx.next.pred = NULL;
    /* Nothing verified under the new key yet: its predictor still starts
     * from the sizes seen so far (utls_pred_next_gen), not from nothing. */
    if (update && next_pred == NULL)
        next_pred = utls_pred_next_gen(c);
    c->rx.next.valid = 0;
    c->rx.next.seen = 0;
    utls_ern_read_key_changed(c, update);
    c->rx.gen_start_known = c->inorder.offset_known;
    c->rx.gen_start_offset = c->inorder.next_offset;
    c->rx.failed.num = 0;
    utls_aead_search_free(c->probe.search);
    c->probe.search = NULL;
    /* New scanner; the predictor of what was the next key becomes the current
     * one (or a new one is made); the held bytes stay and are scanned again
     * under the new key (utls_pump). */
    utls_scan_free(c->rx.scan);
    utls_seqpred_free(c->rx.pred);
    c->rx.scan = NULL;
    c->rx.pred = NULL;
    if (update) {
        c->rx.pred = next_pred;
        next_pred = NULL;
    }
    c->rx.gen_ready = 0;
    c->rx.num_idle_anchors = 0;
    c->rx.stores_stale = 0;
    c->rx.chain.valid = 0;
    c->rx.chain.anchor_pending = 0;
    c->rx.rescan_pending = c->rx.store != NULL && utls_store_refresh(s, c);
    if (c->rx.rescan_pending) {
        /* Paid for like the bytes' first arrival: a key change comes in
         * order, so this is bounded by the bytes held, once per key. */
        c->rx.probe_budget += (double)utls_reasm_bytes_held(c->rx.store)
            * (double)c->limits.max_probes_per_kib / 1024.0;
    }
    utls_seqpred_free(next_pred);
    utls_copy_read_ctx(s, c); /* the key has not decrypted anything yet */
    for (i = c->rx.ready.num; i > 0; i--)
        if (c->rx.ready.rec[i - 1].gen < c->rx.gen)
            utls_ready_remove(c, i - 1);
}

/* --- Public read call ---------------------------------------------------- */

/*
 * read_cannot_progress returns 1 when SSL_read_ex() on |sc| could do nothing
 * but fail with SSL_ERROR_WANT_READ (as lib/glue/read.c on 3.0): the
 * handshake is over and nothing special is pending (no early data,
 * renegotiation or async job, no shutdown received, no error), neither
 * ssl3_read_bytes() nor the read record layer holds an unread record or a
 * raw byte, uTLS holds no record for the reader and no unprocessed
 * fragment, and the segment BIO has no in-order byte and has not reached
 * its end. After every record the application reads once more to learn
 * this; the answer then costs no pass through ssl3_read_bytes(), the record
 * layer and BIO_read(). Anything else returns 0: the full read decides.
 */
static int read_cannot_progress(SSL_CONNECTION *sc, const utls_conn *c)
{
    const OSSL_RECORD_LAYER *rl = rl35(sc);

    /* First what fails when a record can be read (a fragment pending, bytes
     * in order). rl->prev, not rrlnext (on 3.5 an empty BIO for the next
     * record layer, never NULL): what a previous record layer left, until
     * read dry. The full read frees buffers with SSL_MODE_RELEASE_BUFFERS. */
    return c->rx.sig != NULL && sc->rbio != NULL && c->rx.sig_bio == sc->rbio
        && c->rx.sig->pending == 0 && c->rx.sig->read_is_push_only
        && utls_segstore_read_would_block(c->rx.sig->events) && rl != NULL
        && sc->rlayer.curr_rec >= sc->rlayer.num_recs
        && rl->curr_rec >= rl->num_recs && rl->prev == NULL
        && (sc->mode & (SSL_MODE_UNORDERED | SSL_MODE_ASYNC | SSL_MODE_RELEASE_BUFFERS))
            == SSL_MODE_UNORDERED
        && c->rx.post_handshake && c->rx.ready.num == 0 && !c->rx.ready.partial_active
        && !c->rx.rescan_pending && rl->bio == sc->rbio
        && sc->handshake_func != NULL && !sc->statem.in_init
        && sc->statem.state != MSG_FLOW_ERROR /* SSL_in_init(), ossl_statem_in_error() */
        && (sc->shutdown & SSL_RECEIVED_SHUTDOWN) == 0
        && sc->early_data_state == SSL_EARLY_DATA_NONE && !sc->s3.renegotiate
        && in_order_bytes_buffered(sc) == 0;
}

int UTLS_read_record(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_RECORD_INFO *out_info)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    utls_conn *c;
    int ret;

    if (sc == NULL)
        return 0;
    if ((c = sc->utls) == NULL && (c = utls_conn_get(s)) == NULL)
        return 0;
    c->last_info_valid = 0;
    if (read_cannot_progress(sc, c)) {
        /* What the failed read would leave: the BIO's retry flag, SSL_READING
         * (SSL_get_error() reports SSL_ERROR_WANT_READ), errno cleared. */
        errno = 0;
        BIO_clear_retry_flags(sc->rbio);
        BIO_set_retry_read(sc->rbio);
        sc->rwstate = SSL_READING;
        return 0;
    }
    c->inorder.stamp = out_info != NULL;
    ret = SSL_read_ex(s, buf, len, out_read);
    c->inorder.stamp = 0;
    if (ret > 0 && out_info != NULL) {
        if (c->last_info_valid) {
            *out_info = c->last_info; /* out of order (utls_hook_read_bytes) */
        } else if ((sc->mode & SSL_MODE_UNORDERED) != 0 && c->inorder.info_valid) {
            /* sc->mode, not SSL_get_mode(): on 3.5 every SSL_CTRL_MODE call
             * also hands the mode to the record layer (tls_set_options(),
             * OSSL_PARAM lookups by name), about 400 instructions a record. */
            *out_info = c->inorder.info; /* in order (utls_hook35_record_read) */
        } else {
            memset(out_info, 0, sizeof(*out_info)); /* mode off: no metadata */
            return ret;
        }
        if (out_info->arrival_ns == 0)
            out_info->arrival_ns = utls_now_ns(); /* decrypted unasked: now */
    }
    return ret;
}
