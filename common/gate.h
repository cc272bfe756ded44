/* The gate client: the C face of the gate functions in schema/.
 *
 * Each call is one round trip to one SQL function; the database decides who
 * wins (one conditional update) and does the side effects in the same
 * transaction. The client validates arguments before sending them (a clear
 * OG_ERR_ARG, nothing sent), maps outcome words to an enum, and lets db_call()
 * retry transient failures. Outcome words are the contract of schema/README.md,
 * "The gate" (one table per function). */
#ifndef OG_COMMON_GATE_H
#define OG_COMMON_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/db.h"
#include "common/error.h"

/* Bounds shared with the argument checks of the gate functions (schema/README.md,
 * "The gate" and "Errors (SQLSTATE)": 22023): the client refuses beyond them
 * (OG_ERR_ARG, nothing sent) instead of a round trip for 22023. */
#define GATE_ORDER_NO_MAX   64
#define GATE_TXN_NO_MAX     128
#define GATE_BATCH_MAX      10000
#define GATE_CHANNEL_MAX    64
#define GATE_OPERATOR_MAX   128
#define GATE_REASON_MAX     2000
#define GATE_COUPON_MAX     128
#define GATE_SKU_MAX        128
#define GATE_ITEMS_MAX      1000
#define GATE_CHARGE_REF_MAX 128
/* A currency is an ISO 4217 alpha-3 code: three upper-case letters (the database then says
 * whether it knows it). */
#define GATE_CURRENCY_LEN 3
/* place_order refuses a larger amount: minor units beyond it are garbage in any currency. */
#define GATE_AMOUNT_MAX 1000000000000000LL
/* begin_charge: the most seconds a charge can protect its order (the database's own bound,
 * max_pending_charge_seconds, may be lower: then OG_ERR_ARG from the database). */
#define GATE_CHARGE_SECONDS_MAX 2592000
/* record_payment_refused: the source position, what is sent of the reason and of the message
 * (after escaping; the message whole up to this bound, 4 x 16 KiB: the database keys a record
 * by all of it), and what the record's note keeps of the message. */
#define GATE_REFUSAL_SOURCE_MAX       300
#define GATE_REFUSAL_REASON_MAX       500
#define GATE_REFUSAL_MESSAGE_SEND_MAX 65536
#define GATE_REFUSAL_MESSAGE_MAX      2000

enum gate_outcome {
    GATE_UNKNOWN = 0,
    /* claim_cancel / close_order */
    GATE_CANCELLED,
    GATE_ALREADY_CANCELLED,
    GATE_ALREADY_PAID,
    GATE_NOT_DUE,
    GATE_NOT_FOUND,
    GATE_BUSY, /* claim_cancel: pending and due, its row locked by another transaction: retry */
    /* claim_payment */
    GATE_PAID,
    GATE_DUPLICATE,
    GATE_LATE_PAYMENT,
    GATE_DOUBLE_PAYMENT,
    GATE_AMOUNT_MISMATCH,
    GATE_PARTIAL,  /* a part below the remaining amount: captured, the order stays pending */
    GATE_OVERPAID, /* the order is paid; the excess has an exception and a refund request */
    GATE_CURRENCY_MISMATCH, /* another currency than the order's: never claims; an exception */
    /* hold_for_payment */
    GATE_HELD,
    GATE_NOT_PENDING, /* also begin_charge: the order is closed, nothing recorded */
    /* begin_charge */
    GATE_PENDING, /* the charge is recorded: the order is not cancelled while it is pending */
    /* charge_failed */
    GATE_FAILED,
    GATE_ALREADY_CAPTURED,
    /* place_order */
    GATE_PLACED,
    GATE_OUT_OF_STOCK,
    GATE_COUPON_UNAVAILABLE,
    /* claim_reminder (also GATE_NOT_DUE, GATE_NOT_PENDING, GATE_NOT_FOUND) */
    GATE_SENT,         /* this call wrote the payment_reminder event */
    GATE_IN_FLIGHT,    /* a hold, a pending charge or a payment holds it back: try again later */
    GATE_ALREADY_SENT, /* sent before, by any caller */
    /* gate_claim_cancel_isolating only (never a database answer): a registered hook failed the
     * claim of this order alone; nothing was claimed for it */
    GATE_HOOK_FAILED,
    /* claim_cancel / close_order: staff released the order unpaid (release_order); final, never
     * cancelled, not to be retried */
    GATE_ALREADY_RELEASED,
    /* release_order (else GATE_NOT_PENDING, GATE_NOT_FOUND) */
    GATE_RELEASED,
    /* amend_order (else GATE_OUT_OF_STOCK, GATE_NOT_PENDING, GATE_NOT_FOUND) */
    GATE_AMENDED,
    /* set_deadline (else GATE_NOT_PENDING, GATE_NOT_FOUND) */
    GATE_SET,
    GATE_OUTCOME_COUNT
};

