/*
 * The late-binding send scheduler (Minion's send-side uTCP and unordered
 * time-lined TCP, without kernel changes) and TCP information (icTCP).
 *
 * Messages wait here as plaintext. A message becomes a record only when it
 * is written, and it is written only while the kernel holds fewer unsent
 * bytes than the low-water mark, so the decision of what goes next is taken
 * as late as TCP allows. Everything is done through the public SSL API: one
 * SSL_write_ex() per message, so record sequence numbers follow wire order
 * and any receiver reads the messages exactly as written.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

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
 * (see sched_window_full); this bounds how far a misconfiguration can go. */
#define UTLS_SCHED_MAX_WINDOW_RESERVE 16
/* Message ids whose fate (dropped or not) is remembered, for dependencies.
 * A dependency older than this is refused rather than guessed. */
#define UTLS_SCHED_FATE_WINDOW 65536
/* BBR's ProbeRTT (Linux net/ipv4/tcp_bbr.c, v1): the window it holds
 * (bbr_cwnd_min_target) and the life of its min_rtt filter
 * (bbr_min_rtt_win_sec), the prior for the learned interval. */
#define UTLS_SCHED_PROBE_RTT_CWND 4
#define UTLS_SCHED_PROBE_RTT_DEFAULT_INTERVAL_NS (UINT64_C(10) * 1000000000)
/* tcpi_ca_state (Linux enum tcp_ca_state). */
#define UTLS_TCP_CA_RECOVERY 3
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

/*
 * The kernel's struct tcp_info (include/uapi/linux/tcp.h), up to the fields
 * used here. glibc's netinet/tcp.h, which libssl's headers pull in, stops at
 * tcpi_total_retrans, and linux/tcp.h cannot be included next to it. The
 * layout is kernel ABI: fields are only ever appended, and a kernel that has
 * fewer returns a shorter length, which leaves the rest zero.
 */
struct utls_kernel_tcp_info {
    uint8_t tcpi_state, tcpi_ca_state, tcpi_retransmits, tcpi_probes, tcpi_backoff, tcpi_options;
    uint8_t tcpi_wscale;       /* snd:4, rcv:4 */
    uint8_t tcpi_app_limited;  /* delivery_rate_app_limited:1, fastopen_client_fail:2 */
    uint32_t tcpi_rto, tcpi_ato, tcpi_snd_mss, tcpi_rcv_mss;
    uint32_t tcpi_unacked, tcpi_sacked, tcpi_lost, tcpi_retrans, tcpi_fackets;
    uint32_t tcpi_last_data_sent, tcpi_last_ack_sent, tcpi_last_data_recv, tcpi_last_ack_recv;
    uint32_t tcpi_pmtu, tcpi_rcv_ssthresh, tcpi_rtt, tcpi_rttvar, tcpi_snd_ssthresh;
    uint32_t tcpi_snd_cwnd, tcpi_advmss, tcpi_reordering, tcpi_rcv_rtt, tcpi_rcv_space;
    uint32_t tcpi_total_retrans;
    uint64_t tcpi_pacing_rate, tcpi_max_pacing_rate, tcpi_bytes_acked, tcpi_bytes_received;
    uint32_t tcpi_segs_out, tcpi_segs_in;
    uint32_t tcpi_notsent_bytes, tcpi_min_rtt, tcpi_data_segs_in, tcpi_data_segs_out;
    uint64_t tcpi_delivery_rate;
    uint64_t tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited;
    uint32_t tcpi_delivered, tcpi_delivered_ce;
    uint64_t tcpi_bytes_sent, tcpi_bytes_retrans;
};

/* The kernel's struct tcp_bbr_info (include/uapi/linux/inet_diag.h), what
 * TCP_CC_INFO returns for BBR. Vegas and DCTCP return 16 bytes, BBR 20. */
struct utls_kernel_bbr_info {
    uint32_t bbr_bw_lo, bbr_bw_hi, bbr_min_rtt, bbr_pacing_gain, bbr_cwnd_gain;
};

/* --- TCP information and safe control -------------------------------- */

/* tcp_get_cc reads the congestion control's name and, for BBR, its state. */
static void tcp_get_cc(int fd, UTLS_TCP_INFO *out)
{
    struct utls_kernel_bbr_info bi;
    socklen_t len = sizeof(out->congestion_control) - 1;

    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out->congestion_control, &len) != 0) {
        memset(out->congestion_control, 0, sizeof(out->congestion_control));
        return;
    }
    if (strcmp(out->congestion_control, "bbr") != 0) {
        return;
    }
    memset(&bi, 0, sizeof(bi));
    len = sizeof(bi);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &bi, &len) != 0 || len != sizeof(bi)) {
        return;
    }
    out->cc_is_bbr = 1;
    out->bbr_min_rtt_us = bi.bbr_min_rtt;
    out->bbr_bw = (uint64_t)bi.bbr_bw_hi << 32 | bi.bbr_bw_lo;
}

/* tcp_get_info is UTLS_tcp_get_info; |want_cc| 0 leaves out the congestion
 * control's name and state (two more system calls per flush, which the
 * scheduler makes only when its ProbeRTT drain can use them). */
