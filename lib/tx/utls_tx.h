/*
 * The send scheduler's internals (lib/tx/): its limits, the message and
 * scheduler structures, and the functions its files share. Public OpenSSL
 * headers only.
 */
#ifndef UTLS_LIB_TX_H
#define UTLS_LIB_TX_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>
#include <openssl/utls.h>

/* tcpi_ca_state (Linux enum tcp_ca_state). */
#define UTLS_TCP_CA_RECOVERY 3


/* Defaults (UTLS_sched_config_default). */
/* Queued messages: bounds the per-message bookkeeping and the O(n) sweeps
 * (deadline, squash, dependency) a flush may do. */
#define UTLS_SCHED_DEFAULT_MAX_MESSAGES 4096

/* Queued plaintext: bounds the memory an application that submits faster than
 * the path drains can make the library hold. */
#define UTLS_SCHED_DEFAULT_MAX_BYTES (4u * 1024 * 1024)

/* Kernel unsent bytes below which the next message is encrypted. Small keeps
 * urgent messages from waiting behind bulk data in the kernel; it must still
 * cover what the path sends between two wake-ups of the application (at
 * 100 Mbit/s, 16 KiB is 1.3 ms). */
#define UTLS_SCHED_DEFAULT_NOTSENT_LOWAT (16u * 1024)

/* Drop reports kept for UTLS_sched_next_drop: bounds memory when the
 * application never reads them (the oldest are discarded and counted). */
#define UTLS_SCHED_MAX_DROP_REPORTS 1024

/* The largest window reserve accepted, in segments. A reserve the window
 * cannot hold throttles priority-0 messages to one record per round trip
 * (see utls_sched_window_full); this bounds how far a misconfiguration can go. */
#define UTLS_SCHED_MAX_WINDOW_RESERVE 16

/* Message ids whose fate (dropped or not) is remembered, for dependencies.
 * A dependency older than this is refused rather than guessed. */
#define UTLS_SCHED_FATE_WINDOW 65536

/* BBR's ProbeRTT (Linux net/ipv4/tcp_bbr.c, v1): the window it holds
 * (bbr_cwnd_min_target) and the life of its min_rtt filter
 * (bbr_min_rtt_win_sec), the prior for the learned interval. */
#define UTLS_SCHED_PROBE_RTT_CWND 4

#define UTLS_SCHED_PROBE_RTT_DEFAULT_INTERVAL_NS (UINT64_C(10) * 1000000000)

/* Observed intervals (min_rtt refresh to ProbeRTT) outside these bounds are
 * not learned. The lower one bounds how often a peer that controls the ACK
 * timing (and so what the scheduler observes) can make it drain: a drain
 * begins at least this less UTLS_SCHED_PROBE_RTT_MAX_LEAD_NS after the stamp
 * it predicts from, one per stamp, and lasts at most twice that lead. */
#define UTLS_SCHED_PROBE_RTT_MIN_INTERVAL_NS (UINT64_C(2) * 1000000000)

#define UTLS_SCHED_PROBE_RTT_MAX_INTERVAL_NS (UINT64_C(60) * 1000000000)

/* Intervals remembered; the prediction uses the shortest. The scheduler sees
 * the stamp move when min_rtt changes, but BBR also moves it, unseen, on
 * every later sample equal to min_rtt (common on a path with a fixed delay),
 * so an observed interval is never shorter than BBR's own and the shortest of
 * the last few is closest to it. Until that many were seen, BBR's 10 s counts
 * as one of them, so that a first interval lengthened by such refreshes does
 * not make the next prediction late. */
#define UTLS_SCHED_PROBE_RTT_HISTORY 4

/* A drain starts srtt + srtt/4 + this before the predicted entry, and waits
 * for the entry as long after it: what is in flight is acknowledged within a
 * round trip; the slack covers the error of the prediction (measured at
 * 60 ms RTT: the entry came from 34 ms before to 36 ms after it) and the 2 ms
 * between the application's flushes. */
#define UTLS_SCHED_PROBE_RTT_LEAD_SLACK_NS (UINT64_C(20) * 1000000)

/* The longest lead, and the longest wait past the predicted entry: an RTT
 * inflated by a peer that delays its ACKs cannot make one drain withhold
 * data for longer than twice this. */
#define UTLS_SCHED_PROBE_RTT_MAX_LEAD_NS (UINT64_C(250) * 1000000)

#define UTLS_SCHED_FLAGS_KNOWN (UTLS_SCHED_DEADLINE | UTLS_SCHED_PLAYOUT | UTLS_SCHED_DEPENDS)

#define UTLS_SCHED_NUM_PRIORITIES 256

#define UTLS_SCHED_NUM_SUBSTREAMS 256

typedef struct sched_msg_st sched_msg;

