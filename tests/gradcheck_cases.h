/* A gradient-check case: an op of tg_op_table, a function of random inputs
 * that applies it, and the input shapes. tests/test_gradcheck.c runs every
 * case and checks that every op of the table has at least two. */
#ifndef TG_GRADCHECK_CASES_H
#define TG_GRADCHECK_CASES_H

#include "tgrad.h"

#define GC_MAX_IN 6

typedef struct gc_case {
    const char *op;                                          /* the op this case checks (its graph must contain it) */
    const char *what;                                        /* shapes and arguments, for the log */
    tg_tensor *(*f)(tg_tensor *const *in, int n, void *ctx); /* ctx is the case itself */
    int n_in;
    int ndim[GC_MAX_IN];
    int shape[GC_MAX_IN][TG_MAX_DIMS];
    int arg[4];                  /* integer arguments the function reads */
    int domain;                  /* 0: N(0,1) inputs; 1: U(0.5, 2) (log, sqrt, div) */
    bool const_input[GC_MAX_IN]; /* inputs that do not require grad */
} gc_case;

#define GC_ARG(ctx, i) (((const gc_case *)(ctx))->arg[i])

/* Case lists, one per source area; test_gradcheck.c walks all of them. */
extern const gc_case gc_cases_ops[];
extern const int gc_cases_ops_count;
extern const gc_case gc_cases_nn_ops[];
extern const int gc_cases_nn_ops_count;
extern const gc_case gc_cases_attention_op[];
extern const int gc_cases_attention_op_count;
extern const gc_case gc_cases_position[];
extern const int gc_cases_position_count;

#endif
