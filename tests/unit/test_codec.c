/* The message contract: what decodes, what is refused and with which reason
 * code, and that what we encode decodes to the same thing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/clock.h"
#include "common/codec.h"

/* 2026-11-30T16:00:00.000Z */
#define DUE_MS 1796054400000LL

static enum og_status cancel(const char *key, const char *value, struct codec_cancel *out,
                             struct og_error *err)
{
    og_error_clear(err);
    return codec_decode_cancel(key, key ? strlen(key) : 0, value, value ? strlen(value) : 0, out,
                               err);
}

/* Asserts that decoding fails with OG_ERR_DECODE and the given reason code. */
static void refused(const char *key, const char *value, const char *reason)
{
    struct codec_cancel c;
    struct og_error err;
    size_t n = strlen(reason);

    assert_int_equal(cancel(key, value, &c, &err), OG_ERR_DECODE);
    if (strncmp(err.msg, reason, n) != 0 || err.msg[n] != ':')
        fail_msg("value %s: expected reason %s, got \"%s\"", value, reason, err.msg);
    assert_false(err.retriable);
    /* Nothing half-decoded leaks out. */
    assert_string_equal(c.order_no, "");
    assert_int_equal(c.due_ms, 0);
}

/* The message kind: absent or "cancel" is a cancel (offset 0), "reminder" carries its offset;
 * an unknown kind, a reminder without a valid offset are refused; the reminder round-trips. */
static void test_reminder_kind(void **state)
{
    struct codec_cancel c, again;
    struct og_error err;
    char buf[256];
    size_t len = 0;

    (void)state;
    assert_int_equal(cancel("A-1",
                            "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\","
                            "\"kind\":\"reminder\",\"offset_seconds\":300}",
                            &c, &err),
                     OG_OK);
    assert_int_equal(c.reminder_offset, 300);
    assert_int_equal(c.due_ms, DUE_MS);
    assert_int_equal(cancel(NULL,
                            "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\","
                            "\"kind\":\"cancel\",\"offset_seconds\":\"ignored\"}",
                            &c, &err),
                     OG_OK);
    assert_int_equal(c.reminder_offset, 0);
    assert_int_equal(
        cancel(NULL, "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\"}", &c,
               &err),
        OG_OK);
    assert_int_equal(c.reminder_offset, 0);
    refused(
        NULL,
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"refund\"}",
        "bad_kind");
    refused(NULL, "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":7}",
            "bad_type");
    refused(
        NULL,
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"reminder\"}",
        "missing_field");
    refused(
        NULL,
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"reminder\","
        "\"offset_seconds\":0}",
        "bad_offset");
    refused(
        NULL,
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"reminder\","
        "\"offset_seconds\":31622401}",
        "bad_offset");
    refused(
        NULL,
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"reminder\","
        "\"offset_seconds\":\"60\"}",
        "bad_type");
    assert_int_equal(codec_encode_reminder("A-1", 60, DUE_MS, buf, sizeof(buf), &len, &err), OG_OK);
    assert_int_equal(codec_decode_cancel("A-1", 3, buf, len, &again, &err), OG_OK);
    assert_int_equal(again.reminder_offset, 60);
    assert_int_equal(again.due_ms, DUE_MS);
    assert_string_equal(again.order_no, "A-1");
    assert_int_equal(codec_encode_reminder("A-1", 0, DUE_MS, buf, sizeof(buf), &len, &err),
                     OG_ERR_ARG);
}

