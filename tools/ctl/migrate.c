/* ordergatectl migrate: brings a database to the schema in a schema
 * directory (schema/README.md, "Changing the schema").
 *
 * The directory holds migrations/NNN_name.sql (tables, indexes, grants;
 * each applied once, in lexical order), functions/GROUP/NAME.sql (one
 * function each, with its grants and the trigger it backs; CREATE OR
 * REPLACE, applied again whenever the file changes; GROUP is the audience,
 * NAME unique across groups and the key its checksum is recorded under, so
 * a file that moves to another group is not applied again) and
 * upgrade/0.1.0.sql (for databases made by 0.1.0's numbered scripts). One
 * run is one transaction: it applies every pending migration, then every
 * function file whose checksum differs from the one recorded (all of them
 * when a migration ran), checks that the owner role owns everything, and
 * commits; any failure rolls all of it back.
 *
 * Files are operator-reviewed SQL sent whole with PQexec, never text built
 * from input; checksums (sha256, hex) are computed by the server from the
 * text sent as a parameter, so the tool needs no crypto library. */
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
#define MIGRATE_SUM_LEN   64

static const struct db_stmt migrate_stmt_layout = {
    "ctl_migrate_layout",
    "SELECT CASE WHEN to_regclass('ordergate.schema_migrations') IS NULL THEN 'empty'"
    "            WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_attribute"
    "                          WHERE attrelid = to_regclass('ordergate.schema_migrations')"
    "                            AND attname = 'checksum' AND NOT attisdropped) THEN 'current'"
    "            ELSE '0.1.0' END",
    0};
static const struct db_stmt migrate_stmt_versions = {
    "ctl_migrate_versions",
    "SELECT version, coalesce(checksum, '') FROM ordergate.schema_migrations ORDER BY version", 0};
static const struct db_stmt migrate_stmt_functions = {
    "ctl_migrate_functions", "SELECT file, checksum FROM ordergate.schema_functions ORDER BY file",
    0};
static const struct db_stmt migrate_stmt_sum = {
    "ctl_migrate_sum", "SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", 1};
static const struct db_stmt migrate_stmt_record = {
    "ctl_migrate_record",
    "INSERT INTO ordergate.schema_migrations AS m (version, checksum) VALUES ($1, $2)"
    " ON CONFLICT (version) DO UPDATE SET checksum = excluded.checksum",
    2};
static const struct db_stmt migrate_stmt_record_fn = {
    "ctl_migrate_record_fn",
    "INSERT INTO ordergate.schema_functions AS f (file, checksum) VALUES ($1, $2)"
    " ON CONFLICT (file) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
    2};
static const struct db_stmt migrate_stmt_forget_fn = {
    "ctl_migrate_forget_fn", "DELETE FROM ordergate.schema_functions WHERE file = $1", 1};
/* Objects of the schema that the owner role does not own: a migration that
 * forgot SET LOCAL ROLE ordergate_owner would leave them to the migrating
 * superuser, and SECURITY DEFINER functions would run as it. */
static const struct db_stmt migrate_stmt_owners = {
    "ctl_migrate_owners",
    "SELECT string_agg(x, ', ' ORDER BY x) FROM ("
    "  SELECT 'ordergate.' || c.relname AS x FROM pg_catalog.pg_class c"
    "   WHERE c.relnamespace = 'ordergate'::regnamespace"
    "     AND c.relowner <> 'ordergate_owner'::regrole"
    "  UNION ALL"
    "  SELECT 'ordergate.' || p.proname FROM pg_catalog.pg_proc p"
    "   WHERE p.pronamespace = 'ordergate'::regnamespace"
    "     AND p.proowner <> 'ordergate_owner'::regrole) o",
    0};
/* Two operators migrating at once would otherwise queue on the catalog
 * locks and the second would find its plan stale; the loser gets a clear
 * message instead. Taken first in the run's transaction and released with it:
 * nothing stays on a server connection a transaction pooler hands on. */
static const struct db_stmt migrate_stmt_lock = {
    "ctl_migrate_lock", "SELECT pg_try_advisory_xact_lock(hashtext('ordergate.migrate')::bigint)",
    0};

