/* ordergatectl against a real PostgreSQL: the built binary runs as a child
 * process on a database of each test's own; what it prints (text and JSON)
 * and what it changed in the database are both checked. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/ctl_run.h"
#include "support/testdb.h"

#define SCHEMA_DIR OG_SOURCE_DIR "/schema"

/* ---- helpers ----------------------------------------------------------- */

/* Files of SCHEMA_DIR/sub that ordergatectl takes: NNN_name.sql for
 * migrations (versions[] receives "NNN" when not NULL), GROUP/name.sql for
 * functions (one folder per group). Returns how many. */
static int schema_files(const char *sub, char versions[][4], int max)
{
    char path[512];
    DIR *d;
    struct dirent *de;
    int n = 0;

    snprintf(path, sizeof(path), "%s/%s", SCHEMA_DIR, sub);
    d = opendir(path);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (versions == NULL && strcmp(sub, "functions") == 0 && de->d_name[0] != '.') {
            char group[600];
            snprintf(group, sizeof(group), "functions/%s", de->d_name);
            n += schema_files(group, NULL, max - n);
            continue;
        }
        if (len < 5 || strcmp(de->d_name + len - 4, ".sql") != 0)
            continue;
        assert_true(n < max);
        if (versions != NULL) {
            memcpy(versions[n], de->d_name, 3);
            versions[n][3] = '\0';
        }
        n++;
    }
    closedir(d);
    return n;
}

static char *scalar_text(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    char *v;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        fail_msg("SQL failed: %s\n%s", sql, PQerrorMessage(conn));
    v = strdup(PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

static long count_where(PGconn *conn, const char *table, const char *cond)
{
    char sql[512];

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM ordergate.%s WHERE %s", table, cond);
    return testdb_scalar(conn, sql);
}

/* An empty database (not from the template) for the migration tests. */
static void empty_db_create(struct testdb *t, const char *tag)
{
    PGconn *admin = PQconnectdb("dbname=postgres");
    char sql[256];

    if (PQstatus(admin) != CONNECTION_OK)
        fail_msg("cannot reach PostgreSQL: %s", PQerrorMessage(admin));
    snprintf(t->name, sizeof(t->name), "og_%s_%d", tag, (int)getpid());
    snprintf(t->conninfo, sizeof(t->conninfo), "dbname=%s", t->name);
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", t->name);
    testdb_exec(admin, sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE template0", t->name);
    testdb_exec(admin, sql);
    PQfinish(admin);
}

static const json_t *find_item(const json_t *r, const char *list_key, const char *key,
                               const char *value)
{
    const json_t *list = json_object_get(r, list_key);
    const json_t *m;
    size_t i;

    json_array_foreach(list, i, m)
    {
        if (strcmp(ctl_json_s(m, key), value) == 0)
            return m;
    }
    fail_msg("%s %s missing from the output", list_key, value);
    return NULL;
}

static const json_t *find_migration(const json_t *r, const char *version)
{
    return find_item(r, "migrations", "version", version);
}

static void seed_stock(PGconn *conn)
{
    testdb_exec(conn, "SELECT ordergate.add_stock('S1', 10), ordergate.add_stock('S2', 5), "
                      "ordergate.add_coupon('C1')");
    /* Orders due in 2030 below: inside a horizon of 10 years. */
    testdb_exec(conn, "SELECT ordergate.set_setting('max_deadline_seconds', '315360000')");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Symlinks every file of src into dst (created), and, one level down, the
 * files of each folder into a folder of dst's own. */
static void schema_link(const char *src, const char *dst, bool recurse)
{
    DIR *d;
    struct dirent *de;

    assert_int_equal(mkdir(dst, 0700), 0);
    d = opendir(src);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        char target[1024], link[1024];
        struct stat sb;
        if (de->d_name[0] == '.')
            continue;
        snprintf(target, sizeof(target), "%s/%s", src, de->d_name);
        snprintf(link, sizeof(link), "%s/%s", dst, de->d_name);
        if (recurse && stat(target, &sb) == 0 && S_ISDIR(sb.st_mode))
            schema_link(target, link, false);
        else
            assert_int_equal(symlink(target, link), 0);
    }
    closedir(d);
}

/* A schema directory of the test's own under /tmp: migrations/, functions/
 * (its group folders too) and upgrade/ hold symlinks to the source tree's
 * files, so a test can add, replace or remove single files. */
static void schema_copy(char *dir)
{
    static const char *const subs[] = {"migrations", "functions", "upgrade"};

    assert_non_null(mkdtemp(dir));
    for (size_t s = 0; s < sizeof(subs) / sizeof(subs[0]); s++) {
        char src[512], dst[512];

        snprintf(src, sizeof(src), "%s/%s", SCHEMA_DIR, subs[s]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, subs[s]);
        schema_link(src, dst, true);
    }
}

/* Removes dir/sub/name (a symlink or a file the test wrote). */
static void schema_drop(const char *dir, const char *sub, const char *name)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
    unlink(path);
}

/* Replaces dir/sub/name (a symlink or nothing) with a file holding text. */
static void schema_put(const char *dir, const char *sub, const char *name, const char *text)
{
    char path[1024];

    schema_drop(dir, sub, name);
    snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
    write_file(path, text);
}

static void schema_copy_remove(const char *dir)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- migrate ----------------------------------------------------------- */

/* ordergatectl place ORDER --amount AMOUNT --item ITEM EXPIRE_OPT EXPIRE, which must succeed. */
static void place_ok(const struct testdb *t, const char *order_no, const char *amount,
                     const char *item, const char *expire_opt, const char *expire)
{
    struct ctl_result r;

    ctl_run(&r, "place", order_no, "--db", t->conninfo, "--amount", amount, "--item", item,
            expire_opt, expire, NULL);
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);
}

static void test_migrate_empty_then_idempotent(void **state)
{
    char versions[64][4];
    int n = schema_files("migrations", versions, 64);
    int nf = schema_files("functions", NULL, 1000);
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    char *first_applied;
    char expect[64];

    (void)state;
    assert_true(n >= 1);
    assert_true(nf >= 30);
    empty_db_create(&t, "ctl_mig_empty");

    /* Dry run: lists everything as pending and creates nothing. */
    ctl_run(&r, "migrate", "--db", t.conninfo, "--dry-run", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "dry_run")));
    assert_int_equal(ctl_json_i(r.json, "pending"), n);
    assert_int_equal(ctl_json_i(r.json, "functions_pending"), nf);
    ctl_result_free(&r);
    conn = testdb_connect(&t);
    assert_int_equal(
        testdb_scalar(conn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'ordergate'"), 0);

    /* First run applies every migration and every function file, and
     * records each with its checksum. */
    ctl_run(&r, "migrate", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "ok")));
    assert_int_equal(ctl_json_i(r.json, "applied"), n);
    assert_int_equal(ctl_json_i(r.json, "already_applied"), 0);
    assert_int_equal(ctl_json_i(r.json, "functions_applied"), nf);
    for (int i = 0; i < n; i++) {
        char sql[200];
        assert_string_equal(ctl_json_s(find_migration(r.json, versions[i]), "result"), "applied");
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM ordergate.schema_migrations WHERE version = '%s' "
                 "AND checksum ~ '^[0-9a-f]{64}$'",
                 versions[i]);
        assert_int_equal(testdb_scalar(conn, sql), 1);
    }
    assert_string_equal(
        ctl_json_s(find_item(r.json, "functions", "file", "claim_cancel.sql"), "result"),
        "applied");
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_migrations"), n);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_functions"), nf);
    first_applied =
        scalar_text(conn, "SELECT max(applied_at)::text FROM ordergate.schema_functions");

    /* Second run: nothing to do, nothing changed (text output this time). */
    ctl_run(&r, "migrate", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    snprintf(expect, sizeof(expect), "0 applied, %d already applied", n);
    assert_non_null(strstr(r.out, expect));
    assert_non_null(strstr(r.out, "001  already applied"));
    assert_non_null(strstr(r.out, "004  already applied"));
    assert_non_null(strstr(r.out, "functions: 0 applied"));
    assert_null(strstr(r.out, "  applied  "));
    ctl_result_free(&r);
    {
        char *again =
            scalar_text(conn, "SELECT max(applied_at)::text FROM ordergate.schema_functions");
        assert_string_equal(first_applied, again);
        free(again);
    }
    free(first_applied);

    /* The migrated database works: the gate answers through the tool. */
    seed_stock(conn);
    ctl_run(&r, "place", "M1", "--db", t.conninfo, "--amount", "100", "--item", "S1:1",
            "--expire-in", "60", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "placed");
    ctl_result_free(&r);

    PQfinish(conn);
    testdb_drop(&t);
}