static int tcp_get_info(int fd, UTLS_TCP_INFO *out_info, int want_cc)
{
    struct utls_kernel_tcp_info ti;
    socklen_t len = sizeof(ti);
    uint64_t segs;

    if (out_info == NULL) {
        return 0;
    }
    memset(out_info, 0, sizeof(*out_info));
    memset(&ti, 0, sizeof(ti));
    if (fd < 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "getsockopt(TCP_INFO) on fd %d: bad descriptor", fd);
        return 0;
    }
    /* The congestion control's state first, TCP_INFO second: an ACK between
     * the two calls that starts ProbeRTT then shows as the window dropping
     * with the old min_rtt, never as a min_rtt refresh without the window
     * dropping (which would cancel a drain just before it pays off). */
    if (want_cc) {
        tcp_get_cc(fd, out_info);
    }
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "getsockopt(TCP_INFO) on fd %d: %s", fd,
                   strerror(errno));
        memset(out_info, 0, sizeof(*out_info));
        return 0;
    }
    out_info->ca_state = ti.tcpi_ca_state;
    out_info->srtt_us = ti.tcpi_rtt;
    out_info->rttvar_us = ti.tcpi_rttvar;
    out_info->min_rtt_us = ti.tcpi_min_rtt;
    out_info->mss = ti.tcpi_snd_mss;
    out_info->cwnd_segs = ti.tcpi_snd_cwnd;
    out_info->ssthresh_segs = ti.tcpi_snd_ssthresh;
    out_info->unacked_segs = ti.tcpi_unacked;
    out_info->lost_segs = ti.tcpi_lost;
    /* Linux's tcp_packets_in_flight(): packets_out - (sacked_out + lost_out)
     * + retrans_out, in segments. */
    segs = (uint64_t)ti.tcpi_unacked + ti.tcpi_retrans;
    segs = segs > (uint64_t)ti.tcpi_sacked + ti.tcpi_lost
               ? segs - ti.tcpi_sacked - ti.tcpi_lost
               : 0;
    out_info->bytes_in_flight = segs * ti.tcpi_snd_mss;
    out_info->notsent_bytes = ti.tcpi_notsent_bytes;
    out_info->total_retrans = ti.tcpi_total_retrans;
    out_info->bytes_retrans = ti.tcpi_bytes_retrans;
    out_info->delivery_rate = ti.tcpi_delivery_rate;
    out_info->delivery_rate_app_limited = ti.tcpi_app_limited & 1;
    out_info->pacing_rate = ti.tcpi_pacing_rate;
    out_info->max_pacing_rate = ti.tcpi_max_pacing_rate;
    return 1;
}

int UTLS_tcp_get_info(int fd, UTLS_TCP_INFO *out_info)
{
    return tcp_get_info(fd, out_info, 1);
}

int UTLS_tcp_set_window_clamp(int fd, uint32_t bytes)
{
    int v;

    /* A clamp only lowers the window we advertise, so the peer can only send
     * less; 0 would close the window entirely, which is not "restraint" but a
     * stall, so it is refused. */
    if (bytes == 0 || bytes > INT32_MAX) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "window clamp %u out of range", bytes);
        return 0;
    }
    v = (int)bytes;
    if (setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &v, sizeof(v)) != 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "setsockopt(TCP_WINDOW_CLAMP) on fd %d: %s", fd,
                   strerror(errno));
        return 0;
    }
    return 1;
}

int UTLS_tcp_set_max_pacing_rate(int fd, uint64_t bytes_per_sec)
{
    unsigned long v64 = (unsigned long)bytes_per_sec;
    uint32_t v32;

    /* The cap is an upper bound on top of TCP's own pacing: it can only slow
     * the sender. 4.20+ takes 64 bits; older kernels 32 (~0U = no cap). */
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v64, sizeof(v64)) == 0) {
        return 1;
    }
    v32 = bytes_per_sec >= UINT32_MAX ? UINT32_MAX : (uint32_t)bytes_per_sec;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v32, sizeof(v32)) == 0) {
        return 1;
    }
    utls_raise(UTLS_R_SCHED_TCP_INFO, "setsockopt(SO_MAX_PACING_RATE) on fd %d: %s", fd,
               strerror(errno));
    return 0;
}

/* --- Environment ------------------------------------------------------ */

static uint64_t sched_now(const UTLS_SCHED *sch)
{
    if (sch->env.now_ns != NULL) {
        return sch->env.now_ns(sch->env.arg);
    }
    return utls_now_ns();
}

/* probe_rtt_wanted: the ProbeRTT drain is configured, so the congestion
 * control's state is worth its system calls. */
static int probe_rtt_wanted(const UTLS_SCHED *sch)
{
    return sch->config.probe_rtt_drain && sch->config.window_reserve_segs > 0;
}

/* sched_tcp_info returns 1 with |*out| filled, or 0 if nothing is known
 * (no TCP socket: a memory BIO, a socketpair). Leaves no error behind. */
static int sched_tcp_info(const UTLS_SCHED *sch, UTLS_TCP_INFO *out, int want_cc)
{
    int fd;

    if (sch->env.tcp_info != NULL) {
        memset(out, 0, sizeof(*out));
        return sch->env.tcp_info(sch->env.arg, out);
    }
    fd = SSL_get_wfd(sch->ssl);
    if (fd < 0) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    ERR_set_mark();
    if (!tcp_get_info(fd, out, want_cc)) {
        ERR_pop_to_mark();
        return 0;
    }
    ERR_clear_last_mark();
    return 1;
}

/*
 * sched_window_full says whether a priority-0 message of |len| bytes must
 * wait for the window reserve: it would, with the bytes in flight and those
 * unsent in the kernel, leave fewer than window_reserve_segs segments of
 * TCP's congestion window free. Those are the segments a higher-priority
 * message written later can still go out in at once, instead of queueing
 * behind bytes that wait for acknowledgements anyway. This binds only when
 * the window is nearly full: BBR's ProbeRTT (4 segments for 200 ms and a
 * round trip every 10 s), loss recovery, a window-limited CUBIC. It never
 * holds a message while nothing is in flight: then no acknowledgement would
 * come to open the window, and the connection would stall.
 */
static int sched_window_full(const UTLS_SCHED *sch, const UTLS_TCP_INFO *ti, size_t len,
                             int draining)
{
    uint64_t window, used, cwnd = ti->cwnd_segs, reserve = sch->config.window_reserve_segs;

    if (draining && cwnd > UTLS_SCHED_PROBE_RTT_CWND) {
        /* Ahead of a predicted ProbeRTT: as if the window were already the
         * 4 segments it is about to become. */
        cwnd = UTLS_SCHED_PROBE_RTT_CWND;
    }
    if (reserve == 0 || ti->mss == 0 || cwnd == 0 || ti->bytes_in_flight == 0) {
        return 0;
    }
    window = cwnd * ti->mss;
    used = ti->bytes_in_flight + ti->notsent_bytes + len + reserve * ti->mss;
    return used > window;
}

/* --- Draining ahead of BBR's ProbeRTT (probe_rtt_drain) --------------- */

/* probe_rtt_interval is the shortest remembered interval, BBR's 10 s
 * included until the history is full. */
