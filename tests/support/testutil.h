/* Small helpers shared by the tests. */
#ifndef OG_TESTS_TESTUTIL_H
#define OG_TESTS_TESTUTIL_H

#include <stddef.h>

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

/* The whole file as a NUL-terminated string (free it), or NULL when it
 * cannot be opened. */
char *testutil_slurp(const char *path);

#endif
