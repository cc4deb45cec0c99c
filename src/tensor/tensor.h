/** @file
 * tgrad tensor layer: the tensor struct, shapes, memory scopes, errors, RNG
 * and raw kernels. Nothing here knows about autograd: a program can use this
 * layer alone as a small numeric library.
 *
 * Memory has two lifetimes (see README, "Design"):
 *   - persistent: created by a creation function (tg_zeros, tg_randn, ...)
 *     while no scope is open; lives until tg_free().
 *   - per step: everything created while a scope is open, and every op
 *     result, lives in a bump arena released at once by tg_scope_end().
 */
#ifndef TG_TENSOR_H
#define TG_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** One typedef switches the whole library between float and double
 * (make DOUBLE=1). Gradient checks run in the double build. */
#ifdef TG_DOUBLE
typedef double tg_real;
#define TG_REAL_DTYPE "F64"
#else
typedef float tg_real;
#define TG_REAL_DTYPE "F32"
#endif

/** Float and double are two libraries (libtgrad, libtgrad-double). Every file
 * that includes this header refers to a symbol that only the library of its
 * own flavour defines, so a program compiled with one flavour's headers and
 * linked with the other's library fails to link, naming the flavour,
 * instead of silently reading floats as doubles. */
#ifdef TG_DOUBLE
#define TG_FLAVOUR tg_flavour_double_needs_libtgrad_double
#else
#define TG_FLAVOUR tg_flavour_float_needs_libtgrad
#endif
extern const int TG_FLAVOUR;
#if defined(__GNUC__)
__attribute__((used)) static const int *const tg_flavour_ref_ = &TG_FLAVOUR;
#endif

/** The libm function at tg_real's precision: TG_M(exp)(x) is expf in the
 * float build, where plain exp would widen to double and run 2x slower. */
#ifdef TG_DOUBLE
#define TG_M(fn) fn
#else
#define TG_M(fn) fn##f
#endif

/** Threads. tgrad runs its loops on a thread pool of its own, whose idle
 * threads spin a few microseconds and then sleep (src/tensor/parallel.c).
 * Default: TG_NUM_THREADS, else OMP_NUM_THREADS, else every CPU the process
 * may use, and then, like OpenMP's OMP_DYNAMIC, only the cores that other
 * programs' threads leave free (checked every 10 ms), so a program at the
 * default is as fast as at one thread also when it shares the cores.
 * tg_set_num_threads(n) (n <= 0: the default) caps n at the CPUs available,
 * as more threads than cores only slow the work down, keeps an explicit n
 * whatever the load, and returns the number in use. Results never depend on
 * the thread count.
 *
 * Thread safety. tg_set_num_threads and tg_get_num_threads may be called
 * from any thread at any time: a change waits for the parallel job running
 * (if any) and applies to the next one. Everything else (ops, scopes and
 * the arena, grad mode, precision, the last error, a module or an RNG) is
 * process-wide state for one calling thread at a time: a program that
 * calls tgrad from several threads serialises those calls itself. The
 * library's own threads are its business (parallel jobs take turns). */
int tg_set_num_threads(int n);

/** The single-precision FMA peak of one core in GFLOP/s, measured: the best
 * of 10 short trials of chained FMAs at each vector width the CPU has
 * (about `seconds` in all; noise only slows a trial, and the best seen in
 * the process is kept). Some cores run 512-bit FMAs at twice the 256-bit
 * rate, others at the same rate: both are reported, gflops is the better.
 * NaN where the CPU has no FMA unit (or is not x86). */
typedef struct {
    double gflops, gflops256, gflops512;
} tg_fma_peak;
tg_fma_peak tg_fma_peak_measure(double seconds);
/** The bfloat16 dot-product peak of one core in GFLOP/s (vdpbf16ps: 32
 * multiply-adds into 16 float sums an instruction), measured the same way
 * (the best of 10 trials, about `seconds` in all; the best seen in the
 * process is kept): what the bf16 GEMM's share is of. NaN where the CPU
 * has no AVX-512 BF16. */
double tg_bf16_peak_measure(double seconds);
int tg_get_num_threads(void);
/** The instruction set the kernels use: "portable", "avx2", "avx512" or
 * "avx512_bf16" (AVX-512 with the bfloat16 dot product), the widest the CPU
 * has, capped by the environment variable TG_ISA (one of those names, read
 * at the first kernel, as PyTorch's ATEN_CPU_CAPABILITY): TG_ISA=portable
 * runs the plain C loops everywhere. Results are the same at every level up
 * to float summation order. */
