/* ordergatectl migrate: applies schema/NNN_*.sql in lexical order.
 *
 * Each migration file records its own version in ordergate.schema_migrations
 * (and refuses to run twice), so files applied earlier with plain psql are
 * recognised here. This command reads the table first (an absent table means
 * nothing is applied), skips what is recorded and sends each remaining file
 * whole with PQexec: the files are operator-reviewed SQL from schema/ with
 * their own BEGIN/COMMIT, never text built from input. */
#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path.h"
#include "tools/ctl/ctl.h"

#ifndef OG_SCHEMA_DIR
#define OG_SCHEMA_DIR "schema"
#endif

#define MIGRATE_MAX_FILES 1000
#define MIGRATE_MAX_BYTES (16 * 1024 * 1024)

static const struct db_stmt migrate_stmt_has_table = {
    "ctl_migrate_has_table", "SELECT to_regclass('ordergate.schema_migrations') IS NOT NULL", 0};
static const struct db_stmt migrate_stmt_versions = {
    "ctl_migrate_versions", "SELECT version FROM ordergate.schema_migrations ORDER BY version", 0};
/* Two operators migrating at once would otherwise race to the files' own
 * "already applied" guard; the loser gets a clear message instead. Released
 * when the session ends. */
static const struct db_stmt migrate_stmt_lock = {
    "ctl_migrate_lock", "SELECT pg_try_advisory_lock(hashtext('ordergate.migrate')::bigint)", 0};

struct migrate_file {
    char version[4];
    char name[NAME_MAX + 1];
};

static bool migrate_is_dir(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* --schema-dir, then ORDERGATE_SCHEMA_DIR, then the installed copy next to
 * the binary (<prefix>/bin/../share/ordergate/schema), then the source tree
 * the binary was built from. */
static enum og_status migrate_find_dir(const struct ctl_args *a, char *dir, size_t size,
                                       struct og_error *err)
{
    const char *opt = ctl_arg(a, "schema-dir");
    const char *env = getenv("ORDERGATE_SCHEMA_DIR");
    char exe[PATH_MAX], installed[PATH_MAX + 64] = "";

    if (opt != NULL) {
        if (!migrate_is_dir(opt))
            return og_error_set(err, OG_ERR_ARG, false, "--schema-dir %s: not a directory", opt);
        snprintf(dir, size, "%s", opt);
        return OG_OK;
    }
    if (env != NULL && *env != '\0') {
        if (!migrate_is_dir(env))
            return og_error_set(err, OG_ERR_CONFIG, false,
                                "ORDERGATE_SCHEMA_DIR=%s: not a directory", env);
        snprintf(dir, size, "%s", env);
        return OG_OK;
    }
    if (path_exe_dir(exe, sizeof(exe))) {
        snprintf(installed, sizeof(installed), "%s/../share/ordergate/schema", exe);
        if (migrate_is_dir(installed)) {
            char *real = realpath(installed, NULL);
            snprintf(dir, size, "%s", real != NULL ? real : installed);
            free(real);
            return OG_OK;
        }
    }
    if (migrate_is_dir(OG_SCHEMA_DIR)) {
        snprintf(dir, size, "%s", OG_SCHEMA_DIR);
        return OG_OK;
    }
    return og_error_set(err, OG_ERR_CONFIG, false,
                        "no schema directory (looked in %s and %s); pass --schema-dir DIR or set "
                        "ORDERGATE_SCHEMA_DIR",
                        installed[0] ? installed : "<prefix>/share/ordergate/schema",
                        OG_SCHEMA_DIR);
}

/* NNN_name.sql: three digits, an underscore, a name, ".sql". */
static bool migrate_name_ok(const char *name)
{
    size_t len = strlen(name);

    return len > 8 && name[0] >= '0' && name[0] <= '9' && name[1] >= '0' && name[1] <= '9' &&
           name[2] >= '0' && name[2] <= '9' && name[3] == '_' &&
           strcmp(name + len - 4, ".sql") == 0;
}

static int migrate_file_cmp(const void *x, const void *y)
{
    return strcmp(((const struct migrate_file *)x)->name, ((const struct migrate_file *)y)->name);
}

static enum og_status migrate_list(const char *dir, struct migrate_file **files, size_t *nfiles,
                                   struct og_error *err)
{
    struct migrate_file *list = NULL;
    size_t n = 0;
    struct dirent *de;
    DIR *d = opendir(dir);
    enum og_status st = OG_OK;

    *files = NULL;
    *nfiles = 0;
    if (d == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "schema directory %s: %s", dir,
                            strerror(errno));
    list = calloc(MIGRATE_MAX_FILES, sizeof(*list));
    if (list == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        if (!migrate_name_ok(de->d_name))
            continue;
        if (n == MIGRATE_MAX_FILES) {
            st = og_error_set(err, OG_ERR_CONFIG, false, "%s: more than %d migrations", dir,
                              MIGRATE_MAX_FILES);
            goto out;
        }
        memcpy(list[n].version, de->d_name, 3);
        list[n].version[3] = '\0';
        snprintf(list[n].name, sizeof(list[n].name), "%s", de->d_name);
        n++;
    }
    if (n == 0) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "no migrations (NNN_name.sql) in %s", dir);
        goto out;
    }
    qsort(list, n, sizeof(*list), migrate_file_cmp);
    for (size_t i = 1; i < n; i++)
        if (strcmp(list[i].version, list[i - 1].version) == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false, "%s: %s and %s both claim version %s", dir,
                              list[i - 1].name, list[i].name, list[i].version);
            goto out;
        }
