/* The two 16-bit floats tgrad reads, writes and multiplies, and their
 * conversions to and from float (internal: the bf16 GEMM packs with them,
 * src/io/safetensors.c stores with them).
 *
 *   bfloat16  1 sign, 8 exponent, 7 fraction bits: the top half of a float,
 *             so the same range (to 3.4e38) with 8 significant bits.
 *   float16   1 sign, 5 exponent (bias 15), 10 fraction bits (IEEE 754
 *             binary16): to 65504, subnormals down to 2^-24.
 *
 * float -> 16 bits rounds to nearest, ties to even, as PyTorch's
 * c10::BFloat16 / c10::Half conversions do; subnormals are kept (the GEMM
 * flushes them, as the hardware conversion does: tg__bf16_from_bits_daz).
 * A NaN stays a NaN: its top fraction bits are kept and the quiet
 * bit set, so truncation can never turn it into an infinity. 16 bits ->
 * float is exact. */
#ifndef TG_TENSOR_HALF_H
#define TG_TENSOR_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tg__float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float tg__bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 = float bits >> 16 after adding half an ulp of the result less one,
 * plus the result's lowest bit: x + 0x7FFF + ((x >> 16) & 1). A tie then
 * carries only when the kept part is odd (ties to even); an overflow carries
 * into the exponent and gives the infinity of RNE. A NaN is made quiet
 * instead. Both results are computed and one selected, without a branch,
 * so that a loop of it vectorises (tg_k_to_bf16). */
static inline uint16_t tg__bf16_from_bits(uint32_t x) {
    uint32_t rne = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x0040u;
    return (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rne);
}
static inline uint16_t tg__bf16_from_float(float f) { return tg__bf16_from_bits(tg__float_bits(f)); }
static inline float tg__bf16_to_float(uint16_t h) { return tg__bits_float((uint32_t)h << 16); }
static inline float tg__bf16_round(float f) { return tg__bf16_to_float(tg__bf16_from_float(f)); }

/* The bf16 GEMM's rounding (gemm_bf16.c): the same, except that a float
 * subnormal (|f| < 2^-126) becomes a zero of its sign, which is what
 * vcvtneps2bf16 does (Intel SDM: "input denormals are treated as zero";
 * checked bit for bit on this CPU). Every path of the GEMM rounds this way,
 * so they all multiply the same operands; files keep subnormals (above). */
static inline uint16_t tg__bf16_from_bits_daz(uint32_t x) {
    if ((x & 0x7F800000u) == 0) return (uint16_t)((x >> 16) & 0x8000u);
    return tg__bf16_from_bits(x);
}
/* f as a bf16 product sees it: rounded as the GEMM packs, and back. */
static inline float tg__bf16_round_daz(float f) { return tg__bf16_to_float(tg__bf16_from_bits_daz(tg__float_bits(f))); }

/* float16 from float, ties to even. Normal results: the exponent rebiased
 * (127 -> 15: subtract 112 << 23) and the fraction rounded at bit 13 as for
 * bf16 (+ 0xFFF + lsb). |f| >= 65520 (halfway past 65504, the largest half)
 * is infinite. Below 2^-14 the result is a subnormal m * 2^-24, m rounded
 * from the float's significand shifted right. */
static inline uint16_t tg__f16_from_float(float f) {
    uint32_t x = tg__float_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu)); /* NaN: quiet */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);                        /* 65520 and up, inf */
    if (ax >= 0x38800000u) {                                                         /* 2^-14 and up: normal */
        uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u) return (uint16_t)sign; /* at most 2^-25, half the smallest subnormal: a tie to 0 */
    /* |f| = sig * 2^(e - 150) with sig = 1.fraction << 23; in units of 2^-24
     * that is sig >> (126 - e), rounded to nearest even (shift 14..24). */
    uint32_t e = ax >> 23, sig = (ax & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
    uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q == 0x400 is the smallest normal: still right */
    return (uint16_t)(sign | q);
}

static inline float tg__f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) return tg__bits_float(sign | 0x7F800000u | (m << 13)); /* inf, NaN */
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return tg__bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
