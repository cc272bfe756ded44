/* Strict base-10 integers from the command line.
 *
 * One parser for every command-line number, so that each program refuses the
 * same things: "--rows abc" or "--rows 12x" is an error, never a silent 0 or
 * 12. Accepted: an optional '-' followed by decimal digits, nothing before
 * or after (no spaces, no '+', no "0x" prefix). */
#ifndef OG_COMMON_PARSE_H
#define OG_COMMON_PARSE_H

/* Parses s into *out when it is a base-10 integer in [min, max] (both
 * inclusive). Returns 0 on success. Returns -1 and leaves *out untouched when
 * s is NULL or empty, is not entirely such an integer, does not fit a long,
 * lies outside [min, max], or when min > max; errno is then EINVAL (not a
 * number, or min > max) or ERANGE (a number, but out of range). */
int parse_long(const char *s, long min, long max, long *out);
/* parse_long for an int: the same contract with int bounds. */
int parse_int(const char *s, int min, int max, int *out);

#endif
