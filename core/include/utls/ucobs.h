/* ucobs.h: uCOBS, datagrams over a TCP byte stream (Minion, section 5), the
 * framer and the out-of-order receiver ("deframer") of issue 9.
 *
 * Wire format. Each datagram D of 0..UTLS_UCOBS_MAX_DATAGRAM bytes is sent as
 * one write of
 *
 *     0x00 || COBS(D) || 0x00
 *
 * where COBS is utls_cobs_encode (cobs.h), so the empty datagram is 00 01 00
 * and two datagrams in a row look like 00 enc1 00 00 enc2 00. A receiver
 * finds a datagram as a maximal non-empty run of non-zero bytes with a zero
 * on both sides, all inside bytes it holds contiguously: a run that touches a
 * hole or the end of the received data is not complete yet. The two markers
 * are what let a datagram on either side of a hole be delivered before the
 * hole fills (the paper's Figure 6). A datagram's identity is the stream
 * offset of its opening zero; each is delivered exactly once, whether it was
 * found past a hole or in order. A run that is not a canonical COBS encoding,
 * or decodes to more than UTLS_UCOBS_MAX_DATAGRAM bytes, is a framing error:
 * counted, skipped, never delivered.
 *
 * The receiver is fed fragments (stream offset, bytes) from any source, in
 * any order, with duplicates and overlaps: the in-order bytes of a socket are
 * just fragments at the in-order offset, and a tap or a segment source adds
 * the bytes past a hole. Bytes are kept in a utls_reasm store. Each feed scans
 * only around its new bytes (bounded by UTLS_UCOBS_MAX_FRAME on each side),
 * and a single walk over the contiguous prefix passes each byte once, so the
 * CPU spent is linear in the bytes fed.
 *
 * uCOBS has no authentication: a datagram is as trustworthy as the bytes
 * that carried it. Where two sources disagree on a byte, the first copy fed
 * wins (reasm keeps first-arrived bytes).
 *
 * Not thread-safe; one receiver per stream direction. */
#ifndef UTLS_UCOBS_H
#define UTLS_UCOBS_H

#include <stddef.h>
#include <stdint.h>

#include "utls/cobs.h"
#include "utls/reasm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* UTLS_UCOBS_MAX_DATAGRAM is the largest datagram, in bytes, as in UDP over
 * IPv4 (65535 minus nothing: there are no headers to subtract here). Attack
 * bounded: a peer sending one endless run of non-zero bytes; past this length
 * (encoded) the receiver gives the run up and stops holding it. */
#define UTLS_UCOBS_MAX_DATAGRAM ((size_t)65535)

/* UTLS_UCOBS_FRAME_BOUND(n) is the exact largest frame for an n-byte
 * datagram: the COBS bound plus the two markers. */
#define UTLS_UCOBS_FRAME_BOUND(n) (UTLS_COBS_ENCODE_BOUND(n) + 2)

/* UTLS_UCOBS_MAX_FRAME is the largest frame of any datagram (65796 bytes). */
#define UTLS_UCOBS_MAX_FRAME UTLS_UCOBS_FRAME_BOUND(UTLS_UCOBS_MAX_DATAGRAM)

/* UTLS_UCOBS_MAX_AHEAD is the default bound on datagrams handled (delivered
 * or rejected) past a hole and remembered until the in-order walk passes
 * them, for exactly-once delivery. Attack bounded: forged small frames past a
 * hole, each costing an entry; past the bound, datagrams wait for the
 * in-order walk instead (delivered later, never lost). */
#define UTLS_UCOBS_MAX_AHEAD ((size_t)4096)

/* UTLS_UCOBS_MAX_READY_AHEAD_BYTES is the default bound on decoded bytes of
 * out-of-order datagrams waiting to be taken. Attack bounded: a reader that
 * does not keep up, or forged datagrams past a hole, growing the queue; past
 * it, datagrams wait for the in-order walk. In-order datagrams are always
 * queued: they are bounded by what the caller feeds plus the reasm store. */
#define UTLS_UCOBS_MAX_READY_AHEAD_BYTES ((size_t)1 << 20)

typedef struct utls_ucobs_rx utls_ucobs_rx;

/* utls_ucobs_limits holds a receiver's limits. */
typedef struct {
    utls_reasm_limits reasm;     /* bytes and runs held, window (reasm.h) */
    size_t max_ahead;            /* see UTLS_UCOBS_MAX_AHEAD */
    size_t max_ready_ahead_bytes; /* see UTLS_UCOBS_MAX_READY_AHEAD_BYTES */
} utls_ucobs_limits;

