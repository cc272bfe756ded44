/* Delay levels: which delay topic holds a cancel message due in a given time.
 *
 * Each delay topic (kafka.topics) has a level, the longest wait its messages
 * are produced with: from kafka.topic_levels ("15m,30m", one duration per
 * topic, in the same order) or, when that is empty, from the last
 * dot-separated part of the topic's name ("ordergate.cancel.15m" is 15m).
 * A message due in r goes to the topic with the smallest level >= r, the
 * longest when none is that long (the consumer then waits for it there or
 * re-schedules it). Inside one topic a message can wait behind earlier ones
 * at most level - r, so topics whose levels match the shop's payment windows
 * and hold lengths keep messages on time (docs/consumer.md, "Delay levels").
 *
 * Pure: no Kafka, no database; unit-tested. */
#ifndef OG_COMMON_DELAY_H
#define OG_COMMON_DELAY_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/error.h"

struct delay_level {
    char *topic;
    int64_t level_ms;
};

struct delay_levels {
    struct delay_level *v; /* sorted by level_ms, ascending */
    size_t n;
};

/* delay_levels_parse flags */
#define DELAY_ALL_TOPICS 0u /* every topic must have a level (the relay routes by them) */
#define DELAY_NAMED_ONLY                                                                           \
    1u /* without kafka.topic_levels, a topic whose name ends in no level                          \
        * is left out (the consumer reads such topics all the same) */

/* Reads kafka.topics and kafka.topic_levels. Fails (OG_ERR_CONFIG, setting
 * named) when topic_levels does not give one duration per topic, or, with
 * DELAY_ALL_TOPICS, when a topic has no level at all (neither there nor in
 * its name). *out is empty on failure; free it with delay_levels_free either
 * way. */
enum og_status delay_levels_parse(const struct og_config *cfg, unsigned flags,
                                  struct delay_levels *out, struct og_error *err);
void delay_levels_free(struct delay_levels *d);

/* The level for a message due in remaining_ms (<= 0: due now): the smallest
 * level >= remaining_ms, else the longest (the caller sees which from its
 * level_ms); NULL only when d holds no topic. */
const struct delay_level *delay_pick(const struct delay_levels *d, int64_t remaining_ms);
/* delay_pick's topic, NULL only when d holds no topic. */
const char *delay_topic_for(const struct delay_levels *d, int64_t remaining_ms);
/* The level of topic in ms, -1 when d does not hold it. */
int64_t delay_level_of(const struct delay_levels *d, const char *topic);
/* The longest level, NULL when d holds no topic. */
const struct delay_level *delay_longest(const struct delay_levels *d);

#endif