/* The template was built with schema/install.sql (plain psql, no
 * checksums): migrate adopts the migrations and applies the functions once.
 * Then a changed function file is applied alone. */
static void test_migrate_after_psql(void **state)
{
    int n = schema_files("migrations", NULL, 64);
    int nf = schema_files("functions", NULL, 1000);
    char dir[] = "/tmp/og_ctl_schema_XXXXXX";
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;

    (void)state;
    testdb_create(&t, "ctl_mig_psql");
    conn = testdb_connect(&t);
    assert_int_equal(count_where(conn, "schema_migrations", "checksum IS NULL"), n);
    ctl_run(&r, "migrate", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(ctl_json_i(r.json, "applied"), 0);
    assert_int_equal(ctl_json_i(r.json, "already_applied"), n);
    assert_int_equal(ctl_json_i(r.json, "functions_applied"), nf);
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "schema_migrations", "checksum IS NULL"), 0);

    schema_copy(dir);
    schema_put(dir, "functions/outbox", "outbox_backlog.sql",
               "CREATE OR REPLACE FUNCTION ordergate.outbox_backlog() RETURNS bigint\n"
               "LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$\n"
               "    SELECT count(*) /* changed */ FROM ordergate.outbox b WHERE b.published_at "
               "IS NULL\n$$;\n"
               "GRANT EXECUTE ON FUNCTION ordergate.outbox_backlog() TO ordergate_service;\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(ctl_json_i(r.json, "functions_applied"), 1);
    assert_int_equal(ctl_json_i(r.json, "functions_unchanged"), nf - 1);
    assert_string_equal(
        ctl_json_s(find_item(r.json, "functions", "file", "outbox_backlog.sql"), "result"),
        "applied");
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_proc WHERE proname = "
                                         "'outbox_backlog' AND prosrc LIKE '%changed%'"),
                     1);

    /* A function file gone from the directory is reported, its function kept. */
    schema_put(dir, "functions/outbox", "outbox_backlog.sql", "");
    schema_drop(dir, "functions/outbox", "outbox_backlog.sql");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "removed          functions/outbox_backlog.sql"));
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "schema_functions", "file = 'outbox_backlog.sql'"), 0);
    assert_int_equal(testdb_scalar(conn, "SELECT ordergate.outbox_backlog()"), 0);

    schema_copy_remove(dir);
    PQfinish(conn);
    testdb_drop(&t);
}

/* Every failure rolls the whole run back (exit 1, the file named); files the
 * runner cannot send whole are refused before anything is sent; an applied
 * migration that changed is refused; a missing schema directory is a usage
 * error. */
