#include "ct.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/codec.h"
#include "common/kafka.h"
#include "common/scrape.h"
#include "support/testutil.h"

/* The endpoint answers from memory: seconds mean it is stuck. */
#define CT_HTTP_TIMEOUT_MS 10000

const char *ct_brokers_override;
const char *ct_db_override;

/* What a failed test must not leave behind: its consumers and its database.
 * A failure leaves the test function by longjmp, so ct_cleanup (the tests'
 * cmocka teardown) stops whatever is still registered here. */
#define CT_MAX_CHILDREN 16
static pid_t ct_children[CT_MAX_CHILDREN];
static struct ct *ct_current;

static const char *ct_brokers(void)
{
    return ct_brokers_override != NULL ? ct_brokers_override : testutil_brokers();
}

int64_t ct_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ct_conf(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

void ct_create_topic(const char *topic, int partitions)
{
    testutil_topic_create(ct_brokers(), topic, partitions);
}

/* True while the cluster's metadata still lists topic. */
static bool ct_topic_listed(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    bool listed = false;

    if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return true; /* unknown: ask again */
    for (int i = 0; i < md->topic_cnt && !listed; i++)
        listed = strcmp(md->topics[i].topic, topic) == 0 &&
                 md->topics[i].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
    rd_kafka_metadata_destroy(md);
    return listed;
}

void ct_delete_topic(const char *topic)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_DeleteTopic_t *del = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    rd_kafka_t *rk;
    int64_t deadline;

    ct_conf(conf, "bootstrap.servers", ct_brokers());
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("admin client: %s", errstr);
    q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, &del, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 20000);
    if (ev == NULL || rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("DeleteTopics %s: %s", topic, ev ? rd_kafka_event_error_string(ev) : "no answer");
    {
        size_t n = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        if (n != 1 || rd_kafka_topic_result_error(res[0]) != RD_KAFKA_RESP_ERR_NO_ERROR)
            fail_msg("DeleteTopics %s: %s", topic,
                     n == 1 ? rd_kafka_topic_result_error_string(res[0]) : "no result");
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteTopic_destroy(del);
    deadline = ct_now_ms() + 20000;
    while (ct_topic_listed(rk, topic) && ct_now_ms() < deadline)
        testutil_sleep_ms(200);
    if (ct_topic_listed(rk, topic))
        fail_msg("topic %s still listed 20 s after its deletion", topic);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

void ct_setup(struct ct *t, const char *tag, int partitions, unsigned flags)
{
    static const char *const outbox_kinds[] = {"events", "refunds", "alerts"};
    char errstr[256], *base = t->base;
    rd_kafka_conf_t *conf;

    memset(t, 0, sizeof(*t));
    snprintf(t->tag, sizeof(t->tag), "%s", tag);
    ct_current = t;
    testdb_create(&t->db, tag);
    t->conn = testdb_connect(&t->db);
    testdb_exec(t->conn, "SELECT ordergate.add_stock('sku-1', 1000000)");
    testutil_unique(t->base, sizeof(t->base), tag);
    snprintf(t->topic, sizeof(t->topic), "og.%s.cancel.a", base);
    snprintf(t->topic2, sizeof(t->topic2), "og.%s.cancel.b", base);
    snprintf(t->dlq, sizeof(t->dlq), "og.%s.dlq", base);
    snprintf(t->payments, sizeof(t->payments), "og.%s.payments", base);
    snprintf(t->refund_results, sizeof(t->refund_results), "og.%s.refund_results", base);
    snprintf(t->group, sizeof(t->group), "og-%s", base);
    ct_create_topic(t->topic, partitions);
    ct_create_topic(t->topic2, partitions);
    ct_create_topic(t->dlq, 1);
    ct_create_topic(t->payments, 2);
    if (flags & CT_REFUNDS)
        ct_create_topic(t->refund_results, 1);
    /* The outbox relay's topics, named in the config below. */
    for (size_t i = 0; i < sizeof(outbox_kinds) / sizeof(outbox_kinds[0]); i++) {
        char name[160];
        snprintf(name, sizeof(name), "og.%s.%s", base, outbox_kinds[i]);
        ct_create_topic(name, 1);
    }

    conf = rd_kafka_conf_new();
    ct_conf(conf, "bootstrap.servers", ct_brokers());
    ct_conf(conf, "enable.idempotence", "true");
    ct_conf(conf, "linger.ms", "1");
    t->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (t->producer == NULL)
        fail_msg("producer: %s", errstr);

    snprintf(t->config, sizeof(t->config), "%s/tests/consumer/%s.%d.conf", OG_BINARY_DIR, tag,
             (int)getpid());
    t->flags = flags;
    ct_config(t, "", CT_SHORT_SESSION);
}

void ct_config(struct ct *t, const char *consumer_extra, const char *properties)
{
    FILE *f = fopen(t->config, "w");

    assert_non_null(f);
    /* Short retries and backoffs so outages are ridden out within a test. */
    fprintf(f,
            "log_level = \"info\";\n"
            "database = { retry_max = 3; retry_base_ms = 50; retry_cap_ms = 400; };\n"
            "consumer = { linger_ms = 20; poll_ms = 50; %s };\n"
            "outbox = { interval_ms = 100; topic = \"og.%s.events\"; refund_topic = "
            "\"og.%s.refunds\"; alert_topic = \"og.%s.alerts\"; };\n"
            "kafka = { dead_letter_topic = \"%s\"; payments_topic = \"%s\";\n"
            "  refund_results_topic = \"%s\"; properties = [%s]; };\n",
            consumer_extra, t->base, t->base, t->base, t->dlq,
            (t->flags & CT_PAYMENTS) ? t->payments : "",
            (t->flags & CT_REFUNDS) ? t->refund_results : "", properties);
    fclose(f);
}

void ct_teardown(struct ct *t)
{
    ct_current = NULL;
    if (t->producer != NULL) {
        rd_kafka_flush(t->producer, 10000);
        rd_kafka_destroy(t->producer);
    }
    if (t->conn != NULL)
        PQfinish(t->conn);
    unlink(t->config);
    testdb_drop(&t->db);
}

int64_t ct_place(struct ct *t, const char *order_no, long expire_in_ms)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT ordergate.place_order('%s', 1000, '[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, "
             "NULL, now() + interval '%ld milliseconds')",
             order_no, expire_in_ms);
    testdb_exec(t->conn, sql);
    snprintf(sql, sizeof(sql),
             "SELECT ceil(extract(epoch FROM expire_at) * 1000)::bigint FROM ordergate.orders "
             "WHERE order_no = '%s'",
             order_no);
    return testdb_scalar(t->conn, sql);
}

void ct_flush(struct ct *t)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(t->producer, 30000);

    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("flush: %s", rd_kafka_err2str(err));
}

