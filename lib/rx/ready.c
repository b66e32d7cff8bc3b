/*
 * The ready queue: records verified past a hole, waiting to be read, sorted
 * by (key generation, sequence number); and their hand-over to the reader
 * (whole, or in parts with SSL_MODE_UNORDERED_PARTIAL).
 */
#include <string.h>

#include <openssl/err.h>

#include "utls/ipflow.h"

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* --- Ready records (verified, waiting to be read), sorted by seq --------- */

int utls_ready_find(const utls_conn *c, uint32_t gen, uint64_t seq)
{
    size_t i;

    for (i = 0; i < c->rx.ready.num; i++)
        if (c->rx.ready.rec[i].seq == seq && c->rx.ready.rec[i].gen == gen)
            return (int)i;
    return -1;
}

static void utls_ready_free_data(utls_conn *c, utls_ready_record *r)
{
    /* Plaintext is wiped as stock OpenSSL wipes its own: only with
     * SSL_OP_CLEANSE_PLAINTEXT. */
    if (c->rx.cleanse_plaintext && r->data != NULL)
        OPENSSL_cleanse(r->data, r->len);
    if (r->buf != NULL && r->buf_is_scratch && c->rx.ready.num_spare < UTLS_MAX_SPARE_BUFS)
        c->rx.ready.spare[c->rx.ready.num_spare++] = r->buf;
    else
        OPENSSL_free(r->buf);
    r->data = NULL;
    r->buf = NULL;
}

void utls_ready_remove(utls_conn *c, size_t i)
{
    utls_ready_free_data(c, &c->rx.ready.rec[i]);
    memmove(&c->rx.ready.rec[i], &c->rx.ready.rec[i + 1], (c->rx.ready.num - i - 1) * sizeof(*c->rx.ready.rec));
    c->rx.ready.num--;
}

/* utls_ready_add queues the verified record |r| whose plaintext |pt| (r->len
 * bytes) usually lies in c->rx.scratch. Returns 1, or 0 if it cannot be kept. */
static int utls_ready_add(utls_conn *c, const utls_ready_record *r, const unsigned char *pt)
{
    unsigned char *fresh;
    size_t i;

    if (c->rx.ready.rec == NULL) {
        c->rx.ready.rec = OPENSSL_malloc(sizeof(*c->rx.ready.rec) * UTLS_DEFAULT_MAX_READY_RECORDS * 4);
        if (c->rx.ready.rec == NULL)
            return 0;
    }
    if (c->rx.ready.num >= c->limits.max_ready_records
        || c->rx.ready.num >= UTLS_DEFAULT_MAX_READY_RECORDS * 4
        || c->rx.ready.num + c->rx.ahead.n + c->rx.next.ahead.n >= UTLS_MAX_DELIVERED_AHEAD)
        return 0;
    for (i = c->rx.ready.num; i > 0; i--) {
        const utls_ready_record *p = &c->rx.ready.rec[i - 1];

        if (p->gen < r->gen || (p->gen == r->gen && p->seq < r->seq))
            break;
    }
    memmove(&c->rx.ready.rec[i + 1], &c->rx.ready.rec[i], (c->rx.ready.num - i) * sizeof(*c->rx.ready.rec));
    c->rx.ready.rec[i] = *r;
    if (pt >= c->rx.scratch && pt + r->len <= c->rx.scratch + UTLS_SCRATCH_LEN
        && (fresh = c->rx.ready.num_spare > 0 ? c->rx.ready.spare[--c->rx.ready.num_spare]
                                           : OPENSSL_malloc(UTLS_SCRATCH_LEN)) != NULL) {
        /* The plaintext stays where the probe decrypted it: the record takes
         * the probe buffer, and the next probe gets a spare one. */
        c->rx.ready.rec[i].buf = c->rx.scratch;
        c->rx.ready.rec[i].buf_is_scratch = 1;
        c->rx.ready.rec[i].data = (unsigned char *)pt;
        c->rx.scratch = fresh;
    } else if ((c->rx.ready.rec[i].buf = OPENSSL_memdup(pt, r->len)) != NULL) {
        c->rx.ready.rec[i].buf_is_scratch = 0;
        c->rx.ready.rec[i].data = c->rx.ready.rec[i].buf;
    } else {
        memmove(&c->rx.ready.rec[i], &c->rx.ready.rec[i + 1], (c->rx.ready.num - i) * sizeof(*c->rx.ready.rec));
        return 0;
    }
    c->rx.ready.num++;
    return 1;
}

