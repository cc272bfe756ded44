/* The services' flag-to-setting table and the one command-line parser: what each program
 * accepts, the refusals (unknown flag, missing value, a value out of range, a setting's
 * error from the file), each naming the flag or the setting, in the uniform wording. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cfg.h"
#include "common/cfg_doc.h"
#include "common/opt.h"

/* Parses a NULL-terminated argument list (no program name) for prog. */
static enum og_status parse(struct opt_args *a, unsigned prog, const char *const *args,
                            struct og_error *err)
{
    int argc = 0;

    while (args[argc] != NULL)
        argc++;
    return opt_parse(a, opt_services, NULL, prog, argc, (char **)args, err);
}

/* Parses and configures; on failure returns the located line an operator reads. */
static enum og_status configure(unsigned prog, const char *const *args, char *line, size_t size)
{
    struct opt_args a;
    struct og_config cfg;
    struct og_error err = {0};
    enum og_status st;

    memset(&cfg, 0, sizeof(cfg));
    line[0] = '\0';
    st = parse(&a, prog, args, &err);
    if (st == OG_OK)
        st = opt_configure(&cfg, &a, &err);
    if (st != OG_OK)
        cfg_error_format(&cfg, &err, line, size);
    cfg_free(&cfg);
    opt_args_free(&a);
    return st;
}

static void test_forms(void **state)
{
    struct opt_args a;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(
        parse(&a, OPT_SCANNER,
              (const char *const[]){"--batch-size", "7", "--grace=30", "-h", "--dry-run", NULL},
              &err),
        OG_OK);
    assert_string_equal(opt_arg(&a, "batch-size"), "7");
    assert_string_equal(opt_arg(&a, "grace"), "30");
    assert_true(opt_flag(&a, "help"));
    assert_true(opt_flag(&a, "dry-run"));
    assert_false(opt_flag(&a, "reconcile"));
    assert_int_equal(a.npos, 0);
    opt_args_free(&a);
    /* "--" ends the options. */
    assert_int_equal(parse(&a, OPT_CONSUMER, (const char *const[]){"--", "--db", NULL}, &err),
                     OG_OK);
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "--db");
    opt_args_free(&a);
}

