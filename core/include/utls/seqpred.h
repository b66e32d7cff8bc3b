/* seqpred.h: predicts the TLS sequence number of a record found out of
 * order, so that the first AEAD/MAC check usually succeeds.
 *
 * Anchors are records whose (stream offset, sequence number, wire length)
 * are known: every record delivered in order and every record verified out
 * of order. For a header at offset p, the bytes between the nearest anchor
 * below and p hold a whole number k >= 0 of records, each between the
 * smallest and the largest possible wire length, so k (and the sequence
 * number) lies in a bounded range; the same holds between the record at p
 * and the nearest anchor above. Inside the intersection of those ranges the
 * candidates are ordered by likelihood under the observed size statistics
 * (mean and variance of wire lengths), and capped.
 *
 * Exact modes give a single candidate: a declared constant record size, a
 * constant (explicit nonce - sequence) delta learned from a verified record
 * (TLS 1.2 AES-GCM as sent by OpenSSL and by stacks that use the sequence
 * number as nonce), and a record number carried inside the record.
 *
 * A wrong candidate costs one failed AEAD check (a soft failure); the record
 * still arrives in order. Not thread-safe. */
#ifndef UTLS_SEQPRED_H
#define UTLS_SEQPRED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UTLS_SEQPRED_MAX_CANDIDATES is the hard cap on candidates per header.
 * Attack bounded: a forged plausible header (cheap to inject through the
 * tap) costs at most this many AEAD/MAC trials. */
#define UTLS_SEQPRED_MAX_CANDIDATES 64

/* UTLS_SEQPRED_DEFAULT_CANDIDATES is the default per-instance cap. */
#define UTLS_SEQPRED_DEFAULT_CANDIDATES 16

/* UTLS_SEQPRED_MAX_ANCHORS bounds the anchors kept (the oldest go first).
 * Anchors only come from authenticated records, so this bounds memory and
 * the per-query cost rather than an attack. */
#define UTLS_SEQPRED_MAX_ANCHORS 64

/* Default bounds on a record's wire length (header included): the smallest
 * TLS 1.3 AEAD record (5 + 1 + 16) and the largest (5 + 2^14 + 256). */
#define UTLS_SEQPRED_DEFAULT_MIN_WIRE 22
#define UTLS_SEQPRED_DEFAULT_MAX_WIRE (5 + (1 << 14) + 256)

typedef struct utls_seqpred utls_seqpred;

/* utls_seqpred_config sets the bounds and exact modes of one instance. */
typedef struct {
    size_t min_wire_len;   /* smallest possible record, header included */
    size_t max_wire_len;   /* largest possible record, header included */
    size_t max_candidates; /* per header; clamped to UTLS_SEQPRED_MAX_CANDIDATES */
    size_t constant_wire_len; /* nonzero: the sender is known to send only
                               * records of exactly this wire length */
    int nonce_delta;       /* 1: TLS 1.2 AEAD with an explicit nonce; learn
                            * (nonce - seq) from anchors and use it */
} utls_seqpred_config;

/* utls_seqpred_record describes an anchor: a record whose sequence number is
 * known because it was delivered in order or authenticated. */
typedef struct {
    uint64_t offset;   /* stream offset of its header */
    uint64_t seq;
    size_t wire_len;   /* header + ciphertext */
    int has_nonce;     /* explicit_nonce is valid (TLS 1.2 AEAD) */
    uint64_t explicit_nonce;
} utls_seqpred_record;

/* utls_seqpred_query describes the header whose sequence number is wanted. */
typedef struct {
    uint64_t offset;   /* stream offset of its header */
    size_t wire_len;   /* 5 + length from its header */
    int has_nonce;     /* explicit_nonce read from the record (TLS 1.2 AEAD) */
    uint64_t explicit_nonce;
    int has_record_number; /* record number carried inside the record */
    uint64_t record_number;
} utls_seqpred_query;

/* utls_seqpred_stats counts the predictor's work. */
typedef struct {
    uint64_t queries;
    uint64_t candidates; /* total written */
    uint64_t exact;      /* queries answered by an exact mode */
    uint64_t capped;     /* queries whose feasible range exceeded the cap */
    uint64_t nonce_mismatches; /* anchors that contradicted the nonce delta */
} utls_seqpred_stats;

/* utls_seqpred_config_default writes the TLS 1.3 defaults to |*out_config|. */
void utls_seqpred_config_default(utls_seqpred_config *out_config);

