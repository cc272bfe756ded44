#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_mono_ms(void)
{
    return clock_mono_us() / 1000;
}

int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool clock_raised(const volatile sig_atomic_t *stop, const volatile sig_atomic_t *also)
{
    return (stop != NULL && *stop) || (also != NULL && *also);
}

bool clock_sleep_until_flag(long ms, const volatile sig_atomic_t *stop,
                            const volatile sig_atomic_t *also)
{
    int64_t end = clock_mono_us() + (int64_t)(ms > 0 ? ms : 0) * 1000;

    /* Slices with absolute deadlines: an interrupted slice neither shortens
     * nor stretches the whole, and a flag is seen within one slice. */
    for (;;) {
        int64_t now = clock_mono_us(), until;
        struct timespec ts;

        if (clock_raised(stop, also))
            return false;
        if (now >= end)
            return true;
        until = end - now > CLOCK_SLEEP_SLICE_MS * 1000 ? now + CLOCK_SLEEP_SLICE_MS * 1000 : end;
        ts.tv_sec = (time_t)(until / 1000000);
        ts.tv_nsec = (long)(until % 1000000) * 1000;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
               !clock_raised(stop, also))
            ;
    }
}

long clock_backoff_ms(long base_ms, long cap_ms, int attempt)
{
    long ms = base_ms;

    for (int i = 0; i < attempt && ms < cap_ms; i++)
        ms = ms > cap_ms / 2 ? cap_ms : ms * 2;
    return ms > cap_ms ? cap_ms : ms;
}

long clock_jitter_ms(long ms, unsigned long r)
{
    if (ms <= 0)
        return 0;
    return ms / 2 + (long)(r % (unsigned long)(ms / 2 + 1));
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t clock_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int clock_digits(const char *s, size_t len, size_t *pos, int n, int *out)
{
    int v = 0;

    if (*pos + (size_t)n > len)
        return -1;
    for (int i = 0; i < n; i++) {
        char c = s[*pos + (size_t)i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *pos += (size_t)n;
    *out = v;
    return 0;
}

static int clock_expect(const char *s, size_t len, size_t *pos, char c)
{
    if (*pos >= len || s[*pos] != c)
        return -1;
    (*pos)++;
    return 0;
}

int clock_parse_iso(const char *s, size_t len, int64_t *ms)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    /* Zeroed although every path that reads one has parsed it: gcc -O3 cannot
     * see through the short-circuit chain and warns (maybe-uninitialized). */
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, frac = 0, oh = 0, om = 0, sign = 0;
    size_t pos = 0;
    int64_t total;

    if (s == NULL || clock_digits(s, len, &pos, 4, &y) || clock_expect(s, len, &pos, '-') ||
        clock_digits(s, len, &pos, 2, &mo) || clock_expect(s, len, &pos, '-') ||
        clock_digits(s, len, &pos, 2, &d))
        return -1;
    if (pos >= len || (s[pos] != 'T' && s[pos] != 't'))
        return -1;
    pos++;
    if (clock_digits(s, len, &pos, 2, &h) || clock_expect(s, len, &pos, ':') ||
        clock_digits(s, len, &pos, 2, &mi) || clock_expect(s, len, &pos, ':') ||
        clock_digits(s, len, &pos, 2, &sec))
        return -1;
    if (pos < len && s[pos] == '.') {
        int ndig = 0;
        pos++;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            if (ndig < 3)
                frac = frac * 10 + (s[pos] - '0');
            ndig++;
            pos++;
        }
        if (ndig == 0 || ndig > 9)
            return -1;
        for (int i = ndig; i < 3; i++)
            frac *= 10;
    }
    if (pos < len && (s[pos] == 'Z' || s[pos] == 'z')) {
        pos++;
    } else if (pos < len && (s[pos] == '+' || s[pos] == '-')) {
        sign = s[pos] == '-' ? -1 : 1;
        pos++;
        if (clock_digits(s, len, &pos, 2, &oh) || clock_expect(s, len, &pos, ':') ||
            clock_digits(s, len, &pos, 2, &om) || oh > 23 || om > 59)
            return -1;
    } else {
        return -1; /* a time without zone is ambiguous: refuse it */
    }
    if (pos != len)
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 59)
        return -1;
    if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return -1;
    total = clock_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    total -= (int64_t)sign * (oh * 3600 + om * 60);
    *ms = total * 1000 + frac;
    return 0;
}

char *clock_format_iso(int64_t ms, char *buf, size_t size)
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int milli = (int)(ms - (int64_t)secs * 1000);
    struct tm tm;

    gmtime_r(&secs, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, milli);
    return buf;
}
