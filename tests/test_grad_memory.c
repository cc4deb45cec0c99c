/* A step's memory (issues 31, 32): tg_backward frees the gradient of an
 * op's result once the rule of the op that made it has run, and backward
 * scratch once its rule returns; the next gradient or scratch of the same
 * size in the scope takes the memory (autograd/tape.c, tensor/memory.c).
 * Checked here: the gradients are the same bits with and without that
 * recycling (a GPT, graphs where gradients share buffers: add, reshape,
 * x*x, a tensor used twice), tg_retain_grad keeps the unrecycled value,
 * a released gradient is NULL and a pointer kept to it refused, the
 * memory is reused (the arena grows less), and tg_backward_retain keeps
 * every gradient as before. */
#include "test_util.h"
#include "autograd/op.h"

#include <string.h>

static void expect_same_grads(tg_tensor *const *a, tg_tensor *const *b, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        cr_assert((a[i] == NULL) == (b[i] == NULL), "%s: gradient %d exists in one run only", what, i);
        if (!a[i]) continue;
        cr_expect(a[i]->size == b[i]->size && !memcmp(a[i]->data, b[i]->data, sizeof(tg_real) * (size_t)a[i]->size),
                  "%s: gradient %d differs with recycling (max diff %g)", what, i, max_diff(a[i], b[i]));
    }
}

static void free_all(tg_tensor **ts, int n) {
    for (int i = 0; i < n; i++) tg_free(ts[i]);
}

/* ---- a GPT -------------------------------------------------------------------- */

/* Loss of a 2-layer GPT (B 2, T 70: attention's long path, with D and the
 * threads' scratch; relative positions: the tables' partials), backward,
 * the parameters' gradients copied to g (zeroed before). */
static void gpt_grads(tg_decoder *m, tg_params *p, bool recycle, tg_tensor **g, size_t *backward_bytes) {
    enum { B = 2, T = 70 };
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7) % 13, tgt[i] = i % 5 == 0 ? -1 : (i * 5 + 3) % 13;
    bool prev = tg__grad_recycling(recycle);
    for (int i = 0; i < p->n; i++) tg_zero_grad(p->items[i].t);
    tg_scope_begin();
    tg_tensor *loss = tg_decoder_loss(m, tok, tgt, B, T);
    TG_REQUIRE(loss);
    size_t before = tg_memory().arena_in_use;
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    *backward_bytes = tg_memory().arena_in_use - before;
    tg_tensor *ts[64];
    for (int i = 0; i < p->n; i++) ts[i] = p->items[i].t;
    grads_of(ts, p->n, g);
    tg_scope_end();
    tg__grad_recycling(prev);
}

Test(grad_memory, gpt_gradients_are_the_same_bits_and_take_less_memory) {
    tg_decoder_config cfg = tg_decoder_config_default(13, 80, 2, 2, 16);
    cfg.pos = TG_PE_RELATIVE;
    tg_rng rng = tg_rng_new(5);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    TG_REQUIRE(m);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    cr_assert(p.n <= 64);
    tg_tensor *off[64], *on[64];
    size_t bytes_off, bytes_on;
    gpt_grads(m, &p, false, off, &bytes_off);
    gpt_grads(m, &p, true, on, &bytes_on);
    expect_same_grads(off, on, p.n, "gpt");
    /* Without recycling backward keeps every layer's gradients; with it, a
     * few at a time. */
    cr_expect(bytes_on * 2 < bytes_off, "backward took %zu bytes of arena with recycling, %zu without", bytes_on,
              bytes_off);
    cr_log_info("gpt backward: %zu bytes of arena with recycling, %zu without", bytes_on, bytes_off);
    free_all(off, p.n);
    free_all(on, p.n);
    tg_params_free(&p);
    tg_decoder_free(m);
}

/* ---- gradients that share buffers ------------------------------------------------ */

/* A graph of every way gradients meet: an add whose inputs feed it alone
 * (both share its gradient), a reshape of that (shares again: a chain of
 * three holders), x*x, a tensor used twice (accumulates), sub, a
 * broadcast mul (scratch), permute, slice; the results of the named
 * intermediates in mid[] (7 of them). b's rule takes a gradient of the
 * shared buffer's size while a's has yet to read that buffer: freed too
 * early, the buffer would be overwritten before a's rule reads it. */
