/*
 * The read side of SSL_MODE_UNORDERED: ssl3_read_bytes' hooks (deliver a
 * ready record, or read in order), SSL_pending, the read key changing, and
 * UTLS_read_record(). Glue: reads OpenSSL's record layer and SSL state.
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/provider.h>

#include "glue_local.h"

/*
 * evloop_note_read publishes, for a poller thread (lib/bio/evloop.c), how many
 * records this SSL holds for the reader, and counts a read after a readiness
 * report for captured bytes alone that delivered no early record (a spurious
 * wake-up). |delivered_early|: this read returns a record verified past a
 * hole.
 */
static void evloop_note_read(SSL *s, utls_conn *c, int delivered_early)
{
    utls_bio_signals *sig;

    if (c->rx.sig == NULL || c->rx.sig_bio != s->rbio)
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
 * waiting), the in-order path holds records numbered below |r| that are
 * deliverable too: it reads them first (skipping those delivered ahead) and
 * reaches |r| in order. Returns 1 if the in-order path should read now.
 */
static int inorder_goes_first(SSL *s, const utls_conn *c, const utls_ready_record *r)
{
    uint64_t end = 0;

    if (r->gen != c->rx.gen || utls_inorder_seq(s) >= r->seq || s->rbio == NULL)
        return 0;
    if (!utls_bio_inorder_end(c, s->rbio, &end))
        return 0;
    return end >= r->offset + r->wire_len;
}

