/* test_sched_queue.c: unit tests for the send scheduler's message queue
 * (lib/tx/queue.c), without a socket or a handshake: priorities, id order,
 * dependencies dropped in a cascade, the fate of recent ids, drop reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/crypto.h>

#include "tx/utls_tx.h"

static UTLS_SCHED *sched_new(void)
{
    UTLS_SCHED *sch = calloc(1, sizeof(*sch));

    assert_non_null(sch);
    sch->reports = calloc(UTLS_SCHED_MAX_DROP_REPORTS, sizeof(*sch->reports));
    assert_non_null(sch->reports);
    sch->next_id = 1;
    return sch;
}

static void sched_free(UTLS_SCHED *sch)
{
    while (sch->all_head != NULL) {
        sched_msg *m = sch->all_head;

        utls_sched_unlink(sch, m);
        utls_sched_msg_free(m);
    }
    free(sch->reports);
    free(sch);
}

/* Queues a message of |len| bytes at |priority| that depends on |dep| (0:
 * none), as UTLS_sched_submit() does once it has checked it. */
static sched_msg *submit(UTLS_SCHED *sch, uint8_t priority, size_t len, uint64_t dep)
{
    sched_msg *m = OPENSSL_zalloc(sizeof(*m) + len);

    assert_non_null(m);
    m->id = sch->next_id++;
    m->priority = priority;
    m->len = len;
    m->depends_on = dep;
    if (dep != 0 && (m->dep = utls_sched_find_queued(sch, dep)) != NULL) {
        m->dep->num_dependents++;
    }
    utls_sched_link(sch, m);
    return m;
}

static void test_sched_queue_highest_priority_first(void **state)
{
    UTLS_SCHED *sch = sched_new();
    sched_msg *low1, *high, *low2, *top;

    (void)state;
    assert_null(utls_sched_highest(sch));
    low1 = submit(sch, 1, 10, 0);
    high = submit(sch, 200, 20, 0);
    low2 = submit(sch, 1, 30, 0);
    top = submit(sch, UTLS_SCHED_NUM_PRIORITIES - 1, 5, 0);
    assert_int_equal(sch->stats.queued_messages, 4);
    assert_int_equal(sch->stats.queued_bytes, 65);
    assert_ptr_equal(utls_sched_highest(sch), top);
    utls_sched_unlink(sch, top);
    utls_sched_msg_free(top);
    assert_ptr_equal(utls_sched_highest(sch), high);
    utls_sched_unlink(sch, high);
    utls_sched_msg_free(high);
    /* FIFO within a priority. */
    assert_ptr_equal(utls_sched_highest(sch), low1);
    utls_sched_unlink(sch, low1);
    utls_sched_msg_free(low1);
    assert_ptr_equal(utls_sched_highest(sch), low2);
    sched_free(sch);
}

static void test_sched_queue_find_by_id(void **state)
{
    UTLS_SCHED *sch = sched_new();
    sched_msg *a, *b;

    (void)state;
    a = submit(sch, 3, 1, 0);
    b = submit(sch, 9, 1, 0);
    assert_ptr_equal(utls_sched_find_queued(sch, a->id), a);
    assert_ptr_equal(utls_sched_find_queued(sch, b->id), b);
    assert_null(utls_sched_find_queued(sch, b->id + 1));
    assert_ptr_equal(sch->all_head, a); /* id order, whatever the priority */
    assert_ptr_equal(sch->all_tail, b);
    sched_free(sch);
}

