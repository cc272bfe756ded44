/* Option parsing and strict value parsers for ordergatectl. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/ctl/ctl.h"

static const struct ctl_opt *ctl_opt_find(const struct ctl_opt *table, const char *name, size_t len)
{
    for (const struct ctl_opt *o = table; o != NULL && o->name != NULL; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

static enum og_status ctl_args_add(struct ctl_args *a, const struct ctl_opt *opt, const char *value,
                                   struct og_error *err)
{
    if (!(opt->flags & CTL_OPT_REPEAT)) {
        for (int i = 0; i < a->nseen; i++)
            if (a->seen[i].opt == opt)
                return og_error_set(err, OG_ERR_ARG, false, "--%s is given more than once",
                                    opt->name);
    }
    a->seen[a->nseen].opt = opt;
    a->seen[a->nseen].value = value;
    a->nseen++;
    return OG_OK;
}

enum og_status ctl_args_parse(struct ctl_args *a, const struct ctl_opt *cmd_opts,
                              const struct ctl_opt *global_opts, int argc, char **argv,
                              struct og_error *err)
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
        const char *name, *eq;
        const struct ctl_opt *opt;
        size_t len;

        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(arg, "-h") == 0) {
            name = "help";
            len = 4;
            eq = NULL;
        } else if (arg[1] != '-') {
            return og_error_set(err, OG_ERR_ARG, false,
                                "unknown option '%s' (options are long: --name)", arg);
        } else {
            name = arg + 2;
            eq = strchr(name, '=');
            len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        }
        opt = ctl_opt_find(cmd_opts, name, len);
        if (opt == NULL)
            opt = ctl_opt_find(global_opts, name, len);
        if (opt == NULL)
            return og_error_set(err, OG_ERR_ARG, false, "unknown option '--%.*s'", (int)len, name);
        if (opt->metavar == NULL) {
            if (eq != NULL)
                return og_error_set(err, OG_ERR_ARG, false, "--%s takes no value", opt->name);
            st = ctl_args_add(a, opt, NULL, err);
        } else if (eq != NULL) {
            st = ctl_args_add(a, opt, eq + 1, err);
        } else if (i + 1 < argc) {
            st = ctl_args_add(a, opt, argv[++i], err);
        } else {
            return og_error_set(err, OG_ERR_ARG, false, "--%s needs a value (%s)", opt->name,
                                opt->metavar);
        }
    }
    return st;
}

void ctl_args_free(struct ctl_args *a)
{
    if (a == NULL)
        return;
    free(a->seen);
    free(a->pos);
    memset(a, 0, sizeof(*a));
}

const char *ctl_arg(const struct ctl_args *a, const char *name)
{
    const char *v = NULL;

    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0)
            v = a->seen[i].value;
    return v;
}

bool ctl_flag(const struct ctl_args *a, const char *name)
{
    return ctl_arg_count(a, name) > 0;
}

int ctl_arg_count(const struct ctl_args *a, const char *name)
{
    int n = 0;

    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0)
            n++;
    return n;
}

const char *ctl_arg_nth(const struct ctl_args *a, const char *name, int nth)
{
    for (int i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i].opt->name, name) == 0 && nth-- == 0)
            return a->seen[i].value;
    return NULL;
}

/* ---- values ------------------------------------------------------------ */

enum og_status ctl_parse_int64(const char *what, const char *s, int64_t min, int64_t max,
                               int64_t *out, struct og_error *err)
{
    char *end = NULL;
    long long v;

    if (s == NULL || *s == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "%s: a number is required", what);
    /* strtoll alone would accept " 12", "+12" and "-0": digits only. */
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return og_error_set(err, OG_ERR_ARG, false,
                                "%s: '%s' is not a whole number (digits only)", what, s);
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno == ERANGE || v < min || v > max)
        return og_error_set(err, OG_ERR_ARG, false, "%s: %s is out of range [%lld, %lld]", what, s,
                            (long long)min, (long long)max);
    *out = (int64_t)v;
    return OG_OK;
}