int utls_hook_read_bytes(SSL *s, unsigned char *buf, size_t len, int peek, size_t *readbytes,
                         int *out_ret)
{
    int ret;

    utls_conn *c;
    utls_ready_record *r;

    if (SSL_in_init(s) || (s->shutdown & SSL_RECEIVED_SHUTDOWN) || ossl_statem_in_error(s))
        return UTLS_HOOK_PASS;
    if ((c = s->utls) == NULL && (c = utls_conn_get(s)) == NULL)
        return UTLS_HOOK_PASS;
    c->hooks.read_idle = 0;
    c->rx.cleanse_plaintext = (s->options & SSL_OP_CLEANSE_PLAINTEXT) != 0;
    c->rx.ip_tunnel = (s->mode & SSL_MODE_UTLS_IP_TUNNEL) != 0;
    c->rx.post_handshake = 1;
    if (c->rx.ready.partial_active) {
        ret = utls_ready_partial_read(c, buf, len, peek, readbytes, out_ret);
        evloop_note_read(s, c, 1);
        return ret;
    }
    /* The hot path in order: the BIO's signals, read in place, say nothing
     * waits; no call. */
    if (s->rbio != NULL
        && (c->rx.rescan_pending
            || !((c->rx.sig_bio == s->rbio && c->rx.sig != NULL && c->rx.sig->pending == 0)
                 || utls_bio_quiet(s, c))))
        utls_pump(s, c);
    while (c->rx.ready.num > 0 && c->rx.ready.rec[0].gen < c->rx.gen)
        utls_ready_remove(c, 0); /* records of an older key were read in order */
    if (c->rx.ready.num == 0) {
        evloop_note_read(s, c, 0);
        /* Before the in-order read (not after it failed: SSL_READING), with
         * no in-order byte in the segment BIO and none in OpenSSL's buffer,
         * that read could only fail with the retry flag: say so without it.
         * After a record delivered out of order the application's next read
         * comes here. */
        if (s->rwstate == SSL_NOTHING && c->rx.sig_bio == s->rbio && c->rx.sig != NULL
            && c->rx.sig->read_is_push_only
            && utls_segstore_read_would_block(c->rx.sig->events)
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
            && !((c->rx.sig_bio == s->rbio && c->rx.sig != NULL && c->rx.sig->pending == 0)
                 || utls_bio_quiet(s, c))
            && BIO_ctrl(s->rbio, UTLS_BIO_CTRL_TAKE_WAKEUP, 0, NULL) == 1)
            return UTLS_HOOK_RETRY;
        /*
         * Nothing is held for the reader. Until the BIO signals a fragment or
         * a wake-up (or a key change or reset clears this), the next call
         * would pass as well: ssl3_read_bytes tests that in place
         * (utls_hook_read_idle) instead of calling, twice per record.
         */
        if (!c->rx.ready.partial_active && !c->rx.rescan_pending && c->rx.sig != NULL
            && c->rx.sig_bio == s->rbio && c->rx.sig->pending == 0) {
            c->hooks.idle_bio = s->rbio;
            c->hooks.idle_pending = &c->rx.sig->pending;
            c->hooks.read_idle = 1;
        }
        return UTLS_HOOK_PASS;
    }
    r = &c->rx.ready.rec[0];
    if (inorder_goes_first(s, c, r)) {
        evloop_note_read(s, c, 1); /* a record is delivered, in order */
        return UTLS_HOOK_PASS;
    }
    switch (utls_ready_deliver(c, (s->mode & SSL_MODE_UNORDERED_PARTIAL) != 0, buf, len, peek,
                               readbytes)) {
    case UTLS_READY_TOO_SMALL:
        *out_ret = -1;
        return UTLS_HOOK_HANDLED;
    case UTLS_READY_IN_ORDER:
        return UTLS_HOOK_PASS;
    case UTLS_READY_DELIVERED:
        break;
    }
    evloop_note_read(s, c, 1);
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
    if (c->rx.ready.partial_active)
        num += c->rx.ready.partial.len - c->rx.ready.partial_pos;
    for (i = 0; i < c->rx.ready.num; i++)
        if (c->rx.ready.rec[i].gen >= c->rx.gen)
            num += c->rx.ready.rec[i].len;
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
    if (c->rx.post_handshake) {
        /* A KeyUpdate (or renegotiation): what was delivered under the next
         * key now belongs to the current one. */
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
    if (c->rx.post_handshake && next_pred == NULL)
        next_pred = utls_pred_next_gen(c);
    c->rx.next.valid = 0;
    c->rx.next.seen = 0;
    utls_ern_read_key_changed(c, c->rx.post_handshake);
    c->rx.gen_start_known = c->inorder.offset_known;
    c->rx.gen_start_offset = c->inorder.next_offset;
    c->rx.failed.num = 0;
    utls_aead_search_free(c->probe.search); /* made again for the new key */
    c->probe.search = NULL;
    /* New scanner; the predictor of what was the next key becomes the current
     * one (or a new one is made); the held bytes stay and are scanned again
     * under the new key (utls_pump). */
    utls_scan_free(c->rx.scan);
    utls_seqpred_free(c->rx.pred);
    c->rx.scan = NULL;
    c->rx.pred = NULL;
    if (c->rx.post_handshake) {
        c->rx.pred = next_pred;
        next_pred = NULL;
    }
    c->rx.gen_ready = 0;
    c->rx.num_idle_anchors = 0;
    c->rx.stores_stale = 0;
    c->rx.chain.valid = 0; /* the scanner it was synced with is gone */
    c->rx.chain.anchor_pending = 0; /* numbered under the old key */
    /* With a shared store the bytes the reader has not taken stay held there
     * too; the pass is cheap when nothing is held (one sync of the noted
     * in-order records). */
    c->rx.rescan_pending = c->rx.store != NULL && utls_store_refresh(s, c);
    if (c->rx.rescan_pending) {
        /* The rescan is paid for like the bytes' first arrival: a key change
         * is authenticated (it comes in order), so this is bounded by the
         * bytes held, once per key. */
        c->rx.probe_budget += (double)utls_reasm_bytes_held(c->rx.store)
            * (double)c->limits.max_probes_per_kib / 1024.0;
    }
    utls_seqpred_free(next_pred); /* not kept (handshake, renegotiation) */
    utls_copy_read_ctx(s, c); /* the key has not decrypted anything yet */
    for (i = c->rx.ready.num; i > 0; i--)
        if (c->rx.ready.rec[i - 1].gen < c->rx.gen)
            utls_ready_remove(c, i - 1);
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
        && c->rx.post_handshake && c->rx.ready.num == 0 && !c->rx.ready.partial_active && !c->rx.rescan_pending
        && c->rx.sig != NULL && s->rbio != NULL && c->rx.sig_bio == s->rbio
        && c->rx.sig->read_is_push_only && c->rx.sig->pending == 0
        && utls_segstore_read_would_block(c->rx.sig->events)
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
    c->inorder.stamp = out_info != NULL; /* note_inorder_info reads the clock */
    ret = SSL_read_ex(s, buf, len, out_read);
    c->inorder.stamp = 0;
    if (ret > 0 && out_info != NULL) {
        if (c->last_info_valid) {
            *out_info = c->last_info; /* out of order (utls_hook_read_bytes) */
        } else if ((s->mode & SSL_MODE_UNORDERED) != 0 && c->inorder.info_valid) {
            *out_info = c->inorder.info; /* in order (utls_hook_record_done) */
        } else {
            memset(out_info, 0, sizeof(*out_info)); /* mode off: no metadata */
            return ret;
        }
        if (out_info->arrival_ns == 0)
            out_info->arrival_ns = utls_now_ns(); /* decrypted unasked: now */
    }
    return ret;
}