static void test_sched_queue_drop_cascades(void **state)
{
    UTLS_SCHED *sch = sched_new();
    sched_msg *base, *dep1, *other, *dep2, *next;

    (void)state;
    base = submit(sch, 5, 100, 0);
    dep1 = submit(sch, 5, 10, base->id);
    other = submit(sch, 5, 7, 0);
    dep2 = submit(sch, 5, 10, dep1->id); /* depends on base through dep1 */
    (void)dep2;
    assert_int_equal(base->num_dependents, 1);
    next = utls_sched_drop(sch, base, UTLS_SCHED_DROP_DEADLINE, 0, 1000, 2000);
    /* base, dep1 and dep2 are gone; |other| follows base's place. */
    assert_ptr_equal(next, other);
    assert_ptr_equal(sch->all_head, other);
    assert_ptr_equal(sch->all_tail, other);
    assert_int_equal(sch->stats.queued_messages, 1);
    assert_int_equal(sch->stats.queued_bytes, 7);
    assert_int_equal(sch->stats.dropped_deadline, 1);
    assert_int_equal(sch->stats.dropped_dependency, 2);
    assert_int_equal(sch->num_reports, 3);
    assert_int_equal(sch->reports[0].id, 1);
    assert_int_equal(sch->reports[0].reason, UTLS_SCHED_DROP_DEADLINE);
    assert_int_equal(sch->reports[0].est_arrival_ns, 2000);
    assert_int_equal(sch->reports[1].reason, UTLS_SCHED_DROP_DEPENDENCY);
    assert_int_equal(sch->reports[1].cause_id, 1);
    assert_true(utls_sched_fate_known(sch, 2) && utls_sched_fate_dropped(sch, 2));
    assert_false(utls_sched_fate_dropped(sch, other->id));
    sched_free(sch);
}

static void test_sched_queue_fate_window(void **state)
{
    UTLS_SCHED *sch = sched_new();

    (void)state;
    sch->next_id = 10;
    assert_false(utls_sched_fate_known(sch, 0));  /* never issued */
    assert_false(utls_sched_fate_known(sch, 10)); /* not yet issued */
    assert_true(utls_sched_fate_known(sch, 9));
    utls_sched_fate_set_dropped(sch, 9, 1);
    assert_true(utls_sched_fate_dropped(sch, 9));
    utls_sched_fate_set_dropped(sch, 9, 0);
    assert_false(utls_sched_fate_dropped(sch, 9));
    /* Past the window its fate is forgotten, and its bit is reused. */
    sch->next_id = 9 + UTLS_SCHED_FATE_WINDOW + 1;
    assert_false(utls_sched_fate_known(sch, 9));
    sched_free(sch);
}

static void test_sched_queue_reports_ring_bounded(void **state)
{
    UTLS_SCHED *sch = sched_new();
    size_t i;

    (void)state;
    for (i = 0; i < UTLS_SCHED_MAX_DROP_REPORTS + 3; i++) {
        sched_msg *m = submit(sch, 0, 1, 0);

        utls_sched_drop(sch, m, UTLS_SCHED_DROP_SQUASHED, 0, 0, 0);
    }
    assert_int_equal(sch->num_reports, UTLS_SCHED_MAX_DROP_REPORTS);
    assert_int_equal(sch->stats.drop_reports_lost, 3);
    assert_int_equal(sch->stats.dropped_squashed, UTLS_SCHED_MAX_DROP_REPORTS + 3);
    /* The oldest were forgotten: the ring starts at the fourth. */
    assert_int_equal(sch->reports[sch->report_head].id, 4);
    assert_null(sch->all_head);
    sched_free(sch);
}

static void test_sched_queue_release_dependents(void **state)
{
    UTLS_SCHED *sch = sched_new();
    sched_msg *base, *d1, *d2;

    (void)state;
    base = submit(sch, 1, 1, 0);
    d1 = submit(sch, 1, 1, base->id);
    d2 = submit(sch, 1, 1, base->id);
    assert_int_equal(base->num_dependents, 2);
    utls_sched_unlink(sch, base); /* written */
    utls_sched_release_dependents(sch, base);
    assert_int_equal(base->num_dependents, 0);
    assert_null(d1->dep);
    assert_null(d2->dep);
    utls_sched_msg_free(base);
    sched_free(sch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sched_queue_highest_priority_first),
        cmocka_unit_test(test_sched_queue_find_by_id),
        cmocka_unit_test(test_sched_queue_drop_cascades),
        cmocka_unit_test(test_sched_queue_fate_window),
        cmocka_unit_test(test_sched_queue_reports_ring_bounded),
        cmocka_unit_test(test_sched_queue_release_dependents),
    };
    return cmocka_run_group_tests_name("sched_queue", tests, NULL, NULL);
}