enum og_status ctl_parse_cents(const char *what, const char *s, int64_t *out, struct og_error *err)
{
    if (s != NULL && (strchr(s, '.') != NULL || strchr(s, ',') != NULL))
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: '%s' is not a whole number of cents (write 12.50 as 1250)", what,
                            s);
    if (s != NULL && *s == '-')
        return og_error_set(err, OG_ERR_ARG, false, "%s: must be positive, got %s", what, s);
    if (s != NULL && strcmp(s, "0") == 0)
        return og_error_set(err, OG_ERR_ARG, false, "%s: must be positive, got 0", what);
    return ctl_parse_int64(what, s, 1, INT64_C(1000000000000000), out, err);
}

enum og_status ctl_parse_duration(const char *what, const char *s, int64_t *seconds,
                                  struct og_error *err)
{
    char num[32];
    size_t len = s != NULL ? strlen(s) : 0;
    int64_t unit = 1, v = 0;
    struct og_error inner = {0};

    if (len == 0 || len >= sizeof(num))
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: '%s' is not a duration (e.g. 90s, 15m, 2h, 1d)", what,
                            s != NULL ? s : "");
    memcpy(num, s, len + 1);
    switch (num[len - 1]) {
    case 's':
        unit = 1;
        break;
    case 'm':
        unit = 60;
        break;
    case 'h':
        unit = 3600;
        break;
    case 'd':
        unit = 86400;
        break;
    default:
        unit = 0;
        break;
    }
    if (unit != 0)
        num[--len] = '\0';
    else
        unit = 1;
    if (ctl_parse_int64(what, num, 1, INT64_C(3650) * 86400, &v, &inner) != OG_OK ||
        v * unit > INT64_C(3650) * 86400)
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: '%s' is not a duration between 1s and 3650d (e.g. 90s, 15m, 2h)",
                            what, s);
    *seconds = v * unit;
    return OG_OK;
}

enum og_status ctl_parse_time(const char *what, const char *s, int64_t *ms, struct og_error *err)
{
    if (s == NULL || clock_parse_iso(s, strlen(s), ms) != 0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "%s: '%s' is not an RFC 3339 timestamp with a zone "
                            "(e.g. 2026-11-30T16:00:00Z)",
                            what, s != NULL ? s : "");
    return OG_OK;
}

enum og_status ctl_check_text(const char *what, const char *s, size_t max, struct og_error *err)
{
    bool blank = true;
    size_t len;

    if (s == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "%s is required", what);
    len = strlen(s);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 && c != '\n' && c != '\t')
            return og_error_set(err, OG_ERR_ARG, false, "%s contains a control character", what);
        if (c != ' ' && c != '\n' && c != '\t')
            blank = false;
    }
    if (blank)
        return og_error_set(err, OG_ERR_ARG, false, "%s must not be empty", what);
    if (len > max)
        return og_error_set(err, OG_ERR_ARG, false, "%s is longer than %zu bytes", what, max);
    return OG_OK;
}

/* "2026-11-30 16:15:00.123456+00" -> "2026-11-30T16:15:00.123456+00:00", then
 * the common RFC 3339 parser does the arithmetic. */
int ctl_pg_time_iso(const char *s, char *buf, size_t size)
{
    char tmp[64];
    size_t len = s != NULL ? strlen(s) : 0;
    size_t zone;
    int64_t ms;

    if (len < 22 || len + 4 >= sizeof(tmp) || s[10] != ' ')
        return -1;
    memcpy(tmp, s, len + 1);
    tmp[10] = 'T';
    /* The zone starts at the last '+' or '-' after the time of day. */
    zone = len;
    while (zone > 19 && tmp[zone - 1] != '+' && tmp[zone - 1] != '-')
        zone--;
    if (zone <= 19)
        return -1;
    /* PostgreSQL prints "+00", "+05:30" or "+05:30:15"; the parser wants "+hh:mm". */
    if (len - zone == 2) {
        memcpy(tmp + len, ":00", 4);
        len += 3;
    } else if (len - zone == 8) {
        return -1; /* seconds in a zone offset: historical zones only */
    }
    if (clock_parse_iso(tmp, len, &ms) != 0)
        return -1;
    clock_format_iso(ms, buf, size);
    return 0;
}
