/* Per-partition scheduling of delayed messages, without holding messages.
 *
 * The consumer reads each partition in order. When the next message of a
 * partition is not due yet, it pauses that partition and seeks it back to
 * that message, so the message stays in Kafka instead of in our memory, and
 * resumes the partition at the message's due time; the message is then
 * fetched again and is due. Due times inside one partition are nearly
 * monotonic (one delay topic per delay level), so one pause per partition
 * is enough: head-of-line waiting is the design, not a defect.
 *
 * This module only decides; it never calls librdkafka, so it is unit-tested
 * without a broker. The caller applies every decision:
 *   - sched_offer() for each message polled: SCHED_DUE (process it),
 *     SCHED_PAUSE (pause the partition and seek it to this message's
 *     offset), or SCHED_DROP (a copy fetched before the pause took effect;
 *     it will be fetched again after the seek, so it is dropped unprocessed);
 *   - sched_take_resumable() at every loop turn: resume these partitions;
 *   - sched_stall_begin()/sched_stall_end(): while a batch cannot be
 *     committed (database down) the consumer stalls: every assigned partition
 *     is paused, and nothing is resumed until the stall ends;
 *   - sched_assign()/sched_revoke() from the rebalance callback: the state
 *     of those partitions starts afresh; revoke reports whether we had the
 *     partition paused, so the caller resumes it before giving it up
 *     (librdkafka keeps an application pause on the partition object across
 *     assignments, and a partition paused by an earlier owner-self would
 *     otherwise never fetch again).
 * Only partitions this module paused are ever handed back for resuming.
 *
 * Times are wall-clock milliseconds (due times are wall-clock instants).
 * Not thread-safe: one consumer loop owns one sched. */
#ifndef OG_COMMON_SCHED_H
#define OG_COMMON_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* due_ms for messages that have no due time (payments, undecodable ones):
 * they are due at once unless their partition is paused or stalled. */
#define SCHED_ALWAYS_DUE INT64_MIN
/* sched_next_resume() when nothing is waiting. */
#define SCHED_NEVER INT64_MAX

enum sched_verdict {
    SCHED_DUE,   /* process the message now */
    SCHED_PAUSE, /* pause the partition and seek it back to this message's offset */
    SCHED_DROP,  /* prefetched after our pause: drop it, it will be fetched again */
    SCHED_NOMEM, /* out of memory for a new partition: nothing recorded, stop */
};

struct sched;

/* Called once per partition by the functions that hand partitions back.
 * offset: where we sought the partition to when pausing it (its next
 * message), -1 when we did not seek (a stall pause). */
typedef void (*sched_visit_fn)(void *arg, const char *topic, int32_t partition, int64_t offset);

/* min_pause_ms: a partition paused for a due time stays paused at least
 * this long. Every pause drops the partition's prefetched messages and every
 * resume fetches again, so with due times a few milliseconds apart an
 * unbounded pause/resume rate would spend the broker's and our time on
 * refetching; the floor trades at most min_pause_ms of lateness for at most
 * 1000/min_pause_ms pause cycles per second per partition. It never makes a
 * message early. Returns NULL when out of memory. */
struct sched *sched_new(int64_t min_pause_ms);
void sched_free(struct sched *s);

/* A partition was assigned: its state starts afresh. Returns true when the
 * caller must pause it right away (a stall is active). Returns false, and
 * records nothing, when out of memory (the partition then simply runs). */
bool sched_assign(struct sched *s, const char *topic, int32_t partition);
/* A partition was revoked or lost: its state is forgotten. Returns true when
 * we had it paused; the caller resumes it before unassigning it. */
bool sched_revoke(struct sched *s, const char *topic, int32_t partition);

/* The decision for one polled message (see above). On SCHED_PAUSE the
 * partition is recorded as paused until due_ms (or until the stall ends). */
enum sched_verdict sched_offer(struct sched *s, const char *topic, int32_t partition,
                               int64_t offset, int64_t due_ms, int64_t now_ms);

/* Pauses the partition at offset whatever its due time (the caller's own reason: a full window),
 * resuming it as a pause for due_ms would. False only when out of memory. */
bool sched_pause(struct sched *s, const char *topic, int32_t partition, int64_t offset,
                 int64_t due_ms, int64_t now_ms);
/* The same, resumed at at_ms itself (no lead), and at least min_pause_ms from now: for a reason
 * that ends at a known time (a full window gains room when its head falls due). */
bool sched_pause_at(struct sched *s, const char *topic, int32_t partition, int64_t offset,
                    int64_t at_ms, int64_t now_ms);
/* Resume partitions lead_ms before their due time (default 0: at it). Only for a caller that
 * holds messages fetched early until they fall due (consumer/window.h); anyone else would
 * fetch a message that is not due yet and pause again. min_pause_ms still applies. */
void sched_set_lead(struct sched *s, int64_t lead_ms);

/* Hands back (and marks running) every partition we paused whose resume
 * time is <= now_ms; none while a stall is active. Returns how many. */
size_t sched_take_resumable(struct sched *s, int64_t now_ms, sched_visit_fn fn, void *arg);

/* Starts a stall: hands back every assigned partition that is not paused yet
 * (the caller pauses them); they resume when the stall ends. Partitions that
 * wait for a due time keep waiting for it. Idempotent. Returns how many. */
size_t sched_stall_begin(struct sched *s, sched_visit_fn fn, void *arg);
void sched_stall_end(struct sched *s);
bool sched_stalled(const struct sched *s);

/* The earliest resume time, SCHED_NEVER when nothing waits or stalled. */
int64_t sched_next_resume(const struct sched *s);
size_t sched_paused_count(const struct sched *s);
size_t sched_assigned_count(const struct sched *s);
bool sched_is_paused(const struct sched *s, const char *topic, int32_t partition);

#endif
