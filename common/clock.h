/* Time helpers: monotonic clocks for intervals, wall-clock milliseconds and
 * the ISO 8601 UTC format of the message contract ("2026-11-30T16:00:00.000Z"). */
#ifndef OG_COMMON_CLOCK_H
#define OG_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

int64_t clock_mono_us(void);
int64_t clock_mono_ms(void);
/* Milliseconds since the Unix epoch. */
int64_t clock_wall_ms(void);

/* Parses an RFC 3339 timestamp: date 'T' time, optional fraction (up to 9
 * digits, kept to the millisecond), and 'Z' or a "+hh:mm"/"-hh:mm" offset.
 * Returns 0 and sets *ms, or -1 on anything else (including out-of-range
 * fields and trailing bytes). */
int clock_parse_iso(const char *s, size_t len, int64_t *ms);
/* Formats as "YYYY-MM-DDTHH:MM:SS.mmmZ"; buf needs 25 bytes. */
char *clock_format_iso(int64_t ms, char *buf, size_t size);

#endif
