/* The drivers' command lines (bench_opt.h): the rows turned into common/opt's, the values
 * stored by kind, --help printed from the rows. */
#include "tools/bench/support/bench_opt.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/opt.h"
#include "common/parse.h"
#include "tools/bench/support/bench_run.h"

/* Help text starts in this column, unless an option's left side is longer. */
#define BENCH_OPT_HELP_COL 22

static const struct bench_opt bench_opt_help_row =
    BENCH_ON("help", "print this help and exit", NULL);

static void bench_opt_print_row(FILE *out, const struct bench_opt *r)
{
    char left[96];
    int width;

    width = snprintf(left, sizeof(left), "--%s%s%s", r->name, r->metavar ? " " : "",
                     r->metavar ? r->metavar : "");
    fprintf(out, "  %s", left);
    if (width > BENCH_OPT_HELP_COL - 1)
        fprintf(out, "\n%*s", BENCH_OPT_HELP_COL + 2, "");
    else
        fprintf(out, "%*s", BENCH_OPT_HELP_COL - width, "");
    for (const char *line = r->help; line != NULL;) {
        const char *nl = strchr(line, '\n');
        fprintf(out, "%.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
        line = nl ? nl + 1 : NULL;
        if (line != NULL)
            fprintf(out, "%*s", BENCH_OPT_HELP_COL + 2, "");
    }
}

static void bench_opt_usage(FILE *out, const char *prog, const char *about, const char *tail,
                            const struct bench_opt *rows)
{
    fprintf(out, "usage: %s [options]\n", prog);
    if (about != NULL)
        fprintf(out, "%s", about);
    for (const struct bench_opt *r = rows; r->name != NULL; r++)
        bench_opt_print_row(out, r);
    bench_opt_print_row(out, &bench_opt_help_row);
    if (tail != NULL)
        fprintf(out, "%s", tail);
}

static int bench_opt_ints(const char *list, long min, long max, int *out, int cap)
{
    char buf[256], *save = NULL;
    int n = 0;

    if (strlen(list) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (n == cap || parse_long(t, min, max, &v) != 0)
            return -1;
        out[n++] = (int)v;
    }
    return n > 0 ? n : -1;
}

static int bench_opt_words(const struct bench_opt *r, const char *list)
{
    char buf[256], *save = NULL;
    int n = 0, any = 0;

    if (strlen(list) >= sizeof(buf))
        return -1;
    for (n = 0; r->words[n] != NULL; n++)
        *r->on[n] = false;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n && strcmp(t, r->words[i]) != 0)
            i++;
        if (i == n)
            return -1;
        *r->on[i] = true;
        any = 1;
    }
    return any ? 0 : -1;
}

/* Stores value by r's kind: 0, or -1 after the message (without the program's name). */
static int bench_opt_store(const struct bench_opt *r, const char *value, char *msg, size_t size)
{
    struct og_error err = {0};
    int64_t v;
    int n, bad = 0;

    switch (r->kind) {
    case BENCH_OPT_ON:
    case BENCH_OPT_OFF:
        *(bool *)r->target = r->kind == BENCH_OPT_ON;
        return 0;
    case BENCH_OPT_INT:
    case BENCH_OPT_LONG: {
        char what[80];
        snprintf(what, sizeof(what), "--%s", r->name);
        if (parse_int64(what, value, r->min, r->max, &v, &err) != OG_OK) {
            snprintf(msg, size, "%s", err.msg);
            return -1;
        }
        if (r->kind == BENCH_OPT_INT)
            *(int *)r->target = (int)v;
        else
            *(long *)r->target = (long)v;
        return 0;
    }
    case BENCH_OPT_INTS:
        n = bench_opt_ints(value, r->min, r->max, r->target, r->cap);
        if (n < 0) {
            snprintf(msg, size,
                     "--%s: expected 1 to %d integers in %ld..%ld, comma-separated, got \"%s\"",
                     r->name, r->cap, r->min, r->max, value);
            return -1;
        }
        *r->count = n;
        return 0;
    case BENCH_OPT_NAME:
        if (!bench_name_valid(value)) {
            snprintf(msg, size,
                     "--%s: expected a database name of a-z, 0-9 and _ (not starting with a "
                     "digit, at most 63 bytes), got \"%s\"",
                     r->name, value);
            return -1;
        }
        /* fall through */
    case BENCH_OPT_STR:
        *(const char **)r->target = value;
        return 0;
    case BENCH_OPT_PATH:
        if (strlen(value) >= PATH_MAX) {
            snprintf(msg, size, "--%s: the path is too long", r->name);
            return -1;
        }
        snprintf(r->target, PATH_MAX, "%s", value);
        return 0;
    case BENCH_OPT_WORDS: {
        size_t used = 0;
        if (bench_opt_words(r, value) == 0)
            return 0;
        used = (size_t)snprintf(msg, size, "--%s: expected a comma-separated list of", r->name);
        for (int i = 0; r->words[i] != NULL && used < size; i++)
            used +=
                (size_t)snprintf(msg + used, size - used, "%s %s", i > 0 ? "," : "", r->words[i]);
        if (used < size)
            snprintf(msg + used, size - used, ", got \"%s\"", value);
        return -1;
    }
    case BENCH_OPT_FN:
        bad = r->fn(r->target, value);
        break;
    }
    if (bad)
        snprintf(msg, size, "--%s: bad value \"%s\"", r->name, value);
    return bad ? -1 : 0;
}

int bench_opt_parse(const char *prog, const char *about, const char *tail,
                    const struct bench_opt *rows, int argc, char **argv)
{
    struct opt_args a = {0};
    struct og_error err = {0};
    struct opt *table;
    char msg[512] = "";
    size_t n = 0;
    int rc = -1;

    while (rows[n].name != NULL)
        n++;
    /* common/opt's rows, in the same order, then --help: a row's index is its bench row's. */
    table = calloc(n + 2, sizeof(*table));
    if (table == NULL)
        bench_die("out of memory");
    for (size_t i = 0; i < n; i++)
        table[i] = (struct opt){.name = rows[i].name,
                                .metavar = rows[i].metavar,
                                .flags = OPT_REPEAT,
                                .help = rows[i].help};
    table[n] = (struct opt){.name = "help", .help = bench_opt_help_row.help, .alias = 'h'};
    if (opt_parse(&a, table, NULL, 0, argc - 1, argv + 1, &err) != OG_OK) {
        snprintf(msg, sizeof(msg), "%s", err.msg);
        goto out;
    }
    if (opt_flag(&a, "help")) {
        bench_opt_usage(stdout, prog, about, tail, rows);
        exit(0);
    }
    if (a.npos > 0) {
        snprintf(msg, sizeof(msg), "unexpected argument '%s'", a.pos[0]);
        goto out;
    }
    for (int i = 0; i < a.nseen; i++)
        if (bench_opt_store(&rows[a.seen[i].opt - table], a.seen[i].value, msg, sizeof(msg)) != 0)
            goto out;
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "%s: %s (see %s --help)\n", prog, msg, prog);
    opt_args_free(&a);
    free(table);
    return rc;
}
