/* ordergatectl: the operator's command-line tool.
 *
 * Layout: main.c parses the command line (common/opt.h, the parser of every
 * ordergate program), loads the configuration and dispatches to one command;
 * numbers and durations go through common/parse.h, and args.c has the value
 * parsers only this tool needs (money, timestamps, free text); out.c prints
 * results (text or one JSON object) and errors; one file per group of
 * commands (migrate.c, orders.c, charges.c, show.c, exceptions.c, schedule.c, topics.c,
 * archive.c, outbox.c, checks.c; the drill in drill/, one file per concern, drill/drill.h).
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
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"
#include "common/opt.h"
#include "common/parse.h"

#define CTL_PROG "ordergatectl"

/* ---- values ------------------------------------------------------------ */

/* Options are rows of struct opt and parsed with opt_parse() (common/opt.h); integers and
 * durations go through common/parse.h. The bounds every command shares: */
#define CTL_CENTS_MAX    INT64_C(1000000000000000) /* money: 1 .. 10^15 cents */
#define CTL_DURATION_MAX (INT64_C(3650) * 86400)   /* a duration: at most 3650d */

/* Money in whole cents, 1 .. 10^15. */
enum og_status ctl_parse_cents(const char *what, const char *s, int64_t *out, struct og_error *err);
/* An RFC 3339 timestamp with a zone -> milliseconds since the epoch. */
enum og_status ctl_parse_time(const char *what, const char *s, int64_t *ms, struct og_error *err);
/* Free text for operator, reason, note: 1..max bytes, no control characters
 * except newline and tab, not only blanks. */
enum og_status ctl_check_text(const char *what, const char *s, size_t max, struct og_error *err);

/* A currency option (--currency): an ISO 4217 alpha-3 code, three upper-case letters. */
enum og_status ctl_check_currency(const char *what, const char *s, struct og_error *err);
/* The minor-unit exponent of an ISO 4217 currency for display (JPY 0, EUR 2, KWD 3; 2 for a
 * code not listed as otherwise), -1 for what is not a code. The database's currencies table
 * decides everything else; this only places a decimal point in what is printed. */
int ctl_currency_exponent(const char *code);
/* minor units of currency as text: "12.50 EUR", "1250 JPY", "1.250 KWD"; "1250" without a
 * currency. */
const char *ctl_format_money(int64_t minor, const char *currency, char *buf, size_t size);

/* Converts a timestamptz as PostgreSQL prints it in DateStyle ISO
 * ("2026-11-30 16:15:00.123456+00", "+05:30", ...) to the contract format
 * ("2026-11-30T16:15:00.123Z"). Returns 0, or -1 when s is in another form
 * (the caller then shows it as it is). */
int ctl_pg_time_iso(const char *s, char *buf, size_t size);
/* A timestamptz as PostgreSQL prints it, as JSON: the contract format (ctl_pg_time_iso), the
 * text as it is when in another form, null when NULL or empty. */
json_t *ctl_json_pg_time(const char *s);

/* ---- commands ---------------------------------------------------------- */

struct ctl;

struct ctl_command {
    const char *name;  /* "show", "exceptions resolve" */
    const char *usage; /* the line after "usage: ordergatectl " */
    const char *summary;
    const char *details; /* extra paragraphs for --help, or NULL */
    const struct opt *opts;
    int min_pos, max_pos; /* positional arguments after the command words */
    const char *pos_name; /* what they are ("ORDER"), for the missing-argument message */
    enum og_status (*run)(struct ctl *ctl, const struct opt_args *a, json_t **result,
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
extern const struct ctl_command ctl_cmd_release;
extern const struct ctl_command ctl_cmd_amend;
extern const struct ctl_command ctl_cmd_deadline;
extern const struct ctl_command ctl_cmd_show;
extern const struct ctl_command ctl_cmd_exceptions;
extern const struct ctl_command ctl_cmd_exceptions_resolve;
extern const struct ctl_command ctl_cmd_charge_begin;
extern const struct ctl_command ctl_cmd_charge_failed;
extern const struct ctl_command ctl_cmd_schedule;
extern const struct ctl_command ctl_cmd_topics;
extern const struct ctl_command ctl_cmd_archive;
extern const struct ctl_command ctl_cmd_outbox_quarantined;
extern const struct ctl_command ctl_cmd_outbox_retry;
extern const struct ctl_command ctl_cmd_check_add;
extern const struct ctl_command ctl_cmd_check_drop;
extern const struct ctl_command ctl_cmd_check_list;
/* The drill (drill/run.c): races payments against cancellations through the real consumers and
 * scanner, then reconciles; its result is the report, and violations are a failure (exit 1). */
extern const struct ctl_command ctl_cmd_drill;

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
/* Prints the objects of `list` as a table: column c is member keys[c] of each object under
 * heads[c] (ctl_json_text renders it). Prints nothing for an empty list; the caller says so. */
void ctl_table_print_list(FILE *out, const json_t *list, size_t ncols, const char *const *heads,
                          const char *const *keys);

/* ---- query results ----------------------------------------------------- */

/* Column kinds for ctl_rows_json: one letter per column. */
#define CTL_COL_TEXT    't' /* a JSON string as PostgreSQL prints it */
#define CTL_COL_INTEGER 'i' /* a JSON number */
#define CTL_COL_TIME    'T' /* a timestamptz in the contract format (ctl_pg_time_iso) */

/* The rows of res as a new JSON array of objects: column c (0 <= c < strlen(kinds)) is member
 * cols[c], of kind kinds[c]; SQL NULL is JSON null. *list is NULL on error (out of memory). */
enum og_status ctl_rows_json(const PGresult *res, const char *const *cols, const char *kinds,
                             json_t **list, struct og_error *err);
/* A list command's answer: {"command": command, "ok": true, key: the rows of res as
 * ctl_rows_json makes them}, new in *result (the caller may add members); *result is untouched
 * on error. */
enum og_status ctl_list_json(const PGresult *res, const char *const *cols, const char *kinds,
                             const char *command, const char *key, json_t **result,
                             struct og_error *err);

/* When err is a permission refusal (SQLSTATE 42501), appends "(<what> needs the role
 * <role>)" to its message, so the operator learns which grant is missing. */
void ctl_error_needs_role(struct og_error *err, const char *what, const char *role);

/* Sets a member, taking the reference; a NULL value (allocation failure)
 * becomes a JSON null so callers need not check every call. */
void ctl_json_set(json_t *obj, const char *key, json_t *value);
/* json_string() that maps NULL to JSON null. */
json_t *ctl_json_str_or_null(const char *s);

#endif
