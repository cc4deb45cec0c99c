/* The tape and backward().
 *
 * Every recorded node is pushed on a singly linked list, newest first. Since
 * an op's inputs exist before its output, creation order is a topological
 * order, and walking the list from the newest node visits every node after
 * all the nodes that consume its output. backward() marks the loss's node,
 * runs each marked node's backward rule, and marks the nodes of its inputs.
 * Scopes save and restore the list head (tensor/memory.c), so nodes a scope
 * has released are never visited again.
 *
 * A gradient of a non-leaf is read last by the rule of the node that made
 * the tensor. Once that rule has run, a backward that releases the graph
 * (tg_backward, not tg_backward_retain) gives the gradient's buffer back to
 * the scope's free list (tensor/memory.c), where the next gradient of the
 * same size takes it: the layers of a model repeat their shapes, so a
 * step's arena holds a few layers' gradients at a time instead of all of
 * them (PyTorch frees them the same way, by reference count, unless
 * retain_grad()). A buffer shared by several tensors (tg_grad_share) goes
 * back after the last of their rules. */
#include "op.h"
#include "../tensor/profile_internal.h"
#include "../tensor/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

static bool g_grad_enabled = true;
static _Atomic int g_precision = TG_PREC_FP32; /* tg_set_precision */
static bool g_anomaly;                         /* tg_set_detect_anomaly */
static char g_anomaly_forward[256];            /* the first forward anomaly, for the next backward */
static uint64_t g_seq;
static uint32_t g_epoch;      /* backward pass counter */
static bool g_recycle = true; /* tg__grad_recycling */
/* The node whose backward rule is running (NULL between rules), and the
 * scratch it took (tg_backward_scratch), handed back when it returns. A
 * rule takes a few; past MAX_SCRATCH they stay in the arena until the
 * scope ends. */
static tg_node *g_running;
#define MAX_SCRATCH 8
typedef struct {
    void *p;
    size_t bytes;
    tg_tensor *t; /* a tensor's (tg_backward_scratch_tensor), else NULL */
} scratch;
static scratch g_scratch[MAX_SCRATCH];
static int g_nscratch;

bool tg__grad_recycling(bool on) {
    bool prev = g_recycle;
    g_recycle = on;
    return prev;
}

bool tg_grad_enabled(void) { return g_grad_enabled; }

bool tg_set_grad_enabled(bool on) {
    bool prev = g_grad_enabled;
    g_grad_enabled = on;
    return prev;
}

tg_precision tg_get_precision(void) { return (tg_precision)g_precision; }

tg_precision tg_set_precision(tg_precision p) {
    tg_precision prev = (tg_precision)g_precision;
    if (p != TG_PREC_FP32 && p != TG_PREC_BF16) {
        tg_set_error("set_precision: unknown precision %d (TG_PREC_FP32 or TG_PREC_BF16)", (int)p);
        return prev;
    }
#ifdef TG_DOUBLE
    if (p == TG_PREC_BF16) { /* see autograd.h: gradient checks need exact products */
        tg_set_error("set_precision: bf16 is refused in the double build (it exists for exact gradient checks)");
        return prev;
    }
#endif
    g_precision = (int)p;
    return prev;
}

int tg_precision_parse(const char *name) {
    if (name && strcmp(name, "fp32") == 0) return TG_PREC_FP32;
    if (name && strcmp(name, "bf16") == 0) return TG_PREC_BF16;
    return -1;
}

const char *tg_precision_name(tg_precision p) { return p == TG_PREC_BF16 ? "bf16" : "fp32"; }

void tg_set_requires_grad(tg_tensor *t, bool on) {
    if (t) t->requires_grad = on;
}

void tg_set_detect_anomaly(bool on) {
    g_anomaly = on;
    g_anomaly_forward[0] = '\0';
}
bool tg_detect_anomaly(void) { return g_anomaly; }

static bool all_finite(const tg_tensor *t) {
    if (t->dtype == TG_DTYPE_BF16) { /* an exponent of all ones: Inf or NaN */
        for (int64_t i = 0; i < t->size; i++)
            if ((t->bf16[i] & 0x7F80u) == 0x7F80u) return false;
        return true;
    }
    for (int64_t i = 0; i < t->size; i++)
        if (!(t->data[i] - t->data[i] == 0)) return false; /* NaN and +-Inf give NaN */
    return true;
}

