/* Elementwise kernels: unary maps, broadcasting binary ops, and the
 * reduction of a broadcast gradient back to an input's shape. */
#include "kernels.h"
#include "half.h"
#include "parallel.h"
#include "simd.h"

#include <math.h>
#include <string.h>

/* ---- unary ops: forward y = f(x), backward dx (+)= dy f'(x) -------------
 * One switch over the rows of TG_UNARY_OPS, each case a plain loop that the
 * compiler vectorises; TG_ISA_DISPATCH (simd.h) builds it for the baseline,
 * AVX2 and AVX-512, which matters for the transcendental rows (GPT-2's GELU
 * forward and backward took 13% of a GPT step at the baseline's 4 lanes). */
typedef struct {
    tg_unary_kind kind;
    tg_real p;
    const tg_real *x, *gy, *y; /* gy, y: backward only */
    tg_real *out;              /* y (forward) or dx (backward) */
    bool fresh;                /* backward: dx = ... (true) or dx += ... */
} unary_ctx;

TG_KERNEL_BODY void unary_range_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const unary_ctx *c = ctx;
    tg_real p = c->p;
    const tg_real *restrict x = c->x;
    tg_real *restrict y = c->out;
    (void)p, (void)tid;
#define MAP(expr)                           \
    for (int64_t i = begin; i < end; i++) { \
        tg_real v = x[i];                   \
        y[i] = (expr);                      \
    }                                       \
    break;
#define CASE(name, KIND, f, df, arity) \
    case TG_UNARY_##KIND: MAP(f)
    switch (c->kind) { TG_UNARY_OPS(CASE) }
