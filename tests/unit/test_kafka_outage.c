/* common/kafka_outage: one warn line per broker outage and one kafka_broker_up line when it
 * ends, whatever order the clients' errors and statistics arrive in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/kafka_outage.h"

static int outage_setup(void **state)
{
    (void)state;
    kafka_outage_reset();
    return 0;
}

/* The first error begins the outage; the others count into it; a fresh UP ends it. */
static void test_once_per_outage(void **state)
{
    int64_t down = -1;
    long errors = -1;

    (void)state;
    assert_true(kafka_outage_begin("b:1", 1000));
    assert_false(kafka_outage_begin("b:1", 1010));
    assert_false(kafka_outage_begin("b:1", 1020));
    assert_true(kafka_outage_active());
    assert_true(kafka_outage_end("b:1", 3000, 3100, &down, &errors));
    assert_int_equal(down, 2100);
    assert_int_equal(errors, 3);
    assert_false(kafka_outage_active());
    /* Said once: a second client's UP ends nothing more. */
    assert_false(kafka_outage_end("b:1", 3050, 3200, &down, &errors));
}

/* A client whose connection was UP before the first error has not noticed the loss: its
 * statistics 58 ms later do not end the outage (they did, and the ALL_BROKERS_DOWN that followed
 * was said as a second outage). Once the outage is older than the settle time, an old UP is
 * a live connection and ends it. */
static void test_stale_up_is_not_a_return(void **state)
{
    int64_t down = -1;
    long errors = -1;

    (void)state;
    assert_true(kafka_outage_begin("b:1", 10000));
    assert_false(kafka_outage_end("b:1", 8000, 10058, &down, &errors));
    assert_true(kafka_outage_active());
    assert_true(kafka_outage_end("b:1", 8000, 10000 + KAFKA_OUTAGE_SETTLE_MS, &down, &errors));
    assert_int_equal(down, KAFKA_OUTAGE_SETTLE_MS);
}

/* Errors of clients still reconnecting right after the return are not a new outage; an error
 * after the settle time is. */
static void test_settle_after_return(void **state)
{
    int64_t down;
    long errors;

    (void)state;
    assert_true(kafka_outage_begin("b:1", 1000));
    assert_true(kafka_outage_end("b:1", 2000, 2000, &down, &errors));
    assert_false(kafka_outage_begin("b:1", 2000 + KAFKA_OUTAGE_SETTLE_MS - 1));
    assert_false(kafka_outage_active());
    assert_true(kafka_outage_begin("b:1", 2000 + KAFKA_OUTAGE_SETTLE_MS));
    assert_true(kafka_outage_active());
}

/* Brokers are apart: one's outage says nothing about another's. */
static void test_brokers_apart(void **state)
{
    int64_t down;
    long errors;

    (void)state;
    assert_true(kafka_outage_begin("a:1", 1000));
    assert_true(kafka_outage_begin("b:1", 1001));
    assert_false(kafka_outage_end("c:1", 2000, 2000, &down, &errors));
    assert_true(kafka_outage_end("a:1", 2000, 2000, &down, &errors));
    assert_true(kafka_outage_active()); /* b:1 still down */
    assert_true(kafka_outage_end("b:1", 2000, 2000, &down, &errors));
    assert_false(kafka_outage_active());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_once_per_outage, outage_setup),
        cmocka_unit_test_setup(test_stale_up_is_not_a_return, outage_setup),
        cmocka_unit_test_setup(test_settle_after_return, outage_setup),
        cmocka_unit_test_setup(test_brokers_apart, outage_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
