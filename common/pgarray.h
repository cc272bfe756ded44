/* PostgreSQL array literals ("{...}") for array parameters such as $1::text[]
 * or $1::bigint[].
 *
 * Every element is written double-quoted with quote and backslash escaped by a
 * backslash, so any text goes through unchanged: commas, braces, spaces, the
 * word NULL and the empty string included. A NULL element becomes the
 * unquoted NULL. The literal is sent as a statement parameter; it is never
 * spliced into SQL text. */
#ifndef OG_COMMON_PGARRAY_H
#define OG_COMMON_PGARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pgarray {
    char *s;     /* "{" elements...; pgarray_str() closes it */
    size_t len;  /* bytes used in s, without the closing brace */
    size_t cap;  /* bytes allocated */
    size_t n;    /* elements appended */
    bool failed; /* an allocation failed: the literal is lost */
};

/* An empty array; allocates nothing until the first append. */
void pgarray_init(struct pgarray *a);
/* Appends one element, or SQL NULL for elem == NULL. Returns false when out
 * of memory; every later call then fails too and pgarray_str() is NULL. */
bool pgarray_append(struct pgarray *a, const char *elem);
/* The same for len bytes of elem (no NUL needed; PostgreSQL text cannot hold
 * a NUL byte, so none may occur in them). */
bool pgarray_append_len(struct pgarray *a, const char *elem, size_t len);
/* Appends a number in decimal. */
bool pgarray_append_int(struct pgarray *a, int64_t v);
/* The literal, e.g. {"a","b\"c",NULL}; "{}" when nothing was appended. NULL
 * after a failed allocation. Valid until the next append or pgarray_free. */
const char *pgarray_str(struct pgarray *a);
/* Frees the buffer; the array may be initialised again. */
void pgarray_free(struct pgarray *a);

#endif
