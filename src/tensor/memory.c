/* Memory: counted system allocations for persistent storage, and the bump
 * arena behind scopes.
 *
 * The arena is a list of blocks that are never returned to the system while
 * the program runs. A scope remembers (block, offset) at tg_scope_begin and
 * restores it at tg_scope_end, which releases everything allocated since in
 * O(1). After the first training step the blocks are large enough, so later
 * steps make no call to malloc (tests/test_memory.c checks this). */
#include "tensor_internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN      64
#define MIN_BLOCK  ((size_t)1 << 20)
#define MAX_SCOPES 64

typedef struct block {
    unsigned char *mem;
    size_t size, used;
} block;

static block *g_blocks;
static int g_nblocks, g_capblocks;
static int g_cur; /* block being filled */
static size_t g_in_use, g_peak, g_reserved, g_persistent;
static uint64_t g_sys_allocs;

typedef struct {
    int blk;
    size_t used;
    size_t in_use;
    void *tape;
} mark;
static mark g_scopes[MAX_SCOPES];
static int g_depth;
/* Begins refused past MAX_SCOPES whose end has not come yet: those ends
 * close nothing, so a failed begin never makes its end close an outer scope.
 * Refused begins are always the innermost ones, so their ends come first. */
static int g_refused;

/* ---- counted system allocation ----
 * Threads may allocate at once (GEMM packing buffers are per thread), so the
 * counter is bumped atomically. */
#define COUNT_ALLOC() __atomic_fetch_add(&g_sys_allocs, 1, __ATOMIC_RELAXED)
void *tg_sys_alloc(size_t bytes) {
    COUNT_ALLOC();
    void *p = malloc(bytes ? bytes : 1);
    if (!p) tg_set_error("out of memory allocating %zu bytes", bytes);
    return p;
}
void *tg_sys_calloc(size_t n, size_t size) {
    COUNT_ALLOC();
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) tg_set_error("out of memory allocating %zu x %zu bytes", n, size);
    return p;
}
void tg_sys_free(void *p) { free(p); }

void tg__persistent_account(long long delta) { g_persistent += (size_t)delta; }

tg_memory_stats tg_memory(void) {
    tg_memory_stats s = {g_in_use, g_peak, g_reserved, g_persistent, g_sys_allocs};
    return s;
}

/* ---- arena ---- */
/* What the arena hands out for a request of bytes: a multiple of ALIGN, at least one. */
static size_t rounded(size_t bytes) {
    size_t n = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    return n ? n : ALIGN;
}

static bool add_block(size_t need) {
    if (g_nblocks == g_capblocks) {
        int cap = g_capblocks ? 2 * g_capblocks : 8;
        block *nb = tg_sys_alloc(sizeof(block) * (size_t)cap);
        if (!nb) return false;
        if (g_nblocks) memcpy(nb, g_blocks, sizeof(block) * (size_t)g_nblocks);
        free(g_blocks);
        g_blocks = nb;
        g_capblocks = cap;
    }
    /* Grow geometrically so a big first step needs few blocks. */
    size_t size = MIN_BLOCK;
    if (g_nblocks) size = g_blocks[g_nblocks - 1].size * 2;
    while (size < need) size *= 2;
    COUNT_ALLOC();
    unsigned char *mem = aligned_alloc(ALIGN, size);
    if (!mem) {
        tg_set_error("out of memory: arena block of %zu bytes", size);
        return false;
    }
    g_blocks[g_nblocks++] = (block){mem, size, 0};
    g_reserved += size;
    return true;
}

void *tg_arena_alloc(size_t bytes) {
    size_t n = rounded(bytes);
    /* Move to the next block that fits; blocks after g_cur are empty. */
    while (g_cur < g_nblocks && g_blocks[g_cur].size - g_blocks[g_cur].used < n) {
        if (g_cur + 1 >= g_nblocks) break;
        g_cur++;
        g_blocks[g_cur].used = 0;
    }
    if (g_cur >= g_nblocks || g_blocks[g_cur].size - g_blocks[g_cur].used < n) {
        if (!add_block(n)) return NULL;
        g_cur = g_nblocks - 1;
    }
    block *b = &g_blocks[g_cur];
    void *p = b->mem + b->used;
    b->used += n;
    g_in_use += n;
    if (g_in_use > g_peak) g_peak = g_in_use;
    return p;
}

bool tg_arena_live(const void *ptr) {
    const unsigned char *p = ptr;
    for (int i = 0; i < g_nblocks && i <= g_cur; i++) {
        const block *b = &g_blocks[i];
        if (p >= b->mem && p < b->mem + b->size) return p < b->mem + b->used;
    }
    return false;
}

/* ---- recycling inside a scope ----
 * Memory given back before its scope ends (tg__arena_recycle: the
 * gradients backward no longer needs) waits on a free list of the scope
 * that allocated it, for the next request of exactly its size in that
 * scope (tg__arena_reuse). The buffer itself holds the list's links, so
 * recycling allocates nothing. A scope's list is emptied when the scope
 * ends, since its memory goes back to the arena then. Sizes are few (a
 * model's layers repeat their shapes), so the sizes are a list too. */
