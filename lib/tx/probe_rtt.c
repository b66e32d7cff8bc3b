/*
 * What the send scheduler knows of TCP at the moment it decides: its clock,
 * TCP_INFO, whether the window has room, BBR's ProbeRTT timer (a model of
 * it, to drain the queue before ProbeRTT rather than during it) and when a
 * message written now would arrive.
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
#include "tx/utls_tx.h"

/* --- Environment ------------------------------------------------------ */

uint64_t utls_sched_now(const UTLS_SCHED *sch)
{
    if (sch->env.now_ns != NULL) {
        return sch->env.now_ns(sch->env.arg);
    }
    return utls_now_ns();
}

/* utls_probe_rtt_wanted: the ProbeRTT drain is configured, so the congestion
 * control's state is worth its system calls. */
int utls_probe_rtt_wanted(const UTLS_SCHED *sch)
{
    return sch->config.probe_rtt_drain && sch->config.window_reserve_segs > 0;
}

/* utls_sched_tcp_info returns 1 with |*out| filled, or 0 if nothing is known
 * (no TCP socket: a memory BIO, a socketpair). Leaves no error behind. */
int utls_sched_tcp_info(const UTLS_SCHED *sch, UTLS_TCP_INFO *out, int want_cc)
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
    if (!utls_tx_tcp_info(fd, out, want_cc)) {
        ERR_pop_to_mark();
        return 0;
    }
    ERR_clear_last_mark();
    return 1;
}

/*
 * utls_sched_window_full says whether a priority-0 message of |len| bytes must
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
int utls_sched_window_full(const UTLS_SCHED *sch, const UTLS_TCP_INFO *ti, size_t len,
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
 * utls_probe_rtt_observe follows BBR's ProbeRTT timer from one TCP_INFO sample
 * and says whether a drain is under way: 1 if priority-0 messages are to be
 * held as if the window were already ProbeRTT's. Pure policy on |now| and
 * |ti| (the unit tests feed it synthetic samples through UTLS_SCHED_ENV).
 */
int utls_probe_rtt_observe(UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti, int have_ti)
{
    sched_probe_rtt *p = &sch->prt;
    int in_probe_rtt;
    uint64_t lead;

    if (!utls_probe_rtt_wanted(sch) || !have_ti || !ti->cc_is_bbr || ti->cwnd_segs == 0) {
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
 * utls_sched_est_arrival estimates when a message of |len| bytes written now
 * reaches the receiver: half the smoothed RTT (the one-way delay, as
 * unordered time-lined TCP does; it includes the queueing the path has shown
 * lately), plus the time the kernel needs to send the bytes already waiting
 * in it and the message's own bytes. That rate is the measured delivery rate;
 * a sample the kernel marked application-limited understates the path (with
 * the low-water mark the socket often looks application-limited), so then
 * TCP's pacing rate, the rate the kernel will send at, is used instead.
 */
uint64_t utls_sched_est_arrival(const UTLS_SCHED *sch, uint64_t now, const UTLS_TCP_INFO *ti,
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
int utls_sched_may_reorder_encrypted(const UTLS_SCHED *sch)
{
    (void)sch;
    return 0;
}