static uint64_t probe_rtt_interval(const sched_probe_rtt *p)
{
    uint64_t best = 0;
    size_t i;
    int full = 1;

    for (i = 0; i < UTLS_SCHED_PROBE_RTT_HISTORY; i++) {
        if (p->history[i] == 0) {
            full = 0;
        } else if (best == 0 || p->history[i] < best) {
            best = p->history[i];
        }
    }
    if (!full && (best == 0 || UTLS_SCHED_PROBE_RTT_DEFAULT_INTERVAL_NS < best)) {
        best = UTLS_SCHED_PROBE_RTT_DEFAULT_INTERVAL_NS;
    }
    return best;
}

/* probe_rtt_lead: how long before the entry a drain starts (and how long
 * after it a drain still waits for it): a round trip and a quarter, which
 * is when what is in flight now has been acknowledged, plus slack. */
static uint64_t probe_rtt_lead(const UTLS_TCP_INFO *ti)
{
    uint64_t lead = (uint64_t)ti->srtt_us * 1000 * 5 / 4 + UTLS_SCHED_PROBE_RTT_LEAD_SLACK_NS;

    return lead < UTLS_SCHED_PROBE_RTT_MAX_LEAD_NS ? lead : UTLS_SCHED_PROBE_RTT_MAX_LEAD_NS;
}

static void probe_rtt_end_drain(UTLS_SCHED *sch, uint64_t now, int met)
{
    sched_probe_rtt *p = &sch->prt;

    if (!p->draining) {
        return;
    }
    p->draining = 0;
    if (now > p->drain_start_ns) { /* an application's clock may step back */
        sch->stats.probe_rtt_drain_ns += now - p->drain_start_ns;
    }
    if (met) {
        sch->stats.probe_rtt_predicted++;
    } else {
        sch->stats.probe_rtt_drains_wasted++;
    }
}

static void probe_rtt_set_stamp(sched_probe_rtt *p, uint64_t now)
{
    p->known = 1;
    p->stamp_ns = now;
    p->drained_this_stamp = 0;
}

/*
 * probe_rtt_observe follows BBR's ProbeRTT timer from one TCP_INFO sample
 * and says whether a drain is under way: 1 if priority-0 messages are to be
 * held as if the window were already ProbeRTT's. Pure policy on |now| and
 * |ti| (the unit tests feed it synthetic samples through UTLS_SCHED_ENV).
 */
static int probe_rtt_observe(UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti, int have_ti)
{
    sched_probe_rtt *p = &sch->prt;
    int in_probe_rtt;
    uint64_t lead;

    if (!probe_rtt_wanted(sch) || !have_ti || !ti->cc_is_bbr || ti->cwnd_segs == 0) {
        /* Off, no window reserve to keep free, or not BBR (any more): forget
         * everything, hold nothing. */
        if (p->active) {
            probe_rtt_end_drain(sch, now, 0);
            memset(p, 0, sizeof(*p));
            sch->stats.probe_rtt_next_ns = 0;
            sch->stats.probe_rtt_interval_ns = 0;
        }
        return 0;
    }
    if (!p->active) {
        p->active = 1;
        p->last_cwnd = ti->cwnd_segs;
        p->last_min_rtt_us = ti->bbr_min_rtt_us;
    }
    /* ProbeRTT holds the window at 4 segments. A small window in the loss
     * state (a timeout's 1) is not ProbeRTT; in recovery BBR's window is what
     * was in flight, which is small during a drain, so there it counts only
     * with the min_rtt change that ProbeRTT's entry usually makes (an entry
     * it misses is seen when recovery ends). */
    in_probe_rtt = ti->cwnd_segs <= UTLS_SCHED_PROBE_RTT_CWND
                   && (ti->ca_state < UTLS_TCP_CA_RECOVERY
                       || (ti->ca_state == UTLS_TCP_CA_RECOVERY
                           && ti->bbr_min_rtt_us != p->last_min_rtt_us));
    if (!p->in_probe_rtt && in_probe_rtt && p->last_cwnd > UTLS_SCHED_PROBE_RTT_CWND) {
        /* Entry. What the interval was, if the stamp is known. */
        p->in_probe_rtt = 1;
        sch->stats.probe_rtt_seen++;
        if (p->known && now > p->stamp_ns) {
            uint64_t seen = now - p->stamp_ns;

            if (seen >= UTLS_SCHED_PROBE_RTT_MIN_INTERVAL_NS
                && seen <= UTLS_SCHED_PROBE_RTT_MAX_INTERVAL_NS) {
                p->history[p->history_next] = seen;
                p->history_next = (p->history_next + 1) % UTLS_SCHED_PROBE_RTT_HISTORY;
            }
        }
        probe_rtt_end_drain(sch, now, 1);
        p->known = 0;
    } else if (p->in_probe_rtt && ti->cwnd_segs > UTLS_SCHED_PROBE_RTT_CWND) {
        /* Exit: bbr_check_probe_rtt_done() sets min_rtt_stamp = now. */
        p->in_probe_rtt = 0;
        probe_rtt_set_stamp(p, now);
    } else if (!p->in_probe_rtt && ti->bbr_min_rtt_us != p->last_min_rtt_us) {
        /* A new min_rtt sample moved the stamp: no ProbeRTT for another
         * interval. A drain under way was for nothing. */
        probe_rtt_end_drain(sch, now, 0);
        probe_rtt_set_stamp(p, now);
    }
    if (ti->cwnd_segs > UTLS_SCHED_PROBE_RTT_CWND || ti->ca_state < UTLS_TCP_CA_RECOVERY) {
        /* A small window in recovery is not remembered: if ProbeRTT began
         * during it, its entry is seen when recovery ends. */
        p->last_cwnd = ti->cwnd_segs;
    }
    p->last_min_rtt_us = ti->bbr_min_rtt_us;
    sch->stats.probe_rtt_interval_ns = probe_rtt_interval(p);

    if (!p->known || p->in_probe_rtt) {
        sch->stats.probe_rtt_next_ns = 0;
        return 0;
    }
    p->entry_ns = p->stamp_ns + probe_rtt_interval(p);
    sch->stats.probe_rtt_next_ns = p->entry_ns;
    lead = probe_rtt_lead(ti);
    if (p->draining && now > p->drain_end_ns) {
        /* The entry did not come: an unseen refresh, or a wrong interval. */
        probe_rtt_end_drain(sch, now, 0);
    } else if (!p->draining && !p->drained_this_stamp && now + lead >= p->entry_ns
               && now < p->entry_ns + lead) {
        p->draining = 1;
        p->drained_this_stamp = 1;
        p->drain_start_ns = now;
        p->drain_end_ns = p->entry_ns + lead;
        sch->stats.probe_rtt_drains++;
    }
    return p->draining;
}