#undef CASE
#undef MAP
}
TG_ISA_DISPATCH(unary_range, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

/* One element's cost for the pool (parallel.h's cost model): a libm call
 * (exp, log, tanh, erf, pow) costs 25 times a pass over memory. */
static double unary_ns(tg_unary_kind kind, bool backward) {
    switch (kind) {
    case TG_UNARY_EXP: /* backward g y */
    case TG_UNARY_LOG: /* g / x */
    case TG_UNARY_TANH:
    case TG_UNARY_SIGMOID: return backward ? TG_NS_STREAM : TG_NS_LIBM;
    case TG_UNARY_GELU: /* backward: erf and exp */
    case TG_UNARY_POW: return backward ? 2 * TG_NS_LIBM : TG_NS_LIBM;
    case TG_UNARY_GELU_TANH: return TG_NS_POLY;
    default: return TG_NS_STREAM;
    }
}

void tg_k_unary(tg_unary_kind kind, tg_real p, const tg_real *x, tg_real *y, int64_t n) {
    tg_parallel_for_ns(n, (double)n * unary_ns(kind, false), unary_range,
                       &(unary_ctx){.kind = kind, .p = p, .x = x, .out = y});
}

/* The forward column on an m x n block, row by row; a row in place (x ==
 * y) is read and written through one pointer, so that both loops are
 * plain vector loops. */
TG_KERNEL_BODY void unary_tile_body(tg_unary_kind kind, tg_real p, int m, int n, const tg_real *x, tg_real *y, int ld) {
    (void)p;
#define MAP(expr)                                            \
    for (int r = 0; r < m; r++) {                            \
        if (x == y) {                                        \
            tg_real *restrict yr = y + (size_t)r * ld;       \
            for (int j = 0; j < n; j++) {                    \
                tg_real v = yr[j];                           \
                yr[j] = (expr);                              \
            }                                                \
        } else {                                             \
            const tg_real *restrict xr = x + (size_t)r * ld; \
            tg_real *restrict yr = y + (size_t)r * ld;       \
            for (int j = 0; j < n; j++) {                    \
                tg_real v = xr[j];                           \
                yr[j] = (expr);                              \
            }                                                \
        }                                                    \
    }                                                        \
    break;
#define CASE(name, KIND, f, df, arity) \
    case TG_UNARY_##KIND: MAP(f)
    switch (kind) { TG_UNARY_OPS(CASE) }
#undef CASE
#undef MAP
}
TG_ISA_DISPATCH(unary_tile, (tg_unary_kind kind, tg_real p, int m, int n, const tg_real *x, tg_real *y, int ld),
                (kind, p, m, n, x, y, ld))

void tg_k_unary_tile(tg_unary_kind kind, tg_real p, int m, int n, const tg_real *x, tg_real *y, int ld) {
    unary_tile(kind, p, m, n, x, y, ld);
}

/* ---- rounding a row to bf16 (tg__bf16_from_float, half.h) -----------------
 * BF16_ROW(x, h, n): h[j] = tg__bf16_from_float(x[j]) for j < n, in
 * vcvtneps2bf16 where the CPU has AVX-512 BF16 (bf16_row_fast), else the
 * formula's loop (vectorised in the body that holds it). The instruction
 * rounds to nearest even and quiets a NaN (its top half | 0x40) as the
 * formula does, but flushes a subnormal input to zero where the formula
 * rounds it (kept subnormal: tg_k_to_bf16's rounding): a vector with a
 * subnormal lane takes the formula's integer steps for those lanes. The
 * same bits lane by lane (tests/test_bf16_storage.c), a third of the
 * formula's instructions per vector. With daz, the bf16 GEMM's rounding
 * of its operands (tg__bf16_from_bits_daz: the instruction's, subnormals
 * flushed) instead. */
#if TG_SIMD_F32
TG_AVX512_BF16 static void bf16_row_avx512bf(const float *x, uint16_t *h, int64_t n, bool daz) {
    const __m512i expo = _mm512_set1_epi32(0x7F800000), frac = _mm512_set1_epi32(0x007FFFFF);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mk = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(mk, x + i);
        const __m512i xi = _mm512_castps_si512(v);
        __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
        const __mmask16 sub = daz ? 0 : _mm512_mask_testn_epi32_mask(_mm512_test_epi32_mask(xi, frac), xi, expo);
        if (sub) { /* x + 0x7FFF + ((x >> 16) & 1), its top half */
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(xi, 16), _mm512_set1_epi32(1));
            __m512i rne = _mm512_srli_epi32(_mm512_add_epi32(xi, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
            r = _mm256_mask_blend_epi16(sub, r, _mm512_cvtepi32_epi16(rne));
        }
        _mm256_mask_storeu_epi16(h + i, mk, r);
    }
}
#endif
/* false where the loop must do it (no AVX-512 BF16, or the double build). */
static bool bf16_row_fast(const tg_real *x, uint16_t *h, int64_t n, bool daz) {
#if TG_SIMD_F32
    if (tg_isa_level() >= TG_ISA_AVX512_BF16) {
        bf16_row_avx512bf(x, h, n, daz);
        return true;
    }
#endif
    (void)x, (void)h, (void)n, (void)daz;
    return false;
}
#define BF16_ROW(x, h, n)                                                                       \
    do {                                                                                        \
        const tg_real *restrict bx_ = (x);                                                      \
        uint16_t *restrict bh_ = (h);                                                           \
        const int64_t bn_ = (n);                                                                \
        if (!bf16_row_fast(bx_, bh_, bn_, false))                                               \
            for (int64_t j_ = 0; j_ < bn_; j_++) bh_[j_] = tg__bf16_from_float((float)bx_[j_]); \
    } while (0)

/* ---- the GEMM's epilogue (tg_gemm_epilogue, kernels.h) -------------------
 * On a finished block of C, row by row and EP_COLS columns at a time, so
 * that each step's values stay in L1: the add (v = c + (res + bias)), v to
 * C and H16, f(v) (unary_tile_body's row: tg_k_unary's bits) to Y or a
 * stack row, and that row to Y16. The bf16 rounding is tg_k_to_bf16's
 * (half.h, a double rounded to float first). Built for each ISA. */
#define EP_COLS 256
TG_KERNEL_BODY void epilogue_tile_body(const tg_gemm_epilogue *ep, int64_t i0, int j0, tg_real *c, int ldc, int ldo,
                                       int m, int n) {
    _Alignas(64) tg_real t[EP_COLS];
    for (int r = 0; r < m; r++)
        for (int jb = 0; jb < n; jb += EP_COLS) {
            const int w = n - jb < EP_COLS ? n - jb : EP_COLS;
            const size_t o = (size_t)(i0 + r) * (size_t)ldo + (size_t)(j0 + jb); /* the outputs' offset */
            tg_real *restrict v = c + (size_t)r * ldc + jb;
            const tg_real *restrict b = ep->bias ? ep->bias + j0 + jb : NULL;
            const tg_real *restrict rs = ep->res ? ep->res + o : NULL;
            if (rs && b)
                for (int j = 0; j < w; j++) v[j] = v[j] + (rs[j] + b[j]);
            else if (b)
                for (int j = 0; j < w; j++) v[j] = v[j] + b[j];
            else if (rs)
                for (int j = 0; j < w; j++) v[j] = v[j] + rs[j];
            if (ep->H16) BF16_ROW(v, ep->H16 + o, w);
            const tg_real *y = v; /* f(v) */
            if (!ep->no_act) {
                tg_real *dst = ep->Y ? ep->Y + o : t;
                unary_tile_body(ep->act, 0, 1, w, v, dst, w);
                y = dst;
            } else if (ep->Y && ep->Y + o != v) {
                memcpy(ep->Y + o, v, sizeof(tg_real) * (size_t)w);
            }
            if (ep->Y16) BF16_ROW(y, ep->Y16 + o, w);
        }
}
TG_ISA_DISPATCH(epilogue_tile,
                (const tg_gemm_epilogue *ep, int64_t i0, int j0, tg_real *c, int ldc, int ldo, int m, int n),
                (ep, i0, j0, c, ldc, ldo, m, n))

void tg_k_epilogue_tile(const tg_gemm_epilogue *ep, int64_t i0, int j0, tg_real *c, int ldc, int ldo, int m, int n) {
    epilogue_tile(ep, i0, j0, c, ldc, ldo, m, n);
}

typedef struct {
    const tg_gemm_epilogue *ep;
    tg_real *C, beta;
    int ldc, N;
} ep_start_ctx;
static void ep_start_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    const ep_start_ctx *s = ctx;
    const tg_real *restrict b = s->ep->bias, beta = s->beta;
    const int n = s->N;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) { /* one plain loop per case, each vectorised */
        tg_real *restrict c = s->C + r * s->ldc;
        const tg_real *restrict rs = s->ep->res ? s->ep->res + r * s->ldc : NULL;
        if (beta != 0)
            for (int j = 0; j < n; j++) c[j] *= beta;
        if (beta != 0 && rs && b)
            for (int j = 0; j < n; j++) c[j] += rs[j] + b[j];
        else if (beta != 0)
            for (int j = 0; j < n; j++) c[j] += rs ? rs[j] : b[j];
        else if (rs && b)
            for (int j = 0; j < n; j++) c[j] = rs[j] + b[j];
        else
            memcpy(c, rs ? rs : b, sizeof(tg_real) * (size_t)n);
    }
}
void tg_k_epilogue_start(const tg_gemm_epilogue *ep, tg_real *C, int ldc, int M, int N, tg_real beta) {
    tg_parallel_for_ns(M, (double)M * N * TG_NS_STREAM, ep_start_rows, &(ep_start_ctx){ep, C, beta, ldc, N});
}

