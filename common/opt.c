#include "common/opt.h"

#include <stdlib.h>
#include <string.h>

#define BOTH (OPT_CONSUMER | OPT_SCANNER)

/* The services' flags. A flag for a setting names it here and nowhere else; opt_help prints
 * each row's help with the setting's name, default and bounds from the table of common/cfg.c,
 * so no help text restates them. */
const struct opt opt_services[] = {
    {"config", "FILE", 0,
     "libconfig file; every setting is optional (docs/settings.md, deploy/ordergate.conf) and "
     "the flags override it",
     NULL, 0, BOTH},
    {"db", "CONNINFO", 0,
     "libpq conninfo or URI; empty: PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD and the "
     "rest of libpq's environment",
     "database.conninfo", 0, BOTH},
    {"brokers", "HOST:PORT,...", 0, "Kafka bootstrap brokers", "kafka.brokers", 0, BOTH},
    {"topics", "A,B", 0, "delay topics to consume, one per delay level", "kafka.topics", 0, BOTH},
    {"group", "ID", 0, "consumer group id", "kafka.group", 0, BOTH},
    {"group-instance-id", "ID", 0,
     "static group membership: a restarted instance gets its partitions back at once; one id "
     "per running instance. Empty: HOSTNAME-$ORDERGATE_INSTANCE when that is set, else dynamic "
     "membership",
     "kafka.group_instance_id", 0, OPT_CONSUMER},
    {"lock-timeout-ms", "MS", 0, "longest wait of a statement for a lock; 0 = the server's",
     "database.lock_timeout_ms", 0, BOTH},
    {"statement-timeout-ms", "MS", 0, "longest statement (not --reconcile's); 0 = the server's",
     "database.statement_timeout_ms", 0, BOTH},
    {"pool-mode", "MODE", 0,
     "session, or transaction behind a transaction-pooling PgBouncer: no named statements, "
     "nothing kept in the session",
     "database.pool_mode", 0, BOTH},
    {"batch-size", "N", 0, "most orders per claim statement", "consumer.batch_size", 0,
     OPT_CONSUMER},
    {"metrics-listen", "ADDR:PORT", 0,
     "HTTP endpoint for /metrics, /healthz, /readyz; \"\" disables it, port 0 picks a free "
     "port (logged as metrics_listening)",
     "consumer.metrics_listen", 0, OPT_CONSUMER},
    {"busy-retry-ms", "MS", 0,
     "how long an order whose row another transaction holds locked is claimed again locally "
     "before it is re-scheduled through a delay topic",
     "consumer.busy_retry_ms", 0, OPT_CONSUMER},
    {"claim-sessions", "N", 0,
     "database sessions a burst's claim is split across at once (1: one session, no threads)",
     "consumer.claim_sessions", 0, OPT_CONSUMER},
    {"batch-size", "N", 0, "orders per claim statement", "scanner.batch_size", 0, OPT_SCANNER},
    {"grace", "SECONDS", 0, "only orders overdue by more than this", "scanner.grace_s", 0,
     OPT_SCANNER},
    {"pause-ms", "MS", 0, "pause between batches", "scanner.pause_ms", 0, OPT_SCANNER},
    {"max-orders", "N", 0, "cap per run, 0 = none", "scanner.max_orders", 0, OPT_SCANNER},
    {"max-seconds", "S", 0, "time cap per run, 0 = none", "scanner.max_seconds", 0, OPT_SCANNER},
    {"every", "SECONDS", 0, "repeat sweep runs every SECONDS until SIGTERM or SIGINT; 0 = one run",
     "scanner.every_s", 0, OPT_SCANNER},
    {"workers", "N", 0,
     "database sessions that claim pages in parallel; the run's own session reads the pages",
     "scanner.workers", 0, OPT_SCANNER},
    {"max-skip", "SECONDS", 0,
     "a run skipped (the lease held) while the last sweep is older than this exits 4; 0 = 3 x "
     "--every, or 180",
     "scanner.max_skip_s", 0, OPT_SCANNER},
    {"busy-retry-ms", "MS", 0,
     "how long orders locked by another transaction are claimed again at the end of a run",
     "scanner.busy_retry_ms", 0, OPT_SCANNER},
    {"lease-s", "SECONDS", 0,
     "the sweep lease lasts this (plus --pause-ms) past each batch: longer than one batch; a "
     "run that died keeps later runs out this long",
     "scanner.lease_s", 0, OPT_SCANNER},
    {"textfile", "PATH", 0, "Prometheus textfile for node_exporter", "scanner.textfile_path", 0,
     OPT_SCANNER},
    {"log-level", "LEVEL", 0, "debug, info, warn or error", "log_level", 0, OPT_SCANNER},
    {"dry-run", NULL, 0,
     "report what a sweep would cancel now and change nothing; with --reconcile: check "
     "without repairing",
     NULL, 0, OPT_SCANNER},
    {"reconcile", NULL, 0,
     "check the invariants, repair missing late-payment exceptions (not with --dry-run), "
     "print a report",
     NULL, 0, OPT_SCANNER},
    {"since", "TIME", 0,
     "--reconcile: only orders created since TIME (RFC 3339, e.g. 2026-11-30T00:00:00Z, or an "
     "age such as 90m, 24h, 7d), or 'all' for the whole database; default: the last "
     "scanner.reconcile_window_s",
     NULL, 0, OPT_SCANNER},
    {"scan-interval", "S", 0,
     "--reconcile: how often sweeps run, in seconds (invariant 6); default scanner.every_s "
     "when set, else 300",
     NULL, 0, OPT_SCANNER},
    {"check-config", NULL, 0,
     "validate the configuration as a start would (file, flags, environment, password files, "
     "the Kafka settings where they are used), print it with secrets masked and exit: 0 valid, "
     "2 invalid",
     NULL, 0, BOTH},
    {"check-health", NULL, 0,
     "read the health file (consumer.health_file) a running consumer rewrites every second: "
     "exit 0 when it is fresh, 1 when it is stale or missing, 2 when none is configured. Needs "
     "no network: a liveness probe that no flood of the metrics port can fail",
     NULL, 0, OPT_CONSUMER},
    {"check-ready", NULL, 0,
     "the same, and 1 unless the consumer also reaches the database and the broker (what "
     "/readyz says)",
     NULL, 0, OPT_CONSUMER},
    {"list-settings", "FORMAT", OPT_OPTIONAL,
     "print the settings table and exit: one tab-separated line per setting (name, flag, type, "
     "default, bounds); =markdown: the reference docs/settings.md; =conf: the commented "
     "example deploy/ordergate.conf",
     NULL, 0, BOTH},
    {"help", NULL, 0, "print this help and exit", NULL, 'h', BOTH},
    {"version", NULL, 0, "print the version and exit", NULL, 'V', BOTH},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

static bool opt_for(const struct opt *o, unsigned prog)
{
    return o->progs == 0 || (o->progs & prog) != 0;
}

/* The row for "--name" (len bytes of name) or, with alias != 0, for "-alias". */
static const struct opt *opt_find(const struct opt *table, unsigned prog, const char *name,
                                  size_t len, char alias)
{
    for (const struct opt *o = table; o != NULL && o->name != NULL; o++) {
        if (!opt_for(o, prog))
            continue;
        if (alias != 0 ? o->alias == alias
                       : strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    }
    return NULL;
}

static enum og_status opt_add(struct opt_args *a, const struct opt *opt, const char *value,
                              struct og_error *err)
{
    if (!(opt->flags & OPT_REPEAT)) {
        for (int i = 0; i < a->nseen; i++)
            if (a->seen[i].opt == opt)
                return og_error_set(err, OG_ERR_ARG, false, "--%s: given more than once",
                                    opt->name);
    }
    a->seen[a->nseen].opt = opt;
    a->seen[a->nseen].value = value;
    a->nseen++;
    return OG_OK;
}

enum og_status opt_parse(struct opt_args *a, const struct opt *first, const struct opt *second,
                         unsigned prog, int argc, char **argv, struct og_error *err)
{
    bool only_pos = false;
    enum og_status st = OG_OK;

    memset(a, 0, sizeof(*a));
    /* Every argument is at most one option or one positional: argc bounds both. */
    a->seen = calloc((size_t)argc + 1, sizeof(*a->seen));
    a->pos = calloc((size_t)argc + 1, sizeof(*a->pos));
    if (a->seen == NULL || a->pos == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");

    for (int i = 0; i < argc && st == OG_OK; i++) {
        const char *arg = argv[i];
        const char *name = arg + 2, *eq = NULL;
        const struct opt *opt;
        size_t len = 0;
        char alias = 0;

        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (arg[1] != '-') {
            if (arg[2] != '\0')
                return og_error_set(err, OG_ERR_ARG, false,
                                    "unknown option '%s' (options are long: --name)", arg);
            alias = arg[1];
        } else {
            eq = strchr(name, '=');
            len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        }
        opt = opt_find(first, prog, name, len, alias);
        if (opt == NULL)
            opt = opt_find(second, prog, name, len, alias);
        if (opt == NULL && alias != 0)
            return og_error_set(err, OG_ERR_ARG, false, "unknown option '%s'", arg);
        if (opt == NULL)
            return og_error_set(err, OG_ERR_ARG, false, "unknown option '--%.*s'", (int)len, name);
        if (opt->metavar == NULL || (opt->flags & OPT_OPTIONAL) != 0) {
            if (eq != NULL && opt->metavar != NULL)
                st = opt_add(a, opt, eq + 1, err);
            else if (eq != NULL)
                return og_error_set(err, OG_ERR_ARG, false, "--%s: takes no value", opt->name);
            else
                st = opt_add(a, opt, NULL, err);
        } else if (eq != NULL) {
            st = opt_add(a, opt, eq + 1, err);
        } else if (i + 1 < argc) {
            st = opt_add(a, opt, argv[++i], err);
        } else {
            return og_error_set(err, OG_ERR_ARG, false, "--%s: needs a value (%s)", opt->name,
                                opt->metavar);
        }
    }
    return st;
}

void opt_args_free(struct opt_args *a)
{
    if (a == NULL)
        return;
    free(a->seen);
    free(a->pos);
    memset(a, 0, sizeof(*a));
}

const char *opt_arg(const struct opt_args *a, const char *name)
{
    const char *v = NULL;

    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0)
            v = a->seen[i].value;
    return v;
}

bool opt_flag(const struct opt_args *a, const char *name)
{
    return opt_count(a, name) > 0;
}

int opt_count(const struct opt_args *a, const char *name)
{
    int n = 0;

    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0)
            n++;
    return n;
}

const char *opt_nth(const struct opt_args *a, const char *name, int nth)
{
    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0 && nth-- == 0)
            return a->seen[i].value;
    return NULL;
}

