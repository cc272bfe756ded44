/* The consumer's delay levels (consumer/levels.h): a topic's level, a re-schedule's topic.
 *
 * Pure functions of the levels and the configuration; must not touch Kafka, the database or the
 * consumer's state. */
#include "consumer/levels.h"

int64_t levels_topic_ms(const struct delay_levels *d, const struct og_config *cfg,
                        const char *topic)
{
    const struct delay_level *longest = delay_longest(d);
    int64_t own = delay_level_of(d, topic);

    return own >= 0 ? own : longest != NULL ? longest->level_ms : cfg->consumer.max_wait_ms;
}

const char *levels_reschedule_topic(const struct delay_levels *d, const struct og_config *cfg,
                                    const char *source, int64_t now_ms, int64_t *due_ms)
{
    int64_t wait_ms = *due_ms - now_ms - cfg->consumer.level_margin_ms;
    const struct delay_level *pick = delay_pick(d, wait_ms > 0 ? wait_ms : 0);

    /* No level anywhere: back to the source topic, due within consumer.max_wait_ms, which stands
     * for its level (levels_topic_ms): a longer wait hops on then, so a re-schedule never pauses
     * its partition longer than that, nor is claimed at once again (a loop). */
    if (pick == NULL) {
        if (wait_ms > cfg->consumer.max_wait_ms)
            *due_ms = now_ms + cfg->consumer.max_wait_ms;
        return source;
    }
    /* No level is that long: the longest, due when its level has passed (then hop on). */
    if (pick->level_ms < wait_ms)
        *due_ms = now_ms + pick->level_ms;
    return pick->topic;
}
