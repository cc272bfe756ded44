/* The one parser of numbers read from a person: every command-line value and every
 * configuration-file value of ordergate-consumer, ordergate-scanner and ordergatectl (the
 * bench programs too) that is an integer or a duration goes through here, so each program
 * refuses the same things in the same words.
 *
 * Integers: an optional '-' and decimal digits, nothing else: no leading or trailing space,
 * no '+', no "0x", no exponent, not empty; a value that does not fit int64 is refused, never
 * clamped; the caller declares the bounds and the value must lie in them.
 * Durations: such a non-negative integer followed by one unit, s, m, h or d ("90s", "15m",
 * "2h", "1d"); a bare integer counts seconds.
 *
 * The refusal reads, whatever the program:
 *   expected an integer in 1..10000, got "abc"
 *   expected a duration in 1s..3650d (e.g. 90s, 15m, 2h, 1d), got "15 m"
 * prefixed with what the value was for ("--batch-size", "consumer.batch_size"). */
#ifndef OG_COMMON_PARSE_H
#define OG_COMMON_PARSE_H

#include <stdint.h>

#include "common/error.h"

/* Parses s into *out when it is an integer in [min, max] (both inclusive). On failure
 * returns OG_ERR_ARG with "<what>: expected an integer in MIN..MAX, got "S"" (no prefix when
 * what is NULL) and leaves *out untouched; s may be NULL (refused like ""). */
enum og_status parse_int64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
                           struct og_error *err);
/* A duration in seconds within [min_s, max_s]; the same contract, message in the duration
 * form. */
enum og_status parse_duration(const char *what, const char *s, int64_t min_s, int64_t max_s,
                              int64_t *seconds, struct og_error *err);

/* The same integer rules without a message, for callers that print their own (the bench
 * programs): 0 on success; -1 with errno EINVAL (not an integer, or min > max) or ERANGE (an
 * integer outside [min, max] or outside long/int) and *out untouched. */
int parse_long(const char *s, long min, long max, long *out);
int parse_int(const char *s, int min, int max, int *out);

#endif