/* The session settings every function file is applied under. */
static const char migrate_fn_env[] =
    "SET LOCAL ROLE ordergate_owner; SET LOCAL search_path = ordergate, pg_temp";

struct migrate_file {
    char version[4];          /* migrations only */
    char group[NAME_MAX + 1]; /* functions: the folder below functions/ */
    char name[NAME_MAX + 1];
    char *text;
    char sum[MIGRATE_SUM_LEN + 1];
    bool apply; /* functions: differs from the recorded checksum */
};

struct migrate_set {
    struct migrate_file *files;
    size_t n;
};

static void migrate_set_free(struct migrate_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->files[i].text);
    free(s->files);
    s->files = NULL;
    s->n = 0;
}

static bool migrate_is_dir(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* --schema-dir, then ORDERGATE_SCHEMA_DIR, then the installed copy next to
 * the binary (<prefix>/bin/../share/ordergate/schema), then the source tree
 * the binary was built from. */
static enum og_status migrate_find_dir(const struct opt_args *a, char *dir, size_t size,
                                       struct og_error *err)
{
    const char *opt = opt_arg(a, "schema-dir");
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

/* Migrations: NNN_name.sql (three digits, an underscore, a name). */
static bool migrate_name_ok(const char *name)
{
    size_t len = strlen(name);

    return len > 8 && name[0] >= '0' && name[0] <= '9' && name[1] >= '0' && name[1] <= '9' &&
           name[2] >= '0' && name[2] <= '9' && name[3] == '_' &&
           strcmp(name + len - 4, ".sql") == 0;
}

/* [a-z0-9_]+ followed by suffix: a function file (NAME.sql, NAME the
 * function's name) or a group folder (suffix ""). */
static bool migrate_word_ok(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);

    if (len <= slen || strcmp(name + len - slen, suffix) != 0)
        return false;
    for (size_t i = 0; i + slen < len; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '_'))
            return false;
    return true;
}

/* By name: function files apply in the order of their names whatever their
 * group (a name is unique across groups; the group only orders a duplicate's
 * message). */
static int migrate_file_cmp(const void *x, const void *y)
{
    const struct migrate_file *a = x, *b = y;
    int c = strcmp(a->name, b->name);

    return c != 0 ? c : strcmp(a->group, b->group);
}

/* A file's path below the schema directory: migrations/NAME,
 * functions/GROUP/NAME, upgrade/NAME. */
static void migrate_path(char *buf, size_t size, const char *sub, const struct migrate_file *f)
{
    if (f->group[0] != '\0')
        snprintf(buf, size, "%s/%s/%s", sub, f->group, f->name);
    else
        snprintf(buf, size, "%s/%s", sub, f->name);
}

static enum og_status migrate_read_file(const char *path, char **text, struct og_error *err)
{
    FILE *f;
    long size;
    char *buf = NULL;
    enum og_status st = OG_OK;
    int line = 1;
    bool bol = true;

