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

/* Whether setting `name` is in section `section` ("" for the settings outside any section);
 * the name inside the section in *key. */
static bool cfg_write_in_section(const char *name, const char *section, const char **key)
{
    const char *dot = strchr(name, '.');
    size_t len = strlen(section);

    *key = dot != NULL ? dot + 1 : name;
    if (dot == NULL)
        return len == 0;
    return (size_t)(dot - name) == len && strncmp(name, section, len) == 0;
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
    struct cfg_section_info sec;
    struct cfg_setting_info s;
    const char *key;
    size_t written = 0, rows = 0;

    /* The sections of the table in their order, each once (libconfig refuses a group written
     * twice), with every row of it. */
    for (size_t n = 0; cfg_section_info(n, &sec); n++) {
        if (*sec.name != '\0')
            fprintf(out, "%s: {\n", sec.name);
        for (size_t i = 0; cfg_setting_info(i, &s); i++)
            if (cfg_write_in_section(s.name, sec.name, &key)) {
                fputs(*sec.name != '\0' ? "  " : "", out);
                cfg_write_row(cfg, i, &s, key, out);
                written++;
            }
        if (*sec.name != '\0')
            fputs("};\n", out);
    }
    while (cfg_setting_info(rows, &s))
        rows++;
    if (written != rows)
        return og_error_set(err, OG_ERR_INTERNAL, false,
                            "%zu of the %zu settings are in no section of the table",
                            rows - written, rows);
    if (fflush(out) != 0 || ferror(out))
        return og_error_set(err, OG_ERR_IO, false, "writing the configuration: %s",
                            strerror(errno));
    return OG_OK;
}