enum og_status opt_configure(struct og_config *cfg, const struct opt_args *a, struct og_error *err)
{
    const char *path = opt_arg(a, "config");
    enum og_status st;

    st = cfg_init(cfg, err);
    if (st == OG_OK && path != NULL)
        st = cfg_load(cfg, path, err);
    if (st == OG_OK)
        st = cfg_apply_env(cfg, err);
    for (int i = 0; st == OG_OK && i < a->nseen; i++) {
        const struct opt *o = a->seen[i].opt;
        if (o->setting != NULL)
            st = cfg_set_flag(cfg, o->setting, a->seen[i].value, o->name, err);
    }
    return st;
}

void opt_list_settings(FILE *out, unsigned prog)
{
    struct cfg_setting_info info;

    for (size_t i = 0; cfg_setting_info(i, &info); i++) {
        const struct opt *flag = NULL;
        char bounds[64] = "-";

        for (const struct opt *o = opt_services; o->name != NULL && flag == NULL; o++)
            if (opt_for(o, prog) && o->setting != NULL && strcmp(o->setting, info.name) == 0)
                flag = o;
        if (strcmp(info.type, "int") == 0)
            snprintf(bounds, sizeof(bounds), "%ld..%ld", info.min, info.max);
        fprintf(out, "%s\t%s%s\t%s\t%s\t%s\n", info.name, flag != NULL ? "--" : "-",
                flag != NULL ? flag->name : "", info.type, info.def, bounds);
    }
}

