/* The batch: the container of the due work the consume loop collected from every partition,
 * until the commit protocol (consumer/commit.h) has finished it.
 *
 * Owns the entries, their states and the partitions they came from (with the highest offset seen
 * on each, and whether the partition was revoked meanwhile). Knows nothing of the database, the
 * broker or the retry set: what an entry's state means is the commit protocol's business, what
 * goes into the batch is the loop's.
 *
 * Entries never move while the batch lives (an entry's address is the opaque of a produced
 * message's delivery report, which writes into it): the batch is allocated once, cap entries, and
 * cleared only when its offsets are stored. */
#ifndef OG_CONSUMER_BATCH_H
#define OG_CONSUMER_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "common/error.h"
#include "common/gate.h"
#include "common/kafka.h"

/* Dead letters keep a copy of the bad message until acknowledged: values and keys are cut to
 * these sizes in the dead-letter topic (the original size travels in a header), and a batch is
 * full (flushed early) when its copies exceed the budget, so memory stays bounded whatever
 * arrives. */
#define BATCH_DLQ_VALUE_MAX  16384
#define BATCH_DLQ_KEY_MAX    1024
#define BATCH_DLQ_BUDGET     (4 * 1024 * 1024)
#define BATCH_DLQ_REASON_MAX 512

enum batch_kind { BATCH_CANCEL, BATCH_PAYMENT, BATCH_REFUND, BATCH_DLQ, BATCH_REMINDER };

enum batch_state {
    BATCH_NEW,    /* cancel not claimed / payment not applied / dead letter not produced */
    BATCH_RECORD, /* dead letter of a payment result: record_payment_refused must commit first */
    BATCH_RESCHEDULE, /* claim said not_due: needs the database's due time */
    BATCH_PRODUCE,    /* a message (re-schedule or dead letter) must be produced */
    BATCH_INFLIGHT,   /* produced; waiting for its delivery report */
    BATCH_DONE,
};

struct batch_entry {
    enum batch_kind kind;
    enum batch_state state;
    int tp;         /* index into batch.tps */
    int64_t offset; /* of the source message */
    int64_t due_ms;
    int64_t new_due_ms;
    int32_t reminder_offset; /* BATCH_REMINDER: the reminder's offset in seconds */
    enum gate_outcome outcome;
    bool first; /* the first entry of its order in this batch (duplicates share a claim row) */
    int retry;  /* its slot in the retry set (taken from it, or given one here); -1: none */
    bool held;  /* finished here, but its order goes on in the retry set: no offset past it */
    int64_t hook_first_ms;  /* BATCH_PAYMENT: wall time of the first hook failure, else 0 */
    const char *dest_topic; /* BATCH_PRODUCE re-schedule: where to (NULL: the source topic) */
    char order_no[GATE_ORDER_NO_MAX + 1];
    struct kafka_delivery dr; /* written by the delivery report while BATCH_INFLIGHT */
    /* BATCH_PAYMENT; for the dead letter of a payment result, what could be read of it */
    struct codec_payment pay;
    struct codec_refund refund; /* BATCH_REFUND */
    /* BATCH_DLQ: copies, freed when the batch is cleared */
    char *dlq_key;
    size_t dlq_key_len;
    char *dlq_value;
    size_t dlq_value_len;
    size_t dlq_orig_len;
    char *dlq_reason;
};

struct batch_tp {
    char *topic;
    int32_t partition;
    int64_t max_offset;
    bool voided; /* revoked before the batch committed: nothing is stored for it */
};

struct batch {
    struct batch_entry *e;
    size_t n, cap;
    struct batch_tp *tps;
    size_t ntps, tps_cap;
    int64_t first_ms; /* monotonic time the first entry arrived (linger) */
    size_t dlq_bytes; /* the dead letters' copies (BATCH_DLQ_BUDGET) */
};

/* Room for cap entries; OG_ERR_NOMEM otherwise. */
enum og_status batch_init(struct batch *b, size_t cap, struct og_error *err);
/* Frees the entries' copies and the batch; b may be zeroed or NULL. */
void batch_free(struct batch *b);
/* Empties the batch (its offsets were stored), freeing the entries' copies. */
void batch_clear(struct batch *b);
/* cap entries, or the dead letters' copies over BATCH_DLQ_BUDGET: commit before adding. */
bool batch_full(const struct batch *b);
/* Adds an entry for a message of topic/partition at offset, state BATCH_NEW, no retry slot;
 * NULL when the batch is full or out of memory. The caller fills kind-specific fields. */
struct batch_entry *batch_add(struct batch *b, enum batch_kind kind, const char *topic,
                              int32_t partition, int64_t offset);
/* Marks a revoked partition: its entries are dropped from the batch (their messages go to the
 * partition's next owner) once nothing is in flight. */
void batch_void(struct batch *b, const char *topic, int32_t partition);
/* True when the batch holds live entries of topic/partition. */
bool batch_has(const struct batch *b, const char *topic, int32_t partition);
/* True unless e's partition was revoked (batch_void). */
bool batch_live(const struct batch *b, const struct batch_entry *e);
/* Cancels waiting in the batch (the due-but-not-fired gauge). */
size_t batch_due_pending(const struct batch *b);

#endif