enum gate_source {
    GATE_SRC_TIMEOUT_CONSUMER,
    GATE_SRC_TIMEOUT_SCANNER,
    GATE_SRC_PAYMENT_CALLBACK,
    GATE_SRC_MANUAL,
};

/* ORDER_RELEASED: staff took it out of the gate unpaid (release_order); it may still become
 * ORDER_PAID, never ORDER_CANCELLED. */
enum order_status {
    ORDER_STATUS_NONE = 0,
    ORDER_PENDING,
    ORDER_PAID,
    ORDER_CANCELLED,
    ORDER_RELEASED
};

struct gate_cancel_row {
    char order_no[GATE_ORDER_NO_MAX + 1];
    enum gate_outcome outcome;
    enum order_status status;
};

struct gate_payment_result {
    enum gate_outcome outcome;
    enum gate_outcome first_outcome; /* set when outcome is GATE_DUPLICATE */
    enum order_status status;
};

const char *gate_outcome_str(enum gate_outcome outcome);
enum gate_outcome gate_outcome_parse(const char *word);
const char *gate_source_str(enum gate_source source);
const char *order_status_str(enum order_status status);
enum order_status order_status_parse(const char *word);

/* True when s is a valid order number: 1..64 of [A-Za-z0-9._:-]. */
int gate_order_no_valid(const char *s, size_t len);
/* True when s is a valid channel transaction number: 1..128 of the same set. */
int gate_txn_no_valid(const char *s, size_t len);

/* Every function below returns OG_OK with the outcome filled, or:
 *   OG_ERR_ARG       a bad argument (checked here, nothing sent; or refused by
 *                    the database with SQLSTATE 22023): nothing changed;
 *   OG_ERR_DB        the database failed even after db_call()'s retries
 *                    (err->retriable says whether trying later may help);
 *   OG_ERR_INTERNAL  the answer does not match this client (wrong shape or an
 *                    outcome word it does not know): the schema drifted.
 * A call repeated after an unknown result is safe: the gate answers
 * already_cancelled / duplicate instead of acting twice. */

/* Cancels every due, still pending order of the list in one statement; an order whose row
 * another transaction holds locked is not waited for but answered GATE_BUSY.
 * rows must have room for n entries; *nrows receives one row per distinct
 * order number, in no particular order. source: consumer or scanner only. */
enum og_status gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                 enum gate_source source, struct gate_cancel_row *rows,
                                 size_t *nrows, struct og_error *err);

/* True when err is a claim's failure in a hook the shop registered (add_hook): the database
 * named "ordergate.hooks" as the error's object. hook (when not NULL) receives the hook's
 * function as the message names it ("mall.on_cancelled(text[],text)"), or "unknown". The
 * claim was rolled back whole: nothing was claimed. */
bool gate_hook_failed(const struct og_error *err, char *hook, size_t hook_size);

/* Room for a hook's name as gate_hook_failed gives it (a regprocedure's text). */
#define GATE_HOOK_NAME_MAX 256

/* At most this many claim statements per gate_claim_cancel_isolating call. */
#define GATE_ISOLATE_CLAIMS_MAX 64

/* gate_claim_cancel, but a hook failure of the whole list does not fail the others: the list's
 * distinct orders are bisected (halves claimed in separate statements, breadth first, at most
 * GATE_ISOLATE_CLAIMS_MAX claims) until the failing ones are alone. Those come back as rows with
 * outcome GATE_HOOK_FAILED (status ORDER_STATUS_NONE), as do the orders of a part still failing
 * when the budget ran out; every other order has its normal row. hook_err (when not NULL)
 * receives the last hook failure when any row is GATE_HOOK_FAILED.
 *
 * Errors: what gate_claim_cancel returns for anything but a hook failure (some parts may have
 * committed by then: a repeat answers already_cancelled for them); and, when the list has more
 * than one order and not one part of it could be claimed, the hook's error itself
 * (gate_hook_failed(err) is true): the hook fails for every order, an outage like the
 * database's, not one broken order. A list of one order never fails that way: its failure is
 * its GATE_HOOK_FAILED row. */
enum og_status gate_claim_cancel_isolating(struct db *db, const char *const *order_nos, size_t n,
                                           enum gate_source source, struct gate_cancel_row *rows,
                                           size_t *nrows, struct og_error *hook_err,
                                           struct og_error *err);