static void ct_send_raw(struct ct *t, const char *topic, int partition, const void *key,
                        size_t key_len, const void *value, size_t len)
{
    rd_kafka_resp_err_t err;

    for (;;) {
        err = rd_kafka_producev(
            t->producer, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
            RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)value, len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(t->producer, 10);
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("produce to %s: %s", topic, rd_kafka_err2str(err));
}

void ct_produce_raw(struct ct *t, const char *topic, int partition, const void *key, size_t key_len,
                    const void *value, size_t len)
{
    ct_send_raw(t, topic, partition, key, key_len, value, len);
    ct_flush(t);
}

void ct_send_cancel(struct ct *t, const char *topic, int partition, const char *order_no,
                    int64_t due_ms)
{
    char value[256];
    size_t len;
    struct og_error err = {0};

    if (codec_encode_cancel(order_no, due_ms, value, sizeof(value), &len, &err) != OG_OK)
        fail_msg("encode %s: %s", order_no, err.msg);
    ct_send_raw(t, topic, partition, order_no, strlen(order_no), value, len);
}

void ct_produce_cancel(struct ct *t, const char *topic, int partition, const char *order_no,
                       int64_t due_ms)
{
    ct_send_cancel(t, topic, partition, order_no, due_ms);
    ct_flush(t);
}

void ct_spawn(struct ct *t, struct ct_proc *p, const char *name, const char *topics, ...)
{
    char bin[512], db[160];
    const char *argv[64];
    int argc = 0, fd;
    va_list ap;
    pid_t pid;

    testutil_binary(bin, sizeof(bin), "consumer/ordergate-consumer");
    snprintf(p->log, sizeof(p->log), "%s/tests/consumer/%s.%s.%d.log", OG_BINARY_DIR, t->tag, name,
             (int)getpid());
    p->status = -1;
    snprintf(db, sizeof(db), "%s", ct_db_override != NULL ? ct_db_override : t->db.conninfo);
    argv[argc++] = bin;
    argv[argc++] = "--config";
    argv[argc++] = t->config;
    argv[argc++] = "--db";
    argv[argc++] = db;
    argv[argc++] = "--brokers";
    argv[argc++] = ct_brokers();
    argv[argc++] = "--topics";
    argv[argc++] = topics;
    argv[argc++] = "--group";
    argv[argc++] = t->group;
    argv[argc++] = "--metrics-listen";
    argv[argc++] = "127.0.0.1:0";
    va_start(ap, topics);
    for (const char *a = va_arg(ap, const char *); a != NULL && argc < 62;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    /* testutil_child_start ties the consumer's life to the test's (timeouts too). */
    pid = testutil_child_start(argv, &(struct child_opts){.out_fd = fd, .err_fd = fd});
    close(fd);
    p->pid = pid;
    for (int i = 0; i < CT_MAX_CHILDREN; i++) {
        if (ct_children[i] == 0) {
            ct_children[i] = pid;
            break;
        }
    }
}

static void ct_forget(pid_t pid)
{
    for (int i = 0; i < CT_MAX_CHILDREN; i++)
        if (ct_children[i] == pid)
            ct_children[i] = 0;
}

int ct_cleanup(void **state)
{
    (void)state;
    for (int i = 0; i < CT_MAX_CHILDREN; i++) {
        if (ct_children[i] > 0) {
            kill(ct_children[i], SIGKILL);
            child_wait(ct_children[i], 10000, NULL);
            ct_children[i] = 0;
        }
    }
    if (ct_current != NULL)
        ct_teardown(ct_current);
    return 0;
}

int ct_wait_exit(struct ct_proc *p, long timeout_ms)
{
    if (p->status >= 0)
        return p->status;
    p->status = child_wait(p->pid, timeout_ms, NULL);
    if (p->status >= 0)
        ct_forget(p->pid);
    return p->status;
}

int ct_stop(struct ct_proc *p, int sig, long timeout_ms)
{
    int st;

    if (p->status >= 0)
        return p->status;
    kill(p->pid, sig);
    st = ct_wait_exit(p, timeout_ms);
    if (st < 0) {
        kill(p->pid, SIGKILL);
        ct_wait_exit(p, 10000);
        fail_msg("consumer %d did not exit within %ld ms of signal %d (log %s)", (int)p->pid,
                 timeout_ms, sig, p->log);
    }
    return st;
}

bool ct_log_has(const struct ct_proc *p, const char *needle)
{
    char *text = testutil_slurp(p->log);
    bool found = text != NULL && strstr(text, needle) != NULL;

    free(text);
    return found;
}

int ct_log_count(const struct ct_proc *p, const char *needle)
{
    char *text = testutil_slurp(p->log);
    int n = 0;

    for (const char *s = text; s != NULL && (s = strstr(s, needle)) != NULL; s++)
        n++;
    free(text);
    return n;
}

void ct_log_wait(const struct ct_proc *p, const char *needle, long timeout_ms)
{
    for (long waited = 0; waited <= timeout_ms; waited += 50) {
        if (ct_log_has(p, needle))
            return;
        if (p->status < 0 && ct_wait_exit((struct ct_proc *)p, 0) >= 0)
            fail_msg("consumer exited with %d while waiting for '%s' (log %s)", p->status, needle,
                     p->log);
        testutil_sleep_ms(50);
    }
    fail_msg("'%s' did not appear in %s within %ld ms", needle, p->log, timeout_ms);
}

int ct_metrics_port(const struct ct_proc *p)
{
    char *text, *s;
    int port = 0;

    ct_log_wait(p, "event=metrics_listening", 10000);
    text = testutil_slurp(p->log);
    s = text ? strstr(text, "event=metrics_listening") : NULL;
    s = s ? strstr(s, "port=") : NULL;
    if (s != NULL)
        port = atoi(s + 5);
    free(text);
    assert_true(port > 0);
    return port;
}

int ct_http_get(int port, const char *path, char *buf, size_t size)
{
    int status = scrape_http(port, "GET", path, buf, size, CT_HTTP_TIMEOUT_MS);

    if (status < 0)
        fail_msg("GET %s on metrics port %d: no HTTP answer", path, port);
    return status;
}

double ct_metric(const char *text, const char *sample)
{
    double v;

    return scrape_sample(text, sample, &v) ? v : -1;
}

long ct_scalar(struct ct *t, const char *sql)
{
    return testdb_scalar(t->conn, sql);
}

long ct_wait_scalar(struct ct *t, const char *sql, long want, long timeout_ms)
{
    long v = ct_scalar(t, sql);

    for (long waited = 0; v != want && waited < timeout_ms; waited += 100) {
        testutil_sleep_ms(100);
        v = ct_scalar(t, sql);
    }
    return v;
}

static rd_kafka_t *ct_group_handle(const char *group)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    ct_conf(conf, "bootstrap.servers", ct_brokers());
    ct_conf(conf, "group.id", group);
    ct_conf(conf, "enable.auto.commit", "false");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("consumer: %s", errstr);
    return rk;
}

int64_t ct_committed(const char *group, const char *topic, int partition)
{
    rd_kafka_t *rk = ct_group_handle(group);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;
    int64_t off;

    rd_kafka_topic_partition_list_add(list, topic, partition);
    err = rd_kafka_committed(rk, list, 10000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("committed(%s): %s", group, rd_kafka_err2str(err));
    off = list->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
    return off;
}

/* A topic created a moment ago may have no leader the broker knows of yet: that answer is
 * asked again, for up to 10 s. */
int64_t ct_end_offset(const char *topic, int partition)
{
    rd_kafka_t *rk = ct_group_handle("og-watermarks");
    int64_t lo = 0, hi = 0, deadline = clock_mono_ms() + 10000;
    rd_kafka_resp_err_t err;

    for (;;) {
        err = rd_kafka_query_watermark_offsets(rk, topic, partition, &lo, &hi, 10000);
        if ((err != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION &&
             err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE &&
             err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) ||
            clock_mono_ms() >= deadline)
            break;
        usleep(100 * 1000);
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("watermarks %s/%d: %s", topic, partition, rd_kafka_err2str(err));
    rd_kafka_destroy(rk);
    return hi;
}

const char *ct_group_state(const char *group)
{
    rd_kafka_t *rk = ct_group_handle("og-describe");
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    const char *groups[1] = {group};
    rd_kafka_event_t *ev;
    const rd_kafka_DescribeConsumerGroups_result_t *res;
    const rd_kafka_ConsumerGroupDescription_t **descs;
    size_t n = 0;
    const char *state = "?";

    rd_kafka_DescribeConsumerGroups(rk, groups, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 10000);
    if (ev == NULL)
        fail_msg("describe group %s: no answer within 10 s", group);
    res = rd_kafka_event_DescribeConsumerGroups_result(ev);
    descs = res != NULL ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;
    if (n == 1)
        state =
            rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(descs[0]));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return state; /* a constant string of librdkafka's */
}

int ct_consume_all(const char *topic, int partition, ct_msg_fn fn, void *arg, long timeout_ms)
{
    char group[128];
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *list;
    int64_t end = ct_end_offset(topic, partition);
    int n = 0;
    int64_t deadline = ct_now_ms() + timeout_ms;

    if (end == 0)
        return 0;
    testutil_unique(group, sizeof(group), "og-reader");
    rk = ct_group_handle(group);
    rd_kafka_poll_set_consumer(rk);
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, partition)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, list), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(list);
    while (ct_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        bool last;
        if (m == NULL)
            continue;
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_message_destroy(m);
            continue;
        }
        n++;
        fn(arg, m);
        last = m->offset + 1 >= end;
        /* Every message must be destroyed before the handle can be. */
        rd_kafka_message_destroy(m);
        if (last)
            break;
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

const char *ct_header(const rd_kafka_message_t *m, const char *name, char *buf, size_t size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *value = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, name, &value, &len) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return NULL;
    snprintf(buf, size, "%.*s", (int)len, (const char *)value);
    return buf;
}