static void test_cancel_valid(void **state)
{
    struct codec_cancel c;
    struct og_error err;

    (void)state;
    assert_int_equal(
        cancel("A-1001",
               "{\"v\":1,\"order_no\":\"A-1001\",\"due_at\":\"2026-11-30T16:00:00.000Z\"}", &c,
               &err),
        OG_OK);
    assert_string_equal(c.order_no, "A-1001");
    assert_int_equal(c.due_ms, DUE_MS);

    /* No key, an empty key, whitespace, other field order, extra fields of any type. */
    assert_int_equal(cancel(NULL,
                            " { \"due_at\" : \"2026-11-30T17:00:00.250+01:00\", \"x\": [1, {\"y\": "
                            "null}], \"order_no\":\"o.1_2:3\", \"v\" : 1, \"trace\":\"abc\" }\n",
                            &c, &err),
                     OG_OK);
    assert_string_equal(c.order_no, "o.1_2:3");
    assert_int_equal(c.due_ms, DUE_MS + 250);
    assert_int_equal(
        cancel("", "{\"v\":1,\"order_no\":\"B\",\"due_at\":\"2026-11-30T16:00:00Z\"}", &c, &err),
        OG_OK);
    assert_int_equal(c.due_ms, DUE_MS);

    /* The longest valid order number. */
    char value[256], order[GATE_ORDER_NO_MAX + 1];
    memset(order, '9', GATE_ORDER_NO_MAX);
    order[GATE_ORDER_NO_MAX] = '\0';
    snprintf(value, sizeof(value), "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}", order,
             "2026-11-30T16:00:00.123456789Z");
    assert_int_equal(cancel(order, value, &c, &err), OG_OK);
    assert_string_equal(c.order_no, order);
    assert_int_equal(c.due_ms, DUE_MS + 123);
}

static void test_cancel_refused(void **state)
{
    char big[CODEC_VALUE_MAX + 2];

    (void)state;
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    memcpy(big, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}", 54);
    refused(NULL, big, "too_large");
    refused(NULL, "", "empty");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\"", "bad_json");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"} x", "bad_json");
    refused(NULL,
            "{\"v\":1,\"order_no\":\"A\",\"order_no\":\"B\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_json");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\\u0000B\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_json");
    refused(NULL, "\xff\xfe{}", "bad_json");
    refused(NULL, "[1,2]", "not_object");
    refused(NULL, "{\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}", "missing_field");
    refused(NULL, "{\"v\":\"1\",\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_type");
    refused(NULL, "{\"v\":1.0,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}", "bad_type");
    refused(NULL, "{\"v\":2,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "unknown_version");
    refused(NULL, "{\"v\":0,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "unknown_version");
    refused(NULL, "{\"v\":1,\"due_at\":\"2026-11-30T16:00:00Z\"}", "missing_field");
    refused(NULL, "{\"v\":1,\"order_no\":7,\"due_at\":\"2026-11-30T16:00:00Z\"}", "bad_type");
    refused(NULL, "{\"v\":1,\"order_no\":null,\"due_at\":\"2026-11-30T16:00:00Z\"}", "bad_type");
    refused(NULL, "{\"v\":1,\"order_no\":\"\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_order_no");
    refused(NULL, "{\"v\":1,\"order_no\":\"A B\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_order_no");
    refused(NULL,
            "{\"v\":1,\"order_no\":\"A'; drop table x;--\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_order_no");
    refused(NULL, "{\"v\":1,\"order_no\":\"\\u00e9t\\u00e9\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_order_no");
    refused(NULL,
            "{\"v\":1,\"order_no\":"
            "\"12345678901234567890123456789012345678901234567890123456789012345\","
            "\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "bad_order_no");
    refused("B", "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "key_mismatch");
    refused("AA", "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
            "key_mismatch");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\"}", "missing_field");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":1796054400000}", "bad_type");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00\"}", "bad_due_at");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-02-30T16:00:00Z\"}", "bad_due_at");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30 16:00:00Z\"}", "bad_due_at");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"tomorrow\"}", "bad_due_at");
    refused(NULL, "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00.000000000000Z\"}",
            "bad_due_at");
}

