/* The message contract (README.md, "The message contract (Kafka)"; details
 * in docs/consumer.md): versioned JSON values on Kafka.
 *
 * Delayed cancel message (delay topics, key = order number):
 *   {"v":1,"order_no":"A-1001","due_at":"2026-11-30T16:00:00.000Z"}
 *   optional: "kind":"cancel" (the same) or "kind":"reminder" with "offset_seconds":300, the
 *   order's payment reminder at that offset (claim_reminder), due at due_at; a message without
 *   a kind is a cancel, as every message written before reminders existed
 * Payment result (optional payments topic, key = order number):
 *   {"v":1,"order_no":"A-1001","txn_no":"T-77","amount_cents":1999,"channel":"card"}
 *   optional: "currency":"EUR" (the amount's; absent: the order's), "charge_ref":"C-9" (the
 *   pending charge this payment captures)
 * Refund result (optional refund-results topic, key = the payment's txn_no):
 *   {"v":1,"txn_no":"T-77","refund_ref":"R-5","outcome":"succeeded"}   (or "failed")
 *
 * Decoding is strict, because whatever passes goes to the database as is:
 * the value is one JSON object of at most CODEC_VALUE_MAX bytes without
 * duplicate keys; "v" is the integer 1 (any other integer is an unknown
 * version, refused rather than guessed at); order_no and txn_no follow the
 * gate's character rules; due_at is RFC 3339 with a zone; amount_cents is a
 * positive integer; channel is 1..CODEC_CHANNEL_MAX printable ASCII
 * characters; currency, when present, is an ISO 4217 alpha-3 code in upper case (three
 * letters A-Z); charge_ref, when present, follows txn_no's rules; refund_ref follows txn_no's rules
 * and outcome is "succeeded" or "failed". A non-empty key must equal order_no (a refund result's:
 * txn_no; a producer that keyed the message by something else partitions it wrongly). Fields not
 * named here are ignored, so producers may add some without breaking us.
 *
 * On failure the functions return OG_ERR_DECODE and err->msg starts with a
 * stable reason code, then ": " and details, e.g.
 * "unknown_version: v=2". The codes: too_large, empty, bad_json, not_object,
 * missing_field, bad_type, unknown_version, bad_order_no, key_mismatch,
 * bad_due_at, bad_txn_no, bad_amount, bad_channel, bad_currency, bad_charge_ref, bad_refund_ref,
 * bad_outcome, bad_kind, bad_offset. The consumer copies that text into the dead-letter header
 * ordergate-reason.
 *
 * Pure functions: no global state, safe from any thread, never abort on any
 * input (a libFuzzer target in tests/fuzz/ holds them to that). */
#ifndef OG_COMMON_CODEC_H
#define OG_COMMON_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/gate.h"

#define CODEC_VERSION     1
#define CODEC_VALUE_MAX   4096 /* bytes of JSON; a real message is below 200 */
#define CODEC_CHANNEL_MAX 64
#define CODEC_DUE_AT_MAX  40 /* the longest RFC 3339 form clock_parse_iso accepts is 35 */
#define CODEC_AMOUNT_MAX  1000000000000000LL /* 10^15 cents: anything above is garbage */
#define CODEC_OFFSET_MAX  31622400 /* a reminder's offset: reminder_before_seconds' bound */

struct codec_cancel {
    char order_no[GATE_ORDER_NO_MAX + 1];
    int64_t due_ms;          /* Unix epoch milliseconds, UTC */
    int32_t reminder_offset; /* 0: a cancel; else a reminder at this offset in seconds */
};

struct codec_payment {
    char order_no[GATE_ORDER_NO_MAX + 1];
    char txn_no[GATE_TXN_NO_MAX + 1];
    int64_t amount_cents;
    char channel[CODEC_CHANNEL_MAX + 1];
    char currency[GATE_CURRENCY_LEN + 1];     /* "" when the message names none */
    char charge_ref[GATE_CHARGE_REF_MAX + 1]; /* "" when the message names none */
};

struct codec_refund {
    char txn_no[GATE_TXN_NO_MAX + 1];
    char refund_ref[GATE_TXN_NO_MAX + 1];
    bool succeeded; /* outcome "succeeded"; false: "failed" */
};

/* key may be NULL (no key); value may be NULL only with value_len 0. */
enum og_status codec_decode_cancel(const void *key, size_t key_len, const void *value,
                                   size_t value_len, struct codec_cancel *out,
                                   struct og_error *err);
/* codec_decode_cancel without its fast path for flat values: every value through the JSON
 * parser. The same answer for every input (result, out and err alike); kept for the tests that
 * hold the fast path to that. */
enum og_status codec_decode_cancel_json(const void *key, size_t key_len, const void *value,
                                        size_t value_len, struct codec_cancel *out,
                                        struct og_error *err);
enum og_status codec_decode_payment(const void *key, size_t key_len, const void *value,
                                    size_t value_len, struct codec_payment *out,
                                    struct og_error *err);
enum og_status codec_decode_refund(const void *key, size_t key_len, const void *value,
                                   size_t value_len, struct codec_refund *out,
                                   struct og_error *err);

/* What can be read of a payment result that did not decode, for the record of its refusal:
 * each of order_no (the value's, else a key that is a valid order number), txn_no,
 * amount_cents, channel, currency and charge_ref that is present and valid by itself is filled, the
 * others are left empty (0 for the amount). Never fails; any bytes are accepted. */
void codec_salvage_payment(const void *key, size_t key_len, const void *value, size_t value_len,
                           struct codec_payment *out);

/* Encode a message value (compact JSON, fields in contract order) into buf.
 * *len receives its length without a NUL (buf is NUL-terminated when it fits).
 * The same validation as decoding applies: what we write we could read. */
enum og_status codec_encode_cancel(const char *order_no, int64_t due_ms, char *buf, size_t size,
                                   size_t *len, struct og_error *err);
/* A reminder's delay-topic message: the cancel message plus "kind":"reminder" and
 * "offset_seconds" (1..CODEC_OFFSET_MAX). */
enum og_status codec_encode_reminder(const char *order_no, int32_t offset_seconds, int64_t due_ms,
                                     char *buf, size_t size, size_t *len, struct og_error *err);
enum og_status codec_encode_payment(const struct codec_payment *p, char *buf, size_t size,
                                    size_t *len, struct og_error *err);
enum og_status codec_encode_refund(const struct codec_refund *r, char *buf, size_t size,
                                   size_t *len, struct og_error *err);

#endif