typedef struct free_buf {
    struct free_buf *same;      /* the next buffer of this size */
    struct free_buf *next_size; /* on the first of its size: the first of another size */
    size_t bytes;
} free_buf;
static free_buf *g_free[MAX_SCOPES + 1]; /* per depth: 0 the root level, d the d-th scope */

/* The depth of the open scope whose allocations hold p: the innermost one
 * that began before p's place in the arena (0: the root level); -1 when p
 * is not live arena memory. Places are ordered by (block, offset): blocks
 * are filled in order, and a scope's begin mark is such a place. */
static int owner_depth(const void *p) {
    const unsigned char *c = p;
    for (int i = 0; i < g_nblocks && i <= g_cur; i++) {
        const block *b = &g_blocks[i];
        if (c < b->mem || c >= b->mem + b->size) continue;
        size_t off = (size_t)(c - b->mem);
        if (off >= b->used) return -1;
        int d = g_depth;
        while (d > 0 && (i < g_scopes[d - 1].blk || (i == g_scopes[d - 1].blk && off < g_scopes[d - 1].used))) d--;
        return d;
    }
    return -1;
}

int tg__arena_depth(const void *p) { return p ? owner_depth(p) : -1; }

void tg__arena_recycle(void *p, size_t bytes) {
    int d = p ? owner_depth(p) : -1;
    if (d < 0) return;
    free_buf *f = p, **s = &g_free[d];
    f->bytes = rounded(bytes);
    while (*s && (*s)->bytes != f->bytes) s = &(*s)->next_size;
    if (*s) { /* behind the first of its size */
        f->same = (*s)->same;
        f->next_size = NULL;
        (*s)->same = f;
    } else {
        f->same = f->next_size = NULL;
        *s = f;
    }
}

void *tg__arena_reuse(size_t bytes) {
    size_t n = rounded(bytes);
    free_buf **s = &g_free[g_depth];
    while (*s && (*s)->bytes != n) s = &(*s)->next_size;
    free_buf *f = *s;
    if (!f) return NULL;
    if (f->same) {
        free_buf *g = f->same;
        f->same = g->same;
        return g;
    }
    *s = f->next_size;
    return f;
}

void *tg__tape_head;      /* see tensor_internal.h */
static uint64_t g_serial; /* scopes begun so far */

int tg_scope_begin(void) {
    if (g_depth >= MAX_SCOPES) {
        g_refused++;
        tg_set_error("scope_begin: more than %d nested scopes", MAX_SCOPES);
        return -1;
    }
    size_t used = g_nblocks ? g_blocks[g_cur].used : 0;
    g_scopes[g_depth++] = (mark){g_cur, used, g_in_use, tg__tape_head};
    /* Successive scopes start 0, 1, 2, 3 alignment units later, so a scope
     * that makes the same allocations as one of the three before it puts no
     * tensor header where an old one was: a pointer kept past its scope's
     * end then points at no header, and ops refuse it (tg_any_null). */
    size_t shift = (size_t)(++g_serial % 4) * ALIGN;
    void *pad = shift ? tg_arena_alloc(shift) : NULL;
    if (pad) memset(pad, 0, shift); /* and no old header survives in the gap */
    return 0;
}

void tg_scope_end(void) {
    if (g_refused > 0) {
        g_refused--;
        return;
    }
    if (g_depth == 0) {
        tg_set_error("scope_end: no scope is open");
        return;
    }
    g_free[g_depth] = NULL; /* its memory goes back to the arena below */
    mark m = g_scopes[--g_depth];
    tg__tape_head = m.tape;
    /* Blocks past m.blk become empty; they stay reserved for the next step. */
    for (int i = m.blk + 1; i <= g_cur && i < g_nblocks; i++) g_blocks[i].used = 0;
    g_cur = m.blk;
    if (g_nblocks) g_blocks[g_cur].used = m.used;
    g_in_use = m.in_use;
}

int tg_scope_depth(void) { return g_depth; }

/* Hooks run by tg_release_all (tensor_internal.h). A slot once set never
 * changes, so a reader sees either NULL or a complete pointer. */
#define MAX_RELEASE_HOOKS 4
static void (*g_release_hooks[MAX_RELEASE_HOOKS])(void);

void tg__on_release_all(void (*fn)(void)) {
    for (int i = 0; i < MAX_RELEASE_HOOKS; i++) {
        void (*cur)(void) = __atomic_load_n(&g_release_hooks[i], __ATOMIC_ACQUIRE);
        if (cur == fn) return;
        if (!cur) {
            void (*expected)(void) = NULL;
            if (__atomic_compare_exchange_n(&g_release_hooks[i], &expected, fn, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE) ||
                expected == fn)
                return;
        }
    }
}

void tg_release_all(void) {
    for (int i = 0; i < MAX_RELEASE_HOOKS; i++) {
        void (*fn)(void) = __atomic_load_n(&g_release_hooks[i], __ATOMIC_ACQUIRE);
        if (fn) fn();
    }
    for (int i = 0; i < g_nblocks; i++) free(g_blocks[i].mem);
    free(g_blocks);
    g_blocks = NULL;
    g_nblocks = g_capblocks = g_cur = 0;
    g_depth = g_refused = 0;
    g_in_use = g_reserved = 0;
    memset(g_free, 0, sizeof g_free);
    tg__tape_head = NULL;
}
