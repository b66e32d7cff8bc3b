/*
 * <openssl/utls_sched.h>: the send scheduler and TCP information.
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_SCHED_H
# define OPENSSL_UTLS_SCHED_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * Send scheduler
 * ==============
 *
 * Once written, bytes wait in the kernel's send buffer behind everything
 * written before them. The scheduler keeps messages as *plaintext* in a
 * user-space queue instead and encrypts each (one SSL_write_ex() = one
 * record) only when the kernel's unsent data is below a low-water mark
 * (TCP_NOTSENT_LOWAT, read back through TCP_INFO). Until then it may still
 * decide what goes next: higher priority first, squashed updates never sent,
 * messages that would arrive after their deadline (and those that depend on
 * them) dropped. Record sequence numbers stay in wire order, so any TLS
 * receiver, stock OpenSSL included, reads exactly the messages written, in
 * the order written.
 *
 * Nothing handed to the kernel is ever altered or withdrawn: a record that the
 * socket took only in part stays first and is completed by the next flush.
 * The scheduler never reorders encrypted records. (Under explicit record
 * numbers (UTLS_ERN_TX) a sender could also reorder records it has already
 * encrypted; the scheduler keeps one documented hook for that in
 * utls_sched.c, which says no: it is not implemented.)
 *
 * A message must fit one record: larger ones are refused with
 * UTLS_R_SCHED_MESSAGE_TOO_LARGE, never split. The queue is bounded
 * (UTLS_SCHED_CONFIG). An UTLS_SCHED is not thread-safe, like its SSL; while it
 * is in use the application writes to the SSL only through it.
 */
typedef struct utls_sched_st UTLS_SCHED;

/* UTLS_SCHED_CONFIG: the scheduler's bounds and knobs. */
typedef struct utls_sched_config_st {
    size_t max_messages;         /* messages queued (default 4096) */
    size_t max_bytes;            /* plaintext bytes queued (default 4 MiB) */
    size_t notsent_lowat;        /* encrypt the next message only while the
                                  * kernel holds fewer unsent bytes than this;
                                  * also set as TCP_NOTSENT_LOWAT (default
                                  * 16 KiB) */
    uint64_t deadline_margin_ns; /* added to every arrival estimate (default 0) */
    uint32_t window_reserve_segs; /* 0 (default): off. Else a priority-0
                                  * message is written only while TCP's
                                  * congestion window keeps this many segments
                                  * free after it and everything unsent; while
                                  * it waits, flush returns
                                  * UTLS_SCHED_WANT_TIMER (see docs/sched.md,
                                  * "The window reserve") */
    uint32_t probe_rtt_drain;    /* 0: off; 1 (default): with a window
                                  * reserve, while TCP runs BBR, predict its
                                  * next ProbeRTT from TCP_INFO/TCP_CC_INFO and,
                                  * a little more than a round trip before it,
                                  * apply the reserve as if the window were
                                  * already ProbeRTT's 4 segments, so that
                                  * urgent messages find it free when it comes
                                  * (docs/sched.md, "Draining ahead of BBR's
                                  * ProbeRTT"); only ever withholds data */
} UTLS_SCHED_CONFIG;

/* UTLS_sched_config_default writes the defaults to |*out_config|. */
void UTLS_sched_config_default(UTLS_SCHED_CONFIG *out_config);

/*
 * UTLS_sched_config_default_ex is UTLS_sched_config_default for a
 * UTLS_SCHED_CONFIG of |config_size| bytes, the caller's
 * sizeof(UTLS_SCHED_CONFIG) (UTLS_0.2), with the size rules of
 * UTLS_limits_default_ex(). Returns 1, or 0 with the reason on the queue.
 */
int UTLS_sched_config_default_ex(UTLS_SCHED_CONFIG *out_config, size_t config_size);

