/* Status codes and the error record every fallible function fills.
 *
 * Contract: a function returns OG_OK or another og_status; on failure it has
 * written a human-readable message into the caller's struct og_error (when
 * the pointer is not NULL) and set `retriable` when trying again later may
 * succeed (lost connection, serialization failure, broker down). */
#ifndef OG_COMMON_ERROR_H
#define OG_COMMON_ERROR_H

#include <stdbool.h>

enum og_status {
    OG_OK = 0,
    OG_ERR_ARG,      /* bad argument: caller's fault, never retriable */
    OG_ERR_CONFIG,   /* bad configuration: exit 2 */
    OG_ERR_DB,       /* database refused the request */
    OG_ERR_KAFKA,    /* broker or client failure */
    OG_ERR_DECODE,   /* undecodable input message */
    OG_ERR_NOMEM,    /* allocation failed */
    OG_ERR_IO,       /* file or socket failure */
    OG_ERR_STOPPED,  /* gave up because shutdown was requested */
    OG_ERR_INTERNAL, /* broken invariant inside ordergate */
};

struct og_error {
    enum og_status status;
    bool retriable;
    char sqlstate[6]; /* PostgreSQL SQLSTATE when the database said no, else "" */
    /* The configuration setting the error is about ("consumer.batch_size"), else "". A
     * reporter finds where that setting came from (a flag, a file line) from this name, never
     * from the wording of msg. */
    char setting[64];
    /* The object the database named in the error as "schema.table" (its SCHEMA and TABLE
     * fields), else "". ordergate's claims name "ordergate.hooks" when a registered hook
     * failed (gate_hook_failed). */
    char object[128];
    char msg[512];
};

/* Records an error and returns `status`, so callers can `return og_error_set(...)`. */
enum og_status og_error_set(struct og_error *err, enum og_status status, bool retriable,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Names the setting an error already recorded is about (nothing when err is NULL). */
void og_error_setting(struct og_error *err, const char *setting);
/* Puts "<prefix>: " in front of the recorded message (truncated to fit), e.g. the option
 * name a value came from. Status, setting and sqlstate are left as they are. */
void og_error_prefix(struct og_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void og_error_clear(struct og_error *err);
const char *og_status_str(enum og_status status);

#endif
