/* Which failed relay steps are logged (outbox_failure_log): each distinct reason when it first
 * appears, the same reason again (whatever its numbers) only every 50th time, and a success
 * starts over. The relay used to log one line per 50 failed steps whatever they said, so a
 * second problem behind the first went unseen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "common/outbox.h"

static void test_each_distinct_reason_logged(void **state)
{
    struct outbox_failure_log l = {0};
    int logged = 0;

    (void)state;
    /* An outage: 120 steps with the same reason, only the counts differ. */
    for (int i = 0; i < 120; i++) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%d of %d outbox events got no delivery report", i % 7, 500);
        logged += outbox_failure_log_note(&l, OG_ERR_KAFKA, msg);
    }
    assert_int_equal(logged, 3); /* the 1st, 51st and 101st */
    assert_int_equal(l.failures, 120);

    /* A second reason behind the first: logged at once, and the first again when it returns. */
    assert_true(outbox_failure_log_note(&l, OG_ERR_CONFIG, "no delay topic is known"));
    assert_false(outbox_failure_log_note(&l, OG_ERR_CONFIG, "no delay topic is known"));
    assert_true(outbox_failure_log_note(&l, OG_ERR_KAFKA,
                                        "1 of 500 outbox events got no "
                                        "delivery report"));
    /* The same words with another status are another reason. */
    assert_true(outbox_failure_log_note(&l, OG_ERR_DB,
                                        "1 of 500 outbox events got no delivery "
                                        "report"));
    /* Events of different ids failing the same way are one reason. */
    assert_true(outbox_failure_log_note(&l, OG_ERR_KAFKA,
                                        "delivery failed for outbox event 17: "
                                        "Local: Message timed out"));
    assert_false(outbox_failure_log_note(&l, OG_ERR_KAFKA,
                                         "delivery failed for outbox event "
                                         "4711: Local: Message timed out"));

    /* A success ends the run: the next failure is logged whatever it says. */
    outbox_failure_log_clear(&l);
    assert_int_equal(l.failures, 0);
    assert_true(outbox_failure_log_note(&l, OG_ERR_KAFKA,
                                        "delivery failed for outbox event "
                                        "4711: Local: Message timed out"));
    assert_int_equal(l.failures, 1);
    /* A NULL message is a reason too. */
    assert_true(outbox_failure_log_note(&l, OG_ERR_KAFKA, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_distinct_reason_logged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