/*
 * sched_est_arrival estimates when a message of |len| bytes written now
 * reaches the receiver: half the smoothed RTT (the one-way delay, as
 * unordered time-lined TCP does; it includes the queueing the path has shown
 * lately), plus the time the kernel needs to send the bytes already waiting
 * in it and the message's own bytes. That rate is the measured delivery rate;
 * a sample the kernel marked application-limited understates the path (with
 * the low-water mark the socket often looks application-limited), so then
 * TCP's pacing rate, the rate the kernel will send at, is used instead.
 */
static uint64_t sched_est_arrival(const UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti,
                                  int have_ti, size_t len)
{
    uint64_t t = now + sch->config.deadline_margin_ns, rate;

    if (!have_ti) {
        return t;
    }
    t += (uint64_t)ti->srtt_us * 1000 / 2;
    rate = ti->delivery_rate_app_limited ? 0 : ti->delivery_rate;
    if (rate == 0) {
        rate = ti->pacing_rate;
    }
    if (ti->max_pacing_rate != 0 && rate > ti->max_pacing_rate) {
        rate = ti->max_pacing_rate;
    }
    if (rate > 0) {
        t += (ti->notsent_bytes + len) * UINT64_C(1000000000) / rate;
    }
    return t;
}

/*-
 * EXTENSION POINT: reordering encrypted records under explicit record
 * numbers (docs/ern.md, UTLS_ern_status()).
 * Without explicit numbers a receiver counts records, so records must reach
 * the kernel in the order they were encrypted, and this scheduler holds at
 * most one encrypted record: the one the socket took only in part
 * (sch->partial), which every flush completes, unchanged, before anything
 * else. Once this endpoint's records carry numbers (UTLS_ERN_TX), a receiver
 * reads each record's number from its payload and a sender could also
 * reorder records it has already encrypted. Doing so would mean: keep a small
 * list of encrypted records instead of sch->partial, let the flush pick among
 * them as among plaintext messages, and still never withdraw a record already
 * partly in the kernel. The library can do the sealing part
 * (UTLS_ern_seal()/UTLS_ern_write_sealed(), docs/ern.md "Sending out of
 * sequence order"), but this scheduler never holds a sealed record that the
 * kernel has not started to take: it encrypts a message only when the socket
 * can take it (late binding), so the only encrypted record it holds is the
 * partial one, which must be finished first anyway. Reordering would need
 * sealing ahead, which adds latency rather than removing it, so this says no,
 * and the scheduler never reorders an encrypted record.
 */
static int sched_may_reorder_encrypted(const UTLS_SCHED *sch)
{
    (void)sch;
    return 0;
}

/* --- Queue ------------------------------------------------------------ */

static void prio_mark(UTLS_SCHED *sch, unsigned p, int nonempty)
{
    uint64_t bit = UINT64_C(1) << (p % 64);

    if (nonempty) {
        sch->prio_nonempty[p / 64] |= bit;
    } else {
        sch->prio_nonempty[p / 64] &= ~bit;
    }
}

/* sched_highest returns the head of the highest non-empty priority, or NULL. */
static sched_msg *sched_highest(const UTLS_SCHED *sch)
{
    int w;

    for (w = UTLS_SCHED_NUM_PRIORITIES / 64 - 1; w >= 0; w--) {
        if (sch->prio_nonempty[w] != 0) {
            unsigned p = (unsigned)w * 64 + 63 - (unsigned)__builtin_clzll(sch->prio_nonempty[w]);

            return sch->prio[p].head;
        }
    }
    return NULL;
}

static void sched_link(UTLS_SCHED *sch, sched_msg *m)
{
    sched_list *l = &sch->prio[m->priority];

    m->prio_prev = l->tail;
    m->prio_next = NULL;
    if (l->tail != NULL) {
        l->tail->prio_next = m;
    } else {
        l->head = m;
    }
    l->tail = m;
    prio_mark(sch, m->priority, 1);

    m->all_prev = sch->all_tail;
    m->all_next = NULL;
    if (sch->all_tail != NULL) {
        sch->all_tail->all_next = m;
    } else {
        sch->all_head = m;
    }
    sch->all_tail = m;

    if (m->deadline_ns != 0) {
        sch->num_with_deadline++;
    }
    sch->stats.queued_messages++;
    sch->stats.queued_bytes += m->len;
}

/* sched_unlink takes |m| off the queue (not off stats.queued_*: a partial
 * message still counts as queued). */
static void sched_unlink(UTLS_SCHED *sch, sched_msg *m)
{
    sched_list *l = &sch->prio[m->priority];

    if (m->prio_prev != NULL) {
        m->prio_prev->prio_next = m->prio_next;
    } else {
        l->head = m->prio_next;
    }
    if (m->prio_next != NULL) {
        m->prio_next->prio_prev = m->prio_prev;
    } else {
        l->tail = m->prio_prev;
    }
    if (l->head == NULL) {
        prio_mark(sch, m->priority, 0);
    }
    if (m->all_prev != NULL) {
        m->all_prev->all_next = m->all_next;
    } else {
        sch->all_head = m->all_next;
    }
    if (m->all_next != NULL) {
        m->all_next->all_prev = m->all_prev;
    } else {
        sch->all_tail = m->all_prev;
    }
    if (m->deadline_ns != 0) {
        sch->num_with_deadline--;
    }
    if (m->dep != NULL) {
        m->dep->num_dependents--;
        m->dep = NULL;
    }
    m->prio_prev = m->prio_next = m->all_prev = m->all_next = NULL;
}

static void sched_msg_free(sched_msg *m)
{
    if (m != NULL) {
        OPENSSL_clear_free(m, sizeof(*m) + m->len);
    }
}

