/* Moved to src/tensor/params.h. This forward stays only for
 * src/nn/checkpoint.h, which includes "params.h" until it moves to src/io;
 * delete it then. */
#include "../tensor/params.h"