/* utls_ucobs_datagram describes one complete datagram. */
typedef struct {
    uint64_t offset;     /* stream offset of its opening 0x00: its identity */
    const uint8_t *data; /* decoded bytes, owned by the receiver */
    size_t len;
    int out_of_order;    /* 1 if it was complete while a hole preceded it */
    uint64_t arrival_ns; /* arrival time of the feed that completed it */
} utls_ucobs_datagram;

/* utls_ucobs_stats counts a receiver's work. */
typedef struct {
    uint64_t datagrams_in_order;
    uint64_t datagrams_out_of_order;
    uint64_t framing_errors;  /* runs rejected: not canonical COBS, or too long */
    uint64_t junk_bytes;      /* bytes before the first marker of the stream */
    uint64_t held_back;       /* complete past a hole but over a limit: left
                               * for the in-order walk */
    uint64_t bytes_fed;
    uint64_t bytes_scanned;   /* bytes searched for markers */
    utls_reasm_stats reasm;
} utls_ucobs_stats;

/* utls_ucobs_frame_bound returns the exact largest frame of an |n|-byte
 * datagram, n + ceil(n/254) + 2 (3 for n == 0), or 0 if |n| is above
 * UTLS_UCOBS_MAX_DATAGRAM. */
size_t utls_ucobs_frame_bound(size_t n);

/* utls_ucobs_frame writes the frame of the |n|-byte datagram |dgram| to
 * |out| (|cap| bytes) and its length to |*out_len|. Returns 1, or 0 if |n| is
 * above UTLS_UCOBS_MAX_DATAGRAM or the frame does not fit (then |*out_len| is
 * 0; nothing is written past |cap|). A |cap| of utls_ucobs_frame_bound(n)
 * always suffices. |dgram| and |out| must not overlap. */
int utls_ucobs_frame(uint8_t *out, size_t cap, size_t *out_len, const uint8_t *dgram, size_t n);

/* utls_ucobs_limits_default writes the default limits to |*out_limits|. */
void utls_ucobs_limits_default(utls_ucobs_limits *out_limits);

/* utls_ucobs_rx_new returns a receiver for a stream whose first byte has
 * offset |start_offset| (0 for a TCP stream), or NULL on allocation
 * failure. |limits| is copied; NULL means the defaults. The caller frees it
 * with utls_ucobs_rx_free. */
utls_ucobs_rx *utls_ucobs_rx_new(const utls_ucobs_limits *limits, uint64_t start_offset);

/* utls_ucobs_rx_free frees |rx| and every datagram it holds. NULL-safe. */
void utls_ucobs_rx_free(utls_ucobs_rx *rx);

/* utls_ucobs_rx_feed offers |len| bytes at stream offset |offset| that
 * arrived at |arrival_ns| (any clock; 0 if unknown). |data| is copied. Bytes
 * already held or already passed are ignored; complete datagrams the new
 * bytes finish are queued. Returns 1, or 0 if the fragment is invalid
 * (offset + len wraps, NULL data with len > 0) or memory ran out (what was
 * queued before stays queued). Bytes a limit drops are not an error: the
 * in-order stream delivers them again. */
int utls_ucobs_rx_feed(utls_ucobs_rx *rx, uint64_t offset, const uint8_t *data, size_t len,
                       uint64_t arrival_ns);

/* utls_ucobs_rx_peek sets |*out_dgram| to the oldest queued datagram and
 * returns 1, or returns 0 if none is queued. Its data stays valid until
 * utls_ucobs_rx_pop or utls_ucobs_rx_free. */
int utls_ucobs_rx_peek(const utls_ucobs_rx *rx, utls_ucobs_datagram *out_dgram);

/* utls_ucobs_rx_pop drops the oldest queued datagram. Returns 1, or 0 if
 * none is queued. */
int utls_ucobs_rx_pop(utls_ucobs_rx *rx);

/* utls_ucobs_rx_num_ready returns the number of queued datagrams. */
size_t utls_ucobs_rx_num_ready(const utls_ucobs_rx *rx);

/* utls_ucobs_rx_walked returns the offset up to which the stream has been
 * received contiguously and walked (the receiver holds nothing below it
 * except the datagram in progress). */
uint64_t utls_ucobs_rx_walked(const utls_ucobs_rx *rx);

/* utls_ucobs_rx_get_stats copies the counters to |*out_stats|. */
void utls_ucobs_rx_get_stats(const utls_ucobs_rx *rx, utls_ucobs_stats *out_stats);

#ifdef __cplusplus
}
#endif

#endif /* UTLS_UCOBS_H */
