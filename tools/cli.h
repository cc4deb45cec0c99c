/* The tools' flags (inspect, heatmap, bench, tokenize, report) are the
 * examples' own: one parser for every program, examples/cli.h. */
#ifndef TG_TOOLS_CLI_H
#define TG_TOOLS_CLI_H

#include "../examples/cli.h"

#endif