static void test_migrate_failures(void **state)
{
    char dir[] = "/tmp/og_ctl_schema_XXXXXX";
    int n = schema_files("migrations", NULL, 64);
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    char *fn_before;

    (void)state;
    schema_copy(dir);
    testdb_create(&t, "ctl_mig_fail");
    conn = testdb_connect(&t);
    fn_before = scalar_text(
        conn, "SELECT md5(string_agg(prosrc, '' ORDER BY oid::regprocedure::text)) FROM "
              "pg_proc WHERE pronamespace = 'ordergate'::regnamespace");

    schema_put(dir, "migrations", "900_broken.sql",
               "SET LOCAL ROLE ordergate_owner;\n"
               "CREATE TABLE ordergate.ctl_probe (x int);\n"
               "SELECT ordergate.no_such_function();\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, "--json", NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(r.json);
    assert_true(json_is_false(json_object_get(r.json, "ok")));
    assert_non_null(strstr(ctl_json_s(r.json, "error"), "migrations/900_broken.sql"));
    assert_string_equal(ctl_json_s(find_migration(r.json, "900"), "result"), "failed");
    assert_int_equal(ctl_json_i(r.json, "already_applied"), n);
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_tables WHERE schemaname = "
                                         "'ordergate' AND tablename = 'ctl_probe'"),
                     0);
    assert_int_equal(count_where(conn, "schema_migrations", "version = '900'"), 0);
    /* The run had adopted checksums before the failure: rolled back too. */
    assert_int_equal(count_where(conn, "schema_migrations", "checksum IS NOT NULL"), 0);

    /* Objects left to the migrating superuser would make SECURITY DEFINER
     * functions run as it: refused, nothing kept. */
    schema_put(dir, "migrations", "900_broken.sql", "CREATE TABLE ordergate.ctl_probe2 (x int);\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "not owned by ordergate_owner: ordergate.ctl_probe2"));
    assert_non_null(strstr(r.out, "rolled back, nothing changed"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_tables WHERE schemaname = "
                                         "'ordergate' AND tablename = 'ctl_probe2'"),
                     0);

    /* Transaction control and psql meta-commands are refused before
     * anything is sent. */
    schema_put(dir, "migrations", "900_broken.sql",
               "BEGIN;\nCREATE TABLE ordergate.ctl_probe3 (x int);\nCOMMIT;\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "900_broken.sql:1: transaction control"));
    ctl_result_free(&r);
    schema_put(dir, "migrations", "900_broken.sql",
               "\\set ON_ERROR_STOP 1\nCREATE TABLE ordergate.ctl_probe3 (x int);\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "900_broken.sql:1: psql meta-command"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_tables WHERE schemaname = "
                                         "'ordergate' AND tablename = 'ctl_probe3'"),
                     0);
    schema_drop(dir, "migrations", "900_broken.sql");

    /* A function file outside a group folder would never be applied, and a
     * name in two groups is two definitions of one function: both refused
     * before anything is sent. */
    schema_put(dir, "functions", "stray_probe.sql", "SELECT 1;\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "functions/stray_probe.sql: a function file belongs in the "
                                  "folder of its group"));
    ctl_result_free(&r);
    schema_drop(dir, "functions", "stray_probe.sql");
    schema_put(dir, "functions/admin", "outbox_backlog.sql", "SELECT 1;\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "admin/outbox_backlog.sql and outbox/outbox_backlog.sql: one "
                                  "function, one file"));
    ctl_result_free(&r);
    schema_drop(dir, "functions/admin", "outbox_backlog.sql");
    assert_int_equal(count_where(conn, "schema_functions", "true"), 0);

    /* A function body that does not compile fails the run (the second pass
     * checks bodies); every other function stays as it was. */
    schema_put(dir, "functions/outbox", "outbox_backlog.sql",
               "CREATE OR REPLACE FUNCTION ordergate.outbox_backlog() RETURNS bigint\n"
               "LANGUAGE sql STABLE AS $$ SELECT count(*) FROM ordergate.no_such_table $$;\n");
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "functions/outbox/outbox_backlog.sql"));
    assert_non_null(strstr(r.err, "no_such_table"));
    ctl_result_free(&r);
    {
        char *after = scalar_text(
            conn, "SELECT md5(string_agg(prosrc, '' ORDER BY oid::regprocedure::text)) FROM "
                  "pg_proc WHERE pronamespace = 'ordergate'::regnamespace");
        assert_string_equal(fn_before, after);
        free(after);
    }
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_functions"), 0);

    /* An applied migration is never edited. */
    {
        char path[600];
        char *text;
        FILE *f;
        long size;

        snprintf(path, sizeof(path), "%s/migrations/001_core.sql", SCHEMA_DIR);
        f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, 0, SEEK_SET);
        text = calloc(1, (size_t)size + 64);
        assert_non_null(text);
        assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
        fclose(f);
        strcat(text, "-- edited\n");
        schema_put(dir, "migrations", "001_core.sql", text);
        free(text);
    }
    /* Adopt the source tree's checksums first (the template has none). */
    ctl_run(&r, "migrate", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);
    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", dir, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "migrations/001_core.sql changed after it was applied"));
    ctl_result_free(&r);
    free(fn_before);

    ctl_run(&r, "migrate", "--db", t.conninfo, "--schema-dir", "/nonexistent/schema", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "not a directory"));
    ctl_result_free(&r);

    schema_copy_remove(dir);
    PQfinish(conn);
    testdb_drop(&t);
}

/* ---- the gate by hand -------------------------------------------------- */

static void test_place_pay_hold_close_show(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    const json_t *o, *list, *h;
    char *expire;

    (void)state;
    testdb_create(&t, "ctl_round");
    conn = testdb_connect(&t);
    seed_stock(conn);

    ctl_run(&r, "place", "A1", "--db", t.conninfo, "--amount", "1999", "--item", "S1:2", "--item",
            "S2:1", "--coupon", "C1", "--expire-in", "600", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_string_equal(ctl_json_s(r.json, "command"), "place");
    assert_string_equal(ctl_json_s(r.json, "order_no"), "A1");
    assert_string_equal(ctl_json_s(r.json, "outcome"), "placed");
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    expire = strdup(ctl_json_s(r.json, "expire_at"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     8);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S2'"),
                     4);
    assert_int_equal(count_where(conn, "coupons", "coupon_id = 'C1' AND state = 'locked'"), 1);
    /* expire-in is measured on the database clock: 600 s from its now(). */
    {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "SELECT abs(extract(epoch FROM '%s'::timestamptz - now()) - 600) < 5", expire);
        char *ok = scalar_text(conn, sql);
        assert_string_equal(ok, "t");
        free(ok);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM ordergate.orders WHERE order_no = 'A1' AND expire_at = "
                 "'%s'::timestamptz",
                 expire);
        assert_int_equal(testdb_scalar(conn, sql), 1);
    }
    free(expire);

    /* Same order again: duplicate, nothing reserved twice (text output). */
    ctl_run(&r, "place", "A1", "--db", t.conninfo, "--amount", "1999", "--item", "S1:2",
            "--expire-in", "600", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome    duplicate\n"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     8);

    /* Hold: the new expire_at is the database's. */
    ctl_run(&r, "hold", "A1", "--db", t.conninfo, "--seconds", "700", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "held");
    {
        char *db_expire = scalar_text(conn, "SELECT to_char(expire_at AT TIME ZONE 'UTC', "
                                            "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM "
                                            "ordergate.orders WHERE order_no = 'A1'");
        assert_string_equal(ctl_json_s(r.json, "expire_at"), db_expire);
        free(db_expire);
    }
    ctl_result_free(&r);

    /* Pay; then the same transaction again: duplicate with the first outcome. */
    ctl_run(&r, "pay", "A1", "--db", t.conninfo, "--txn", "T1", "--amount", "1999", "--channel",
            "card", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "paid");
    assert_string_equal(ctl_json_s(r.json, "status"), "paid");
    assert_true(json_is_null(json_object_get(r.json, "first_outcome")));
    assert_true(json_is_null(json_object_get(r.json, "exception")));
    ctl_result_free(&r);
    ctl_run(&r, "pay", "A1", "--db", t.conninfo, "--txn", "T1", "--amount", "1999", "--channel",
            "card", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome        duplicate\n"));
    assert_non_null(strstr(r.out, "first_outcome  paid\n"));
    assert_non_null(strstr(r.out, "status         paid\n"));
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "payments", "order_no = 'A1'"), 1);
    assert_int_equal(count_where(conn, "coupons", "coupon_id = 'C1' AND state = 'used'"), 1);

    /* Hold on a paid order: not_pending. */
    ctl_run(&r, "hold", "A1", "--db", t.conninfo, "--seconds", "60", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "not_pending");
    ctl_result_free(&r);

    /* Manual close of another order; again: already_cancelled; a paid one: already_paid. */
    ctl_run(&r, "place", "B1", "--db", t.conninfo, "--amount", "500", "--item", "S1:3",
            "--expire-at", "2030-01-02T03:04:05.678+01:00", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "placed");
    assert_string_equal(ctl_json_s(r.json, "expire_at"), "2030-01-02T02:04:05.678Z");
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     5);
    ctl_run(&r, "close", "B1", "--db", t.conninfo, "--operator", "alice", "--reason",
            "customer asked", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "cancelled");
    assert_string_equal(ctl_json_s(r.json, "status"), "cancelled");
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     8);
    ctl_run(&r, "close", "B1", "--db", t.conninfo, "--operator", "alice", "--reason", "again",
            NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome   already_cancelled\n"));
    ctl_result_free(&r);
    ctl_run(&r, "close", "A1", "--db", t.conninfo, "--operator", "alice", "--reason", "late",
            "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "already_paid");
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "status_log", "order_no = 'B1'"), 1);
    assert_int_equal(count_where(conn, "status_log", "order_no = 'A1'"), 1);

    /* show --json: the whole story of A1. */
    ctl_run(&r, "show", "A1", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    o = json_object_get(r.json, "order");
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "found")));
    assert_string_equal(ctl_json_s(o, "status"), "paid");
    assert_int_equal(ctl_json_i(o, "amount_cents"), 1999);
    assert_string_equal(ctl_json_s(o, "coupon_id"), "C1");
    list = json_object_get(o, "items");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(ctl_json_s(json_array_get(list, 0), "sku"), "S1");
    assert_int_equal(ctl_json_i(json_array_get(list, 0), "qty"), 2);
    assert_string_equal(ctl_json_s(json_array_get(list, 1), "sku"), "S2");
    list = json_object_get(o, "history");
    assert_int_equal(json_array_size(list), 1);
    h = json_array_get(list, 0);
    assert_string_equal(ctl_json_s(h, "from_status"), "pending_payment");
    assert_string_equal(ctl_json_s(h, "to_status"), "paid");
    assert_string_equal(ctl_json_s(h, "source"), "payment_callback");
    assert_string_equal(ctl_json_s(h, "idempotency_key"), "T1");
    assert_string_equal(ctl_json_s(h, "actor"), "ordergatectl");
    list = json_object_get(o, "payments");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(ctl_json_s(json_array_get(list, 0), "txn_no"), "T1");
    assert_string_equal(ctl_json_s(json_array_get(list, 0), "outcome"), "paid");
    assert_int_equal(json_array_size(json_object_get(o, "exceptions")), 0);
    ctl_result_free(&r);

    /* show as text: B1's manual close with its operator and reason. */
    ctl_run(&r, "show", "B1", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "status              cancelled\n"));
    assert_non_null(strstr(r.out, "expire_at           2030-01-02T02:04:05.678Z\n"));
    assert_non_null(
        strstr(r.out, "pending_payment  cancelled  manual  B1   alice  customer asked"));
    assert_non_null(strstr(r.out, "payments: none"));
    ctl_result_free(&r);

    ctl_run(&r, "show", "NOPE", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "order NOPE not found"));
    assert_string_equal(r.out, "");
    ctl_result_free(&r);

    PQfinish(conn);
    testdb_drop(&t);
}

