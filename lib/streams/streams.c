/*
 * Sub-streams over uTLS records (docs/substreams.md): UTLS_stream_write puts
 * a header (core/src/streamq.c) in front of each message and writes it as one
 * record; UTLS_stream_read reads records with UTLS_read_record, in or out of
 * order, and returns each stream's messages in that stream's order, holding
 * those that arrived ahead of a gap in their own stream.
 *
 * The state hangs off the SSL as ex_data, so that nothing of the unordered
 * read path (lib/rx/) changes; it is made by the first
 * UTLS_stream_enable() and freed with the SSL. The header codec and the
 * reorder buffer are core/'s (utls/streamq.h, no OpenSSL); this file
 * translates between their types and the public ones.
 */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"
#include "utls/streamq.h"

/* The public limits are the core's: a header one side writes must parse on
 * the other, and UTLS_stream_max_message() leaves room for the longest. */
_Static_assert(UTLS_STREAM_MAX_STREAMS == UTLS_STREAMQ_MAX_STREAMS, "stream id range");
_Static_assert(UTLS_STREAM_MAX_HEADER == UTLS_STREAMQ_MAX_HEADER, "header length");
_Static_assert(UTLS_STREAM_MAX_SEQ == UTLS_STREAMQ_MAX_SEQ, "sequence number range");
_Static_assert(SSL3_RT_MAX_PLAIN_LENGTH == UTLS_STREAMQ_MAX_RECORD_PLAINTEXT,
               "the held-bytes bound counts one record per held message");
/*
 * The fields the queue keeps of a record (utls_streamq_record), written once
 * for both copies. A field added to UTLS_RECORD_INFO must be added here and
 * there too, or held messages would come back with it zeroed: the size check
 * catches the omission.
 */
#define RECORD_FIELDS(X) \
    X(seq) X(key_generation) X(out_of_order) X(stream_offset) X(wire_len) X(arrival_ns)
#define RECORD_COPY_FIELD(f) out->f = in->f;
_Static_assert(sizeof(UTLS_RECORD_INFO) == sizeof(utls_streamq_record),
               "UTLS_RECORD_INFO and utls_streamq_record differ");

static void record_to_core(utls_streamq_record *out, const UTLS_RECORD_INFO *in)
{
    memset(out, 0, sizeof(*out));
    RECORD_FIELDS(RECORD_COPY_FIELD)
}

static void record_from_core(UTLS_RECORD_INFO *out, const utls_streamq_record *in)
{
    memset(out, 0, sizeof(*out));
    RECORD_FIELDS(RECORD_COPY_FIELD)
}

typedef struct {
    int enabled;
    int failed_reason;          /* UTLS_R_STREAM_* that failed the read side */
    utls_streamq *q;
    uint64_t next_tx[UTLS_STREAM_MAX_STREAMS];
    uint8_t *rbuf;              /* one record's plaintext, for small buffers */
    uint8_t *wbuf;              /* header + message being written */
    size_t wlen;
    int wpending;               /* wbuf must be written again (retry) */
    uint32_t wpending_id;
    size_t wpending_len;
    UTLS_STREAM_STATS stats;
} utls_streams;

static CRYPTO_ONCE streams_once = CRYPTO_ONCE_STATIC_INIT;
static int streams_idx = -1;

static void streams_free(utls_streams *st)
{
    if (st == NULL)
        return;
    utls_streamq_free(st->q);
    OPENSSL_clear_free(st->rbuf, SSL3_RT_MAX_PLAIN_LENGTH);
    OPENSSL_clear_free(st->wbuf, SSL3_RT_MAX_PLAIN_LENGTH);
    OPENSSL_free(st);
}

static void streams_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                            void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    streams_free(ptr);
}

/* SSL_dup(): the copy starts without sub-stream state (it would otherwise
 * share, and free twice, the original's). */
