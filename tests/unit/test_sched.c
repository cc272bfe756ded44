/* Per-partition pause/seek/resume decisions, without a broker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/sched.h"

#define T0 1796054400000LL

/* Collects what a sched function hands back. */
struct seen {
    size_t n;
    char names[64][80];
    int64_t offsets[64];
};

static void visit(void *arg, const char *topic, int32_t partition, int64_t offset)
{
    struct seen *s = arg;

    assert_true(s->n < 64);
    s->offsets[s->n] = offset;
    snprintf(s->names[s->n++], sizeof(s->names[0]), "%s/%d", topic, (int)partition);
}

static int64_t seen_offset(const struct seen *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return s->offsets[i];
    fail_msg("%s was not handed back", name);
    return -2;
}

static bool seen_has(const struct seen *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return true;
    return false;
}

static void test_due_and_wait(void **state)
{
    struct sched *s = sched_new(0);
    struct seen seen = {0};

    (void)state;
    assert_false(sched_assign(s, "t", 0));
    assert_false(sched_assign(s, "t", 1));
    assert_int_equal(sched_assigned_count(s), 2);
    assert_int_equal(sched_next_resume(s), SCHED_NEVER);

    /* Due (and exactly due) messages are processed. */
    assert_int_equal(sched_offer(s, "t", 0, 10, T0 - 5, T0), SCHED_DUE);
    assert_int_equal(sched_offer(s, "t", 0, 11, T0, T0), SCHED_DUE);
    /* The first message that is not due pauses its partition at its offset. */
    assert_int_equal(sched_offer(s, "t", 0, 12, T0 + 1000, T0), SCHED_PAUSE);
    assert_true(sched_is_paused(s, "t", 0));
    assert_int_equal(sched_paused_count(s), 1);
    assert_int_equal(sched_next_resume(s), T0 + 1000);
    /* Later messages of that partition were prefetched: dropped, whatever their due time. */
    assert_int_equal(sched_offer(s, "t", 0, 12, T0 + 1000, T0 + 1), SCHED_DROP);
    assert_int_equal(sched_offer(s, "t", 0, 13, T0 - 99999, T0 + 1), SCHED_DROP);
    assert_int_equal(sched_offer(s, "t", 0, 14, SCHED_ALWAYS_DUE, T0 + 1), SCHED_DROP);
    /* The other partition is not affected. */
    assert_int_equal(sched_offer(s, "t", 1, 0, T0 - 1, T0 + 1), SCHED_DUE);
    assert_false(sched_is_paused(s, "t", 1));

    /* Never early: nothing resumes one millisecond before the due time. */
    assert_int_equal(sched_take_resumable(s, T0 + 999, visit, &seen), 0);
    assert_int_equal(sched_take_resumable(s, T0 + 1000, visit, &seen), 1);
    assert_true(seen_has(&seen, "t/0"));
    /* With the offset it was sought to: where fetching resumes. */
    assert_int_equal(seen_offset(&seen, "t/0"), 12);
    assert_false(sched_is_paused(s, "t", 0));
    assert_int_equal(sched_next_resume(s), SCHED_NEVER);
    /* Fetched again after the resume, the message is due now. */
    assert_int_equal(sched_offer(s, "t", 0, 12, T0 + 1000, T0 + 1000), SCHED_DUE);
    /* Nothing to hand back twice. */
    assert_int_equal(sched_take_resumable(s, T0 + 5000, visit, &seen), 0);
    sched_free(s);
}

static void test_min_pause(void **state)
{
    struct sched *s = sched_new(50);

    (void)state;
    sched_assign(s, "t", 0);
    /* Due in 10 ms: paused for the 50 ms floor, never resumed before the due time. */
    assert_int_equal(sched_offer(s, "t", 0, 1, T0 + 10, T0), SCHED_PAUSE);
    assert_int_equal(sched_next_resume(s), T0 + 50);
    assert_int_equal(sched_take_resumable(s, T0 + 10, NULL, NULL), 0);
    assert_int_equal(sched_take_resumable(s, T0 + 50, NULL, NULL), 1);
    /* Due in 5 s: the due time itself. */
    assert_int_equal(sched_offer(s, "t", 0, 1, T0 + 5000, T0 + 60), SCHED_PAUSE);
    assert_int_equal(sched_next_resume(s), T0 + 5000);
    sched_free(s);
}

/* With a lead (a caller that holds what it fetches early), a partition resumes that long before
 * its due time, never sooner than the floor; sched_pause pauses whatever the due time. */
