/*
 * streamq: the sub-stream header codec and the per-connection reorder buffer
 * behind UTLS_stream_read() (docs/substreams.md). Pure C, no OpenSSL (core/),
 * so that the unit test (tests/unit/test_streamq.c) and the fuzz target
 * (tests/fuzz/fuzz_streams.c) drive it on its own. lib/streams/streams.c is
 * the SSL side: it translates between the public UTLS_RECORD_INFO and
 * UTLS_STREAM_* of <openssl/utls_streams.h> and the types here, and checks at
 * compile time that both sides' constants agree.
 */
#ifndef UTLS_STREAMQ_H
#define UTLS_STREAMQ_H

#include <stddef.h>
#include <stdint.h>

/* Stream ids 0..255 (UTLS_STREAM_MAX_STREAMS): the per-stream state is an
 * array of this many entries, so a peer naming many streams costs nothing
 * more than this. */
#define UTLS_STREAMQ_MAX_STREAMS 256
/* The longest header: format byte + 2 varint bytes of stream id + 8 of
 * sequence number (UTLS_STREAM_MAX_HEADER). */
#define UTLS_STREAMQ_MAX_HEADER 11
/* The highest sequence number of a stream, 2^56 - 1 (UTLS_STREAM_MAX_SEQ):
 * the most an 8-byte varint holds. */
#define UTLS_STREAMQ_MAX_SEQ ((UINT64_C(1) << 56) - 1)
/* The most plaintext one TLS record carries, 2^14 bytes (RFC 8446 5.1:
 * "The length MUST NOT exceed 2^14 bytes"): a held message is at most this
 * long, header included. */
#define UTLS_STREAMQ_MAX_RECORD_PLAINTEXT 16384

/* The only header format so far: the first plaintext byte of every record. */
#define UTLS_STREAMQ_FORMAT_V1 0x01

/*
 * Messages held ahead of a gap in their stream, all streams together.
 * Bounds the memory a peer that skips a sequence number can pin before the
 * in-order path proves the skip (UTLS_SQ_GAP). A sender that follows the
 * format never needs more: a message is held only while its record is ahead
 * of the TLS in-order point, and the unordered path delivers at most
 * UTLS_MAX_DELIVERED_AHEAD records ahead under each of two keys.
 */
#define UTLS_STREAMQ_MAX_HELD_MESSAGES 2048
/*
 * Plaintext bytes held, all streams together: at most one full record
 * (16 KiB) for each held message. Per stream the same caps apply: a smaller
 * per-stream cap would let one busy stream behind a single hole fail an
 * honest connection.
 */
#define UTLS_STREAMQ_MAX_HELD_BYTES \
    (UTLS_STREAMQ_MAX_HELD_MESSAGES * (size_t)UTLS_STREAMQ_MAX_RECORD_PLAINTEXT)
/*
 * How far past the next expected sequence number a message may be. Refuses
 * at once a peer that jumps (e.g. to 2^50) instead of holding its message
 * until the gap is proved; an honest sender is never more than the held
 * messages ahead.
 */
#define UTLS_STREAMQ_MAX_AHEAD 4096

/* utls_sq_status is what a push or a parse found. Everything but OK and
 * DELIVERABLE is an error of the peer (or a limit, or memory), and a push
 * that returns one changed nothing; lib/streams/streams.c maps each to a
 * UTLS_R_STREAM_* reason. */
typedef enum {
    UTLS_SQ_OK = 0,        /* held: its stream has a gap before it */
    UTLS_SQ_DELIVERABLE,   /* it is its stream's next message */
    UTLS_SQ_TRUNCATED,     /* record shorter than its header */
    UTLS_SQ_BAD_VERSION,   /* unknown format byte */
    UTLS_SQ_BAD_VARINT,    /* a varint that is not minimal (a trailing 0x00) */
    UTLS_SQ_BAD_STREAM_ID, /* stream id >= UTLS_STREAMQ_MAX_STREAMS, or its
                            * varint longer than 2 bytes */
    UTLS_SQ_BAD_SEQ,       /* sequence number above UTLS_STREAMQ_MAX_SEQ, or
                            * its varint longer than 8 bytes */
    UTLS_SQ_DUPLICATE,     /* a sequence number delivered or held already */
    UTLS_SQ_GAP,           /* the peer skipped a sequence number */
    UTLS_SQ_TOO_FAR_AHEAD, /* more than UTLS_STREAMQ_MAX_AHEAD past the gap */
    UTLS_SQ_HELD_LIMIT,    /* the held messages or bytes limit */
    UTLS_SQ_NOMEM
} utls_sq_status;