static int streams_ex_dup(CRYPTO_EX_DATA *to, const CRYPTO_EX_DATA *from, void **from_d, int idx,
                          long argl, void *argp)
{
    (void)to, (void)from, (void)idx, (void)argl, (void)argp;
    *from_d = NULL;
    return 1;
}

static void streams_index_init(void)
{
    streams_idx = SSL_get_ex_new_index(0, "uTLS sub-streams", NULL, streams_ex_dup,
                                       streams_ex_free);
}

static utls_streams *streams_get(const SSL *s)
{
    if (s == NULL || !CRYPTO_THREAD_run_once(&streams_once, streams_index_init)
        || streams_idx < 0)
        return NULL;
    return SSL_get_ex_data(s, streams_idx);
}

int UTLS_stream_enable(SSL *s, int on)
{
    utls_streams *st;

    if (s == NULL)
        return 0;
    st = streams_get(s);
    if (!on) {
        if (st == NULL || !st->enabled)
            return 1;
        if (utls_streamq_num_held(st->q) > 0 || st->wpending) {
            utls_raise(UTLS_R_STREAM_BUSY, "%zu messages held%s", utls_streamq_num_held(st->q),
                       st->wpending ? ", a write to repeat" : "");
            return 0;
        }
        st->enabled = 0;
        return 1;
    }
    if (st == NULL) {
        if (streams_idx < 0 || (st = OPENSSL_zalloc(sizeof(*st))) == NULL)
            return 0;
        if ((st->q = utls_streamq_new()) == NULL || !SSL_set_ex_data(s, streams_idx, st)) {
            streams_free(st);
            return 0;
        }
    }
    st->enabled = 1;
    return 1;
}

size_t UTLS_stream_max_message(const SSL *s)
{
    size_t max;

    if (s == NULL)
        return 0;
    /* What one SSL_write puts in one record (as UTLS_sched_max_message). */
    max = utls_max_send_fragment(s);
    max -= utls_hook_write_overhead((SSL *)s);
    if (utls_max_pipelines(s) > 1 && utls_split_send_fragment(s) < max)
        max = utls_split_send_fragment(s);
    return max > UTLS_STREAM_MAX_HEADER ? max - UTLS_STREAM_MAX_HEADER : 0;
}

int UTLS_stream_write(SSL *s, uint32_t stream_id, const void *buf, size_t len)
{
    utls_streams *st = streams_get(s);
    size_t hlen, written = 0;
    int ret;

    if (st == NULL || !st->enabled) {
        utls_raise(UTLS_R_STREAM_NOT_ENABLED, NULL);
        return 0;
    }
    if (stream_id >= UTLS_STREAM_MAX_STREAMS) {
        utls_raise(UTLS_R_STREAM_BAD_ID, "stream %u, limit %u", stream_id,
                   (unsigned)UTLS_STREAM_MAX_STREAMS);
        return 0;
    }
    if (buf == NULL && len > 0) {
        ERR_raise(ERR_LIB_SSL, ERR_R_PASSED_NULL_PARAMETER);
        return 0;
    }
    if (st->wpending) {
        /* SSL_write's rule: a retry repeats the same write. */
        if (stream_id != st->wpending_id || len != st->wpending_len) {
            utls_raise(UTLS_R_STREAM_BUSY,
                       "repeat the pending write (stream %u, %zu bytes) first",
                       st->wpending_id, st->wpending_len);
            return 0;
        }
    } else {
        if (len > UTLS_stream_max_message(s)) {
            utls_raise(UTLS_R_STREAM_MESSAGE_TOO_LARGE, "%zu bytes, at most %zu", len,
                       UTLS_stream_max_message(s));
            return 0;
        }
        if (st->next_tx[stream_id] > UTLS_STREAM_MAX_SEQ) {
            utls_raise(UTLS_R_STREAM_SEQ_EXHAUSTED, "stream %u", stream_id);
            return 0;
        }
        if (st->wbuf == NULL && (st->wbuf = OPENSSL_malloc(SSL3_RT_MAX_PLAIN_LENGTH)) == NULL)
            return 0;
        hlen = utls_streamq_header_encode(st->wbuf, stream_id, st->next_tx[stream_id]);
        if (hlen == 0 || hlen + len > SSL3_RT_MAX_PLAIN_LENGTH)
            return 0; /* excluded above */
        if (len > 0)
            memcpy(st->wbuf + hlen, buf, len);
        st->wlen = hlen + len;
        /* The number is taken now: a retried write must keep it. */
        st->next_tx[stream_id]++;
        st->wpending_id = stream_id;
        st->wpending_len = len;
    }
    ret = SSL_write_ex(s, st->wbuf, st->wlen, &written);
    if (ret <= 0) {
        int e = SSL_get_error(s, ret);

        st->wpending = e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ
            || e == SSL_ERROR_WANT_ASYNC || e == SSL_ERROR_WANT_X509_LOOKUP;
        return 0;
    }
    st->wpending = 0;
    OPENSSL_cleanse(st->wbuf, st->wlen);
    st->stats.messages_sent++;
    return 1;
}