/* Flags of UTLS_SCHED_MSG.flags. */
# define UTLS_SCHED_DEADLINE 0x01U /* deadline_ns holds an absolute deadline */
# define UTLS_SCHED_PLAYOUT  0x02U /* playout_ts holds a playout time */
# define UTLS_SCHED_DEPENDS  0x04U /* depends_on names an earlier message */

/*
 * UTLS_SCHED_MSG describes how one message is to be scheduled. Zero it, then
 * set what applies: an all-zero value means priority 0, sub-stream 0, no
 * squash, no deadline, no dependency.
 */
typedef struct utls_sched_msg_st {
    uint8_t priority;     /* higher is sent first; equal ones in order of
                           * submission */
    uint8_t substream;    /* the sub-stream (0..255) the message belongs to:
                           * scopes squash tags and the playout clock, and is
                           * reported back in drop reports */
    uint32_t flags;       /* UTLS_SCHED_* */
    uint64_t squash_tag;  /* non-zero: this message replaces every older
                           * unsent message of its sub-stream with the same
                           * tag (they are dropped, UTLS_SCHED_DROP_SQUASHED) */
    uint64_t deadline_ns; /* UTLS_SCHED_DEADLINE: the CLOCK_MONOTONIC time by
                           * which the message should reach the receiver */
    uint64_t playout_ts;  /* UTLS_SCHED_PLAYOUT: when the receiver plays the
                           * message, in ticks of the sub-stream's clock (see
                           * UTLS_sched_set_clock) */
    uint64_t depends_on;  /* UTLS_SCHED_DEPENDS: the id of an earlier message
                           * that this one is useless without */
} UTLS_SCHED_MSG;

/* Why a message was dropped instead of sent. */
typedef enum {
    UTLS_SCHED_DROP_SQUASHED = 1, /* a newer message with its squash tag came */
    UTLS_SCHED_DROP_DEADLINE,     /* it would have arrived after its deadline */
    UTLS_SCHED_DROP_DEPENDENCY,   /* a message it depends on was dropped */
    UTLS_SCHED_DROP_TOO_LARGE     /* the record payload limit shrank below
                                   * it after submission (max_fragment_length,
                                   * explicit record numbers switched on) */
} UTLS_SCHED_DROP_REASON;

/* UTLS_SCHED_DROP reports one dropped message. */
typedef struct utls_sched_drop_st {
    uint64_t id;              /* the dropped message */
    UTLS_SCHED_DROP_REASON reason;
    uint64_t cause_id;        /* SQUASHED: the newer message; DEPENDENCY: the
                               * dropped message it depended on; else 0 */
    uint8_t priority;
    uint8_t substream;
    uint64_t squash_tag;
    size_t len;               /* plaintext bytes never sent */
    uint64_t dropped_ns;      /* CLOCK_MONOTONIC (or the UTLS_SCHED_ENV clock) */
    uint64_t deadline_ns;     /* the effective deadline, 0 if none */
    uint64_t est_arrival_ns;  /* DEADLINE: the arrival estimate that missed it */
} UTLS_SCHED_DROP;

