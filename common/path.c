#include "common/path.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

bool path_exe_dir(char *out, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (size > 0)
        out[0] = '\0';
    if (n <= 0)
        return false;
    exe[n] = '\0'; /* readlink does not terminate */
    slash = strrchr(exe, '/');
    if (slash == NULL)
        return false;
    /* The root directory stays "/", not "". */
    slash[slash == exe ? 1 : 0] = '\0';
    if (strlen(exe) >= size)
        return false;
    memcpy(out, exe, strlen(exe) + 1);
    return true;
}