/* Appends the words of text to out at column OPT_HELP_COLUMN, wrapped before OPT_HELP_WIDTH;
 * *col is the current column. */
#define OPT_HELP_COLUMN 28
#define OPT_HELP_WIDTH  80

static void opt_help_words(FILE *out, const char *text, int *col)
{
    while (*text != '\0') {
        const char *end = strchr(text, ' ');
        int len = end != NULL ? (int)(end - text) : (int)strlen(text);

        if (*col > OPT_HELP_COLUMN && *col + 1 + len >= OPT_HELP_WIDTH) {
            fprintf(out, "\n%*s", OPT_HELP_COLUMN, "");
            *col = OPT_HELP_COLUMN;
        } else if (*col > OPT_HELP_COLUMN) {
            fputc(' ', out);
            (*col)++;
        }
        fprintf(out, "%.*s", len, text);
        *col += len;
        text += len;
        while (*text == ' ')
            text++;
    }
}

/* "(consumer.batch_size; default 500, 1..10000)": the setting as the table has it. */
static void opt_help_setting(char *buf, size_t size, const char *name, unsigned prog)
{
    struct cfg_setting_info info;
    size_t used;

    for (size_t i = 0; cfg_setting_info(i, &info); i++) {
        if (strcmp(info.name, name) != 0)
            continue;
        if (strcmp(info.type, "int") == 0)
            used = (size_t)snprintf(buf, size, "(%s; default %s, %ld..%ld", name, info.def,
                                    info.min, info.max);
        else if (strcmp(info.type, "string") == 0)
            used = (size_t)snprintf(buf, size, "(%s; default \"%s\"", name, info.def);
        else
            used = (size_t)snprintf(buf, size, "(%s; default %s", name, info.def);
        if (used < size && info.env != NULL)
            used += (size_t)snprintf(buf + used, size - used, ", or $%s", info.env);
        if (used < size && (info.progs & prog) == 0)
            used += (size_t)snprintf(buf + used, size - used, "; accepted, unused here");
        if (used < size)
            snprintf(buf + used, size - used, ")");
        return;
    }
    snprintf(buf, size, "(%s)", name);
}

