/* The short-sequence attention kernels' body (tg_k_attention_short_forward
 * and _backward, kernels.h), written once on vectors and included by
 * kernels_attention.c once per ISA, like a template: it defines
 *   SV(name)            the name with the ISA's suffix
 *   SV_FN, SV_ENTRY     static inline (always) / static, with the ISA's target
 *   VEC, VL             the vector type and its lanes (1: the portable twin, scalars)
 *   MM_NV               vectors per row in mm4's accumulators (a multiple of AL / VL)
 *   V_LOAD(p) V_STORE(p, v) V_ZERO() V_SET1(x) V_ADD V_SUB V_MUL V_MAX
 *   V_FMA(a, b, c)      a b + c
 *   V_EXP(v)            exp of lanes <= 0 (the library's expf: exp_simd.h; libm's exp)
 *   V_BELOW_OR(v, n, x) lane l: v when l < n, else x (n may be <= 0 or >= VL)
 *   V_ROUND(v)          each lane rounded to bf16 (tg__bf16_round_daz)
 *   V_HSUM(v) V_HMAX(v) the lanes' sum (in a fixed order) and maximum
 *   V_TRANSPOSE(src, rs, rows, cols, dst, ld)
 *                       dst[c, i] = src[i, c] for c < min(cols, VL), i < VL (rows
 *                       rs and ld apart; 0 for i >= rows): one VL x VL tile
 * and then includes this file, which undefines them at its end (SV_KEEP_VEC
 * defined: all but SV, SV_FN, SV_ENTRY and V_ROUND, for a copy that
 * changes only those). Rows of
 * scores are padded to KP = AL-lane multiples with zeros; every product is
 * mm4. No include guard: one copy per ISA. */

/* C[r, 0..nv VL) = alpha sum_{t < kn} A_r[t at] B[t, 0..nv VL) for the
 * four rows r whose A elements start at a[r] (at apart: 1 along a row of
 * A, its row length down a column, for A^T); B's rows ldb apart. Each lane
 * sums over t in order. nv (<= MM_NV) is a constant where it is called. */
SV_FN void SV(mm4_cols)(const tg_real *const a[4], int64_t at, int kn, const tg_real *B, int64_t ldb, tg_real alpha,
                        tg_real *C, int ldc, const int nv) {
    VEC c0[MM_NV], c1[MM_NV], c2[MM_NV], c3[MM_NV];
    for (int u = 0; u < nv; u++) c0[u] = c1[u] = c2[u] = c3[u] = V_ZERO();
    for (int t = 0; t < kn; t++) {
        const tg_real *b = B + t * ldb;
        VEC x0 = V_SET1(a[0][t * at]), x1 = V_SET1(a[1][t * at]);
        VEC x2 = V_SET1(a[2][t * at]), x3 = V_SET1(a[3][t * at]);
        for (int u = 0; u < nv; u++) {
            VEC bv = V_LOAD(b + u * VL);
            c0[u] = V_FMA(x0, bv, c0[u]);
            c1[u] = V_FMA(x1, bv, c1[u]);
            c2[u] = V_FMA(x2, bv, c2[u]);
            c3[u] = V_FMA(x3, bv, c3[u]);
        }
    }
    VEC va = V_SET1(alpha);
    for (int u = 0; u < nv; u++) {
        V_STORE(C + u * VL, V_MUL(c0[u], va));
        V_STORE(C + ldc + u * VL, V_MUL(c1[u], va));
        V_STORE(C + 2 * ldc + u * VL, V_MUL(c2[u], va));
        V_STORE(C + 3 * ldc + u * VL, V_MUL(c3[u], va));
    }
}

/* The same for C[r, 0..np), np a multiple of AL: MM_NV vectors at a time
 * (as many accumulators as the registers hold), then AL lanes. */
SV_FN void SV(mm4)(const tg_real *const a[4], int64_t at, int kn, const tg_real *B, int64_t ldb, int np, tg_real alpha,
                   tg_real *C, int ldc) {
    int jj = 0;
    for (; jj + MM_NV * VL <= np; jj += MM_NV * VL) SV(mm4_cols)(a, at, kn, B + jj, ldb, alpha, C + jj, ldc, MM_NV);
    for (; jj < np; jj += AL) SV(mm4_cols)(a, at, kn, B + jj, ldb, alpha, C + jj, ldc, AL / VL);
}