/* dx = GX or dx += GX, GX the row's derivative column written in g = dy, x,
 * y = f(x) and p; branch-free, so both loops vectorise. */
TG_KERNEL_BODY void unary_backward_range_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const unary_ctx *c = ctx;
    const tg_real *restrict gy = c->gy, *restrict xs = c->x, *restrict ys = c->y;
    tg_real *restrict gx = c->out, p = c->p;
    (void)p, (void)tid;
#define LOOP(ASSIGN, GX)                         \
    for (int64_t i = begin; i < end; i++) {      \
        tg_real g = gy[i], x = xs[i], y = ys[i]; \
        (void)x, (void)y;                        \
        gx[i] ASSIGN(GX);                        \
    }
#define CASE(name, KIND, f, GX, arity) \
    case TG_UNARY_##KIND:              \
        if (c->fresh) {                \
            LOOP(=, GX)                \
        } else {                       \
            LOOP(+=, GX)               \
        }                              \
        break;
    switch (c->kind) { TG_UNARY_OPS(CASE) }
#undef CASE
#undef LOOP
}
TG_ISA_DISPATCH(unary_backward_range, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

void tg_k_unary_backward(tg_unary_kind kind, tg_real p, const tg_real *gy, const tg_real *x, const tg_real *y,
                         tg_real *gx, int64_t n, bool fresh) {
    unary_ctx c = {.kind = kind, .p = p, .x = x, .gy = gy, .y = y, .out = gx, .fresh = fresh};
    tg_parallel_for_ns(n, (double)n * unary_ns(kind, true), unary_backward_range, &c);
}

/* ---- casts between tg_real and bf16 storage (tg_to_bf16, tg_to_real) ----
 * half.h's rounding (to nearest even, subnormals kept, NaN quietened;
 * branch-free, so these loops vectorise). A double is rounded to float
 * first. */
typedef struct {
    const tg_real *x;
    const uint16_t *h;
    uint16_t *to_h;
    tg_real *to_x;
} cast_ctx;
TG_KERNEL_BODY void cast_range_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const cast_ctx *c = ctx;
    (void)tid;
    if (c->to_h) {
        BF16_ROW(c->x + begin, c->to_h + begin, end - begin);
    } else {
        const uint16_t *restrict h = c->h;
        tg_real *restrict x = c->to_x;
        for (int64_t i = begin; i < end; i++) x[i] = (tg_real)tg__bf16_to_float(h[i]);
    }
}
TG_ISA_DISPATCH(cast_range, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

TG_KERNEL_BODY void to_bf16_row_body(const tg_real *x, uint16_t *h, int64_t n) { BF16_ROW(x, h, n); }
TG_ISA_DISPATCH(to_bf16_row, (const tg_real *x, uint16_t *h, int64_t n), (x, h, n))
void tg_k_to_bf16_row(const tg_real *x, uint16_t *h, int64_t n) { to_bf16_row(x, h, n); }

void tg_k_to_bf16(const tg_real *x, uint16_t *h, int64_t n) {
    tg_parallel_for_ns(n, (double)n * TG_NS_STREAM, cast_range, &(cast_ctx){.x = x, .to_h = h});
}
void tg_k_from_bf16(const uint16_t *h, tg_real *x, int64_t n) {
    tg_parallel_for_ns(n, (double)n * TG_NS_STREAM, cast_range, &(cast_ctx){.h = h, .to_x = x});
}

/* Strides of `t` seen in the broadcast shape of rank nd: 0 on broadcast axes. */
static void bcast_strides(const tg_tensor *t, int nd, const int *oshape, int64_t *st) {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int j = i - (nd - t->ndim);
        int dim = j >= 0 ? t->shape[j] : 1;
        st[i] = (dim == 1 && oshape[i] != 1) ? 0 : s;
        s *= dim;
    }
}