bool ct_pg_restart(void)
{
    const char *state = getenv("ORDERGATE_STATE_DIR");
    const char *bin = getenv("ORDERGATE_PG_BIN");
    char data[512], real[PATH_MAX], pg_ctl[512], log[600];
    struct stat st;
    const char *argv[16];
    int argc = 0, ws;

    if (state == NULL || *state == '\0')
        return false;
    snprintf(data, sizeof(data), "%s/pg/data", state);
    if (realpath(data, real) == NULL || stat(real, &st) != 0)
        return false;
    snprintf(pg_ctl, sizeof(pg_ctl), "%s/pg_ctl", bin && *bin ? bin : "/usr/lib/postgresql/15/bin");
    snprintf(log, sizeof(log), "%s/../log/postgresql.log", real);
    if (geteuid() == 0 && st.st_uid != 0) {
        struct passwd *pw = getpwuid(st.st_uid);
        if (pw == NULL)
            fail_msg("no user for uid %d, the owner of %s", (int)st.st_uid, real);
        argv[argc++] = "/usr/sbin/runuser";
        argv[argc++] = "-u";
        argv[argc++] = pw->pw_name;
        argv[argc++] = "--";
    }
    argv[argc++] = pg_ctl;
    for (const char *const *a = (const char *const[]){"-D", real, "-m", "fast", "-w", "-t", "60",
                                                      "-l", log, "restart", NULL};
         *a != NULL; a++)
        argv[argc++] = *a;
    argv[argc] = NULL;
    /* The cluster's OS user may not read our working directory. pg_ctl
     * gives up after its own 60 s (-t 60). */
    ws = testutil_child_wait(testutil_child_start(argv, &(struct child_opts){.dir = "/"}), 90000,
                             "pg_ctl restart");
    if (ws != 0)
        fail_msg("pg_ctl restart of %s failed (status %d)", real, ws);
    return true;
}

