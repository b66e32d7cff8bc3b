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
#include "tx/utls_tx.h"

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
        utls_sched_unlink(sch, m);
        utls_sched_msg_free(m);
    }
    utls_sched_msg_free(sch->partial);
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
            int have = utls_sched_tcp_info(sch, &ti, 0);

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
        if (!utls_sched_fate_known(sch, msg->depends_on)) {
            sch->stats.refused++;
            utls_raise(UTLS_R_SCHED_BAD_DEPENDENCY,
                       "message %llu is not one of the last %d ids (next id %llu)",
                       (unsigned long long)msg->depends_on, UTLS_SCHED_FATE_WINDOW,
                       (unsigned long long)sch->next_id);
            return 0;
        }
    }
    now = utls_sched_now(sch);
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
    utls_sched_fate_set_dropped(sch, id, 0); /* the slot of id - window is forgotten */
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
                x = utls_sched_drop(sch, x, UTLS_SCHED_DROP_SQUASHED, id, now, 0);
            } else {
                x = x->all_next;
            }
        }
    }
    if (m->depends_on != 0) {
        if (utls_sched_fate_dropped(sch, m->depends_on)) {
            dep_dropped = 1;
        } else {
            dep = utls_sched_find_queued(sch, m->depends_on);
        }
    }
    utls_sched_link(sch, m);
    if (dep_dropped) {
        (void)utls_sched_drop(sch, m, UTLS_SCHED_DROP_DEPENDENCY, m->depends_on, now, 0);
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
            && (est = utls_sched_est_arrival(sch, now, ti, have_ti, x->len)) > x->deadline_ns) {
            x = utls_sched_drop(sch, x, UTLS_SCHED_DROP_DEADLINE, 0, now, est);
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
        utls_sched_msg_free(m);
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
    if (utls_sched_may_reorder_encrypted(sch)) {
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
             * its priority (see utls_sched_may_reorder_encrypted). */
            r = sched_write(sch, &done);
            if (!done) {
                break;
            }
            n++;
        }
        now = utls_sched_now(sch);
        have_ti = utls_sched_tcp_info(sch, &ti, utls_probe_rtt_wanted(sch));
        draining = utls_probe_rtt_observe(sch, now, &ti, have_ti);
        sched_sweep(sch, now, &ti, have_ti);
        m = utls_sched_highest(sch);
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
            if (utls_sched_window_full(sch, &ti, m->len, 0)) {
                sch->stats.window_waits++;
                r = UTLS_SCHED_WANT_TIMER;
                break;
            }
            if (draining && utls_sched_window_full(sch, &ti, m->len, 1)) {
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
            (void)utls_sched_drop(sch, m, UTLS_SCHED_DROP_TOO_LARGE, 0, now, 0);
            continue;
        }
        est = utls_sched_est_arrival(sch, now, &ti, have_ti, m->len);
        if (m->deadline_ns != 0 && est > m->deadline_ns) {
            (void)utls_sched_drop(sch, m, UTLS_SCHED_DROP_DEADLINE, 0, now, est);
            continue;
        }
        if (m->all_prev != NULL) {
            sch->stats.overtaken++;
        }
        if (m->num_dependents > 0) {
            utls_sched_release_dependents(sch, m);
        }
        utls_sched_unlink(sch, m);
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
    return utls_sched_tcp_info(sch, out_info, 1);
}
