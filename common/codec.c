#include "common/codec.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"

/* Copies at most 64 bytes of untrusted input into buf with every byte that is
 * not printable ASCII replaced, so a reason text never carries control bytes
 * or broken UTF-8 into logs and headers. */
static const char *codec_printable(char *buf, size_t size, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t n = len < 64 ? len : 64;
    size_t o = 0;

    for (size_t i = 0; i < n && o + 1 < size; i++)
        buf[o++] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'') ? (char)p[i] : '?';
    if (len > n && o + 3 < size) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static enum og_status codec_fail(struct og_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum og_status codec_fail(struct og_error *err, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return OG_ERR_DECODE;
    err->status = OG_ERR_DECODE;
    err->retriable = false; /* the same bytes will fail the same way */
    err->sqlstate[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return OG_ERR_DECODE;
}

/* Parses the value into a JSON object and checks the version field.
 * On OG_OK the caller owns *root. */
static enum og_status codec_open(const void *value, size_t value_len, json_t **root,
                                 struct og_error *err)
{
    json_error_t jerr;
    json_t *v;
    json_t *obj;

    *root = NULL;
    if (value_len > CODEC_VALUE_MAX)
        return codec_fail(err, "too_large: %zu bytes (limit %d)", value_len, CODEC_VALUE_MAX);
    if (value == NULL || value_len == 0)
        return codec_fail(err, "empty: the message has no value");
    /* Duplicate keys are refused: {"order_no":"a","order_no":"b"} has no
     * single meaning, and different readers would pick different ones. */
    obj = json_loadb(value, value_len, JSON_REJECT_DUPLICATES, &jerr);
    if (obj == NULL) {
        char text[sizeof(jerr.text) + 1];
        codec_printable(text, sizeof(text), jerr.text, strlen(jerr.text));
        return codec_fail(err, "bad_json: %s at byte %d", text, jerr.position);
    }
    if (!json_is_object(obj)) {
        json_decref(obj);
        return codec_fail(err, "not_object: the value must be a JSON object");
    }
    v = json_object_get(obj, "v");
    if (v == NULL) {
        json_decref(obj);
        return codec_fail(err, "missing_field: v");
    }
    if (!json_is_integer(v)) {
        json_decref(obj);
        return codec_fail(err, "bad_type: v must be an integer");
    }
    if (json_integer_value(v) != CODEC_VERSION) {
        long long ver = json_integer_value(v);
        json_decref(obj);
        return codec_fail(err, "unknown_version: v=%lld (this build reads v=%d)", ver,
                          CODEC_VERSION);
    }
    *root = obj;
    return OG_OK;
}

/* Fetches a string member; *s points into root (valid while root lives).
 * *s and *len are set on every path (NULL, 0 on failure), which also lets
 * gcc -O3 see that callers never read them uninitialised. */
static enum og_status codec_get_string(json_t *root, const char *name, const char **s, size_t *len,
                                       struct og_error *err)
{
    json_t *f = json_object_get(root, name);

    *s = NULL;
    *len = 0;
    if (f == NULL)
        return codec_fail(err, "missing_field: %s", name);
    if (!json_is_string(f))
        return codec_fail(err, "bad_type: %s must be a string", name);
    *s = json_string_value(f);
    *len = json_string_length(f);
    return OG_OK;
}

/* A string field that is an identifier by the gate's rule valid() (1..max characters of
 * A-Z a-z 0-9 . _ : -; out has room for max + 1), refused with reason code `code`; when key is
 * given (not NULL, not empty: some clients cannot send a null key), it must equal the field. */
static enum og_status codec_get_id(json_t *root, const char *field,
                                   int (*valid)(const char *, size_t), int max, const char *code,
                                   const void *key, size_t key_len, char *out, struct og_error *err)
{
    char shown[80], shown_key[80];
    const char *s;
    size_t len;
    enum og_status st = codec_get_string(root, field, &s, &len, err);

    if (st != OG_OK)
        return st;
    if (!valid(s, len))
        return codec_fail(err, "%s: '%s' (1 to %d of A-Z a-z 0-9 . _ : -)", code,
                          codec_printable(shown, sizeof(shown), s, len), max);
    if (key != NULL && key_len > 0 && (key_len != len || memcmp(key, s, len) != 0))
        return codec_fail(err, "key_mismatch: key '%s' differs from %s '%s'",
                          codec_printable(shown_key, sizeof(shown_key), key, key_len), field,
                          codec_printable(shown, sizeof(shown), s, len));
    memcpy(out, s, len);
    out[len] = '\0';
    return OG_OK;
}

static enum og_status codec_get_order_no(json_t *root, const void *key, size_t key_len, char *out,
                                         struct og_error *err)
{
    return codec_get_id(root, "order_no", gate_order_no_valid, GATE_ORDER_NO_MAX, "bad_order_no",
                        key, key_len, out, err);
}

/* The delay-topic message's kind: "kind" absent or "cancel" is a cancel (*offset 0: every message
 * written before reminders existed has no kind); "reminder" needs "offset_seconds", an integer
 * 1..CODEC_OFFSET_MAX, into *offset. Anything else is refused: a kind this build does not know
 * must not be taken for a cancel. */
static enum og_status codec_get_kind(json_t *root, int32_t *offset, struct og_error *err)
{
    char shown[80];
    json_t *off;
    const char *s;
    size_t len;
    enum og_status st;

    *offset = 0;
    if (json_object_get(root, "kind") == NULL)
        return OG_OK;
    st = codec_get_string(root, "kind", &s, &len, err);
    if (st != OG_OK)
        return st;
    if (len == 6 && memcmp(s, "cancel", 6) == 0)
        return OG_OK;
    if (len != 8 || memcmp(s, "reminder", 8) != 0)
        return codec_fail(err, "bad_kind: '%s' (cancel or reminder)",
                          codec_printable(shown, sizeof(shown), s, len));
    off = json_object_get(root, "offset_seconds");
    if (off == NULL)
        return codec_fail(err, "missing_field: offset_seconds");
    if (!json_is_integer(off))
        return codec_fail(err, "bad_type: offset_seconds must be an integer");
    if (json_integer_value(off) < 1 || json_integer_value(off) > CODEC_OFFSET_MAX)
        return codec_fail(err, "bad_offset: %lld (must be 1 to %d)",
                          (long long)json_integer_value(off), CODEC_OFFSET_MAX);
    *offset = (int32_t)json_integer_value(off);
    return OG_OK;
}

/* The flat fast path of codec_decode_cancel. A delay-topic value is nearly always one flat object
 * of string and integer members, as codec_encode_cancel writes it, and building jansson's tree for
 * it (a hash table, a copy of every key and string, all freed again) was most of the consumer's own
 * CPU per message. codec_flat_scan reads such a value in one pass, with no allocation, and
 * codec_flat_cancel takes a cancel from it only when it is valid. Anything else goes through
 * jansson as before: a form the scan does not read (an escape, a byte outside printable ASCII in a
 * string, a nested value, a real, true, false or null, more than CODEC_FLAT_MAX members, a
 * duplicate key, malformed JSON) and every value that would be refused, so that jansson's path
 * words each refusal as it always did. What the scan accepts, jansson reads to the same members,
 * so both paths give the same answer for every input (tests/unit/test_codec.c and the fuzzer
 * compare them). */
#define CODEC_FLAT_MAX 16

struct codec_flat_member {
    const char *name; /* its bytes as decoded: the scan takes no escapes */
    size_t name_len;
    bool is_int;
    const char *s; /* a string's bytes; NULL for an integer */
    size_t len;
    long long i; /* an integer's value */
};

struct codec_flat {
    struct codec_flat_member m[CODEC_FLAT_MAX];
    size_t n;
};

static const char *codec_flat_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A string of printable ASCII without escapes, p at its opening quote: past its closing quote, or
 * NULL for anything else. */
static const char *codec_flat_string(const char *p, const char *end, const char **s, size_t *len)
{
    const char *q;

    if (p >= end || *p != '"')
        return NULL;
    for (q = ++p; q < end && *q != '"'; q++)
        if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e || *q == '\\')
            return NULL;
    if (q >= end)
        return NULL;
    *s = p;
    *len = (size_t)(q - p);
    return q + 1;
}

/* An integer in JSON's form, -?(0|[1-9][0-9]*), of at most 18 digits (so it fits a long long
 * without a check) and not the start of a real: past it, or NULL. */
static const char *codec_flat_int(const char *p, const char *end, long long *v)
{
    bool neg = p < end && *p == '-';
    long long x = 0;
    int digits = 0;

    p += neg;
    if (p >= end || *p < '0' || *p > '9')
        return NULL;
    if (*p == '0') {
        p++;
    } else {
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (++digits > 18)
                return NULL;
            x = x * 10 + (*p - '0');
        }
    }
    if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E'))
        return NULL;
    *v = neg ? -x : x;
    return p;
}