/* c[i] = a[i*ia] OP b[i*ib] for i < n, with ia and ib each 0 (a broadcast
 * value) or 1. One loop per case and per op, so each is a plain vector loop
 * (out never overlaps a or b: it is always a fresh tensor). Built for each
 * ISA with the two loops that call it (TG_ISA_DISPATCH). */
#define ROW_LOOP(OP)                                             \
    do {                                                         \
        if (ia && ib)                                            \
            for (int64_t i = 0; i < n; i++) c[i] = a[i] OP b[i]; \
        else if (ia) {                                           \
            tg_real bv = b[0];                                   \
            for (int64_t i = 0; i < n; i++) c[i] = a[i] OP bv;   \
        } else if (ib) {                                         \
            tg_real av = a[0];                                   \
            for (int64_t i = 0; i < n; i++) c[i] = av OP b[i];   \
        } else {                                                 \
            tg_real v = a[0] OP b[0];                            \
            for (int64_t i = 0; i < n; i++) c[i] = v;            \
        }                                                        \
    } while (0)

TG_KERNEL_BODY void binary_row(tg_binary_kind k, const tg_real *restrict a, int64_t ia, const tg_real *restrict b,
                               int64_t ib, tg_real *restrict c, int64_t n) {
    switch (k) {
    case TG_BINARY_ADD: ROW_LOOP(+); break;
    case TG_BINARY_SUB: ROW_LOOP(-); break;
    case TG_BINARY_MUL: ROW_LOOP(*); break;
    case TG_BINARY_DIV: ROW_LOOP(/); break;
    }
}
#undef ROW_LOOP

