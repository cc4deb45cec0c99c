/* The bf16 GEMM's fp32 engine (gemm_bf16.c, engine "fp32") on the packed
 * path: bf16 products on the float FMA micro-kernel, for a CPU whose bf16
 * engines are slower than its FMA units or that has none (AVX2 only). A
 * product of two bf16 values is exact in float, so float sums of the
 * rounded operands are the bf16 product's.
 *
 * The float GEMM's own driver row (gemm.c: the tile, blocks, split and
 * micro-kernel) runs the product, with packers of this file that round a
 * float operand to bf16 (tg__bf16_round_daz: bf, gemm_bf16_pack.h) or
 * widen a bf16 one (bf_h) as they pack it. The packed panels then hold
 * what the float packers would from rounded copies of op(A) and op(B),
 * in the same places, so C has the bits of tg_k_gemm on such copies
 * (tests/test_gemm_bf16_fp32.c checks it: transposes, tails, threads).
 *
 * Why: before, the engine made those copies of both operands whole, on
 * the calling thread, then ran tg_k_gemm on them: 4% of a gpt-small bf16
 * step at 1 thread on an AVX2-only Zen 4 (perf), not shared among the
 * threads at 2, and a Linear's forward rounded its weights again for each
 * chunk of rows. The products the float GEMM does not pack take its
 * own loops too, with no copies either (gemm.c, tg__gemm_unpacked_bf16):
 * the direct loops on panels and slivers from these packers, the few-row
 * loops rounding as they load. */
#include "tensor/gemm_bf16_pack.h"
#include "tensor/simd.h"

#if TG_SIMD_F32
#include "tensor/bf16_round_simd.h"
#include "tensor/transpose_simd.h"
#endif

#if TG_SIMD_F32
/* ---- the packers -------------------------------------------------------------
 * The engine runs where the float GEMM's row is AVX2's or AVX-512's (the
 * engine's level, gemm_bf16.c; float build only): 6-row panels of A,
 * slivers of B 16 or 32 columns wide. These are gemm.c's AVX2 packers
 * with each load of 8 values rounded (round8) or widened: the same
 * stores, so the same layout (gemm.c, pack_a and pack_b_sliver: panel p
 * of A holds op(A)(i0 + p*6 + r, pc + k) at [p*6*kc + k*6 + r], a sliver
 * of B op(B)(pc + k, jc + j0 + c) at [k*nr + c], zeros past the rows and
 * columns given) and slack (a_slack: the last column of A's panel writes
 * 8 values, 2 past). Each is built twice (always_inline, wide a
 * constant): for tg_real and for bf16 sources. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* 8 values from element i on, as packed. */
TG_AVX2 static ALWAYS_INLINE __m256 load8(bool wide, const float *f, const uint16_t *h, size_t i) {
    return wide ? widen8_packed(h + i) : round8(_mm256_loadu_ps(f + i));
}

/* Panels of 6 rows of op(A) = A (rows contiguous in k): 8 k at a time, the
 * 6 rows (and 2 of zeros) transposed in registers, one store per k. */
TG_AVX2 static ALWAYS_INLINE void pack_a_rows(bool wide, const gemm_job *j, int i0, int m, float *dst) {
    const int kc = j->kcur;
    for (int ip = 0; ip < m; ip += 6, dst += 6 * (size_t)kc) {
        const int mm = m - ip < 6 ? m - ip : 6;
        size_t src[6];
        for (int r = 0; r < 6; r++) src[r] = (size_t)(i0 + ip + (r < mm ? r : 0)) * j->lda + j->pc;
        int k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 v[8];
            for (int r = 0; r < 6; r++) v[r] = r < mm ? load8(wide, j->A, j->A16, src[r] + k) : _mm256_setzero_ps();
            v[6] = v[7] = _mm256_setzero_ps();
            transpose8_regs(v);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (size_t)(k + q) * 6, v[q]);
        }
        for (; k < kc; k++)
            for (int r = 0; r < 6; r++) dst[(size_t)k * 6 + r] = r < mm ? packed1(j->A, j->A16, src[r] + k) : 0;
    }
}
/* Panels of 6 rows of op(A) = A^T: a panel's 6 values of one k are
 * contiguous, one load of 8 (2 past the panel, so only where the block
 * has 8 more rows) and one store per k. */