/* The whole value as one flat object (see above); false when it is not one in the form read. */
static bool codec_flat_scan(const char *p, size_t size, struct codec_flat *f)
{
    const char *end = p + size;

    f->n = 0;
    p = codec_flat_space(p, end);
    if (p >= end || *p != '{')
        return false;
    p = codec_flat_space(p + 1, end);
    if (p < end && *p == '}')
        return codec_flat_space(p + 1, end) == end;
    for (;;) {
        struct codec_flat_member *m = &f->m[f->n];

        if (f->n == CODEC_FLAT_MAX)
            return false;
        p = codec_flat_string(p, end, &m->name, &m->name_len);
        if (p == NULL)
            return false;
        for (size_t i = 0; i < f->n; i++)
            if (f->m[i].name_len == m->name_len && memcmp(f->m[i].name, m->name, m->name_len) == 0)
                return false; /* a duplicate: jansson refuses it */
        p = codec_flat_space(p, end);
        if (p >= end || *p != ':')
            return false;
        p = codec_flat_space(p + 1, end);
        m->is_int = p < end && *p != '"';
        m->s = NULL;
        m->len = 0;
        m->i = 0;
        p = m->is_int ? codec_flat_int(p, end, &m->i) : codec_flat_string(p, end, &m->s, &m->len);
        if (p == NULL)
            return false;
        f->n++;
        p = codec_flat_space(p, end);
        if (p < end && *p == ',') {
            p = codec_flat_space(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            return codec_flat_space(p + 1, end) == end;
        return false;
    }
}

static const struct codec_flat_member *codec_flat_get(const struct codec_flat *f, const char *name,
                                                      size_t len)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->m[i].name_len == len && memcmp(f->m[i].name, name, len) == 0)
            return &f->m[i];
    return NULL;
}

