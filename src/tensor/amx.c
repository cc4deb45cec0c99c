/* AMX tiles on Linux: whether they can run here (tg_cpu_has_amx, simd.h),
 * the per-thread tile configuration, the hardware micro-kernel of the bf16
 * GEMM's AMX engine, and its rate probe (gemm_bf16.c chooses by rate).
 *
 * Three things must hold before a tile instruction runs (Intel SDM vol. 1,
 * 13.14 and 3.2.6; Linux Documentation/arch/x86/xstate.rst):
 *   - CPUID.(EAX=7,ECX=0):EDX bit 24 (AMX-TILE) and bit 22 (AMX-BF16), and
 *     the AVX-512 BF16 the packers use (simd.c);
 *   - the OS enabled the tile state: CPUID.1:ECX.OSXSAVE, and XCR0 bits 17
 *     (XTILECFG) and 18 (XTILEDATA) set;
 *   - the process has Linux's permission: arch_prctl(ARCH_REQ_XCOMP_PERM,
 *     XFEATURE_XTILEDATA) (Linux 5.16 on), asked once per process
 *     (pthread_once: the answer covers every thread, present and future).
 * Without the permission the first tile load raises SIGILL, so nothing
 * runs a tile before tg_cpu_has_amx() said yes.
 *
 * Each thread that runs the kernel loads its tile configuration
 * (ldtilecfg; the tiles are per-thread state) and releases the tiles
 * (tilerelease) when its share of a product is done, so the kernel need
 * not save 8 KB of tile data on every context switch of a thread that is
 * no longer using them. */
#define _DEFAULT_SOURCE /* syscall() */
#include "tensor/amx.h"

#include <pthread.h>
#include <stdio.h>

#include "tensor/simd.h"

#if TG_X86 && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static bool g_amx;
static const char *g_why = "not asked yet";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!tg_cpu_has_avx512_bf16()) {
        g_why = "the CPU has no AVX-512 BF16";
        return;
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
        g_why = "the CPU has no AMX-TILE and AMX-BF16";
        return;
    }
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || (xgetbv0() & (3ull << 17)) != (3ull << 17)) {
        g_why = "the OS has not enabled the tile state (XCR0)";
        return;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        g_why = "the kernel refused the tile permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return;
    }
    g_amx = true;
    g_why = NULL;
}

bool tg_cpu_has_amx(void) {
    pthread_once(&g_once, amx_probe);
    return g_amx;
}

const char *tg__amx_why_not(void) {
    pthread_once(&g_once, amx_probe);
    return g_why;
}

/* Palette 1: tiles 0-3 the 2 x 2 tiles of C (16 rows of 16 floats), 4-5
 * two 16-row tiles of A (16 bf16 pairs a row), 6-7 two of B (16 rows of k
 * pairs, 16 columns' pairs a row). Every tile is 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* A constant, not a local filled in: GCC's _tile_loadconfig tells the
 * compiler that it reads 8 bytes, so stores to the rest of a local
 * configuration could be dropped as dead. */
static _Alignas(64) const tile_config CONFIG = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

TG_AMX void tg__amx_begin(void) { _tile_loadconfig(&CONFIG); }

TG_AMX void tg__amx_end(void) { _tile_release(); }