/* What record_refund did (schema/README.md, "record_refund"). */
enum gate_refund_result {
    GATE_REFUND_REFUNDED,         /* succeeded: the exception is closed as refunded */
    GATE_REFUND_MANUAL_REVIEW,    /* failed: the exception goes to manual review */
    GATE_REFUND_DUPLICATE,        /* reported before, the same: nothing changed */
    GATE_REFUND_CONFLICT,         /* this refund_ref was reported with another txn or outcome */
    GATE_REFUND_ALREADY_REFUNDED, /* another refund of this payment succeeded before */
    GATE_REFUND_NOT_REQUESTED,    /* no refund was requested for this payment */
    GATE_REFUND_NOT_FOUND,        /* no such payment */
    GATE_REFUND_RESULT_COUNT
};

struct gate_refund_outcome {
    enum gate_refund_result result;
    int64_t exception_id; /* 0 when there is none */
    char state[16];       /* the exception's after the call, "" when none */
    char resolution[24];
};

const char *gate_refund_result_str(enum gate_refund_result r);

/* Reports a refund ordergate requested: txn_no and refund_ref 1..GATE_TXN_NO_MAX of the
 * order-number characters; idempotent by refund_ref. */
enum og_status gate_record_refund(struct db *db, const char *txn_no, const char *refund_ref,
                                  bool succeeded, struct gate_refund_outcome *out,
                                  struct og_error *err);

/* True when s is 3 upper-case ASCII letters (the form of an ISO 4217 alpha-3 code). */
int gate_currency_valid(const char *s, size_t len);
/* True when s is a valid charge reference: 1..128 of [A-Za-z0-9._:-]. */
int gate_charge_ref_valid(const char *s, size_t len);

/* A payment for claim_payment. order_no, txn_no, amount_cents and channel are required as in
 * gate_claim_payment; every other field is optional (NULL / 0):
 *   currency      the payment's currency; NULL: the order's. Another currency than the order's
 *                 answers GATE_CURRENCY_MISMATCH and never claims.
 *   charge_ref    the charge (gate_begin_charge) this payment captures; it must be the order's.
 *   operator_name, reason
 *                 a payment taken by staff: both or neither; with them channel must be
 *                 "manual". The status log records it as manual_payment by the operator.
 *   lock_wait_ms  as gate_claim_payment_bounded's (0: the session's lock_timeout).
 * amount_cents is in minor units of the payment's currency. */
struct gate_payment {
    const char *order_no;
    const char *txn_no;
    int64_t amount_cents;
    const char *channel;
    const char *currency;
    const char *charge_ref;
    const char *operator_name;
    const char *reason;
    int lock_wait_ms;
};

/* Claims a payment (every field checked here first: OG_ERR_ARG, nothing sent). Outcomes:
 * GATE_PAID, GATE_PARTIAL, GATE_OVERPAID, GATE_DUPLICATE (first_outcome says what the first
 * call answered), GATE_LATE_PAYMENT, GATE_DOUBLE_PAYMENT, GATE_AMOUNT_MISMATCH,
 * GATE_CURRENCY_MISMATCH, GATE_NOT_FOUND. A payment without any optional field is sent as
 * gate_claim_payment has always sent it. */
enum og_status gate_payment_claim(struct db *db, const struct gate_payment *p,
                                  struct gate_payment_result *out, struct og_error *err);

/* channel: 1..GATE_CHANNEL_MAX characters. gate_payment_claim with no optional field. */
enum og_status gate_claim_payment(struct db *db, const char *order_no, const char *txn_no,
                                  int64_t amount_cents, const char *channel,
                                  struct gate_payment_result *out, struct og_error *err);

/* gate_claim_payment, but no lock of the call waits longer than lock_wait_ms
 * (1..GATE_LOCK_WAIT_MAX; 0 is gate_claim_payment; else OG_ERR_ARG): the same one statement, which
 * sets lock_timeout for its own transaction before the claim starts (set_config(..., true) in the
 * claim's arguments), so nothing stays in the session and no round trip is added. A wait cut short
 * fails the call whole, nothing changed, as gate_payment_locked() tells (SQLSTATE 55P03); a hook's
 * own lock wait that ends so is a hook failure (gate_hook_failed). For a caller that must not stall
 * behind one order an order service holds (the consumer). */
#define GATE_LOCK_WAIT_MAX 60000
enum og_status gate_claim_payment_bounded(struct db *db, const char *order_no, const char *txn_no,
                                          int64_t amount_cents, const char *channel,
                                          int lock_wait_ms, struct gate_payment_result *out,
                                          struct og_error *err);
