/*
 * lossy.h: an in-process lossy TCP segment network with ground truth.
 *
 * A sender's bytes (a stream that grows as the sender writes) are cut into
 * MSS segments and delivered, through a caller's callback, as (stream offset,
 * bytes) pairs -- what a segment BIO wants -- after a seeded generator has
 * dropped, held back (reordered), duplicated and re-segmented them. Every
 * dropped segment is retransmitted |rtt| segment-times later (possibly cut at
 * other boundaries and overlapping its neighbours; a retransmission can be
 * lost again). Time is counted in segments: one tick per segment the sender
 * puts on the wire; lossy_idle() lets time pass without new segments (an
 * application-limited sender, or a retransmission timer).
 *
 * Ground truth: the stream is parsed record by record (5-byte TLS headers) as
 * it grows. For every record the network knows its stream offset and wire
 * length, the delivery after which all of its bytes were present, and whether
 * at that moment an earlier byte of the stream was still missing (a record
 * that a uTLS receiver must deliver out of order). Before each callback the
 * truth already includes the delivery, and the delivery says where the
 * in-order point was before and after it.
 *
 * No OpenSSL here: the callback decides what a delivery means.
 */
#ifndef UTLS_TESTS_LOSSY_H
#define UTLS_TESTS_LOSSY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* lossy_rng is xoshiro256** seeded with splitmix64: the same seed gives the
 * same run on every machine. */
typedef struct lossy_rng {
    uint64_t s[4];
} lossy_rng;

void lossy_rng_seed(lossy_rng *rng, uint64_t seed);
uint64_t lossy_rng_next(lossy_rng *rng);
/* lossy_rng_below returns a uniform integer in [0, bound) (0 if bound is 0). */
uint64_t lossy_rng_below(lossy_rng *rng, uint64_t bound);
/* lossy_rng_range returns a uniform integer in [lo, hi]. */
uint64_t lossy_rng_range(lossy_rng *rng, uint64_t lo, uint64_t hi);
/* lossy_rng_unit returns a uniform double in [0, 1). */
double lossy_rng_unit(lossy_rng *rng);
void lossy_rng_bytes(lossy_rng *rng, void *out, size_t len);

#define LOSSY_MSS 1448

typedef struct lossy_params {
    size_t mss;              /* segment payload size (LOSSY_MSS) */
    double p_drop;           /* an original transmission is lost */
    double p_drop_retx;      /* a retransmission is lost (again) */
    double p_reorder;        /* a segment is held back ... */
    unsigned reorder_max;    /* ... for 1..reorder_max later segments */
    double p_dup;            /* a segment arrives twice ... */
    unsigned dup_max_delay;  /* ... the copy 0..dup_max_delay segments later */
    double p_resegment;      /* a retransmission is cut at other boundaries,
                              * overlapping its neighbours by up to mss/2 */
    unsigned rtt;            /* a loss is repaired this many segments later */
    unsigned rtt_jitter;     /* plus 0..rtt_jitter */
} lossy_params;

/* lossy_params_lossless: every segment arrives once, in order, at once. */
void lossy_params_lossless(lossy_params *out_params);
/* lossy_params_default: |loss| drop probability, 1% reordering, 0.5%
 * duplicates, half of the retransmissions re-segmented, RTT 10 segments. */
void lossy_params_default(lossy_params *out_params, double loss);

/* What a delivered segment is. */
enum lossy_kind {
    LOSSY_ORIGINAL = 0,   /* first transmission, on time */
    LOSSY_REORDERED,      /* first transmission, held back */
    LOSSY_RETRANSMISSION, /* repair of a loss (maybe re-segmented) */
    LOSSY_DUPLICATE,      /* a second copy */
    LOSSY_INJECTED        /* lossy_inject(): not from the sender */
};

typedef struct lossy_delivery {
    uint64_t index;          /* 1, 2, ...: deliveries so far */
    uint64_t offset;         /* stream offset of data[0] */
    uint8_t *data;           /* a private copy: the callback may modify it */
    size_t len;
    enum lossy_kind kind;
    uint64_t inorder_before; /* truth: bytes [0, inorder) all present before */
    uint64_t inorder_after;  /* ... and after this delivery */
    int hole_before;         /* a sender byte at or past inorder_before was
                              * already present: there was a hole */
    int fills_hole;          /* hole_before and the in-order point advanced */
    int past_hole;           /* the delivery starts past the in-order point */
} lossy_delivery;

/* The callback's answers. */
#define LOSSY_CB_OK 1
#define LOSSY_CB_ABORT 0
#define LOSSY_CB_RETRY (-1) /* not accepted (outside a receive window): offer
                             * it again one rtt later, as TCP would. The truth
                             * forgets it. */

typedef int (*lossy_deliver_fn)(void *arg, lossy_delivery *delivery);

/* One record of the sender's stream. The network fills the first block; the
 * second belongs to the harness. */