/* p [n0, n1 >= 3, n2], w [n2]. */
static tg_tensor *shared_graph(tg_tensor *p, tg_tensor *w, tg_tensor **mid) {
    tg_tensor *e1 = tg_exp(p), *e2 = tg_mul_scalar(p, 0.5);
    tg_tensor *a = tg_tanh(e1), *b = tg_sigmoid(e2);               /* [2, 3, 4], each feeds the add only */
    tg_tensor *s = tg_add(a, b);                                   /* a, b share s's gradient */
    tg_tensor *r = tg_reshape(s, TG_SHAPE(-1, p->shape[2]));       /* s shares r's: r, s, a, b one buffer */
    tg_tensor *x = tg_exp(r);                                      /* used twice below */
    tg_tensor *xx = tg_mul(x, x);                                  /* x*x */
    tg_tensor *y = tg_sub(xx, tg_mul(x, w));                       /* w [4] broadcast: scratch in mul's backward */
    tg_tensor *t = tg_transpose(tg_reshape(y, 3, p->shape), 0, 2); /* permute's backward */
    tg_tensor *z = tg_slice(t, 1, 1, 3);
    mid[0] = a, mid[1] = b, mid[2] = s, mid[3] = r, mid[4] = x, mid[5] = xx, mid[6] = y;
    return tg_sum_all(tg_mul(z, z));
}

/* Forward and backward of shared_graph, the leaves' gradients (zeroed
 * first) copied to g. */
static void shared_grads(tg_tensor *p, tg_tensor *w, tg_tensor **g, bool expect_released) {
    tg_tensor *leaves[2] = {p, w}, *mid[7];
    tg_zero_grad(p), tg_zero_grad(w);
    cr_assert_eq(tg_backward(shared_graph(p, w, mid)), 0, "%s", tg_last_error());
    grads_of(leaves, 2, g);
    for (int i = 0; i < 7; i++)
        cr_expect(expect_released == (mid[i]->grad == NULL), "intermediate %d: its gradient %s after tg_backward", i,
                  expect_released ? "is kept" : "is gone");
}

Test(grad_memory, shared_gradients_are_the_same_bits) {
    tg_tensor *p = grad_leaf(TG_SHAPE(2, 3, 4), 1), *w = grad_leaf(TG_SHAPE(4), 2);
    tg_tensor *off[2], *on[2], *twice[2], *again[2], *inner[2], *outer[2];
    tg__grad_recycling(false);
    tg_scope_begin();
    shared_grads(p, w, off, false);
    tg_scope_end();
    tg__grad_recycling(true);
    tg_scope_begin();
    shared_grads(p, w, on, true);
    shared_grads(p, w, twice, true); /* the same scope: takes the first graph's buffers */
    tg_scope_end();
    /* A new scope: the ended one's free list went with its memory, which
     * what the new scope makes first now holds (NaNs, read by nothing: a
     * list kept past its scope would hand out that memory, and the links
     * it reads there, again). */
    tg_scope_begin();
    cr_assert_not_null(tg_full(TG_SHAPE(1 << 14), (tg_real)NAN));
    shared_grads(p, w, again, true);
    /* A nested scope takes and gives back its own memory only: the outer
     * scope's list is still right after it ends. */
    tg_scope_begin();
    shared_grads(p, w, inner, true);
    tg_scope_end();
    shared_grads(p, w, outer, true);
    tg_scope_end();
    tg_tensor **runs[] = {on, twice, again, inner, outer};
    const char *names[] = {"recycled", "second in its scope", "in a new scope", "nested scope", "after a nested scope"};
    for (int i = 0; i < 5; i++) {
        expect_same_grads(off, runs[i], 2, names[i]);
        free_all(runs[i], 2);
    }
    free_all(off, 2);
    tg_free(p), tg_free(w);
}