/* True when err is a claim's wait for a lock that lock_timeout cut short (55P03) outside any
 * hook: the order's row (or the payment's) is held by another transaction; nothing changed. */
bool gate_payment_locked(const struct og_error *err);

/* A payment result the consumer dead-letters: it did not decode, or claim_payment refused it
 * for good. */
struct gate_refusal {
    const char *source;   /* where it came from ("topic/partition/offset"), required */
    const char *order_no; /* a valid order number it names, or NULL */
    const char *txn_no;   /* a valid transaction number it carries, or NULL (then the source
                           * position is the key) */
    int64_t amount_cents; /* > 0 when known, else 0 */
    const char *reason;   /* why, required; any bytes (escaped like the message) */
    const void *message;  /* the message as received, any bytes; NULL with message_len 0 */
    size_t message_len;
};

struct gate_refusal_result {
    bool recorded; /* this call wrote the exception; false: the key was recorded before */
    int64_t exception_id;
    /* "txn:<txn_no>", or "msg:<source>#<sha256 of the message, hex>" */
    char key[GATE_REFUSAL_SOURCE_MAX + 72];
};

/* Records a refused payment result as an exception (kind refused_payment, manual_review):
 * schema/functions/gate/record_payment_refused.sql. Idempotent by key (the transaction number, else
 * the source position with the message's content), so a redelivered message is recorded once
 * and a different one at a position seen before is recorded too. The reason and the message
 * are sent as text with every byte that is not printable ASCII (and the backslash) written as
 * \xHH, cut to GATE_REFUSAL_REASON_MAX and GATE_REFUSAL_MESSAGE_SEND_MAX characters (the note
 * keeps GATE_REFUSAL_MESSAGE_MAX of the message): any bytes are accepted. An order or transaction
 * number that is not valid is OG_ERR_ARG (pass NULL instead). */
enum og_status gate_record_payment_refused(struct db *db, const struct gate_refusal *r,
                                           struct gate_refusal_result *out, struct og_error *err);

/* seconds: 1..max_hold_seconds (a database setting: beyond it OG_ERR_ARG).
 * expire_at receives the new due time as text ("" when not_found; the buffer
 * may be NULL). */
enum og_status gate_hold(struct db *db, const char *order_no, int seconds,
                         enum gate_outcome *outcome, char *expire_at, size_t expire_at_size,
                         struct og_error *err);

/* claim_reminder: the order's payment reminder at offset_seconds (1..GATE_REMINDER_OFFSET_MAX)
 * before its deadline, sent at most once (schema/README.md, "Payment reminders"). Outcomes:
 * GATE_SENT (*due_ms: the due time it was sent against), GATE_NOT_DUE (*due_ms: when it is due),
 * GATE_IN_FLIGHT (*due_ms: when to try again; 0: given up, never sent), GATE_NOT_PENDING,
 * GATE_ALREADY_SENT (*due_ms as for GATE_SENT), GATE_NOT_FOUND (no such reminder); *due_ms is 0
 * when the answer carries no time. Times are epoch milliseconds, rounded up (never early). */
#define GATE_REMINDER_OFFSET_MAX 31622400
enum og_status gate_claim_reminder(struct db *db, const char *order_no, int offset_seconds,
                                   enum gate_outcome *outcome, int64_t *due_ms,
                                   struct og_error *err);

/* Many reminders in one statement (one round trip, one transaction): claim_reminder for each
 * (order_nos[i], offsets[i]), i < n (1..GATE_BATCH_MAX), in (order number, offset) order, the
 * gate's lock order; outcomes[i] and due_ms[i] as gate_claim_reminder's. A duplicate pair in one
 * call is sent at most once (its second answer is GATE_ALREADY_SENT). */
enum og_status gate_claim_reminders(struct db *db, size_t n, const char *const *order_nos,
                                    const int *offsets, enum gate_outcome *outcomes,
                                    int64_t *due_ms, struct og_error *err);

/* operator_name: 1..GATE_OPERATOR_MAX characters (recorded as the actor);
 * reason: 1..GATE_REASON_MAX characters. */
enum og_status gate_close(struct db *db, const char *order_no, const char *operator_name,
                          const char *reason, enum gate_outcome *outcome, enum order_status *status,
                          struct og_error *err);

