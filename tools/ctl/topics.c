/* ordergatectl topics: creates the topics the configuration names (delay
 * topics, dead letters, payment results, outbox events) so a new
 * installation or a demo does not depend on the broker auto-creating them
 * with whatever defaults it has. Existing topics are left as they are.
 * The replication is kafka.replication's (or --replication's), refused
 * before anything is created when it exceeds the brokers the cluster lists:
 * the broker would refuse each topic anyway, after some had been made. */
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "common/kafka.h"
#include "tools/ctl/ctl.h"

/* The brokers the cluster's metadata lists (what a replica can be put on). */
static enum og_status topics_brokers(rd_kafka_t *rk, int *brokers, struct og_error *err)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t code = rd_kafka_metadata(rk, 0, NULL, &md, 10000);

    if (code != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kafka_error_set(err, code, "cluster metadata");
    *brokers = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
    return OG_OK;
}

static enum og_status topics_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                 struct og_error *err)
{
    const struct og_config *cfg = &ctl->cfg;
    const char *single[] = {cfg->kafka.dead_letter_topic,    cfg->kafka.payments_topic,
                            cfg->kafka.refund_results_topic, cfg->outbox.topic,
                            cfg->outbox.refund_topic,        cfg->outbox.alert_topic};
    char **delay = NULL;
    size_t ndelay = 0;
    int64_t partitions = 4, replication = cfg->kafka.replication > 0 ? cfg->kafka.replication : -1;
    int brokers = 0;
    rd_kafka_t *rk = NULL;
    json_t *list = json_array();
    enum og_status st;

    *result = json_object();
    ctl_json_set(*result, "command", json_string("topics"));
    st = kafka_topics_split(cfg->kafka.topics, &delay, &ndelay, err);
    if (st == OG_OK && opt_arg(a, "partitions") != NULL)
        st = parse_int64("--partitions", opt_arg(a, "partitions"), 1, 10000, &partitions, err);
    if (st == OG_OK && opt_arg(a, "replication") != NULL)
        st = parse_int64("--replication", opt_arg(a, "replication"), 1, 32, &replication, err);
    /* A refused SASL login or TLS certificate: one line now, not retries until a timeout. */
    if (st == OG_OK)
        st = kafka_connect_check(cfg, CTL_PROG "-check", KAFKA_CONNECT_CHECK_MS, err);
    if (st == OG_OK)
        st = kafka_producer_new(cfg, CTL_PROG, NULL, &rk, err);
    if (st == OG_OK)
        st = topics_brokers(rk, &brokers, err);
    if (st == OG_OK && replication > brokers)
        st = og_error_set(err, OG_ERR_ARG, false,
                          "replication %lld: the cluster has %d broker%s; nothing created",
                          (long long)replication, brokers, brokers == 1 ? "" : "s");
    if (st == OG_OK) {
        ctl_json_set(*result, "brokers", json_integer(brokers));
        ctl_json_set(*result, "replication",
                     replication > 0 ? json_integer(replication) : json_string("default"));
    }
    for (size_t i = 0; st == OG_OK && i < ndelay + sizeof(single) / sizeof(single[0]); i++) {
        const char *name = i < ndelay ? delay[i] : single[i - ndelay];
        bool created = false;

        if (name == NULL || *name == '\0')
            continue; /* an optional topic that is not configured */
        st = kafka_topic_create(rk, name, (int)partitions, (int)replication, &created, err);
        if (st == OG_OK)
            json_array_append_new(list, json_pack("{s:s,s:s}", "topic", name, "result",
                                                  created ? "created" : "exists"));
    }
    ctl_json_set(*result, "ok", json_boolean(st == OG_OK));
    ctl_json_set(*result, "topics", list);
    if (rk != NULL)
        rd_kafka_destroy(rk);
    kafka_topics_free(delay, ndelay);
    return st;
}

static void topics_text(const json_t *r, FILE *out)
{
    size_t i;
    json_t *t;

    json_array_foreach(json_object_get(r, "topics"), i, t)
    {
        fprintf(out, "%-40s %s\n", ctl_json_str(t, "topic"), ctl_json_str(t, "result"));
    }
}

static const struct opt topics_opts[] = {
    {"partitions", "N", OPT_ARG, "partitions of each new topic (default 4)", NULL, 0, 0},
    {"replication", "N", OPT_ARG,
     "replication factor of each new topic (default: kafka.replication, else the broker's)", NULL,
     0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_topics = {
    .name = "topics",
    .usage = "topics [--partitions N] [--replication N]",
    .summary = "create the topics the configuration names (delay, dead letters, payments, outbox)",
    .details = "Topics that exist are left unchanged. The number of partitions of a delay topic\n"
               "bounds how many consumer instances can share it (see docs/operations.md).\n",
    .opts = topics_opts,
    .min_pos = 0,
    .pos_name = NULL,
    .max_pos = 0,
    .run = topics_run,
    .text = topics_text,
};