    *text = NULL;
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
    /* psql meta-commands (\set, \i, ...) mean nothing to the server, and
     * transaction control would end the run's one transaction: refuse the
     * file rather than send half of what its author meant. */
    for (const char *p = buf; *p; p++) {
        if (bol && *p == '\\') {
            st = og_error_set(err, OG_ERR_IO, false,
                              "%s:%d: psql meta-command; schema files must be plain SQL", path,
                              line);
            goto out;
        }
        if (bol && (strncmp(p, "BEGIN;", 6) == 0 || strncmp(p, "COMMIT;", 7) == 0)) {
            st = og_error_set(err, OG_ERR_IO, false,
                              "%s:%d: transaction control; ordergatectl migrate runs every file "
                              "in its own one transaction",
                              path, line);
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

/* Adds to set the files of path: migrations (NNN_name.sql, group NULL), or
 * the function files (NAME.sql) of group; group "" is functions/ itself,
 * whose group folders (functions/GROUP/NAME.sql, schema/README.md, "Layout")
 * are read in turn. A .sql file directly in functions/ is refused rather
 * than skipped: it would never be applied. */
static enum og_status migrate_scan(const char *path, const char *group, struct migrate_set *set,
                                   struct og_error *err)
{
    struct dirent *de;
    DIR *d = opendir(path);
    enum og_status st = OG_OK;
    bool migrations = group == NULL;

    if (d == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "schema directory %s: %s", path,
                            strerror(errno));
    while ((de = readdir(d)) != NULL && st == OG_OK) {
        char sub[PATH_MAX + NAME_MAX + 2];
        struct migrate_file *f;

        if (!migrations && group[0] == '\0') {
            snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
            if (migrate_word_ok(de->d_name, ".sql"))
                st = og_error_set(err, OG_ERR_CONFIG, false,
                                  "%s: a function file belongs in the folder of its group "
                                  "(functions/GROUP/NAME.sql, schema/README.md)",
                                  sub);
            else if (migrate_word_ok(de->d_name, "") && migrate_is_dir(sub))
                st = migrate_scan(sub, de->d_name, set, err);
            continue;
        }
        if (!(migrations ? migrate_name_ok(de->d_name) : migrate_word_ok(de->d_name, ".sql")))
            continue;
        if (set->n == MIGRATE_MAX_FILES) {
            st = og_error_set(err, OG_ERR_CONFIG, false, "%s: more than %d files", path,
                              MIGRATE_MAX_FILES);
            break;
        }
        f = &set->files[set->n++];
        snprintf(f->group, sizeof(f->group), "%s", migrations ? "" : group);
        snprintf(f->name, sizeof(f->name), "%s", de->d_name);
        if (migrations) {
            memcpy(f->version, de->d_name, 3);
            f->version[3] = '\0';
        }
    }
    closedir(d);
    return st;
}

/* Lists dir/sub's files (migrations, or functions in their groups), sorted
 * by name, with their text. Migrations: NNN_ versions must be unique;
 * functions: names must be unique across groups (one function, one file). */
static enum og_status migrate_list(const char *dir, const char *sub, bool migrations,
                                   struct migrate_set *set, struct og_error *err)
{
    char path[PATH_MAX];
    enum og_status st = OG_OK;

    set->files = NULL;
    set->n = 0;
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    set->files = calloc(MIGRATE_MAX_FILES, sizeof(*set->files));
    if (set->files == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    st = migrate_scan(path, migrations ? NULL : "", set, err);
    if (st != OG_OK)
        goto out;
    if (set->n == 0) {
        st = og_error_set(
            err, OG_ERR_CONFIG, false, "no %s in %s",
            migrations ? "migrations (NNN_name.sql)" : "function files (GROUP/name.sql)", path);
        goto out;
    }
    qsort(set->files, set->n, sizeof(*set->files), migrate_file_cmp);
    for (size_t i = 1; i < set->n; i++) {
        const struct migrate_file *a = &set->files[i - 1], *b = &set->files[i];
        if (migrations && strcmp(a->version, b->version) == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false, "%s: %s and %s both claim version %s",
                              path, a->name, b->name, b->version);
            goto out;
        }
        if (!migrations && strcmp(a->name, b->name) == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "%s: %s/%s and %s/%s: one function, one file", path, a->group,
                              a->name, b->group, b->name);
            goto out;
        }
    }
    for (size_t i = 0; i < set->n && st == OG_OK; i++) {
        char rel[2 * NAME_MAX + 16], file[PATH_MAX + 2 * NAME_MAX + 16];
        migrate_path(rel, sizeof(rel), sub, &set->files[i]);
        snprintf(file, sizeof(file), "%s/%s", dir, rel);
        st = migrate_read_file(file, &set->files[i].text, err);
    }
out:
    if (st != OG_OK)
        migrate_set_free(set);
    return st;
}

/* The server's sha256 of a file's text. */
static enum og_status migrate_sum(struct db *db, struct migrate_file *f, struct og_error *err)
{
    const char *params[1] = {f->text};
    PGresult *res = NULL;
    enum og_status st = db_run(db, &migrate_stmt_sum, params, &res, err);

    if (st != OG_OK)
        return st;
    snprintf(f->sum, sizeof(f->sum), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return OG_OK;
}

/* Sends one file; on failure the message names it (subdirectory/file). */
static enum og_status migrate_send(struct db *db, const char *sub, const struct migrate_file *f,
                                   struct og_error *err)
{
    enum og_status st = db_exec(db, f->text, err);

    if (st != OG_OK) {
        char msg[sizeof(err->msg)], rel[2 * NAME_MAX + 16];
        migrate_path(rel, sizeof(rel), sub, f);
        snprintf(msg, sizeof(msg), "%s: %s", rel, err->msg);
        snprintf(err->msg, sizeof(err->msg), "%s", msg);
        /* A failing schema file is a runtime failure whatever its SQLSTATE. */
        err->status = OG_ERR_DB;
        err->retriable = false;
        st = OG_ERR_DB;
    }
    return st;
}

/* Value of row `key` in a two-column result, NULL when absent. */
static const char *migrate_lookup(const PGresult *res, const char *key)
{
    for (int i = 0; res != NULL && i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, 0), key) == 0)
            return PQgetvalue(res, i, 1);
    return NULL;
}

/* Appends {key: value, "file": f->name} to list (key NULL: only the file;
 * a function file's "group" too) and computes f->sum. */
static enum og_status migrate_item(struct db *db, json_t *list, const char *key, const char *value,
                                   struct migrate_file *f, json_t **item, struct og_error *err)
{
    *item = json_object();
    if (*item == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    if (key != NULL)
        ctl_json_set(*item, key, json_string(value));
    ctl_json_set(*item, "file", json_string(f->name));
    if (f->group[0] != '\0')
        ctl_json_set(*item, "group", json_string(f->group));
    json_array_append_new(list, *item);
    return migrate_sum(db, f, err);
}

/* The whole run, inside the caller's transaction. Fills out as it goes. */
static enum og_status migrate_apply(struct db *db, const char *dir, bool dry, json_t *out,
                                    struct og_error *err)
{
    struct migrate_set mig = {0}, fns = {0};
    PGresult *res = NULL, *recorded = NULL, *fnrec = NULL;
    json_t *mlist = json_object_get(out, "migrations");
    json_t *flist = json_object_get(out, "functions");
    json_t *unknown = json_object_get(out, "unknown_versions");
    json_t *removed = json_object_get(out, "removed_functions");
    json_int_t napplied = 0, nalready = 0, nfn = 0, nfn_same = 0;
    bool any_migration = false, fresh;
    char layout[16];
    enum og_status st;

