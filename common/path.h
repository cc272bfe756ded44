/* Where the running program lives, for finding the files installed or built
 * next to it. */
#ifndef OG_COMMON_PATH_H
#define OG_COMMON_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* The directory of the running program (from /proc/self/exe), without a
 * trailing slash. Returns false, with out set to "", when it cannot be
 * known or does not fit in size bytes. */
bool path_exe_dir(char *out, size_t size);

#endif