void ct_db_outage(struct ct *t, bool down)
{
    char sql[256];
    PGconn *admin = PQconnectdb("dbname=postgres");

    if (PQstatus(admin) != CONNECTION_OK)
        fail_msg("admin connection: %s", PQerrorMessage(admin));
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS %s", t->db.name,
             down ? "false" : "true");
    testdb_exec(admin, sql);
    if (down) {
        /* Wait (up to 10 s) until each backend is gone: pg_terminate_backend
         * only signals, and a claim in flight could still commit after this
         * returns, which the caller would count as work done during the
         * outage. */
        snprintf(sql, sizeof(sql),
                 "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                 "WHERE datname = '%s' AND application_name LIKE 'ordergate-consumer%%'",
                 t->db.name);
        testdb_exec(admin, sql);
    }
    PQfinish(admin);
}

void ct_reconnect(struct ct *t)
{
    for (int i = 0; i < 100; i++) {
        PQreset(t->conn);
        if (PQstatus(t->conn) == CONNECTION_OK)
            return;
        testutil_sleep_ms(100);
    }
    fail_msg("cannot reconnect to %s: %s", t->db.name, PQerrorMessage(t->conn));
}

double ct_metric_now(const struct ct_proc *p, const char *sample)
{
    static char body[65536];

    assert_int_equal(ct_http_get(ct_metrics_port(p), "/metrics", body, sizeof(body)), 200);
    return ct_metric(body, sample);
}

double ct_metric_wait(const struct ct_proc *p, const char *sample, double want, long timeout_ms)
{
    double v = ct_metric_now(p, sample);

    for (long waited = 0; v != want && waited < timeout_ms; waited += 100) {
        testutil_sleep_ms(100);
        v = ct_metric_now(p, sample);
    }
    return v;
}

int64_t ct_wait_committed(struct ct *t, const char *topic, int partition, int64_t want,
                          long timeout_ms)
{
    int64_t got = ct_committed(t->group, topic, partition);

    for (long waited = 0; got != want && waited < timeout_ms; waited += 200) {
        testutil_sleep_ms(200);
        got = ct_committed(t->group, topic, partition);
    }
    return got;
}
