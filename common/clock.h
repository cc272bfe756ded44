/* Time helpers: monotonic clocks for intervals, wall-clock milliseconds and
 * the ISO 8601 UTC format of the message contract ("2026-11-30T16:00:00.000Z"). */
#ifndef OG_COMMON_CLOCK_H
#define OG_COMMON_CLOCK_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int64_t clock_mono_us(void);
int64_t clock_mono_ms(void);
/* Milliseconds since the Unix epoch. */
int64_t clock_wall_ms(void);

/* How late a raised stop flag may be noticed by clock_sleep_until_flag. */
#define CLOCK_SLEEP_SLICE_MS 50

/* Sleeps ms milliseconds of monotonic time, or less: it returns early once
 * *stop or *also (either may be NULL) is raised, at most CLOCK_SLEEP_SLICE_MS
 * after it was raised (a signal cuts the wait at once). Signals do not make
 * it return early otherwise. Returns true when it slept the whole time, false
 * when a flag cut it short; ms <= 0 returns at once. */
bool clock_sleep_until_flag(long ms, const volatile sig_atomic_t *stop,
                            const volatile sig_atomic_t *also);

/* The delay before retry number attempt (0-based): base_ms doubled attempt
 * times, at most cap_ms. Does not overflow whatever attempt is. */
long clock_backoff_ms(long base_ms, long cap_ms, int attempt);
/* ms spread over [ms/2, ms] by r (any random number), so that processes that
 * failed together do not retry in lockstep. */
long clock_jitter_ms(long ms, unsigned long r);

/* Parses an RFC 3339 timestamp: date 'T' time, optional fraction (up to 9
 * digits, kept to the millisecond), and 'Z' or a "+hh:mm"/"-hh:mm" offset.
 * Returns 0 and sets *ms, or -1 on anything else (including out-of-range
 * fields and trailing bytes). */
int clock_parse_iso(const char *s, size_t len, int64_t *ms);
/* Formats as "YYYY-MM-DDTHH:MM:SS.mmmZ"; buf needs 25 bytes. */
char *clock_format_iso(int64_t ms, char *buf, size_t size);

#endif
