/* A fenced group.instance.id (consumer/fence.h): the decision between a rejoin and exit 2, and
 * the replacement of the fenced group member.
 *
 * Must not claim, store or commit offsets, and must not subscribe: the loop does that once
 * the new member is built. */
#include <inttypes.h>

#include "common/log.h"
#include "consumer/consumer.h"
#include "consumer/fence.h"

enum fence_action fence_decide(struct fence *f, int64_t now_ms)
{
    if (f->joined_ms != 0 && now_ms - f->joined_ms < FENCE_QUIET_MS)
        return FENCE_EXIT;
    f->pending = true;
    f->rejoin_at_ms = now_ms + FENCE_BACKOFF_MS;
    return FENCE_REJOIN;
}

enum og_status fence_rejoin(struct consumer *c, int64_t now_ms, struct og_error *err)
{
    rd_kafka_t *old = c->rk;
    rd_kafka_topic_partition_list_t *parts = NULL;
    size_t dropped = 0;
    enum og_status st;

    /* The new handle first: if it cannot be built, the loop stops with the old one. */
    st = consumer_member_new(c, err);
    if (st != OG_OK) {
        c->rk = old;
        c->commit.env.rk = old;
        return st;
    }
    /* Nothing the fenced member held is ours any more; none of its offsets was stored past
     * what the database committed, so the next owner (maybe the new member) reads it again. */
    if (rd_kafka_assignment(old, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < parts->cnt; i++) {
            const char *topic = parts->elems[i].topic;
            int32_t partition = parts->elems[i].partition;

            batch_void(&c->commit.batch, topic, partition);
            batch_void(&c->commit.flight, topic, partition);
            window_forget(c->window, topic, partition);
            dropped += retry_revoke(&c->commit.retry, topic, partition);
            sched_revoke(c->sched, topic, partition);
        }
    }
    /* No final commit (librdkafka would refuse it) and no LeaveGroup (a static member sends
     * none): the new member takes the id over with its JoinGroup. */
    rd_kafka_destroy_flags(old, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    c->fence.pending = false;
    c->fence.joined_ms = now_ms;
    c->fence.rejoins++;
    log_info("group_rejoin",
             "group=%s instance_id=%s rejoins=%u partitions_dropped=%d retries_dropped=%zu",
             c->cfg->kafka.group, c->instance_id, c->fence.rejoins, parts ? parts->cnt : 0,
             dropped);
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
    return OG_OK;
}
