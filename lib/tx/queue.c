/*
 * The send scheduler's message queue: a FIFO per priority with a bitmap of
 * the non-empty ones, the list of every queued message by id, dependencies,
 * the fate of recent ids (written or dropped) and the ring of drop reports.
 * No I/O and no TLS: unit-tested on its own (tests/unit/test_sched_queue.c).
 */
#include <string.h>

#include <openssl/crypto.h>

#include "tx/utls_tx.h"

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

/* utls_sched_highest returns the head of the highest non-empty priority, or NULL. */
sched_msg *utls_sched_highest(const UTLS_SCHED *sch)
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

void utls_sched_link(UTLS_SCHED *sch, sched_msg *m)
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

/* utls_sched_unlink takes |m| off the queue (not off stats.queued_*: a partial
 * message still counts as queued). */
void utls_sched_unlink(UTLS_SCHED *sch, sched_msg *m)
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

void utls_sched_msg_free(sched_msg *m)
{
    if (m != NULL) {
        OPENSSL_clear_free(m, sizeof(*m) + m->len);
    }
}

void utls_sched_fate_set_dropped(UTLS_SCHED *sch, uint64_t id, int dropped)
{
    size_t i = (size_t)(id % UTLS_SCHED_FATE_WINDOW);

    if (dropped) {
        sch->dropped[i / 8] |= (uint8_t)(1u << (i % 8));
    } else {
        sch->dropped[i / 8] &= (uint8_t)~(1u << (i % 8));
    }
}

int utls_sched_fate_dropped(const UTLS_SCHED *sch, uint64_t id)
{
    size_t i = (size_t)(id % UTLS_SCHED_FATE_WINDOW);

    return (sch->dropped[i / 8] >> (i % 8)) & 1;
}

/* utls_sched_fate_known: |id| was issued and is recent enough for its fate to be known. */
int utls_sched_fate_known(const UTLS_SCHED *sch, uint64_t id)
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
    utls_sched_unlink(sch, m);
    utls_sched_fate_set_dropped(sch, m->id, 1);
    sched_report(sch, m, reason, cause_id, now, est_arrival);
    sch->stats.queued_messages--;
    sch->stats.queued_bytes -= m->len;
}

/*
 * utls_sched_drop drops the queued message |m|, and then every queued message
 * that depends on it, directly or not (unordered time-lined TCP 3.3: "If a
 * given datagram expires [...] then any datagrams that are dependent on it
 * also expire"). Dependents always have larger ids, so one pass forward in id
 * order finds the whole chain. The dropped messages are freed only at the
 * end, because the dependents' links still point at them while they are taken
 * off. Returns the queued message that now follows |m|'s place in id order.
 */
sched_msg *utls_sched_drop(UTLS_SCHED *sch, sched_msg *m, UTLS_SCHED_DROP_REASON reason,
                           uint64_t cause_id, uint64_t now, uint64_t est_arrival)
{
    sched_msg *next = m->all_next, *dead = m, *x, *xn;
    int cascade = m->num_dependents > 0;

    sched_retire(sch, m, reason, cause_id, now, est_arrival);
    m->prio_next = NULL; /* the list of messages to free */
    for (x = cascade ? next : NULL; x != NULL; x = xn) {
        xn = x->all_next;
        if (x->depends_on != 0 && utls_sched_fate_known(sch, x->depends_on)
            && utls_sched_fate_dropped(sch, x->depends_on)) {
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
        utls_sched_msg_free(dead);
        dead = x;
    }
    return next;
}

/* utls_sched_release_dependents: |m| was written, so nothing queued waits for it. */
void utls_sched_release_dependents(UTLS_SCHED *sch, sched_msg *m)
{
    sched_msg *x;

    for (x = sch->all_head; x != NULL && m->num_dependents > 0; x = x->all_next) {
        if (x->dep == m) {
            x->dep = NULL;
            m->num_dependents--;
        }
    }
}

sched_msg *utls_sched_find_queued(const UTLS_SCHED *sch, uint64_t id)
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
