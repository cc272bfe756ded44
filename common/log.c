#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

static const char *log_prog = "ordergate";
static enum log_level log_min = LOG_LVL_INFO;
static FILE *log_stream;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const log_names[] = {"debug", "info", "warn", "error"};

void log_init(const char *prog, enum log_level level)
{
    log_prog = prog;
    log_min = level;
}

void log_set_level(enum log_level level)
{
    log_min = level;
}

int log_level_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++)
        if (strcmp(name, log_names[i]) == 0)
            return (int)i;
    if (strcmp(name, "warning") == 0)
        return LOG_LVL_WARN;
    return -1;
}

int log_enabled(enum log_level level)
{
    return level >= log_min;
}

void log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&log_lock);
    log_stream = stream;
    pthread_mutex_unlock(&log_lock);
}

const char *log_quote(char *buf, size_t size, const char *s)
{
    size_t o = 0;
    int needs = (s == NULL || *s == '\0');

    if (size == 0)
        return "";
    if (s == NULL)
        s = "";
    for (const char *p = s; *p && !needs; p++)
        needs = (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20);
    if (!needs) {
        snprintf(buf, size, "%s", s);
        return buf;
    }
    /* Room for the closing quote and NUL is kept back at every step. */
    buf[o++] = '"';
    for (const char *p = s; *p && o + 3 < size; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else if (c < 0x20) {
            buf[o++] = ' ';
        } else {
            buf[o++] = (char)c;
        }
    }
    if (o + 1 < size)
        buf[o++] = '"';
    buf[o < size ? o : size - 1] = '\0';
    return buf;
}

void log_emit(enum log_level level, const char *event, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    int n;
    va_list ap;

    if (level < log_min)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line),
                 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s prog=%s event=%s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, log_names[level], log_prog, event);
    if (fmt != NULL && *fmt != '\0' && n > 0 && (size_t)n < sizeof(line) - 2) {
        line[n++] = ' ';
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&log_lock);
    fputs(line, log_stream ? log_stream : stderr);
    fputc('\n', log_stream ? log_stream : stderr);
    fflush(log_stream ? log_stream : stderr);
    pthread_mutex_unlock(&log_lock);
}