static void fate_set_dropped(UTLS_SCHED *sch, uint64_t id, int dropped)
{
    size_t i = (size_t)(id % UTLS_SCHED_FATE_WINDOW);

    if (dropped) {
        sch->dropped[i / 8] |= (uint8_t)(1u << (i % 8));
    } else {
        sch->dropped[i / 8] &= (uint8_t)~(1u << (i % 8));
    }
}

static int fate_dropped(const UTLS_SCHED *sch, uint64_t id)
{
    size_t i = (size_t)(id % UTLS_SCHED_FATE_WINDOW);

    return (sch->dropped[i / 8] >> (i % 8)) & 1;
}

/* fate_known: |id| was issued and is recent enough for its fate to be known. */
static int fate_known(const UTLS_SCHED *sch, uint64_t id)
{
    return id != 0 && id < sch->next_id && sch->next_id - id <= UTLS_SCHED_FATE_WINDOW;
}

static void sched_report(UTLS_SCHED *sch, const sched_msg *m, UTLS_SCHED_DROP_REASON reason,
                         uint64_t cause_id, uint64_t now, uint64_t est_arrival)
{
    UTLS_SCHED_DROP *d;

    switch (reason) {
    case UTLS_SCHED_DROP_SQUASHED:
        sch->stats.dropped_squashed++;
        break;
    case UTLS_SCHED_DROP_DEADLINE:
        sch->stats.dropped_deadline++;
        break;
    case UTLS_SCHED_DROP_DEPENDENCY:
        sch->stats.dropped_dependency++;
        break;
    case UTLS_SCHED_DROP_TOO_LARGE:
        sch->stats.dropped_too_large++;
        break;
    default:
        break;
    }
    if (sch->num_reports == UTLS_SCHED_MAX_DROP_REPORTS) {
        sch->report_head = (sch->report_head + 1) % UTLS_SCHED_MAX_DROP_REPORTS;
        sch->num_reports--;
        sch->stats.drop_reports_lost++;
    }
    d = &sch->reports[(sch->report_head + sch->num_reports) % UTLS_SCHED_MAX_DROP_REPORTS];
    sch->num_reports++;
    memset(d, 0, sizeof(*d));
    d->id = m->id;
    d->reason = reason;
    d->cause_id = cause_id;
    d->priority = m->priority;
    d->substream = m->substream;
    d->squash_tag = m->squash_tag;
    d->len = m->len;
    d->dropped_ns = now;
    d->deadline_ns = m->deadline_ns;
    d->est_arrival_ns = est_arrival;
}

/* sched_retire takes the queued message |m| off the queue as dropped:
 * remembered, reported, counted. The caller frees it. */
static void sched_retire(UTLS_SCHED *sch, sched_msg *m, UTLS_SCHED_DROP_REASON reason,
                         uint64_t cause_id, uint64_t now, uint64_t est_arrival)
{
    sched_unlink(sch, m);
    fate_set_dropped(sch, m->id, 1);
    sched_report(sch, m, reason, cause_id, now, est_arrival);
    sch->stats.queued_messages--;
    sch->stats.queued_bytes -= m->len;
}

/*
 * sched_drop drops the queued message |m|, and then every queued message
 * that depends on it, directly or not (unordered time-lined TCP 3.3: "If a
 * given datagram expires [...] then any datagrams that are dependent on it
 * also expire"). Dependents always have larger ids, so one pass forward in id
 * order finds the whole chain. The dropped messages are freed only at the
 * end, because the dependents' links still point at them while they are taken
 * off. Returns the queued message that now follows |m|'s place in id order.
 */
static sched_msg *sched_drop(UTLS_SCHED *sch, sched_msg *m, UTLS_SCHED_DROP_REASON reason,
                             uint64_t cause_id, uint64_t now, uint64_t est_arrival)
{
    sched_msg *next = m->all_next, *dead = m, *x, *xn;
    int cascade = m->num_dependents > 0;

    sched_retire(sch, m, reason, cause_id, now, est_arrival);
    m->prio_next = NULL; /* the list of messages to free */
    for (x = cascade ? next : NULL; x != NULL; x = xn) {
        xn = x->all_next;
        if (x->depends_on != 0 && fate_known(sch, x->depends_on)
            && fate_dropped(sch, x->depends_on)) {
            if (x == next) {
                next = xn;
            }
            sched_retire(sch, x, UTLS_SCHED_DROP_DEPENDENCY, x->depends_on, now, 0);
            x->prio_next = dead;
            dead = x;
        }
    }
    while (dead != NULL) {
        x = dead->prio_next;
        sched_msg_free(dead);
        dead = x;
    }
    return next;
}

/* sched_release_dependents: |m| was written, so nothing queued waits for it. */
static void sched_release_dependents(UTLS_SCHED *sch, sched_msg *m)
{
    sched_msg *x;

    for (x = sch->all_head; x != NULL && m->num_dependents > 0; x = x->all_next) {
        if (x->dep == m) {
            x->dep = NULL;
            m->num_dependents--;
        }
    }
}

static sched_msg *sched_find_queued(const UTLS_SCHED *sch, uint64_t id)
{
    sched_msg *x;

    /* Dependencies are nearly always recent: search from the newest. */
    for (x = sch->all_tail; x != NULL && x->id >= id; x = x->all_prev) {
        if (x->id == id) {
            return x;
        }
    }
    return NULL;
}

/* --- Public API ------------------------------------------------------- */

void UTLS_sched_config_default(UTLS_SCHED_CONFIG *out_config)
{
    if (out_config == NULL) {
        return;
    }
    memset(out_config, 0, sizeof(*out_config));
    out_config->max_messages = UTLS_SCHED_DEFAULT_MAX_MESSAGES;
    out_config->max_bytes = UTLS_SCHED_DEFAULT_MAX_BYTES;
    out_config->notsent_lowat = UTLS_SCHED_DEFAULT_NOTSENT_LOWAT;
    out_config->deadline_margin_ns = 0;
    out_config->probe_rtt_drain = 1;
}