/* The 32 x 32 tile of C of an A panel (32 rows, kq chunks of 16 pairs,
 * row r of chunk q at a + r*a_rs + q*a_cs: a packed panel has a_rs 32 and
 * a_cs 1024, an untransposed bf16 A read in place its lda and 32) and a B
 * sliver (pair p of column j at b[p*64 + 2j], kq*16 pairs), summed from
 * zero (from_c: from t's values) into t[r*ldt + j]. A tile of A is 16 rows
 * of 64 bytes a_rs * 2 bytes apart, whichever the source: tileloadd takes
 * the stride, so an A stored as bf16 needs no packing (the tiles' rows
 * need not be contiguous, as oneDNN's brgemm reads them).
 *
 * stream_b: B's tiles are loaded with tileloaddt1 (_tile_stream_loadd:
 * the T1 hint, data not to be kept close), A's with tileloadd. On the
 * driver's loops a panel of A (32 KB at 512 deep) serves every sliver of
 * the panel of B, and each sliver passes once per panel of A; where the
 * slivers and the panel do not fit the L1 together, plain loads of the
 * slivers only pushed the panel out (between two uses of a line of A, 32 +
 * 32 KB of lines went through the 48 KB L1), so A came from L2 as well as
 * B (bench/measured.md, AMX, session 4). Where they fit (a short K, a
 * narrow B) plain loads keep both in L1; the caller says which.
 *
 * The next chunk's tiles are loaded as soon as the tile register they go
 * to has been read by its last tdpbf16ps of this chunk, so each load has
 * the remaining products of the chunk to arrive in (a few per cent at
 * most, within the machine's noise). No software prefetch: asking for the
 * next chunks' lines (prefetcht0) was no faster with plain loads and
 * slower with the T1 hint (bench/measured.md, AMX). The order of the
 * tdpbf16ps on each accumulator, and so every bit of the result, is that
 * of one chunk after another. */
TG_AMX void tg__amx_tile(int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, float *t, int ldt,
                         bool from_c, bool stream_b) {
#define LOAD_B(tile, p)                       \
    do {                                      \
        if (stream_b)                         \
            _tile_stream_loadd(tile, p, 128); \
        else                                  \
            _tile_loadd(tile, p, 128);        \
    } while (0)
    const size_t ld = (size_t)ldt, a_stride = a_rs * sizeof(uint16_t);
    const uint16_t *a_lo = a + 16 * a_rs; /* rows 16-31 */
    if (from_c) {
        _tile_loadd(0, t, ld * 4);
        _tile_loadd(1, t + 16, ld * 4);
        _tile_loadd(2, t + 16 * ld, ld * 4);
        _tile_loadd(3, t + 16 * ld + 16, ld * 4);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    _tile_loadd(4, a, a_stride);
    LOAD_B(6, b);
    LOAD_B(7, b + 32);
    _tile_loadd(5, a_lo, a_stride);
    for (int q = 1; q < kq; q++) { /* chunk q - 1's products, chunk q's loads between them */
        const size_t aq = (size_t)q * a_cs;
        const uint16_t *bq = b + (size_t)q * 1024;
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(4, a + aq, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        LOAD_B(6, bq);
        _tile_dpbf16ps(3, 5, 7);
        LOAD_B(7, bq + 32);
        _tile_loadd(5, a_lo + aq, a_stride);
    }
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    _tile_stored(0, t, ld * 4);
    _tile_stored(1, t + 16, ld * 4);
    _tile_stored(2, t + 16 * ld, ld * 4);
    _tile_stored(3, t + 16 * ld + 16, ld * 4);
#undef LOAD_B
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Four independent chains of tdpbf16ps on tiles already in registers, each
 * instruction 16 x 16 x 32 multiply-adds (16,384 flops): the engine's rate
 * with no memory in the way, as the FMA and vdpbf16ps probes (peak.c). */
TG_AMX double tg__amx_rate(double seconds) {
    if (!tg_cpu_has_amx()) return 0;
    static const uint16_t zeros[512];
    tg__amx_begin();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    long iters = 0;
    double t0 = now_s(), t;
    do {
        for (int r = 0; r < 256; r++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        iters += 256;
        t = now_s() - t0;
    } while (t < seconds);
    tg__amx_end();
    return (double)iters * 4 * 16384 / t * 1e-9;
}
#else
bool tg_cpu_has_amx(void) { return false; }
const char *tg__amx_why_not(void) { return "not an x86-64 Linux build"; }
void tg__amx_begin(void) {}
void tg__amx_end(void) {}
void tg__amx_tile(int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, float *t, int ldt,
                  bool from_c, bool stream_b) {
    (void)kq, (void)a, (void)a_rs, (void)a_cs, (void)b, (void)t, (void)ldt, (void)from_c, (void)stream_b;
}
double tg__amx_rate(double seconds) {
    (void)seconds;
    return 0;
}
#endif
