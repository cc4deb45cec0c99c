/* Every differentiable op of tgrad, in one list (TG_OPS, autograd/op.h, which
 * also declares each descriptor for the file that defines it; the unary ops
 * come from their table, TG_UNARY_OPS). tests/test_gradcheck.c walks it and
 * fails for any op with fewer than two gradient checks, so an op cannot be
 * added without them; and an op missing here is caught by the check that
 * every case's graph contains the op it claims to test. */
#include "op.h"

#include <string.h>

#define ENTRY(name, ...) &tg_op_##name,
const tg_op *const tg_op_table[] = {TG_OPS(ENTRY) NULL};

const tg_op *tg_op_find(const char *name) {
    for (int i = 0; name && tg_op_table[i]; i++)
        if (strcmp(tg_op_table[i]->name, name) == 0) return tg_op_table[i];
    return NULL;
}