/* Header and, for a scoped tensor, the arena memory it lives in are still
 * its own: a tensor whose scope ended fails this (tensor/memory.c moves the
 * arena's start between scopes, so even a reused region rarely holds a
 * header where an old one was). */
static bool alive(const tg_tensor *t) {
    /* The magic first: a stale pointer may point into data, where the
     * header's bool fields hold no valid bool. */
    if (!t || t->magic != TG_MAGIC) return false;
    return t->persistent || tg_arena_live(t);
}

bool tg_any_bad(const char *op, int n, const tg_tensor *const *in, unsigned bf16_ok) {
    char b[64];
    if (TG_PROF_ON()) tg__prof_op_start(); /* every op's first call: its time starts here */
    for (int i = 0; i < n; i++) {
        if (!in[i]) {
            tg_error_null(op);
            return true;
        }
        if (!alive(in[i])) {
            tg_set_error("%s: input %d is no longer valid: its scope has ended (or it was freed)", op, i);
            return true;
        }
        if (in[i]->dtype != TG_DTYPE_REAL && !(i < 32 && (bf16_ok >> i & 1u))) {
            tg_set_error("%s: input %d %s is bf16; this op reads tg_real tensors (tg_to_real first)", op, i,
                         tg_tshape(b, in[i]));
            return true;
        }
    }
    return false;
}

bool tg_any_null(const char *op, int n, const tg_tensor *const *in) { return tg_any_bad(op, n, in, 0); }

/* "(2,3) from (2,3) (3,4)": an op's output and input shapes, for messages. */
static void shapes_of(char *buf, size_t cap, const tg_tensor *out, int n_in, tg_tensor *const *in) {
    char s[64];
    int k = snprintf(buf, cap, "%s from", tg_tshape(s, out));
    for (int i = 0; i < n_in && k > 0 && (size_t)k < cap; i++)
        k += snprintf(buf + k, cap - (size_t)k, " %s", tg_tshape(s, in[i]));
}

/* The profiler's estimate of an op's work (profile.h): a product
 * 2 M N K (matmul, the affine family: K the inner size, from the first
 * input's last dimension), fused attention 4 B Q K (h d) (its two products,
 * the causal half not subtracted), anything else one flop per output
 * element; bytes: the inputs read and the output written once. A backward
 * is counted twice that (two products per product; reading the output's
 * gradient and writing the inputs'), attention's 2.5 times (it also
 * recomputes the scores). */
static void op_cost(const tg_op *op, const tg_tensor *out, int n_in, tg_tensor *const *in, bool backward, double *flops,
                    double *bytes) {
    double b = (double)out->size, f = (double)out->size, mult = backward ? 2 : 1;
    for (int i = 0; i < n_in; i++) b += (double)in[i]->size;
    const char *name = op->name;
    if (n_in >= 2 && (strcmp(name, "matmul") == 0 || strncmp(name, "affine", 6) == 0))
        f = 2 * (double)out->size * (double)in[0]->shape[in[0]->ndim - 1];
    else if (strcmp(name, "attention") == 0 && out->ndim >= 2) {
        /* keys: k's rows, or the packed qkv's own rows (one input) */
        int keys = n_in >= 2 && in[1]->ndim >= 2 ? in[1]->shape[1] : out->shape[1];
        f = 4 * (double)out->size * keys;
        if (backward) mult = 2.5;
    }
    *flops = f * mult;
    *bytes = b * (double)sizeof(tg_real) * (backward ? 2 : 1);
}

static void prof_op_end(const tg_op *op, tg_tensor *out, int n_in, tg_tensor *const *in, bool backward) {
    double f = 0, b = 0;
    if (out) op_cost(op, out, n_in, in, backward, &f, &b);
    tg__prof_op_end(op->name, backward ? TG_PROF_BACKWARD : TG_PROF_FORWARD, f, b);
}

bool tg_node_will_record(int n_in, tg_tensor *const *in) {
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= in[i]->requires_grad;
    return g_grad_enabled && any;
}

