/*
 * The in-order record hooks (utls_hooks.h): ssl3_get_record tells the
 * runtime where each record lies and what it was, and skips the decryption
 * or the body of a record already delivered out of order. Glue: reads and
 * writes OpenSSL's record layer.
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

/* An SSLv2-compatible ClientHello's header (ssl3_record.c keeps it private). */
#define UTLS_SSL2_HEADER_LENGTH 2

void utls_hook_rbio_changed(SSL *s)
{
    utls_conn *c = s->utls;

    /* The next entry point asks the new BIO (utls_bio_quiet): sig_bio is
     * NULL, so even a BIO at the freed one's address is asked again; and it
     * points c->rx.store anew (utls_store_refresh) before reading it. */
    utls_forget_bio(c);
    if (c->rx.store_shared) {
        c->rx.store = NULL;
        c->rx.store_shared = 0;
    }
}

/* --- Hooks --------------------------------------------------------------- */

/* note_record_pos notes that the record read in order now starts at
 * c->inorder.next_offset and is |wire_len| bytes long; |body| (NULL for an SSLv2
 * header) is its |body_len| bytes after the header, read for the explicit
 * nonce only. */
static UTLS_HOT inline void note_record_pos(utls_conn *c, size_t wire_len,
                                            const unsigned char *body, size_t body_len)
{
    c->inorder.cur_offset = c->inorder.next_offset;
    c->inorder.cur_wire_len = wire_len;
    c->inorder.cur_has_nonce = 0;
    /* The nonce matters only to ciphers with an explicit one (known once the
     * key's out-of-order state is set up, in utls_hook_record_done). */
    if ((!c->rx.gen_ready || c->rx.explicit_nonce) && body_len >= 8 && body != NULL) {
        c->inorder.cur_has_nonce = 1;
        c->inorder.cur_nonce = be64(body);
    }
    c->inorder.next_offset += wire_len;
    /* ssl3_get_record calls utls_hook_skip_decrypt only if this is set. */
    c->hooks.may_skip = c->rx.ahead.n > 0 && c->rx.ooo_possible;
}

UTLS_HOT void utls_hook_record_read(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls != NULL ? s->utls : utls_conn_get(s);
    size_t hdr = rr->rec_version == SSL2_VERSION ? UTLS_SSL2_HEADER_LENGTH : SSL3_RT_HEADER_LENGTH;

    if (c == NULL)
        return;
    if (!c->inorder.offset_known) {
        /* The first record seen: where it starts in the BIO's stream is the
         * bytes BIO_read() has returned minus those still buffered. */
        uint64_t read_off = 0;

        if (s->rbio != NULL && BIO_ctrl(s->rbio, UTLS_BIO_CTRL_READ_OFFSET, 0, &read_off) == 1)
            c->inorder.next_offset = read_off
                                     - SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer))
                                     - RECORD_LAYER_get_packet_length(&s->rlayer);
        else
            c->inorder.next_offset = 0;
        c->inorder.offset_known = 1;
    }
    note_record_pos(c, hdr + rr->length,
                    rr->rec_version != SSL2_VERSION
                        ? RECORD_LAYER_get_packet(&s->rlayer) + SSL3_RT_HEADER_LENGTH
                        : NULL,
                    rr->length);
}

/* note_inorder_info keeps the metadata of application record |rr|, read in
 * order as |seq|, for UTLS_read_record(), and counts it. */
