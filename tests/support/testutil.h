/* Small helpers shared by the tests. */
#ifndef OG_TESTS_TESTUTIL_H
#define OG_TESTS_TESTUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "common/child.h"

/* The broker list from ORDERGATE_BROKERS; fails the test when unset. */
const char *testutil_brokers(void);
/* Path of a built program (e.g. "consumer/ordergate-consumer"). */
void testutil_binary(char *buf, size_t size, const char *relpath);
/* A name unique to this process, e.g. for topics and groups. */
void testutil_unique(char *buf, size_t size, const char *prefix);
/* Sleeps ms milliseconds. */
void testutil_sleep_ms(long ms);
/* Creates a topic on brokers (replication 1; an existing topic is fine) and
 * waits until every partition has a leader; fails the test otherwise. The
 * local broker creates no topic by itself. */
void testutil_topic_create(const char *brokers, const char *topic, int partitions);

/* child_spawn for a test: the child is killed when the test process dies, even by its
 * timeout, so no program outlives its test (opts->die_with_parent is forced; opts may be
 * NULL). Fails the test when it cannot start. */
pid_t testutil_child_start(const char *const *argv, const struct child_opts *opts);
/* child_wait, but a child still running at the bound is killed and the test fails, naming
 * what. Returns its exit status (128 + n when killed by signal n). */
int testutil_child_wait(pid_t pid, long timeout_ms, const char *what);

/* The whole file as a NUL-terminated string (free it), or NULL when it
 * cannot be opened. */
char *testutil_slurp(const char *path);

#endif
