/* Walks tg_op_table: every op must have at least two gradient-check cases,
 * every case must pass in double precision (max relative error <= 1e-6),
 * and every case's graph must contain the op it claims to check. */
#include <string.h>
#include "gradcheck_cases.h"
#include "test_util.h"
#include "autograd/op.h" /* tg_node, tg_node_record, tg_grad_of: a hand-made op */

typedef struct {
    const gc_case *cases;
    const int *count;
} case_list;
static const case_list lists[] = {
    {gc_cases_ops, &gc_cases_ops_count},
    {gc_cases_nn_ops, &gc_cases_nn_ops_count},
    {gc_cases_attention_op, &gc_cases_attention_op_count},
    {gc_cases_position, &gc_cases_position_count},
};
#define N_LISTS (int)(sizeof lists / sizeof lists[0])

static bool graph_has(const tg_node *n, const tg_op *op, int depth) {
    if (!n || depth > 64) return false;
    if (n->op == op) return true;
    for (int i = 0; i < n->n_in; i++)
        if (graph_has(n->in[i]->node, op, depth + 1)) return true;
    return false;
}

static void run_case(const gc_case *c, uint64_t seed) {
    tg_tensor *in[GC_MAX_IN];
    tg_rng rng = tg_rng_new(seed);
    for (int i = 0; i < c->n_in; i++) {
        in[i] = c->domain == 1 ? tg_uniform(c->ndim[i], c->shape[i], 0.5, 2, &rng)
                               : tg_randn(c->ndim[i], c->shape[i], &rng);
        TG_REQUIRE(in[i]);
        tg_set_requires_grad(in[i], !c->const_input[i]);
    }
    tg_scope_begin();
    tg_tensor *y = c->f(in, c->n_in, (void *)c);
    cr_assert(y != NULL, "%s %s: %s", c->op, c->what, tg_last_error());
    cr_expect(graph_has(y->node, tg_op_find(c->op), 0), "%s %s: graph does not contain op %s", c->op, c->what, c->op);
    tg_scope_end();
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(c->f, in, c->n_in, (void *)c, 1e-6, 1e-6, &r);
    printf("gradcheck %-14s %-28s %4lld entries  max rel err %.1e  %s\n", c->op, c->what, (long long)r.checked,
           r.max_rel_err, ok ? "ok" : "FAIL");
    cr_expect(ok, "gradcheck %s %s: max rel err %.3g at input %d index %lld (%s)", c->op, c->what, r.max_rel_err,
              r.worst_input, (long long)r.worst_index, tg_last_error() ? tg_last_error() : "");
    cr_expect(r.checked > 0, "%s %s: nothing compared", c->op, c->what);
    for (int i = 0; i < c->n_in; i++) tg_free(in[i]);
}

Test(gradcheck, every_op_in_the_table) {
    int total = 0;
    for (int k = 0; tg_op_table[k]; k++) {
        const tg_op *op = tg_op_table[k];
        int count = 0;
        for (int l = 0; l < N_LISTS; l++)
            for (int i = 0; i < *lists[l].count; i++) {
                const gc_case *c = &lists[l].cases[i];
                if (strcmp(c->op, op->name) != 0) continue;
                run_case(c, 1000 + (uint64_t)i);
                count++;
            }
        cr_expect(count >= 2, "op %s has %d gradient checks; every op needs at least two shapes", op->name, count);
        total += count;
    }
    printf("gradcheck: %d cases over every op of tg_op_table, in %s\n", total,
           sizeof(tg_real) == 8 ? "double" : "float");
    cr_expect(sizeof(tg_real) == 8, "gradchecks must run in the double build");
}

Test(gradcheck, every_case_names_an_op_of_the_table) {
    for (int l = 0; l < N_LISTS; l++)
        for (int i = 0; i < *lists[l].count; i++)
            cr_expect(tg_op_find(lists[l].cases[i].op) != NULL, "case %s %s: no such op in tg_op_table",
                      lists[l].cases[i].op, lists[l].cases[i].what);
}

/* The checker itself must catch a wrong backward. */
static void wrong_backward(tg_node *n) {
    tg_tensor *g = tg_grad_of(n->in[0]);
    for (int64_t i = 0; i < g->size; i++) g->data[i] += 2 * n->out->grad->data[i]; /* should be 3 */
}
static const tg_op wrong_op = {"wrong_triple", wrong_backward};
static tg_tensor *f_wrong(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    tg_tensor *y = tg_empty_arena(in[0]->ndim, in[0]->shape);
    for (int64_t i = 0; i < y->size; i++) y->data[i] = 3 * in[0]->data[i];
    tg_node_record(&wrong_op, y, 1, (tg_tensor *const *)in);
    return y;
}
Test(gradcheck, detects_a_wrong_backward) {
    tg_rng rng = tg_rng_new(1);
    tg_tensor *x = tg_randn(TG_SHAPE(3), &rng);
    tg_set_requires_grad(x, true);
    tg_gradcheck_result r;
    cr_expect(!tg_gradcheck(f_wrong, &x, 1, NULL, 1e-6, 1e-6, &r));
    cr_expect(r.max_rel_err > 0.3, "relative error %g", r.max_rel_err);
    tg_free(x);
}
