/*
 * <openssl/utls_err.h>: uTLS's error library and reason codes.
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_ERR_H
# define OPENSSL_UTLS_ERR_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * Errors. uTLS reports its own errors under the library UTLS_get_lib():
 * ERR_GET_LIB(ERR_peek_error()) == UTLS_get_lib() and ERR_GET_REASON() one of
 * the reasons below; ERR_error_string() gives the text.
 */
/* mkerr.py: begin (generated from lib/reasons.txt: edit there) */
/* Receive path, segment and uTCP BIOs, the tap (100..119). */
/* record larger than the read buffer (nothing was consumed) */
# define UTLS_R_BUFFER_TOO_SMALL 100
/* not a uTLS segment BIO */
# define UTLS_R_NOT_A_SEGMENT_BIO 101
/* segment lies beyond the receive window */
# define UTLS_R_OUTSIDE_WINDOW 102
/* uTCP unit shorter than its 5-byte header */
# define UTLS_R_BAD_UTCP_UNIT 103
/* invalid uTLS limits */
# define UTLS_R_INVALID_LIMITS 104
/* stream offset plus length wraps past 2^64 */
# define UTLS_R_OFFSET_WRAPS 105
/* the tap needs CAP_NET_RAW (AF_PACKET sockets) */
# define UTLS_R_TAP_PERMISSION 106
/* the tap does not know this connection's ISNs */
# define UTLS_R_TAP_NO_ISN 107
/* a socket call of the tap failed (errno in the detail) */
# define UTLS_R_TAP_SYSCALL 108
/* Send scheduler (120..139). */
/* message larger than one record's payload (the scheduler never splits) */
# define UTLS_R_SCHED_MESSAGE_TOO_LARGE 120
/* send scheduler queue full */
# define UTLS_R_SCHED_QUEUE_FULL 121
/* dependency is not an earlier message the scheduler knows */
# define UTLS_R_SCHED_BAD_DEPENDENCY 122
/* playout time on a sub-stream without a clock rate */
# define UTLS_R_SCHED_NO_CLOCK 123
/* invalid scheduler message (empty, or unknown flags) */
# define UTLS_R_SCHED_BAD_MESSAGE 124
/* invalid send scheduler configuration */
# define UTLS_R_SCHED_INVALID_CONFIG 125
/* TCP socket option call failed (not a TCP socket?) */
# define UTLS_R_SCHED_TCP_INFO 126
/* uCOBS (140..149). */
/* uCOBS datagram larger than UTLS_UCOBS_MAX_DATAGRAM */
# define UTLS_R_UCOBS_TOO_LARGE 140
/* uCOBS datagram larger than the buffer (it stays queued) */
# define UTLS_R_UCOBS_BUFFER_TOO_SMALL 141
/* uCOBS socket call failed */
# define UTLS_R_UCOBS_SYSCALL 142
/* Sub-streams (150..169). */
/* sub-streams are not enabled (UTLS_stream_enable) */
# define UTLS_R_STREAM_NOT_ENABLED 150
/* malformed sub-stream header (truncated, or a non-minimal varint) */
# define UTLS_R_STREAM_BAD_HEADER 151
/* unknown sub-stream header format (does the peer use sub-streams?) */
# define UTLS_R_STREAM_BAD_VERSION 152
/* sub-stream id out of range */
# define UTLS_R_STREAM_BAD_ID 153
/* sub-stream sequence number out of range (it would wrap) */
# define UTLS_R_STREAM_BAD_SEQ 154
/* duplicate sub-stream sequence number */
# define UTLS_R_STREAM_DUPLICATE 155
/* the peer skipped a sub-stream sequence number */
# define UTLS_R_STREAM_GAP 156
/* sub-stream reorder limit reached (too many held, or too far ahead) */
# define UTLS_R_STREAM_LIMIT 157
/* sub-stream message larger than one record's payload */
# define UTLS_R_STREAM_MESSAGE_TOO_LARGE 158
/* sub-stream sequence numbers exhausted */
# define UTLS_R_STREAM_SEQ_EXHAUSTED 159
/* the sub-stream layer failed earlier (see the first error) */
# define UTLS_R_STREAM_FAILED 160
/* sub-stream layer busy (messages held, or a write to repeat) */
# define UTLS_R_STREAM_BUSY 161
/* Explicit record numbers, out-of-sequence sending (170..189). */
/* explicit record numbers are not on in this direction */
# define UTLS_R_ERN_NOT_ON 170
/* empty or oversized record content, or output buffer too small */
# define UTLS_R_ERN_BAD_ARGUMENT 171
/* record number would leave UTLS_ERN_REORDER_WINDOW */
# define UTLS_R_ERN_WINDOW 172
/* not a sealed, unwritten record (written or dropped already?) */
# define UTLS_R_ERN_NOT_SEALED 173
/* another write is pending: complete it first */
# define UTLS_R_ERN_WRITE_PENDING 174
/* sealed records are not yet written: write or drop them first */
# define UTLS_R_ERN_SEALED_PENDING 175
/* the write key or sequence changed since sealing: sealed records void */
# define UTLS_R_ERN_STALE 176
/* the peer sent a record number it had sent before (replay) */
# define UTLS_R_ERN_REPLAY 177
/* the peer's record number is outside the reorder window */
# define UTLS_R_ERN_OUT_OF_WINDOW 178
/* the most recently sealed record cannot be dropped: write it */
# define UTLS_R_ERN_DROP_LAST 179
/*
 * a KeyUpdate or handshake message is owed: write or drop the sealed records first
 */
# define UTLS_R_ERN_HANDSHAKE_DUE 180
/* The API itself (190..199). */
/*
 * structure size not supported (below UTLS_0.1, over 4 KiB, or an unknown field set)
 */
# define UTLS_R_STRUCT_SIZE 190
/* mkerr.py: end */

/* UTLS_get_lib returns the error library number of uTLS's errors. */
int UTLS_get_lib(void);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_ERR_H */