/* utls_ready_add_verified queues the application data record authenticated out of
 * order at stream |offset| (|wire_len| bytes on the wire, number |seq| of key
 * generation |gen|), whose |pt_len| bytes of plaintext are at |pt|. A record
 * that cannot be kept counts its wire bytes in bytes_dropped; the in-order
 * path then delivers it as stock OpenSSL would. */
void utls_ready_add_verified(utls_conn *c, uint64_t seq, uint32_t gen, uint64_t offset,
                             size_t wire_len, uint64_t arrival_ns,
                             const unsigned char *pt, size_t pt_len)
{
    utls_ready_record rr;

    /* SSL_MODE_UTLS_IP_TUNNEL: a packet that must keep its order is not
     * kept here at all. The in-order path decrypts and delivers it in its
     * turn, as stock OpenSSL would; its verification still served as an
     * anchor for the records around it. */
    if (c->rx.ip_tunnel && utls_ipflow_keeps_order(pt, pt_len))
        return;
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
    if (!utls_ready_add(c, &rr, pt))
        c->stats.bytes_dropped += wire_len;
}

/* The metadata UTLS_read_record() reports for (a part of) ready record |r|. */
void utls_ready_info(utls_conn *c, const utls_ready_record *r)
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
int utls_ready_mark_delivered(utls_conn *c, const utls_ready_record *r)
{
    /* The next in-order record may be one: ssl3_get_record asks (it tests
     * may_skip before reading the body, utls_hook_skip_body). */
    if (r->gen == c->rx.gen)
        c->hooks.may_skip = c->rx.ooo_possible;
    return utls_seqset_add(r->gen == c->rx.gen ? &c->rx.ahead : &c->rx.next.ahead, r->seq, r->offset,
                           r->wire_len, r->store_epoch);
}

utls_ready_outcome utls_ready_deliver(utls_conn *c, int partial, unsigned char *buf, size_t len,
                                      int peek, size_t *readbytes)
{
    utls_ready_record *r = &c->rx.ready.rec[0];
    size_t n = r->len;

    if (len < n) {
        if (!partial) {
            utls_raise(UTLS_R_BUFFER_TOO_SMALL, "record of %zu bytes, buffer of %zu", r->len,
                       len);
            return UTLS_READY_TOO_SMALL;
        }
        n = len; /* the first part; the rest follows (or, peeking, stays) */
    }
    if (!peek && !utls_ready_mark_delivered(c, r)) {
        /* Cannot remember it: let the in-order path deliver it instead. */
        utls_ready_remove(c, 0);
        c->last_info_valid = 0;
        return UTLS_READY_IN_ORDER;
    }
    memcpy(buf, r->data, n);
    *readbytes = n;
    utls_ready_info(c, r);
    if (!peek) {
        c->stats.records_out_of_order++;
        if (n < r->len) {
            /* The next reads return the rest before anything else. */
            c->rx.ready.partial = *r;
            c->rx.ready.partial_pos = n;
            c->rx.ready.partial_active = 1;
            r->data = NULL; /* now owned by c->rx.ready.partial */
            r->buf = NULL;
            r->len = 0;
        }
        utls_ready_remove(c, 0);
    }
    return UTLS_READY_DELIVERED;
}

/* SSL_MODE_UNORDERED_PARTIAL: the next part of the record being returned. */
int utls_ready_partial_read(utls_conn *c, unsigned char *buf, size_t len, int peek,
                            size_t *readbytes, int *out_ret)
{
    utls_ready_record *r = &c->rx.ready.partial;
    size_t n = r->len - c->rx.ready.partial_pos;

    if (n > len)
        n = len;
    memcpy(buf, r->data + c->rx.ready.partial_pos, n);
    *readbytes = n;
    utls_ready_info(c, r);
    if (!peek) {
        c->rx.ready.partial_pos += n;
        if (c->rx.ready.partial_pos == r->len) {
            utls_ready_free_data(c, r);
            c->rx.ready.partial_active = 0;
        }
    }
    *out_ret = 1;
    return UTLS_HOOK_HANDLED;
}