static int sq_reason(utls_sq_status r)
{
    switch (r) {
    case UTLS_SQ_TRUNCATED:
    case UTLS_SQ_BAD_VARINT:
        return UTLS_R_STREAM_BAD_HEADER;
    case UTLS_SQ_BAD_VERSION:
        return UTLS_R_STREAM_BAD_VERSION;
    case UTLS_SQ_BAD_STREAM_ID:
        return UTLS_R_STREAM_BAD_ID;
    case UTLS_SQ_BAD_SEQ:
        return UTLS_R_STREAM_BAD_SEQ;
    case UTLS_SQ_DUPLICATE:
        return UTLS_R_STREAM_DUPLICATE;
    case UTLS_SQ_GAP:
        return UTLS_R_STREAM_GAP;
    case UTLS_SQ_TOO_FAR_AHEAD:
    case UTLS_SQ_HELD_LIMIT:
        return UTLS_R_STREAM_LIMIT;
    case UTLS_SQ_NOMEM:
    case UTLS_SQ_OK:
    case UTLS_SQ_DELIVERABLE:
    default:
        return 0;
    }
}

/* Fails the read side for good: a peer that breaks the format (or our
 * bounds) has lost messages or sent garbage, and guessing would deliver
 * something out of its order. */
static int streams_fail(utls_streams *st, utls_sq_status r, const UTLS_RECORD_INFO *info)
{
    int reason = sq_reason(r);

    if (reason == 0) {
        /* Out of memory while holding a message: its record is consumed and
         * cannot be read again, so the stream would have a hole. */
        ERR_raise(ERR_LIB_SSL, ERR_R_MALLOC_FAILURE);
        reason = UTLS_R_STREAM_FAILED;
    }
    st->failed_reason = reason;
    st->stats.failed_reason = reason;
    utls_raise(reason, "record seq %llu, key generation %u, %s",
               (unsigned long long)info->seq, info->key_generation,
               info->out_of_order ? "out of order" : "in order");
    return 0;
}

static void info_fill(UTLS_STREAM_INFO *out, uint32_t id, uint64_t seq, int held,
                      const utls_streamq_record *rec)
{
    if (out == NULL)
        return;
    out->stream_id = id;
    out->seq = seq;
    out->held = held;
    record_from_core(&out->record, rec);
}