/* UTLS_SCHED_STATS counts a scheduler's work. */
typedef struct utls_sched_stats_st {
    uint64_t submitted;          /* messages accepted by UTLS_sched_submit */
    uint64_t written;            /* messages handed to SSL_write_ex in full */
    uint64_t written_bytes;      /* their plaintext bytes */
    uint64_t overtaken;          /* written ahead of an earlier-submitted
                                  * message that was still queued */
    uint64_t dropped_squashed;
    uint64_t dropped_deadline;
    uint64_t dropped_dependency;
    uint64_t dropped_too_large;
    uint64_t refused;            /* submissions refused (size, queue, args) */
    uint64_t lowat_waits;        /* flushes stopped at the low-water mark */
    uint64_t drop_reports_lost;  /* reports discarded because nobody read them
                                  * (the oldest go first) */
    size_t queued_messages;      /* now waiting, the partial record included */
    size_t queued_bytes;
    uint64_t window_waits;       /* flushes stopped by the window reserve */
    /* probe_rtt_drain (docs/sched.md, "Draining ahead of BBR's ProbeRTT"): */
    uint64_t probe_rtt_seen;     /* BBR ProbeRTT entries observed */
    uint64_t probe_rtt_predicted; /* of those, entries a drain was under way
                                  * for (the others were missed: the first of
                                  * a connection, or a wrong prediction) */
    uint64_t probe_rtt_drains;   /* drains started */
    uint64_t probe_rtt_drains_wasted; /* drains that ended without a ProbeRTT
                                  * (BBR's min_rtt filter was refreshed
                                  * unseen, or the prediction was wrong) */
    uint64_t probe_rtt_drain_waits; /* flushes stopped by a drain (and not by
                                  * the window reserve alone) */
    uint64_t probe_rtt_drain_ns; /* time spent draining, all drains */
    uint64_t probe_rtt_held_bytes; /* plaintext bytes of priority-0 messages
                                  * that a drain made wait (each counted once,
                                  * when written) */
    uint64_t probe_rtt_next_ns;  /* the predicted next ProbeRTT entry on the
                                  * scheduler's clock, 0 if unknown */
    uint64_t probe_rtt_interval_ns; /* the learned time from BBR's min_rtt
                                  * refresh to ProbeRTT (10 s in Linux) */
} UTLS_SCHED_STATS;

/*
 * UTLS_TCP_INFO: what the kernel knows about a TCP connection (icTCP's
 * "information"), from TCP_INFO, TCP_CONGESTION and TCP_CC_INFO. Times in
 * microseconds, sizes in bytes unless the name says segments. Fields are only
 * ever appended.
 */
typedef struct utls_tcp_info_st {
    uint32_t srtt_us;           /* smoothed RTT (tcpi_rtt) */
    uint32_t rttvar_us;         /* RTT variance (tcpi_rttvar) */
    uint32_t min_rtt_us;        /* lowest RTT seen (tcpi_min_rtt) */
    uint32_t mss;               /* sender MSS (tcpi_snd_mss) */
    uint32_t cwnd_segs;         /* congestion window (tcpi_snd_cwnd) */
    uint32_t ssthresh_segs;     /* slow-start threshold (tcpi_snd_ssthresh) */
    uint32_t unacked_segs;      /* sent, not yet acknowledged (tcpi_unacked) */
    uint32_t lost_segs;         /* currently presumed lost (tcpi_lost) */
    uint64_t bytes_in_flight;   /* estimate: (unacked - sacked - lost +
                                 * retransmitted) segments * mss */
    uint64_t notsent_bytes;     /* written, not yet sent (tcpi_notsent_bytes) */
    uint64_t total_retrans;     /* retransmitted segments (tcpi_total_retrans) */
    uint64_t bytes_retrans;     /* retransmitted bytes (tcpi_bytes_retrans) */
    uint64_t delivery_rate;     /* bytes/s (tcpi_delivery_rate) */
    int delivery_rate_app_limited; /* the rate sample was application-limited */
    uint64_t pacing_rate;       /* bytes/s (tcpi_pacing_rate) */
    uint64_t max_pacing_rate;   /* bytes/s, ~0 if uncapped */
    uint8_t ca_state;           /* tcpi_ca_state: 0 open, 1 disorder, 2 CWR,
                                 * 3 recovery, 4 loss */
    char congestion_control[16]; /* TCP_CONGESTION, NUL-terminated ("" if
                                 * unknown) */
    int cc_is_bbr;              /* congestion_control is "bbr" and TCP_CC_INFO
                                 * returned its struct tcp_bbr_info */
    uint32_t bbr_min_rtt_us;    /* BBR's windowed min RTT (bbr_min_rtt); it
                                 * changes when BBR refreshes its min_rtt
                                 * filter. 0 unless cc_is_bbr */
    uint64_t bbr_bw;            /* BBR's bottleneck bandwidth estimate,
                                 * bytes/s. 0 unless cc_is_bbr */
} UTLS_TCP_INFO;

