/* ordergatectl: entry point. Global options, configuration, dispatch, exit
 * status. See ctl.h for the contract of a command. */
#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "common/kafka.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/version.h"
#include "tools/ctl/ctl.h"

static const struct opt ctl_global_opts[] = {
    {"config", "FILE", OPT_ARG, "libconfig file (every setting optional; see deploy/)", NULL, 0, 0},
    {"db", "CONNINFO", OPT_ARG,
     "PostgreSQL conninfo or URI (else database.conninfo, else PG* environment)",
     "database.conninfo", 0, 0},
    {"brokers", "HOST:PORT,...", OPT_ARG, "Kafka bootstrap servers (kafka.brokers)",
     "kafka.brokers", 0, 0},
    {"topics", "A,B", OPT_ARG, "delay topics, one per level (kafka.topics; used by schedule)",
     "kafka.topics", 0, 0},
    {"group", "ID", OPT_ARG, "consumer group (kafka.group; accepted for uniformity)", "kafka.group",
     0, 0},
    {"pool-mode", "MODE", OPT_ARG,
     "session, or transaction behind a transaction-pooling PgBouncer (database.pool_mode)",
     "database.pool_mode", 0, 0},
    {"json", NULL, 0, "print one JSON object per command on stdout", NULL, 0, 0},
    {"check-config", NULL, 0, "validate the configuration and exit (0 ok, 2 invalid)", NULL, 0, 0},
    {"version", NULL, 0, "print the version and exit", NULL, 0, 0},
    {"help", NULL, 0, "print help (for a command: ordergatectl COMMAND --help)", NULL, 'h', 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

/* The command table, in the order --help lists it. */
static const struct ctl_command *const ctl_commands[] = {
    &ctl_cmd_migrate,
    &ctl_cmd_place,
    &ctl_cmd_pay,
    &ctl_cmd_hold,
    &ctl_cmd_close,
    &ctl_cmd_release,
    &ctl_cmd_amend,
    &ctl_cmd_deadline,
    &ctl_cmd_charge_begin,
    &ctl_cmd_charge_failed,
    &ctl_cmd_show,
    &ctl_cmd_exceptions,
    &ctl_cmd_exceptions_resolve,
    &ctl_cmd_schedule,
    &ctl_cmd_topics,
    &ctl_cmd_archive,
    &ctl_cmd_drill,
    &ctl_cmd_outbox_quarantined,
    &ctl_cmd_outbox_retry,
    &ctl_cmd_check_add,
    &ctl_cmd_check_drop,
    &ctl_cmd_check_list,
};
#define CTL_NCOMMANDS (sizeof(ctl_commands) / sizeof(ctl_commands[0]))

static int ctl_exit_code(enum og_status st)
{
    switch (st) {
    case OG_OK:
        return 0;
    case OG_ERR_ARG:
    case OG_ERR_CONFIG:
        return 2;
    default:
        return 1;
    }
}

static void ctl_print_opts(FILE *out, const struct opt *opts)
{
    for (const struct opt *o = opts; o->name != NULL; o++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(out, "  %-26s %s\n", left, o->help);
    }
}

static void ctl_help_global(FILE *out)
{
    fprintf(out, "usage: " CTL_PROG " [global options] COMMAND [options] [arguments]\n"
                 "\n"
                 "The operator's tool for ordergate: schema migrations, the order gate by hand,\n"
                 "inspection of orders and exceptions, delayed cancel messages.\n"
                 "\n"
                 "commands:\n");
    for (size_t i = 0; i < CTL_NCOMMANDS; i++)
        fprintf(out, "  %-20s %s\n", ctl_commands[i]->name, ctl_commands[i]->summary);
    fprintf(out, "\nglobal options (before or after the command):\n");
    ctl_print_opts(out, ctl_global_opts);
    fprintf(out,
            "\n"
            "Without --db and database.conninfo, libpq's environment applies (PGHOST, PGPORT,\n"
            "PGUSER, PGDATABASE, PGPASSWORD, ...). Exit status: 0 done (the gate answered,\n"
            "whatever its outcome), 1 runtime failure, 2 bad usage or configuration.\n"
            "Run '" CTL_PROG " COMMAND --help' for a command's options.\n");
}

static void ctl_help_command(FILE *out, const struct ctl_command *cmd)
{
    fprintf(out, "usage: " CTL_PROG " %s\n\n%s\n", cmd->usage, cmd->summary);
    if (cmd->details != NULL)
        fprintf(out, "\n%s", cmd->details);
    if (cmd->opts != NULL && cmd->opts[0].name != NULL) {
        fprintf(out, "\noptions:\n");
        ctl_print_opts(out, cmd->opts);
    }
    fprintf(out,
            "\nGlobal options (--config, --db, --brokers, --topics, --json, ...): see " CTL_PROG
            " --help.\n");
}

static void ctl_version(bool json)
{
    const char *jv = JANSSON_VERSION;

    if (json) {
        json_t *o = json_object();
        ctl_json_set(o, "command", json_string("version"));
        ctl_json_set(o, "ok", json_true());
        ctl_json_set(o, "version", json_string(OG_VERSION));
        ctl_json_set(o, "librdkafka", json_string(rd_kafka_version_str()));
        ctl_json_set(o, "libpq", json_integer(PQlibVersion()));
        ctl_json_set(o, "jansson", json_string(jv));
        ctl_print_json(o);
        json_decref(o);
        return;
    }
    printf(CTL_PROG " %s (librdkafka %s, libpq %d, jansson %s)\n", OG_VERSION,
           rd_kafka_version_str(), PQlibVersion(), jv);
}

struct db *ctl_db(struct ctl *ctl, struct og_error *err)
{
    /* No session bounds for the operator's tool (a migration may take long), only how it
     * talks to the server. The application name is the actor the gate records for this tool. */
    static const struct cfg_db_open_opts opts = {.no_bounds = true};

    if (ctl->db == NULL)
        cfg_db_open(&ctl->cfg, CTL_PROG, &opts, &signals_stop, &ctl->db, err);
    return ctl->db;
}

/* Configuration: defaults, then the file, then the environment defaults, then the flags
 * (which win). */
static enum og_status ctl_config(struct ctl *ctl, const struct opt_args *a, struct og_error *err)
{
    int level;

    if (opt_configure(&ctl->cfg, a, err) != OG_OK)
        return err->status;
    level = log_level_parse(ctl->cfg.log_level);
    log_set_level(level >= 0 ? (enum log_level)level : LOG_LVL_INFO);
    return OG_OK;
}

/* Finds the command at argv[*i] ("exceptions resolve" takes two words) and
 * advances *i past its words. */
static const struct ctl_command *ctl_command_find(int argc, char **argv, int *i)
{
    const struct ctl_command *best = NULL;
    int best_words = 0;

    for (size_t c = 0; c < CTL_NCOMMANDS; c++) {
        const char *name = ctl_commands[c]->name;
        const char *space = strchr(name, ' ');
        int words = space ? 2 : 1;
        size_t len0 = space ? (size_t)(space - name) : strlen(name);

        if (strlen(argv[*i]) != len0 || strncmp(argv[*i], name, len0) != 0)
            continue;
        if (words == 2 && (*i + 1 >= argc || strcmp(argv[*i + 1], space + 1) != 0))
            continue;
        if (words > best_words) {
            best = ctl_commands[c];
            best_words = words;
        }
    }
    *i += best_words;
    return best;
}

static bool ctl_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

static const struct opt *ctl_global_find(const char *arg)
{
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");

    if (strcmp(arg, "-h") == 0) {
        name = "help";
        len = 4;
    } else if (strncmp(arg, "--", 2) != 0) {
        return NULL;
    }
    for (const struct opt *o = ctl_global_opts; o->name != NULL; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* Reports a failure: one line on stderr; with --json also the result object
 * (partial or new) with ok=false on stdout. */
static void ctl_report_error(const struct ctl *ctl, const char *cmd_name, json_t *result,
                             const struct og_error *err, int code)
{
    char hint[96] = "", located[sizeof(err->msg) + 300], msg[sizeof(located)];
    size_t len = 0;

    /* Located like every program's errors ("--topics: ...", "FILE:LINE: ..."), on one line:
     * libpq's messages carry newlines and tabs. */
    cfg_error_format(&ctl->cfg, err, located, sizeof(located));
    for (const char *p = located; *p != '\0' && len + 1 < sizeof(msg); p++) {
        if (*p == '\n' || *p == '\t' || *p == '\r') {
            if (len > 0 && msg[len - 1] != ' ')
                msg[len++] = ' ';
            continue;
        }
        msg[len++] = *p;
    }
    while (len > 0 && msg[len - 1] == ' ')
        len--;
    msg[len] = '\0';
    if (code == 2 && err->status == OG_ERR_ARG)
        snprintf(hint, sizeof(hint), " (see " CTL_PROG "%s%s --help)", cmd_name ? " " : "",
                 cmd_name ? cmd_name : "");
    fprintf(stderr, CTL_PROG "%s%s: %s%s\n", cmd_name ? " " : "", cmd_name ? cmd_name : "", msg,
            hint);
    if (ctl->json) {
        json_t *o = result != NULL ? json_incref(result) : json_object();
        if (json_object_get(o, "command") == NULL)
            ctl_json_set(o, "command", json_string(cmd_name ? cmd_name : ""));
        ctl_json_set(o, "ok", json_false());
        ctl_json_set(o, "error", json_string(msg));
        ctl_json_set(o, "exit", json_integer(code));
        if (err->sqlstate[0] != '\0')
            ctl_json_set(o, "sqlstate", json_string(err->sqlstate));
        ctl_print_json(o);
        json_decref(o);
    }
}

int main(int argc, char **argv)
{
    struct ctl ctl;
    struct opt_args a;
    struct og_error err;
    const struct ctl_command *cmd = NULL;
    json_t *result = NULL;
    char **rest = NULL;
    int nrest = 0, i = 1, code = 0;
    enum og_status st = OG_OK;
    bool help = ctl_wants_help(argc, argv);

    memset(&ctl, 0, sizeof(ctl));
    memset(&a, 0, sizeof(a));
    og_error_clear(&err);
    log_init(CTL_PROG, LOG_LVL_INFO);
    signals_install();
    for (int k = 1; k < argc; k++)
        if (strcmp(argv[k], "--json") == 0)
            ctl.json = true;

    /* Options before the command are global ones only. */
    while (i < argc && argv[i][0] == '-' && argv[i][1] != '\0' && strcmp(argv[i], "--") != 0) {
        const struct opt *o = ctl_global_find(argv[i]);
        if (o == NULL) {
            st = og_error_set(&err, OG_ERR_ARG, false,
                              "unknown option '%s' before the command (command options go "
                              "after the command)",
                              argv[i]);
            goto out;
        }
        i += (o->metavar != NULL && strchr(argv[i], '=') == NULL) ? 2 : 1;
    }
    if (i < argc && strcmp(argv[i], "--") == 0)
        i++;
    if (i < argc && strcmp(argv[i], "help") == 0) {
        /* "ordergatectl help [COMMAND]" */
        int j = i + 1;
        cmd = j < argc ? ctl_command_find(argc, argv, &j) : NULL;
        if (j < argc && cmd == NULL) {
            st = og_error_set(&err, OG_ERR_ARG, false, "unknown command '%s'", argv[j]);
            goto out;
        }
        if (cmd != NULL)
            ctl_help_command(stdout, cmd);
        else
            ctl_help_global(stdout);
        goto out;
    }
    /* Everything but the command words: the options before it and the rest. */
    rest = calloc((size_t)argc, sizeof(*rest));
    if (rest == NULL) {
        st = og_error_set(&err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    if (i < argc) {
        int first = i;
        cmd = ctl_command_find(argc, argv, &i);
        if (cmd == NULL) {
            st = og_error_set(&err, OG_ERR_ARG, false, "unknown command '%s'", argv[first]);
            goto out;
        }
        for (int k = 1; k < first; k++)
            if (strcmp(argv[k], "--") != 0)
                rest[nrest++] = argv[k];
    } else {
        i = 1; /* no command: global options only */
    }
    for (int k = i; k < argc; k++)
        rest[nrest++] = argv[k];

    if (help) {
        if (cmd != NULL)
            ctl_help_command(stdout, cmd);
        else
            ctl_help_global(stdout);
        goto out;
    }
    st = opt_parse(&a, cmd != NULL ? cmd->opts : NULL, ctl_global_opts, 0, nrest, rest, &err);
    if (st != OG_OK)
        goto out;
    ctl.json = opt_flag(&a, "json");
    if (opt_flag(&a, "version")) {
        ctl_version(ctl.json);
        goto out;
    }
    st = ctl_config(&ctl, &a, &err);
    if (st != OG_OK) {
        st = OG_ERR_CONFIG; /* a bad setting from a flag is a usage error too: exit 2 */
        goto out;
    }
    if (opt_flag(&a, "check-config")) {
        const char *path = opt_arg(&a, "config");
        /* The Kafka settings too (topic names, kafka.properties), without
         * connecting: what the services would refuse at start. */
        char *password = NULL;

        st = kafka_check_config(&ctl.cfg, &err);
        /* And the password file, read as a command would. */
        if (st == OG_OK)
            st = cfg_db_password(&ctl.cfg, &password, &err);
        db_password_free(password);
        if (st != OG_OK) {
            st = OG_ERR_CONFIG;
            goto out;
        }
        if (ctl.json) {
            json_t *o = json_object();
            ctl_json_set(o, "command", json_string("check-config"));
            ctl_json_set(o, "ok", json_true());
            ctl_json_set(o, "config", ctl_json_str_or_null(path));
            ctl_print_json(o);
            json_decref(o);
        } else {
            printf("configuration ok (%s)\n", path != NULL ? path : "defaults and environment");
        }
        goto out;
    }
    if (cmd == NULL) {
        st = og_error_set(&err, OG_ERR_ARG, false, "no command given");
        goto out;
    }
    if (a.npos < cmd->min_pos) {
        st = og_error_set(&err, OG_ERR_ARG, false, "missing argument %s",
                          cmd->pos_name != NULL ? cmd->pos_name : "");
        goto out;
    }
    if (a.npos > cmd->max_pos) {
        st = og_error_set(&err, OG_ERR_ARG, false, "unexpected argument '%s'", a.pos[cmd->max_pos]);
        goto out;
    }
    st = cmd->run(&ctl, &a, &result, &err);
    if (st == OG_OK && result != NULL) {
        if (ctl.json)
            ctl_print_json(result);
        else
            cmd->text(result, stdout);
    } else if (st != OG_OK && result != NULL && !ctl.json) {
        /* What was done before the failure (e.g. migrations applied). */
        cmd->text(result, stdout);
    }

out:
    code = ctl_exit_code(st);
    if (st != OG_OK) {
        if (err.msg[0] == '\0')
            snprintf(err.msg, sizeof(err.msg), "%s", og_status_str(st));
        ctl_report_error(&ctl, cmd != NULL ? cmd->name : NULL, result, &err, code);
    }
    json_decref(result);
    opt_args_free(&a);
    free(rest);
    db_free(ctl.db);
    cfg_free(&ctl.cfg);
    return code;
}