UTLS_SCHED *UTLS_sched_new(SSL *s, const UTLS_SCHED_CONFIG *config)
{
    UTLS_SCHED *sch;
    int fd;

    if (s == NULL) {
        utls_raise(UTLS_R_SCHED_INVALID_CONFIG, "no SSL");
        return NULL;
    }
    if (config != NULL
        && (config->max_messages == 0 || config->max_bytes == 0 || config->notsent_lowat == 0
            || config->notsent_lowat > INT32_MAX)) {
        utls_raise(UTLS_R_SCHED_INVALID_CONFIG,
                   "max_messages, max_bytes and notsent_lowat must be non-zero");
        return NULL;
    }
    if (config != NULL && config->probe_rtt_drain > 1) {
        utls_raise(UTLS_R_SCHED_INVALID_CONFIG, "probe_rtt_drain %u is not 0 or 1",
                   config->probe_rtt_drain);
        return NULL;
    }
    if (config != NULL && config->window_reserve_segs > UTLS_SCHED_MAX_WINDOW_RESERVE) {
        utls_raise(UTLS_R_SCHED_INVALID_CONFIG, "window_reserve_segs %u is over %d",
                   config->window_reserve_segs, UTLS_SCHED_MAX_WINDOW_RESERVE);
        return NULL;
    }
    sch = OPENSSL_zalloc(sizeof(*sch));
    if (sch == NULL) {
        return NULL;
    }
    sch->reports = OPENSSL_zalloc(sizeof(*sch->reports) * UTLS_SCHED_MAX_DROP_REPORTS);
    if (sch->reports == NULL) {
        OPENSSL_free(sch);
        return NULL;
    }
    sch->ssl = s;
    if (config != NULL) {
        sch->config = *config;
    } else {
        UTLS_sched_config_default(&sch->config);
    }
    sch->next_id = 1;
    fd = SSL_get_wfd(s);
    if (fd >= 0) {
        int v = (int)sch->config.notsent_lowat;

        /* Not a TCP socket (a socketpair in a test): nothing to gate on. */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v));
    }
    return sch;
}

void UTLS_sched_free(UTLS_SCHED *sch)
{
    sched_msg *m;

    if (sch == NULL) {
        return;
    }
    while ((m = sch->all_head) != NULL) {
        sched_unlink(sch, m);
        sched_msg_free(m);
    }
    sched_msg_free(sch->partial);
    OPENSSL_clear_free(sch->reports, sizeof(*sch->reports) * UTLS_SCHED_MAX_DROP_REPORTS);
    OPENSSL_free(sch);
}

int UTLS_sched_set_env(UTLS_SCHED *sch, const UTLS_SCHED_ENV *env)
{
    if (sch == NULL) {
        return 0;
    }
    if (env != NULL) {
        sch->env = *env;
    } else {
        memset(&sch->env, 0, sizeof(sch->env));
    }
    return 1;
}

int UTLS_sched_set_clock(UTLS_SCHED *sch, uint8_t substream, uint32_t hz,
                         uint64_t playout_delay_ns)
{
    sched_clock *c;

    if (sch == NULL || hz == 0) {
        utls_raise(UTLS_R_SCHED_BAD_MESSAGE, "a playout clock needs a non-zero rate");
        return 0;
    }
    c = &sch->clocks[substream];
    memset(c, 0, sizeof(*c));
    c->hz = hz;
    c->playout_delay_ns = playout_delay_ns;
    return 1;
}

size_t UTLS_sched_max_message(const UTLS_SCHED *sch)
{
    size_t max;

    if (sch == NULL) {
        return 0;
    }
    /*
     * What ssl3_write_bytes() puts in one record: max_send_fragment, lowered
     * by a negotiated max_fragment_length and by the explicit record number,
     * or split_send_fragment when pipelining may split a write. RFC 8446 5.1: "The length MUST NOT
     * exceed 2^14 bytes."
     */
    max = utls_max_send_fragment(sch->ssl);
    /* Explicit record numbers, once switched on, take bytes of every record. */
    max -= utls_hook_write_overhead(sch->ssl);
    if (utls_max_pipelines(sch->ssl) > 1) {
        size_t split = utls_split_send_fragment(sch->ssl);

        if (split < max) {
            max = split;
        }
    }
    return max;
}

/* sched_deadline computes |msg|'s effective deadline (0: none) or fails. */
static int sched_deadline(UTLS_SCHED *sch, const UTLS_SCHED_MSG *msg, uint64_t now,
                          uint64_t *out_deadline)
{
    uint64_t d = 0;

    if (msg->flags & UTLS_SCHED_DEADLINE) {
        d = msg->deadline_ns != 0 ? msg->deadline_ns : 1;
    }
    if (msg->flags & UTLS_SCHED_PLAYOUT) {
        sched_clock *c = &sch->clocks[msg->substream];
        int64_t ticks;
        int64_t off_ns;
        uint64_t pd;

        if (c->hz == 0) {
            utls_raise(UTLS_R_SCHED_NO_CLOCK, "sub-stream %u has no playout clock",
                       (unsigned)msg->substream);
            return 0;
        }
        if (!c->started) {
            UTLS_TCP_INFO ti;
            int have = sched_tcp_info(sch, &ti, 0);

            c->started = 1;
            c->origin_ts = msg->playout_ts;
            c->origin_ns = now + c->playout_delay_ns + (have ? (uint64_t)ti.srtt_us * 500 : 0);
        }
        /* Signed: a B-frame plays before the frame that started the timeline.
         * Split in seconds and remainder so that large tick counts at high
         * rates do not overflow. */
        ticks = (int64_t)(msg->playout_ts - c->origin_ts);
        off_ns = (ticks / (int64_t)c->hz) * INT64_C(1000000000)
                 + (ticks % (int64_t)c->hz) * INT64_C(1000000000) / (int64_t)c->hz;
        if (off_ns < 0 && (uint64_t)(-off_ns) >= c->origin_ns) {
            pd = 1; /* long past */
        } else {
            pd = (uint64_t)((int64_t)c->origin_ns + off_ns);
        }
        if (d == 0 || pd < d) {
            d = pd;
        }
    }
    *out_deadline = d;
    return 1;
}