typedef struct {
    tg_binary_kind kind;
    const tg_real *A, *B;
    tg_real *C;
    int64_t n, chunk;     /* same shape */
    const tg_tensor *out; /* broadcast */
    const int64_t *sa, *sb;
    int64_t inner, ia, ib;
    int nd;
} binary_ctx;

TG_KERNEL_BODY void binary_chunks_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const binary_ctx *c = ctx;
    tg_binary_kind kind = c->kind;
    const tg_real *A = c->A, *B = c->B;
    tg_real *C = c->C;
    int64_t n = c->n, chunk = c->chunk;
    (void)tid;
    for (int64_t q = begin; q < end; q++) {
        int64_t i0 = q * chunk, len = n - i0 < chunk ? n - i0 : chunk;
        binary_row(kind, A + i0, 1, B + i0, 1, C + i0, len);
    }
}
TG_ISA_DISPATCH(binary_chunks, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

TG_KERNEL_BODY void binary_rows_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const binary_ctx *c = ctx;
    tg_binary_kind kind = c->kind;
    const tg_real *A = c->A, *B = c->B;
    tg_real *C = c->C;
    const tg_tensor *out = c->out;
    const int64_t *sa = c->sa, *sb = c->sb;
    int64_t inner = c->inner, ia = c->ia, ib = c->ib;
    int nd = c->nd;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        /* Offsets of this row in a and b from its multi-index. */
        int64_t oa = 0, ob = 0, rem = r;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t idx = rem % out->shape[d];
            rem /= out->shape[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        binary_row(kind, A + oa, ia, B + ob, ib, C + r * inner, inner);
    }
}
TG_ISA_DISPATCH(binary_rows, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

void tg_k_binary(tg_binary_kind kind, const tg_tensor *a, const tg_tensor *b, tg_tensor *out) {
    const tg_real *A = a->data, *B = b->data;
    tg_real *C = out->data;
    int64_t n = out->size;
    if (a->size == n && b->size == n) { /* same shape: one flat loop, in chunks per thread */
        int64_t chunk = 16384, nchunks = (n + chunk - 1) / chunk;
        binary_ctx c = {.kind = kind, .A = A, .B = B, .C = C, .n = n, .chunk = chunk};
        tg_parallel_for_ns(nchunks, (double)n * TG_NS_STREAM, binary_chunks, &c);
        return;
    }
    int nd = out->ndim;
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];
    bcast_strides(a, nd, out->shape, sa);
    bcast_strides(b, nd, out->shape, sb);
    int64_t inner = nd ? out->shape[nd - 1] : 1;
    int64_t rows = inner ? n / inner : 0;
    int64_t ia = nd ? sa[nd - 1] : 0, ib = nd ? sb[nd - 1] : 0;
    binary_ctx c = {.kind = kind, .A = A, .B = B, .C = C, .out = out, .sa = sa, .sb = sb, .inner = inner};
    c.ia = ia, c.ib = ib, c.nd = nd;
    tg_parallel_for_ns(rows, (double)n * TG_NS_STREAM, binary_rows, &c);
}