/* utls_seqpred_new returns a predictor with |config| (copied; NULL means the
 * defaults), or NULL on allocation failure or if min_wire_len is 0 or larger
 * than max_wire_len. The caller frees it with utls_seqpred_free. */
utls_seqpred *utls_seqpred_new(const utls_seqpred_config *config);

/* utls_seqpred_free frees |sp|. NULL-safe. */
void utls_seqpred_free(utls_seqpred *sp);

/* utls_seqpred_add_anchor records an authenticated record and adds its size
 * to the statistics. Returns 1, or 0 if it contradicts a held anchor (same
 * offset with another sequence number, or sequence numbers out of stream
 * order) or has a wire length outside the configured bounds; nothing is
 * changed then. */
int utls_seqpred_add_anchor(utls_seqpred *sp, const utls_seqpred_record *rec);

/* utls_seqpred_add_origin records that the record starting at |offset| has
 * sequence number |seq| (for instance the first record under a new key,
 * seq 0 is not allowed: shift the numbering by one), without a length: it
 * bounds what follows but adds nothing to the size statistics. Returns 1, or
 * 0 if |seq| is 0, |offset| is below the smallest record, or it contradicts a
 * held anchor. */
int utls_seqpred_add_origin(utls_seqpred *sp, uint64_t offset, uint64_t seq);

/* utls_seqpred_plausible returns 1 if a record of |wire_len| bytes at
 * |offset| can have sequence number |seq| given the held anchors: in stream
 * order with them, and the gaps to its neighbours fillable by a whole number
 * of records within the configured size bounds. A record that authenticated
 * but is not plausible was copied from elsewhere in the stream (an attacker
 * relocating genuine bytes): its position is a lie. */
int utls_seqpred_plausible(const utls_seqpred *sp, uint64_t offset, size_t wire_len,
                           uint64_t seq);

/* utls_seqpred_observe adds a record wire length to the size statistics
 * without an anchor (e.g. records seen in order before seqpred existed). */
void utls_seqpred_observe(utls_seqpred *sp, size_t wire_len);

/* utls_seqpred_inherit_sizes adds the size statistics of |from| (NULL: none)
 * to those of |sp| as if |from|'s records had been observed before |sp|'s
 * own, and leaves anchors, the nonce delta and the counters of both alone.
 * For a new key generation (TLS 1.3 KeyUpdate): the sender's record sizes
 * do not change with its key, and a predictor that started over from the
 * few records seen under the new key ranks a gap by them alone. */
void utls_seqpred_inherit_sizes(utls_seqpred *sp, const utls_seqpred *from);

/* utls_seqpred_advance forgets anchors wholly below |inorder_offset| except
 * the highest of them, which remains the lower bound for what follows. */
void utls_seqpred_advance(utls_seqpred *sp, uint64_t inorder_offset);

/* utls_seqpred_candidates writes up to |max| candidate sequence numbers for
 * the record described by |q|, most likely first and all distinct, to
 * |out_seqs|, and returns how many (0 when no sequence number is consistent
 * with the anchors and bounds, or without any anchor). At most
 * min(|max|, config max_candidates) are written. */
size_t utls_seqpred_candidates(utls_seqpred *sp, uint64_t *out_seqs, size_t max,
                               const utls_seqpred_query *q);

/* utls_seqpred_first_candidate sets |*out_seq| to the candidate that
 * utls_seqpred_candidates would write first for |q| and returns 1, when that
 * one is known without ranking the others: the record's own number, an
 * anchor at the same offset, a single feasible
 * number, a declared constant size, or all observed sizes (or, with only an
 * anchor below, all recent ones) equal and the gap a whole multiple of that
 * size. Returns 0 otherwise (rank them all). Does not count
 * a query in the statistics. */
int utls_seqpred_first_candidate(const utls_seqpred *sp, const utls_seqpred_query *q,
                                 uint64_t *out_seq);

/* utls_seqpred_num_anchors returns the number of anchors held. */
size_t utls_seqpred_num_anchors(const utls_seqpred *sp);

/* utls_seqpred_mean_wire_len returns the current mean record wire length
 * estimate (0 before any observation). */
double utls_seqpred_mean_wire_len(const utls_seqpred *sp);

/* utls_seqpred_get_stats copies the counters to |*out_stats|. */
void utls_seqpred_get_stats(const utls_seqpred *sp, utls_seqpred_stats *out_stats);

#ifdef __cplusplus
}
#endif

#endif
