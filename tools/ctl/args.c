/* Value parsers of ordergatectl beyond the common ones (common/parse.h): money, timestamps,
 * free text, PostgreSQL's timestamps. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/gate.h"

#include "common/clock.h"
#include "tools/ctl/ctl.h"

enum og_status ctl_parse_cents(const char *what, const char *s, int64_t *out, struct og_error *err)
{
    if (s != NULL && (strchr(s, '.') != NULL || strchr(s, ',') != NULL))
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: expected a whole number of cents (write 12.50 as 1250), got "
                            "\"%.64s\"",
                            what, s);
    return parse_int64(what, s, 1, CTL_CENTS_MAX, out, err);
}

enum og_status ctl_parse_time(const char *what, const char *s, int64_t *ms, struct og_error *err)
{
    if (s == NULL || clock_parse_iso(s, strlen(s), ms) != 0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: '%s' is not an RFC 3339 timestamp with a zone "
                            "(e.g. 2026-11-30T16:00:00Z)",
                            what, s != NULL ? s : "");
    return OG_OK;
}

enum og_status ctl_check_text(const char *what, const char *s, size_t max, struct og_error *err)
{
    bool blank = true;
    size_t len;

    if (s == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "%s is required", what);
    len = strlen(s);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 && c != '\n' && c != '\t')
            return og_error_set(err, OG_ERR_ARG, false, "%s contains a control character", what);
        if (c != ' ' && c != '\n' && c != '\t')
            blank = false;
    }
    if (blank)
        return og_error_set(err, OG_ERR_ARG, false, "%s must not be empty", what);
    if (len > max)
        return og_error_set(err, OG_ERR_ARG, false, "%s is longer than %zu bytes", what, max);
    return OG_OK;
}

enum og_status ctl_check_currency(const char *what, const char *s, struct og_error *err)
{
    if (s == NULL || !gate_currency_valid(s, strlen(s)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: expected an ISO 4217 code of 3 upper-case letters (EUR, JPY), "
                            "got \"%.16s\"",
                            what, s != NULL ? s : "");
    return OG_OK;
}

/* ISO 4217's minor units where they are not 2; every other code is shown with 2. */
static const struct {
    char code[4];
    int exponent;
} ctl_exponents[] = {
    {"BIF", 0}, {"CLP", 0}, {"DJF", 0}, {"GNF", 0}, {"ISK", 0}, {"JPY", 0}, {"KMF", 0},
    {"KRW", 0}, {"PYG", 0}, {"RWF", 0}, {"UGX", 0}, {"UYI", 0}, {"VND", 0}, {"VUV", 0},
    {"XAF", 0}, {"XOF", 0}, {"XPF", 0}, {"BHD", 3}, {"IQD", 3}, {"JOD", 3}, {"KWD", 3},
    {"LYD", 3}, {"OMR", 3}, {"TND", 3}, {"CLF", 4}, {"UYW", 4},
};

int ctl_currency_exponent(const char *code)
{
    if (code == NULL || !gate_currency_valid(code, strlen(code)))
        return -1;
    for (size_t i = 0; i < sizeof(ctl_exponents) / sizeof(ctl_exponents[0]); i++)
        if (strcmp(code, ctl_exponents[i].code) == 0)
            return ctl_exponents[i].exponent;
    return 2;
}

const char *ctl_format_money(int64_t minor, const char *currency, char *buf, size_t size)
{
    int e = ctl_currency_exponent(currency);
    uint64_t mag = minor < 0 ? (uint64_t)0 - (uint64_t)minor : (uint64_t)minor;
    uint64_t scale = 1;

    if (currency == NULL || *currency == '\0') {
        snprintf(buf, size, "%" PRId64, minor);
        return buf;
    }
    if (e < 0) {
        snprintf(buf, size, "%" PRId64 " %s (minor units)", minor, currency);
        return buf;
    }
    for (int i = 0; i < e; i++)
        scale *= 10;
    if (e == 0)
        snprintf(buf, size, "%" PRId64 " %s", minor, currency);
    else
        snprintf(buf, size, "%s%" PRIu64 ".%0*" PRIu64 " %s", minor < 0 ? "-" : "", mag / scale, e,
                 mag % scale, currency);
    return buf;
}

/* "2026-11-30 16:15:00.123456+00" -> "2026-11-30T16:15:00.123456+00:00", then
 * the common RFC 3339 parser does the arithmetic. */
int ctl_pg_time_iso(const char *s, char *buf, size_t size)
{
    char tmp[64];
    size_t len = s != NULL ? strlen(s) : 0;
    size_t zone;
    int64_t ms;

    if (len < 22 || len + 4 >= sizeof(tmp) || s[10] != ' ')
        return -1;
    memcpy(tmp, s, len + 1);
    tmp[10] = 'T';
    /* The zone starts at the last '+' or '-' after the time of day. */
    zone = len;
    while (zone > 19 && tmp[zone - 1] != '+' && tmp[zone - 1] != '-')
        zone--;
    if (zone <= 19)
        return -1;
    /* PostgreSQL prints "+00", "+05:30" or "+05:30:15"; the parser wants "+hh:mm". */
    if (len - zone == 2) {
        memcpy(tmp + len, ":00", 4);
        len += 3;
    } else if (len - zone == 8) {
        return -1; /* seconds in a zone offset: historical zones only */
    }
    if (clock_parse_iso(tmp, len, &ms) != 0)
        return -1;
    clock_format_iso(ms, buf, size);
    return 0;
}

json_t *ctl_json_pg_time(const char *s)
{
    char iso[40];

    if (s == NULL || *s == '\0')
        return json_null();
    return json_string(ctl_pg_time_iso(s, iso, sizeof(iso)) == 0 ? iso : s);
}
