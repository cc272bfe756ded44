/* The consumer's window of cancels held until due: order per partition, the bound, forgetting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/window.h"

#define T0 1796054400000LL

struct taken {
    size_t n, stop_at;
    char names[8][32];
    int64_t offsets[8];
};

static bool take(void *arg, const char *topic, int32_t partition, const struct window_entry *e)
{
    struct taken *t = arg;

    if (t->n == t->stop_at)
        return false;
    assert_true(t->n < 8);
    snprintf(t->names[t->n], sizeof(t->names[0]), "%s/%d:%s", topic, (int)partition,
             e->cancel.order_no);
    t->offsets[t->n++] = e->offset;
    return true;
}

static struct codec_cancel cancel_of(const char *order_no, int64_t due)
{
    struct codec_cancel c = {0};

    snprintf(c.order_no, sizeof(c.order_no), "%s", order_no);
    c.due_ms = due;
    return c;
}

static void test_order_and_due(void **state)
{
    struct window *w = window_new();
    struct taken t = {.stop_at = 8};
    struct codec_cancel a = cancel_of("A", T0 + 10), b = cancel_of("B", T0 + 5),
                        c = cancel_of("C", T0 + 20);

    (void)state;
    assert_false(window_busy(w, "t", 0));
    assert_int_equal(window_next_due(w), WINDOW_NEVER);
    assert_int_equal(window_put(w, "t", 0, 7, a.due_ms, 0, &a), WINDOW_HELD);
    /* Due earlier, but behind A in its partition: it waits for A (offsets stay in order). */
    assert_int_equal(window_put(w, "t", 0, 8, b.due_ms, 0, &b), WINDOW_HELD);
    assert_int_equal(window_put(w, "t", 1, 3, c.due_ms, 0, &c), WINDOW_HELD);
    assert_true(window_busy(w, "t", 0));
    assert_int_equal(window_count(w), 3);
    assert_int_equal(window_next_due(w), T0 + 10);
    /* Never early: nothing is taken a millisecond before its due time. */
    assert_int_equal(window_take_due(w, T0 + 9, take, &t), 0);
    assert_int_equal(window_take_due(w, T0 + 10, take, &t), 2);
    assert_string_equal(t.names[0], "t/0:A");
    assert_int_equal(t.offsets[0], 7);
    assert_string_equal(t.names[1], "t/0:B");
    assert_false(window_busy(w, "t", 0));
    assert_int_equal(window_next_due(w), T0 + 20);
    /* A refusal (a full batch) leaves the entry in place. */
    t.stop_at = t.n;
    assert_int_equal(window_take_due(w, T0 + 30, take, &t), 0);
    assert_int_equal(window_count(w), 1);
    t.stop_at = 8;
    assert_int_equal(window_take_due(w, T0 + 30, take, &t), 1);
    assert_string_equal(t.names[2], "t/1:C");
    assert_int_equal(window_count(w), 0);
    window_free(w);
}

static void test_bound_and_forget(void **state)
{
    struct window *w = window_new();
    struct codec_cancel a = cancel_of("A", T0);

    (void)state;
    for (int64_t i = 0; i < WINDOW_PART_MAX; i++)
        assert_int_equal(window_put(w, "t", 0, i, T0 + i, 0, &a), WINDOW_HELD);
    /* Full: the caller pauses and seeks, until just after the head's due time (its first
     * entry's, not the earliest: B of test_order_and_due waits behind A); another partition
     * still has room. */
    assert_int_equal(window_put(w, "t", 0, WINDOW_PART_MAX, T0, 0, &a), WINDOW_FULL);
    assert_int_equal(window_head_due(w, "t", 0), T0);
    assert_int_equal(window_head_due(w, "u", 0), WINDOW_NEVER);
    assert_int_equal(window_put(w, "u", 0, 0, T0 + 1, 0, &a), WINDOW_HELD);
    assert_int_equal(window_count(w), WINDOW_PART_MAX + 1);
    /* Revoked: forgotten, the other partition untouched. */
    window_forget(w, "t", 0);
    assert_false(window_busy(w, "t", 0));
    assert_true(window_busy(w, "u", 0));
    assert_int_equal(window_count(w), 1);
    assert_int_equal(window_next_due(w), T0 + 1);
    window_forget(w, "nope", 9);
    window_free(w);
    window_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_due),
        cmocka_unit_test(test_bound_and_forget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