    st = migrate_list(dir, "migrations", true, &mig, err);
    if (st == OG_OK)
        st = migrate_list(dir, "functions", false, &fns, err);
    if (st == OG_OK)
        st = db_run(db, &migrate_stmt_layout, NULL, &res, err);
    if (st != OG_OK)
        goto out;
    snprintf(layout, sizeof(layout), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    res = NULL;
    fresh = strcmp(layout, "empty") == 0;

    /* A database made by 0.1.0's numbered scripts: convert the bookkeeping,
     * drop every function (the function files create them again below). */
    if (strcmp(layout, "0.1.0") == 0) {
        struct migrate_set up = {0};
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/upgrade/0.1.0.sql", dir);
        ctl_json_set(out, "upgraded_from", json_string("0.1.0"));
        if (!dry) {
            up.files = calloc(1, sizeof(*up.files));
            if (up.files == NULL) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                goto out;
            }
            up.n = 1;
            snprintf(up.files[0].name, sizeof(up.files[0].name), "0.1.0.sql");
            st = migrate_read_file(path, &up.files[0].text, err);
            if (st == OG_OK)
                st = migrate_send(db, "upgrade", &up.files[0], err);
            migrate_set_free(&up);
            if (st != OG_OK)
                goto out;
            any_migration = true;
        }
    }