typedef struct lossy_record {
    uint64_t offset;
    size_t wire_len;         /* 5 + the header's length field */
    uint8_t type;
    uint16_t version;
    uint64_t complete_at;    /* delivery index that completed it; 0: not yet */
    int after_hole;          /* completed while an earlier byte was missing */

    int tag;                 /* harness: what the record is (0 unknown) */
    int64_t app_index;       /* harness: message index, -1 if none */
    uint64_t seq;            /* harness: expected TLS sequence number */
    uint32_t key_generation; /* harness: expected key generation */
    int delivered;           /* harness: times delivered */
    int delivered_ooo;       /* harness: flag of the first delivery */
    uint64_t delivered_at;   /* harness: deliveries counter at that moment */
    int tampered;            /* harness: bytes of it were modified */
} lossy_record;

typedef struct lossy_counters {
    uint64_t segments;       /* original transmissions */
    uint64_t drops;          /* transmissions lost (original or repeated) */
    uint64_t retransmissions;
    uint64_t resegmented;    /* retransmissions cut at other boundaries */
    uint64_t reordered;
    uint64_t duplicates;
    uint64_t injected;
    uint64_t retries;        /* deliveries the callback refused (window) */
    uint64_t deliveries;
    uint64_t holes_filled;   /* deliveries with fills_hole */
    uint64_t bytes_delivered;
} lossy_counters;

typedef struct lossy_net lossy_net;

/* lossy_new returns a network with |params| and |seed| that calls |deliver|
 * with |arg| for every arriving segment, or NULL. */
lossy_net *lossy_new(const lossy_params *params, uint64_t seed, lossy_deliver_fn deliver,
                     void *arg);
void lossy_free(lossy_net *net);
/* lossy_set_params changes the behaviour for segments sent from now on. */
void lossy_set_params(lossy_net *net, const lossy_params *params);

/* lossy_append appends |len| sender bytes to the stream and parses the
 * records in them without putting anything on the wire (so that the caller
 * can look at the new records first). Returns 1, or 0 if memory ran out. */
int lossy_append(lossy_net *net, const void *data, size_t len);
/* lossy_transmit puts every complete MSS segment of the stream on the wire
 * and delivers what is due. Returns 1, or 0 if the callback aborted. */
int lossy_transmit(lossy_net *net);
/* lossy_send is lossy_append followed by lossy_transmit: it appends |len| sender bytes to the stream, puts every complete MSS
 * segment on the wire and delivers what is due. Returns 1, or 0 if the
 * callback aborted or memory ran out. */
int lossy_send(lossy_net *net, const void *data, size_t len);
/* lossy_flush puts the partial last segment (if any) on the wire (PSH). */
int lossy_flush(lossy_net *net);
/* lossy_idle lets one segment-time pass and delivers what is due. */
int lossy_idle(lossy_net *net);
/* lossy_finish flushes and lets time pass until nothing is in flight: every
 * byte sent has been delivered at least once. */
int lossy_finish(lossy_net *net);
/* lossy_pending returns how many deliveries are scheduled. */
size_t lossy_pending(const lossy_net *net);

/* lossy_drop_range makes every original transmission that overlaps
 * [offset, offset + len) be lost (once; the retransmission arrives). Bytes
 * not yet sent are allowed. */
void lossy_drop_range(lossy_net *net, uint64_t offset, uint64_t len);
/* lossy_hold_range holds back every original transmission overlapping the
 * range for |ticks| segment-times (a reordering the test controls). */
void lossy_hold_range(lossy_net *net, uint64_t offset, uint64_t len, unsigned ticks);

/* lossy_inject schedules bytes that the sender never sent (or sent elsewhere)
 * at |offset|, |delay| segment-times from now (0: delivered at once). */
int lossy_inject(lossy_net *net, uint64_t offset, const void *data, size_t len, unsigned delay);

/* Truth. */
uint64_t lossy_stream_len(const lossy_net *net);   /* bytes sent */
const uint8_t *lossy_stream(const lossy_net *net); /* the sender's bytes */
uint64_t lossy_inorder(const lossy_net *net);      /* all bytes below present */
size_t lossy_num_records(const lossy_net *net);    /* complete headers parsed */
lossy_record *lossy_get_record(lossy_net *net, size_t i);
/* lossy_record_index_after returns the index of the first record that ends
 * past |offset| (lossy_num_records() if none). */
size_t lossy_record_index_after(const lossy_net *net, uint64_t offset);
/* lossy_find_record returns the record whose header is at |offset|, or NULL. */
lossy_record *lossy_find_record(lossy_net *net, uint64_t offset);
/* lossy_present says whether every byte of [offset, offset + len) arrived. */
int lossy_present(const lossy_net *net, uint64_t offset, uint64_t len);
const lossy_counters *lossy_get_counters(const lossy_net *net);
uint64_t lossy_tick(const lossy_net *net);

#ifdef __cplusplus
}
#endif
#endif /* UTLS_TESTS_LOSSY_H */
