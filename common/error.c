#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum og_status og_error_set(struct og_error *err, enum og_status status, bool retriable,
                            const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return status;
    err->status = status;
    err->retriable = retriable;
    err->sqlstate[0] = '\0';
    err->setting[0] = '\0';
    err->object[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return status;
}

void og_error_setting(struct og_error *err, const char *setting)
{
    if (err != NULL)
        snprintf(err->setting, sizeof(err->setting), "%s", setting);
}

void og_error_prefix(struct og_error *err, const char *fmt, ...)
{
    char prefix[256], msg[sizeof(err->msg)];
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof(msg), "%s: %s", prefix, err->msg);
    memcpy(err->msg, msg, sizeof(err->msg));
}

void og_error_clear(struct og_error *err)
{
    if (err == NULL)
        return;
    memset(err, 0, sizeof(*err));
}

const char *og_status_str(enum og_status status)
{
    switch (status) {
    case OG_OK:
        return "ok";
    case OG_ERR_ARG:
        return "invalid argument";
    case OG_ERR_CONFIG:
        return "configuration error";
    case OG_ERR_DB:
        return "database error";
    case OG_ERR_KAFKA:
        return "kafka error";
    case OG_ERR_DECODE:
        return "decode error";
    case OG_ERR_NOMEM:
        return "out of memory";
    case OG_ERR_IO:
        return "i/o error";
    case OG_ERR_STOPPED:
        return "stopped";
    case OG_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}