/* begin_charge: a charge of the order is in flight (a 3-D Secure redirect, a bank transfer):
 * the order is not cancelled while it is pending, for at most max_seconds
 * (1..max_pending_charge_seconds, a database setting; beyond GATE_CHARGE_SECONDS_MAX OG_ERR_ARG
 * here). charge_ref: 1..GATE_CHARGE_REF_MAX of the order-number characters, unique across
 * orders. Outcomes: GATE_PENDING (recorded), GATE_DUPLICATE (begun before for this order:
 * nothing changed), GATE_NOT_PENDING (the order is closed: nothing recorded), GATE_NOT_FOUND.
 * bound_at (may be NULL) receives the charge's bound as text ("" when none). A reference of
 * another order is OG_ERR_ARG (22023). */
enum og_status gate_begin_charge(struct db *db, const char *order_no, const char *charge_ref,
                                 int max_seconds, enum gate_outcome *outcome, char *bound_at,
                                 size_t bound_at_size, struct og_error *err);

/* charge_failed: the charge ended without money. Outcomes: GATE_FAILED, GATE_DUPLICATE
 * (failed before), GATE_ALREADY_CAPTURED (its capture came first: the payment stands). An
 * unknown reference or another order's is OG_ERR_ARG (22023). When it was the order's last
 * pending charge and the deadline has passed, the database schedules the order's cancel now. */
enum og_status gate_charge_failed(struct db *db, const char *order_no, const char *charge_ref,
                                  enum gate_outcome *outcome, struct og_error *err);

/* An order for place_order. Required as gate_place's arguments; optional:
 *   currency       ISO 4217 alpha-3 code (NULL: the database's default_currency); amount_cents
 *                  is in its minor units (1..GATE_AMOUNT_MAX);
 *   allow_partial  payments in parts are captured until they reach the amount. */
struct gate_order {
    const char *order_no;
    int64_t amount_cents;
    const char *items_json;
    const char *coupon_id;
    const char *expire_at;
    const char *currency;
    bool allow_partial;
};

/* Places an order (checked here first, as gate_place). An unknown currency is OG_ERR_ARG
 * (22023 from the database), nothing written. */
enum og_status gate_order_place(struct db *db, const struct gate_order *o,
                                enum gate_outcome *outcome, struct og_error *err);

/* items_json: [{"sku":"...","qty":N},...], 1..GATE_ITEMS_MAX lines, sku
 * 1..GATE_SKU_MAX characters, qty 1..2^31-1 (checked here); coupon_id NULL or
 * "" for none; expire_at: a timestamptz literal such as
 * "2026-11-30T16:00:00Z". An unknown sku is out_of_stock, not an error. */
enum og_status gate_place(struct db *db, const char *order_no, int64_t amount_cents,
                          const char *items_json, const char *coupon_id, const char *expire_at,
                          enum gate_outcome *outcome, struct og_error *err);

/* Staff acts on a pending order (schema/README.md, "release_order", "amend_order",
 * "set_deadline"). operator: 1..GATE_OPERATOR_MAX characters, reason 1..GATE_REASON_MAX (the
 * database trims both). Each waits for the order's row lock, as gate_close does. */

/* Releases a pending order unpaid: GATE_RELEASED, else GATE_NOT_PENDING (status: the order's) or
 * GATE_NOT_FOUND. */
enum og_status gate_order_release(struct db *db, const char *order_no, const char *operator_name,
                                  const char *reason, enum gate_outcome *outcome,
                                  enum order_status *status, struct og_error *err);

/* Amends a pending order: amount_cents (1..GATE_AMOUNT_MAX, in the order's currency), items_json
 * as for gate_order_place but "[]" allowed (a gate-only order stays gate-only; the database
 * refuses a change of kind), shop_json NULL (keep the order's) or a JSON object. GATE_AMENDED,
 * GATE_OUT_OF_STOCK (nothing changed), GATE_NOT_PENDING or GATE_NOT_FOUND. */
enum og_status gate_order_amend(struct db *db, const char *order_no, int64_t amount_cents,
                                const char *items_json, const char *shop_json,
                                const char *operator_name, enum gate_outcome *outcome,
                                enum order_status *status, struct og_error *err);

/* Moves a pending order's deadline to deadline (a timestamp PostgreSQL reads, at most
 * max_deadline_seconds ahead; the past means due now): GATE_SET, GATE_NOT_PENDING or
 * GATE_NOT_FOUND. expire_at (when not NULL) receives the order's deadline after the call as the
 * database prints it ("" when not found). */
enum og_status gate_order_set_deadline(struct db *db, const char *order_no, const char *deadline,
                                       const char *operator_name, enum gate_outcome *outcome,
                                       char *expire_at, size_t expire_at_size,
                                       struct og_error *err);

#endif
