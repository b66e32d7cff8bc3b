/* scan.h: finds plausible TLS record headers in contiguous runs of stream
 * bytes that arrived past a hole.
 *
 * A header is plausible when its content type is allowed by the profile, its
 * record-layer version matches, and its length lies within the profile's
 * ciphertext bounds; with require_whole, it is reported only once the whole
 * record is present. The scanner remembers which header positions it has
 * checked (as intervals of stream offsets), so feeding a run that grew or
 * merged only examines positions it has not seen; headers whose record is not
 * yet complete are kept as pending and reported when a later run covers them.
 * Once the caller confirms a record (its AEAD tag or MAC verified), the
 * positions inside it are known not to be headers and the position right
 * after it is a known header: it is reported as chained, without scanning.
 *
 * A plausible header is only a candidate: random ciphertext matches the rules
 * at a rate of about popcount(types)/2^24 * (max-min+1)/2^16 per position
 * (utls_scan_profile_fp_rate), and an attacker can forge headers at will.
 * Nothing is trusted until the caller authenticates the record.
 *
 * Not thread-safe; one instance per connection direction. */
#ifndef UTLS_SCAN_H
#define UTLS_SCAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UTLS_SCAN_HEADER_LEN is the TLS record header length (type, version,
 * length): RFC 8446 5.1 / RFC 5246 6.2.1. */
#define UTLS_SCAN_HEADER_LEN 5

/* UTLS_SCAN_TYPE returns the type_mask bit for content type |t| (20..31). */
#define UTLS_SCAN_TYPE(t) (UINT32_C(1) << ((t) & 31))

/* UTLS_SCAN_MAX_PENDING is the default bound on plausible headers waiting
 * for the rest of their record. Attack bounded: injected segments packed with
 * forged headers whose records never complete, to grow memory and the work
 * done on every later feed. Past it the pending header furthest from the
 * in-order point is forgotten (that record then arrives in order). */
#define UTLS_SCAN_MAX_PENDING ((size_t)1024)

/* UTLS_SCAN_MAX_INTERVALS is the default bound on disjoint intervals of
 * checked positions remembered. Attack bounded: the same tiny-segment
 * pattern UTLS_REASM_MAX_FRAGMENTS bounds, here growing the scanner's own
 * state. Past it the interval furthest from the in-order point is forgotten;
 * those positions may be checked, and reported, again. */
#define UTLS_SCAN_MAX_INTERVALS ((size_t)4096)

/* utls_scan_profile says what a header must look like for one connection
 * direction, from the negotiated version and cipher. */
typedef struct {
    uint32_t type_mask;   /* UTLS_SCAN_TYPE(23) | ...; types >= 32 never match */
    uint16_t version;     /* legacy_record_version, 0x0303 for TLS 1.2 and 1.3 */
    uint16_t min_len;     /* smallest ciphertext length the cipher can produce */
    uint16_t max_len;     /* largest: 2^14 + 256 for TLS 1.3 (RFC 8446 5.2),
                           * 2^14 + 2048 for TLS 1.2 (RFC 5246 6.2.3) */
    int require_whole;    /* 1: report only when the whole record is present */
    size_t max_pending;   /* 0 means UTLS_SCAN_MAX_PENDING */
    size_t max_intervals; /* 0 means UTLS_SCAN_MAX_INTERVALS */
} utls_scan_profile;

/* utls_scan_hit is one plausible header. */
typedef struct {
    uint64_t offset;  /* stream offset of the header's first byte */
    uint8_t type;
    uint16_t version;
    uint16_t len;     /* ciphertext length from the header */
    int chained;      /* 1: follows a confirmed record, so it is a true
                       * boundary if the stream is intact (still verify) */
} utls_scan_hit;

/* utls_scan_result is the outcome of utls_scan_feed. */
typedef enum {
    UTLS_SCAN_DONE = 0, /* the run is fully processed */
    UTLS_SCAN_MORE,     /* |out_hits| filled up; call again with the same run */
    UTLS_SCAN_ERROR     /* allocation failure or invalid run; state consistent */
} utls_scan_result;

