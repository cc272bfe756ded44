/* Support for the tests of Kafka over SASL_SSL: the SASL_SSL listener of the broker that
 * deploy/local/services.sh starts with ORDERGATE_KAFKA_TLS=1 (its exports name the listener,
 * the CA file, the SCRAM user and its password file), config files that reach it through
 * kafka.properties and kafka.sasl_password_file, and the programs run against it. The test's
 * own clients (topics, test messages, committed offsets) use the PLAINTEXT listener of the
 * same broker, through tests/consumer/ct.h. Every helper fails the test (never skips) when
 * the SASL_SSL listener's exports are missing. */
#ifndef OG_TESTS_TLS_H
#define OG_TESTS_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "ct.h"

struct tls_env {
    const char *brokers;       /* ORDERGATE_KAFKA_TLS_BROKERS */
    const char *ca;            /* ORDERGATE_KAFKA_TLS_CA */
    const char *user;          /* ORDERGATE_KAFKA_TLS_USER */
    const char *password_file; /* ORDERGATE_KAFKA_TLS_PASSWORD_FILE */
};

/* The SASL_SSL listener's exports; fails the test when one is missing. */
void tls_env(struct tls_env *e);

/* Writes t->config like ct_config, for clients of the SASL_SSL listener: kafka.brokers,
 * kafka.topics = topics, kafka.sasl_password_file = password_file and kafka.properties with
 * security.protocol, sasl.mechanisms, sasl.username, ssl.ca.location = ca and a short group
 * session. NULL password_file or ca: the listener's own. */
void tls_config(struct ct *t, const char *topics, const char *password_file, const char *ca);

/* ct_spawn with --brokers the SASL_SSL listener (the config's kafka.properties do the rest). */
void tls_spawn(struct ct *t, struct ct_proc *p, const char *name, const char *topics);

/* One run of a built program (relpath as for testutil_binary) with args (NULL-terminated),
 * stdout and stderr captured apart. A program still running after timeout_ms is killed and
 * the test fails: the bound is part of what is tested. */
struct tls_run {
    int status;
    char out[16384];
    char err[16384];
};
void tls_run(struct tls_run *r, const char *relpath, const char *const *args, long timeout_ms);

/* Lines in s (newline-terminated ones, plus a last unterminated one). */
int tls_lines(const char *s);

/* A throwaway CA certificate (made with openssl, with the same subject as the local one) that
 * did not sign the broker's certificate; its path into buf. */
void tls_untrusted_ca(char *buf, size_t size);

/* A file holding a password the broker does not know; its path into buf. */
void tls_wrong_password(char *buf, size_t size);

/* Whether the broker lists the topic (asked on the PLAINTEXT listener). */
bool tls_topic_exists(const char *topic);

#endif
