/* libFuzzer target for the message decoder (common/codec.c).
 *
 * Input layout: byte 0 picks the decoder (bit 0: cancel or payment) and the
 * key length ((byte 0 >> 1) % 80, cut to what is there); then the key, then
 * the value. Besides "never crash, never leak, never read out of bounds"
 * (AddressSanitizer and UBSan watch that), every accepted message must obey
 * the contract, checked here:
 *   - a cancel decodes the same through the fast path for flat values and the JSON parser;
 *   - the order number is valid and equals a non-empty key;
 *   - what was decoded encodes and decodes again to the same thing;
 *   - a refusal carries a reason code and printable text only, and what
 *     codec_salvage_payment keeps of a refused payment is valid field by field. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reason(const struct og_error *err)
{
    static const char *const codes[] = {
        "too_large",    "empty",           "bad_json",     "not_object",     "missing_field",
        "bad_type",     "unknown_version", "bad_order_no", "key_mismatch",   "bad_due_at",
        "bad_txn_no",   "bad_amount",      "bad_channel",  "bad_refund_ref", "bad_outcome",
        "bad_currency", "bad_charge_ref",  "bad_kind",     "bad_offset"};
    int known = 0;

    if (err->status != OG_ERR_DECODE || err->retriable)
        abort();
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        size_t n = strlen(codes[i]);
        known |= strncmp(err->msg, codes[i], n) == 0 && err->msg[n] == ':';
    }
    if (!known)
        abort();
    for (const char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            abort();
}

static void check_key(const uint8_t *key, size_t key_len, const char *order_no)
{
    if (!gate_order_no_valid(order_no, strlen(order_no)))
        abort();
    if (key_len > 0 && (key_len != strlen(order_no) || memcmp(key, order_no, key_len) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct og_error err = {0};
    const uint8_t *key, *value;
    size_t key_len, value_len;
    char buf[1024];
    size_t len;

    if (size == 0)
        return 0;
    key_len = (size_t)(data[0] >> 1) % 80;
    if (key_len > size - 1)
        key_len = size - 1;
    key = data + 1;
    value = key + key_len;
    value_len = size - 1 - key_len;

    if ((data[0] & 1) == 0) {
        struct codec_cancel c, again, full;
        struct og_error full_err = {0};
        enum og_status st =
            codec_decode_cancel(key_len ? key : NULL, key_len, value, value_len, &c, &err);

        /* The fast path for flat values answers as the JSON parser does, byte for byte. */
        if (codec_decode_cancel_json(key_len ? key : NULL, key_len, value, value_len, &full,
                                     &full_err) != st ||
            memcmp(&c, &full, sizeof(c)) != 0 ||
            (st != OG_OK && strcmp(err.msg, full_err.msg) != 0))
            abort();
        if (st != OG_OK) {
            check_reason(&err);
            return 0;
        }
        check_key(key, key_len, c.order_no);
        /* Times the decoder accepts but the encoder cannot write (years
         * around 0000 with an offset) are refused cleanly, not mangled. */
        if ((c.reminder_offset == 0
                 ? codec_encode_cancel(c.order_no, c.due_ms, buf, sizeof(buf), &len, &err)
                 : codec_encode_reminder(c.order_no, c.reminder_offset, c.due_ms, buf, sizeof(buf),
                                         &len, &err)) == OG_OK) {
            if (codec_decode_cancel(NULL, 0, buf, len, &again, &err) != OG_OK ||
                memcmp(&c, &again, sizeof(c)) != 0)
                abort();
        } else if (err.status != OG_ERR_ARG) {
            abort();
        }
    } else {
        struct codec_payment p, again, part;
        struct codec_refund r, r_again;

        /* The same bytes as a refund result: refused with a known reason, or valid fields
         * that encode and decode to the same. */
        if (codec_decode_refund(key_len ? key : NULL, key_len, value, value_len, &r, &err) !=
            OG_OK) {
            check_reason(&err);
        } else if (!gate_txn_no_valid(r.txn_no, strlen(r.txn_no)) ||
                   !gate_txn_no_valid(r.refund_ref, strlen(r.refund_ref)) ||
                   (key_len > 0 &&
                    (key_len != strlen(r.txn_no) || memcmp(key, r.txn_no, key_len) != 0)) ||
                   codec_encode_refund(&r, buf, sizeof(buf), &len, &err) != OG_OK ||
                   codec_decode_refund(NULL, 0, buf, len, &r_again, &err) != OG_OK ||
                   memcmp(&r, &r_again, sizeof(r)) != 0) {
            abort();
        }
        if (codec_decode_payment(key_len ? key : NULL, key_len, value, value_len, &p, &err) !=
            OG_OK) {
            check_reason(&err);
            /* What is salvaged of a refused payment is valid field by field. */
            codec_salvage_payment(key_len ? key : NULL, key_len, value, value_len, &part);
            if ((part.order_no[0] && !gate_order_no_valid(part.order_no, strlen(part.order_no))) ||
                (part.txn_no[0] && !gate_txn_no_valid(part.txn_no, strlen(part.txn_no))) ||
                part.amount_cents < 0 || part.amount_cents > CODEC_AMOUNT_MAX ||
                (part.currency[0] && !gate_currency_valid(part.currency, strlen(part.currency))) ||
                (part.charge_ref[0] &&
                 !gate_charge_ref_valid(part.charge_ref, strlen(part.charge_ref))))
                abort();
            return 0;
        }
        check_key(key, key_len, p.order_no);
        if (p.amount_cents <= 0 || !gate_txn_no_valid(p.txn_no, strlen(p.txn_no)) ||
            strlen(p.channel) == 0 ||
            (p.currency[0] && !gate_currency_valid(p.currency, strlen(p.currency))) ||
            (p.charge_ref[0] && !gate_charge_ref_valid(p.charge_ref, strlen(p.charge_ref))))
            abort();
        if (codec_encode_payment(&p, buf, sizeof(buf), &len, &err) != OG_OK ||
            codec_decode_payment(NULL, 0, buf, len, &again, &err) != OG_OK ||
            memcmp(&p, &again, sizeof(p)) != 0)
            abort();
    }
    return 0;
}