/* tg_retain_grad keeps an intermediate's gradient, the value it has
 * without recycling: one whose buffer others share (s), ones that would
 * share another's (a, r), and plain ones; the others are NULL. */
Test(grad_memory, retain_grad_keeps_the_unrecycled_value) {
    tg_tensor *p = grad_leaf(TG_SHAPE(2, 3, 4), 3), *w = grad_leaf(TG_SHAPE(4), 4);
    tg_tensor *off[7], *on[7];
    const bool keep[7] = {true, false, true, true, false, true, false};
    for (int mode = 0; mode < 2; mode++) {
        tg__grad_recycling(mode == 1);
        tg_scope_begin();
        tg_tensor *mid[7];
        tg_tensor *loss = shared_graph(p, w, mid);
        for (int i = 0; i < 7 && mode == 1; i++)
            if (keep[i]) cr_assert_eq(tg_retain_grad(mid[i]), 0, "%s", tg_last_error());
        cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
        grads_of(mid, 7, mode ? on : off);
        for (int i = 0; i < 7 && mode == 1; i++) {
            cr_expect(keep[i] == (mid[i]->grad != NULL), "intermediate %d: retained %d, gradient %p", i, keep[i],
                      (void *)mid[i]->grad);
            if (!keep[i]) off[i] = (tg_free(off[i]), NULL); /* compare only the kept */
        }
        cr_expect(p->grad && w->grad, "the leaves keep their gradients");
        tg_scope_end();
    }
    tg__grad_recycling(true);
    expect_same_grads(off, on, 7, "retained");
    free_all(off, 7), free_all(on, 7);
    tg_free(p), tg_free(w);
}

Test(grad_memory, retain_grad_refusals) {
    tg_tensor *p = grad_leaf(TG_SHAPE(3), 5);
    tg_tensor *k = tg_zeros(TG_SHAPE(3));
    cr_expect_eq(tg_retain_grad(p), 0, "a leaf: nothing to do");
    tg_clear_error();
    cr_expect_eq(tg_retain_grad(NULL), -1);
    cr_expect(error_has("retain_grad", "NULL"), "%s", tg_last_error());
    cr_expect_eq(tg_retain_grad(k), -1);
    cr_expect(error_has("retain_grad", "does not require grad"), "%s", tg_last_error());
    tg_scope_begin();
    tg_tensor *y = tg_exp(p);
    tg_scope_end();
    cr_expect_eq(tg_retain_grad(y), -1);
    cr_expect(error_has("retain_grad", "scope has ended"), "%s", tg_last_error());
    tg_free(p), tg_free(k);
}

/* A pointer kept to an intermediate's gradient (from a tg_backward_retain
 * pass) is refused once a tg_backward pass has released it. */
Test(grad_memory, a_released_gradient_is_unreachable) {
    tg_tensor *p = grad_leaf(TG_SHAPE(4), 6);
    tg_scope_begin();
    tg_tensor *h = tg_exp(p), *y = tg_sum_all(tg_mul(h, h));
    cr_assert_eq(tg_backward_retain(y), 0, "%s", tg_last_error());
    tg_tensor *g = h->grad;
    TG_REQUIRE(g);
    tg_tensor *e = tg_exp(g);
    TG_REQUIRE(e);
    cr_assert_eq(tg_backward(y), 0, "%s", tg_last_error());
    cr_expect_null(h->grad, "released by the pass that released the graph");
    cr_expect_null(y->grad, "the loss's own gradient too, as PyTorch's");
    tg_clear_error();
    cr_expect_null(tg_exp(g), "a released gradient was used");
    cr_expect(error_has("exp", "no longer valid"), "%s", tg_last_error());
    tg_scope_end();
    tg_free(p);
}

/* tg_backward_retain keeps every gradient, with the values of a pass
 * without recycling; a retained graph's second pass (tg_backward) then
 * reuses them and releases them. */