int UTLS_sched_submit(UTLS_SCHED *sch, const void *data, size_t len, const UTLS_SCHED_MSG *msg,
                      uint64_t *out_id)
{
    static const UTLS_SCHED_MSG zero;
    sched_msg *m, *x;
    uint64_t now, deadline = 0, id;
    size_t max;
    int dep_dropped = 0;
    sched_msg *dep = NULL;

    if (sch == NULL || (data == NULL && len > 0)) {
        utls_raise(UTLS_R_SCHED_BAD_MESSAGE, "no scheduler or no data");
        return 0;
    }
    if (msg == NULL) {
        msg = &zero;
    }
    if (len == 0 || (msg->flags & ~UTLS_SCHED_FLAGS_KNOWN) != 0) {
        sch->stats.refused++;
        utls_raise(UTLS_R_SCHED_BAD_MESSAGE, len == 0 ? "empty message" : "unknown flags %#x",
                   msg->flags & ~UTLS_SCHED_FLAGS_KNOWN);
        return 0;
    }
    max = UTLS_sched_max_message(sch);
    if (len > max) {
        sch->stats.refused++;
        utls_raise(UTLS_R_SCHED_MESSAGE_TOO_LARGE,
                   "%zu bytes, one record carries at most %zu: split it into messages", len, max);
        return 0;
    }
    if (sch->stats.queued_messages >= sch->config.max_messages
        || len > sch->config.max_bytes - sch->stats.queued_bytes
        || sch->config.max_bytes < sch->stats.queued_bytes) {
        sch->stats.refused++;
        utls_raise(UTLS_R_SCHED_QUEUE_FULL, "%zu messages, %zu bytes queued (limits %zu, %zu)",
                   sch->stats.queued_messages, sch->stats.queued_bytes,
                   sch->config.max_messages, sch->config.max_bytes);
        return 0;
    }
    if (msg->flags & UTLS_SCHED_DEPENDS) {
        if (!fate_known(sch, msg->depends_on)) {
            sch->stats.refused++;
            utls_raise(UTLS_R_SCHED_BAD_DEPENDENCY,
                       "message %llu is not one of the last %d ids (next id %llu)",
                       (unsigned long long)msg->depends_on, UTLS_SCHED_FATE_WINDOW,
                       (unsigned long long)sch->next_id);
            return 0;
        }
    }
    now = sched_now(sch);
    if (!sched_deadline(sch, msg, now, &deadline)) {
        sch->stats.refused++;
        return 0;
    }
    m = OPENSSL_zalloc(sizeof(*m) + len);
    if (m == NULL) {
        sch->stats.refused++;
        return 0;
    }
    id = sch->next_id++;
    fate_set_dropped(sch, id, 0); /* the slot of id - window is forgotten */
    m->id = id;
    m->len = len;
    m->priority = msg->priority;
    m->substream = msg->substream;
    m->squash_tag = msg->squash_tag;
    m->deadline_ns = deadline;
    m->depends_on = (msg->flags & UTLS_SCHED_DEPENDS) ? msg->depends_on : 0;
    memcpy(m->data, data, len);
    sch->stats.submitted++;

    /* Minion 4.2: "remove and discard any data previously written with
     * exactly the same tag, that has not yet been transmitted in whole or in
     * part". The partial record is not in the queue, so it is safe. */
    if (m->squash_tag != 0) {
        x = sch->all_head;
        while (x != NULL) {
            if (x->squash_tag == m->squash_tag && x->substream == m->substream) {
                x = sched_drop(sch, x, UTLS_SCHED_DROP_SQUASHED, id, now, 0);
            } else {
                x = x->all_next;
            }
        }
    }
    if (m->depends_on != 0) {
        if (fate_dropped(sch, m->depends_on)) {
            dep_dropped = 1;
        } else {
            dep = sched_find_queued(sch, m->depends_on);
        }
    }
    sched_link(sch, m);
    if (dep_dropped) {
        (void)sched_drop(sch, m, UTLS_SCHED_DROP_DEPENDENCY, m->depends_on, now, 0);
    } else if (dep != NULL) {
        m->dep = dep;
        dep->num_dependents++;
    }
    if (out_id != NULL) {
        *out_id = id;
    }
    return 1;
}

/* sched_sweep drops every queued message that can no longer meet its
 * deadline: time only moves on, so none of them ever could. */
static void sched_sweep(UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti, int have_ti)
{
    sched_msg *x;

    if (sch->num_with_deadline == 0) {
        return;
    }
    x = sch->all_head;
    while (x != NULL) {
        uint64_t est;

        if (x->deadline_ns != 0
            && (est = sched_est_arrival(sch, now, ti, have_ti, x->len)) > x->deadline_ns) {
            x = sched_drop(sch, x, UTLS_SCHED_DROP_DEADLINE, 0, now, est);
        } else {
            x = x->all_next;
        }
    }
}

/* sched_write hands the partial message to SSL_write_ex. */
static UTLS_SCHED_RESULT sched_write(UTLS_SCHED *sch, int *out_done)
{
    sched_msg *m = sch->partial;
    size_t written = 0;

    *out_done = 0;
    ERR_clear_error();
    if (SSL_write_ex(sch->ssl, m->data, m->len, &written)) {
        /* One message is one record: OpenSSL writes all of it or keeps it
         * pending (SSL_MODE_ENABLE_PARTIAL_WRITE only matters for writes of
         * more than one record). */
        sch->partial = NULL;
        sch->stats.written++;
        sch->stats.written_bytes += m->len;
        if (m->held_by_drain) {
            sch->stats.probe_rtt_held_bytes += m->len;
        }
        sch->stats.queued_messages--;
        sch->stats.queued_bytes -= m->len;
        sched_msg_free(m);
        *out_done = 1;
        return UTLS_SCHED_IDLE;
    }
    switch (SSL_get_error(sch->ssl, 0)) {
    case SSL_ERROR_WANT_WRITE:
        /* The record is now (partly) in OpenSSL's write buffer and the
         * kernel: it is committed, and the same buffer must be offered
         * again. */
        return UTLS_SCHED_WANT_WRITE;
    case SSL_ERROR_WANT_READ:
        return UTLS_SCHED_WANT_READ;
    default:
        return UTLS_SCHED_ERROR;
    }
}

