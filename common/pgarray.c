#include "common/pgarray.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pgarray_init(struct pgarray *a)
{
    memset(a, 0, sizeof(*a));
}

/* Room for more bytes plus the closing brace and NUL. */
static bool pgarray_reserve(struct pgarray *a, size_t more)
{
    size_t need, cap;
    char *grown;

    if (a->failed)
        return false;
    need = a->len + more + 2;
    if (need <= a->cap)
        return true;
    cap = a->cap ? a->cap : 64;
    while (cap < need)
        cap *= 2;
    grown = realloc(a->s, cap);
    if (grown == NULL) {
        a->failed = true;
        return false;
    }
    a->s = grown;
    a->cap = cap;
    return true;
}

/* The opening brace or the separating comma. */
static bool pgarray_start(struct pgarray *a, size_t more)
{
    if (!pgarray_reserve(a, more + 1))
        return false;
    a->s[a->len++] = a->n++ == 0 ? '{' : ',';
    return true;
}

bool pgarray_append_len(struct pgarray *a, const char *elem, size_t len)
{
    /* At worst every byte is escaped, plus the two quotes. */
    if (len > (SIZE_MAX - 8) / 2 || !pgarray_start(a, 2 * len + 2))
        return false;
    a->s[a->len++] = '"';
    for (size_t i = 0; i < len; i++) {
        if (elem[i] == '"' || elem[i] == '\\')
            a->s[a->len++] = '\\';
        a->s[a->len++] = elem[i];
    }
    a->s[a->len++] = '"';
    return true;
}

bool pgarray_append(struct pgarray *a, const char *elem)
{
    if (elem == NULL) {
        if (!pgarray_start(a, 4))
            return false;
        memcpy(a->s + a->len, "NULL", 4);
        a->len += 4;
        return true;
    }
    return pgarray_append_len(a, elem, strlen(elem));
}

bool pgarray_append_int(struct pgarray *a, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRId64, v);

    if (!pgarray_start(a, (size_t)n))
        return false;
    memcpy(a->s + a->len, num, (size_t)n);
    a->len += (size_t)n;
    return true;
}

const char *pgarray_str(struct pgarray *a)
{
    if (!pgarray_reserve(a, 1))
        return NULL;
    /* With no element yet the opening brace is written here, without
     * counting it: a later append still opens the array itself. */
    if (a->n == 0)
        a->s[0] = '{';
    /* pgarray_reserve always leaves room for the brace and the NUL. */
    a->s[a->n == 0 ? 1 : a->len] = '}';
    a->s[(a->n == 0 ? 1 : a->len) + 1] = '\0';
    return a->s;
}

void pgarray_free(struct pgarray *a)
{
    free(a->s);
    pgarray_init(a);
}
