/* ordergatectl: the operator's command-line tool.
 *
 * Layout: main.c parses the global options, loads the configuration and
 * dispatches to one command; args.c is the option parser and the strict
 * value parsers; out.c prints results (text or one JSON object) and errors;
 * one file per group of commands: migrate.c, orders.c (place, pay, hold,
 * close), show.c, exceptions.c (exceptions, exceptions resolve), schedule.c,
 * topics.c; drill.c and drill.h are the drill, which main.c runs with an
 * option parser of its own.
 *
 * Contract of a command: run() validates every argument before it touches
 * the database or the broker (bad input: OG_ERR_ARG, nothing sent), then
 * does its work and stores what it did in *result (a JSON object it owns
 * until return; main frees it). The same object is printed as JSON with
 * --json, or through the command's text() renderer, so both outputs carry
 * the same facts. A command may leave a partial result on failure (migrate
 * reports what it applied before the failing file).
 *
 * Exit status (main): 0 done (the gate answered, whatever its outcome),
 * 1 runtime failure, 2 bad usage or configuration. */
#ifndef OG_TOOLS_CTL_H
#define OG_TOOLS_CTL_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"

#define CTL_PROG "ordergatectl"

/* ---- options ----------------------------------------------------------- */

enum { CTL_OPT_ARG = 1, CTL_OPT_REPEAT = 2 };

struct ctl_opt {
    const char *name;    /* long name without the dashes */
    const char *metavar; /* NULL for a flag */
    unsigned flags;      /* CTL_OPT_* */
    const char *help;
};

struct ctl_seen {
    const struct ctl_opt *opt;
    const char *value; /* NULL for a flag */
};

/* Parsed command line: options in the order given, then positionals. Values
 * point into argv (not copied). */
struct ctl_args {
    struct ctl_seen *seen;
    int nseen;
    const char **pos;
    int npos;
};

/* Parses argv[0..argc) against two tables (the command's, then the global
 * one; either may be NULL; both end with a zero entry). Accepts "--name
 * value", "--name=value", "-h" for --help, and "--" before positionals that
 * start with a dash. A non-repeatable option given twice is an error. */
enum og_status ctl_args_parse(struct ctl_args *a, const struct ctl_opt *cmd_opts,
                              const struct ctl_opt *global_opts, int argc, char **argv,
                              struct og_error *err);
void ctl_args_free(struct ctl_args *a);
/* Last value of an option, or NULL when absent. */
const char *ctl_arg(const struct ctl_args *a, const char *name);
bool ctl_flag(const struct ctl_args *a, const char *name);
/* Number of times an option was given; ctl_arg_nth() returns the i-th value. */
int ctl_arg_count(const struct ctl_args *a, const char *name);
const char *ctl_arg_nth(const struct ctl_args *a, const char *name, int i);

/* Strict value parsers: digits only (no sign, space or exponent), within
 * [min, max]. `what` names the option in the message ("--amount"). */
enum og_status ctl_parse_int64(const char *what, const char *s, int64_t min, int64_t max,
                               int64_t *out, struct og_error *err);
/* Money in whole cents, 1 .. 10^15. */
enum og_status ctl_parse_cents(const char *what, const char *s, int64_t *out, struct og_error *err);
/* "15m", "30s", "2h", "1d" (also a bare number of seconds) -> seconds. */
enum og_status ctl_parse_duration(const char *what, const char *s, int64_t *seconds,
                                  struct og_error *err);
/* An RFC 3339 timestamp with a zone -> milliseconds since the epoch. */
enum og_status ctl_parse_time(const char *what, const char *s, int64_t *ms, struct og_error *err);
/* Free text for operator, reason, note: 1..max bytes, no control characters
 * except newline and tab, not only blanks. */
enum og_status ctl_check_text(const char *what, const char *s, size_t max, struct og_error *err);

/* Converts a timestamptz as PostgreSQL prints it in DateStyle ISO
 * ("2026-11-30 16:15:00.123456+00", "+05:30", ...) to the contract format
 * ("2026-11-30T16:15:00.123Z"). Returns 0, or -1 when s is in another form
 * (the caller then shows it as it is). */
int ctl_pg_time_iso(const char *s, char *buf, size_t size);

/* ---- commands ---------------------------------------------------------- */

struct ctl;

struct ctl_command {
    const char *name;  /* "show", "exceptions resolve" */
    const char *usage; /* the line after "usage: ordergatectl " */
    const char *summary;
    const char *details; /* extra paragraphs for --help, or NULL */
    const struct ctl_opt *opts;
    int min_pos, max_pos; /* positional arguments after the command words */
    const char *pos_name; /* what they are ("ORDER"), for the missing-argument message */
    enum og_status (*run)(struct ctl *ctl, const struct ctl_args *a, json_t **result,
                          struct og_error *err);
    void (*text)(const json_t *result, FILE *out);
};

struct ctl {
    struct og_config cfg;
    bool json;
    struct db *db; /* created lazily by ctl_db() */
};

/* The database client for this run, created on first use from the
 * configuration (conninfo, password file, retry policy). NULL only on error. */
struct db *ctl_db(struct ctl *ctl, struct og_error *err);

/* Everything recorded under one order number (ordergate.order_report, one
 * snapshot): *report is NULL when nothing at all is recorded. Used by show
 * and by schedule (the order's expire_at). */
enum og_status ctl_order_report(struct db *db, const char *order_no, json_t **report,
                                struct og_error *err);

extern const struct ctl_command ctl_cmd_migrate;
extern const struct ctl_command ctl_cmd_place;
extern const struct ctl_command ctl_cmd_pay;
extern const struct ctl_command ctl_cmd_hold;
extern const struct ctl_command ctl_cmd_close;
extern const struct ctl_command ctl_cmd_show;
extern const struct ctl_command ctl_cmd_exceptions;
extern const struct ctl_command ctl_cmd_exceptions_resolve;
extern const struct ctl_command ctl_cmd_schedule;
extern const struct ctl_command ctl_cmd_topics;

/* ---- output ------------------------------------------------------------ */

/* Prints `result` as one compact JSON line on stdout. */
void ctl_print_json(const json_t *result);
/* Prints "key   value" lines for the given keys of a flat object (strings,
 * numbers, booleans; null shows as "-"). keys ends with NULL. */
void ctl_print_fields(FILE *out, const json_t *obj, const char *const *keys);
/* A string member or NULL (also for a JSON null). */
const char *ctl_json_str(const json_t *obj, const char *key);
/* A value as display text into buf: strings as they are, numbers in
 * decimal, null as "-". */
const char *ctl_json_text(const json_t *v, char *buf, size_t size);

/* Aligned columns for lists. Cells are copied. */
struct ctl_table;
struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers);
/* Adds a row of ncols cells (NULL shows as "-"). Returns -1 when out of memory. */
int ctl_table_add(struct ctl_table *t, const char *const *cells);
void ctl_table_print(const struct ctl_table *t, FILE *out, const char *indent);
void ctl_table_free(struct ctl_table *t);

/* Sets a member, taking the reference; a NULL value (allocation failure)
 * becomes a JSON null so callers need not check every call. */
void ctl_json_set(json_t *obj, const char *key, json_t *value);
/* json_string() that maps NULL to JSON null. */
json_t *ctl_json_str_or_null(const char *s);

#endif