static void test_lead_and_forced_pause(void **state)
{
    struct sched *s = sched_new(50);

    (void)state;
    sched_set_lead(s, 1000);
    sched_assign(s, "t", 0);
    sched_assign(s, "t", 1);
    assert_int_equal(sched_offer(s, "t", 0, 1, T0 + 5000, T0), SCHED_PAUSE);
    assert_int_equal(sched_next_resume(s), T0 + 4000);
    assert_int_equal(sched_take_resumable(s, T0 + 3999, NULL, NULL), 0);
    assert_int_equal(sched_take_resumable(s, T0 + 4000, NULL, NULL), 1);
    /* Due within the lead: the floor. */
    assert_int_equal(sched_offer(s, "t", 0, 2, T0 + 4500, T0 + 4000), SCHED_PAUSE);
    assert_int_equal(sched_next_resume(s), T0 + 4050);
    /* A forced pause of a due (or undated) message: the floor, at its offset. */
    assert_true(sched_pause(s, "t", 1, 9, SCHED_ALWAYS_DUE, T0 + 4000));
    assert_true(sched_is_paused(s, "t", 1));
    assert_int_equal(sched_offer(s, "t", 1, 9, T0, T0 + 4001), SCHED_DROP);
    /* A pause until a known time: that time itself, no lead, and never sooner than the floor. */
    sched_assign(s, "t", 2);
    assert_true(sched_pause_at(s, "t", 2, 5, T0 + 9000, T0 + 4000));
    assert_int_equal(sched_take_resumable(s, T0 + 8999, NULL, NULL), 2); /* t/0 and t/1 */
    assert_int_equal(sched_next_resume(s), T0 + 9000);
    assert_true(sched_pause_at(s, "t", 2, 5, T0 + 4010, T0 + 4000));
    assert_int_equal(sched_next_resume(s), T0 + 4050);
    sched_free(s);
}

static void test_rewind_before_seek(void **state)
{
    struct sched *s = sched_new(0);

    (void)state;
    sched_assign(s, "t", 3);
    assert_int_equal(sched_offer(s, "t", 3, 100, T0 + 5000, T0), SCHED_PAUSE);
    /* A message before the offset we sought to would be skipped by the
     * resume: seek back to it instead of dropping it. */
    assert_int_equal(sched_offer(s, "t", 3, 90, T0 + 9000, T0), SCHED_PAUSE);
    assert_int_equal(sched_offer(s, "t", 3, 95, T0 + 9000, T0), SCHED_DROP);
    assert_int_equal(sched_next_resume(s), T0 + 5000);
    /* An earlier message that is already due moves the resume forward. */
    assert_int_equal(sched_offer(s, "t", 3, 80, T0 - 1, T0 + 10), SCHED_PAUSE);
    assert_int_equal(sched_next_resume(s), T0 + 10);
    sched_free(s);
}

static void test_rebalance_clears(void **state)
{
    struct sched *s = sched_new(0);
    struct seen seen = {0};

    (void)state;
    sched_assign(s, "a", 0);
    sched_assign(s, "b", 7);
    assert_int_equal(sched_offer(s, "a", 0, 5, T0 + 60000, T0), SCHED_PAUSE);
    /* Revoking a partition we paused says so (the caller resumes it first). */
    assert_true(sched_revoke(s, "a", 0));
    assert_false(sched_revoke(s, "b", 7));
    assert_false(sched_revoke(s, "never", 1));
    assert_int_equal(sched_assigned_count(s), 0);
    assert_int_equal(sched_paused_count(s), 0);
    assert_int_equal(sched_next_resume(s), SCHED_NEVER);
    /* Assigned again, the partition starts afresh: nothing is dropped and
     * the old resume time is gone. */
    assert_false(sched_assign(s, "a", 0));
    assert_int_equal(sched_offer(s, "a", 0, 6, T0 - 1, T0), SCHED_DUE);
    assert_int_equal(sched_take_resumable(s, T0 + 120000, visit, &seen), 0);

    /* Assigning a paused partition again (eager protocol) also clears it. */
    assert_int_equal(sched_offer(s, "a", 0, 7, T0 + 60000, T0), SCHED_PAUSE);
    assert_false(sched_assign(s, "a", 0));
    assert_false(sched_is_paused(s, "a", 0));
    assert_int_equal(sched_assigned_count(s), 1);
    sched_free(s);
}