/* release, amend, deadline: every outcome through the tool, and bad input exits 2 with a one-line
 * error and nothing changed in the database. */
static void test_release_amend_deadline(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    char *before;
    static const char state_sql[] =
        "SELECT md5(concat_ws('/', (SELECT string_agg(concat_ws('|', order_no, status, "
        "amount_cents, expire_at, shop), ',' ORDER BY order_no) FROM ordergate.orders), "
        "(SELECT string_agg(concat_ws('|', order_no, sku, qty), ',' ORDER BY order_no, sku) FROM "
        "ordergate.order_items), (SELECT string_agg(concat_ws('|', sku, available), ',' ORDER BY "
        "sku) FROM ordergate.inventory), (SELECT count(*) FROM ordergate.outbox), (SELECT count(*) "
        "FROM ordergate.status_log), (SELECT count(*) FROM ordergate.amendments), (SELECT count(*) "
        "FROM ordergate.deadline_changes)))";

    (void)state;
    testdb_create(&t, "ctl_life");
    conn = testdb_connect(&t);
    seed_stock(conn);
    place_ok(&t, "L1", "100", "S1:1", "--expire-at", "2030-01-01T00:00:00Z");
    place_ok(&t, "L2", "200", "S1:2", "--expire-at", "2030-01-01T00:00:00Z");
    before = scalar_text(conn, state_sql);

    /* Bad input: exit 2, one line, nothing sent. */
    static const char *const bad[][16] = {
        {"release", "L1", "--reason", "cod", NULL},
        {"release", "L1", "--operator", "ops", NULL},
        {"release", "L 1", "--operator", "ops", "--reason", "cod", NULL},
        {"release", "L1", "--operator", " ", "--reason", "cod", NULL},
        {"amend", "L2", "--item", "S1:1", "--operator", "ops", NULL},
        {"amend", "L2", "--amount", "0", "--item", "S1:1", "--operator", "ops", NULL},
        {"amend", "L2", "--amount", "150", "--operator", "ops", NULL},
        {"amend", "L2", "--amount", "150", "--item", "S1:1", "--gate-only", "--operator", "ops",
         NULL},
        {"amend", "L2", "--amount", "150", "--item", "S1", "--operator", "ops", NULL},
        {"amend", "L2", "--amount", "150", "--item", "S1:1", "--shop", "[1]", "--operator", "ops",
         NULL},
        {"amend", "L2", "--amount", "150", "--item", "S1:1", NULL},
        {"amend", "L2", "--amount", "150", "--gate-only", "--operator", "ops", NULL},
        {"deadline", "L2", "--operator", "ops", NULL},
        {"deadline", "L2", "--expire-in", "10m", "--expire-at", "2030-01-01T00:00:00Z",
         "--operator", "ops", NULL},
        {"deadline", "L2", "--expire-at", "tomorrow", "--operator", "ops", NULL},
        {"deadline", "L2", "--expire-in", "10m", NULL},
        {"deadline", "L2", "--expire-at", "2099-01-01T00:00:00Z", "--operator", "ops", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *args[20];
        size_t n = 0;

        for (; bad[i][n] != NULL; n++)
            args[n] = bad[i][n];
        args[n++] = "--db";
        args[n++] = t.conninfo;
        args[n] = NULL;
        ctl_runv(&r, args);
        if (r.status != 2)
            fail_msg("%s %s ...: exit %d, want 2 (%s)", bad[i][0], bad[i][1], r.status, r.err);
        assert_string_equal(r.out, "");
        assert_int_equal(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err)); /* one line */
        ctl_result_free(&r);
    }
    {
        char *after = scalar_text(conn, state_sql);

        assert_string_equal(after, before);
        free(after);
    }

    /* amend: the lines replace the order's, stock moves by the difference. */
    ctl_run(&r, "amend", "L2", "--db", t.conninfo, "--amount", "250", "--item", "S1:1", "--item",
            "S2:2", "--shop", "{\"edit\":1}", "--operator", "clerk", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "amended");
    assert_string_equal(ctl_json_s(r.json, "status"), "pending_payment");
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     8);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S2'"),
                     3);
    assert_int_equal(count_where(conn, "amendments", "order_no = 'L2' AND operator = 'clerk'"), 1);
    ctl_run(&r, "amend", "L2", "--db", t.conninfo, "--amount", "250", "--item", "S2:50",
            "--operator", "clerk", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "out_of_stock"));
    ctl_result_free(&r);

    /* deadline: set, with the new deadline shown. */
    ctl_run(&r, "deadline", "L2", "--db", t.conninfo, "--expire-at", "2029-06-01T12:00:00Z",
            "--operator", "dora", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "set");
    assert_string_equal(ctl_json_s(r.json, "expire_at"), "2029-06-01T12:00:00.000Z");
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "deadline_changes", "order_no = 'L2' AND operator = 'dora'"),
                     1);
    /* show: the amendment and the deadline change, with their operators. */
    ctl_run(&r, "show", "L2", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\namendments:\n"));
    assert_non_null(strstr(r.out, "clerk"));
    assert_non_null(strstr(r.out, "\ndeadline changes:\n"));
    assert_non_null(strstr(r.out, "2029-06-01T12:00:00.000Z"));
    ctl_result_free(&r);

    /* release, then again: not_pending; a cancel cannot take it; amend and deadline refuse. */
    ctl_run(&r, "release", "L1", "--db", t.conninfo, "--operator", "rita", "--reason",
            "cash on delivery", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "released");
    assert_string_equal(ctl_json_s(r.json, "status"), "released");
    ctl_result_free(&r);
    ctl_run(&r, "release", "L1", "--db", t.conninfo, "--operator", "rita", "--reason", "again",
            NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "not_pending"));
    ctl_result_free(&r);
    ctl_run(&r, "close", "L1", "--db", t.conninfo, "--operator", "rita", "--reason", "x", "--json",
            NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "already_released");
    ctl_result_free(&r);
    ctl_run(&r, "amend", "L1", "--db", t.conninfo, "--amount", "5", "--item", "S1:1", "--operator",
            "clerk", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "not_pending");
    ctl_result_free(&r);
    ctl_run(&r, "deadline", "NOPE", "--db", t.conninfo, "--expire-in", "0", "--operator", "dora",
            "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "not_found");
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "status_log",
                                 "order_no = 'L1' AND to_status = 'released' AND actor = 'rita' "
                                 "AND note = 'cash on delivery'"),
                     1);
    free(before);
    PQfinish(conn);
    testdb_drop(&t);
}