TG_AVX2 static ALWAYS_INLINE void pack_a_cols(bool wide, const gemm_job *j, int i0, int m, float *dst) {
    const int kc = j->kcur;
    for (int ip = 0; ip < m; ip += 6, dst += 6 * (size_t)kc) {
        const int mm = m - ip < 6 ? m - ip : 6;
        const size_t src = (size_t)j->pc * j->lda + (size_t)(i0 + ip);
        if (ip + 8 <= m)
            for (int k = 0; k < kc; k++)
                _mm256_storeu_ps(dst + (size_t)k * 6, load8(wide, j->A, j->A16, src + (size_t)k * j->lda));
        else
            for (int k = 0; k < kc; k++)
                for (int r = 0; r < 6; r++)
                    dst[(size_t)k * 6 + r] = r < mm ? packed1(j->A, j->A16, src + (size_t)k * j->lda + r) : 0;
    }
}
TG_AVX2 void tg__fp32_pack_a(const gemm_job *j, int i0, int m, void *dst) {
    bool wide = j->A16 != NULL;
    if (j->trans_a)
        wide ? pack_a_cols(true, j, i0, m, dst) : pack_a_cols(false, j, i0, m, dst);
    else
        wide ? pack_a_rows(true, j, i0, m, dst) : pack_a_rows(false, j, i0, m, dst);
}

/* A sliver of op(B) = B: each k row's nr values are contiguous, 8 at a
 * time; a part-filled group of 8 (the last sliver) value by value. */
TG_AVX2 static ALWAYS_INLINE void pack_b_rows(bool wide, const gemm_job *j, int j0, int n, float *dst) {
    const int nr = j->eng->nr;
    for (int k = 0; k < j->kcur; k++) {
        const size_t src = (size_t)(j->pc + k) * j->ldb + (size_t)(j->jc + j0);
        float *d = dst + (size_t)k * nr;
        for (int c = 0; c < nr; c += 8) {
            if (c + 8 <= n)
                _mm256_storeu_ps(d + c, load8(wide, j->B, j->B16, src + c));
            else
                for (int q = c; q < c + 8; q++) d[q] = q < n ? packed1(j->B, j->B16, src + q) : 0;
        }
    }
}
/* A sliver of op(B) = B^T: its nr columns are nr rows of B, transposed
 * 8 x 8 at a time, so each k row of the sliver is nr / 8 stores. */
TG_AVX2 static ALWAYS_INLINE void pack_b_cols(bool wide, const gemm_job *j, int j0, int n, float *dst) {
    const int nr = j->eng->nr, kc = j->kcur;
    size_t src[32]; /* nr <= 32 */
    for (int c = 0; c < nr; c++) src[c] = (size_t)(j->jc + j0 + (c < n ? c : 0)) * j->ldb + (size_t)j->pc;
    int k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int h = 0; h < nr; h += 8) {
            __m256 v[8];
            for (int c = 0; c < 8; c++)
                v[c] = h + c < n ? load8(wide, j->B, j->B16, src[h + c] + k) : _mm256_setzero_ps();
            transpose8_regs(v);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (size_t)(k + q) * nr + h, v[q]);
        }
    for (; k < kc; k++)
        for (int c = 0; c < nr; c++) dst[(size_t)k * nr + c] = c < n ? packed1(j->B, j->B16, src[c] + k) : 0;
}
TG_AVX2 void tg__fp32_pack_b(const gemm_job *j, int j0, int n, void *dst) {
    bool wide = j->B16 != NULL;
    if (j->trans_b)
        wide ? pack_b_cols(true, j, j0, n, dst) : pack_b_cols(false, j, j0, n, dst);
    else
        wide ? pack_b_rows(true, j, j0, n, dst) : pack_b_rows(false, j, j0, n, dst);
}
#undef ALWAYS_INLINE
#endif

/* The row the float GEMM would run the product on, with these packers;
 * false where it takes the direct or few-row loops. */
static bool fp32_row(const gemm_job *job, gemm_engine *e) {
#if TG_SIMD_F32
    const gemm_engine *row = tg__gemm_float_row(job->trans_a, job->trans_b, job->M, job->N, job->K);
    if (!row || row->mr != 6 || row->nr % 8 || row->nr > 32 || tg_isa_level() < TG_ISA_AVX2) return false;
    *e = *row;
    e->kernel_a = NULL;   /* A read in place would be A unrounded: always packed (the same sums, gemm.c) */
    e->pack_b_run = NULL; /* the float rows have none */
    e->pack_a = tg__fp32_pack_a;
    e->pack_b = tg__fp32_pack_b;
    return true;
#else
    (void)job, (void)e;
    return false;
#endif
}

bool tg__gemm_bf16_fp32(const gemm_job *job, bool no_c) {
    gemm_engine e;
    if (!fp32_row(job, &e) || (no_c && !gemm_c_blocked(&e, job->K, job->beta, job->ep))) return false;
    return gemm_drive(&e, job);
}