tg_node *tg_node_record(const tg_op *op, tg_tensor *out, int n_in, tg_tensor *const *in) {
    if (TG_PROF_ON()) prof_op_end(op, out, n_in, in, false); /* the forward is done: its time ends here */
    if (g_anomaly && out && !g_anomaly_forward[0] && !all_finite(out)) {
        char sh[160];
        shapes_of(sh, sizeof sh, out, n_in, in);
        snprintf(g_anomaly_forward, sizeof g_anomaly_forward,
                 "detect_anomaly: forward of %s gave a non-finite output %s", op->name, sh);
        tg_set_error("%s", g_anomaly_forward);
    }
    if (!out || !tg_node_will_record(n_in, in)) return NULL;
    tg_node *n = tg_arena_alloc(sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = in[i];
        in[i]->uses++;
        if (in[i]->node && in[i]->node->depth >= n->depth) n->depth = in[i]->node->depth;
    }
    n->depth++;
    n->bf16 = g_precision == TG_PREC_BF16; /* the backward's products follow the forward's */
    n->seq = ++g_seq;
    n->prev = tg__tape_head;
    tg__tape_head = n;
    out->node = n;
    out->requires_grad = true;
    return n;
}

int tg_graph_depth(const tg_tensor *t) { return t && t->node ? t->node->depth : 0; }

void *tg_node_state(tg_node *n, size_t bytes) {
    void *s = tg_arena_alloc(bytes);
    if (s) memset(s, 0, bytes);
    n->state = s;
    return s;
}

/* A gradient's zeros, split over threads by ranges (a fill: any split
 * gives the same bits). The fused attention's gradient of the packed qkv
 * [B, T, 3 h d] was a memset of megabytes on one thread before its tasks. */
static void zero_range(void *ctx, int64_t b, int64_t e, int tid) {
    (void)tid;
    memset((tg_real *)ctx + b, 0, (size_t)(e - b) * sizeof(tg_real));
}
static void zero_fill(tg_tensor *g) {
    tg_parallel_for_ns(g->size, (double)g->size * TG_NS_STREAM, zero_range, g->data);
}

/* A new gradient buffer for t, uninitialised: persistent for a persistent
 * t, in the arena otherwise, a non-leaf's from the scope's recycled
 * buffers when one of its size is free. */
static tg_tensor *new_grad(const tg_tensor *t) {
    if (t->persistent) return tg_empty_persistent(t->ndim, t->shape);
    if (t->node && g_recycle) return tg__empty_recycled(t->ndim, t->shape);
    return tg_empty_arena(t->ndim, t->shape);
}

/* The gradient of non-leaf t at the first touch of a new pass: the last
 * pass's buffer when it was t's own, else (the last pass shared one,
 * tg_grad_share) a new one, the old view's header marked dead. */
static tg_tensor *renew_grad(tg_tensor *t) {
    if (!t->grad->owns_data) {
        tg__tensor_recycle(t->grad); /* a view: only its header ends */
        t->grad = new_grad(t);
    }
    if (t->grad) t->grad_epoch = g_epoch;
    return t->grad;
}

tg_tensor *tg_grad_of(tg_tensor *t) {
    if (!t || !t->requires_grad) return NULL;
    bool leaf = t->node == NULL;
    if (!t->grad) {
        t->grad = new_grad(t);
        if (!t->grad) return NULL;
        zero_fill(t->grad);
        t->grad_epoch = g_epoch;
    } else if (!leaf && t->grad_epoch != g_epoch) {
        /* A non-leaf's gradient belongs to one backward pass: start from 0. */
        if (!renew_grad(t)) return NULL;
        zero_fill(t->grad);
    }
    return t->grad;
}

tg_tensor *tg_grad_begin(tg_tensor *t, bool *fresh) {
    *fresh = false;
    if (!t || !t->requires_grad) return NULL;
    bool leaf = t->node == NULL;
    if (!leaf && (!t->grad || t->grad_epoch != g_epoch)) {
        if (t->grad ? !renew_grad(t) : !(t->grad = new_grad(t))) return NULL;
        t->grad_epoch = g_epoch;
        *fresh = true;
        return t->grad;
    }
    return tg_grad_of(t);
}

