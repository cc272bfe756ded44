/* What the broker's SASL_SSL listener refuses ends the program at once with one line, not in
 * a retry loop: a wrong SCRAM password (kafka.sasl_password_file) and a CA file that did not
 * sign the broker's certificate (ssl.ca.location), for the consumer, ordergatectl topics and
 * ordergatectl schedule. Each exits 2 within the bound, says on one stderr line what was
 * refused, where it is configured (FILE:LINE) and librdkafka's reason, and changes nothing:
 * the due order stays pending, the group commits no offset, no topic is created, no message
 * is produced. A missing password file is refused before any connection. With the right
 * password and CA the same commands work (the control). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testutil.h"
#include "tls.h"

/* A refusal arrives within a second or so; the bound leaves room for a loaded machine while
 * staying far below the minutes a retry loop would run (the test's own timeout). */
#define REFUSED_WITHIN_MS 30000

/* Exit 2, nothing on stdout, exactly one line on stderr that names the config file and holds
 * both needles. */
static void expect_one_line(const struct tls_run *r, const char *config, const char *what,
                            const char *reason)
{
    if (r->status != 2 || tls_lines(r->err) != 1 || strstr(r->err, config) == NULL ||
        strstr(r->err, what) == NULL || strstr(r->err, reason) == NULL || r->out[0] != '\0')
        fail_msg("status %d, stdout \"%s\", stderr \"%s\"; expected 2, nothing, and one line "
                 "with %s, \"%s\" and \"%s\"",
                 r->status, r->out, r->err, config, what, reason);
}

static void refused(struct ct *t, const char *password_file, const char *ca, const char *what,
                    const char *reason)
{
    struct tls_run r;
    char new_topic[200];

    snprintf(new_topic, sizeof(new_topic), "og.%s.never.15m", t->base);
    tls_config(t, new_topic, password_file, ca);

    /* The consumer, with a due order whose message waits in its topic. */
    tls_run(&r, "consumer/ordergate-consumer",
            (const char *const[]){"--config", t->config, "--db", t->db.conninfo, "--topics",
                                  t->topic, "--group", t->group, "--metrics-listen", "127.0.0.1:0",
                                  NULL},
            REFUSED_WITHIN_MS);
    expect_one_line(&r, t->config, what, reason);

    /* ordergatectl topics: refused before anything is created. */
    tls_run(&r, "tools/ordergatectl", (const char *const[]){"--config", t->config, "topics", NULL},
            REFUSED_WITHIN_MS);
    expect_one_line(&r, t->config, what, reason);
    assert_false(tls_topic_exists(new_topic));

    /* ordergatectl schedule: refused, nothing produced. */
    tls_run(&r, "tools/ordergatectl",
            (const char *const[]){"--config", t->config, "schedule", "R-1", "--due-at",
                                  "2030-01-01T00:00:00Z", "--topic", t->topic, NULL},
            REFUSED_WITHIN_MS);
    expect_one_line(&r, t->config, what, reason);
}

static void test_refused(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    char wrong_password[300], untrusted_ca[300], missing[300];
    struct tls_run r;
    int64_t due;

    (void)state;
    ct_setup(&t, "tlsrefused", 1, 0);
    due = ct_place(&t, "R-1", -1000);
    ct_produce_cancel(&t, t.topic, 0, "R-1", due);
    tls_wrong_password(wrong_password, sizeof(wrong_password));
    tls_untrusted_ca(untrusted_ca, sizeof(untrusted_ca));

    refused(&t, wrong_password, NULL, "the broker refused the SASL login",
            "SASL authentication error");
    refused(&t, NULL, untrusted_ca, "TLS with the broker failed", "certificate verify failed");

    /* A password file that is not there: refused while the configuration is read. */
    snprintf(missing, sizeof(missing), "%s/tests/tls/no-such-password.%d", OG_BINARY_DIR,
             (int)getpid());
    tls_config(&t, t.topic, missing, NULL);
    tls_run(&r, "consumer/ordergate-consumer",
            (const char *const[]){"--config", t.config, "--db", t.db.conninfo, "--topics", t.topic,
                                  "--group", t.group, NULL},
            REFUSED_WITHIN_MS);
    expect_one_line(&r, t.config, "kafka.sasl_password_file", "No such file or directory");

    /* Nothing changed: the order is pending, the group has no offset, the topic holds only
     * the test's message. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                   "'R-1' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 0);
    assert_int_equal(ct_committed(t.group, t.topic, 0), RD_KAFKA_OFFSET_INVALID);
    assert_int_equal(ct_end_offset(t.topic, 0), 1);

    /* The control: the listener's own password and CA pass the same check. */
    tls_config(&t, t.topic, NULL, NULL);
    tls_run(&r, "tools/ordergatectl",
            (const char *const[]){"--config", t.config, "schedule", "R-1", "--due-at",
                                  "2030-01-01T00:00:00Z", "--topic", t.topic, NULL},
            REFUSED_WITHIN_MS);
    assert_int_equal(r.status, 0);
    assert_int_equal(ct_end_offset(t.topic, 0), 2);

    unlink(wrong_password);
    unlink(untrusted_ca);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refused, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