/* ---- the reduction of a broadcast gradient (tg_k_sum_to) ---------------------
 * Bias gradients and the like: dst_j += sum_r src[r, j] over R rows of D.
 * Split into pieces of SUM_ROWS rows by SUM_COLS columns (a column block is
 * whole cache lines, so two threads never write one line); each row chunk
 * sums its rows in order into its own scratch row, then each column adds
 * the chunks' sums in chunk order. The pieces depend on the shape only, so
 * the bits are the same at any thread count; R / SUM_ROWS x D / SUM_COLS
 * pieces: 16 x 2 for a GPT bias of d 128 over 2048 rows, where the one
 * loop it replaces ran on one thread. A single chunk (R <= SUM_ROWS) sums
 * straight into dst. */
#define SUM_ROWS 128
#define SUM_COLS 64
typedef struct {
    const tg_real *src;
    tg_real *dst, *part;                /* part: [chunks, D] */
    int64_t R, D, chunks, cblocks, per; /* per: rows a chunk */
} sum_rows_ctx;

/* Pieces [b, e): piece p is row chunk p / cblocks, column block p % cblocks. */
static void sum_rows_pieces(void *ctx, int64_t b, int64_t e, int tid) {
    const sum_rows_ctx *c = ctx;
    (void)tid;
    for (int64_t p = b; p < e; p++) {
        int64_t k = p / c->cblocks, j0 = p % c->cblocks * SUM_COLS;
        int64_t r0 = k * c->per, r1 = r0 + c->per < c->R ? r0 + c->per : c->R;
        int64_t w = c->D - j0 < SUM_COLS ? c->D - j0 : SUM_COLS;
        tg_real *out = c->part ? c->part + k * c->D + j0 : c->dst + j0;
        if (c->part) memset(out, 0, sizeof(tg_real) * (size_t)w);
        for (int64_t r = r0; r < r1; r++) {
            const tg_real *row = c->src + r * c->D + j0;
#pragma omp simd
            for (int64_t j = 0; j < w; j++) out[j] += row[j];
        }
    }
}

/* Column blocks [b, e) of dst: the chunks' sums, in chunk order. */
static void sum_rows_combine(void *ctx, int64_t b, int64_t e, int tid) {
    const sum_rows_ctx *c = ctx;
    (void)tid;
    int64_t j0 = b * SUM_COLS, j1 = e * SUM_COLS < c->D ? e * SUM_COLS : c->D;
    for (int64_t k = 0; k < c->chunks; k++) {
        const tg_real *row = c->part + k * c->D;
#pragma omp simd
        for (int64_t j = j0; j < j1; j++) c->dst[j] += row[j];
    }
}

static void sum_rows(const tg_real *src, tg_real *dst, int64_t R, int64_t D) {
    sum_rows_ctx c = {.src = src, .dst = dst, .R = R, .D = D};
    c.chunks = (R + SUM_ROWS - 1) / SUM_ROWS;
    c.cblocks = (D + SUM_COLS - 1) / SUM_COLS;
    if (c.chunks > 1) c.part = tg_arena_alloc(sizeof(tg_real) * (size_t)(c.chunks * D));
    if (c.chunks > 1 && !c.part) c.chunks = 1, c.part = NULL; /* no memory: one chunk, still exact */
    c.per = c.chunks > 1 ? SUM_ROWS : R;
    tg_parallel_for_ns(c.chunks * c.cblocks, (double)(R * D) * TG_NS_STREAM, sum_rows_pieces, &c);
    if (c.part) tg_parallel_for_ns(c.cblocks, (double)(c.chunks * D) * TG_NS_STREAM, sum_rows_combine, &c);
}

/* dst += src over [b, e) (same shape), or dst = src when !accumulate. */
typedef struct {
    const tg_real *src;
    tg_real *dst;
    bool accumulate;
} add_into_ctx;
static void add_into_range(void *ctx, int64_t b, int64_t e, int tid) {
    const add_into_ctx *c = ctx;
    (void)tid;
    if (!c->accumulate) {
        memcpy(c->dst + b, c->src + b, sizeof(tg_real) * (size_t)(e - b));
        return;
    }
#pragma omp simd
    for (int64_t i = b; i < e; i++) c->dst[i] += c->src[i];
}