/*
 * utls_streamq_header_encode writes the header of message |seq| of stream
 * |stream_id| to |out| (UTLS_STREAMQ_MAX_HEADER bytes) and returns its length,
 * or 0 if |stream_id| or |seq| is out of range.
 */
size_t utls_streamq_header_encode(uint8_t *out, uint32_t stream_id, uint64_t seq);

/*
 * utls_streamq_header_decode parses the header at the start of |rec| (|len|
 * bytes of one record's plaintext). On UTLS_SQ_OK sets |*out_id|, |*out_seq|
 * and |*out_hdr_len| (the payload follows); otherwise returns the reason and
 * sets nothing.
 */
utls_sq_status utls_streamq_header_decode(const uint8_t *rec, size_t len, uint32_t *out_id,
                                          uint64_t *out_seq, size_t *out_hdr_len);

/*
 * utls_streamq_record is what the queue keeps of the record that carried a
 * message: the fields of the public UTLS_RECORD_INFO, in its order, as plain
 * C. The queue itself only reads |key_generation| and |seq| (the order in
 * which the peer sent its records, see utls_streamq_check_inorder()); the
 * rest is returned with the message as it was pushed.
 */
typedef struct {
    uint64_t seq;            /* TLS record sequence number within its key */
    uint32_t key_generation; /* 0 for the first traffic key, +1 per change */
    int out_of_order;        /* delivered before every earlier byte arrived */
    uint64_t stream_offset;  /* where its header was in the stream */
    size_t wire_len;         /* header + ciphertext */
    uint64_t arrival_ns;     /* CLOCK_MONOTONIC time its last byte arrived */
} utls_streamq_record;

/* utls_sq_msg is one message as the queue returns it. |data| is owned by the
 * queue until the next call that changes it. */
typedef struct {
    uint32_t stream_id;
    uint64_t seq;
    const uint8_t *data;
    size_t len;
    int held; /* it waited for its stream's gap */
    utls_streamq_record record;
} utls_sq_msg;

/* utls_streamq is one connection's reorder buffer (all its streams). */
typedef struct utls_streamq_st utls_streamq;

/* utls_streamq_new returns an empty queue (every stream expects 0), or NULL. */
utls_streamq *utls_streamq_new(void);
/* utls_streamq_free frees |q| and wipes held plaintext; NULL is ignored. */
void utls_streamq_free(utls_streamq *q);

/*
 * utls_streamq_check_inorder applies what a record read in order proves:
 * every earlier record was already returned, so a held message with an
 * earlier record (|info|'s generation and sequence number) waits for a
 * message that was never sent. Returns UTLS_SQ_OK or UTLS_SQ_GAP.
 */
utls_sq_status utls_streamq_check_inorder(const utls_streamq *q, const utls_streamq_record *info);

/* Flags of utls_streamq_push(). */
#define UTLS_SQ_IN_ORDER 0x1 /* the record came in order: everything before it
                              * was returned, so it must be its stream's next */
#define UTLS_SQ_HOLD 0x2     /* copy and hold it even if it is deliverable
                              * (the caller's buffer is too small for it) */

/*
 * utls_streamq_push offers message |seq| of stream |id| (payload |data|,
 * |len| bytes, from the record |info|, which may be NULL). Returns
 * UTLS_SQ_DELIVERABLE if it is the stream's next message (nothing copied: the
 * caller delivers it and calls utls_streamq_advance()), UTLS_SQ_OK if it was
 * copied and held, or an error (nothing changed).
 */
utls_sq_status utls_streamq_push(utls_streamq *q, uint32_t id, uint64_t seq, const uint8_t *data,
                                 size_t len, const utls_streamq_record *info, unsigned int flags);

/* utls_streamq_advance records that stream |id|'s next message was delivered
 * by the caller (after UTLS_SQ_DELIVERABLE). */
void utls_streamq_advance(utls_streamq *q, uint32_t id);

/*
 * utls_streamq_peek returns 1 and describes in |*out| the held message that
 * is deliverable first (streams in the order they became deliverable), or 0
 * if none is.
 */
int utls_streamq_peek(utls_streamq *q, utls_sq_msg *out);
/* utls_streamq_pop removes the message utls_streamq_peek() described. */
void utls_streamq_pop(utls_streamq *q);

/* utls_streamq_num_held / _bytes_held: what waits now. */
size_t utls_streamq_num_held(const utls_streamq *q);
size_t utls_streamq_bytes_held(const utls_streamq *q);
/* utls_streamq_next_seq: the next sequence number stream |id| expects. */
uint64_t utls_streamq_next_seq(const utls_streamq *q, uint32_t id);

#endif /* UTLS_STREAMQ_H */
