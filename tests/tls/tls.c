#include "tls.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "support/testutil.h"

static const char *tls_getenv(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL || *v == '\0')
        fail_msg("%s is not set; start the services with ORDERGATE_KAFKA_TLS=1 "
                 "deploy/local/services.sh up (tests/run.sh does)",
                 name);
    return v;
}

void tls_env(struct tls_env *e)
{
    e->brokers = tls_getenv("ORDERGATE_KAFKA_TLS_BROKERS");
    e->ca = tls_getenv("ORDERGATE_KAFKA_TLS_CA");
    e->user = tls_getenv("ORDERGATE_KAFKA_TLS_USER");
    e->password_file = tls_getenv("ORDERGATE_KAFKA_TLS_PASSWORD_FILE");
    if (access(e->ca, R_OK) != 0 || access(e->password_file, R_OK) != 0)
        fail_msg("%s or %s cannot be read", e->ca, e->password_file);
}

void tls_config(struct ct *t, const char *topics, const char *password_file, const char *ca)
{
    struct tls_env e;
    FILE *f;

    tls_env(&e);
    f = fopen(t->config, "w");
    assert_non_null(f);
    /* As ct_config: short retries and backoffs so outages are ridden out within a test. */
    fprintf(f,
            "log_level = \"info\";\n"
            "database = { retry_max = 3; retry_base_ms = 50; retry_cap_ms = 400; };\n"
            "consumer = { linger_ms = 20; poll_ms = 50; };\n"
            "outbox = { interval_ms = 100; topic = \"og.%s.events\"; refund_topic = "
            "\"og.%s.refunds\"; alert_topic = \"og.%s.alerts\"; };\n"
            "kafka = {\n"
            "  brokers = \"%s\";\n"
            "  topics = \"%s\";\n"
            "  dead_letter_topic = \"%s\";\n"
            "  sasl_password_file = \"%s\";\n"
            "  properties = [\"security.protocol=SASL_SSL\", \"sasl.mechanisms=SCRAM-SHA-512\",\n"
            "    \"sasl.username=%s\", \"ssl.ca.location=%s\", " CT_SHORT_SESSION "];\n"
            "};\n",
            t->base, t->base, t->base, e.brokers, topics, t->dlq,
            password_file != NULL ? password_file : e.password_file, e.user,
            ca != NULL ? ca : e.ca);
    fclose(f);
}

void tls_spawn(struct ct *t, struct ct_proc *p, const char *name, const char *topics)
{
    struct tls_env e;

    tls_env(&e);
    /* ct_spawn reads the override for --brokers only; the test's own clients keep the
     * PLAINTEXT listener. */
    ct_brokers_override = e.brokers;
    ct_spawn(t, p, name, topics, NULL);
    ct_brokers_override = NULL;
}

static void tls_slurp(const char *path, char *buf, size_t size)
{
    char *text = testutil_slurp(path);

    snprintf(buf, size, "%s", text != NULL ? text : "");
    free(text);
    unlink(path);
}

void tls_run(struct tls_run *r, const char *relpath, const char *const *args, long timeout_ms)
{
    char bin[512], out[300], err[300];
    const char *argv[40];
    int argc = 0, fo, fe;
    pid_t pid;

    testutil_binary(bin, sizeof(bin), relpath);
    snprintf(out, sizeof(out), "%s/tests/tls/run.%d.out", OG_BINARY_DIR, (int)getpid());
    snprintf(err, sizeof(err), "%s/tests/tls/run.%d.err", OG_BINARY_DIR, (int)getpid());
    argv[argc++] = bin;
    for (int i = 0; args[i] != NULL && argc < 39; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fo >= 0 && fe >= 0);
    pid = testutil_child_start(argv, &(struct child_opts){.out_fd = fo, .err_fd = fe});
    close(fo);
    close(fe);
    r->status = child_wait(pid, timeout_ms, NULL);
    if (r->status < 0) {
        testutil_child_wait(pid, 0, relpath); /* kills it and fails */
    }
    tls_slurp(out, r->out, sizeof(r->out));
    tls_slurp(err, r->err, sizeof(r->err));
    /* Shown in the test log, so a failure explains itself. */
    fprintf(stderr, "$ %s", relpath);
    for (int i = 1; i < argc; i++)
        fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n[exit %d]\n%s%s", r->status, r->out, r->err);
}

int tls_lines(const char *s)
{
    int n = 0;

    for (const char *p = s; *p != '\0'; p++)
        n += *p == '\n';
    return n + (*s != '\0' && s[strlen(s) - 1] != '\n');
}

void tls_untrusted_ca(char *buf, size_t size)
{
    char key[300];
    const char *argv[24];
    int argc = 0;

    snprintf(buf, size, "%s/tests/tls/untrusted-ca.%d.pem", OG_BINARY_DIR, (int)getpid());
    snprintf(key, sizeof(key), "%s/tests/tls/untrusted-ca.%d.key", OG_BINARY_DIR, (int)getpid());
    for (const char *const *a =
             (const char *const[]){"/usr/bin/openssl", "req", "-x509", "-new", "-nodes", "-newkey",
                                   "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-days", "1",
                                   "-subj", "/CN=ordergate local CA", "-keyout", key, "-out", buf,
                                   NULL};
         *a != NULL; a++)
        argv[argc++] = *a;
    argv[argc] = NULL;
    if (testutil_child_wait(testutil_child_start(argv, &(struct child_opts){0}), 30000,
                            "openssl req") != 0)
        fail_msg("openssl could not make %s", buf);
    unlink(key);
}

void tls_wrong_password(char *buf, size_t size)
{
    FILE *f;

    snprintf(buf, size, "%s/tests/tls/wrong-password.%d", OG_BINARY_DIR, (int)getpid());
    f = fopen(buf, "w");
    assert_non_null(f);
    fputs("not-the-password\n", f);
    fclose(f);
}

bool tls_topic_exists(const char *topic)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_t *rk;
    bool found = false;

    if (rd_kafka_conf_set(conf, "bootstrap.servers", testutil_brokers(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK)
        fail_msg("bootstrap.servers: %s", errstr);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("metadata client: %s", errstr);
    /* All topics, no topic handle: asking about one could create it elsewhere. */
    if (rd_kafka_metadata(rk, 1, NULL, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("no metadata from %s", testutil_brokers());
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0 &&
            md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
            found = true;
    rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return found;
}
