/* The consumer's answer to a fenced group.instance.id (consumer/fence.h): a rejoin after the
 * backoff the first time, and again after every quiet spell; exit 2 when fenced again soon
 * after a rejoin, which is how a live twin with the same id answers it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "consumer/fence.h"

#define T0 5000000LL

/* A rejoin made at now_ms, as fence_rejoin records it. */
static void rejoined(struct fence *f, int64_t now_ms)
{
    assert_true(f->pending);
    assert_true(now_ms >= f->rejoin_at_ms);
    f->pending = false;
    f->joined_ms = now_ms;
    f->rejoins++;
}

/* The coordinator's broker dies: a process that no twin shares its id with is fenced by its
 * own joins. It rejoins, and again at the next coordinator move, however many come, as long
 * as each comes FENCE_QUIET_MS or more after the last rejoin (a rolling restart's moves). */
static void test_self_fence_rejoins(void **state)
{
    struct fence f = {0};
    int64_t now = T0;

    (void)state;
    for (int move = 0; move < 5; move++) {
        assert_int_equal(fence_decide(&f, now), FENCE_REJOIN);
        assert_int_equal(f.rejoin_at_ms, now + FENCE_BACKOFF_MS);
        rejoined(&f, now + FENCE_BACKOFF_MS);
        now += FENCE_BACKOFF_MS + FENCE_QUIET_MS;
    }
    assert_int_equal(f.rejoins, 5);
}

/* A takeover: a live twin fences this process, which rejoins and so fences the twin; the
 * twin does the same, and this process, fenced again within FENCE_QUIET_MS of its rejoin,
 * exits 2. The twin's own rejoin stands: it is never fenced a second time. */
static void test_twin_exits_the_second_time(void **state)
{
    struct fence older = {0}, newer = {0};
    int64_t now = T0;

    (void)state;
    /* The newer process joins: the older is fenced. */
    assert_int_equal(fence_decide(&older, now), FENCE_REJOIN);
    now = older.rejoin_at_ms;
    rejoined(&older, now);
    /* Its rejoin fences the newer one, a heartbeat later. */
    now += 1000;
    assert_int_equal(fence_decide(&newer, now), FENCE_REJOIN);
    now = newer.rejoin_at_ms;
    rejoined(&newer, now);
    /* The newer one's rejoin fences the older one again: a takeover. */
    now += 1000;
    assert_int_equal(fence_decide(&older, now), FENCE_EXIT);
    assert_false(older.pending);
    /* Just inside the quiet spell still counts; at its end a fence is a new one. */
    struct fence edge = {.joined_ms = T0};
    assert_int_equal(fence_decide(&edge, T0 + FENCE_QUIET_MS - 1), FENCE_EXIT);
    assert_int_equal(fence_decide(&edge, T0 + FENCE_QUIET_MS), FENCE_REJOIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_fence_rejoins),
        cmocka_unit_test(test_twin_exits_the_second_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
