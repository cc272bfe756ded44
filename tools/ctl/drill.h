/* ordergatectl drill: races payment callbacks against timeout cancellations
 * on one batch of pending orders, through the real consumers and scanner,
 * then reconciles. The acceptance test of README.md, "The drill", shipped as
 * a command. */
#ifndef OG_TOOLS_CTL_DRILL_H
#define OG_TOOLS_CTL_DRILL_H

#include "common/cfg.h"

/* Runs the drill with the subcommand's own arguments (argv[0] is "drill").
 * cfg carries the database and broker settings already resolved by the
 * global options. Returns the process exit status: 0 with zero violations,
 * 1 on violations or a runtime failure, 2 on bad usage. */
int ctl_drill(struct og_config *cfg, int argc, char **argv);

#endif
