#include "common/cfg_doc.h"

#include <stdbool.h>
#include <string.h>

#include "common/cfg.h"
#include "common/opt.h"

#define CFG_DOC_WIDTH 100 /* the lines of deploy/ordergate.conf, as the C sources */

static const char *const cfg_doc_prog_names[] = {"ordergate-consumer", "ordergate-scanner",
                                                 "ordergatectl", "ordergate-console"};

/* The opening comment of deploy/ordergate.conf: what the file is and the rules of every
 * setting. The settings' own words come from the table. */
static const char cfg_doc_conf_head[] =
    "# ordergate.conf: one libconfig file for every ordergate binary (ordergate-consumer,\n"
    "# ordergate-scanner, ordergatectl).\n"
    "#\n"
    "# Generated from the settings table (common/cfg.c), like docs/settings.md, by\n"
    "#   cmake --build build --target settings_doc\n"
    "# (the --list-settings=conf of either service): change a setting's words in the table,\n"
    "# not here; the test unit_settings_doc fails while this file is stale.\n"
    "#\n"
    "# Every setting is optional: each line below shows the built-in DEFAULT, so this file as\n"
    "# shipped behaves exactly like no file at all. Copy it to /etc/ordergate/ordergate.conf\n"
    "# and change what you need; deploy/validate.sh checks that it names every setting with its\n"
    "# default.\n"
    "#\n"
    "#   ordergate-consumer --config /etc/ordergate/ordergate.conf --check-config\n"
    "#     validates the file and exits 0, or exits 2 printing \"FILE:LINE: problem\".\n"
    "#\n"
    "# Syntax (libconfig): `name = value;`, groups `name = { ... };`, lists `[ \"a\", \"b\" ]`,\n"
    "# strings in double quotes, integers bare, booleans true/false, comments with # or //.\n"
    "# Setting names cannot contain dots, which is why librdkafka properties go into the list\n"
    "# kafka.properties (below). A name that ordergate does not know (a typo such as\n"
    "# `batchsize`) is an error, never ignored.\n"
    "#\n"
    "# Precedence, lowest to highest: built-in default < environment fallback (\"Fallback:\"\n"
    "# below; only while the setting still has its default) < this file < command-line flags\n"
    "# (\"Flag:\" below).\n"
    "#\n"
    "# SECRETS never go in this file. The database password comes from a file\n"
    "# (database.password_file or ORDERGATE_DB_PASSWORD_FILE: a systemd credential, a\n"
    "# Kubernetes Secret volume, a Docker secret) or from libpq's own PGPASSWORD / ~/.pgpass /\n"
    "# PGPASSFILE; the Kafka SASL password likewise from kafka.sasl_password_file. The binaries\n"
    "# never log a password; a settings dump masks database.conninfo and the values of\n"
    "# kafka.properties. Every value here is checked whole: an integer out of its bounds (also\n"
    "# one too large for 32 bits) or a malformed consumer.metrics_listen stops the program, and\n"
    "# --check-config, with FILE:LINE.\n";

/* The opening of docs/settings.md. */
static const char cfg_doc_markdown_head[] =
    "# Settings\n"
    "\n"
    "<!-- Generated from the settings table (common/cfg.c) by\n"
    "       cmake --build build --target settings_doc\n"
    "     (the --list-settings=markdown of either service): change a setting's words in the\n"
    "     table, not here; the test unit_settings_doc fails while this file is stale. -->\n"
    "\n"
    "Every ordergate program reads one libconfig file, given with `--config FILE`. Every\n"
    "setting is optional and has the default below; `deploy/ordergate.conf` is the same\n"
    "reference as a commented file that sets each one to its default. Precedence, lowest to\n"
    "highest: the default, the environment fallback (only while the setting still has its\n"
    "default), the file, the command-line flag. `--check-config` checks a configuration as a\n"
    "start would and prints it, secrets masked; `--list-settings` prints the table as\n"
    "tab-separated lines.\n"
    "\n"
    "The flags are those of ordergate-consumer and ordergate-scanner (each program's `--help`\n"
    "lists its own); ordergatectl's are in `ordergatectl --help`. An int is a 32-bit integer\n"
    "within its bounds, a bool is `true` or `false`, a strlist is a list of strings.\n";

