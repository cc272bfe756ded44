/* The one command-line parser of ordergate, and the flag-to-setting table of the services.
 *
 * Every program (ordergate-consumer, ordergate-scanner, ordergatectl and its commands, the
 * drill among them) describes its options as rows of struct opt and parses argv with
 * opt_parse(), so each accepts the same forms and refuses the same things in the same words:
 * "--name value", "--name=value", a row's one-letter alias ("-h"), "--" before positionals
 * that start with a dash; an unknown option, a missing value, a value given to a flag, or a
 * non-repeatable option given twice is OG_ERR_ARG. A row with a `setting` sets that
 * configuration setting (common/cfg.c): opt_configure() applies those in command-line order
 * over the file and the environment, and records the flag as where the value came from, so
 * an error about the setting is reported as "--flag: setting: problem".
 *
 * The services' rows are one table (opt_services) shared by ordergate-consumer and
 * ordergate-scanner; a row's `progs` says which of them accepts it, and its `help`, with the
 * setting's default and bounds, is the line of their --help (opt_help). */
#ifndef OG_COMMON_OPT_H
#define OG_COMMON_OPT_H

#include <stdbool.h>
#include <stdio.h>

#include "common/cfg.h"
#include "common/error.h"

/* OPT_OPTIONAL: a row with a metavar whose value is optional and only given as "--name=value"
 * ("--list-settings" or "--list-settings=markdown"); opt_arg() is NULL without it. */
enum { OPT_ARG = 1, OPT_REPEAT = 2, OPT_OPTIONAL = 4 };

/* Which service accepts a row of opt_services; 0 = every program. The same bits as the
 * programs of a setting (CFG_PROG_*). */
enum { OPT_CONSUMER = CFG_PROG_CONSUMER, OPT_SCANNER = CFG_PROG_SCANNER };

struct opt {
    const char *name;    /* long name without the dashes */
    const char *metavar; /* what the value is ("N"), or NULL for a flag without value */
    unsigned flags;      /* OPT_* */
    const char *help;    /* what it does, for --help (opt_help adds the setting's default) */
    const char *setting; /* the configuration setting it sets, or NULL */
    char alias;          /* one-letter alias ('h' for -h), or 0 */
    unsigned progs;      /* OPT_CONSUMER | OPT_SCANNER; 0 = every program */
};

struct opt_seen {
    const struct opt *opt;
    const char *value; /* NULL for a flag */
};

/* Parsed command line: options in the order given, then positionals. Values point into argv
 * (not copied). */
struct opt_args {
    struct opt_seen *seen;
    int nseen;
    const char **pos;
    int npos;
};

/* The services' options, ending with a zero row. */
extern const struct opt opt_services[];

/* Parses argv[0..argc) (no program name) against two tables (the first wins a name both
 * have; either may be NULL; both end with a zero row), taking only rows whose progs is 0 or
 * includes prog. */
enum og_status opt_parse(struct opt_args *a, const struct opt *first, const struct opt *second,
                         unsigned prog, int argc, char **argv, struct og_error *err);
void opt_args_free(struct opt_args *a);
/* Last value of an option, or NULL when absent. */
const char *opt_arg(const struct opt_args *a, const char *name);
bool opt_flag(const struct opt_args *a, const char *name);
/* Number of times an option was given; opt_nth() returns the i-th value. */
int opt_count(const struct opt_args *a, const char *name);
const char *opt_nth(const struct opt_args *a, const char *name, int i);

/* The configuration of a run: defaults, the file of --config (when given), the environment
 * fallbacks, then every option with a setting, in command-line order. */
enum og_status opt_configure(struct og_config *cfg, const struct opt_args *a, struct og_error *err);
/* --list-settings: one line per setting of the table, tab-separated,
 *   name  flag  type  default  bounds
 * flag "--batch-size" when prog accepts an option for it, else "-"; type string, int, bool
 * or strlist; bounds "MIN..MAX" for an int, else "-". */
void opt_list_settings(FILE *out, unsigned prog);
/* The option rows of a --help: for each row of table that prog accepts, "--name METAVAR" (or
 * "-h, --help", "--name[=METAVAR]") and its help wrapped at column 28 under 80 columns; a row
 * with a setting adds "(setting; default D, MIN..MAX, or $ENV)" from the settings table, and
 * "accepted, unused here" when the setting is not one prog reads. */
void opt_help(FILE *out, const struct opt *table, unsigned prog);
/* Prints "<prog>: <message>" on stderr, one line, located by cfg (cfg_error_format; cfg may
 * be NULL) and, for a usage error (OG_ERR_ARG), followed by " (see <prog> --help)". */
void opt_error_print(const char *prog, const struct og_config *cfg, const struct og_error *err);

#endif