static void test_key_binary(void **state)
{
    static const char key[] = {'A', '\0', 'B'};
    static const char value[] = "{\"v\":1,\"order_no\":\"A\",\"due_at\":\"2026-11-30T16:00:00Z\"}";
    struct codec_cancel c;
    struct og_error err = {0};

    (void)state;
    /* A key with a NUL inside never matches, and the reason stays printable. */
    assert_int_equal(codec_decode_cancel(key, sizeof(key), value, strlen(value), &c, &err),
                     OG_ERR_DECODE);
    assert_true(strncmp(err.msg, "key_mismatch:", 13) == 0);
    for (const char *p = err.msg; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
    /* A value with a NUL byte in the middle is not JSON. */
    static const char nul_value[] =
        "{\"v\":1,\"order_no\":\"A\",\0\"due_at\":\"2026-11-30T16:00:00Z\"}";
    assert_int_equal(codec_decode_cancel(NULL, 0, nul_value, sizeof(nul_value) - 1, &c, &err),
                     OG_ERR_DECODE);
    /* NULL value with a length of 0 is "empty", not a crash. */
    assert_int_equal(codec_decode_cancel(NULL, 0, NULL, 0, &c, &err), OG_ERR_DECODE);
    assert_true(strncmp(err.msg, "empty:", 6) == 0);
}

static void test_cancel_roundtrip(void **state)
{
    static const int64_t dues[] = {DUE_MS, DUE_MS + 1, 0, 951782400999LL /* 2000-02-29 */,
                                   253402300799999LL};
    char buf[256];
    size_t len;
    struct codec_cancel c;
    struct og_error err = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(dues) / sizeof(dues[0]); i++) {
        assert_int_equal(codec_encode_cancel("R-42", dues[i], buf, sizeof(buf), &len, &err), OG_OK);
        assert_int_equal(len, strlen(buf));
        assert_int_equal(codec_decode_cancel("R-42", 4, buf, len, &c, &err), OG_OK);
        assert_string_equal(c.order_no, "R-42");
        assert_int_equal(c.due_ms, dues[i]);
    }
    assert_int_equal(codec_encode_cancel("R-42", DUE_MS, buf, sizeof(buf), &len, &err), OG_OK);
    assert_string_equal(buf,
                        "{\"v\":1,\"order_no\":\"R-42\",\"due_at\":\"2026-11-30T16:00:00.000Z\"}");
    /* Invalid input is refused before anything is written. */
    assert_int_equal(codec_encode_cancel("bad key", DUE_MS, buf, sizeof(buf), &len, &err),
                     OG_ERR_ARG);
    assert_int_equal(codec_encode_cancel(NULL, DUE_MS, buf, sizeof(buf), &len, &err), OG_ERR_ARG);
    assert_int_equal(codec_encode_cancel("R", 253402300800000LL, buf, sizeof(buf), &len, &err),
                     OG_ERR_ARG);
    assert_int_equal(codec_encode_cancel("R", DUE_MS, buf, 20, &len, &err), OG_ERR_ARG);
    assert_int_equal(len, 0);
}

/* Both ways of decoding a cancel give the same answer: status, every byte of out, the reason. */
static void same_answer(const char *key, size_t key_len, const char *value, size_t value_len)
{
    struct codec_cancel fast, full;
    struct og_error fast_err = {0}, full_err = {0};
    enum og_status fast_st = codec_decode_cancel(key, key_len, value, value_len, &fast, &fast_err);
    enum og_status full_st =
        codec_decode_cancel_json(key, key_len, value, value_len, &full, &full_err);

    if (fast_st != full_st || memcmp(&fast, &full, sizeof(fast)) != 0 ||
        strcmp(fast_err.msg, full_err.msg) != 0)
        fail_msg("value [%.*s] key [%.*s]: %d \"%s\" against the JSON parser's %d \"%s\"",
                 (int)value_len, value, (int)key_len, key ? key : "", (int)fast_st, fast_err.msg,
                 (int)full_st, full_err.msg);
}

/* The fast path for flat values against the JSON parser: forms it reads and forms it leaves to the
 * parser, and every value one edit away from them (a byte deleted, doubled, or replaced by one that
 * matters to JSON), with and without a key. */
