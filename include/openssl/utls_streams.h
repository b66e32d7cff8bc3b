/*
 * <openssl/utls_streams.h>: sub-streams (docs/substreams.md).
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_STREAMS_H
# define OPENSSL_UTLS_STREAMS_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>
# include <openssl/utls_record.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * Sub-streams (docs/substreams.md)
 * ================================
 *
 * Several independent ordered streams over one connection: every record's
 * plaintext starts with a small header (format byte, stream id, per-stream
 * sequence number), and the receiver returns each stream's messages in that
 * stream's order, a stream never waiting for another stream's loss. Off by
 * default; both ends must call UTLS_stream_enable() (a peer that does not sees
 * the header bytes as data). Works with SSL_MODE_UNORDERED on (streams are
 * independent) and off (everything arrives in order anyway).
 */
# define UTLS_STREAM_MAX_STREAMS 256 /* stream ids 0..255, as UTLS_SCHED_MSG's */
# define UTLS_STREAM_MAX_HEADER  11  /* format byte + 2 + 8 varint bytes */
# define UTLS_STREAM_MAX_SEQ     ((UINT64_C(1) << 56) - 1) /* per stream */

/* UTLS_STREAM_INFO describes one message UTLS_stream_read() returned. */
typedef struct utls_stream_info_st {
    uint32_t stream_id;
    uint64_t seq;            /* its number within its stream: 0, 1, 2 ... */
    int held;                /* 1: it waited for an earlier message of its
                              * stream (or for a larger buffer) */
    UTLS_RECORD_INFO record; /* the record that carried it (zeroed when
                              * SSL_MODE_UNORDERED is off) */
} UTLS_STREAM_INFO;

/*
 * UTLS_stream_enable turns the sub-stream layer of |s| on (|on| non-zero) or
 * off. While it is on, every application record |s| reads must carry a
 * sub-stream header: read with UTLS_stream_read() only. Returns 1, or 0 with
 * UTLS_R_STREAM_BUSY when turning off while messages are held or a write is
 * pending (nothing changed). Turning it off and on keeps the sequence numbers.
 */
int UTLS_stream_enable(SSL *s, int on);

/*
 * UTLS_stream_write sends |len| bytes of |buf| as the next message of stream
 * |stream_id|, in one record. Returns 1 when the whole message was written,
 * 0 on failure: UTLS_R_STREAM_NOT_ENABLED, UTLS_R_STREAM_BAD_ID,
 * UTLS_R_STREAM_MESSAGE_TOO_LARGE (header + |len| above one record's payload,
 * see UTLS_stream_max_message), UTLS_R_STREAM_SEQ_EXHAUSTED (nothing written),
 * or a failed SSL_write_ex(): then SSL_get_error(); after SSL_ERROR_WANT_READ/
 * WRITE the call must be repeated with the same stream and length (the
 * message already has its sequence number). |buf| stays the caller's.
 */
int UTLS_stream_write(SSL *s, uint32_t stream_id, const void *buf, size_t len);

/*
 * UTLS_stream_max_message returns the largest |len| UTLS_stream_write() takes
 * on |s| now (one record's payload minus UTLS_STREAM_MAX_HEADER), 0 if |s| is
 * NULL.
 */
size_t UTLS_stream_max_message(const SSL *s);

/*
 * UTLS_stream_read returns the next deliverable message of any stream: a
 * message is deliverable when every earlier message of its own stream was
 * returned. Copies its payload into |buf| (at most |len| bytes), sets
 * |*out_read| and, if |out_info| is not NULL, |*out_info|. Returns 1, or 0:
 * SSL_get_error() tells SSL_ERROR_WANT_READ (nothing deliverable yet) from
 * errors; UTLS_R_BUFFER_TOO_SMALL consumes nothing; a malformed or
 * out-of-order header from the peer (UTLS_R_STREAM_BAD_HEADER, _BAD_VERSION,
 * _BAD_ID, _BAD_SEQ, _DUPLICATE, _GAP, _LIMIT) fails the layer for good:
 * every later call fails with UTLS_R_STREAM_FAILED. Nothing is ever returned
 * twice, out of its stream's order, or from a record that failed.
 */
int UTLS_stream_read(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_STREAM_INFO *out_info);

/* UTLS_STREAM_STATS: the sub-stream layer's counters. */
typedef struct utls_stream_stats_st {
    uint64_t messages_sent;
    uint64_t messages_received;  /* returned by UTLS_stream_read() */
    uint64_t messages_held;      /* of those, returned after waiting */
    size_t held_now;             /* messages waiting now */
    size_t held_bytes_now;
    size_t max_held;             /* the most that ever waited at once */
    int failed_reason;           /* the UTLS_R_STREAM_* that failed it, or 0 */
} UTLS_STREAM_STATS;

/* UTLS_stream_get_stats copies |s|'s counters to |*out_stats|. Returns 1, or 0
 * if an argument is NULL or the layer was never enabled. */
int UTLS_stream_get_stats(const SSL *s, UTLS_STREAM_STATS *out_stats);

/*
 * UTLS_stream_get_stats_ex is UTLS_stream_get_stats for a UTLS_STREAM_STATS
 * of |stats_size| bytes (UTLS_0.2), with the size rules of UTLS_get_stats_ex().
 */
int UTLS_stream_get_stats_ex(const SSL *s, UTLS_STREAM_STATS *out_stats, size_t stats_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_STREAMS_H */