out:
    closedir(d);
    if (st != OG_OK) {
        free(list);
        return st;
    }
    *files = list;
    *nfiles = n;
    return OG_OK;
}

/* The recorded versions as a JSON array of strings (empty when the table
 * does not exist yet). */
static enum og_status migrate_read_versions(struct db *db, json_t **versions, struct og_error *err)
{
    PGresult *res = NULL;
    enum og_status st;
    bool exists;

    *versions = json_array();
    if (*versions == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    st = db_call(db, &migrate_stmt_has_table, NULL, &res, err);
    if (st != OG_OK)
        return st;
    exists = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    res = NULL;
    if (!exists)
        return OG_OK;
    st = db_call(db, &migrate_stmt_versions, NULL, &res, err);
    if (st != OG_OK)
        return st;
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(*versions, json_string(PQgetvalue(res, i, 0)));
    PQclear(res);
    return OG_OK;
}

static bool migrate_has(const json_t *versions, const char *version)
{
    size_t i;
    const json_t *v;

    json_array_foreach(versions, i, v)
    {
        if (strcmp(json_string_value(v), version) == 0)
            return true;
    }
    return false;
}

static enum og_status migrate_read_file(const char *dir, const char *name, char **text,
                                        struct og_error *err)
{
    char path[PATH_MAX];
    FILE *f;
    long size;
    char *buf = NULL;
    enum og_status st = OG_OK;
    int line = 1;
    bool bol = true;

    *text = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        return og_error_set(err, OG_ERR_IO, false, "%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = og_error_set(err, OG_ERR_IO, false, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (size > MIGRATE_MAX_BYTES) {
        st = og_error_set(err, OG_ERR_IO, false, "%s: larger than %d bytes", path,
                          MIGRATE_MAX_BYTES);
        goto out;
    }
    buf = malloc((size_t)size + 1);
    if (buf == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        st = og_error_set(err, OG_ERR_IO, false, "%s: short read", path);
        goto out;
    }
    buf[size] = '\0';
    if (strlen(buf) != (size_t)size) {
        st = og_error_set(err, OG_ERR_IO, false, "%s: contains a NUL byte", path);
        goto out;
    }
    /* psql meta-commands (\set, \i, ...) mean nothing to the server: refuse
     * the file rather than send half of what its author meant. */
    for (const char *p = buf; *p; p++) {
        if (bol && *p == '\\') {
            st = og_error_set(err, OG_ERR_IO, false,
                              "%s:%d: psql meta-command; migrations must be plain SQL", path, line);
            goto out;
        }
        if (*p == '\n') {
            line++;
            bol = true;
        } else if (*p != ' ' && *p != '\t') {
            bol = false;
        }
    }
    *text = buf;
    buf = NULL;
out:
    free(buf);
    fclose(f);
    return st;
}

static void migrate_notice(void *arg, const char *message)
{
    char q[600];
    size_t len = strlen(message);
    char copy[512];

    (void)arg;
    if (len >= sizeof(copy))
        len = sizeof(copy) - 1;
    memcpy(copy, message, len);
    copy[len] = '\0';
    while (len > 0 && copy[len - 1] == '\n')
        copy[--len] = '\0';
    log_info("pg_notice", "message=%s", log_quote(q, sizeof(q), copy));
}

static enum og_status migrate_run(struct ctl *ctl, const struct ctl_args *a, json_t **result,
                                  struct og_error *err)
{
    char dir[PATH_MAX];
    struct migrate_file *files = NULL;
    size_t nfiles = 0, napplied = 0, nalready = 0, npending = 0;
    bool dry = ctl_flag(a, "dry-run");
    json_t *out = NULL, *list = NULL, *versions = NULL, *unknown = NULL;
    struct db *db;
    PGresult *res = NULL;
    enum og_status st;
    size_t idx;
    json_t *v;