/*
 * UTLS_tcp_get_info fills |*out_info| for the TCP socket |fd|. Returns 1, or
 * 0 with UTLS_R_SCHED_TCP_INFO on the error queue (and errno set) if |fd| is
 * not a TCP socket. Fields the running kernel does not report are 0.
 */
int UTLS_tcp_get_info(int fd, UTLS_TCP_INFO *out_info);

/*
 * UTLS_tcp_get_info_ex is UTLS_tcp_get_info for a UTLS_TCP_INFO of
 * |info_size| bytes, the caller's sizeof(UTLS_TCP_INFO) (UTLS_0.2), with the
 * size rules of UTLS_get_stats_ex().
 */
int UTLS_tcp_get_info_ex(int fd, UTLS_TCP_INFO *out_info, size_t info_size);

/*-
 * Control, only in directions that are never more aggressive than TCP
 * (icTCP's rule: the application may restrain TCP, never push it).
 *
 * UTLS_tcp_set_window_clamp bounds the receive window |fd| advertises to
 * |bytes| (TCP_WINDOW_CLAMP). A smaller advertised window can only make the
 * peer send less, never more: the peer's congestion control still applies on
 * top of it, and the kernel never shrinks a window it already offered (RFC
 * 9293 3.8.6: the right edge is not moved left), nor goes below its own
 * minimum. |bytes| 0 is refused (it would stall the connection).
 *
 * UTLS_tcp_set_max_pacing_rate caps the rate at which |fd| sends to
 * |bytes_per_sec| (SO_MAX_PACING_RATE). TCP's own pacing rate, from its
 * congestion control, still applies below the cap: a cap can delay a segment,
 * never send one earlier or grow the window. ~0 removes the cap, which is
 * stock TCP again. |bytes_per_sec| must fit 32 bits on kernels older than 4.20
 * (the option was 32-bit there).
 *
 * Both return 1, or 0 with UTLS_R_SCHED_TCP_INFO on the error queue.
 */
int UTLS_tcp_set_window_clamp(int fd, uint32_t bytes);
int UTLS_tcp_set_max_pacing_rate(int fd, uint64_t bytes_per_sec);

/*
 * UTLS_SCHED_ENV replaces where the scheduler gets the time and the TCP
 * information, for simulations, tests and applications with their own clock.
 * now_ns returns a monotonic time in nanoseconds (the deadlines of this
 * scheduler are then on that clock). tcp_info fills *out like
 * UTLS_tcp_get_info and returns 1, or 0 if nothing is known (then nothing
 * gates writing and deadlines use an RTT of 0). NULL members keep the default
 * (CLOCK_MONOTONIC; TCP_INFO of SSL_get_wfd()).
 */
typedef struct utls_sched_env_st {
    uint64_t (*now_ns)(void *arg);
    int (*tcp_info)(void *arg, UTLS_TCP_INFO *out);
    void *arg;
} UTLS_SCHED_ENV;

/*
 * UTLS_sched_new returns a scheduler that writes to |s| (not owned: it must
 * outlive the scheduler), with |config| (copied; NULL for the defaults), or
 * NULL with an error on the queue (UTLS_R_SCHED_INVALID_CONFIG: a zero bound or
 * low-water mark, a window reserve over 16, probe_rtt_drain not 0 or 1). If
 * SSL_get_wfd(s) is a TCP socket, TCP_NOTSENT_LOWAT is set
 * on it to config->notsent_lowat, so that poll()/epoll report it writable only
 * when the scheduler will write.
 */
UTLS_SCHED *UTLS_sched_new(SSL *s, const UTLS_SCHED_CONFIG *config);

/*
 * UTLS_sched_free frees |sch| and every message still queued, without writing
 * or reporting them. A record partially handed to the kernel is left to the
 * SSL (call UTLS_sched_flush until it is done first). NULL-safe.
 */
