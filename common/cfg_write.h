/* Writing a configuration back as a file: the inverse of cfg_load.
 *
 * Owns the text form of a struct og_config (libconfig syntax, string escapes). It walks the
 * settings table of cfg.c through cfg_section_info, cfg_setting_info and cfg_setting_value, so
 * a setting added there is written without a change here; it must not know any setting by
 * name. */
#ifndef OG_COMMON_CFG_WRITE_H
#define OG_COMMON_CFG_WRITE_H

#include <stdio.h>

#include "common/cfg.h"
#include "common/error.h"

/* Writes every setting of the table with its value in cfg to out, one group per section of
 * the table ("database: { ... };"), so that cfg_load of the text sets each setting to the
 * same value.
 * Strings are libconfig literals: '"' and '\' escaped with a backslash, control characters
 * as \xNN, every other byte as it is; kafka.properties is a list of such strings. Secrets are
 * written in clear (a conninfo's password, kafka.properties such as sasl.password): the
 * caller decides who may read out. A failed write is OG_ERR_IO; a setting in no section of
 * the table is OG_ERR_INTERNAL. */
enum og_status cfg_write(const struct og_config *cfg, FILE *out, struct og_error *err);

/* Writes s to out as a libconfig string literal, quotes included (the escapes above). */
void cfg_write_string(FILE *out, const char *s);

#endif