bool tg_grad_share(tg_tensor *t, const tg_tensor *g) {
    if (!t || !g || !t->requires_grad || !t->node || t->persistent || t->uses != 1 || t->grad || g->size != t->size)
        return false;
    /* The buffer's holders are counted on its owner, the node whose output
     * it was made for: the running rule's own, or the owner of the buffer
     * that rule's output shares. A retained gradient keeps a buffer of its
     * own, which the others' release cannot take away. */
    tg_node *r = g_running, *o = r && r->grad_owner ? r->grad_owner : r;
    if (!r || r->out->grad != g || t->node->retain_grad || (o == r && !o->grad_holders && !g->owns_data)) return false;
    tg_tensor *v = tg_empty_arena(0, NULL); /* header only; shares g's data */
    if (!v) return false;
    v->ndim = t->ndim;
    memcpy(v->shape, t->shape, sizeof v->shape);
    v->size = t->size;
    v->data = g->data;
    v->owns_data = false;
    t->grad = v;
    t->grad_epoch = g_epoch;
    if (!o->grad_holders) {
        o->grad_holders = 1; /* the owner, whose rule is running */
        o->grad_buf = o->out->grad;
    }
    o->grad_holders++;
    t->node->grad_owner = o;
    return true;
}

/* After n's rule has run in a pass that releases the graph, the gradient of
 * n's output has had its last reader: its buffer goes back to the scope
 * for reuse, and t->grad becomes NULL (a pointer kept to the old one is
 * refused by ops: its header is marked dead), unless it is retained
 * (tg_retain_grad) or other holders of a shared buffer have yet to run (the
 * last of them gives it back). */
static void release_grad(tg_node *n) {
    tg_tensor *t = n->out, *g = t->grad;
    if (!g || g->persistent) return;
    tg_node *o = n->grad_owner ? n->grad_owner : n;
    if (!n->retain_grad) {
        if (o != n || !o->grad_holders) tg__tensor_recycle(g); /* a view's: its header only */
        t->grad = NULL;
    }
    if (o->grad_holders && --o->grad_holders == 0 && !o->retain_grad) tg__tensor_recycle(o->grad_buf);
}

static void release_scratch(void) {
    for (int i = 0; i < g_nscratch; i++)
        if (g_scratch[i].t)
            tg__tensor_recycle(g_scratch[i].t);
        else
            tg__arena_recycle(g_scratch[i].p, g_scratch[i].bytes);
    g_nscratch = 0;
}

void *tg_backward_scratch(size_t bytes) {
    bool keep = g_running && g_recycle && g_nscratch < MAX_SCRATCH;
    void *p = keep ? tg__arena_reuse(bytes) : NULL;
    if (!p) p = tg_arena_alloc(bytes);
    if (p && keep) g_scratch[g_nscratch++] = (scratch){p, bytes, NULL};
    return p;
}

tg_tensor *tg_backward_scratch_tensor(int ndim, const int *shape) {
    bool keep = g_running && g_recycle && g_nscratch < MAX_SCRATCH;
    tg_tensor *t = keep ? tg__empty_recycled(ndim, shape) : tg_empty_arena(ndim, shape);
    if (t && keep) g_scratch[g_nscratch++] = (scratch){NULL, 0, t};
    return t;
}

/* False, with "<op>: ..." recorded, unless t is a live tensor with a
 * graph to run backward through (tg_backward's output, tg_retain_grad's t). */
static bool has_graph(const char *op, const tg_tensor *t) {
    char b[64];
    if (!t) {
        tg_error_null(op);
        return false;
    }
    if (!alive(t)) {
        tg_set_error("%s: the tensor's scope has ended (its graph was released)", op);
        return false;
    }
    if (!t->requires_grad) {
        tg_set_error("%s: tensor %s does not require grad and has no graph", op, tg_tshape(b, t));
        return false;
    }
    return true;
}

int tg_retain_grad(tg_tensor *t) {
    if (!has_graph("retain_grad", t)) return -1;
    if (g_running) {
        tg_set_error("retain_grad: called during a backward pass; call it before tg_backward");
        return -1;
    }
    if (t->node) t->node->retain_grad = true; /* a leaf keeps its gradient anyway */
    return 0;
}

void tg_zero_grad(tg_tensor *t) {
    if (t && t->grad) zero_fill(t->grad); /* GPT-2's token table: 154 MB */
}

/* The gradient-ready hook (tg_set_grad_ready_hook): the leaves, a hash from
 * a leaf's address to its index (open addressing, linear probing, at most
 * half full), and per leaf the uses backward has yet to run. */
static struct {
    tg_grad_ready_fn fn;
    void *ctx;
    int n, cap; /* leaves; slots, a power of two */
    const tg_tensor **key;
    int *idx;
    uint32_t *pending;
} g_hook;

