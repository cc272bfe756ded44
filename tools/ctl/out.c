/* Output for ordergatectl: one compact JSON object, or text for people. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/ctl.h"

void ctl_json_set(json_t *obj, const char *key, json_t *value)
{
    json_object_set_new(obj, key, value != NULL ? value : json_null());
}

json_t *ctl_json_str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

void ctl_print_json(const json_t *result)
{
    /* Compact, one line: a machine reads one object per command. */
    json_dumpf(result, stdout, JSON_COMPACT | JSON_ENCODE_ANY);
    fputc('\n', stdout);
    fflush(stdout);
}

const char *ctl_json_str(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    return json_is_string(v) ? json_string_value(v) : NULL;
}

const char *ctl_json_text(const json_t *v, char *buf, size_t size)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, size, "%g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, size, "true");
    else if (json_is_false(v))
        snprintf(buf, size, "false");
    else
        snprintf(buf, size, "-");
    return buf;
}

void ctl_print_fields(FILE *out, const json_t *obj, const char *const *keys)
{
    size_t width = 0;
    char buf[64];

    for (const char *const *k = keys; *k != NULL; k++)
        if (strlen(*k) > width)
            width = strlen(*k);
    for (const char *const *k = keys; *k != NULL; k++)
        fprintf(out, "%-*s  %s\n", (int)width, *k,
                ctl_json_text(json_object_get(obj, *k), buf, sizeof(buf)));
}

/* ---- tables ------------------------------------------------------------ */

struct ctl_table {
    size_t ncols;
    size_t nrows; /* including the header row */
    size_t cap;
    char **cells; /* nrows * ncols */
};

struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers)
{
    struct ctl_table *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    if (ctl_table_add(t, headers) != 0) {
        ctl_table_free(t);
        return NULL;
    }
    return t;
}

int ctl_table_add(struct ctl_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        char **grown = realloc(t->cells, cap * t->ncols * sizeof(*grown));
        if (grown == NULL)
            return -1;
        t->cells = grown;
        t->cap = cap;
    }
    for (size_t c = 0; c < t->ncols; c++) {
        const char *v = cells[c] != NULL ? cells[c] : "-";
        char *copy = strdup(v);
        if (copy == NULL) {
            for (size_t j = 0; j < c; j++)
                free(t->cells[t->nrows * t->ncols + j]);
            return -1;
        }
        /* One line per row: a newline in a note would break the columns. */
        for (char *p = copy; *p; p++)
            if (*p == '\n' || *p == '\t')
                *p = ' ';
        t->cells[t->nrows * t->ncols + c] = copy;
    }
    t->nrows++;
    return 0;
}

void ctl_table_print(const struct ctl_table *t, FILE *out, const char *indent)
{
    size_t *width = calloc(t->ncols, sizeof(*width));

    if (width == NULL)
        return;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t len = strlen(t->cells[r * t->ncols + c]);
            if (len > width[c])
                width[c] = len;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        fputs(indent, out);
        for (size_t c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols)
                fprintf(out, "%s\n", cell); /* no trailing blanks */
            else
                fprintf(out, "%-*s  ", (int)width[c], cell);
        }
    }
    free(width);
}

void ctl_table_free(struct ctl_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

void ctl_table_print_list(FILE *out, const json_t *list, size_t ncols, const char *const *heads,
                          const char *const *keys)
{
    enum { CELL = 32 }; /* numbers and short values; longer strings are shown as they are */
    const char **cells = calloc(ncols, sizeof(*cells));
    char *bufs = calloc(ncols, CELL);
    struct ctl_table *t = ctl_table_new(ncols, heads);
    const json_t *e;
    size_t i;

    if (cells == NULL || bufs == NULL || t == NULL)
        goto out;
    json_array_foreach(list, i, e)
    {
        for (size_t c = 0; c < ncols; c++)
            cells[c] = ctl_json_text(json_object_get(e, keys[c]), bufs + c * CELL, CELL);
        if (ctl_table_add(t, cells) != 0)
            break;
    }
    ctl_table_print(t, out, "");
out:
    ctl_table_free(t);
    free(bufs);
    free(cells);
}

enum og_status ctl_rows_json(const PGresult *res, const char *const *cols, const char *kinds,
                             json_t **list, struct og_error *err)
{
    size_t ncols = strlen(kinds);

    *list = json_array();
    if (*list == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    for (int r = 0; r < PQntuples(res); r++) {
        json_t *e = json_object();
        if (e == NULL || json_array_append_new(*list, e) != 0) {
            json_decref(*list);
            *list = NULL;
            return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        }
        for (size_t c = 0; c < ncols; c++) {
            const char *s = PQgetvalue(res, r, (int)c);
            char iso[40];
            json_t *v;
            if (PQgetisnull(res, r, (int)c))
                v = json_null();
            else if (kinds[c] == CTL_COL_INTEGER)
                v = json_integer(strtoll(s, NULL, 10));
            else if (kinds[c] == CTL_COL_TIME && ctl_pg_time_iso(s, iso, sizeof(iso)) == 0)
                v = json_string(iso);
            else
                v = json_string(s);
            ctl_json_set(e, cols[c], v);
        }
    }
    return OG_OK;
}

enum og_status ctl_list_json(const PGresult *res, const char *const *cols, const char *kinds,
                             const char *command, const char *key, json_t **result,
                             struct og_error *err)
{
    json_t *list = NULL, *out;
    enum og_status st = ctl_rows_json(res, cols, kinds, &list, err);

    if (st != OG_OK)
        return st;
    out = json_object();
    if (out == NULL) {
        json_decref(list);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string(command));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, key, list);
    *result = out;
    return OG_OK;
}

void ctl_error_needs_role(struct og_error *err, const char *what, const char *role)
{
    char msg[sizeof(err->msg)];

    if (strcmp(err->sqlstate, "42501") != 0)
        return;
    snprintf(msg, sizeof(msg), "%s (%s needs the role %s)", err->msg, what, role);
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
}
