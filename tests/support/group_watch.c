/* og_group_watch BROKERS GROUP [INTERVAL_MS]: how whole a consumer group is, over time, for the
 * drills that take brokers away (tests/drill/cluster.sh).
 *
 * Asks the group's coordinator for the group (DescribeConsumerGroups) every INTERVAL_MS (500 by
 * default) and prints one line each time the answer changes:
 *   <unix ms> <state> <members> <partitions assigned>
 * state is the coordinator's (Stable, PreparingRebalance, CompletingRebalance, Empty, Dead) or
 * "unanswered" when no coordinator answered within the interval (it moved, or its broker is
 * down); members and partitions are then 0. Runs until SIGTERM or SIGINT, then exits 0; exit 2
 * on bad usage. Reads the group only: it never joins it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

static volatile sig_atomic_t group_watch_stop;

static void group_watch_on_signal(int sig)
{
    (void)sig;
    group_watch_stop = 1;
}

static long long group_watch_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One description of group into line ("state members partitions"); 0 when none came. */
static int group_watch_describe(rd_kafka_t *rk, rd_kafka_queue_t *q, const char *group,
                                int timeout_ms, char *line, size_t size)
{
    const char *groups[] = {group};
    rd_kafka_AdminOptions_t *opts =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    char errstr[256];
    rd_kafka_event_t *ev;
    int ok = 0;

    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof(errstr));
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, opts, q);
    rd_kafka_AdminOptions_destroy(opts);
    /* The request's own timeout ends it; the slack covers the answer's way back. */
    ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (ev != NULL && rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const rd_kafka_DescribeConsumerGroups_result_t *res =
            rd_kafka_event_DescribeConsumerGroups_result(ev);
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t **descs =
            res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;

        if (n == 1 && rd_kafka_ConsumerGroupDescription_error(descs[0]) == NULL) {
            size_t members = rd_kafka_ConsumerGroupDescription_member_count(descs[0]);
            int parts = 0;

            for (size_t i = 0; i < members; i++) {
                const rd_kafka_MemberDescription_t *m =
                    rd_kafka_ConsumerGroupDescription_member(descs[0], i);
                const rd_kafka_topic_partition_list_t *tp =
                    rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(m));
                parts += tp ? tp->cnt : 0;
            }
            snprintf(line, size, "%s %zu %d",
                     rd_kafka_consumer_group_state_name(
                         rd_kafka_ConsumerGroupDescription_state(descs[0])),
                     members, parts);
            ok = 1;
        }
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    if (!ok)
        snprintf(line, size, "unanswered 0 0");
    return ok;
}

/* A client of brokers, or NULL (errstr says why). */
static rd_kafka_t *group_watch_client(const char *brokers, char *errstr, size_t size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, size) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "0", errstr, size) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, size);
}

int main(int argc, char **argv)
{
    char errstr[512], line[128], last[128] = "";
    rd_kafka_queue_t *q;
    rd_kafka_t *rk;
    int interval = argc > 3 ? atoi(argv[3]) : 500;

    if (argc < 3 || argc > 4 || interval < 100) {
        fprintf(stderr, "usage: og_group_watch BROKERS GROUP [INTERVAL_MS >= 100]\n");
        return 2;
    }
    signal(SIGTERM, group_watch_on_signal);
    signal(SIGINT, group_watch_on_signal);
    rk = group_watch_client(argv[1], errstr, sizeof(errstr));
    if (rk == NULL) {
        fprintf(stderr, "og_group_watch: %s\n", errstr);
        return 2;
    }
    q = rd_kafka_queue_new(rk);
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (!group_watch_stop) {
        long long t0 = group_watch_now_ms();
        long long left;

        if (!group_watch_describe(rk, q, argv[2], interval, line, sizeof(line))) {
            /* librdkafka 2.0.2's admin client kept asking the coordinator whose broker had
             * died, unanswered for minutes while a new client got an answer at once: a new
             * client after every miss. */
            rd_kafka_t *fresh = group_watch_client(argv[1], errstr, sizeof(errstr));
            if (fresh != NULL) {
                rd_kafka_queue_destroy(q);
                rd_kafka_destroy(rk);
                rk = fresh;
                q = rd_kafka_queue_new(rk);
            }
        }
        if (strcmp(line, last) != 0) {
            printf("%lld %s\n", t0, line);
            snprintf(last, sizeof(last), "%s", line);
        }
        left = t0 + interval - group_watch_now_ms();
        if (left > 0 && !group_watch_stop) {
            struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return 0;
}
