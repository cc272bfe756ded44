/* Structured logging: one logfmt line per event on stderr.
 *
 *   ts=2026-11-30T16:00:00.123Z level=info prog=ordergate-consumer event=batch_done n=500
 *
 * `event` is a stable snake_case name operators can grep and alert on; the
 * optional key=value tail is formatted by the caller. Values that may contain
 * spaces or quotes go through log_quote(). Thread-safe: each line is written
 * with one fputs under a lock. Secrets are never passed here. */
#ifndef OG_COMMON_LOG_H
#define OG_COMMON_LOG_H

#include <stddef.h>
#include <stdio.h>

enum log_level { LOG_LVL_DEBUG = 0, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

void log_init(const char *prog, enum log_level level);
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; returns -1 when unknown. */
int log_level_parse(const char *name);
int log_enabled(enum log_level level);
/* Redirects output (tests capture it); NULL restores stderr. */
void log_set_stream(FILE *stream);

void log_emit(enum log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes `s` as a logfmt value into buf: quoted and escaped when needed.
 * Returns buf, so it can be used inline as a %s argument. */
const char *log_quote(char *buf, size_t size, const char *s);

#define log_debug(event, ...) log_emit(LOG_LVL_DEBUG, event, __VA_ARGS__)
#define log_info(event, ...)  log_emit(LOG_LVL_INFO, event, __VA_ARGS__)
#define log_warn(event, ...)  log_emit(LOG_LVL_WARN, event, __VA_ARGS__)
#define log_error(event, ...) log_emit(LOG_LVL_ERROR, event, __VA_ARGS__)

#endif