void tg_k_sum_to(const tg_tensor *src, tg_tensor *dst, bool accumulate) {
    if (src->size == dst->size) { /* a copy or an add, split over threads (no zeroing pass first) */
        tg_parallel_for_ns(src->size, (double)src->size * TG_NS_STREAM, add_into_range,
                           &(add_into_ctx){src->data, dst->data, accumulate});
        return;
    }
    if (!accumulate) memset(dst->data, 0, (size_t)dst->size * sizeof(tg_real));
    int nd = src->ndim;
    /* Common case (bias gradients, a position table): dst's shape, less
     * leading 1s, is a suffix of src's, so src is rows of dst->size values
     * to add up. */
    int lead = 0;
    while (lead < dst->ndim && dst->shape[lead] == 1) lead++;
    int dn = dst->ndim - lead;
    bool suffix = dn <= nd;
    for (int i = 0; suffix && i < dn; i++) suffix = dst->shape[lead + i] == src->shape[nd - dn + i];
    if (suffix && dst->size > 0) {
        sum_rows(src->data, dst->data, src->size / dst->size, dst->size);
        return;
    }
    int64_t sd[TG_MAX_DIMS];
    bcast_strides(dst, nd, src->shape, sd);
    /* One pass over src in order: every dst element sums its terms in the
     * same order on every run. */
    int64_t idx[TG_MAX_DIMS] = {0}, off = 0;
    for (int64_t i = 0; i < src->size; i++) {
        dst->data[off] += src->data[i];
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < src->shape[d]) {
                off += sd[d];
                break;
            }
            off -= sd[d] * (src->shape[d] - 1);
            idx[d] = 0;
        }
    }
}

/* ---- a fused Linear's activation backward from a bf16 h ------------------
 * tg_k_unary_backward_bf16 (kernels.h): rows in sum_rows' chunks of
 * SUM_ROWS, one chunk a job; each row (ACT_COLS values at a time) a loop
 * that widens h16 and computes d = gy f'(h) with the row's derivative
 * column (unary_backward_range_body's expression, hence its bits) into a
 * stack row, then one that stores its bf16 and adds d to the chunk's
 * column sums, which start at zero (one fused loop spilled registers and
 * ran slower than the passes it replaced); then the
 * chunks' sums are added to db in row order. Every column is summed as
 * tg_k_sum_to sums a [rows, cols] tensor (its column blocks only split the
 * work, not a sum), and a single chunk sums straight into db as it does.
 * One pass where there were four (widen, derivative, column sums, rounding). */
typedef struct {
    tg_unary_kind kind;
    const uint16_t *h16;
    const tg_real *gy;
    uint16_t *dh16;
    tg_real *db, *part; /* part: [chunks, cols], or NULL (one chunk: into db) */
    int64_t rows, cols, chunks;
    bool operand; /* no activation: d = gy, rounded as the GEMM's operand (tg_k_to_bf16_operand) */
} act_bf16_ctx;