    if (!fresh && !(dry && strcmp(layout, "0.1.0") == 0)) {
        st = db_run(db, &migrate_stmt_versions, NULL, &recorded, err);
        if (st != OG_OK)
            goto out;
    }
    for (size_t i = 0; i < mig.n; i++) {
        struct migrate_file *f = &mig.files[i];
        const char *have = migrate_lookup(recorded, f->version);
        json_t *item;
        const char *what;

        st = migrate_item(db, mlist, "version", f->version, f, &item, err);
        if (st != OG_OK)
            goto out;
        if (have == NULL && dry && strcmp(layout, "0.1.0") == 0 && strcmp(f->version, "001") == 0)
            have = ""; /* the upgrade records 001 */
        if (have != NULL && have[0] != '\0' && strcmp(have, f->sum) != 0) {
            ctl_json_set(item, "result", json_string("changed"));
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "migrations/%s changed after it was applied (recorded sha256 %.12s, "
                              "file %.12s): an applied migration is never edited, add a new one; "
                              "nothing was changed",
                              f->name, have, f->sum);
            goto out;
        }
        if (have != NULL) {
            /* Applied by schema/install.sql or the upgrade: adopt the checksum. */
            if (have[0] == '\0' && !dry) {
                const char *params[2] = {f->version, f->sum};
                st = db_run(db, &migrate_stmt_record, params, NULL, err);
                if (st != OG_OK)
                    goto out;
            }
            what = "already_applied";
            nalready++;
        } else if (dry) {
            what = "pending";
            napplied++;
            any_migration = true;
        } else {
            const char *params[2] = {f->version, f->sum};
            st = db_exec(db, "RESET ROLE; RESET search_path", err);
            if (st == OG_OK)
                st = migrate_send(db, "migrations", f, err);
            if (st == OG_OK)
                st = db_run(db, &migrate_stmt_record, params, NULL, err);
            if (st != OG_OK) {
                ctl_json_set(item, "result", json_string("failed"));
                goto out;
            }
            log_debug("migration_applied", "version=%s file=%s", f->version, f->name);
            what = "applied";
            napplied++;
            any_migration = true;
        }
        ctl_json_set(item, "result", json_string(what));
    }
    /* Versions the database has and this directory does not: the database
     * is newer than these files (worth a look before going on). */
    for (int r = 0; recorded != NULL && r < PQntuples(recorded); r++) {
        bool known = false;
        for (size_t i = 0; i < mig.n && !known; i++)
            known = strcmp(mig.files[i].version, PQgetvalue(recorded, r, 0)) == 0;
        if (!known)
            json_array_append_new(unknown, json_string(PQgetvalue(recorded, r, 0)));
    }