struct sched_msg_st {
    sched_msg *prio_prev, *prio_next; /* FIFO of its priority */
    sched_msg *all_prev, *all_next;   /* every queued message, by id */
    sched_msg *dep;                   /* the queued message it depends on */
    size_t num_dependents;            /* queued messages whose dep is this */
    uint64_t id;
    uint64_t depends_on; /* 0: none */
    uint64_t squash_tag;
    uint64_t deadline_ns; /* 0: none */
    uint8_t priority;
    uint8_t substream;
    uint8_t held_by_drain; /* a ProbeRTT drain made it wait */
    size_t len;
    unsigned char data[]; /* plaintext, owned; wiped on free */
};

typedef struct {
    sched_msg *head, *tail;
} sched_list;

/*
 * What the scheduler knows of BBR's ProbeRTT timer (probe_rtt_drain). BBR
 * enters ProbeRTT at the first ACK after its min_rtt filter is
 * bbr_min_rtt_win_sec (10 s) old; the filter's stamp moves when an RTT sample
 * is at or below min_rtt (and at ProbeRTT's entry), and when ProbeRTT ends.
 * From user space: the end of ProbeRTT is the window leaving 4 segments
 * (TCP_INFO), a lower sample is bbr_min_rtt changing (TCP_CC_INFO). An equal
 * sample moves the stamp unseen: the prediction is then early (by more than
 * the drain's grace, the drain ends without a ProbeRTT and is counted as
 * wasted).
 */
typedef struct {
    int active;               /* BBR seen on the last observation */
    int known;                /* stamp_ns is an estimate of BBR's stamp */
    int in_probe_rtt;
    int draining;
    int drained_this_stamp;   /* one drain per stamp */
    uint32_t last_cwnd;
    uint32_t last_min_rtt_us;
    uint64_t stamp_ns;
    uint64_t entry_ns;        /* predicted entry (stamp + interval) */
    uint64_t drain_start_ns;
    uint64_t drain_end_ns;    /* entry + grace: past it, the drain is wasted */
    uint64_t history[UTLS_SCHED_PROBE_RTT_HISTORY]; /* 0: empty */
    size_t history_next;
} sched_probe_rtt;

typedef struct {
    uint32_t hz;
    uint64_t playout_delay_ns;
    int started;
    uint64_t origin_ts; /* P0 */
    uint64_t origin_ns; /* T0 + srtt/2 + playout delay */
} sched_clock;

struct utls_sched_st {
    SSL *ssl;
    UTLS_SCHED_CONFIG config;
    UTLS_SCHED_ENV env;
    UTLS_SCHED_STATS stats;

    sched_list prio[UTLS_SCHED_NUM_PRIORITIES];
    uint64_t prio_nonempty[UTLS_SCHED_NUM_PRIORITIES / 64];
    sched_msg *all_head, *all_tail;
    size_t num_with_deadline;

    /* The message whose record SSL_write_ex took only in part. It is no longer
     * queued for scheduling: it must be completed, unchanged, first. */
    sched_msg *partial;

    uint64_t next_id;
    uint8_t dropped[UTLS_SCHED_FATE_WINDOW / 8]; /* bit per id mod window */

    sched_clock clocks[UTLS_SCHED_NUM_SUBSTREAMS];

    sched_probe_rtt prt;

    UTLS_SCHED_DROP *reports; /* ring */
    size_t report_head, num_reports;
};

/* tcp_info.c: TCP_INFO (and TCP_CC_INFO with |want_cc|) of |fd|. */
int utls_tx_tcp_info(int fd, UTLS_TCP_INFO *out_info, int want_cc);
/* probe_rtt.c: the scheduler's view of TCP and of BBR's ProbeRTT. */
uint64_t utls_sched_now(const UTLS_SCHED *sch);
int utls_probe_rtt_wanted(const UTLS_SCHED *sch);
int utls_sched_tcp_info(const UTLS_SCHED *sch, UTLS_TCP_INFO *out, int want_cc);
int utls_sched_window_full(const UTLS_SCHED *sch, const UTLS_TCP_INFO *ti, size_t len,
                           int draining);
int utls_probe_rtt_observe(UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti, int have_ti);
uint64_t utls_sched_est_arrival(const UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti,
                                int have_ti, size_t len);
int utls_sched_may_reorder_encrypted(const UTLS_SCHED *sch);
/* queue.c: the message queue. */
sched_msg *utls_sched_highest(const UTLS_SCHED *sch);
void utls_sched_link(UTLS_SCHED *sch, sched_msg *m);
void utls_sched_unlink(UTLS_SCHED *sch, sched_msg *m);
void utls_sched_msg_free(sched_msg *m);
void utls_sched_fate_set_dropped(UTLS_SCHED *sch, uint64_t id, int dropped);
int utls_sched_fate_dropped(const UTLS_SCHED *sch, uint64_t id);
int utls_sched_fate_known(const UTLS_SCHED *sch, uint64_t id);
sched_msg *utls_sched_drop(UTLS_SCHED *sch, sched_msg *m, UTLS_SCHED_DROP_REASON reason,
                           uint64_t cause_id, uint64_t now, uint64_t est_arrival);
void utls_sched_release_dependents(UTLS_SCHED *sch, sched_msg *m);
sched_msg *utls_sched_find_queued(const UTLS_SCHED *sch, uint64_t id);

#endif