static void test_cancel_fast_path_same_answer(void **state)
{
    static const char *const values[] = {
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\"}",
        " {\t\"due_at\" : \"2026-11-30T16:00:00+01:00\",\r\n\"order_no\":\"A-1\", \"v\" :1 } \n",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"reminder\","
        "\"offset_seconds\":300}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"kind\":\"cancel\","
        "\"offset_seconds\":-0,\"extra\":\"\",\"n\":123456789012345678}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"x\":1.5,\"y\":null,"
        "\"z\":[1],\"w\":{\"a\":true}}",
        "{\"v\":1,\"order_no\":\"A\\u002d1\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"v\":1}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"\\u0076\":1}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\",\"\xc3\xa9\":"
        "\"\xc3\xa9\"}",
        "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10,"
        "\"k\":11,\"l\":12,\"m\":13,\"n\":14,\"v\":1,\"order_no\":\"A-1\",\"due_at\":"
        "\"2026-11-30T16:00:00Z\"}",
        "{\"v\":10000000000000000000,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":01,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{}",
        "[]",
        "",
    };
    static const char edits[] = {'"', '\\', ',', ':', '{', '}', '[',  ' ',    '\n',  '0',
                                 '1', '9',  '-', '.', 'e', 'x', '\0', '\x7f', '\xc3'};
    char buf[512];

    (void)state;
    for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
        size_t len = strlen(values[v]);

        assert_true(len + 1 < sizeof(buf));
        same_answer(NULL, 0, values[v], len);
        same_answer("A-1", 3, values[v], len);
        same_answer("A-2", 3, values[v], len);
        for (size_t at = 0; at < len; at++) {
            /* deleted */
            memcpy(buf, values[v], at);
            memcpy(buf + at, values[v] + at + 1, len - at - 1);
            same_answer(NULL, 0, buf, len - 1);
            same_answer("A-1", 3, buf, len - 1);
            /* doubled */
            memcpy(buf, values[v], at + 1);
            memcpy(buf + at + 1, values[v] + at, len - at);
            same_answer(NULL, 0, buf, len + 1);
            /* replaced */
            for (size_t k = 0; k < sizeof(edits); k++) {
                memcpy(buf, values[v], len);
                buf[at] = edits[k];
                same_answer(NULL, 0, buf, len);
                same_answer("A-1", 3, buf, len);
            }
        }
    }
}

/* jansson's allocations, counted: the fast path builds no tree. */
static size_t json_allocs;

static void *counting_malloc(size_t size)
{
    json_allocs++;
    return malloc(size);
}

/* A canonical cancel or reminder, the form every producer of ours writes, is decoded without
 * jansson (no allocation at all); one with an escape still goes through it, and decodes. */
static void test_cancel_fast_path_taken(void **state)
{
    static const char *const flat[] = {
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\"}",
        "{\"v\":1,\"order_no\":\"A-1\",\"due_at\":\"2026-11-30T16:00:00.000Z\",\"kind\":"
        "\"reminder\",\"offset_seconds\":300}",
    };
    const char *escaped =
        "{\"v\":1,\"order_no\":\"A\\u002d1\",\"due_at\":\"2026-11-30T16:00:00Z\"}";
    struct codec_cancel c;
    struct og_error err = {0};

    (void)state;
    json_set_alloc_funcs(counting_malloc, free);
    for (size_t i = 0; i < sizeof(flat) / sizeof(flat[0]); i++) {
        json_allocs = 0;
        assert_int_equal(codec_decode_cancel("A-1", 3, flat[i], strlen(flat[i]), &c, &err), OG_OK);
        assert_int_equal(c.due_ms, DUE_MS);
        assert_int_equal(json_allocs, 0);
    }
    json_allocs = 0;
    assert_int_equal(codec_decode_cancel("A-1", 3, escaped, strlen(escaped), &c, &err), OG_OK);
    assert_string_equal(c.order_no, "A-1");
    assert_true(json_allocs > 0);
    json_set_alloc_funcs(malloc, free);
}