const char *tg_isa_name(void);

#define TG_MAX_DIMS 6

/** Elementwise and row loops over fewer elements than this run on one
 * thread: waking a second thread (5-50 us with a passive OpenMP wait
 * policy) costs more than it saves on a few hundred kilobytes. */
#define TG_PAR_MIN 32768

/** TG_SHAPE(2, 3) expands to the (ndim, shape) pair most functions take. */
#define TG_SHAPE(...) \
    (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]) { __VA_ARGS__ }

typedef struct tg_node tg_node;
typedef struct tg_tensor tg_tensor;

/** A contiguous row-major tensor. */
struct tg_tensor {
    uint32_t magic; /**< TG_MAGIC while alive; lets backward spot stale pointers */
    int ndim;
    int shape[TG_MAX_DIMS];
    int64_t size; /**< number of elements */
    tg_real *data;
    tg_tensor *grad; /**< same shape; NULL until a backward reaches it */
    tg_node *node;   /**< the op that made it; NULL for leaves (autograd layer) */
    bool requires_grad;
    bool persistent;     /**< malloc'd: lives until tg_free() */
    bool owns_data;      /**< false for views (reshape) */
    uint32_t grad_epoch; /**< backward pass that last reset a non-leaf grad */
    uint32_t uses;       /**< recorded ops that take it as an input (autograd layer) */
};
#define TG_MAGIC 0x7467726du /**< "tgrm" */

/** errors
 * A function given bad input returns NULL (or -1) and records one message
 * naming the function and the shapes. A function given a NULL input returns
 * NULL and keeps the message already recorded, so a chain is checked once.
 * A message holds up to 13311 bytes (two paths of PATH_MAX and a reason),
 * so none is cut for a path the system accepts. One message for the
 * process, not one per thread. */
const char *tg_last_error(void); /**< NULL when none */
void tg_clear_error(void);
void tg_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/** Records "<op>: NULL input" unless a message is already recorded. */
void tg_error_null(const char *op);
/** Writes "(2,3,4)" into buf (at least 64 bytes) and returns buf. */
const char *tg_shape_str(char *buf, int ndim, const int *shape);
const char *tg_tshape(char *buf, const tg_tensor *t); /**< same, of a tensor */

/* ---- memory scopes -------------------------------------------------------- */
/** Returns 0, or -1 with an error recorded when 64 scopes are already open;
 * call tg_scope_end for a failed begin too: that end closes nothing, so
 * begins and ends stay paired and the outer scopes stay open. */
int tg_scope_begin(void);
void tg_scope_end(void);  /**< releases everything made since the matching begin, O(1) */
int tg_scope_depth(void); /**< 0 when no scope is open */

typedef struct {
    size_t arena_in_use;     /**< bytes handed out by the arena now */
    size_t arena_peak;       /**< highest arena_in_use so far */
    size_t arena_reserved;   /**< bytes of arena blocks held from the system */
    size_t persistent_bytes; /**< bytes held by persistent tensors */
    uint64_t system_allocs;  /**< calls to malloc/calloc/realloc made by tgrad */
} tg_memory_stats;
tg_memory_stats tg_memory(void);

/** Arena allocation (64-byte aligned). Outside any scope it comes from the
 * root level, released only by tg_release_all(). Never returns NULL unless the
 * system is out of memory (then it records an error). */
void *tg_arena_alloc(size_t bytes);
/** True while ptr points into memory a scope has not yet released. */
bool tg_arena_live(const void *ptr);
/** Counted system allocation, for persistent storage (optimizer state, ...). */
void *tg_sys_alloc(size_t bytes);
void *tg_sys_calloc(size_t n, size_t size);
void tg_sys_free(void *p);
/** Frees every arena block (at program end; all scopes must be closed). */
void tg_release_all(void);

/** creation
 * Inside a scope these allocate from the arena, outside they are persistent. */