static size_t hook_slot(const tg_tensor *t) {
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15u; /* Fibonacci hashing */
    return (size_t)(h >> 32) & (size_t)(g_hook.cap - 1);
}

/* The hooked leaf's index, or -1. */
static int hook_find(const tg_tensor *t) {
    if (t->node) return -1;
    for (size_t s = hook_slot(t);; s = (s + 1) & (size_t)(g_hook.cap - 1)) {
        if (!g_hook.key[s]) return -1;
        if (g_hook.key[s] == t) return g_hook.idx[s];
    }
}

int tg_set_grad_ready_hook(tg_tensor *const *leaves, int n, tg_grad_ready_fn fn, void *ctx) {
    free(g_hook.key);
    free(g_hook.idx);
    free(g_hook.pending);
    memset(&g_hook, 0, sizeof g_hook);
    if (!fn) return 0;
    if (!leaves || n < 1) {
        tg_set_error("set_grad_ready_hook: %d leaves", leaves ? n : 0);
        return -1;
    }
    int cap = 16;
    while (cap < 2 * n) cap *= 2;
    g_hook.cap = cap;
    g_hook.key = calloc((size_t)cap, sizeof *g_hook.key);
    g_hook.idx = calloc((size_t)cap, sizeof *g_hook.idx);
    g_hook.pending = calloc((size_t)n, sizeof *g_hook.pending);
    if (!g_hook.key || !g_hook.idx || !g_hook.pending) {
        tg_set_grad_ready_hook(NULL, 0, NULL, NULL);
        tg_set_error("set_grad_ready_hook: out of memory for %d leaves", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!leaves[i]) {
            tg_set_grad_ready_hook(NULL, 0, NULL, NULL);
            tg_error_null("set_grad_ready_hook");
            return -1;
        }
        size_t s = hook_slot(leaves[i]);
        while (g_hook.key[s] && g_hook.key[s] != leaves[i]) s = (s + 1) & (size_t)(cap - 1);
        if (g_hook.key[s]) continue; /* listed twice: the later index is reported when backward starts */
        g_hook.key[s] = leaves[i];
        g_hook.idx[s] = i;
    }
    g_hook.fn = fn, g_hook.ctx = ctx, g_hook.n = n;
    return 0;
}

/* A leaf input of a node whose backward rule has run: one use fewer. */
static void hook_used(const tg_tensor *t) {
    int i = hook_find(t);
    if (i >= 0 && g_hook.pending[i] > 0 && --g_hook.pending[i] == 0) g_hook.fn(i, g_hook.ctx);
}

/* Backward of node n, then in anomaly mode a check of what it produced. */
static int run_backward(tg_node *n) {
    g_running = n;
    if (TG_PROF_ON()) {
        tg__prof_op_start();
        n->op->backward(n);
        prof_op_end(n->op, n->out, n->n_in, n->in, true);
    } else {
        n->op->backward(n);
    }
    g_running = NULL;
    release_scratch();
    if (!g_anomaly) return 0;
    for (int i = 0; i < n->n_in; i++) {
        const tg_tensor *g = n->in[i]->grad;
        if (g && n->in[i]->requires_grad && !all_finite(g)) {
            char sh[160];
            shapes_of(sh, sizeof sh, n->out, n->n_in, n->in);
            tg_set_error("detect_anomaly: backward of %s (output %s) gave a non-finite gradient for input %d",
                         n->op->name, sh, i);
            return -1;
        }
    }
    return 0;
}

/* A leaf that requires grad gets its gradient where backward first
 * reaches it: in the current scope, unless it is persistent. A leaf in the
 * arena of an outer scope (an op's result made there, then marked with
 * tg_set_requires_grad) would outlive that gradient, and the next backward
 * would add into freed memory: refused before any gradient changes. */
static bool leaf_grad_would_dangle(const tg_tensor *t) {
    if (t->node || !t->requires_grad || t->persistent || t->grad) return false;
    int d = tg__arena_depth(t);
    return d >= 0 && d < tg_scope_depth();
}

