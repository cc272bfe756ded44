#include "common/parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The strict core: 0, or -1 with errno EINVAL (not an integer) or ERANGE (does not fit
 * int64). Digits are accumulated by hand so that nothing (white space, '+', locale) is
 * skipped the way strtoll would. */
static int parse_digits(const char *s, int64_t *out)
{
    bool neg = s != NULL && s[0] == '-';
    const char *p = neg ? s + 1 : s;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;

    if (p == NULL || *p == '\0') {
        errno = EINVAL;
        return -1;
    }
    for (; *p != '\0'; p++) {
        unsigned d;
        if (*p < '0' || *p > '9') {
            errno = EINVAL;
            return -1;
        }
        d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10) {
            /* Still a number: the rest must be digits for ERANGE, else EINVAL. */
            while (*++p != '\0')
                if (*p < '0' || *p > '9') {
                    errno = EINVAL;
                    return -1;
                }
            errno = ERANGE;
            return -1;
        }
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int parse_range(const char *s, int64_t min, int64_t max, int64_t *out)
{
    int64_t v;

    if (min > max) {
        errno = EINVAL;
        return -1;
    }
    if (parse_digits(s, &v) != 0)
        return -1;
    if (v < min || v > max) {
        errno = ERANGE;
        return -1;
    }
    *out = v;
    return 0;
}

enum og_status parse_int64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
                           struct og_error *err)
{
    if (parse_range(s, min, max, out) == 0)
        return OG_OK;
    return og_error_set(err, OG_ERR_ARG, false,
                        "%s%sexpected an integer in %" PRId64 "..%" PRId64 ", got \"%.64s\"",
                        what != NULL ? what : "", what != NULL ? ": " : "", min, max,
                        s != NULL ? s : "");
}

/* Seconds as the largest unit that divides them: 90 -> "90s", 3600 -> "1h". */
static void parse_duration_format(int64_t s, char *buf, size_t size)
{
    static const struct {
        int64_t seconds;
        char unit;
    } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (s != 0 && s % units[i].seconds == 0) {
            snprintf(buf, size, "%" PRId64 "%c", s / units[i].seconds, units[i].unit);
            return;
        }
    snprintf(buf, size, "%" PRId64 "s", s);
}

enum og_status parse_duration(const char *what, const char *s, int64_t min_s, int64_t max_s,
                              int64_t *seconds, struct og_error *err)
{
    char num[32], lo[32], hi[32];
    size_t len = s != NULL ? strlen(s) : 0;
    int64_t unit = 1, v;

    if (len > 0 && len < sizeof(num)) {
        memcpy(num, s, len + 1);
        switch (num[len - 1]) {
        case 's':
            unit = 1;
            break;
        case 'm':
            unit = 60;
            break;
        case 'h':
            unit = 3600;
            break;
        case 'd':
            unit = 86400;
            break;
        default:
            unit = 0;
            break;
        }
        if (unit != 0)
            num[--len] = '\0';
        else
            unit = 1;
        /* No sign: "-5m" is not a duration. Bound before multiplying: no overflow. */
        if (num[0] != '-' && parse_range(num, 0, max_s / unit, &v) == 0 && v * unit >= min_s) {
            *seconds = v * unit;
            return OG_OK;
        }
    }
    parse_duration_format(min_s, lo, sizeof(lo));
    parse_duration_format(max_s, hi, sizeof(hi));
    return og_error_set(err, OG_ERR_ARG, false,
                        "%s%sexpected a duration in %s..%s (e.g. 90s, 15m, 2h, 1d), got \"%.64s\"",
                        what != NULL ? what : "", what != NULL ? ": " : "", lo, hi,
                        s != NULL ? s : "");
}

int parse_long(const char *s, long min, long max, long *out)
{
    int64_t v;

    if (parse_range(s, min, max, &v) != 0)
        return -1;
    *out = (long)v;
    return 0;
}

int parse_int(const char *s, int min, int max, int *out)
{
    int64_t v;

    if (parse_range(s, min, max, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}