static void test_refusals(void **state)
{
    static const struct {
        unsigned prog;
        const char *args[6];
        const char *msg;
    } cases[] = {
        {OPT_CONSUMER, {"--bogus"}, "unknown option '--bogus'"},
        {OPT_CONSUMER, {"-x"}, "unknown option '-x'"},
        /* In the table, but the scanner's only. */
        {OPT_CONSUMER, {"--grace", "5"}, "unknown option '--grace'"},
        {OPT_SCANNER, {"--metrics-listen", "x"}, "unknown option '--metrics-listen'"},
        {OPT_SCANNER, {"--batch-size"}, "--batch-size: needs a value (N)"},
        {OPT_SCANNER, {"--dry-run=yes"}, "--dry-run: takes no value"},
        {OPT_SCANNER, {"--grace", "1", "--grace", "2"}, "--grace: given more than once"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct opt_args a;
        struct og_error err = {0};

        assert_int_equal(parse(&a, cases[i].prog, cases[i].args, &err), OG_ERR_ARG);
        if (strcmp(err.msg, cases[i].msg) != 0)
            fail_msg("case %zu: '%s', expected '%s'", i, err.msg, cases[i].msg);
        opt_args_free(&a);
    }
}

/* A flag's value goes to its setting, per program, and a bad one names both. */
static void test_values(void **state)
{
    struct opt_args a;
    struct og_config cfg;
    struct og_error err = {0};
    char line[1024];

    (void)state;
    assert_int_equal(
        parse(&a, OPT_CONSUMER, (const char *const[]){"--batch-size", "7", NULL}, &err), OG_OK);
    assert_int_equal(opt_configure(&cfg, &a, &err), OG_OK);
    assert_int_equal(cfg.consumer.batch_size, 7);
    assert_int_equal(cfg.scanner.batch_size, 500);
    cfg_free(&cfg);
    opt_args_free(&a);
    assert_int_equal(parse(&a, OPT_SCANNER, (const char *const[]){"--batch-size", "7", NULL}, &err),
                     OG_OK);
    assert_int_equal(opt_configure(&cfg, &a, &err), OG_OK);
    assert_int_equal(cfg.consumer.batch_size, 500);
    assert_int_equal(cfg.scanner.batch_size, 7);
    cfg_free(&cfg);
    opt_args_free(&a);

    assert_int_equal(configure(OPT_CONSUMER, (const char *const[]){"--batch-size", "0", NULL}, line,
                               sizeof(line)),
                     OG_ERR_CONFIG);
    assert_string_equal(line, "--batch-size: consumer.batch_size: expected an integer in "
                              "1..10000, got \"0\"");
    assert_int_equal(
        configure(OPT_SCANNER, (const char *const[]){"--workers", "abc", NULL}, line, sizeof(line)),
        OG_ERR_CONFIG);
    assert_string_equal(line,
                        "--workers: scanner.workers: expected an integer in 1..16, got \"abc\"");
    assert_int_equal(
        configure(OPT_SCANNER, (const char *const[]){"--every", "+5", NULL}, line, sizeof(line)),
        OG_ERR_CONFIG);
    assert_string_equal(line, "--every: scanner.every_s: expected an integer in 0..86400, got "
                              "\"+5\"");
}

/* An error in the file carries its setting; the line comes from where the file set it. */
static void test_file_error(void **state)
{
    char path[64], line[1024], expect[256];
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "/tmp/og_opt_test_%d.conf", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("# scanner\nscanner = {\n  grace_s = 30;\n  pause_ms = 12x;\n};\n", f);
    fclose(f);
    /* A syntax error: libconfig's line. */
    assert_int_equal(
        configure(OPT_SCANNER, (const char *const[]){"--config", path, NULL}, line, sizeof(line)),
        OG_ERR_CONFIG);
    snprintf(expect, sizeof(expect), "%s:4:", path);
    if (strstr(line, expect) == NULL)
        fail_msg("'%s' does not carry %s", line, expect);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("# scanner\nscanner = {\n  grace_s = 30;\n  pause_ms = 600001;\n};\n", f);
    fclose(f);
    assert_int_equal(
        configure(OPT_SCANNER, (const char *const[]){"--config", path, NULL}, line, sizeof(line)),
        OG_ERR_CONFIG);
    snprintf(expect, sizeof(expect),
             "%s:4: scanner.pause_ms: expected an integer in 0..600000, got \"600001\"", path);
    assert_string_equal(line, expect);
    /* The same setting from a flag over the file: the flag is named, not the file. */
    assert_int_equal(configure(OPT_SCANNER,
                               (const char *const[]){"--config", path, "--pause-ms", "-1", NULL},
                               line, sizeof(line)),
                     OG_ERR_CONFIG);
    snprintf(expect, sizeof(expect), "%s:4:", path);
    assert_non_null(strstr(line, expect)); /* the file is read first and is refused first */
    unlink(path);
}

static void test_list_settings(void **state)
{
    char buf[8192] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

    (void)state;
    assert_non_null(f);
    opt_list_settings(f, OPT_SCANNER);
    fclose(f);
    assert_non_null(strstr(buf, "scanner.batch_size\t--batch-size\tint\t500\t1..10000\n"));
    assert_non_null(strstr(buf, "consumer.batch_size\t-\tint\t500\t1..10000\n"));
    assert_non_null(strstr(buf, "scanner.workers\t--workers\tint\t1\t1..16\n"));
    assert_non_null(strstr(buf, "database.conninfo\t--db\tstring\t\t-\n"));
    assert_non_null(strstr(buf, "kafka.properties\t-\tstrlist\t\t-\n"));
}

/* A row with an optional value: "--name" alone, or "--name=value"; a next argument stays a
 * positional. */
static void test_optional_value(void **state)
{
    struct opt_args a;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(
        parse(&a, OPT_CONSUMER, (const char *const[]){"--list-settings=markdown", NULL}, &err),
        OG_OK);
    assert_true(opt_flag(&a, "list-settings"));
    assert_string_equal(opt_arg(&a, "list-settings"), "markdown");
    opt_args_free(&a);
    assert_int_equal(
        parse(&a, OPT_SCANNER, (const char *const[]){"--list-settings", "conf", NULL}, &err),
        OG_OK);
    assert_true(opt_flag(&a, "list-settings"));
    assert_null(opt_arg(&a, "list-settings"));
    assert_int_equal(a.npos, 1);
    opt_args_free(&a);
}

/* --help's option rows: each row of the program with its help, the setting's default and
 * bounds from the table, and no row of the other program. */
static void test_help(void **state)
{
    static char buf[16384], flat[16384];
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    struct cfg_setting_info info;

    (void)state;
    assert_non_null(f);
    opt_help(f, opt_services, OPT_SCANNER);
    fclose(f);
    assert_non_null(strstr(buf, "\n  --batch-size N            orders per claim statement"));
    /* Unwrapped: a continuation line is its row's text. */
    for (size_t i = 0, j = 0; i < sizeof(buf); i++, j++) {
        if (strncmp(buf + i, "\n                            ", 29) == 0) {
            flat[j] = ' ';
            i += 28;
        } else {
            flat[j] = buf[i];
        }
    }
    assert_non_null(strstr(flat, "orders per claim statement (scanner.batch_size; default 500, "
                                 "1..10000)\n"));
    assert_non_null(strstr(flat, "(scanner.workers; default 1, 1..16)\n"));
    assert_non_null(strstr(flat, "(database.conninfo; default \"\", or $ORDERGATE_DB)\n"));
    assert_non_null(strstr(buf, "  -h, --help "));
    assert_non_null(strstr(buf, "  --list-settings[=FORMAT] "));
    assert_null(strstr(buf, "--metrics-listen"));
    assert_null(strstr(buf, "consumer.batch_size"));
    /* A shared flag whose setting the scanner does not read. */
    assert_non_null(strstr(buf, "accepted, unused here"));
    for (char *line = buf; *line != '\0'; line = strchr(line, '\n') + 1)
        if (strchr(line, '\n') - line >= 80)
            fail_msg("line longer than 79 columns: %.100s", line);
    /* Every row says what it does, and a row's setting is in the table. */
    for (const struct opt *o = opt_services; o->name != NULL; o++) {
        bool found = o->setting == NULL;
        assert_non_null(o->help);
        for (size_t i = 0; !found && cfg_setting_info(i, &info); i++)
            found = strcmp(info.name, o->setting) == 0;
        if (!found)
            fail_msg("--%s: setting %s is not in the table", o->name, o->setting);
    }
}

/* The generated reference: every setting in both formats, an unknown format refused. */
static void test_settings_doc(void **state)
{
    static char buf[65536];
    struct og_error err = {0};
    struct cfg_setting_info info;
    FILE *f;

    (void)state;
    f = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_int_equal(cfg_doc_list(f, OPT_CONSUMER, "markdown", &err), OG_OK);
    fclose(f);
    for (size_t i = 0; cfg_setting_info(i, &info); i++) {
        char cell[128];
        snprintf(cell, sizeof(cell), "| `%s` | %s | ", info.name, info.type);
        if (strstr(buf, cell) == NULL)
            fail_msg("markdown: no row for %s", info.name);
    }
    assert_non_null(strstr(buf, "| `scanner.workers` | int | `1` | 1..16 | `--workers` | "
                                "ordergate-scanner | "));
    assert_non_null(strstr(buf, "`--log-level` (ordergate-scanner only)"));

    f = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_int_equal(cfg_doc_list(f, OPT_SCANNER, "conf", &err), OG_OK);
    fclose(f);
    assert_non_null(strstr(buf, "\nscanner = {\n"));
    assert_non_null(strstr(buf, "\n    workers = 1;\n"));
    assert_non_null(strstr(buf, "\n    properties = [];\n"));
    assert_non_null(strstr(buf, "\n    conninfo = \"\";\n"));
    assert_non_null(strstr(buf, "Fallback: ORDERGATE_DB."));

    memset(buf, 0, sizeof(buf));
    f = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_int_equal(cfg_doc_list(f, OPT_SCANNER, "yaml", &err), OG_ERR_ARG);
    fclose(f);
    assert_string_equal(buf, "");
    assert_string_equal(err.msg, "--list-settings: expected markdown or conf, got \"yaml\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),         cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_values),        cmocka_unit_test(test_file_error),
        cmocka_unit_test(test_list_settings), cmocka_unit_test(test_optional_value),
        cmocka_unit_test(test_help),          cmocka_unit_test(test_settings_doc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