void opt_help(FILE *out, const struct opt *table, unsigned prog)
{
    for (const struct opt *o = table; o != NULL && o->name != NULL; o++) {
        char left[96], setting[256];
        int col;

        if (!opt_for(o, prog))
            continue;
        if (o->alias != 0)
            col = snprintf(left, sizeof(left), "  -%c, --%s", o->alias, o->name);
        else
            col = snprintf(left, sizeof(left), "  --%s", o->name);
        if (o->metavar != NULL)
            col += snprintf(left + col, sizeof(left) - (size_t)col,
                            (o->flags & OPT_OPTIONAL) != 0 ? "[=%s]" : " %s", o->metavar);
        fputs(left, out);
        if (col + 2 > OPT_HELP_COLUMN)
            fprintf(out, "\n%*s", OPT_HELP_COLUMN, "");
        else
            fprintf(out, "%*s", OPT_HELP_COLUMN - col, "");
        col = OPT_HELP_COLUMN; /* at the column, the first word gets no space before it */
        opt_help_words(out, o->help != NULL ? o->help : "", &col);
        if (o->setting != NULL) {
            opt_help_setting(setting, sizeof(setting), o->setting, prog);
            opt_help_words(out, setting, &col);
        }
        fputc('\n', out);
    }
}

void opt_error_print(const char *prog, const struct og_config *cfg, const struct og_error *err)
{
    char line[sizeof(err->msg) + 300];

    cfg_error_format(cfg, err, line, sizeof(line));
    fprintf(stderr, "%s: %s%s%s%s\n", prog, line, err->status == OG_ERR_ARG ? " (see " : "",
            err->status == OG_ERR_ARG ? prog : "", err->status == OG_ERR_ARG ? " --help)" : "");
}