UTLS_SCHED_RESULT UTLS_sched_flush(UTLS_SCHED *sch, size_t *out_written)
{
    size_t n = 0;
    UTLS_SCHED_RESULT r = UTLS_SCHED_IDLE;

    if (out_written != NULL) {
        *out_written = 0;
    }
    if (sch == NULL) {
        return UTLS_SCHED_ERROR;
    }
    if (sched_may_reorder_encrypted(sch)) {
        /* Not reached: nothing negotiates explicit record numbers for the
         * scheduler yet, and in-order completion below is always safe. */
    }
    for (;;) {
        UTLS_TCP_INFO ti;
        int have_ti, done, draining;
        uint64_t now, est;
        sched_msg *m;

        if (sch->partial != NULL) {
            /* A committed record is finished before anything else, whatever
             * its priority (see sched_may_reorder_encrypted). */
            r = sched_write(sch, &done);
            if (!done) {
                break;
            }
            n++;
        }
        now = sched_now(sch);
        have_ti = sched_tcp_info(sch, &ti, probe_rtt_wanted(sch));
        draining = probe_rtt_observe(sch, now, &ti, have_ti);
        sched_sweep(sch, now, &ti, have_ti);
        m = sched_highest(sch);
        if (m == NULL) {
            r = UTLS_SCHED_IDLE;
            break;
        }
        if (have_ti && ti.notsent_bytes >= sch->config.notsent_lowat) {
            sch->stats.lowat_waits++;
            r = UTLS_SCHED_WANT_WRITE;
            break;
        }
        if (m->priority == 0 && have_ti) {
            /* Everything queued is priority 0 (m is the highest). */
            if (sched_window_full(sch, &ti, m->len, 0)) {
                sch->stats.window_waits++;
                r = UTLS_SCHED_WANT_TIMER;
                break;
            }
            if (draining && sched_window_full(sch, &ti, m->len, 1)) {
                sch->stats.probe_rtt_drain_waits++;
                m->held_by_drain = 1;
                r = UTLS_SCHED_WANT_TIMER;
                break;
            }
        }
        /* A message never goes before the message it depends on: that one
         * is pulled ahead instead (priority inheritance), so that a dropped
         * dependency can never leave a delivered dependent behind it. */
        while (m->dep != NULL) {
            m = m->dep;
        }
        if (m->len > UTLS_sched_max_message(sch)) {
            (void)sched_drop(sch, m, UTLS_SCHED_DROP_TOO_LARGE, 0, now, 0);
            continue;
        }
        est = sched_est_arrival(sch, now, &ti, have_ti, m->len);
        if (m->deadline_ns != 0 && est > m->deadline_ns) {
            (void)sched_drop(sch, m, UTLS_SCHED_DROP_DEADLINE, 0, now, est);
            continue;
        }
        if (m->all_prev != NULL) {
            sch->stats.overtaken++;
        }
        if (m->num_dependents > 0) {
            sched_release_dependents(sch, m);
        }
        sched_unlink(sch, m);
        sch->partial = m;
        r = sched_write(sch, &done);
        if (!done) {
            break;
        }
        n++;
    }
    if (out_written != NULL) {
        *out_written = n;
    }
    return r;
}

UTLS_SCHED_RESULT UTLS_sched_drain(UTLS_SCHED *sch, int timeout_ms)
{
    uint64_t start = utls_now_ns();

    for (;;) {
        UTLS_SCHED_RESULT r = UTLS_sched_flush(sch, NULL);
        struct pollfd pfd;
        int wait_ms = timeout_ms;

        if (r == UTLS_SCHED_IDLE || r == UTLS_SCHED_ERROR) {
            return r;
        }
        if (timeout_ms >= 0) {
            uint64_t spent_ms = (utls_now_ns() - start) / 1000000;

            if (spent_ms >= (uint64_t)timeout_ms) {
                return r;
            }
            wait_ms = timeout_ms - (int)spent_ms;
        }
        if (r == UTLS_SCHED_WANT_TIMER) {
            if (wait_ms < 0 || wait_ms > UTLS_SCHED_WINDOW_RECHECK_MS) {
                wait_ms = UTLS_SCHED_WINDOW_RECHECK_MS;
            }
            (void)poll(NULL, 0, wait_ms);
            continue;
        }
        pfd.fd = r == UTLS_SCHED_WANT_READ ? SSL_get_rfd(sch->ssl) : SSL_get_wfd(sch->ssl);
        pfd.events = r == UTLS_SCHED_WANT_READ ? POLLIN : POLLOUT;
        pfd.revents = 0;
        if (pfd.fd < 0) {
            return r; /* no descriptor to wait on (a memory BIO) */
        }
        /* With TCP_NOTSENT_LOWAT set, POLLOUT means the kernel's unsent bytes
         * fell below the mark. Wake at least every 10 ms anyway, so that
         * deadline drops are not held up by a socket that stays full. */
        if (wait_ms < 0 || wait_ms > 10) {
            wait_ms = 10;
        }
        if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
            return UTLS_SCHED_ERROR;
        }
    }
}

int UTLS_sched_next_drop(UTLS_SCHED *sch, UTLS_SCHED_DROP *out_drop)
{
    if (sch == NULL || out_drop == NULL || sch->num_reports == 0) {
        return 0;
    }
    *out_drop = sch->reports[sch->report_head];
    sch->report_head = (sch->report_head + 1) % UTLS_SCHED_MAX_DROP_REPORTS;
    sch->num_reports--;
    return 1;
}

const char *UTLS_sched_drop_reason_string(UTLS_SCHED_DROP_REASON reason)
{
    switch (reason) {
    case UTLS_SCHED_DROP_SQUASHED:
        return "squashed by a newer message with the same tag";
    case UTLS_SCHED_DROP_DEADLINE:
        return "would arrive after its deadline";
    case UTLS_SCHED_DROP_DEPENDENCY:
        return "depends on a dropped message";
    case UTLS_SCHED_DROP_TOO_LARGE:
        return "larger than the record size limit";
    default:
        return "unknown";
    }
}

int UTLS_sched_get_stats(const UTLS_SCHED *sch, UTLS_SCHED_STATS *out_stats)
{
    if (sch == NULL || out_stats == NULL) {
        return 0;
    }
    *out_stats = sch->stats;
    return 1;
}

int UTLS_sched_get_tcp_info(UTLS_SCHED *sch, UTLS_TCP_INFO *out_info)
{
    if (sch == NULL || out_info == NULL) {
        return 0;
    }
    return sched_tcp_info(sch, out_info, 1);
}