#define ACT_COLS 1024 /* a row's values a step holds on the stack: 4 KB, in L1 */
TG_KERNEL_BODY void act_bf16_chunks_body(void *ctx, int64_t b, int64_t e, int tid) {
    const act_bf16_ctx *c = ctx;
    const tg_real p = 0; /* the rows' scalar: none for an activation */
    _Alignas(64) tg_real t[ACT_COLS];
    (void)tid, (void)p;
    for (int64_t k = b; k < e; k++) {
        int64_t r0 = k * SUM_ROWS, r1 = c->chunks > 1 && r0 + SUM_ROWS < c->rows ? r0 + SUM_ROWS : c->rows;
        tg_real *out = !c->db ? NULL : c->part ? c->part + k * c->cols : c->db;
        if (c->part) memset(out, 0, sizeof(tg_real) * (size_t)c->cols);
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j0 = 0; j0 < c->cols; j0 += ACT_COLS) {
                const int64_t n = c->cols - j0 < ACT_COLS ? c->cols - j0 : ACT_COLS, o = r * c->cols + j0;
                const uint16_t *restrict h = c->h16 + o;
                const tg_real *restrict gy = c->gy + o;
                if (c->operand) {
                    if (!bf16_row_fast(gy, c->dh16 + o, n, true))
                        for (int64_t j = 0; j < n; j++)
                            c->dh16[o + j] = tg__bf16_from_bits_daz(tg__float_bits((float)gy[j]));
                    if (out) {
                        tg_real *restrict s = out + j0;
#pragma omp simd
                        for (int64_t j = 0; j < n; j++) s[j] += gy[j];
                    }
                    continue;
                }
                /* d = gy f'(h): the derivative loop alone, so that it vectorises as tg_k_unary_backward's */
#define CASE(name, KIND, f, GX, arity)                                      \
    case TG_UNARY_##KIND:                                                   \
        for (int64_t j = 0; j < n; j++) {                                   \
            tg_real g = gy[j], x = (tg_real)tg__bf16_to_float(h[j]), y = x; \
            (void)x, (void)y;                                               \
            t[j] = (GX);                                                    \
        }                                                                   \
        break;
                switch (c->kind) { TG_UNARY_OPS(CASE) }
#undef CASE
                BF16_ROW(t, c->dh16 + o, n);
                if (out) {
                    tg_real *restrict s = out + j0;
#pragma omp simd
                    for (int64_t j = 0; j < n; j++) s[j] += t[j];
                }
            }
    }
}
TG_ISA_DISPATCH(act_bf16_chunks, (void *ctx, int64_t b, int64_t e, int tid), (ctx, b, e, tid))

static void act_bf16_run(act_bf16_ctx c, bool db_fresh) {
    const int64_t rows = c.rows, cols = c.cols;
    tg_real *db = c.db, *part = c.part;
    if (rows <= 0 || cols <= 0) return;
    c.chunks = (rows + SUM_ROWS - 1) / SUM_ROWS;
    c.part = db && c.chunks > 1 ? part : NULL;
    if (db && db_fresh) memset(db, 0, sizeof(tg_real) * (size_t)cols);
    tg_parallel_for_ns(c.chunks, (double)(rows * cols) * (c.operand ? TG_NS_STREAM : TG_NS_POLY), act_bf16_chunks, &c);
    if (c.part) {
        sum_rows_ctx s = {.dst = db, .part = c.part, .D = cols, .chunks = c.chunks};
        tg_parallel_for_ns((cols + SUM_COLS - 1) / SUM_COLS, (double)(c.chunks * cols) * TG_NS_STREAM, sum_rows_combine,
                           &s);
    }
}

void tg_k_unary_backward_bf16(tg_unary_kind kind, const uint16_t *h16, const tg_real *gy, uint16_t *dh16, int64_t rows,
                              int64_t cols, tg_real *db, bool db_fresh, tg_real *part) {
    act_bf16_run(
        (act_bf16_ctx){
            .kind = kind, .h16 = h16, .gy = gy, .dh16 = dh16, .db = db, .part = part, .rows = rows, .cols = cols},
        db_fresh);
}

void tg_k_to_bf16_operand(const tg_real *x, uint16_t *h, int64_t rows, int64_t cols, tg_real *db, bool db_fresh,
                          tg_real *part) {
    act_bf16_run(
        (act_bf16_ctx){.gy = x, .dh16 = h, .db = db, .part = part, .rows = rows, .cols = cols, .operand = true},
        db_fresh);
}

int64_t tg_k_unary_backward_bf16_part(int64_t rows, int64_t cols) {
    int64_t chunks = (rows + SUM_ROWS - 1) / SUM_ROWS;
    return chunks > 1 ? chunks * cols : 0;
}
