/* The benchmark drivers' command lines: rows that say each option's name, value, help, where
 * its value goes and within which bounds. bench_opt_parse parses argv with common/opt (the
 * forms and refusals of every ordergate program: "--name value", "--name=value", "--" before
 * positionals) and prints --help from the same rows, so a driver's help cannot drift from
 * what it accepts. An option given twice: the last value counts. */
#ifndef OG_TOOLS_BENCH_OPT_H
#define OG_TOOLS_BENCH_OPT_H

#include <stdbool.h>

enum bench_opt_kind {
    BENCH_OPT_ON,    /* a flag: *(bool *)target = true */
    BENCH_OPT_OFF,   /* a flag: *(bool *)target = false */
    BENCH_OPT_INT,   /* *(int *)target, an integer in min..max */
    BENCH_OPT_LONG,  /* *(long *)target, an integer in min..max */
    BENCH_OPT_INTS,  /* a comma-separated list of 1..cap integers in min..max into (int *)target,
                        how many into *count */
    BENCH_OPT_STR,   /* *(const char **)target = the value (argv's, not copied) */
    BENCH_OPT_NAME,  /* BENCH_OPT_STR, refused unless bench_name_valid: safe in SQL text */
    BENCH_OPT_PATH,  /* copied into (char *)target, a char[PATH_MAX] */
    BENCH_OPT_WORDS, /* a comma-separated list of at least one of words[]: *on[i] is set for
                        each words[i] listed and cleared for the others */
    BENCH_OPT_FN,    /* fn(target, value): 0 when the value is good */
};

struct bench_opt {
    const char *name;    /* long name without the dashes */
    const char *metavar; /* the value ("N"), NULL for a flag */
    const char *help;    /* lines separated by '\n', for --help */
    enum bench_opt_kind kind;
    void *target;
    long min, max;                              /* BENCH_OPT_INT, _LONG, _INTS */
    int *count;                                 /* BENCH_OPT_INTS */
    int cap;                                    /* BENCH_OPT_INTS: capacity of target */
    const char *const *words;                   /* BENCH_OPT_WORDS, NULL-terminated */
    bool *const *on;                            /* BENCH_OPT_WORDS: one flag per word */
    int (*fn)(void *target, const char *value); /* BENCH_OPT_FN */
};

/* One row each, in the order --help lists them; a table ends with BENCH_END. */
/* clang-format off */
#define BENCH_ON(name, help, flag)  {name, NULL, help, BENCH_OPT_ON, .target = (flag)}
#define BENCH_OFF(name, help, flag) {name, NULL, help, BENCH_OPT_OFF, .target = (flag)}
#define BENCH_INT(name, metavar, help, var, lo, hi) \
    {name, metavar, help, BENCH_OPT_INT, .target = (var), .min = (lo), .max = (hi)}
#define BENCH_LONG(name, metavar, help, var, lo, hi) \
    {name, metavar, help, BENCH_OPT_LONG, .target = (var), .min = (lo), .max = (hi)}
#define BENCH_INTS(name, metavar, help, array, n, capacity, lo, hi) \
    {name, metavar, help, BENCH_OPT_INTS, .target = (array), .count = (n), .cap = (capacity), \
     .min = (lo), .max = (hi)}
#define BENCH_STR(name, metavar, help, var)  {name, metavar, help, BENCH_OPT_STR, .target = (var)}
#define BENCH_NAME(name, metavar, help, var) {name, metavar, help, BENCH_OPT_NAME, .target = (var)}
#define BENCH_PATH(name, metavar, help, buf) {name, metavar, help, BENCH_OPT_PATH, .target = (buf)}
#define BENCH_WORDS(name, metavar, help, list, flags) \
    {name, metavar, help, BENCH_OPT_WORDS, .words = (list), .on = (flags)}
#define BENCH_FN(name, metavar, help, func, var) \
    {name, metavar, help, BENCH_OPT_FN, .fn = (func), .target = (var)}
#define BENCH_END {NULL, NULL, NULL, BENCH_OPT_ON, .target = NULL}
/* clang-format on */

/* Parses argv[1..argc) against rows (ending with a row whose name is NULL) and stores each
 * value, in command-line order. --help (-h) prints "usage: prog [options]", about (may be
 * NULL), the rows, then tail (may be NULL) on stdout and exits 0. Returns 0, or -1 after one
 * line on stderr naming the option (or the unexpected argument) and pointing to --help; the
 * caller exits 2. */
int bench_opt_parse(const char *prog, const char *about, const char *tail,
                    const struct bench_opt *rows, int argc, char **argv);

#endif
