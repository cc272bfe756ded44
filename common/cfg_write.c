/* Writes a configuration as a libconfig file (cfg_write.h). Walks the settings table; knows no
 * setting by name, and does not validate: the values in a struct og_config were validated
 * when they were set. */
#include "common/cfg_write.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

void cfg_write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* The length of the section part of a dotted name ("database" of "database.conninfo"), 0 for
 * a top-level name. */
static size_t cfg_write_section_len(const char *name)
{
    const char *dot = strchr(name, '.');

    return dot != NULL ? (size_t)(dot - name) : 0;
}

/* Writes row i as "name = value;" with its name inside the section (key). */
static void cfg_write_row(const struct og_config *cfg, size_t i, const struct cfg_setting_info *s,
                          const char *key, FILE *out)
{
    char num[32];
    const char *v;

    fprintf(out, "%s = ", key);
    if (strcmp(s->type, "strlist") == 0) {
        fputc('[', out);
        for (size_t j = 0; (v = cfg_setting_value(cfg, i, j, num, sizeof(num))) != NULL; j++) {
            fputs(j > 0 ? ", " : "", out);
            cfg_write_string(out, v);
        }
        fputc(']', out);
    } else {
        v = cfg_setting_value(cfg, i, 0, num, sizeof(num));
        if (strcmp(s->type, "string") == 0)
            cfg_write_string(out, v != NULL ? v : "");
        else
            fputs(v, out); /* an int in decimal, a bool as true or false */
    }
    fputs(";\n", out);
}

enum og_status cfg_write(const struct og_config *cfg, FILE *out, struct og_error *err)
{
    struct cfg_setting_info s, t;

    for (size_t i = 0; cfg_setting_info(i, &s); i++) {
        size_t len = cfg_write_section_len(s.name);
        if (strchr(s.name + len + (len > 0), '.') != NULL)
            return og_error_set(err, OG_ERR_INTERNAL, false,
                                "%s: cannot write a setting nested deeper than section.name",
                                s.name);
    }
    /* A top-level setting where the table has it; a section once, where the table first names
     * it, with every row of that section (libconfig refuses a section written twice). */
    for (size_t i = 0; cfg_setting_info(i, &s); i++) {
        size_t len = cfg_write_section_len(s.name);
        bool seen = false;

        if (len == 0) {
            cfg_write_row(cfg, i, &s, s.name, out);
            continue;
        }
        for (size_t k = 0; k < i && !seen && cfg_setting_info(k, &t); k++)
            seen = cfg_write_section_len(t.name) == len && strncmp(t.name, s.name, len) == 0;
        if (seen)
            continue;
        fprintf(out, "%.*s: {\n", (int)len, s.name);
        for (size_t k = i; cfg_setting_info(k, &t); k++)
            if (cfg_write_section_len(t.name) == len && strncmp(t.name, s.name, len) == 0) {
                fputs("  ", out);
                cfg_write_row(cfg, k, &t, t.name + len + 1, out);
            }
        fputs("};\n", out);
    }
    if (fflush(out) != 0 || ferror(out))
        return og_error_set(err, OG_ERR_IO, false, "writing the configuration: %s",
                            strerror(errno));
    return OG_OK;
}