static int backward_walk(tg_tensor *out, const tg_tensor *seed, bool retain) {
    char b1[64], b2[64];
    if (!seed) {
        tg_error_null("backward");
        return -1;
    }
    if (!has_graph("backward", out)) return -1;
    if (seed->size != out->size) {
        tg_set_error("backward: seed gradient %s does not match output %s", tg_tshape(b1, seed), tg_tshape(b2, out));
        return -1;
    }
    if (g_anomaly && g_anomaly_forward[0]) {
        tg_set_error("%s", g_anomaly_forward);
        return -1;
    }
    /* First a walk that only marks: a graph a backward has used already is
     * refused before any gradient changes. */
    g_epoch++;
    if (g_hook.fn) memset(g_hook.pending, 0, (size_t)g_hook.n * sizeof *g_hook.pending);
    if (out->node) {
        out->node->visit = g_epoch;
        for (tg_node *n = tg__tape_head; n; n = n->prev) {
            if (n->visit != g_epoch) continue;
            n->grad_owner = NULL; /* this pass's sharing (tg_grad_share) starts afresh */
            n->grad_buf = NULL;
            n->grad_holders = 0;
            if (n->released) {
                tg_set_error("backward: the graph of %s was already used by a backward pass, which releases it; "
                             "to run backward through it again, use tg_backward_retain on the first pass",
                             n->op->name);
                return -1;
            }
            for (int i = 0; i < n->n_in; i++) {
                if (n->in[i]->node) n->in[i]->node->visit = g_epoch;
                if (leaf_grad_would_dangle(n->in[i])) {
                    tg_set_error("backward: input %d of %s, a leaf %s that requires grad, lives in the arena of an "
                                 "outer scope (depth %d), so its gradient would be made in this scope (depth %d) "
                                 "and freed at its end while the leaf lives on: make the leaf outside any scope "
                                 "(persistent, e.g. tg_clone there) or run backward in the scope that made it",
                                 i, n->op->name, tg_tshape(b1, n->in[i]), tg__arena_depth(n->in[i]), tg_scope_depth());
                    return -1;
                }
                if (g_hook.fn) {
                    int k = hook_find(n->in[i]);
                    if (k >= 0) g_hook.pending[k]++;
                }
            }
        }
    }
    /* Leaves this pass does not reach are final already. */
    for (int k = 0; g_hook.fn && k < g_hook.n; k++)
        if (g_hook.pending[k] == 0) g_hook.fn(k, g_hook.ctx);
    bool prev = tg_set_grad_enabled(false);
    g_epoch++;
    int rc = 0;
    tg_tensor *g = tg_grad_of(out);
    if (!g) {
        tg_set_grad_enabled(prev);
        return -1;
    }
    for (int64_t i = 0; i < g->size; i++) g->data[i] += seed->data[i];
    if (out->node) {
        out->node->visit = g_epoch;
        for (tg_node *n = tg__tape_head; n && rc == 0; n = n->prev) {
            if (n->visit != g_epoch) continue;
            rc = run_backward(n);
            n->released = !retain;
            if (!retain && g_recycle) release_grad(n);
            for (int i = 0; i < n->n_in; i++) {
                if (n->in[i]->node) n->in[i]->node->visit = g_epoch;
                if (g_hook.fn && rc == 0) hook_used(n->in[i]);
            }
        }
    }
    tg_set_grad_enabled(prev);
    return rc;
}

/* The walk's own time (marking, seeding) is the profile's "backward walk"
 * row; each node's rule is its op's backward row. */
static int backward(tg_tensor *out, const tg_tensor *seed, bool retain) {
    tg_profile_region_begin(TG_PROF_BACKWARD, "backward walk");
    int rc = backward_walk(out, seed, retain);
    tg_profile_region_end();
    return rc;
}

int tg_backward_seed(tg_tensor *out, const tg_tensor *seed) { return backward(out, seed, false); }
int tg_backward_seed_retain(tg_tensor *out, const tg_tensor *seed) { return backward(out, seed, true); }

static int backward_scalar(tg_tensor *loss, bool retain) {
    char b[64];
    if (!loss) {
        tg_error_null("backward");
        return -1;
    }
    if (alive(loss) && loss->size != 1) {
        tg_set_error("backward: loss %s has %lld elements; give a seed gradient (tg_backward_seed) "
                     "for a non-scalar output",
                     tg_tshape(b, loss), (long long)loss->size);
        return -1;
    }
    tg_real one = 1;
    tg_tensor seed = {.magic = TG_MAGIC, .ndim = 0, .size = 1, .data = &one};
    return backward(loss, &seed, retain);
}

int tg_backward(tg_tensor *loss) { return backward_scalar(loss, false); }
int tg_backward_retain(tg_tensor *loss) { return backward_scalar(loss, true); }