void UTLS_sched_free(UTLS_SCHED *sch);

/*
 * UTLS_sched_new_ex is UTLS_sched_new for a UTLS_SCHED_CONFIG of
 * |config_size| bytes, the caller's sizeof(UTLS_SCHED_CONFIG) (UTLS_0.2), with
 * the size rules of UTLS_set_limits_ex(): fields an older layout lacks take
 * their defaults, a newer field this library does not know must be zero. A
 * NULL |config| means the defaults, as for UTLS_sched_new(). Returns the
 * scheduler, or NULL with the reason on the queue.
 */
UTLS_SCHED *UTLS_sched_new_ex(SSL *s, const UTLS_SCHED_CONFIG *config, size_t config_size);

/* UTLS_sched_set_env sets |env| (copied; NULL restores the defaults). Returns 1. */
int UTLS_sched_set_env(UTLS_SCHED *sch, const UTLS_SCHED_ENV *env);

/*
 * UTLS_sched_set_clock sets the playout clock of |substream|: |hz| ticks per
 * second, and |playout_delay_ns|, the receiver's buffer. The first message of
 * the sub-stream submitted with a playout time P0 at time T0 starts the
 * timeline (as in unordered time-lined TCP): a message with playout time P has
 * the deadline T0 + srtt/2 + playout_delay_ns + (P - P0) / hz. Setting the
 * clock again restarts the timeline. Returns 1, or 0 (UTLS_R_SCHED_BAD_MESSAGE)
 * if |hz| is 0.
 */
int UTLS_sched_set_clock(UTLS_SCHED *sch, uint8_t substream, uint32_t hz,
                         uint64_t playout_delay_ns);

/*
 * UTLS_sched_submit queues a copy of |data| (|len| bytes) scheduled as |msg|
 * (NULL: all zero) and sets |*out_id| (if not NULL) to its id, which counts up
 * from 1. Squashing happens now. Returns 1, or 0 with an error on the queue
 * and nothing changed: UTLS_R_SCHED_MESSAGE_TOO_LARGE (|len| above one
 * record's payload, see UTLS_sched_max_message), UTLS_R_SCHED_QUEUE_FULL,
 * UTLS_R_SCHED_BAD_DEPENDENCY (depends_on is not an earlier id, or so old that
 * its fate is forgotten), UTLS_R_SCHED_NO_CLOCK (UTLS_SCHED_PLAYOUT on a
 * sub-stream without UTLS_sched_set_clock), UTLS_R_SCHED_BAD_MESSAGE (|len| 0,
 * unknown flags). A message that depends on one already dropped is accepted
 * and dropped at once (UTLS_SCHED_DROP_DEPENDENCY). Nothing is written: call
 * UTLS_sched_flush.
 */
int UTLS_sched_submit(UTLS_SCHED *sch, const void *data, size_t len, const UTLS_SCHED_MSG *msg,
                      uint64_t *out_id);

/*
 * UTLS_sched_max_message returns the largest message |sch| accepts now: the
 * SSL's record payload limit (max_send_fragment, split_send_fragment, a
 * negotiated max_fragment_length, less the 8 bytes of an explicit record
 * number once those are on).
 */
size_t UTLS_sched_max_message(const UTLS_SCHED *sch);

/* What UTLS_sched_flush and UTLS_sched_drain leave behind. */
typedef enum {
    UTLS_SCHED_IDLE = 0,    /* nothing queued: all written or dropped */
    UTLS_SCHED_WANT_WRITE,  /* messages wait for the socket: poll for POLLOUT */
    UTLS_SCHED_WANT_READ,   /* SSL_write_ex needs to read first (handshake):
                             * poll for POLLIN */
    UTLS_SCHED_ERROR,       /* SSL_write_ex failed (SSL_get_error() says why);
                             * the connection is unusable */
    UTLS_SCHED_WANT_TIMER   /* only with window_reserve_segs or a
                             * probe_rtt_drain under way: priority-0
                             * messages wait for TCP's congestion window,
                             * which no poll() event reports: flush again
                             * after UTLS_SCHED_WINDOW_RECHECK_MS (or sooner,
                             * e.g. when a new message is submitted) */
} UTLS_SCHED_RESULT;