/* The flags of setting `name` ("--db"; several when the services name it differently; "" when
 * none), each followed by the one service that accepts it when another service reads the
 * setting too ("--log-level (ordergate-scanner only)"). */
static void cfg_doc_flags(char *buf, size_t size, const struct cfg_setting_info *info,
                          const char *quote)
{
    const unsigned services = OPT_CONSUMER | OPT_SCANNER;
    size_t used = 0;

    buf[0] = '\0';
    for (const struct opt *o = opt_services; o->name != NULL; o++) {
        unsigned accepts = o->progs != 0 ? o->progs : services;
        bool seen = false;

        if (o->setting == NULL || strcmp(o->setting, info->name) != 0)
            continue;
        for (const struct opt *p = opt_services; p < o && !seen; p++)
            seen = p->setting != NULL && strcmp(p->setting, info->name) == 0 &&
                   strcmp(p->name, o->name) == 0;
        if (seen || used >= size)
            continue;
        used += (size_t)snprintf(buf + used, size - used, "%s%s--%s%s", used ? ", " : "", quote,
                                 o->name, quote);
        if ((info->progs & services & ~accepts) != 0 && used < size)
            used += (size_t)snprintf(buf + used, size - used, " (%s only)",
                                     cfg_doc_prog_names[accepts == OPT_CONSUMER ? 0 : 1]);
    }
}

/* "ordergate-consumer, ordergatectl". */
static void cfg_doc_progs(char *buf, size_t size, unsigned progs)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(cfg_doc_prog_names) / sizeof(cfg_doc_prog_names[0]); i++)
        if ((progs & (1u << i)) != 0 && used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                                     cfg_doc_prog_names[i]);
}

/* The setting's default as the file writes it: "text", 500, true, []. */
static void cfg_doc_value(char *buf, size_t size, const struct cfg_setting_info *info)
{
    if (strcmp(info->type, "string") == 0)
        snprintf(buf, size, "\"%s\"", info->def);
    else if (strcmp(info->type, "strlist") == 0)
        snprintf(buf, size, "[]");
    else
        snprintf(buf, size, "%s", info->def);
}

/* Whether setting `name` is in group `section` ("" for the ungrouped). */
static bool cfg_doc_in_section(const char *name, const char *section)
{
    const char *dot = strchr(name, '.');
    size_t len = strlen(section);

    if (dot == NULL)
        return len == 0;
    return (size_t)(dot - name) == len && strncmp(name, section, len) == 0;
}

/* text as comment lines "<indent># ...", wrapped before CFG_DOC_WIDTH. */
static void cfg_doc_comment(FILE *out, const char *indent, const char *text)
{
    int width = CFG_DOC_WIDTH - (int)strlen(indent) - 2;

    while (*text != '\0') {
        int len = (int)strlen(text), cut = len;

        if (len > width) {
            for (cut = width; cut > 0 && text[cut] != ' '; cut--)
                ;
            if (cut == 0) /* one word longer than a line: on a line of its own */
                for (cut = width; text[cut] != '\0' && text[cut] != ' '; cut++)
                    ;
        }
        fprintf(out, "%s# %.*s\n", indent, cut, text);
        text += cut;
        while (*text == ' ')
            text++;
    }
}

/* "# ------...": the line above and below a group's title. */
static void cfg_doc_rule(FILE *out)
{
    fputs("# ", out);
    for (int i = 2; i < CFG_DOC_WIDTH - 1; i++)
        fputc('-', out);
    fputc('\n', out);
}