/* Rows r < nr of s (KP scores each, rows KP apart) -> their weights, in
 * place: the masked softmax over the first n = min(lim[r], K) keys (lim 0:
 * no visible key, uniform 1/K as masked_softmax makes it), 0 on the other
 * lanes; the weights go to P when not NULL, and with dropout factors z the
 * rows become P o z (rounded to bf16 when rnd: the product's operand). P
 * and z: rows KP apart. The four rows go in step, so that their reductions
 * overlap. */
SV_FN void SV(softmax_rows)(tg_real *s, int nr, int KP, int K, const int *lim, tg_real *P, const tg_real *z, bool rnd) {
    int n[4];
    VEC mx[4], sum[4], m[4], inv[4];
    for (int r = 0; r < 4; r++) {
        n[r] = r >= nr ? 0 : lim[r] == 0 || lim[r] > K ? K : lim[r];
        mx[r] = V_SET1(-INFINITY), sum[r] = V_ZERO();
    }
    for (int j = 0; j < KP; j += VL)
        for (int r = 0; r < nr; r++) mx[r] = V_MAX(mx[r], V_BELOW_OR(V_LOAD(s + r * KP + j), n[r] - j, -INFINITY));
    for (int r = 0; r < nr; r++) m[r] = V_SET1(lim[r] == 0 ? 0 : V_HMAX(mx[r]));
    for (int j = 0; j < KP; j += VL)
        for (int r = 0; r < nr; r++) {
            tg_real *sr = s + r * KP + j;
            VEC x = lim[r] == 0 ? V_ZERO() : V_SUB(V_LOAD(sr), m[r]); /* lim 0: every score -1e6 */
            x = V_BELOW_OR(V_EXP(x), n[r] - j, 0);
            sum[r] = V_ADD(sum[r], x);
            V_STORE(sr, x);
        }
    for (int r = 0; r < nr; r++) inv[r] = V_SET1(1 / V_HSUM(sum[r]));
    for (int j = 0; j < KP; j += VL)
        for (int r = 0; r < nr; r++) {
            size_t o = (size_t)r * KP + j;
            VEC p = V_MUL(V_LOAD(s + o), inv[r]);
            if (P) V_STORE(P + o, p);
            if (z) p = V_MUL(p, V_LOAD(z + o));
            V_STORE(s + o, rnd ? V_ROUND(p) : p);
        }
}

/* The transpose of rows x cols of src (rows rs apart): dst[c, i] =
 * src[i, c], rows ld apart, zeros past rows (ld a multiple of AL). */
SV_FN void SV(pack_transposed)(const tg_real *src, int64_t rs, int rows, int cols, tg_real *dst, int ld) {
    for (int c = 0; c < cols; c += VL)
        for (int i = 0; i < ld; i += VL)
            V_TRANSPOSE(src + i * rs + c, rs, rows - i, cols - c, dst + (size_t)c * ld + i, ld);
}

/* dst[c] = src[c] (PUT_STORE), dst[c] + src[c] (PUT_ADD), or 0 + src[c]
 * (PUT_FRESH: the bits of adding to a zeroed dst, which is not read) for
 * c < n. */
#ifndef TG_ATT_PUT_HOW /* this body is included once per ISA */
#define TG_ATT_PUT_HOW
enum { PUT_STORE, PUT_ADD, PUT_FRESH };
#endif
SV_FN void SV(put_row)(tg_real *dst, const tg_real *src, int n, int how) {
    int c = 0;
    for (; c + VL <= n; c += VL)
        V_STORE(dst + c, how == PUT_STORE ? V_LOAD(src + c)
                                          : V_ADD(how == PUT_ADD ? V_LOAD(dst + c) : V_ZERO(), V_LOAD(src + c)));
    for (; c < n; c++) dst[c] = how == PUT_STORE ? src[c] : (how == PUT_ADD ? dst[c] : 0) + src[c];
}