/* UTLS_SCHED_WINDOW_RECHECK_MS: how long to wait on UTLS_SCHED_WANT_TIMER.
 * Acknowledgements open the window; 2 ms is well below the gap between them
 * when the window is small enough for the reserve to bind. */
# define UTLS_SCHED_WINDOW_RECHECK_MS 2

/*
 * UTLS_sched_flush drops what can no longer be useful, then writes as many
 * messages as the socket takes now: while the kernel holds fewer unsent bytes
 * than the low-water mark, the next message (highest priority, oldest first,
 * its queued dependency first) is checked against its deadline and written;
 * with window_reserve_segs, priority-0 messages also wait for room in TCP's
 * congestion window, and with probe_rtt_drain for BBR's predicted ProbeRTT
 * (UTLS_SCHED_WANT_TIMER).
 * It never blocks on a non-blocking socket; on a blocking one a write may
 * wait while the kernel drains to the low-water mark. Sets |*out_written| (if
 * not NULL) to the number of messages written, and returns the state.
 */
UTLS_SCHED_RESULT UTLS_sched_flush(UTLS_SCHED *sch, size_t *out_written);

/*
 * UTLS_sched_drain is UTLS_sched_flush for blocking code: it flushes, waits
 * with poll() on SSL_get_wfd() as the result asks, and repeats until the queue
 * is empty, an error, or |timeout_ms| passed (negative: no limit). Returns the
 * last state (UTLS_SCHED_WANT_WRITE or _READ on timeout).
 */
UTLS_SCHED_RESULT UTLS_sched_drain(UTLS_SCHED *sch, int timeout_ms);

/*
 * UTLS_sched_next_drop moves the oldest unread drop report to |*out_drop| and
 * returns 1, or returns 0 if there is none. At most 1024 reports are kept;
 * older ones are discarded and counted in drop_reports_lost.
 */
int UTLS_sched_next_drop(UTLS_SCHED *sch, UTLS_SCHED_DROP *out_drop);

/* UTLS_sched_drop_reason_string returns a static description of |reason|. */
const char *UTLS_sched_drop_reason_string(UTLS_SCHED_DROP_REASON reason);

/* UTLS_sched_get_stats copies |sch|'s counters. Returns 1, or 0 on NULL. */
int UTLS_sched_get_stats(const UTLS_SCHED *sch, UTLS_SCHED_STATS *out_stats);

/*
 * UTLS_sched_get_stats_ex is UTLS_sched_get_stats for a UTLS_SCHED_STATS of
 * |stats_size| bytes (UTLS_0.2), with the size rules of UTLS_get_stats_ex().
 */
int UTLS_sched_get_stats_ex(const UTLS_SCHED *sch, UTLS_SCHED_STATS *out_stats, size_t stats_size);

/*
 * UTLS_sched_get_tcp_info fills |*out_info| from the scheduler's source (the
 * SSL's socket or UTLS_SCHED_ENV). Returns 1, or 0 if nothing is known.
 */
int UTLS_sched_get_tcp_info(UTLS_SCHED *sch, UTLS_TCP_INFO *out_info);

/*
 * UTLS_sched_get_tcp_info_ex is UTLS_sched_get_tcp_info for a UTLS_TCP_INFO
 * of |info_size| bytes (UTLS_0.2), with the size rules of UTLS_get_stats_ex().
 */
int UTLS_sched_get_tcp_info_ex(UTLS_SCHED *sch, UTLS_TCP_INFO *out_info, size_t info_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_SCHED_H */
