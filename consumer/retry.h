/* The local retry set: orders the commit protocol finished for now but not for good, claimed
 * again from here without a round trip through Kafka, and the offsets their partitions may store
 * meanwhile.
 *
 * An order the claim answers busy (its row locked by another transaction) or not_due by less
 * than consumer.local_due_ms does not hold back the batch and does not go round Kafka: its batch
 * entry is finished, and a slot here claims the order again in a later batch, busy ones after a
 * backoff (RETRY_BASE_MS doubling to RETRY_CAP_MS) for up to consumer.busy_retry_ms, short
 * not_due ones at the expire_at due_times() reported (RETRY_NOT_DUE_TRIES times at most). Past
 * the bound, or when the set is full, the order is re-scheduled through a delay topic as a
 * not_due one is. While a slot holds a message, its partition's stored offset stays at that
 * message (the highest offset done behind it is remembered here, a hold, and stored once the
 * slot is released): a crash re-reads it, which is harmless. A revoked partition's slots are
 * dropped (its next owner reads them again). Slots are claimed only while nothing is stalled,
 * so they only ever join a batch that has not been claimed yet.
 *
 * Payments held back wait here too: one whose claim found its order row locked with the busy
 * backoff for as long as the row stays locked, one a hook failed with the hook backoff until
 * consumer.hook_retry_ms. While one waits, a cancel of its order is not claimed but waits as a
 * busy one, no earlier than the payment's next try: the payment came first, so it claims first.
 *
 * This file owns the slots and the holds only: which answer puts an order here, and for how
 * long, is the commit protocol's decision (consumer/commit.c); it never calls the database or
 * the broker. Slot numbers stay valid until released (batch entries refer to them). */
#ifndef OG_CONSUMER_RETRY_H
#define OG_CONSUMER_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "common/error.h"
#include "common/gate.h"
#include "consumer/batch.h"

/* The busy backoff: RETRY_BASE_MS doubling up to RETRY_CAP_MS. */
#define RETRY_BASE_MS 25
#define RETRY_CAP_MS  1000
/* A short not_due order is claimed again from the set at most this many times (a database clock
 * behind ours keeps answering not_due: then it goes round a delay topic). */
#define RETRY_NOT_DUE_TRIES 5

enum retry_state {
    RETRY_FREE,
    RETRY_WAITING,  /* to be claimed again at at_ms */
    RETRY_IN_BATCH, /* an entry of the current batch claims it */
};

struct retry_slot {
    enum retry_state state;
    enum batch_kind kind;  /* BATCH_CANCEL, or BATCH_PAYMENT (then pay is the payment) */
    enum gate_outcome why; /* the last answer: GATE_BUSY, GATE_NOT_DUE or GATE_HOOK_FAILED */
    const char *topic;     /* the owner's copy of the topic name, stable while the slot lives */
    int32_t partition;
    int64_t offset;        /* of its message */
    int64_t due_ms;        /* the message's due time (lateness is measured from it) */
    int64_t first_ms;      /* wall: the first busy or not_due answer */
    int64_t at_ms;         /* wall: claim again from then on */
    int tries;             /* busy or not_due answers so far */
    int64_t hook_first_ms; /* BATCH_PAYMENT: wall time of its first hook failure, else 0 */
    char order_no[GATE_ORDER_NO_MAX + 1];
    struct codec_payment pay; /* BATCH_PAYMENT */
};

/* A partition whose stored offset waits behind a slot: the offset (+ 1) done behind it. */
struct retry_hold {
    char *topic;
    int32_t partition;
    int64_t upto;
};

struct retry_set {
    struct retry_slot *slots; /* cap of them, indexes stable (batch entries refer to them) */
    size_t cap, used;
    struct retry_hold *holds;
    size_t nholds, holds_cap;
};

/* Room for cap slots; OG_ERR_NOMEM otherwise. */
enum og_status retry_init(struct retry_set *r, size_t cap, struct og_error *err);
/* Frees the slots and the holds; r may be zeroed or NULL. */
void retry_free(struct retry_set *r);
/* A slot for the order of e (its message at topic/partition; topic must outlive the slot), state
 * RETRY_IN_BATCH, first answer at now_ms; -1 when the set is full. */
int retry_add(struct retry_set *r, const struct batch_entry *e, const char *topic,
              int32_t partition, int64_t now_ms);
/* The slot waits until at_ms after another `why` answer (tries + 1; an answer of the other
 * kind starts tries again). */
void retry_wait(struct retry_set *r, int slot, enum gate_outcome why, int64_t at_ms);
/* Frees the slot (its order is finished for good); a slot out of range or free is ignored. */
void retry_release(struct retry_set *r, int slot);
/* The earliest at_ms of a waiting slot, SCHED_NEVER when none waits. */
int64_t retry_next_at(const struct retry_set *r);
/* Waiting cancel slots whose last answer was why. */
size_t retry_count(const struct retry_set *r, enum gate_outcome why);
/* True when a payment of order_no waits in the set (held back: a hook failed it or its row was
 * locked); *at_ms (may be NULL) receives when it is claimed again. */
bool retry_payment_held(const struct retry_set *r, const char *order_no, int64_t *at_ms);
/* The lowest offset a slot holds on topic/partition; false when none. */
bool retry_floor(const struct retry_set *r, const char *topic, int32_t partition, int64_t *floor);
/* The offset remembered behind a floor (and forgets it), -1 when none. */
int64_t retry_hold_take(struct retry_set *r, const char *topic, int32_t partition);
/* Remembers the offset done behind a floor; false when out of memory (the next store may then be
 * lower, which re-reads, never skips). */
bool retry_hold_put(struct retry_set *r, const char *topic, int32_t partition, int64_t upto);
/* Drops the slots and the hold of a revoked partition; returns how many slots. */
size_t retry_revoke(struct retry_set *r, const char *topic, int32_t partition);

#endif