/* A valid cancel from a scanned value, by the rules of the jansson path below; false for anything
 * that path would refuse (it then says why). out is zeroed by the caller. */
static bool codec_flat_cancel(const void *key, size_t key_len, const struct codec_flat *f,
                              struct codec_cancel *out)
{
    const struct codec_flat_member *v = codec_flat_get(f, "v", 1);
    const struct codec_flat_member *no = codec_flat_get(f, "order_no", 8);
    const struct codec_flat_member *due = codec_flat_get(f, "due_at", 6);
    const struct codec_flat_member *kind = codec_flat_get(f, "kind", 4);
    const struct codec_flat_member *off;
    int64_t ms;

    if (v == NULL || !v->is_int || v->i != CODEC_VERSION)
        return false;
    if (no == NULL || no->is_int || !gate_order_no_valid(no->s, no->len))
        return false;
    if (key != NULL && key_len > 0 && (key_len != no->len || memcmp(key, no->s, no->len) != 0))
        return false;
    if (due == NULL || due->is_int || due->len > CODEC_DUE_AT_MAX ||
        clock_parse_iso(due->s, due->len, &ms) != 0)
        return false;
    if (kind != NULL) {
        if (kind->is_int)
            return false;
        if (kind->len == 8 && memcmp(kind->s, "reminder", 8) == 0) {
            off = codec_flat_get(f, "offset_seconds", 14);
            if (off == NULL || !off->is_int || off->i < 1 || off->i > CODEC_OFFSET_MAX)
                return false;
            out->reminder_offset = (int32_t)off->i;
        } else if (kind->len != 6 || memcmp(kind->s, "cancel", 6) != 0) {
            return false;
        }
    }
    memcpy(out->order_no, no->s, no->len);
    out->order_no[no->len] = '\0';
    out->due_ms = ms;
    return true;
}

enum og_status codec_decode_cancel(const void *key, size_t key_len, const void *value,
                                   size_t value_len, struct codec_cancel *out, struct og_error *err)
{
    struct codec_flat flat;

    memset(out, 0, sizeof(*out));
    if (value != NULL && value_len > 0 && value_len <= CODEC_VALUE_MAX &&
        codec_flat_scan(value, value_len, &flat) && codec_flat_cancel(key, key_len, &flat, out))
        return OG_OK;
    return codec_decode_cancel_json(key, key_len, value, value_len, out, err);
}