static void test_stall(void **state)
{
    struct sched *s = sched_new(0);
    struct seen seen = {0};

    (void)state;
    sched_assign(s, "t", 0);
    sched_assign(s, "t", 1);
    sched_assign(s, "t", 2);
    assert_int_equal(sched_offer(s, "t", 2, 40, T0 + 5000, T0), SCHED_PAUSE);

    /* The stall pauses every partition not paused yet, and only those. */
    assert_int_equal(sched_stall_begin(s, visit, &seen), 2);
    assert_true(seen_has(&seen, "t/0") && seen_has(&seen, "t/1"));
    assert_false(seen_has(&seen, "t/2"));
    assert_true(sched_stalled(s));
    assert_int_equal(sched_stall_begin(s, visit, &seen), 0); /* idempotent */
    assert_int_equal(sched_paused_count(s), 3);

    /* Nothing resumes during a stall, not even a partition whose time came. */
    assert_int_equal(sched_next_resume(s), SCHED_NEVER);
    assert_int_equal(sched_take_resumable(s, T0 + 10000, visit, &seen), 0);

    /* A message that slips through a stall pause (we did not seek) makes us
     * seek back to it; the ones after it are dropped. */
    assert_int_equal(sched_offer(s, "t", 0, 7, T0 - 1, T0 + 1), SCHED_PAUSE);
    assert_int_equal(sched_offer(s, "t", 0, 8, T0 - 1, T0 + 1), SCHED_DROP);
    /* A partition assigned during the stall must be paused at once. */
    assert_true(sched_assign(s, "t", 9));
    assert_true(sched_is_paused(s, "t", 9));

    /* The stall ends: stall-only partitions resume at once; the one waiting
     * for its due time resumes at that time. */
    sched_stall_end(s);
    assert_false(sched_stalled(s));
    seen.n = 0;
    assert_int_equal(sched_take_resumable(s, T0 + 2, visit, &seen), 3);
    assert_true(seen_has(&seen, "t/0") && seen_has(&seen, "t/1") && seen_has(&seen, "t/9"));
    assert_int_equal(seen_offset(&seen, "t/0"), 7);  /* sought back to the slipped message */
    assert_int_equal(seen_offset(&seen, "t/1"), -1); /* a plain stall pause: no seek */
    assert_int_equal(sched_next_resume(s), T0 + 5000);
    seen.n = 0;
    assert_int_equal(sched_take_resumable(s, T0 + 5000, visit, &seen), 1);
    assert_true(seen_has(&seen, "t/2"));
    assert_int_equal(sched_paused_count(s), 0);
    sched_free(s);
}

static void test_stall_pauses_unpaused_offer(void **state)
{
    struct sched *s = sched_new(0);

    (void)state;
    sched_stall_begin(s, NULL, NULL);
    /* A partition the sched never heard of (a message raced the rebalance
     * callback) is tracked from its first message, and paused with the rest. */
    assert_int_equal(sched_offer(s, "x", 4, 0, T0 - 1, T0), SCHED_PAUSE);
    assert_true(sched_is_paused(s, "x", 4));
    sched_stall_end(s);
    assert_int_equal(sched_take_resumable(s, T0, NULL, NULL), 1);
    assert_int_equal(sched_offer(s, "x", 4, 0, T0 - 1, T0), SCHED_DUE);
    sched_free(s);
}

static void test_only_what_we_paused(void **state)
{
    struct sched *s = sched_new(0);
    struct seen seen = {0};
    char topic[32];

    (void)state;
    /* Many partitions across topics: growth and removal keep the right state. */
    for (int t = 0; t < 10; t++) {
        snprintf(topic, sizeof(topic), "topic-%d", t);
        for (int p = 0; p < 50; p++)
            sched_assign(s, topic, p);
    }
    assert_int_equal(sched_assigned_count(s), 500);
    for (int p = 0; p < 50; p += 10)
        assert_int_equal(sched_offer(s, "topic-3", p, 1, T0 + 100 + p, T0), SCHED_PAUSE);
    for (int p = 0; p < 50; p += 2)
        sched_revoke(s, "topic-4", p);
    assert_int_equal(sched_assigned_count(s), 475);
    assert_int_equal(sched_paused_count(s), 5);
    assert_int_equal(sched_take_resumable(s, T0 + 1000, visit, &seen), 5);
    for (int p = 0; p < 50; p += 10) {
        char name[32];
        snprintf(name, sizeof(name), "topic-3/%d", p);
        assert_true(seen_has(&seen, name));
    }
    sched_free(s);
    sched_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_and_wait),
        cmocka_unit_test(test_min_pause),
        cmocka_unit_test(test_lead_and_forced_pause),
        cmocka_unit_test(test_rewind_before_seek),
        cmocka_unit_test(test_rebalance_clears),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_stall_pauses_unpaused_offer),
        cmocka_unit_test(test_only_what_we_paused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