    st = migrate_find_dir(a, dir, sizeof(dir), err);
    if (st != OG_OK)
        return st;
    st = migrate_list(dir, &files, &nfiles, err);
    if (st != OG_OK)
        return st;
    out = json_object();
    list = json_array();
    unknown = json_array();
    if (out == NULL || list == NULL || unknown == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    ctl_json_set(out, "command", json_string("migrate"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "schema_dir", json_string(dir));
    ctl_json_set(out, "dry_run", json_boolean(dry));
    ctl_json_set(out, "migrations", json_incref(list));

    db = ctl_db(ctl, err);
    if (db == NULL) {
        st = err->status;
        goto out;
    }
    st = db_connect(db, err);
    if (st != OG_OK)
        goto out;
    PQsetNoticeProcessor(db_conn(db), migrate_notice, NULL);
    if (!dry) {
        st = db_call(db, &migrate_stmt_lock, NULL, &res, err);
        if (st != OG_OK)
            goto out;
        if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
            st = og_error_set(err, OG_ERR_DB, true,
                              "another ordergatectl migrate is running on this database; "
                              "try again when it has finished");
            goto out;
        }
    }
    st = migrate_read_versions(db, &versions, err);
    if (st != OG_OK)
        goto out;
    /* From here on the result says what was done, also on a failure. */
    *result = json_incref(out);

    for (size_t i = 0; i < nfiles; i++) {
        const struct migrate_file *f = &files[i];
        json_t *item = json_object();
        const char *what;
        char *sql = NULL;

        if (item == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto out;
        }
        ctl_json_set(item, "version", json_string(f->version));
        ctl_json_set(item, "file", json_string(f->name));
        json_array_append_new(list, item);
        if (migrate_has(versions, f->version)) {
            what = "already_applied";
            nalready++;
        } else if (dry) {
            what = "pending";
            npending++;
        } else {
            st = migrate_read_file(dir, f->name, &sql, err);
            if (st == OG_OK) {
                st = db_exec(db, sql, err);
                if (st != OG_OK) {
                    /* The file's transaction is aborted (or never began):
                     * end it, so nothing of it stays. A failing migration is
                     * a runtime failure whatever its SQLSTATE. */
                    struct og_error ignored;
                    if (db_conn(db) != NULL)
                        db_exec(db, "ROLLBACK", &ignored);
                    err->status = OG_ERR_DB;
                    st = OG_ERR_DB;
                }
            }
            free(sql);
            if (st != OG_OK) {
                char msg[sizeof(err->msg)];
                snprintf(msg, sizeof(msg), "%s: %s", f->name, err->msg);
                snprintf(err->msg, sizeof(err->msg), "%s", msg);
                ctl_json_set(item, "result", json_string("failed"));
                goto out;
            }
            json_decref(versions);
            versions = NULL;
            st = migrate_read_versions(db, &versions, err);
            if (st != OG_OK)
                goto out;
            if (!migrate_has(versions, f->version)) {
                ctl_json_set(item, "result", json_string("failed"));
                st = og_error_set(err, OG_ERR_DB, false,
                                  "%s ran but did not record version %s in "
                                  "ordergate.schema_migrations; fix the file (it must insert its "
                                  "own version) before migrating further",
                                  f->name, f->version);
                goto out;
            }
            log_debug("migration_applied", "version=%s file=%s", f->version, f->name);
            what = "applied";
            napplied++;
        }
        ctl_json_set(item, "result", json_string(what));
    }
    /* Versions the database has and this schema directory does not: the
     * database is newer than these files (worth a look before going on). */
    json_array_foreach(versions, idx, v)
    {
        bool known = false;
        for (size_t i = 0; i < nfiles && !known; i++)
            known = strcmp(files[i].version, json_string_value(v)) == 0;
        if (!known)
            json_array_append(unknown, v);
    }

out:
    if (out != NULL) {
        ctl_json_set(out, "applied", json_integer((json_int_t)napplied));
        ctl_json_set(out, "already_applied", json_integer((json_int_t)nalready));
        if (dry)
            ctl_json_set(out, "pending", json_integer((json_int_t)npending));
        ctl_json_set(out, "unknown_versions", json_incref(unknown));
    }
    PQclear(res);
    if (st == OG_OK && *result == NULL)
        *result = json_incref(out);
    json_decref(out);
    json_decref(list);
    json_decref(unknown);
    json_decref(versions);
    free(files);
    return st;
}

static void migrate_text(const json_t *r, FILE *out)
{
    const json_t *list = json_object_get(r, "migrations");
    const json_t *unknown = json_object_get(r, "unknown_versions");
    bool dry = json_is_true(json_object_get(r, "dry_run"));
    size_t i;
    const json_t *m;

    json_array_foreach(list, i, m)
    {
        const char *res = ctl_json_str(m, "result");
        const char *shown = res == NULL                           ? "not tried"
                            : strcmp(res, "already_applied") == 0 ? "already applied"
                            : strcmp(res, "pending") == 0         ? "would apply"
                                                                  : res;
        fprintf(out, "%s  %-15s  %s\n", ctl_json_str(m, "version"), shown, ctl_json_str(m, "file"));
    }
    json_array_foreach(unknown, i, m)
    {
        fprintf(out, "%s  %-15s  (recorded in the database, no file in this schema directory)\n",
                json_string_value(m), "unknown");
    }
    if (dry)
        fprintf(out, "dry run: %lld would apply, %lld already applied (%s)\n",
                (long long)json_integer_value(json_object_get(r, "pending")),
                (long long)json_integer_value(json_object_get(r, "already_applied")),
                ctl_json_str(r, "schema_dir"));
    else
        fprintf(out, "%lld applied, %lld already applied (%s)\n",
                (long long)json_integer_value(json_object_get(r, "applied")),
                (long long)json_integer_value(json_object_get(r, "already_applied")),
                ctl_json_str(r, "schema_dir"));
}

static const struct ctl_opt migrate_opts[] = {
    {"schema-dir", "DIR", CTL_OPT_ARG,
     "migrations to apply (default: $ORDERGATE_SCHEMA_DIR, then ../share/ordergate/schema next "
     "to the binary, then the source tree's schema/)"},
    {"dry-run", NULL, 0, "list what would be applied; change nothing"},
    {NULL, NULL, 0, NULL},
};

const struct ctl_command ctl_cmd_migrate = {
    .name = "migrate",
    .usage = "migrate [--schema-dir DIR] [--dry-run]",
    .summary = "apply the schema migrations (NNN_*.sql) not yet recorded in the database",
    .details = "Reads ordergate.schema_migrations (absent = nothing applied), skips recorded\n"
               "versions and applies the rest in lexical order, one file at a time, each in its\n"
               "own transaction. Idempotent: a second run applies nothing; files applied earlier\n"
               "with plain psql are recognised. Stops at the first failing file (rolled back,\n"
               "exit 1); the files before it stay applied.\n",
    .opts = migrate_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = migrate_run,
    .text = migrate_text,
};
