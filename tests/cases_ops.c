/* Gradient-check cases for the ops of src/autograd: several shapes per op,
 * with broadcasting and size-1 dimensions. */
#include "gradcheck_cases.h"

/* Left as written by hand (clang-format off): macros and case tables, aligned by hand. */
/* clang-format off */
#define UNUSED \
    (void)n;   \
    (void)ctx
#define F(name, expr)                                                    \
    static tg_tensor *f_##name(tg_tensor *const *in, int n, void *ctx) { \
        UNUSED;                                                          \
        return (expr);                                                   \
    }

F(neg, tg_neg(in[0]))
F(exp, tg_exp(in[0]))
F(log, tg_log(in[0]))
F(sqrt, tg_sqrt(in[0]))
F(tanh, tg_tanh(in[0]))
F(sigmoid, tg_sigmoid(in[0]))
F(relu, tg_relu(in[0]))
F(gelu, tg_gelu(in[0]))
F(gelu_tanh, tg_gelu_tanh(in[0]))
F(pow, tg_pow_scalar(in[0], (tg_real)GC_ARG(ctx, 0) / 2))
F(add_scalar, tg_add_scalar(in[0], 1.5))
F(mul_scalar, tg_mul_scalar(in[0], -0.7))
F(add, tg_add(in[0], in[1]))
F(add_self, tg_add(in[0], in[0]))
F(sub, tg_sub(in[0], in[1]))
F(mul, tg_mul(in[0], in[1]))
F(mul_self, tg_mul(in[0], in[0]))
F(div, tg_div(in[0], in[1]))
F(div_self, tg_div(tg_exp(in[0]), in[0]))
F(sum, tg_sum(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1)))
F(sum_all, tg_sum_all(tg_tanh(in[0])))
F(mean, tg_mean(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1)))
F(mean_all, tg_mean_all(tg_mul(in[0], in[0])))
F(max, tg_max(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1)))
F(max_all, tg_max_all(in[0]))
F(matmul, tg_matmul_t(in[0], in[1], GC_ARG(ctx, 0), GC_ARG(ctx, 1)))
F(matmul_self, tg_matmul_t(in[0], in[0], false, true)) /* x x^T: one tensor, both sides */
F(softmax, tg_softmax(in[0]))
F(log_softmax, tg_log_softmax(in[0]))
F(reshape, tg_reshape(in[0], GC_ARG(ctx, 0), (const int[]){GC_ARG(ctx, 1), GC_ARG(ctx, 2), GC_ARG(ctx, 3)}))
F(permute, tg_permute(in[0], (const int[]){GC_ARG(ctx, 0), GC_ARG(ctx, 1), GC_ARG(ctx, 2)}))
F(transpose, tg_transpose(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1)))
F(slice, tg_slice(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1), GC_ARG(ctx, 2)))
F(concat2, tg_concat(2, in, GC_ARG(ctx, 0)))
F(concat3, tg_concat(3, in, GC_ARG(ctx, 0)))
F(gather, tg_gather_rows(in[0], (const int[]){0, 2, 2, 4, 1, 0}, 2, (const int[]){2, 3}))
/* The casts' straight-through rule: r(x) + detach(x - r(x)) is x, exactly
 * (x - r(x) is exact, Sterbenz), so its finite differences are 1, and its
 * gradient is 1 only when the casts pass the gradient back unchanged
 * (tg_view of a result is a detached view: no node). A reshape in between
 * runs reshape on a bf16 tensor. */
static tg_tensor *f_cast_st(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    tg_tensor *b = tg_to_bf16(in[0]);
    if (GC_ARG(ctx, 0)) b = tg_reshape(b, 1, (const int[]){-1});
    tg_tensor *r = tg_reshape(tg_to_real(b), in[0]->ndim, in[0]->shape), *d = tg_sub(in[0], r);
    return d ? tg_add(r, tg_view(d, d->ndim, d->shape)) : NULL;
}
F(gather_twice, tg_add(tg_gather_rows(in[0], (const int[]){1, 1, 3}, 1, (const int[]){3}), in[1]))

#define S1(a) \
    1, { a }
#define S2(a, b) \
    2, { a, b }
/* One input: op, description, function, ndim, shape. */
#define C1(op, what, fn, nd, ...)                                 \
    {                                                             \
        op, what, f_##fn, 1, {nd}, {{__VA_ARGS__}}, {0}, 0, { 0 } \
    }
#define C1D(op, what, fn, nd, ...)                                \
    {                                                             \
        op, what, f_##fn, 1, {nd}, {{__VA_ARGS__}}, {0}, 1, { 0 } \
    }