    /* Function files: those whose text differs from what was applied, or
     * all of them after a migration (it may have dropped one). The records
     * are read either way, so that a file no longer in the directory is
     * reported (and forgotten) in the run that applies the migration that
     * dropped its function. */
    if (!fresh && !(dry && strcmp(layout, "0.1.0") == 0)) {
        st = db_run(db, &migrate_stmt_functions, NULL, &fnrec, err);
        if (st != OG_OK)
            goto out;
    }
    for (size_t i = 0; i < fns.n; i++) {
        struct migrate_file *f = &fns.files[i];
        const char *have;
        json_t *item;

        st = migrate_item(db, flist, NULL, NULL, f, &item, err);
        if (st != OG_OK)
            goto out;
        have = migrate_lookup(fnrec, f->name);
        f->apply = any_migration || fnrec == NULL || have == NULL || strcmp(have, f->sum) != 0;
        ctl_json_set(item, "result",
                     json_string(!f->apply ? "unchanged"
                                 : dry     ? "pending"
                                           : "applied"));
        if (f->apply)
            nfn++;
        else
            nfn_same++;
    }
    for (int r = 0; fnrec != NULL && r < PQntuples(fnrec); r++) {
        bool known = false;
        for (size_t i = 0; i < fns.n && !known; i++)
            known = strcmp(fns.files[i].name, PQgetvalue(fnrec, r, 0)) == 0;
        if (!known)
            json_array_append_new(removed, json_string(PQgetvalue(fnrec, r, 0)));
    }
    if (!dry && nfn > 0) {
        st = db_exec(db, migrate_fn_env, err);
        /* Pass 1 creates every changed function whatever their order (a SQL
         * function's body names others); pass 2 sends the same text with the
         * bodies checked, so a broken body still fails the run. */
        for (int pass = 0; pass < 2 && st == OG_OK; pass++) {
            st = db_exec(db,
                         pass == 0 ? "SET LOCAL check_function_bodies = off"
                                   : "SET LOCAL check_function_bodies = on",
                         err);
            for (size_t i = 0; i < fns.n && st == OG_OK; i++)
                if (fns.files[i].apply)
                    st = migrate_send(db, "functions", &fns.files[i], err);
        }
        for (size_t i = 0; i < fns.n && st == OG_OK; i++) {
            const char *params[2] = {fns.files[i].name, fns.files[i].sum};
            if (fns.files[i].apply)
                st = db_run(db, &migrate_stmt_record_fn, params, NULL, err);
        }
        if (st != OG_OK)
            goto out;
    }
    for (size_t r = 0; !dry && r < json_array_size(removed); r++) {
        const char *params[1] = {json_string_value(json_array_get(removed, r))};
        st = db_run(db, &migrate_stmt_forget_fn, params, NULL, err);
        if (st != OG_OK)
            goto out;
    }
    if (!dry) {
        st = db_run(db, &migrate_stmt_owners, NULL, &res, err);
        if (st != OG_OK)
            goto out;
        if (!PQgetisnull(res, 0, 0)) {
            st = og_error_set(err, OG_ERR_DB, false,
                              "not owned by ordergate_owner: %s (a migration must SET LOCAL ROLE "
                              "ordergate_owner before it creates objects); nothing was changed",
                              PQgetvalue(res, 0, 0));
            goto out;
        }
    }
out:
    ctl_json_set(out, dry ? "pending" : "applied", json_integer(napplied));
    ctl_json_set(out, "already_applied", json_integer(nalready));
    ctl_json_set(out, dry ? "functions_pending" : "functions_applied", json_integer(nfn));
    ctl_json_set(out, "functions_unchanged", json_integer(nfn_same));
    PQclear(res);
    PQclear(recorded);
    PQclear(fnrec);
    migrate_set_free(&mig);
    migrate_set_free(&fns);
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

static enum og_status migrate_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                  struct og_error *err)
{
    char dir[PATH_MAX];
    bool dry = opt_flag(a, "dry-run");
    json_t *out = NULL;
    struct db *db;
    PGresult *res = NULL;
    enum og_status st;
    bool in_tx = false;