static void test_close_requires_operator_and_reason(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;

    (void)state;
    testdb_create(&t, "ctl_close");
    conn = testdb_connect(&t);
    seed_stock(conn);
    place_ok(&t, "P1", "100", "S1:1", "--expire-at", "2020-01-01T00:00:00Z");

    ctl_run(&r, "close", "P1", "--db", t.conninfo, "--reason", "no operator", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--operator NAME is required"));
    assert_int_equal(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err)); /* one line */
    assert_string_equal(r.out, "");
    ctl_result_free(&r);
    ctl_run(&r, "close", "P1", "--db", t.conninfo, "--operator", "bob", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--reason TEXT is required"));
    ctl_result_free(&r);
    ctl_run(&r, "close", "P1", "--db", t.conninfo, "--operator", "  ", "--reason", "x", "--json",
            NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(r.json);
    assert_true(json_is_false(json_object_get(r.json, "ok")));
    assert_int_equal(ctl_json_i(r.json, "exit"), 2);
    assert_non_null(strstr(ctl_json_s(r.json, "error"), "--operator must not be empty"));
    ctl_result_free(&r);

    /* Nothing happened to the order. */
    assert_int_equal(count_where(conn, "orders",
                                 "order_no = 'P1' AND status = "
                                 "'pending_payment'"),
                     1);
    assert_int_equal(count_where(conn, "status_log", "true"), 0);
    assert_int_equal(count_where(conn, "outbox", "true"), 0);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     9);
    PQfinish(conn);
    testdb_drop(&t);
}

struct bad_case {
    const char *args[16];
    const char *message;
};

static void test_bad_input_exits_2(void **state)
{
    static const struct bad_case cases[] = {
        {{"place", "X1", "--amount", "12.50", "--item", "S1:1", "--expire-in", "60"},
         "--amount: expected a whole number of cents (write 12.50 as 1250), got \"12.50\""},
        {{"place", "X1", "--amount", "abc", "--item", "S1:1", "--expire-in", "60"},
         "--amount: expected an integer in 1..1000000000000000, got \"abc\""},
        {{"place", "X1", "--amount", "0", "--item", "S1:1", "--expire-in", "60"},
         "--amount: expected an integer in 1..1000000000000000, got \"0\""},
        {{"place", "X1", "--amount", "-5", "--item", "S1:1", "--expire-in", "60"},
         "--amount: expected an integer in 1..1000000000000000, got \"-5\""},
        {{"place", "X1", "--amount", "99999999999999999999", "--item", "S1:1", "--expire-in", "60"},
         "--amount: expected an integer in 1..1000000000000000, got \"99999999999999999999\""},
        {{"place", "X1", "--amount", "100", "--expire-in", "60"},
         "at least one --item SKU:QTY is required"},
        {{"place", "X1", "--amount", "100", "--item", "S1", "--expire-in", "60"},
         "--item 'S1': expected SKU:QTY"},
        {{"place", "X1", "--amount", "100", "--item", ":3", "--expire-in", "60"},
         "--item ':3': expected SKU:QTY"},
        {{"place", "X1", "--amount", "100", "--item", "S1:0", "--expire-in", "60"},
         "--item 'S1:0': quantity must be a whole number from 1"},
        {{"place", "X1", "--amount", "100", "--item", "S1:two", "--expire-in", "60"},
         "--item 'S1:two': quantity must be a whole number"},
        {{"place", "X1", "--amount", "100", "--item", "S1:1", "--item", "S2:-1", "--expire-in",
          "60"},
         "--item 'S2:-1'"},
        {{"place", "X1", "--amount", "100", "--item", "S1:1"},
         "give exactly one of --expire-in SECONDS and --expire-at TIMESTAMP"},
        {{"place", "X1", "--amount", "100", "--item", "S1:1", "--expire-at", "2030-01-01 10:00"},
         "is not an RFC 3339 timestamp with a zone"},
        {{"place", "bad order", "--amount", "100", "--item", "S1:1", "--expire-in", "60"},
         "invalid order number 'bad order'"},
        {{"place", "X1", "--amount", "1", "--amount", "2", "--item", "S1:1", "--expire-in", "6"},
         "--amount: given more than once"},
        {{"place", "X1", "X2", "--amount", "1", "--item", "S1:1", "--expire-in", "6"},
         "unexpected argument 'X2'"},
        {{"place", "--amount", "1", "--item", "S1:1", "--expire-in", "6"},
         "missing argument ORDER"},
        {{"place", "X1", "--amount", "1", "--item", "S1:1", "--expire-in", "6", "--colour"},
         "unknown option '--colour'"},
        {{"pay", "X1", "--txn", "T 1", "--amount", "100"}, "--txn 'T 1'"},
        {{"pay", "X1", "--txn", "T1", "--amount", "1e3"},
         "--amount: expected an integer in 1..1000000000000000, got \"1e3\""},
        {{"pay", "X1", "--amount", "100"}, "--txn TXN is required"},
        {{"hold", "X1", "--seconds", "0"},
         "--seconds: expected an integer in 1..2147483647, got \"0\""},
        {{"hold", "X1", "--seconds", "100000"}, "seconds must be 1..900"},
        {{"exceptions", "--limit", "0"}, "--limit: expected an integer in 1..10000, got \"0\""},
        {{"exceptions", "resolve", "12x", "--note", "n", "--operator", "o"},
         "exception ID: expected an integer in 1..9223372036854775807, got \"12x\""},
        /* currencies, parts, staff payments and charges: refused before the database */
        {{"place", "X2", "--amount", "100", "--item", "S1:1", "--expire-in", "60", "--currency",
          "eur"},
         "--currency: expected an ISO 4217 code of 3 upper-case letters (EUR, JPY), got \"eur\""},
        {{"place", "X2", "--amount", "100", "--item", "S1:1", "--expire-in", "60", "--currency",
          "EURO"},
         "--currency: expected an ISO 4217 code"},
        {{"place", "X2", "--amount", "100", "--item", "S1:1", "--expire-in", "60",
          "--allow-partial=yes"},
         "--allow-partial"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--currency", "Usd"},
         "--currency: expected an ISO 4217 code"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--currency", ""},
         "--currency: expected an ISO 4217 code"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--charge", "c 1"}, "--charge 'c 1'"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--operator", "alice"},
         "give both --operator NAME and --reason TEXT"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--reason", "cash"},
         "give both --operator NAME and --reason TEXT"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--operator", " ", "--reason", "cash"},
         "--operator must not be empty"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--operator", "alice", "--reason", "cash",
          "--channel", "card"},
         "a payment taken by staff (--operator) has --channel manual, got 'card'"},
        {{"charge", "begin", "X1", "--seconds", "60"}, "--ref REF is required"},
        {{"charge", "begin", "X1", "--ref", "c 1", "--seconds", "60"}, "--ref 'c 1'"},
        {{"charge", "begin", "X1", "--ref", "c1"}, "--seconds N is required"},
        {{"charge", "begin", "X1", "--ref", "c1", "--seconds", "0"},
         "--seconds: expected a duration in"},
        {{"charge", "begin", "X1", "--ref", "c1", "--seconds", "31d"},
         "--seconds: expected a duration in"},
        {{"charge", "begin", "bad order", "--ref", "c1", "--seconds", "60"},
         "invalid order number 'bad order'"},
        {{"charge", "failed", "X1"}, "--ref REF is required"},
        {{"charge", "failed", "X1", "--ref", ""}, "--ref '': 1 to 128 characters"},
        {{"charge", "X1", "--ref", "c1"}, "unknown command"},
        /* refused by the database (22023), nothing written */
        {{"place", "X2", "--amount", "100", "--item", "S1:1", "--expire-in", "60", "--currency",
          "QQQ"},
         "QQQ"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--currency", "QQQ"}, "QQQ"},
        {{"pay", "X1", "--txn", "T1", "--amount", "100", "--charge", "c-none"}, "c-none"},
        {{"charge", "begin", "X1", "--ref", "c1", "--seconds", "4d"}, "max_pending_charge_seconds"},
        {{"charge", "failed", "X1", "--ref", "c-none"}, "c-none"},
        {{"frobnicate"}, "unknown command 'frobnicate'"},
    };
    struct testdb t;
    PGconn *conn;

    (void)state;
    testdb_create(&t, "ctl_bad");
    conn = testdb_connect(&t);
    seed_stock(conn);
    testdb_exec(conn, "SELECT ordergate.place_order('X1', 100, '[{\"sku\":\"S1\",\"qty\":1}]', "
                      "NULL, now() + interval '1 hour')");
    long logged = testdb_scalar(conn, "SELECT count(*) FROM ordergate.status_log");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *const *a = cases[i].args;
        struct ctl_result r;
        size_t n = 0;
        while (n < 16 && a[n] != NULL)
            n++;
        const char *argv[20];
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            argv[k++] = a[j];
        argv[k++] = "--db";
        argv[k++] = t.conninfo;
        argv[k] = NULL;
        ctl_runv(&r, argv);
        if (r.status != 2 || strstr(r.err, cases[i].message) == NULL)
            fail_msg("case %zu (%s %s): exit %d, stderr '%s', expected exit 2 and '%s'", i, a[0],
                     n > 1 ? a[1] : "", r.status, r.err, cases[i].message);
        /* One line, and nothing on stdout. */
        assert_int_equal(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err));
        assert_string_equal(r.out, "");
        ctl_result_free(&r);
    }
    /* Nothing changed: still one order, the seeded stock, no payment. */
    assert_int_equal(count_where(conn, "orders", "true"), 1);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     9);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.status_log"), logged);
    assert_int_equal(count_where(conn, "payments", "true"), 0);
    assert_int_equal(count_where(conn, "exceptions", "true"), 0);
    assert_int_equal(count_where(conn, "orders", "expire_at > now() + interval '50 minutes'"), 1);
    PQfinish(conn);
    testdb_drop(&t);
}

