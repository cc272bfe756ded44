/* ordergatectl check: the shop's checks that reconciliation runs after its
 * invariants (schema/README.md, "Shop checks"): registering one, removing
 * one, listing them.
 * add: ordergate.add_check (schema/functions/admin/add_check.sql), drop:
 * ordergate.drop_check (drop_check.sql), both role ordergate_admin; list:
 * the table ordergate.checks. The function is passed to the database as a
 * parameter (cast to regprocedure there), never written into SQL. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/ctl.h"

/* As add_check: 1..63 of [a-z0-9_], a letter first. Checked here too, so a
 * bad name is a usage error (exit 2) before anything is sent. */
static enum og_status check_name_valid(const char *s, struct og_error *err)
{
    size_t n = strlen(s);

    if (n < 1 || n > 63 || !(s[0] >= 'a' && s[0] <= 'z'))
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            goto bad;
    return OG_OK;
bad:
    return og_error_set(err, OG_ERR_ARG, false,
                        "check NAME: 1..63 of a-z, 0-9 and _, starting with a letter");
}

static const struct db_stmt check_stmt_add = {
    "ctl_check_add", "SELECT ordergate.add_check($1, $2::regprocedure)", 2};
static const struct db_stmt check_stmt_drop = {"ctl_check_drop", "SELECT ordergate.drop_check($1)",
                                               1};
static const struct db_stmt check_stmt_list = {
    "ctl_check_list",
    "SELECT id, name, fn_name, created_at, created_by FROM ordergate.checks ORDER BY id", 0};

/* ---- add --------------------------------------------------------------- */

static enum og_status check_add_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                    struct og_error *err)
{
    PGresult *res = NULL;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = check_name_valid(a->pos[0], err);
    if (st == OG_OK)
        st = ctl_check_text("check FUNCTION", a->pos[1], 512, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = db_call(db, &check_stmt_add, (const char *[]){a->pos[0], a->pos[1]}, &res, err);
    if (st != OG_OK) {
        ctl_error_needs_role(err, "registering a check", "ordergate_admin");
        return st;
    }
    out = json_object();
    if (out == NULL) {
        PQclear(res);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string("check add"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "name", json_string(a->pos[0]));
    ctl_json_set(out, "id", json_integer(strtoll(PQgetvalue(res, 0, 0), NULL, 10)));
    ctl_json_set(out, "function", json_string(a->pos[1]));
    PQclear(res);
    *result = out;
    return OG_OK;
}

static void check_add_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"name", "id", "function", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt check_no_opts[] = {
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_check_add = {
    .name = "check add",
    .usage = "check add NAME FUNCTION",
    .summary = "register a shop check that reconciliation runs as the invariant shop:NAME",
    .details =
        "FUNCTION is the check's signature, e.g. 'shop.check_stock()': a function\n"
        "() RETURNS TABLE(detail text), each row one violation, SECURITY DEFINER, with its own\n"
        "SET search_path, owned by a shop role (not a superuser, not an ordergate role), and\n"
        "executable by ordergate_owner. Registering the same name and function again checks it\n"
        "again (after a change to the function, that is how it runs again). Needs the database\n"
        "role ordergate_admin. A check that raises is reported failed, never skipped.\n",
    .opts = check_no_opts,
    .min_pos = 2,
    .max_pos = 2,
    .pos_name = "NAME FUNCTION",
    .run = check_add_run,
    .text = check_add_text,
};

/* ---- drop -------------------------------------------------------------- */

static enum og_status check_drop_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                     struct og_error *err)
{
    PGresult *res = NULL;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = check_name_valid(a->pos[0], err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = db_call(db, &check_stmt_drop, (const char *[]){a->pos[0]}, &res, err);
    if (st != OG_OK) {
        ctl_error_needs_role(err, "removing a check", "ordergate_admin");
        return st;
    }
    out = json_object();
    if (out == NULL) {
        PQclear(res);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string("check drop"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "name", json_string(a->pos[0]));
    ctl_json_set(out, "outcome", json_string(PQgetvalue(res, 0, 0)));
    PQclear(res);
    *result = out;
    return OG_OK;
}

static void check_drop_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"name", "outcome", NULL};

    ctl_print_fields(out, r, keys);
}

const struct ctl_command ctl_cmd_check_drop = {
    .name = "check drop",
    .usage = "check drop NAME",
    .summary = "remove a shop check (outcomes: dropped, not_found)",
    .details = "Needs the database role ordergate_admin. The shop's function is not touched.\n",
    .opts = check_no_opts,
    .min_pos = 1,
    .max_pos = 1,
    .pos_name = "NAME",
    .run = check_drop_run,
    .text = check_drop_text,
};

/* ---- list -------------------------------------------------------------- */

static enum og_status check_list_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                     struct og_error *err)
{
    static const char *const cols[] = {"id", "name", "function", "created_at", "created_by"};
    PGresult *res = NULL;
    struct db *db;
    enum og_status st;

    (void)a;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = db_call(db, &check_stmt_list, NULL, &res, err);
    if (st != OG_OK)
        return st;
    st = ctl_list_json(res, cols, "ittTt", "check list", "checks", result, err);
    PQclear(res);
    return st;
}

static void check_list_text(const json_t *r, FILE *out)
{
    static const char *const heads[] = {"ID", "NAME", "FUNCTION", "CREATED_AT", "BY"};
    static const char *const keys[] = {"id", "name", "function", "created_at", "created_by"};
    const json_t *list = json_object_get(r, "checks");

    if (json_array_size(list) == 0) {
        fprintf(out, "no shop checks registered (ordergatectl check add NAME FUNCTION)\n");
        return;
    }
    ctl_table_print_list(out, list, 5, heads, keys);
    fprintf(out, "%zu shop check%s; reconciliation reports each as shop:NAME\n",
            json_array_size(list), json_array_size(list) == 1 ? "" : "s");
}

const struct ctl_command ctl_cmd_check_list = {
    .name = "check list",
    .usage = "check list",
    .summary = "list the shop checks reconciliation runs, in the order it runs them",
    .details = NULL,
    .opts = check_no_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = check_list_run,
    .text = check_list_text,
};