#define C1A(op, what, fn, a0, a1, a2, a3, nd, ...)                             \
    {                                                                          \
        op, what, f_##fn, 1, {nd}, {{__VA_ARGS__}}, {a0, a1, a2, a3}, 0, { 0 } \
    }

const gc_case gc_cases_ops[] = {
    C1("neg", "(2,3)", neg, 2, 2, 3),
    C1("neg", "(1,4,1)", neg, 3, 1, 4, 1),
    C1("exp", "(3,4)", exp, 2, 3, 4),
    C1("exp", "(2,1,3)", exp, 3, 2, 1, 3),
    C1D("log", "(3,4)", log, 2, 3, 4),
    C1D("log", "(5)", log, 1, 5),
    C1D("sqrt", "(3,4)", sqrt, 2, 3, 4),
    C1D("sqrt", "(1)", sqrt, 1, 1),
    C1("tanh", "(3,4)", tanh, 2, 3, 4),
    C1("tanh", "(2,2,2,2)", tanh, 4, 2, 2, 2, 2),
    C1("sigmoid", "(3,4)", sigmoid, 2, 3, 4),
    C1("sigmoid", "(1,5)", sigmoid, 2, 1, 5),
    C1("relu", "(4,5)", relu, 2, 4, 5),
    C1("relu", "(2,1,3)", relu, 3, 2, 1, 3),
    C1("gelu", "(3,4)", gelu, 2, 3, 4),
    C1("gelu", "(6)", gelu, 1, 6),
    C1("gelu_tanh", "(3,4)", gelu_tanh, 2, 3, 4),
    C1("gelu_tanh", "(2,1,5)", gelu_tanh, 3, 2, 1, 5),
    {"pow_scalar", "(3,4)^2.5", f_pow, 1, {2}, {{3, 4}}, {5}, 1, {0}},
    {"pow_scalar", "(2,2)^-1", f_pow, 1, {2}, {{2, 2}}, {-2}, 1, {0}},
    C1("add_scalar", "(2,3)+1.5", add_scalar, 2, 2, 3),
    C1("add_scalar", "(1)+1.5", add_scalar, 1, 1),
    C1("mul_scalar", "(2,3)*-0.7", mul_scalar, 2, 2, 3),
    C1("mul_scalar", "(2,1,2)*-0.7", mul_scalar, 3, 2, 1, 2),
    {"add", "(2,3)+(2,3)", f_add, 2, {2, 2}, {{2, 3}, {2, 3}}, {0}, 0, {0}},
    {"add", "(2,3)+(3)", f_add, 2, {2, 1}, {{2, 3}, {3}}, {0}, 0, {0}},
    {"add", "(2,1,4)+(3,1)", f_add, 2, {3, 2}, {{2, 1, 4}, {3, 1}}, {0}, 0, {0}},
    C1("add", "x+x (2,3)", add_self, 2, 2, 3),
    {"sub", "(2,3)-(2,1)", f_sub, 2, {2, 2}, {{2, 3}, {2, 1}}, {0}, 0, {0}},
    {"sub", "(3)-(2,3)", f_sub, 2, {1, 2}, {{3}, {2, 3}}, {0}, 0, {0}},
    {"mul", "(2,3)*(2,3)", f_mul, 2, {2, 2}, {{2, 3}, {2, 3}}, {0}, 0, {0}},
    {"mul", "(2,1,4)*(3,1)", f_mul, 2, {3, 2}, {{2, 1, 4}, {3, 1}}, {0}, 0, {0}},
    C1("mul", "x*x (3,2)", mul_self, 2, 3, 2),
    {"mul", "(2,3)*const(3)", f_mul, 2, {2, 1}, {{2, 3}, {3}}, {0}, 0, {false, true}},
    {"div", "(2,3)/(3)", f_div, 2, {2, 1}, {{2, 3}, {3}}, {0}, 1, {0}},
    {"div", "(1)/(2,3)", f_div, 2, {1, 2}, {{1}, {2, 3}}, {0}, 1, {0}},
    C1D("div", "exp(x)/x (4)", div_self, 1, 4),
    C1A("sum", "(3,4) axis 0", sum, 0, 0, 0, 0, 2, 3, 4),
    C1A("sum", "(2,3,4) axis -1 keepdim", sum, -1, 1, 0, 0, 3, 2, 3, 4),
    C1A("sum", "(2,1,3) axis 1", sum, 1, 0, 0, 0, 3, 2, 1, 3),
    C1("sum", "sum_all tanh (2,3)", sum_all, 2, 2, 3),
    C1A("mean", "(3,4) axis 1", mean, 1, 0, 0, 0, 2, 3, 4),
    C1A("mean", "(2,3,4) axis 0 keepdim", mean, 0, 1, 0, 0, 3, 2, 3, 4),
    C1("mean", "mean_all x*x (5)", mean_all, 1, 5),
    C1A("max", "(3,4) axis 1", max, 1, 0, 0, 0, 2, 3, 4),
    C1A("max", "(2,3,4) axis 0 keepdim", max, 0, 1, 0, 0, 3, 2, 3, 4),
    C1("max", "max_all (3,3)", max_all, 2, 3, 3),
    {"matmul", "(3,4)@(4,5)", f_matmul, 2, {2, 2}, {{3, 4}, {4, 5}}, {0, 0}, 0, {0}},
    {"matmul", "(4,3)^T@(4,5)", f_matmul, 2, {2, 2}, {{4, 3}, {4, 5}}, {1, 0}, 0, {0}},
    {"matmul", "(3,4)@(5,4)^T", f_matmul, 2, {2, 2}, {{3, 4}, {5, 4}}, {0, 1}, 0, {0}},
    {"matmul", "(4,3)^T@(5,4)^T", f_matmul, 2, {2, 2}, {{4, 3}, {5, 4}}, {1, 1}, 0, {0}},
    {"matmul", "(2,3,4)@(2,4,5)", f_matmul, 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, {0, 0}, 0, {0}},
    {"matmul", "(2,4,3)^T@(2,5,4)^T", f_matmul, 2, {3, 3}, {{2, 4, 3}, {2, 5, 4}}, {1, 1}, 0, {0}},
    {"matmul", "(2,3,4)@(4,5) shared", f_matmul, 2, {3, 2}, {{2, 3, 4}, {4, 5}}, {0, 0}, 0, {0}},
    {"matmul", "(2,4,3)^T@(5,4)^T shared", f_matmul, 2, {3, 2}, {{2, 4, 3}, {5, 4}}, {1, 1}, 0, {0}},
    {"matmul", "(1,1)@(1,3)", f_matmul, 2, {2, 2}, {{1, 1}, {1, 3}}, {0, 0}, 0, {0}},
    C1("matmul", "x x^T (3,2)", matmul_self, 2, 3, 2),
    C1("softmax", "(3,5)", softmax, 2, 3, 5),
    C1("softmax", "(2,2,4)", softmax, 3, 2, 2, 4),
    C1("softmax", "(2,1)", softmax, 2, 2, 1),
    C1("log_softmax", "(3,5)", log_softmax, 2, 3, 5),
    C1("log_softmax", "(2,1,4)", log_softmax, 3, 2, 1, 4),
    C1A("to_bf16", "(2,3) straight through", cast_st, 0, 0, 0, 0, 2, 2, 3),
    C1A("to_bf16", "(4,1,5) reshaped as bf16", cast_st, 1, 0, 0, 0, 3, 4, 1, 5),
    C1A("to_real", "(3,4) straight through", cast_st, 0, 0, 0, 0, 2, 3, 4),
    C1A("to_real", "(2,2,2) reshaped as bf16", cast_st, 1, 0, 0, 0, 3, 2, 2, 2),
    C1A("reshape", "(2,3,4)->(6,-1)", reshape, 2, 6, -1, 0, 3, 2, 3, 4),
    C1A("reshape", "(6)->(1,3,2)", reshape, 3, 1, 3, 2, 1, 6),
    C1A("permute", "(2,3,4) by (2,0,1)", permute, 2, 0, 1, 0, 3, 2, 3, 4),
    C1A("permute", "(1,3,2) by (1,2,0)", permute, 1, 2, 0, 0, 3, 1, 3, 2),
    C1A("permute", "transpose (3,4)", transpose, 0, 1, 0, 0, 2, 3, 4),
    C1A("slice", "(4,5) axis 1 [1:4)", slice, 1, 1, 4, 0, 2, 4, 5),
    C1A("slice", "(3,2,4) axis 0 [1:3)", slice, 0, 1, 3, 0, 3, 3, 2, 4),
    {"concat", "(2,3)|(2,2) axis 1", f_concat2, 2, {2, 2}, {{2, 3}, {2, 2}}, {1}, 0, {0}},
    {"concat", "(1,3)|(2,3)|(1,3) axis 0", f_concat3, 3, {2, 2, 2}, {{1, 3}, {2, 3}, {1, 3}}, {0}, 0, {0}},
    C1("gather_rows", "(5,3)[ids (2,3)]", gather, 2, 5, 3),
    {"gather_rows", "(4,2)[1,1,3]+(3,2)", f_gather_twice, 2, {2, 2}, {{4, 2}, {3, 2}}, {0}, 0, {0}},
};
const int gc_cases_ops_count = (int)(sizeof gc_cases_ops / sizeof gc_cases_ops[0]);
/* clang-format on */