static enum og_status payment(const char *value, struct codec_payment *out, struct og_error *err)
{
    og_error_clear(err);
    return codec_decode_payment("P-1", 3, value, strlen(value), out, err);
}

static void payment_refused(const char *value, const char *reason)
{
    struct codec_payment p;
    struct og_error err;
    size_t n = strlen(reason);

    assert_int_equal(payment(value, &p, &err), OG_ERR_DECODE);
    if (strncmp(err.msg, reason, n) != 0 || err.msg[n] != ':')
        fail_msg("value %s: expected reason %s, got \"%s\"", value, reason, err.msg);
    assert_int_equal(p.amount_cents, 0);
}

static void test_payment(void **state)
{
    struct codec_payment p, q;
    struct og_error err;
    char buf[512];
    size_t len;

    (void)state;
    assert_int_equal(
        payment("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T-9\",\"amount_cents\":1999,"
                "\"channel\":\"Credit Card\",\"extra\":true}",
                &p, &err),
        OG_OK);
    assert_string_equal(p.order_no, "P-1");
    assert_string_equal(p.txn_no, "T-9");
    assert_int_equal(p.amount_cents, 1999);
    assert_string_equal(p.channel, "Credit Card");

    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_OK);
    assert_int_equal(codec_decode_payment("P-1", 3, buf, len, &q, &err), OG_OK);
    assert_memory_equal(&p, &q, sizeof(p));

    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"amount_cents\":1,\"channel\":\"c\"}",
                    "missing_field");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T 9\",\"amount_cents\":1,"
                    "\"channel\":\"c\"}",
                    "bad_txn_no");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":0,"
                    "\"channel\":\"c\"}",
                    "bad_amount");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":-5,"
                    "\"channel\":\"c\"}",
                    "bad_amount");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":"
                    "1000000000000001,\"channel\":\"c\"}",
                    "bad_amount");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":19.99,"
                    "\"channel\":\"c\"}",
                    "bad_type");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":\"5\","
                    "\"channel\":\"c\"}",
                    "bad_type");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":"
                    "99999999999999999999999,\"channel\":\"c\"}",
                    "bad_json");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"\"}",
                    "bad_channel");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"a\\nb\"}",
                    "bad_channel");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5}",
                    "missing_field");
    payment_refused("{\"v\":1,\"order_no\":\"P-2\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\"}",
                    "key_mismatch");
    payment_refused("{\"v\":3,\"order_no\":\"P-1\"}", "unknown_version");

    strcpy(p.channel, "");
    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_ERR_ARG);
}

/* currency and charge_ref are optional: absent they are "", present they must be valid, and
 * a bad one refuses the message whole (dead-lettered with its record, like any bad field). */