/* ---- currencies, parts, charges, staff payments ------------------------ */

static void test_money_and_charges(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    const json_t *o, *e;

    (void)state;
    testdb_create(&t, "ctl_money");
    conn = testdb_connect(&t);
    seed_stock(conn);

    ctl_run(&r, "place", "E1", "--db", t.conninfo, "--amount", "1250", "--item", "S1:1",
            "--currency", "EUR", "--allow-partial", "--expire-in", "600", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "placed");
    assert_string_equal(ctl_json_s(r.json, "currency"), "EUR");
    assert_int_equal(ctl_json_i(r.json, "amount_cents"), 1250);
    assert_true(json_is_true(json_object_get(r.json, "allow_partial")));
    ctl_result_free(&r);
    assert_int_equal(
        count_where(conn, "orders", "order_no = 'E1' AND currency = 'EUR' AND allow_partial"), 1);
    /* The text shows the amount in the currency's unit. */
    ctl_run(&r, "place", "J1", "--db", t.conninfo, "--amount", "1250", "--item", "S1:1",
            "--currency", "JPY", "--expire-in", "600", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "amount     1250 JPY\n"));
    assert_non_null(strstr(r.out, "parts      no\n"));
    ctl_result_free(&r);

    /* A gift card part in the order's currency: partial. */
    ctl_run(&r, "pay", "E1", "--db", t.conninfo, "--txn", "T-gift", "--amount", "250", "--channel",
            "gift_card", "--currency", "EUR", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome        partial\n"));
    assert_non_null(strstr(r.out, "amount         2.50 EUR\n"));
    ctl_result_free(&r);
    /* Another currency: currency_mismatch, its exception named. */
    ctl_run(&r, "pay", "E1", "--db", t.conninfo, "--txn", "T-usd", "--amount", "1000", "--currency",
            "USD", "--channel", "card", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "currency_mismatch");
    assert_string_equal(ctl_json_s(json_object_get(r.json, "exception"), "kind"),
                        "currency_mismatch");
    ctl_result_free(&r);

    /* A charge in flight, then its capture pays the rest; its failure afterwards changes
     * nothing. */
    ctl_run(&r, "charge", "begin", "E1", "--db", t.conninfo, "--ref", "ch-1", "--seconds", "1h",
            "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "pending");
    assert_string_equal(ctl_json_s(r.json, "charge_ref"), "ch-1");
    assert_int_equal(ctl_json_i(r.json, "seconds"), 3600);
    assert_true(strlen(ctl_json_s(r.json, "bound_at")) > 0);
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "orders", "order_no = 'E1' AND charge_until > now()"), 1);
    ctl_run(&r, "charge", "begin", "E1", "--db", t.conninfo, "--ref", "ch-1", "--seconds", "60",
            NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome     duplicate\n"));
    ctl_result_free(&r);
    ctl_run(&r, "pay", "E1", "--db", t.conninfo, "--txn", "T-card", "--amount", "1000", "--channel",
            "card", "--charge", "ch-1", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "paid");
    assert_string_equal(ctl_json_s(r.json, "charge_ref"), "ch-1");
    ctl_result_free(&r);
    ctl_run(&r, "charge", "failed", "E1", "--db", t.conninfo, "--ref", "ch-1", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "already_captured");
    ctl_result_free(&r);

    /* show: currency, captured parts and the charge; JSON keeps integer minor units. */
    ctl_run(&r, "show", "E1", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    o = json_object_get(r.json, "order");
    assert_string_equal(ctl_json_s(o, "currency"), "EUR");
    assert_int_equal(ctl_json_i(o, "amount_cents"), 1250);
    assert_int_equal(json_array_size(json_object_get(o, "charges")), 1);
    e = json_array_get(json_object_get(o, "charges"), 0);
    assert_string_equal(ctl_json_s(e, "charge_ref"), "ch-1");
    assert_string_equal(ctl_json_s(e, "state"), "captured");
    ctl_result_free(&r);
    ctl_run(&r, "show", "E1", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "amount              12.50 EUR\n"));
    assert_non_null(strstr(r.out, "currency            EUR\n"));
    assert_non_null(strstr(r.out, "\ncharges:\n"));
    assert_non_null(strstr(r.out, "2.50 EUR"));
    assert_non_null(strstr(r.out, "10.00 USD"));
    ctl_result_free(&r);

    /* A payment taken by staff: who and why in the log. */
    place_ok(&t, "S1", "1000", "S2:1", "--expire-in", "600");
    ctl_run(&r, "pay", "S1", "--db", t.conninfo, "--txn", "cash-1", "--amount", "1000",
            "--operator", "alice", "--reason", "cash at the counter", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "paid");
    assert_string_equal(ctl_json_s(r.json, "channel"), "manual");
    assert_string_equal(ctl_json_s(r.json, "operator"), "alice");
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "status_log",
                                 "order_no = 'S1' AND source = 'manual_payment' AND actor = "
                                 "'alice' AND note = 'cash at the counter'"),
                     1);

    /* exceptions: the currency of each amount. */
    ctl_run(&r, "exceptions", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    e = json_array_get(json_object_get(r.json, "exceptions"), 0);
    assert_string_equal(ctl_json_s(e, "kind"), "currency_mismatch");
    assert_string_equal(ctl_json_s(e, "currency"), "USD");
    assert_int_equal(ctl_json_i(e, "amount_cents"), 1000);
    ctl_result_free(&r);
    ctl_run(&r, "exceptions", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "CURRENCY"));
    assert_non_null(strstr(r.out, " 10.00 "));
    assert_non_null(strstr(r.out, " USD "));
    ctl_result_free(&r);
    PQfinish(conn);
    testdb_drop(&t);
}

