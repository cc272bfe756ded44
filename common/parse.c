#include "common/parse.h"

#include <errno.h>
#include <stdlib.h>

int parse_long(const char *s, long min, long max, long *out)
{
    const char *digits;
    char *end;
    long v;

    if (s == NULL || min > max) {
        errno = EINVAL;
        return -1;
    }
    /* strtol alone would skip leading white space and take a '+' sign;
     * only '-' and digits may start the text. */
    digits = s[0] == '-' ? s + 1 : s;
    if (*digits < '0' || *digits > '9') {
        errno = EINVAL;
        return -1;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end != '\0') {
        errno = EINVAL;
        return -1;
    }
    if (errno == ERANGE || v < min || v > max) {
        errno = ERANGE;
        return -1;
    }
    *out = v;
    return 0;
}

int parse_int(const char *s, int min, int max, int *out)
{
    long v;

    if (parse_long(s, min, max, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}