static void cfg_doc_conf(FILE *out)
{
    struct cfg_section_info sec;
    struct cfg_setting_info info;

    fputs(cfg_doc_conf_head, out);
    for (size_t s = 0; cfg_section_info(s, &sec); s++) {
        const char *indent = *sec.name != '\0' ? "    " : "";

        fputc('\n', out);
        if (*sec.name != '\0') {
            char title[512];

            cfg_doc_rule(out);
            snprintf(title, sizeof(title), "%s: %s", sec.name, sec.description);
            cfg_doc_comment(out, "", title);
            cfg_doc_rule(out);
            fprintf(out, "%s = {\n", sec.name);
        }
        for (size_t i = 0, n = 0; cfg_setting_info(i, &info); i++) {
            char flags[128], progs[128], value[512], facts[1024];
            const char *dot = strchr(info.name, '.');
            size_t used = 0;

            if (!cfg_doc_in_section(info.name, sec.name))
                continue;
            if (n++ > 0)
                fputc('\n', out);
            cfg_doc_comment(out, indent, info.description);
            cfg_doc_flags(flags, sizeof(flags), &info, "");
            cfg_doc_progs(progs, sizeof(progs), info.progs);
            if (strcmp(info.type, "int") == 0)
                used += (size_t)snprintf(facts + used, sizeof(facts) - used, "Range %ld..%ld. ",
                                         info.min, info.max);
            if (*flags != '\0' && used < sizeof(facts))
                used += (size_t)snprintf(facts + used, sizeof(facts) - used, "Flag: %s. ", flags);
            if (info.env != NULL && used < sizeof(facts))
                used += (size_t)snprintf(facts + used, sizeof(facts) - used, "Fallback: %s. ",
                                         info.env);
            if (used < sizeof(facts))
                snprintf(facts + used, sizeof(facts) - used, "Read by %s.", progs);
            cfg_doc_comment(out, indent, facts);
            cfg_doc_value(value, sizeof(value), &info);
            fprintf(out, "%s%s = %s;\n", indent, dot != NULL ? dot + 1 : info.name, value);
        }
        if (*sec.name != '\0')
            fprintf(out, "};\n");
    }
}

/* A table cell: text with '|' escaped. */
static void cfg_doc_cell(FILE *out, const char *text)
{
    for (; *text != '\0'; text++) {
        if (*text == '|')
            fputc('\\', out);
        fputc(*text, out);
    }
}

static void cfg_doc_markdown(FILE *out)
{
    struct cfg_section_info sec;
    struct cfg_setting_info info;

    fputs(cfg_doc_markdown_head, out);
    for (size_t s = 0; cfg_section_info(s, &sec); s++) {
        fprintf(out, "\n## %s\n\n%s\n\n", *sec.name != '\0' ? sec.name : "Every program",
                sec.description);
        fprintf(out, "| setting | type | default | bounds | flag | read by | description |\n"
                     "|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; cfg_setting_info(i, &info); i++) {
            char flags[128], progs[128], value[512], bounds[64] = "";

            if (!cfg_doc_in_section(info.name, sec.name))
                continue;
            cfg_doc_flags(flags, sizeof(flags), &info, "`");
            cfg_doc_progs(progs, sizeof(progs), info.progs);
            cfg_doc_value(value, sizeof(value), &info);
            if (strcmp(info.type, "int") == 0)
                snprintf(bounds, sizeof(bounds), "%ld..%ld", info.min, info.max);
            fprintf(out, "| `%s` | %s | `", info.name, info.type);
            cfg_doc_cell(out, value);
            fprintf(out, "` | %s | %s | %s | ", bounds, flags, progs);
            cfg_doc_cell(out, info.description);
            if (info.env != NULL)
                fprintf(out, " Fallback: `%s`.", info.env);
            fprintf(out, " |\n");
        }
    }
}

enum og_status cfg_doc_list(FILE *out, unsigned prog, const char *format, struct og_error *err)
{
    if (format == NULL)
        opt_list_settings(out, prog);
    else if (strcmp(format, "markdown") == 0)
        cfg_doc_markdown(out);
    else if (strcmp(format, "conf") == 0)
        cfg_doc_conf(out);
    else
        return og_error_set(err, OG_ERR_ARG, false,
                            "--list-settings: expected markdown or conf, got \"%.64s\"", format);
    return OG_OK;
}