static void test_payment_currency_and_charge(void **state)
{
    struct codec_payment p, q;
    struct og_error err;
    char buf[512];
    size_t len;

    (void)state;
    assert_int_equal(
        payment("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T-9\",\"amount_cents\":1250,"
                "\"channel\":\"card\",\"currency\":\"EUR\",\"charge_ref\":\"pi_3N.x:1\"}",
                &p, &err),
        OG_OK);
    assert_string_equal(p.currency, "EUR");
    assert_string_equal(p.charge_ref, "pi_3N.x:1");
    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_OK);
    assert_non_null(strstr(buf, "\"currency\":\"EUR\""));
    assert_non_null(strstr(buf, "\"charge_ref\":\"pi_3N.x:1\""));
    assert_int_equal(codec_decode_payment("P-1", 3, buf, len, &q, &err), OG_OK);
    assert_memory_equal(&p, &q, sizeof(p));

    /* Without them: "", and the encoding carries neither. */
    assert_int_equal(payment("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T-9\",\"amount_cents\":5,"
                             "\"channel\":\"card\"}",
                             &p, &err),
                     OG_OK);
    assert_string_equal(p.currency, "");
    assert_string_equal(p.charge_ref, "");
    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_OK);
    assert_null(strstr(buf, "currency"));
    assert_null(strstr(buf, "charge_ref"));

    static const char *const bad_currency[] = {"\"eur\"", "\"EURO\"", "\"EU\"",    "\"\"",
                                               "\"E1R\"", "\"E R\"",  "\"\u20ac\""};
    for (size_t i = 0; i < sizeof(bad_currency) / sizeof(bad_currency[0]); i++) {
        char value[256];
        snprintf(value, sizeof(value),
                 "{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                 "\"channel\":\"c\",\"currency\":%s}",
                 bad_currency[i]);
        payment_refused(value, "bad_currency");
    }
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\",\"currency\":978}",
                    "bad_type");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\",\"currency\":null}",
                    "bad_type");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\",\"charge_ref\":\"c 1\"}",
                    "bad_charge_ref");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\",\"charge_ref\":\"\"}",
                    "bad_charge_ref");
    payment_refused("{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                    "\"channel\":\"c\",\"charge_ref\":[]}",
                    "bad_type");

    /* What is not valid is not encoded either. */
    strcpy(p.currency, "eur");
    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_ERR_ARG);
    strcpy(p.currency, "");
    strcpy(p.charge_ref, "c 1");
    assert_int_equal(codec_encode_payment(&p, buf, sizeof(buf), &len, &err), OG_ERR_ARG);

    /* Salvage keeps a valid currency and charge reference of a refused message. */
    const char *refused = "{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                          "\"channel\":\"c\",\"currency\":\"JPY\",\"charge_ref\":\"ch-1\",\"v\":2}";
    codec_salvage_payment("P-1", 3, refused, strlen(refused), &p);
    assert_string_equal(p.currency, "");
    const char *kept = "{\"v\":9,\"order_no\":\"P-1\",\"txn_no\":\"T\",\"amount_cents\":5,"
                       "\"channel\":\"c\",\"currency\":\"JPY\",\"charge_ref\":\"ch-1\"}";
    codec_salvage_payment("P-1", 3, kept, strlen(kept), &p);
    assert_string_equal(p.currency, "JPY");
    assert_string_equal(p.charge_ref, "ch-1");
    const char *bad = "{\"v\":1,\"currency\":\"jpy\",\"charge_ref\":\"c 1\"}";
    codec_salvage_payment("P-1", 3, bad, strlen(bad), &p);
    assert_string_equal(p.currency, "");
    assert_string_equal(p.charge_ref, "");
}

/* A payment that did not decode: what is valid on its own is kept for the
 * record of its refusal, the rest is left empty. */
static void test_payment_salvage(void **state)
{
    struct codec_payment p;
    static const char binary[] = {'{', 0, '\x01', '\xff', '}'};
    const char *zero = "{\"v\":1,\"order_no\":\"P-1\",\"txn_no\":\"T-9\",\"amount_cents\":0,"
                       "\"channel\":\"card\"}";
    const char *partly = "{\"v\":7,\"order_no\":\"bad no\",\"txn_no\":\"T 9\",\"amount_cents\":"
                         "\"5\",\"channel\":\"web\"}";

    (void)state;
    codec_salvage_payment("P-1", 3, zero, strlen(zero), &p);
    assert_string_equal(p.order_no, "P-1");
    assert_string_equal(p.txn_no, "T-9");
    assert_int_equal(p.amount_cents, 0);
    assert_string_equal(p.channel, "card");

    /* A bad order number in the value: the key stands in when it is one. */
    codec_salvage_payment("K-2", 3, partly, strlen(partly), &p);
    assert_string_equal(p.order_no, "K-2");
    assert_string_equal(p.txn_no, "");
    assert_int_equal(p.amount_cents, 0);
    assert_string_equal(p.channel, "web");

    codec_salvage_payment("k y", 3, binary, sizeof(binary), &p);
    assert_string_equal(p.order_no, "");
    assert_string_equal(p.txn_no, "");
    codec_salvage_payment(NULL, 0, NULL, 0, &p);
    assert_string_equal(p.order_no, "");
    codec_salvage_payment(NULL, 0, "[1,2]", 5, &p);
    assert_string_equal(p.txn_no, "");
}

