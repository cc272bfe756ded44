#include "common/opt.h"

#include <stdlib.h>
#include <string.h>

#define BOTH (OPT_CONSUMER | OPT_SCANNER)

/* The services' flags. A flag for a setting names it here and nowhere else; --help texts in
 * consumer/main.c and scanner/main.c describe them. */
const struct opt opt_services[] = {
    {"config", "FILE", 0, "libconfig file", NULL, 0, BOTH},
    {"db", "CONNINFO", 0, "libpq conninfo or URI", "database.conninfo", 0, BOTH},
    {"brokers", "HOST:PORT,...", 0, "Kafka bootstrap brokers", "kafka.brokers", 0, BOTH},
    {"topics", "A,B", 0, "delay topics", "kafka.topics", 0, BOTH},
    {"group", "ID", 0, "consumer group id", "kafka.group", 0, BOTH},
    {"group-instance-id", "ID", 0, "static group membership", "kafka.group_instance_id", 0,
     OPT_CONSUMER},
    {"lock-timeout-ms", "MS", 0, "longest wait for a row lock", "database.lock_timeout_ms", 0,
     BOTH},
    {"statement-timeout-ms", "MS", 0, "longest statement", "database.statement_timeout_ms", 0,
     BOTH},
    {"pool-mode", "MODE", 0, "session, or transaction behind a transaction-pooling PgBouncer",
     "database.pool_mode", 0, BOTH},
    {"batch-size", "N", 0, "orders per claim", "consumer.batch_size", 0, OPT_CONSUMER},
    {"metrics-listen", "ADDR:PORT", 0, "HTTP endpoint", "consumer.metrics_listen", 0, OPT_CONSUMER},
    {"busy-retry-ms", "MS", 0, "how long a locked order is retried locally",
     "consumer.busy_retry_ms", 0, OPT_CONSUMER},
    {"batch-size", "N", 0, "orders per claim", "scanner.batch_size", 0, OPT_SCANNER},
    {"grace", "SECONDS", 0, "grace period", "scanner.grace_s", 0, OPT_SCANNER},
    {"pause-ms", "MS", 0, "pause between batches", "scanner.pause_ms", 0, OPT_SCANNER},
    {"max-orders", "N", 0, "cap per run", "scanner.max_orders", 0, OPT_SCANNER},
    {"max-seconds", "S", 0, "time cap per run", "scanner.max_seconds", 0, OPT_SCANNER},
    {"every", "SECONDS", 0, "repeat runs", "scanner.every_s", 0, OPT_SCANNER},
    {"workers", "N", 0, "claiming sessions", "scanner.workers", 0, OPT_SCANNER},
    {"max-skip", "SECONDS", 0, "alarm on skips past this", "scanner.max_skip_s", 0, OPT_SCANNER},
    {"busy-retry-ms", "MS", 0, "how long locked orders are retried", "scanner.busy_retry_ms", 0,
     OPT_SCANNER},
    {"lease-s", "SECONDS", 0, "sweep lease past each batch", "scanner.lease_s", 0, OPT_SCANNER},
    {"textfile", "PATH", 0, "Prometheus textfile", "scanner.textfile_path", 0, OPT_SCANNER},
    {"log-level", "LEVEL", 0, "debug, info, warn or error", "log_level", 0, OPT_SCANNER},
    {"dry-run", NULL, 0, "report only", NULL, 0, OPT_SCANNER},
    {"reconcile", NULL, 0, "check the invariants", NULL, 0, OPT_SCANNER},
    {"since", "TIME", 0, "--reconcile: orders created since", NULL, 0, OPT_SCANNER},
    {"scan-interval", "S", 0, "--reconcile: how often sweeps run", NULL, 0, OPT_SCANNER},
    {"check-config", NULL, 0, "validate the configuration and exit", NULL, 0, BOTH},
    {"check-health", NULL, 0, "judge the health file: live", NULL, 0, OPT_CONSUMER},
    {"check-ready", NULL, 0, "judge the health file: live and ready", NULL, 0, OPT_CONSUMER},
    {"list-settings", NULL, 0, "print the settings table and exit", NULL, 0, BOTH},
    {"help", NULL, 0, "print help and exit", NULL, 'h', BOTH},
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
        if (opt->metavar == NULL) {
            if (eq != NULL)
                return og_error_set(err, OG_ERR_ARG, false, "--%s: takes no value", opt->name);
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

void opt_error_print(const char *prog, const struct og_config *cfg, const struct og_error *err)
{
    char line[sizeof(err->msg) + 300];

    cfg_error_format(cfg, err, line, sizeof(line));
    fprintf(stderr, "%s: %s%s%s%s\n", prog, line, err->status == OG_ERR_ARG ? " (see " : "",
            err->status == OG_ERR_ARG ? prog : "", err->status == OG_ERR_ARG ? " --help)" : "");
}