    st = migrate_find_dir(a, dir, sizeof(dir), err);
    if (st != OG_OK)
        return st;
    out = json_object();
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(out, "command", json_string("migrate"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "schema_dir", json_string(dir));
    ctl_json_set(out, "dry_run", json_boolean(dry));
    ctl_json_set(out, "upgraded_from", json_null());
    ctl_json_set(out, "migrations", json_array());
    ctl_json_set(out, "functions", json_array());
    ctl_json_set(out, "unknown_versions", json_array());
    ctl_json_set(out, "removed_functions", json_array());

    db = ctl_db(ctl, err);
    if (db == NULL) {
        st = err->status;
        goto out;
    }
    st = db_connect(db, err);
    if (st != OG_OK)
        goto out;
    PQsetNoticeProcessor(db_conn(db), migrate_notice, NULL);
    st = db_exec(db, "BEGIN", err);
    if (st != OG_OK)
        goto out;
    in_tx = true;
    if (!dry) {
        st = db_run(db, &migrate_stmt_lock, NULL, &res, err);
        if (st != OG_OK)
            goto out;
        if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
            st = og_error_set(err, OG_ERR_DB, true,
                              "another ordergatectl migrate is running on this database; "
                              "try again when it has finished");
            goto out;
        }
    }
    /* From here on the result says what was done or tried, also on a failure. */
    *result = json_incref(out);
    st = migrate_apply(db, dir, dry, out, err);
    if (st == OG_OK && !dry) {
        st = db_exec(db, "COMMIT", err);
        in_tx = false;
    }
out:
    if (in_tx && db_conn(db) != NULL) {
        struct og_error ignored;
        db_exec(db, "ROLLBACK", &ignored);
    }
    if (st != OG_OK)
        ctl_json_set(out, "ok", json_false());
    PQclear(res);
    if (st == OG_OK && *result == NULL)
        *result = json_incref(out);
    json_decref(out);
    return st;
}

static void migrate_text(const json_t *r, FILE *out)
{
    const json_t *mlist = json_object_get(r, "migrations");
    const json_t *flist = json_object_get(r, "functions");
    const json_t *unknown = json_object_get(r, "unknown_versions");
    const json_t *removed = json_object_get(r, "removed_functions");
    const char *from = ctl_json_str(r, "upgraded_from");
    bool dry = json_is_true(json_object_get(r, "dry_run"));
    bool ok = json_is_true(json_object_get(r, "ok"));
    size_t i;
    const json_t *m;

    if (from != NULL)
        fprintf(out, "%s the database from the %s layout (upgrade/%s.sql)\n",
                dry ? "would convert" : "converted", from, from);
    json_array_foreach(mlist, i, m)
    {
        const char *res = ctl_json_str(m, "result");
        const char *shown = res == NULL                           ? "not tried"
                            : strcmp(res, "already_applied") == 0 ? "already applied"
                            : strcmp(res, "pending") == 0         ? "would apply"
                                                                  : res;
        fprintf(out, "%s  %-15s  migrations/%s\n", ctl_json_str(m, "version"), shown,
                ctl_json_str(m, "file"));
    }
    json_array_foreach(unknown, i, m)
    {
        fprintf(out, "%s  %-15s  (recorded in the database, no file in this schema directory)\n",
                json_string_value(m), "unknown");
    }
    json_array_foreach(flist, i, m)
    {
        const char *res = ctl_json_str(m, "result");
        if (res != NULL && strcmp(res, "unchanged") != 0)
            fprintf(out, "fn   %-15s  functions/%s/%s\n",
                    strcmp(res, "pending") == 0 ? "would apply" : res, ctl_json_str(m, "group"),
                    ctl_json_str(m, "file"));
    }
    json_array_foreach(removed, i, m)
    {
        fprintf(out,
                "fn   %-15s  functions/%s (no longer in this schema directory: its function stays "
                "until a migration drops it)\n",
                "removed", json_string_value(m));
    }
    fprintf(out, "%s%lld %s, %lld already applied; functions: %lld %s, %lld unchanged (%s)\n",
            !ok   ? "rolled back, nothing changed: "
            : dry ? "dry run: "
                  : "",
            (long long)json_integer_value(json_object_get(r, dry ? "pending" : "applied")),
            dry ? "would apply" : "applied",
            (long long)json_integer_value(json_object_get(r, "already_applied")),
            (long long)json_integer_value(
                json_object_get(r, dry ? "functions_pending" : "functions_applied")),
            dry ? "would apply" : "applied",
            (long long)json_integer_value(json_object_get(r, "functions_unchanged")),
            ctl_json_str(r, "schema_dir"));
}

static const struct opt migrate_opts[] = {
    {"schema-dir", "DIR", OPT_ARG,
     "schema to apply: migrations/, functions/, upgrade/ (default: $ORDERGATE_SCHEMA_DIR, then "
     "../share/ordergate/schema next to the binary, then the source tree's schema/)",
     NULL, 0, 0},
    {"dry-run", NULL, 0, "list what would be applied; change nothing", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_migrate = {
    .name = "migrate",
    .usage = "migrate [--schema-dir DIR] [--dry-run]",
    .summary = "bring the database to this schema: pending migrations, changed functions",
    .details = "In one transaction: converts a database made by 0.1.0's numbered scripts\n"
               "(upgrade/0.1.0.sql), applies the migrations (migrations/NNN_*.sql) not yet\n"
               "recorded in ordergate.schema_migrations, in lexical order, then every function\n"
               "file (functions/GROUP/*.sql) whose sha256 differs from the one recorded in\n"
               "ordergate.schema_functions (all of them after a migration). Refuses a recorded\n"
               "migration whose file changed. Idempotent: a second run applies nothing. Any\n"
               "failure rolls the whole run back (exit 1) and names the file.\n",
    .opts = migrate_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = migrate_run,
    .text = migrate_text,
};