static void refund_refused(const char *key, const char *value, const char *reason)
{
    struct codec_refund r;
    struct og_error err = {0};
    size_t n = strlen(reason);

    assert_int_equal(
        codec_decode_refund(key, key ? strlen(key) : 0, value, strlen(value), &r, &err),
        OG_ERR_DECODE);
    if (strncmp(err.msg, reason, n) != 0 || err.msg[n] != ':')
        fail_msg("value %s: expected reason %s, got \"%s\"", value, reason, err.msg);
    assert_string_equal(r.txn_no, "");
}

static void test_refund(void **state)
{
    const char *ok = "{\"v\":1,\"txn_no\":\"T-9\",\"refund_ref\":\"R-1\",\"outcome\":\"failed\","
                     "\"note\":\"ignored\"}";
    struct codec_refund r, q;
    struct og_error err = {0};
    char buf[512];
    size_t len;

    (void)state;
    assert_int_equal(codec_decode_refund("T-9", 3, ok, strlen(ok), &r, &err), OG_OK);
    assert_string_equal(r.txn_no, "T-9");
    assert_string_equal(r.refund_ref, "R-1");
    assert_false(r.succeeded);
    assert_int_equal(codec_encode_refund(&r, buf, sizeof(buf), &len, &err), OG_OK);
    assert_string_equal(buf, "{\"v\":1,\"txn_no\":\"T-9\",\"refund_ref\":\"R-1\",\"outcome\":"
                             "\"failed\"}");
    assert_int_equal(codec_decode_refund(NULL, 0, buf, len, &q, &err), OG_OK);
    assert_memory_equal(&r, &q, sizeof(r));
    r.succeeded = true;
    assert_int_equal(codec_encode_refund(&r, buf, sizeof(buf), &len, &err), OG_OK);
    assert_int_equal(codec_decode_refund(NULL, 0, buf, len, &q, &err), OG_OK);
    assert_true(q.succeeded);
    assert_int_equal(codec_encode_refund(&r, buf, 20, &len, &err), OG_ERR_ARG);

    refund_refused(NULL, "{\"v\":1,\"refund_ref\":\"R\",\"outcome\":\"failed\"}", "missing_field");
    refund_refused(NULL, "{\"v\":1,\"txn_no\":\"T 1\",\"refund_ref\":\"R\",\"outcome\":\"failed\"}",
                   "bad_txn_no");
    refund_refused(NULL, "{\"v\":1,\"txn_no\":\"T\",\"refund_ref\":\"\",\"outcome\":\"failed\"}",
                   "bad_refund_ref");
    refund_refused(NULL, "{\"v\":1,\"txn_no\":\"T\",\"refund_ref\":\"R\",\"outcome\":\"Failed\"}",
                   "bad_outcome");
    refund_refused(NULL, "{\"v\":1,\"txn_no\":\"T\",\"refund_ref\":\"R\",\"outcome\":true}",
                   "bad_type");
    refund_refused("T-2", "{\"v\":1,\"txn_no\":\"T\",\"refund_ref\":\"R\",\"outcome\":\"failed\"}",
                   "key_mismatch");
    refund_refused(NULL, "{\"v\":2,\"txn_no\":\"T\",\"refund_ref\":\"R\",\"outcome\":\"failed\"}",
                   "unknown_version");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_valid),
        cmocka_unit_test(test_cancel_refused),
        cmocka_unit_test(test_reminder_kind),
        cmocka_unit_test(test_key_binary),
        cmocka_unit_test(test_cancel_roundtrip),
        cmocka_unit_test(test_cancel_fast_path_same_answer),
        cmocka_unit_test(test_cancel_fast_path_taken),
        cmocka_unit_test(test_payment),
        cmocka_unit_test(test_payment_currency_and_charge),
        cmocka_unit_test(test_payment_salvage),
        cmocka_unit_test(test_refund),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