static void note_inorder_info(SSL *s, utls_conn *c, const SSL3_RECORD *rr, uint64_t seq)
{
    c->inorder.info.seq = seq;
    c->inorder.info.key_generation = c->rx.gen;
    c->inorder.info.out_of_order = 0;
    c->inorder.info.stream_offset = c->inorder.cur_offset;
    c->inorder.info.wire_len = c->inorder.cur_wire_len;
    /* Its last byte came with the BIO read that completed it, before this
     * point: a clock read now is never earlier. Read here, once the record
     * authenticated and before its plaintext is copied to the caller, only in
     * a UTLS_read_record() call that asked for metadata: the serialising
     * clock read then waits for the decryption, which has finished, not for
     * a large copy still in flight, as it did when read after SSL_read_ex()
     * returned (or before it, after the push's copy). Any other read leaves 0,
     * and UTLS_read_record() reads the clock when it returns the record. */
    c->inorder.info.arrival_ns = c->inorder.stamp ? utls_now_ns() : 0;
    c->inorder.info_valid = 1;
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
        utls_ern_tls12_record_done(s, rr); /* TLS 1.2: the offer (lib/glue/ern_hooks.c) */
    c = s->utls;
    if (c == NULL || s->enc_read_ctx == NULL)
        return 1;
    seq = utls_inorder_seq(s) - 1; /* decryption counted it */
    if (c->ern.rx) /* numbers may come out of sequence order (lib/glue/ern_hooks.c) */
        utls_ern_rx_done(s, c, seq);
    if ((s->mode & SSL_MODE_UNORDERED) != 0 && c->inorder.offset_known) {
        if (!c->rx.post_handshake && !SSL_in_init(s))
            c->rx.post_handshake = 1;
        if (utls_gen_setup(s, c))
            utls_note_inorder_anchor(c, seq);
        if (rr->type == SSL3_RT_APPLICATION_DATA && c->rx.ahead.n > 0
            && (c->ern.rx ? utls_seqset_take_one(&c->rx.ahead, seq, UTLS_ERN_REORDER_WINDOW)
                          : utls_seqset_take(&c->rx.ahead, seq))) {
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
    if (c->rx.ready.num > 0 && (i = utls_ready_find(c, c->rx.gen, seq)) >= 0)
        utls_ready_remove(c, (size_t)i); /* verified early but not yet read: in order wins */
    note_inorder_info(s, c, rr, seq);
    return 1;
}

/*
 * interleaved_handshake: RFC 8446 5.1: "Handshake messages MUST NOT be
 * interleaved with other record types." While part of a handshake message's
 * header waits in the record layer, stock ssl3_read_bytes() ends the
 * connection at the next non-handshake record (unexpected_message,
 * SSL_R_MIXED_HANDSHAKE_AND_NON_HANDSHAKE_DATA). A record that was already
 * delivered out of order must reach that check too, not be skipped past it:
 * the skip paths leave such a record to the stock code.
 */
static int interleaved_handshake(const SSL *s, int type)
{
    return type != SSL3_RT_HANDSHAKE && s->rlayer.handshake_fragment_len > 0 && SSL_IS_TLS13(s);
}

UTLS_HOT int utls_hook_record_done(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    uint64_t seq;

    /* Only a record delivered ahead is skipped: nothing to check without one. */
    if (c != NULL && c->rx.ahead.n > 0 && interleaved_handshake(s, rr->type))
        return 1; /* ssl3_read_bytes() fails the connection next, as stock does */

    /*
     * The common case takes a few lines: an application record in order,
     * after the handshake, under a key set up for out-of-order delivery,
     * without record numbers, with nothing delivered early or verified ahead
     * of it. What record_done_full would do then is exactly this.
     */
    if (c == NULL
        || (s->mode & (SSL_MODE_UNORDERED | SSL_MODE_UTLS_NEGOTIATE)) != SSL_MODE_UNORDERED
        || rr->type != SSL3_RT_APPLICATION_DATA || !c->inorder.offset_known || !c->rx.post_handshake
        || !c->rx.gen_ready || !c->rx.ooo_possible || c->ern.rx || s->enc_read_ctx == NULL)
        return record_done_full(s, rr);
    seq = utls_inorder_seq(s) - 1; /* decryption counted it */
    if (c->rx.ahead.n > 0 && c->rx.ahead.v[0] == seq) {
        /*
         * The other common case past a hole: the record is the lowest one
         * delivered out of order (utls_hook_skip_decrypt passed it unread).
         * record_done_full would find it at the front of c->rx.ahead, with
         * nothing below it to drop: skip it, exactly once.
         */
        utls_note_inorder_anchor(c, seq);
        utls_seqset_remove(&c->rx.ahead, 0, 1);
        rr->length = 0;
        rr->read = 1;
        c->stats.records_skipped++;
        return 1;
    }
    if (c->rx.ahead.n > 0 || c->rx.ready.num > 0)
        return record_done_full(s, rr);
    utls_note_inorder_anchor(c, seq);
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

    /* Only application data is ever delivered out of order (c->rx.ahead). */
    if (c == NULL || c->rx.ahead.n == 0 || !c->rx.ooo_possible || rr->rec_version == SSL2_VERSION
        || interleaved_handshake(s, SSL3_RT_APPLICATION_DATA))
        return 0;
    seq = utls_inorder_seq(s);
    i = utls_seqset_lower(&c->rx.ahead, seq);
    if (i == c->rx.ahead.n || c->rx.ahead.v[i] != seq || c->rx.ahead.off[i] != c->inorder.cur_offset
        || c->rx.ahead.wire_len[i] != c->inorder.cur_wire_len || !utls_store_refresh(s, c)) {
        return 0;
    }
    if (c->rx.store_shared && c->rx.ahead.epoch[i] != UTLS_NO_EPOCH
        && c->rx.ahead.epoch[i] == c->rx.sig->store_epoch) {
        /*
         * One store (utls_bio_signals.store): the in-order stream of this BIO
         * is built from the very store the record was authenticated from, and
         * a byte there keeps the value it first arrived with; only an
         * eviction or a new store could change one, and either moves the
         * epoch. So these are the authenticated bytes, unread.
         */
    } else if (c->rx.store_shared
               || !utls_reasm_find_run(c->rx.store, &run, c->inorder.cur_offset)
               || run.offset + run.len < c->inorder.cur_offset + c->inorder.cur_wire_len
               /* Ciphertext on both sides: public bytes, no need for constant
                * time (CRYPTO_memcmp's byte loop would cost more than the
                * decryption). */
               || memcmp(run.data + (c->inorder.cur_offset - run.offset),
                         RECORD_LAYER_get_packet(&s->rlayer), c->inorder.cur_wire_len) != 0) {
        /*
         * A private copy (the tap: the kernel socket is the authority, and the
         * capture may have seen an injected copy) keeps the first bytes that
         * arrived at this offset, never overwritten, and those authenticated
         * as |seq|. Bytes equal to them authenticate too; any difference (an
         * injected copy, a store that dropped them, a changed epoch) and the
         * record is decrypted as usual, failing exactly as it would in stock
         * OpenSSL (and if it authenticates, it is still not delivered twice:
         * utls_hook_record_done finds it in c->rx.ahead).
         */
        return 0;
    }
    skip_mark_read(s, c, rr);
    return 1;
}

int utls_hook_skip_body(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    uint64_t seq, body_off;
    size_t i, wire_len;
    unsigned char nonce[8];
    size_t nonce_len;

    /*
     * Only where utls_hook_skip_decrypt would skip without looking at the
     * bytes, and only for the first record of a read without pipelining
     * (ssl3_get_record then reads one record), a plain header just read with
     * nothing behind it in the read buffer (no read-ahead), no explicit record
     * numbers (the record's number is in its body) and no SSLv2 header.
     */
    if (c == NULL || (s->mode & SSL_MODE_UNORDERED) == 0 || s->max_pipelines > 1
        || rr != RECORD_LAYER_get_rrec(&s->rlayer)
        || c->rx.ahead.n == 0 || !c->rx.ooo_possible || !c->inorder.offset_known
        || (s->mode & SSL_MODE_UTLS_NEGOTIATE) != 0 || c->ern.rx || s->enc_read_ctx == NULL
        || rr->rec_version == SSL2_VERSION || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->length == 0 || interleaved_handshake(s, SSL3_RT_APPLICATION_DATA)
        || RECORD_LAYER_get_packet_length(&s->rlayer) != SSL3_RT_HEADER_LENGTH
        || SSL3_BUFFER_get_left(RECORD_LAYER_get_rbuf(&s->rlayer)) != 0)
        return 0;
    wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    seq = utls_inorder_seq(s);
    i = utls_seqset_lower(&c->rx.ahead, seq);
    if (i == c->rx.ahead.n || c->rx.ahead.v[i] != seq || c->rx.ahead.off[i] != c->inorder.next_offset
        || c->rx.ahead.wire_len[i] != wire_len || !utls_store_refresh(s, c) || !c->rx.store_shared
        || c->rx.sig == NULL || c->rx.ahead.epoch[i] == UTLS_NO_EPOCH
        || c->rx.ahead.epoch[i] != c->rx.sig->store_epoch)
        return 0;
    /*
     * One store, same epoch (see utls_hook_skip_decrypt): the BIO's in-order
     * bytes at this offset are the very bytes authenticated as |seq|, the
     * header just read included.
     */
    body_off = c->inorder.next_offset + SSL3_RT_HEADER_LENGTH;
    /* The explicit nonce (TLS 1.2 AEAD) for the predictor comes from the
     * store; not read otherwise: the body is not in cache. */
    if (!utls_skip_body_discard(c, s->rbio, body_off, rr->length,
                                !c->rx.gen_ready || c->rx.explicit_nonce, nonce, &nonce_len))
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