SV_ENTRY void SV(short_forward)(const tg_attn_entry *e, const tg_real *zf, tg_real *out, tg_real *P, tg_real *scratch) {
    int Q = e->Q, K = e->K, d = e->d, dv = e->dv, KP = pad_lanes(K), VP = pad_lanes(dv);
    tg_real *kt = scratch, *vp = kt + (size_t)d * KP, *sb = vp + (size_t)K * VP, *ob = sb + 4 * (size_t)KP;
    SV(pack_transposed)(e->k, e->ks, K, d, kt, KP); /* k^T: d x KP */
    const tg_real *vb = e->v;                       /* v: K x VP, in place when dv is a multiple of AL */
    int64_t ldv = e->vs;
    if (dv != VP) pack_rows(e->v, e->vs, K, dv, vp, VP), vb = vp, ldv = VP;
    for (int i0 = 0; i0 < Q; i0 += 4) {
        int nr = Q - i0 < 4 ? Q - i0 : 4;
        const tg_real *a[4];
        rows4(e->q, e->qs, i0, Q, a);
        SV(mm4)(a, 1, d, kt, KP, KP, e->scale, sb, KP); /* S = scale q k^T */
        size_t i = (size_t)i0 * KP;
        SV(softmax_rows)(sb, nr, KP, K, e->lim + i0, P ? P + i : NULL, zf ? zf + i : NULL, e->bf16);
        rows4(sb, KP, 0, nr, a);
        SV(mm4)(a, 1, K, vb, ldv, VP, 1, ob, VP); /* out = (P o Z/(1-p)) v */
        for (int r = 0; r < nr; r++) SV(put_row)(out + (i0 + r) * e->os, ob + (size_t)r * VP, dv, PUT_STORE);
    }
}

/* P o Z/(1-p) at offset o (no z: P), unrounded. */
SV_FN VEC SV(pd_at)(const tg_real *P, const tg_real *z, size_t o) {
    return z ? V_MUL(V_LOAD(P + o), V_LOAD(z + o)) : V_LOAD(P + o);
}

/* Rows r < nr of dP (KP apart) -> dS = P o (dP o Z/(1-p) - D) in place,
 * D_r = sum_j (P o Z/(1-p))_rj dP_rj (= dO_r . O_r: masked_softmax's
 * backward after dropout's); 0 for a row that sees no key (constant
 * scores), and past K (P is 0 there); rounded to bf16 when rnd (the
 * operand of dS k and dS^T q). P and z as the forward's. */
SV_FN void SV(ds_rows)(tg_real *dp, int nr, int KP, const tg_real *P, const tg_real *z, const int *lim, bool rnd) {
    VEC acc[4];
    for (int r = 0; r < 4; r++) acc[r] = V_ZERO();
    for (int j = 0; j < KP; j += VL)
        for (int r = 0; r < nr; r++)
            acc[r] = V_FMA(SV(pd_at)(P, z, (size_t)r * KP + j), V_LOAD(dp + r * KP + j), acc[r]);
    for (int r = 0; r < nr; r++) {
        VEC D = V_SET1(V_HSUM(acc[r])), keep = V_SET1(lim[r] == 0 ? 0 : 1);
        for (int j = 0; j < KP; j += VL) {
            size_t o = (size_t)r * KP + j;
            VEC g = V_MUL(V_SUB(V_MUL(SV(pd_at)(P, z, o), V_LOAD(dp + o)), V_MUL(V_LOAD(P + o), D)), keep);
            V_STORE(dp + o, rnd ? V_ROUND(g) : g);
        }
    }
}