int UTLS_stream_read(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_STREAM_INFO *out_info)
{
    utls_streams *st = streams_get(s);
    unsigned char *ubuf = buf;

    if (st == NULL || !st->enabled) {
        utls_raise(UTLS_R_STREAM_NOT_ENABLED, NULL);
        return 0;
    }
    if (out_read == NULL || (buf == NULL && len > 0)) {
        ERR_raise(ERR_LIB_SSL, ERR_R_PASSED_NULL_PARAMETER);
        return 0;
    }
    *out_read = 0;
    if (st->failed_reason != 0) {
        utls_raise(UTLS_R_STREAM_FAILED, "first error: %s",
                   ERR_reason_error_string(ERR_PACK(UTLS_get_lib(), 0, st->failed_reason)));
        return 0;
    }
    for (;;) {
        utls_sq_msg m;
        UTLS_RECORD_INFO rinfo;
        utls_streamq_record crec;
        unsigned char *target;
        size_t n = 0, hlen = 0;
        uint32_t id = 0;
        uint64_t seq = 0;
        unsigned int flags = 0;
        int unordered;
        utls_sq_status r;

        if (utls_streamq_peek(st->q, &m)) {
            if (m.len > len) {
                utls_raise(UTLS_R_BUFFER_TOO_SMALL, "message of %zu bytes, buffer of %zu", m.len,
                           len);
                return 0;
            }
            if (m.len > 0)
                memcpy(ubuf, m.data, m.len);
            *out_read = m.len;
            info_fill(out_info, m.stream_id, m.seq, 1, &m.record);
            utls_streamq_pop(st->q);
            st->stats.messages_received++;
            st->stats.messages_held++;
            return 1;
        }
        /* A whole record: straight into the caller's buffer when it can take
         * any record, else into our own. */
        if (len >= SSL3_RT_MAX_PLAIN_LENGTH) {
            target = ubuf;
        } else {
            if (st->rbuf == NULL
                && (st->rbuf = OPENSSL_malloc(SSL3_RT_MAX_PLAIN_LENGTH)) == NULL)
                return 0;
            target = st->rbuf;
        }
        if (!UTLS_read_record(s, target, SSL3_RT_MAX_PLAIN_LENGTH, &n, &rinfo))
            return 0; /* SSL_get_error() says why */
        record_to_core(&crec, &rinfo);
        /* utls_ssl_mode(), not SSL_get_mode(): a record's worth of
         * instructions on 3.5 (lib/glue/utls_glue.h). */
        unordered = (utls_ssl_mode(s) & SSL_MODE_UNORDERED) != 0;
        if (!unordered || !rinfo.out_of_order) {
            flags |= UTLS_SQ_IN_ORDER;
            if (unordered
                && (r = utls_streamq_check_inorder(st->q, &crec)) != UTLS_SQ_OK)
                return streams_fail(st, r, &rinfo);
        }
        if ((r = utls_streamq_header_decode(target, n, &id, &seq, &hlen)) != UTLS_SQ_OK)
            return streams_fail(st, r, &rinfo);
        if (n - hlen > len)
            flags |= UTLS_SQ_HOLD; /* keep it for a call with a larger buffer */
        r = utls_streamq_push(st->q, id, seq, target + hlen, n - hlen, &crec, flags);
        if (r == UTLS_SQ_DELIVERABLE) {
            memmove(ubuf, target + hlen, n - hlen);
            *out_read = n - hlen;
            info_fill(out_info, id, seq, 0, &crec);
            utls_streamq_advance(st->q, id);
            st->stats.messages_received++;
            if (target == st->rbuf)
                OPENSSL_cleanse(st->rbuf, n);
            return 1;
        }
        if (target == st->rbuf)
            OPENSSL_cleanse(st->rbuf, n);
        if (r != UTLS_SQ_OK)
            return streams_fail(st, r, &rinfo);
        if (utls_streamq_num_held(st->q) > st->stats.max_held)
            st->stats.max_held = utls_streamq_num_held(st->q);
        /* Held: a message of its stream is missing; read on. */
    }
}

int UTLS_stream_get_stats(const SSL *s, UTLS_STREAM_STATS *out_stats)
{
    const utls_streams *st = streams_get(s);

    if (st == NULL || out_stats == NULL)
        return 0;
    *out_stats = st->stats;
    out_stats->held_now = utls_streamq_num_held(st->q);
    out_stats->held_bytes_now = utls_streamq_bytes_held(st->q);
    return 1;
}