tg_tensor *tg_empty(int ndim, const int *shape); /**< uninitialised values */
tg_tensor *tg_zeros(int ndim, const int *shape);
tg_tensor *tg_ones(int ndim, const int *shape);
tg_tensor *tg_full(int ndim, const int *shape, tg_real value);
tg_tensor *tg_arange(tg_real start, tg_real stop, tg_real step); /**< 1-D, [start, stop) */
tg_tensor *tg_from_array(int ndim, const int *shape, const tg_real *values);
tg_tensor *tg_zeros_like(const tg_tensor *t);
tg_tensor *tg_clone(const tg_tensor *t); /**< copy of the values, no graph */
/** Always persistent / always arena, whatever the scope. */
tg_tensor *tg_empty_persistent(int ndim, const int *shape);
tg_tensor *tg_empty_arena(int ndim, const int *shape);
/** A tensor header over the same data with another shape (no copy). */
tg_tensor *tg_view(const tg_tensor *t, int ndim, const int *shape);
/** Frees a persistent tensor (and its grad); does nothing to arena tensors or NULL. */
void tg_free(tg_tensor *t);

/** counter-based random numbers
 * The value drawn for element i is a pure function of (seed, stream, counter+i),
 * so results do not depend on how work is split between threads. */
typedef struct {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter; /**< advanced by every draw */
} tg_rng;
/** The hash behind the generator, inline for hot loops (dropout): a key per
 * (seed, stream), then one SplitMix64 step per index, i.e. the output of
 * SplitMix64 started at the key (Steele, Lea & Flood, OOPSLA 2014). */
static inline uint64_t tg_rng_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline uint64_t tg_rng_key(uint64_t seed, uint64_t stream) {
    return tg_rng_mix(seed * 0x9e3779b97f4a7c15ULL + tg_rng_mix(stream + 0x632be59bd9b4e019ULL));
}
static inline uint64_t tg_rng_hash(uint64_t key, uint64_t index) {
    return tg_rng_mix(key + (index + 1) * 0x9e3779b97f4a7c15ULL);
}
tg_rng tg_rng_new(uint64_t seed);
tg_rng tg_rng_fork(const tg_rng *r, uint64_t stream); /**< independent child stream */
uint64_t tg_rng_bits(uint64_t seed, uint64_t stream, uint64_t index);
double tg_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t index); /**< [0,1) */
double tg_rng_normal_at(uint64_t seed, uint64_t stream, uint64_t index);  /**< N(0,1) */
/** Reserves n numbers: returns the first index and advances the counter. */
uint64_t tg_rng_take(tg_rng *r, uint64_t n);
uint64_t tg_rng_next_u64(tg_rng *r);
double tg_rng_next_uniform(tg_rng *r);

tg_tensor *tg_rand(int ndim, const int *shape, tg_rng *rng); /**< U[0,1) */
tg_tensor *tg_uniform(int ndim, const int *shape, tg_real lo, tg_real hi, tg_rng *rng);
tg_tensor *tg_randn(int ndim, const int *shape, tg_rng *rng); /**< N(0,1) */
tg_tensor *tg_normal(int ndim, const int *shape, tg_real mean, tg_real std, tg_rng *rng);
void tg_fill_uniform(tg_tensor *t, tg_real lo, tg_real hi, tg_rng *rng);
void tg_fill_normal(tg_tensor *t, tg_real mean, tg_real std, tg_rng *rng);

/** shapes and printing */
int64_t tg_numel(int ndim, const int *shape);
bool tg_same_shape(const tg_tensor *a, const tg_tensor *b);
/** NumPy broadcasting of two shapes; returns false if incompatible. */
bool tg_broadcast_shape(int na, const int *sa, int nb, const int *sb, int *nout, int *out);
/** Prints like PyTorch: tensor([[...]]), eliding the middle of large tensors. */
void tg_print(const tg_tensor *t);
void tg_fprint(FILE *f, const tg_tensor *t);
tg_real tg_item(const tg_tensor *t); /**< first element (the value of a scalar) */

/* ---- matrix product --------------------------------------------------------
 * The raw kernels that are public (tools/bench.c times them); the others are
 * internal (tensor/kernels.h). */
/** C = alpha * op(A) op(B) + beta * C, row-major, op = transpose when trans_*.
 * A is M x K (K x M if trans_a), B is K x N (N x K if trans_b). */
void tg_k_gemm(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
               const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc);
/** The same product with A and B rounded to bfloat16 (to nearest even) and
 * the sums in float: the products of mixed precision (tg_set_precision).
 * vdpbf16ps where the CPU has AVX-512 BF16, else a portable loop with the
 * same results up to the order of the float sums (gemm_bf16.c). */
void tg_k_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                    const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc);

#endif