typedef struct utls_scan utls_scan;

/* utls_scan_stats counts the scanner's work. */
typedef struct {
    uint64_t positions_checked; /* header positions examined by the scan loop */
    uint64_t hits;              /* hits reported, chained ones included */
    uint64_t hits_chained;
    uint64_t pending_dropped;   /* pending headers forgotten by the limit */
    uint64_t intervals_dropped; /* checked intervals forgotten by the limit */
    uint64_t chain_breaks;      /* chained positions whose header was implausible */
} utls_scan_stats;

/* utls_scan_profile_tls13_app writes the profile for TLS 1.3 application
 * data records (the only type delivered out of order in TLS 1.3):
 * type 23, version 0x0303, length 17..2^14+256 (RFC 8446 5.2: the
 * ciphertext holds at least the inner content type and a 16-byte tag). */
void utls_scan_profile_tls13_app(utls_scan_profile *out_profile);

/* utls_scan_profile_fp_rate returns the probability that a uniformly random
 * position in random data matches |profile|'s header rules. */
double utls_scan_profile_fp_rate(const utls_scan_profile *profile);

/* utls_scan_new returns a scanner for |profile| (copied) whose in-order point
 * is |inorder_offset|, or NULL on allocation failure or if min_len > max_len.
 * The caller frees it with utls_scan_free. */
utls_scan *utls_scan_new(const utls_scan_profile *profile, uint64_t inorder_offset);

/* utls_scan_free frees |s|. NULL-safe. */
void utls_scan_free(utls_scan *s);

/* utls_scan_feed examines the contiguous run of |len| bytes at stream offset
 * |offset| (typically a utls_reasm_run) and writes up to |max_hits| hits to
 * |out_hits|, their count to |*out_num_hits|. Positions checked by earlier
 * calls are skipped; each position is reported at most once (see
 * UTLS_SCAN_MAX_INTERVALS for the one exception). |data| is only read during
 * the call. Returns UTLS_SCAN_MORE when |out_hits| filled before the run was
 * finished, UTLS_SCAN_DONE when it was finished, UTLS_SCAN_ERROR on a
 * wrapping run or allocation failure. */
utls_scan_result utls_scan_feed(utls_scan *s, utls_scan_hit *out_hits, size_t max_hits,
                                size_t *out_num_hits, uint64_t offset, const uint8_t *data,
                                size_t len);

/* utls_scan_confirm tells |s| that a record of |wire_len| bytes (header
 * included) was authenticated at |offset|: no header lies inside it, and the
 * next header is at offset + wire_len. That position is reported as a
 * chained hit once its header (and, with require_whole, its record) is
 * present, unless it was already reported. Returns 1, or 0 on allocation
 * failure or a wrapping record. */
int utls_scan_confirm(utls_scan *s, uint64_t offset, size_t wire_len);

/* utls_scan_advance moves the in-order point to |inorder_offset| and forgets
 * all state below it. Returns 1, or 0 if it would move backwards. */
int utls_scan_advance(utls_scan *s, uint64_t inorder_offset);

/* utls_scan_forget makes |s| forget what it learnt about positions in
 * [from, to): they are checked again, and their pending headers dropped,
 * when a run covers them next. For bytes the store replaced with another
 * copy (utls_reasm_swap_alternate). Returns 1, or 0 on allocation failure
 * (then some of those positions may stay unchecked: a record found later,
 * in order). */
int utls_scan_forget(utls_scan *s, uint64_t from, uint64_t to);

/* utls_scan_num_pending returns the number of pending headers. */
size_t utls_scan_num_pending(const utls_scan *s);

/* utls_scan_num_intervals returns the number of checked intervals held. */
size_t utls_scan_num_intervals(const utls_scan *s);

/* utls_scan_get_stats copies the counters to |*out_stats|. */
void utls_scan_get_stats(const utls_scan *s, utls_scan_stats *out_stats);

#ifdef __cplusplus
}
#endif

#endif