enum og_status codec_decode_cancel_json(const void *key, size_t key_len, const void *value,
                                        size_t value_len, struct codec_cancel *out,
                                        struct og_error *err)
{
    char shown[80];
    json_t *root = NULL;
    const char *due;
    size_t due_len;
    int64_t ms;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    st = codec_open(value, value_len, &root, err);
    if (st != OG_OK)
        return st;
    st = codec_get_order_no(root, key, key_len, out->order_no, err);
    if (st != OG_OK)
        goto out;
    st = codec_get_string(root, "due_at", &due, &due_len, err);
    if (st != OG_OK)
        goto out;
    if (due_len > CODEC_DUE_AT_MAX || clock_parse_iso(due, due_len, &ms) != 0) {
        st = codec_fail(err, "bad_due_at: '%s' is not an RFC 3339 time with a zone",
                        codec_printable(shown, sizeof(shown), due, due_len));
        goto out;
    }
    out->due_ms = ms;
    st = codec_get_kind(root, &out->reminder_offset, err);
out:
    json_decref(root);
    if (st != OG_OK)
        memset(out, 0, sizeof(*out));
    return st;
}

static int codec_channel_valid(const char *s, size_t len)
{
    if (len == 0 || len > CODEC_CHANNEL_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

/* An optional string field: absent leaves out "" ; present, it must be a string that valid()
 * accepts (out has room for it), else refused with reason code `code` (what says the rule). */
static enum og_status codec_get_optional(json_t *root, const char *field,
                                         int (*valid)(const char *, size_t), const char *code,
                                         const char *what, char *out, struct og_error *err)
{
    char shown[80];
    const char *s;
    size_t len;
    enum og_status st;

    if (json_object_get(root, field) == NULL)
        return OG_OK;
    st = codec_get_string(root, field, &s, &len, err);
    if (st != OG_OK)
        return st;
    if (!valid(s, len))
        return codec_fail(err, "%s: '%s' (%s)", code, codec_printable(shown, sizeof(shown), s, len),
                          what);
    memcpy(out, s, len);
    out[len] = '\0';
    return OG_OK;
}

enum og_status codec_decode_payment(const void *key, size_t key_len, const void *value,
                                    size_t value_len, struct codec_payment *out,
                                    struct og_error *err)
{
    char shown[80];
    json_t *root = NULL;
    json_t *amount;
    const char *s;
    size_t len;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    st = codec_open(value, value_len, &root, err);
    if (st != OG_OK)
        return st;
    st = codec_get_order_no(root, key, key_len, out->order_no, err);
    if (st != OG_OK)
        goto out;
    st = codec_get_id(root, "txn_no", gate_txn_no_valid, GATE_TXN_NO_MAX, "bad_txn_no", NULL, 0,
                      out->txn_no, err);
    if (st != OG_OK)
        goto out;
    amount = json_object_get(root, "amount_cents");
    if (amount == NULL) {
        st = codec_fail(err, "missing_field: amount_cents");
        goto out;
    }
    if (!json_is_integer(amount)) {
        st = codec_fail(err, "bad_type: amount_cents must be an integer");
        goto out;
    }
    if (json_integer_value(amount) <= 0 || json_integer_value(amount) > CODEC_AMOUNT_MAX) {
        st = codec_fail(err, "bad_amount: %lld (must be 1 to %lld)",
                        (long long)json_integer_value(amount), CODEC_AMOUNT_MAX);
        goto out;
    }
    out->amount_cents = json_integer_value(amount);
    st = codec_get_string(root, "channel", &s, &len, err);
    if (st != OG_OK)
        goto out;
    if (!codec_channel_valid(s, len)) {
        st = codec_fail(err, "bad_channel: '%s' (1 to %d printable ASCII characters)",
                        codec_printable(shown, sizeof(shown), s, len), CODEC_CHANNEL_MAX);
        goto out;
    }
    memcpy(out->channel, s, len);
    out->channel[len] = '\0';
    st = codec_get_optional(root, "currency", gate_currency_valid, "bad_currency",
                            "an ISO 4217 code: 3 upper-case letters", out->currency, err);
    if (st != OG_OK)
        goto out;
    st = codec_get_optional(root, "charge_ref", gate_charge_ref_valid, "bad_charge_ref",
                            "1 to 128 of A-Z a-z 0-9 . _ : -", out->charge_ref, err);
out:
    json_decref(root);
    if (st != OG_OK)
        memset(out, 0, sizeof(*out));
    return st;
}

enum og_status codec_decode_refund(const void *key, size_t key_len, const void *value,
                                   size_t value_len, struct codec_refund *out, struct og_error *err)
{
    char shown[80];
    json_t *root = NULL;
    const char *s;
    size_t len;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    st = codec_open(value, value_len, &root, err);
    if (st != OG_OK)
        return st;
    st = codec_get_id(root, "txn_no", gate_txn_no_valid, GATE_TXN_NO_MAX, "bad_txn_no", key,
                      key_len, out->txn_no, err);
    if (st == OG_OK)
        st = codec_get_id(root, "refund_ref", gate_txn_no_valid, GATE_TXN_NO_MAX, "bad_refund_ref",
                          NULL, 0, out->refund_ref, err);
    if (st != OG_OK)
        goto out;
    st = codec_get_string(root, "outcome", &s, &len, err);
    if (st != OG_OK)
        goto out;
    if (len == 9 && memcmp(s, "succeeded", 9) == 0) {
        out->succeeded = true;
    } else if (len != 6 || memcmp(s, "failed", 6) != 0) {
        st = codec_fail(err, "bad_outcome: '%s' (succeeded or failed)",
                        codec_printable(shown, sizeof(shown), s, len));
        goto out;
    }
out:
    json_decref(root);
    if (st != OG_OK)
        memset(out, 0, sizeof(*out));
    return st;
}

void codec_salvage_payment(const void *key, size_t key_len, const void *value, size_t value_len,
                           struct codec_payment *out)
{
    json_t *root = NULL;
    json_t *f;

    memset(out, 0, sizeof(*out));
    if (value != NULL && value_len > 0 && value_len <= CODEC_VALUE_MAX)
        root = json_loadb(value, value_len, JSON_REJECT_DUPLICATES, NULL);
    if (root != NULL && !json_is_object(root)) {
        json_decref(root);
        root = NULL;
    }
    f = root != NULL ? json_object_get(root, "order_no") : NULL;
    if (json_is_string(f) && gate_order_no_valid(json_string_value(f), json_string_length(f)))
        memcpy(out->order_no, json_string_value(f), json_string_length(f));
    else if (key != NULL && gate_order_no_valid((const char *)key, key_len))
        memcpy(out->order_no, key, key_len);
    f = root != NULL ? json_object_get(root, "txn_no") : NULL;
    if (json_is_string(f) && gate_txn_no_valid(json_string_value(f), json_string_length(f)))
        memcpy(out->txn_no, json_string_value(f), json_string_length(f));
    f = root != NULL ? json_object_get(root, "amount_cents") : NULL;
    if (json_is_integer(f) && json_integer_value(f) > 0 &&
        json_integer_value(f) <= CODEC_AMOUNT_MAX)
        out->amount_cents = json_integer_value(f);
    f = root != NULL ? json_object_get(root, "channel") : NULL;
    if (json_is_string(f) && codec_channel_valid(json_string_value(f), json_string_length(f)))
        memcpy(out->channel, json_string_value(f), json_string_length(f));
    f = root != NULL ? json_object_get(root, "currency") : NULL;
    if (json_is_string(f) && gate_currency_valid(json_string_value(f), json_string_length(f)))
        memcpy(out->currency, json_string_value(f), json_string_length(f));
    f = root != NULL ? json_object_get(root, "charge_ref") : NULL;
    if (json_is_string(f) && gate_charge_ref_valid(json_string_value(f), json_string_length(f)))
        memcpy(out->charge_ref, json_string_value(f), json_string_length(f));
    json_decref(root);
}

/* Serialises obj into buf; jansson escapes every string for us. */
static enum og_status codec_dump(json_t *obj, char *buf, size_t size, size_t *len,
                                 struct og_error *err)
{
    size_t n;

    if (obj == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    n = json_dumpb(obj, buf, size, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    if (n == 0)
        return og_error_set(err, OG_ERR_NOMEM, false, "cannot serialise the message");
    if (n >= size)
        return og_error_set(err, OG_ERR_ARG, false, "buffer of %zu bytes is too small (%zu)", size,
                            n + 1);
    buf[n] = '\0';
    *len = n;
    return OG_OK;
}

enum og_status codec_encode_cancel(const char *order_no, int64_t due_ms, char *buf, size_t size,
                                   size_t *len, struct og_error *err)
{
    char due[32];

    *len = 0;
    if (order_no == NULL || !gate_order_no_valid(order_no, strlen(order_no)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid order number");
    /* Years 0..9999 only: the decoder reads exactly four year digits. */
    if (due_ms < -62167219200000LL || due_ms > 253402300799999LL)
        return og_error_set(err, OG_ERR_ARG, false, "due time %lld is out of range",
                            (long long)due_ms);
    clock_format_iso(due_ms, due, sizeof(due));
    return codec_dump(
        json_pack("{s:i, s:s, s:s}", "v", CODEC_VERSION, "order_no", order_no, "due_at", due), buf,
        size, len, err);
}

enum og_status codec_encode_reminder(const char *order_no, int32_t offset_seconds, int64_t due_ms,
                                     char *buf, size_t size, size_t *len, struct og_error *err)
{
    char due[32];

    *len = 0;
    if (order_no == NULL || !gate_order_no_valid(order_no, strlen(order_no)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid order number");
    if (offset_seconds < 1 || offset_seconds > CODEC_OFFSET_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "offset %d is out of range",
                            (int)offset_seconds);
    if (due_ms < -62167219200000LL || due_ms > 253402300799999LL)
        return og_error_set(err, OG_ERR_ARG, false, "due time %lld is out of range",
                            (long long)due_ms);
    clock_format_iso(due_ms, due, sizeof(due));
    return codec_dump(json_pack("{s:i, s:s, s:s, s:s, s:i}", "v", CODEC_VERSION, "order_no",
                                order_no, "due_at", due, "kind", "reminder", "offset_seconds",
                                (int)offset_seconds),
                      buf, size, len, err);
}

enum og_status codec_encode_payment(const struct codec_payment *p, char *buf, size_t size,
                                    size_t *len, struct og_error *err)
{
    json_t *obj;

    *len = 0;
    if (!gate_order_no_valid(p->order_no, strlen(p->order_no)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid order number");
    if (!gate_txn_no_valid(p->txn_no, strlen(p->txn_no)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid transaction number");
    if (p->amount_cents <= 0 || p->amount_cents > CODEC_AMOUNT_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be 1 to %lld cents",
                            CODEC_AMOUNT_MAX);
    if (!codec_channel_valid(p->channel, strlen(p->channel)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid payment channel");
    if (p->currency[0] != '\0' && !gate_currency_valid(p->currency, strlen(p->currency)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid currency");
    if (p->charge_ref[0] != '\0' && !gate_charge_ref_valid(p->charge_ref, strlen(p->charge_ref)))
        return og_error_set(err, OG_ERR_ARG, false, "invalid charge reference");
    obj = json_pack("{s:i, s:s, s:s, s:I, s:s}", "v", CODEC_VERSION, "order_no", p->order_no,
                    "txn_no", p->txn_no, "amount_cents", (json_int_t)p->amount_cents, "channel",
                    p->channel);
    /* The optional fields only when set: a message without them reads as it always did. */
    if (obj != NULL && p->currency[0] != '\0' &&
        json_object_set_new(obj, "currency", json_string(p->currency)) != 0)
        goto nomem;
    if (obj != NULL && p->charge_ref[0] != '\0' &&
        json_object_set_new(obj, "charge_ref", json_string(p->charge_ref)) != 0)
        goto nomem;
    return codec_dump(obj, buf, size, len, err);
nomem:
    json_decref(obj);
    return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
}

enum og_status codec_encode_refund(const struct codec_refund *r, char *buf, size_t size,
                                   size_t *len, struct og_error *err)
{
    int n;

    if (!gate_txn_no_valid(r->txn_no, strlen(r->txn_no)))
        return codec_fail(err, "bad_txn_no: not encodable");
    if (!gate_txn_no_valid(r->refund_ref, strlen(r->refund_ref)))
        return codec_fail(err, "bad_refund_ref: not encodable");
    /* Both are of [A-Za-z0-9._:-]: nothing to escape. */
    n = snprintf(buf, size, "{\"v\":%d,\"txn_no\":\"%s\",\"refund_ref\":\"%s\",\"outcome\":\"%s\"}",
                 CODEC_VERSION, r->txn_no, r->refund_ref, r->succeeded ? "succeeded" : "failed");
    if (n < 0 || (size_t)n >= size)
        return og_error_set(err, OG_ERR_ARG, false, "buffer of %zu bytes too small", size);
    *len = (size_t)n;
    return OG_OK;
}
