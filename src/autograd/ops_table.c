/* Every differentiable op of tgrad, in one list. tests/test_gradcheck.c walks
 * it and fails for any op that has no gradient check, so an op cannot be
 * added here without one; and an op missing here is caught by the check that
 * every case's graph contains the op it claims to test. */
#include "autograd.h"

#include <string.h>

#define OPS(X)                                                                      \
    /* ops_unary.c */  X(neg) X(exp) X(log) X(sqrt) X(tanh) X(sigmoid) X(relu) X(gelu) \
                       X(pow_scalar) X(add_scalar) X(mul_scalar)                   \
    /* ops_binary.c */ X(add) X(sub) X(mul) X(div)                                 \
    /* ops_reduce.c */ X(sum) X(mean) X(max)                                       \
    /* ops_matmul.c */ X(matmul)                                                   \
    /* ops_softmax.c */ X(softmax) X(log_softmax)                                  \
    /* ops_shape.c */  X(reshape) X(permute) X(slice) X(concat) X(gather_rows)       \
    /* fused ops used by src/nn, one file each (ops_<name>.c) */                  \
                       X(dropout) X(masked_softmax) X(sparsemax) X(layer_norm) X(cross_entropy) \
                       X(attention)

#define DECLARE(name) extern const tg_op tg_op_##name;
OPS(DECLARE)
#define ENTRY(name) &tg_op_##name,
const tg_op *const tg_op_table[] = {OPS(ENTRY) NULL};

const tg_op *tg_op_find(const char *name) {
    for (int i = 0; tg_op_table[i]; i++)
        if (strcmp(tg_op_table[i]->name, name) == 0) return tg_op_table[i];
    return NULL;
}