SV_ENTRY void SV(short_backward)(const tg_attn_entry *e, const tg_real *P, const tg_real *zf, const tg_real *dO,
                                 tg_real *gq, tg_real *gk, tg_real *gv, tg_real *scratch) {
    int Q = e->Q, K = e->K, d = e->d, dv = e->dv, KP = pad_lanes(K), DP = pad_lanes(d), VP = pad_lanes(dv);
    int64_t os = e->os, gqs = e->gqs ? e->gqs : e->qs, gks = e->gks ? e->gks : e->ks, gvs = e->gvs ? e->gvs : e->vs;
    tg_real *vt = scratch, *kp = vt + (size_t)dv * KP, *qp = kp + (size_t)K * DP, *dop = qp + (size_t)Q * DP;
    tg_real *dS = dop + (size_t)Q * VP, *acc = dS + (size_t)(Q + 3) * KP, *pz = acc + 4 * (size_t)(DP > VP ? DP : VP);
    const tg_real *Pd = P; /* P o Z/(1-p), rounded under bf16: dV's operand */
    if (zf || e->bf16) {
        for (size_t j = 0; j < (size_t)Q * KP; j += VL) {
            VEC p = SV(pd_at)(P, zf, j);
            V_STORE(pz + j, e->bf16 ? V_ROUND(p) : p);
        }
        Pd = pz;
    }
    const tg_real *a[4];
    if (gq || gk) {
        SV(pack_transposed)(e->v, e->vs, K, dv, vt, KP); /* v^T: dv x KP */
        for (int i0 = 0; i0 < Q; i0 += 4) {
            int nr = Q - i0 < 4 ? Q - i0 : 4;
            rows4(dO, os, i0, Q, a);
            SV(mm4)(a, 1, dv, vt, KP, KP, 1, dS + (size_t)i0 * KP, KP); /* dP = dO v^T */
            size_t o = (size_t)i0 * KP;
            SV(ds_rows)(dS + o, nr, KP, P + o, zf ? zf + o : NULL, e->lim + i0, e->bf16);
        }
    }
    if (gq) { /* dQ = scale dS k */
        const tg_real *kb = e->k;
        int64_t ldk = e->ks;
        if (d != DP) pack_rows(e->k, e->ks, K, d, kp, DP), kb = kp, ldk = DP;
        for (int i0 = 0; i0 < Q; i0 += 4) {
            int nr = Q - i0 < 4 ? Q - i0 : 4;
            rows4(dS, KP, i0, Q, a);
            SV(mm4)(a, 1, K, kb, ldk, DP, e->scale, acc, DP);
            for (int r = 0; r < nr; r++)
                SV(put_row)(gq + (i0 + r) * gqs, acc + (size_t)r * DP, d, e->fresh_gq ? PUT_FRESH : PUT_ADD);
        }
    }
    if (gk) { /* dK = scale dS^T q */
        const tg_real *qb = e->q;
        int64_t ldq = e->qs;
        if (d != DP) pack_rows(e->q, e->qs, Q, d, qp, DP), qb = qp, ldq = DP;
        for (int j0 = 0; j0 < K; j0 += 4) {
            int nr = K - j0 < 4 ? K - j0 : 4;
            rows4(dS, 1, j0, K, a);
            SV(mm4)(a, KP, Q, qb, ldq, DP, e->scale, acc, DP);
            for (int r = 0; r < nr; r++)
                SV(put_row)(gk + (j0 + r) * gks, acc + (size_t)r * DP, d, e->fresh_gk ? PUT_FRESH : PUT_ADD);
        }
    }
    if (gv) { /* dV = (P o Z/(1-p))^T dO */
        const tg_real *ob = dO;
        int64_t ldo = os;
        if (dv != VP) pack_rows(dO, os, Q, dv, dop, VP), ob = dop, ldo = VP;
        for (int j0 = 0; j0 < K; j0 += 4) {
            int nr = K - j0 < 4 ? K - j0 : 4;
            rows4(Pd, 1, j0, K, a);
            SV(mm4)(a, KP, Q, ob, ldo, VP, 1, acc, VP);
            for (int r = 0; r < nr; r++)
                SV(put_row)(gv + (j0 + r) * gvs, acc + (size_t)r * VP, dv, e->fresh_gv ? PUT_FRESH : PUT_ADD);
        }
    }
}

#undef SV
#undef SV_FN
#undef SV_ENTRY
#undef V_ROUND
#ifndef SV_KEEP_VEC /* the next copy keeps the vector macros: only SV, SV_FN, SV_ENTRY and V_ROUND change */
#undef VEC
#undef VL
#undef MM_NV
#undef V_LOAD
#undef V_STORE
#undef V_ZERO
#undef V_SET1
#undef V_ADD
#undef V_SUB
#undef V_MUL
#undef V_FMA
#undef V_MAX
#undef V_EXP
#undef V_BELOW_OR
#undef V_HSUM
#undef V_HMAX
#undef V_TRANSPOSE
#endif
