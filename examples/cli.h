/* The examples' flags are the tools' own: one parser for every program,
 * tools/cli.h (programs may include tools' headers; nothing outside
 * examples/ includes an example's). */
#ifndef TG_EXAMPLES_CLI_H
#define TG_EXAMPLES_CLI_H

#include "../tools/cli.h"

#endif