/* ---- exceptions -------------------------------------------------------- */

static void test_exceptions_list_and_resolve(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    const json_t *e;
    long long id;
    char ids[24];

    (void)state;
    testdb_create(&t, "ctl_exc");
    conn = testdb_connect(&t);
    seed_stock(conn);
    ctl_run(&r, "exceptions", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "no open exceptions\n");
    ctl_result_free(&r);

    /* The scanner cancels a due order; the payment lands 20 s later. */
    place_ok(&t, "L1", "1500", "S1:1", "--expire-at", "2020-01-01T00:00:00Z");
    testdb_exec(conn, "SELECT * FROM ordergate.claim_cancel(ARRAY['L1'], 'timeout_scanner')");
    ctl_run(&r, "pay", "L1", "--db", t.conninfo, "--txn", "LT1", "--amount", "1500", "--channel",
            "card", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "late_payment");
    assert_string_equal(ctl_json_s(r.json, "status"), "cancelled");
    e = json_object_get(r.json, "exception");
    assert_true(json_is_object(e));
    assert_string_equal(ctl_json_s(e, "kind"), "late_payment");
    assert_string_equal(ctl_json_s(e, "resolution"), "auto_refund");
    id = ctl_json_i(e, "id");
    ctl_result_free(&r);
    snprintf(ids, sizeof(ids), "%lld", id);

    ctl_run(&r, "exceptions", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "state"), "open");
    assert_int_equal(ctl_json_i(r.json, "total"), 1);
    assert_int_equal(json_array_size(json_object_get(r.json, "exceptions")), 1);
    e = json_array_get(json_object_get(r.json, "exceptions"), 0);
    assert_int_equal(ctl_json_i(e, "id"), id);
    assert_string_equal(ctl_json_s(e, "order_no"), "L1");
    assert_string_equal(ctl_json_s(e, "kind"), "late_payment");
    assert_string_equal(ctl_json_s(e, "txn_no"), "LT1");
    assert_int_equal(ctl_json_i(e, "amount_cents"), 1500);
    assert_string_equal(ctl_json_s(e, "state"), "open");
    ctl_result_free(&r);
    ctl_run(&r, "exceptions", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "L1     late_payment  LT1  15.00   USD       auto_refund  open"));
    assert_non_null(strstr(r.out, "1 of 1 open exceptions"));
    ctl_result_free(&r);

    /* Resolve without a note: refused, still open. */
    ctl_run(&r, "exceptions", "resolve", ids, "--db", t.conninfo, "--operator", "carol", NULL);
    assert_int_equal(r.status, 2);
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "exceptions", "state = 'open'"), 1);

    ctl_run(&r, "exceptions", "resolve", ids, "--db", t.conninfo, "--note", "refund arrived",
            "--operator", "carol", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "resolved");
    assert_int_equal(ctl_json_i(r.json, "id"), id);
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "exceptions",
                                 "state = 'resolved' AND resolved_by = 'carol' AND resolved_at IS "
                                 "NOT NULL AND note LIKE '%refund arrived'"),
                     1);

    /* Twice: already_resolved, and the first resolution stands. */
    ctl_run(&r, "exceptions", "resolve", ids, "--db", t.conninfo, "--note", "again", "--operator",
            "dave", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "outcome  already_resolved\n"));
    ctl_result_free(&r);
    assert_int_equal(count_where(conn, "exceptions",
                                 "resolved_by = 'carol' AND note NOT LIKE "
                                 "'%again%'"),
                     1);

    ctl_run(&r, "exceptions", "resolve", "987654", "--db", t.conninfo, "--note", "n", "--operator",
            "dave", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "not_found");
    ctl_result_free(&r);

    ctl_run(&r, "exceptions", "--open", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(json_array_size(json_object_get(r.json, "exceptions")), 0);
    assert_int_equal(ctl_json_i(r.json, "total"), 0);
    ctl_result_free(&r);
    ctl_run(&r, "exceptions", "--all", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(json_array_size(json_object_get(r.json, "exceptions")), 1);
    e = json_array_get(json_object_get(r.json, "exceptions"), 0);
    assert_string_equal(ctl_json_s(e, "state"), "resolved");
    assert_string_equal(ctl_json_s(e, "resolved_by"), "carol");
    ctl_result_free(&r);

    /* show names the exception too. */
    ctl_run(&r, "show", "L1", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    e = json_array_get(json_object_get(json_object_get(r.json, "order"), "exceptions"), 0);
    assert_non_null(e);
    assert_int_equal(ctl_json_i(e, "id"), id);
    assert_string_equal(ctl_json_s(e, "state"), "resolved");
    ctl_result_free(&r);

    PQfinish(conn);
    testdb_drop(&t);
}

/* ---- configuration, help, version -------------------------------------- */

static void test_config_help_version(void **state)
{
    char good[] = "/tmp/og_ctl_cfg_XXXXXX", bad[] = "/tmp/og_ctl_badcfg_XXXXXX";
    struct ctl_result r;
    int fd;

    (void)state;
    fd = mkstemp(good);
    assert_true(fd >= 0);
    assert_true(write(fd, "consumer = { batch_size = 100; };\n", 34) == 34);
    close(fd);
    fd = mkstemp(bad);
    assert_true(fd >= 0);
    assert_true(write(fd, "# comment\nconsumer = { batch_size = 0; };\n", 42) == 42);
    close(fd);

    ctl_run(&r, "--config", good, "--check-config", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "configuration ok"));
    ctl_result_free(&r);
    ctl_run(&r, "--check-config", "--config", bad, "--json", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, bad));
    assert_non_null(strstr(r.err, ":2:"));
    assert_non_null(r.json);
    assert_true(json_is_false(json_object_get(r.json, "ok")));
    ctl_result_free(&r);
    ctl_run(&r, "show", "A1", "--config", "/nonexistent/ordergate.conf", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "/nonexistent/ordergate.conf"));
    ctl_result_free(&r);
    /* --check-config checks what a command or a service would refuse: a metrics port past
     * 65535, an integer that does not fit (read wrapped before: 4294967796 as 500), a password
     * file that cannot be read (each said "configuration ok" before). */
    {
        static const struct {
            const char *text, *message;
        } cases[] = {
            {"consumer = { metrics_listen = \"127.0.0.1:99999\"; };\n",
             ":1: consumer.metrics_listen: port: expected an integer in 0..65535, got \"99999\""},
            {"consumer = { batch_size = 4294967796; };\n",
             ":1: consumer.batch_size: expected an integer in 1..10000, got \"4294967796\""},
            {"database = { password_file = \"/nonexistent/og-ctl-password\"; };\n",
             ":1: database.password_file /nonexistent/og-ctl-password: No such file"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            FILE *f = fopen(bad, "w");
            assert_non_null(f);
            fputs(cases[i].text, f);
            fclose(f);
            ctl_run(&r, "--config", bad, "--check-config", NULL);
            assert_int_equal(r.status, 2);
            if (strstr(r.err, cases[i].message) == NULL)
                fail_msg("case %zu: expected '%s' in: %s", i, cases[i].message, r.err);
            assert_null(strstr(r.out, "configuration ok"));
            ctl_result_free(&r);
        }
    }
    unlink(good);
    unlink(bad);

    ctl_run(&r, "--version", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "ordergatectl "));
    ctl_result_free(&r);

    ctl_run(&r, "--help", NULL);
    assert_int_equal(r.status, 0);
    for (const char *const *c =
             (const char *const[]){"migrate", "place", "pay", "hold", "close", "release", "amend",
                                   "deadline", "show", "exceptions resolve", "schedule", NULL};
         *c != NULL; c++) {
        char line[64];
        snprintf(line, sizeof(line), "\n  %s ", *c);
        assert_non_null(strstr(r.out, line));
    }
    ctl_result_free(&r);
    for (const char *const *c = (const char *const[]){"migrate", "place", "pay", "hold", "close",
                                                      "show", "exceptions", "schedule", NULL};
         *c != NULL; c++) {
        char usage[64];
        ctl_run(&r, *c, "--help", NULL);
        assert_int_equal(r.status, 0);
        snprintf(usage, sizeof(usage), "usage: ordergatectl %s", *c);
        assert_non_null(strstr(r.out, usage));
        ctl_result_free(&r);
    }
    ctl_run(&r, "exceptions", "resolve", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "usage: ordergatectl exceptions resolve ID"));
    ctl_result_free(&r);

    ctl_run(&r, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "no command given"));
    ctl_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_empty_then_idempotent),
        cmocka_unit_test(test_migrate_after_psql),
        cmocka_unit_test(test_migrate_failures),
        cmocka_unit_test(test_place_pay_hold_close_show),
        cmocka_unit_test(test_close_requires_operator_and_reason),
        cmocka_unit_test(test_release_amend_deadline),
        cmocka_unit_test(test_bad_input_exits_2),
        cmocka_unit_test(test_exceptions_list_and_resolve),
        cmocka_unit_test(test_money_and_charges),
        cmocka_unit_test(test_config_help_version),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
