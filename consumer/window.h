/* The window: cancels fetched shortly before their due time, held in memory so that the consume
 * loop claims each the moment it falls due instead of a pause, a resume and a fetch round trip
 * after it.
 *
 * Owns, per partition, a FIFO of decoded cancels in offset order, each with its due time; at
 * most WINDOW_PART_MAX of them (fixed-size entries, so the bound is one of bytes too: memory stays
 * flat however large the backlog, everything beyond the window waiting in Kafka behind a pause
 * and a seek, as before). Knows nothing of librdkafka, the batch or the database: the loop puts,
 * takes and forgets; this module only keeps the order.
 *
 * The order within a partition is the contract that keeps offsets safe: once a partition has a
 * cancel in the window, every later message of that partition goes behind it (into the window, or
 * back to Kafka by a pause and a seek), so nothing of a partition reaches the batch before the
 * cancels that precede it, and no stored offset ever passes one that waits here.
 *
 * Not thread-safe: one consume loop owns one window. */
#ifndef OG_CONSUMER_WINDOW_H
#define OG_CONSUMER_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"

/* Cancels held per partition, at most: 2048 x 112 bytes = 224 KB per partition that holds any. */
#define WINDOW_PART_MAX 2048
/* window_next_due() when nothing waits. */
#define WINDOW_NEVER INT64_MAX

enum window_put_result {
    WINDOW_HELD, /* it waits in the window */
    WINDOW_FULL, /* the partition's window is full: the caller pauses and seeks to it */
    WINDOW_NOMEM,
};

struct window_entry {
    int64_t offset;
    int64_t due_ms;     /* wall ms: taken when due_ms <= now */
    int64_t fetched_ms; /* wall ms it came in (the debug log's fetched-vs-due of each cancel) */
    struct codec_cancel cancel;
};

struct window;

/* Called for each entry taken; returns false to stop taking (the batch is full). The entry stays
 * taken only when the callback returns true. */
typedef bool (*window_take_fn)(void *arg, const char *topic, int32_t partition,
                               const struct window_entry *e);

struct window *window_new(void);
void window_free(struct window *w);

/* Whether the partition holds anything: then every later message of it must go behind. */
bool window_busy(const struct window *w, const char *topic, int32_t partition);
/* fetched_ms: when the message was polled, kept for the caller's diagnosis only. */
enum window_put_result window_put(struct window *w, const char *topic, int32_t partition,
                                  int64_t offset, int64_t due_ms, int64_t fetched_ms,
                                  const struct codec_cancel *c);
/* Takes, partition by partition and in order, every head entry due at now_ms (due_ms <= now_ms),
 * until fn refuses one. Returns how many were taken. */
size_t window_take_due(struct window *w, int64_t now_ms, window_take_fn fn, void *arg);
/* The due time of the partition's head, WINDOW_NEVER when it holds nothing. The partition's
 * entries leave only from the head and only once it is due, so a full partition has room again no
 * earlier than just after this. */
int64_t window_head_due(const struct window *w, const char *topic, int32_t partition);
/* The earliest due time of a partition's head, WINDOW_NEVER when empty. */
int64_t window_next_due(const struct window *w);
/* The partition was revoked or lost: what it held is forgotten (its offsets were never stored,
 * so its next owner reads those messages again). */
void window_forget(struct window *w, const char *topic, int32_t partition);
size_t window_count(const struct window *w);

#endif
