/* The settings reference, generated from the settings table (common/cfg.c) and the services'
 * flags (common/opt.c): docs/settings.md and the commented example deploy/ordergate.conf are
 * this module's output, committed, and a test (unit_settings_doc, tests/unit/settings_doc.cmake)
 * fails when either differs from what the built binary prints. Owns only the layout of those
 * two files; the meaning of a setting is the table's, the words of a flag opt_services'. */
#ifndef OG_COMMON_CFG_DOC_H
#define OG_COMMON_CFG_DOC_H

#include <stdio.h>

#include "common/error.h"

/* --list-settings[=FORMAT] of a service (prog: OPT_CONSUMER or OPT_SCANNER). format NULL: the
 * tab-separated table of opt_list_settings, with prog's flags; "markdown": docs/settings.md;
 * "conf": deploy/ordergate.conf. Both files are the same whichever service prints them. Another
 * format is OG_ERR_ARG, and nothing is printed. */
enum og_status cfg_doc_list(FILE *out, unsigned prog, const char *format, struct og_error *err);

#endif