Test(grad_memory, backward_retain_keeps_every_gradient) {
    tg_tensor *p = grad_leaf(TG_SHAPE(2, 3, 4), 7), *w = grad_leaf(TG_SHAPE(4), 8);
    tg_tensor *off[7], *on[7], *second[7];
    for (int mode = 0; mode < 2; mode++) {
        tg__grad_recycling(mode == 1);
        tg_scope_begin();
        tg_tensor *mid[7], *loss = shared_graph(p, w, mid);
        cr_assert_eq(tg_backward_retain(loss), 0, "%s", tg_last_error());
        grads_of(mid, 7, mode ? on : off);
        if (mode == 1) {
            cr_assert_eq(tg_retain_grad(mid[2]), 0, "%s", tg_last_error());
            cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
            grads_of(mid, 7, second);
        }
        tg_scope_end();
    }
    tg__grad_recycling(true);
    expect_same_grads(off, on, 7, "backward_retain");
    for (int i = 0; i < 7; i++) {
        cr_expect((second[i] != NULL) == (i == 2), "second pass: gradient %d %s", i, second[i] ? "kept" : "gone");
        if (i != 2) off[i] = (tg_free(off[i]), NULL);
    }
    expect_same_grads(off, second, 7, "second pass, retained s");
    free_all(off, 7), free_all(on, 7), free_all(second, 7);
    tg_free(p), tg_free(w);
}

/* Eight tanh layers of the same width: backward holds about one layer's
 * gradients at a time, so the arena grows by a fraction of what it grows
 * without recycling, and the scope's peak drops with it. */
Test(grad_memory, a_deep_graph_reuses_its_gradients) {
    enum { L = 8, N = 64, D = 32 };
    tg_tensor *x = grad_leaf(TG_SHAPE(N, D), 9), *ws[L];
    for (int l = 0; l < L; l++) ws[l] = grad_leaf(TG_SHAPE(D, D), 10 + (uint64_t)l);
    size_t grew[2], peak[2];
    for (int mode = 0; mode < 2; mode++) {
        tg__grad_recycling(mode == 1);
        tg_scope_begin();
        size_t base = tg_memory().arena_in_use;
        tg_tensor *h = x;
        for (int l = 0; l < L; l++) h = tg_tanh(tg_matmul(h, ws[l]));
        tg_tensor *loss = tg_sum_all(h);
        size_t forward = tg_memory().arena_in_use;
        cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
        grew[mode] = tg_memory().arena_in_use - forward;
        peak[mode] = tg_memory().arena_in_use - base;
        tg_scope_end();
    }
    tg__grad_recycling(true);
    /* 2 L gradients of N D reals without; with, the first two and a few more. */
    cr_expect(grew[1] * 3 < grew[0], "backward grew the arena by %zu bytes with recycling, %zu without", grew[1],
              grew[0]);
    cr_expect(peak[1] < peak[0], "the scope's memory %zu with recycling, %zu without", peak[1], peak[0]);
    tg_free(x);
    for (int l = 0; l < L; l++) tg_free(ws[l]);
}

/* Gradients made in a scope and released while a nested one is open go
 * back to the scope that made them, and serve it after the nested scope
 * ends: a second graph's backward there takes them instead of new memory
 * (what it still takes: the headers, and the sizes that one graph frees
 * fewer times than it needs). */
Test(grad_memory, buffers_return_to_the_scope_that_made_them) {
    tg_tensor *p = grad_leaf(TG_SHAPE(4, 8, 32), 11), *w = grad_leaf(TG_SHAPE(32), 12), *mid[7];
    tg_scope_begin();
    tg_tensor *loss = shared_graph(p, w, mid);
    size_t u = tg_memory().arena_in_use;
    cr_assert_eq(tg_backward_retain(loss), 0, "%s", tg_last_error()); /* gradients in this scope's memory */
    size_t first = tg_memory().arena_in_use - u;
    tg_scope_begin();
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error()); /* and released here */
    tg_scope_end();
    tg_tensor *loss2 = shared_graph(p, w, mid);
    u = tg_memory().arena_in_use;
    cr_assert_eq(tg_backward(loss2), 0, "%s", tg_last_error());
    size_t second = tg_memory().arena_in_use - u;
    cr_expect(2 * second < first, "the second backward took %zu bytes of new memory, the first %zu", second, first);
    tg_scope_end();
    tg_free(p), tg_free(w);
}
