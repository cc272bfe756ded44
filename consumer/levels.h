/* The consumer's delay levels: how far ahead a cancel message may be due on its topic before it
 * is claimed at once (the consume loop), and which delay topic a re-schedule goes to (the commit
 * protocol). The levels themselves are read by common/delay.h.
 *
 * A message due more than its topic's level plus consumer.level_margin_ms from now would pause
 * its partition far beyond the level, so it is claimed at once instead (the database decides; a
 * not_due answer re-schedules it by the real expire_at). Re-schedules go to the shortest level
 * not shorter than the time left minus the margin; when no level is that long, to the longest
 * level with the due time cut to that level (the order is claimed then and hops on). Every
 * message the consumer produces is thus due within its topic's level. Without levels in the
 * topic names, consumer.max_wait_ms stands for every topic's level: re-schedules go back to
 * their source topic, due within it; so no topic, named any way, has a message pause its
 * partition beyond a bound.
 *
 * Pure: no Kafka, no database, no state of its own. */
#ifndef OG_CONSUMER_LEVELS_H
#define OG_CONSUMER_LEVELS_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/delay.h"

/* The level of a delay topic in ms for the due-time check: its own, else the longest of d, else
 * (no topic has a level) consumer.max_wait_ms. Never negative: every topic is checked, whatever
 * its name. */
int64_t levels_topic_ms(const struct delay_levels *d, const struct og_config *cfg,
                        const char *topic);
/* Where a re-schedule from topic source due at *due_ms (wall) goes; may cut *due_ms to the
 * longest level (to consumer.max_wait_ms when no topic has a level, and then the source topic is
 * the answer). */
const char *levels_reschedule_topic(const struct delay_levels *d, const struct og_config *cfg,
                                    const char *source, int64_t now_ms, int64_t *due_ms);

#endif
