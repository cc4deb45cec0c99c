/* The tape and backward().
 *
 * Every recorded node is pushed on a singly linked list, newest first. Since
 * an op's inputs exist before its output, creation order is a topological
 * order, and walking the list from the newest node visits every node after
 * all the nodes that consume its output. backward() marks the loss's node,
 * runs each marked node's backward rule, and marks the nodes of its inputs.
 * Scopes save and restore the list head (tensor/memory.c), so nodes a scope
 * has released are never visited again. */
#include "op.h"
#include "../tensor/tensor_internal.h"

#include <string.h>

static bool g_grad_enabled = true;
static uint64_t g_seq;
static uint32_t g_epoch;             /* backward pass counter */

bool tg_grad_enabled(void) { return g_grad_enabled; }

bool tg_set_grad_enabled(bool on) {
    bool prev = g_grad_enabled;
    g_grad_enabled = on;
    return prev;
}

void tg_set_requires_grad(tg_tensor *t, bool on) {
    if (t) t->requires_grad = on;
}

bool tg_any_null(const char *op, int n, const tg_tensor *const *in) {
    for (int i = 0; i < n; i++)
        if (!in[i]) { tg_error_null(op); return true; }
    return false;
}

tg_node *tg_node_record(const tg_op *op, tg_tensor *out, int n_in, tg_tensor *const *in) {
    if (!g_grad_enabled || !out) return NULL;
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= in[i]->requires_grad;
    if (!any) return NULL;
    tg_node *n = tg_arena_alloc(sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = in[i];
        in[i]->uses++;
    }
    n->seq = ++g_seq;
    n->prev = tg__tape_head;
    tg__tape_head = n;
    out->node = n;
    out->requires_grad = true;
    return n;
}

void *tg_node_state(tg_node *n, size_t bytes) {
    void *s = tg_arena_alloc(bytes);
    if (s) memset(s, 0, bytes);
    n->state = s;
    return s;
}

tg_tensor *tg_grad_of(tg_tensor *t) {
    if (!t || !t->requires_grad) return NULL;
    bool leaf = t->node == NULL;
    if (!t->grad) {
        t->grad = t->persistent ? tg_empty_persistent(t->ndim, t->shape)
                                : tg_empty_arena(t->ndim, t->shape);
        if (!t->grad) return NULL;
        memset(t->grad->data, 0, (size_t)t->size * sizeof(tg_real));
        t->grad_epoch = g_epoch;
    } else if (!leaf && t->grad_epoch != g_epoch) {
        /* A non-leaf's gradient belongs to one backward pass: start from 0,
         * in a buffer of its own if the last pass shared one (tg_grad_share). */
        if (!t->grad->owns_data) t->grad = tg_empty_arena(t->ndim, t->shape);
        if (!t->grad) return NULL;
        memset(t->grad->data, 0, (size_t)t->size * sizeof(tg_real));
        t->grad_epoch = g_epoch;
    }
    return t->grad;
}

tg_tensor *tg_grad_begin(tg_tensor *t, bool *fresh) {
    *fresh = false;
    if (!t || !t->requires_grad) return NULL;
    bool leaf = t->node == NULL;
    if (!leaf && t->grad && t->grad_epoch != g_epoch) {
        if (!t->grad->owns_data) t->grad = tg_empty_arena(t->ndim, t->shape);   /* as tg_grad_of */
        if (!t->grad) return NULL;
        t->grad_epoch = g_epoch;
        *fresh = true;
        return t->grad;
    }
    if (!leaf && !t->grad) {
        t->grad = tg_empty_arena(t->ndim, t->shape);
        if (!t->grad) return NULL;
        t->grad_epoch = g_epoch;
        *fresh = true;
        return t->grad;
    }
    return tg_grad_of(t);
}

bool tg_grad_share(tg_tensor *t, const tg_tensor *g) {
    if (!t || !g || !t->requires_grad || !t->node || t->persistent || t->uses != 1 || t->grad ||
        g->size != t->size)
        return false;
    tg_tensor *v = tg_empty_arena(0, NULL);   /* header only; shares g's data */
    if (!v) return false;
    v->ndim = t->ndim;
    memcpy(v->shape, t->shape, sizeof v->shape);
    v->size = t->size;
    v->data = g->data;
    v->owns_data = false;
    t->grad = v;
    t->grad_epoch = g_epoch;
    return true;
}

void tg_zero_grad(tg_tensor *t) {
    if (t && t->grad) memset(t->grad->data, 0, (size_t)t->size * sizeof(tg_real));
}

static bool alive(const tg_tensor *t) {
    if (!t) return false;
    if (!t->persistent && !tg_arena_live(t)) return false;
    return t->magic == TG_MAGIC;
}

int tg_backward_seed(tg_tensor *out, const tg_tensor *seed) {
    char b1[64], b2[64];
    if (!out || !seed) { tg_error_null("backward"); return -1; }
    if (!alive(out)) {
        tg_set_error("backward: the tensor's scope has ended (its graph was released)");
        return -1;
    }
    if (!out->requires_grad) {
        tg_set_error("backward: tensor %s does not require grad and has no graph", tg_tshape(b1, out));
        return -1;
    }
    if (seed->size != out->size) {
        tg_set_error("backward: seed gradient %s does not match output %s", tg_tshape(b1, seed),
                     tg_tshape(b2, out));
        return -1;
    }
    bool prev = tg_set_grad_enabled(false);
    g_epoch++;
    tg_tensor *g = tg_grad_of(out);
    if (!g) { tg_set_grad_enabled(prev); return -1; }
    for (int64_t i = 0; i < g->size; i++) g->data[i] += seed->data[i];
    if (out->node) {
        out->node->visit = g_epoch;
        for (tg_node *n = tg__tape_head; n; n = n->prev) {
            if (n->visit != g_epoch) continue;
            n->op->backward(n);
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i]->node) n->in[i]->node->visit = g_epoch;
        }
    }
    tg_set_grad_enabled(prev);
    return 0;
}

int tg_backward(tg_tensor *loss) {
    char b[64];
    if (!loss) { tg_error_null("backward"); return -1; }
    if (alive(loss) && loss->size != 1) {
        tg_set_error("backward: loss %s has %lld elements; give a seed gradient (tg_backward_seed) "
                     "for a non-scalar output", tg_tshape(b, loss), (long long)loss->size);
        return -1;
    }
    tg_real one = 1;
    tg_tensor seed = {.magic = TG_MAGIC, .ndim = 0, .size = 1, .data = &one};
    return tg_backward_seed(loss, &seed);
}
