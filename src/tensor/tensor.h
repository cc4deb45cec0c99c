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
 *
 * Errors: a function given bad input returns NULL (or -1) and records one
 * message, read with tg_last_error(). Threads: see tg_set_num_threads().
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
#define TG_REAL_DTYPE "F64" /**< safetensors' dtype of tg_real: "F64" in the double build */
#else
typedef float tg_real;
#define TG_REAL_DTYPE "F32" /**< safetensors' dtype of tg_real: "F32" (the double build: "F64") */
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
/** The flavour guard's symbol (named by the macro TG_FLAVOUR), defined only by
 * the library of this header's flavour; its value means nothing. */
extern const int TG_FLAVOUR;
#if defined(__GNUC__)
/** @cond */
/* A reference to TG_FLAVOUR kept in every file that includes this header
 * (used, so the compiler keeps it even where nothing reads it): the link
 * then needs the library of the same flavour. Not for use; left out of the
 * API reference, where Doxygen would show it as a function __attribute__. */
__attribute__((used)) static const int *const tg_flavour_ref_ = &TG_FLAVOUR;
/** @endcond */
#endif

/** The libm function at tg_real's precision: TG_M(exp)(x) is expf in the
 * float build, where plain exp would widen to double and run 2x slower. */
#ifdef TG_DOUBLE
#define TG_M(fn) fn
#else
#define TG_M(fn) fn##f
#endif

/** Sets the number of threads tgrad's loops use, and returns the number now
 * in use.
 *
 * Threads. tgrad runs its loops on a thread pool of its own, whose idle
 * threads spin a few microseconds and then sleep (src/tensor/parallel.c).
 * Default: TG_NUM_THREADS, else OMP_NUM_THREADS (each read only when it is
 * a positive decimal integer, so OpenMP's list form "4,2" is ignored), else
 * every CPU the process may use, and then, in that last case only, like
 * OpenMP's OMP_DYNAMIC, only the cores that other programs' threads leave
 * free (checked every 10 ms), so a program at the default is as fast as at
 * one thread also when it shares the cores.
 * tg_set_num_threads(n) (n <= 0: the default) caps n at the CPUs available
 * (and at 64), as more threads than cores only slow the work down, keeps an
 * explicit n whatever the load, and returns the number in use. Called from
 * inside a parallel job (a loop body running on tgrad's threads) it changes
 * nothing and returns the current number. Results never depend on the
 * thread count.
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
 * of short trials of chained FMAs at each vector width the CPU has
 * (about `seconds` in all; noise only slows a trial, and the best seen in
 * the process is kept). Some cores run 512-bit FMAs at twice the 256-bit
 * rate, others at the same rate: both are reported, gflops is the better.
 * NaN where the CPU has no FMA unit (or is not x86). */
typedef struct {
    double gflops, /**< the better of the two widths (NaN where the CPU lacks AVX2 or FMA, or is not x86) */
        gflops256, /**< with 256-bit FMAs (AVX2) */
        gflops512; /**< with 512-bit FMAs (AVX-512F); NaN where the CPU has none */
} tg_fma_peak;
/** Measures the FMA peak for about `seconds` in all, in trials of 2 ms per
 * width (at least 10; <= 0: 10 trials of 1 ms); see tg_fma_peak. Never fails: NaN fields where it cannot
 * measure. For one thread at a time (the best seen is process state). */
tg_fma_peak tg_fma_peak_measure(double seconds);
/** The bfloat16 dot-product peak of one core in GFLOP/s (vdpbf16ps: 32
 * multiply-adds into 16 float sums an instruction), measured the same way
 * (the best of 2 ms trials, about `seconds` in all, at least 10; the best
 * seen in the process is kept): what the bf16 GEMM's share is of. NaN where the CPU
 * has no AVX-512 BF16. */
double tg_bf16_peak_measure(double seconds);
/** The engine of the bfloat16 products (tg_k_gemm_bf16) and the rates it
 * was chosen by: each engine's peak on one core in GFLOP/s, measured once
 * per process at the first bf16 product (about 5 ms), NaN where the CPU
 * lacks it. The fastest the ISA level (tg_isa_name) allows runs: "amx"
 * (tdpbf16ps tiles), "avx512_bf16" (vdpbf16ps) or, where the FMA units beat
 * both, "fp32" (operands rounded to bf16, then the float GEMM: the same
 * bf16 products, exact in float); "portable" without AVX2. The environment
 * variable TG_BF16_ENGINE names one instead (also "amx_twin", the AMX
 * kernel's arithmetic in plain C, for tests). */
typedef struct {
    const char *engine; /**< the engine's name (static) */
    double gflops;      /**< its measured peak (NaN for the portable loop and the twin) */
    double fma_gflops;  /**< float FMA (the fp32 engine) */
    double vdp_gflops;  /**< vdpbf16ps */
    double amx_gflops;  /**< tdpbf16ps */
} tg_bf16_engine_info;
/** The engine tg_k_gemm_bf16 runs now (at the current ISA level), choosing
 * it first if no product has yet; see tg_bf16_engine_info. */
tg_bf16_engine_info tg_bf16_engine(void);
/** The number of threads tgrad's loops use: the count tg_set_num_threads
 * set, or the default (decided at first use). With the default, a loop may
 * use fewer while other programs' threads are busy. Callable from any
 * thread. */
int tg_get_num_threads(void);
/** The instruction set the kernels use: "portable", "avx2", "avx512",
 * "avx512_bf16" (AVX-512 with the bfloat16 dot product) or "amx" (with AMX
 * tiles, where Linux grants them), the widest the CPU
 * has, capped by the environment variable TG_ISA (one of those names, read
 * at the first kernel, as PyTorch's ATEN_CPU_CAPABILITY): TG_ISA=portable
 * runs the plain C loops everywhere. Results are the same at every level up
 * to float summation order. An unknown TG_ISA, or one above the CPU's, is
 * said once on stderr (then ignored, or capped at the CPU's). The string is
 * static. */
const char *tg_isa_name(void);

/** The most dimensions a tensor has (shapes hold 0 to TG_MAX_DIMS sizes). */
#define TG_MAX_DIMS 6

/** TG_SHAPE(2, 3) expands to the (ndim, shape) pair most functions take. */
#define TG_SHAPE(...) \
    (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]) { __VA_ARGS__ }

/** An autograd graph node: the op that made a tensor (opaque; autograd layer). */
typedef struct tg_node tg_node;
typedef struct tg_tensor tg_tensor;

/** How a tensor stores its elements. Every tensor a user makes is
 * TG_DTYPE_REAL (tg_real: float, or double in the double build). A
 * TG_DTYPE_BF16 tensor holds bfloat16 values (the top 16 bits of a float,
 * rounded to nearest even): an activation that only feeds bf16 products,
 * kept in half the bytes, as PyTorch's autocast keeps a Linear's result.
 * Such tensors come from tg_to_bf16, the _to forms of affine, affine_gelu
 * and layer_norm, and attention on bf16 q, k, v (autograd.h); like every
 * op result they live in the arena. They are read by the ops that say so
 * (tg_to_real, reshape, affine, affine_add's x, affine_gelu, attention's
 * q, k and v); the others refuse them with an error naming the op. A bf16
 * tensor's gradient is a tg_real tensor. */
typedef enum {
    TG_DTYPE_REAL = 0, /**< tg_real elements in data */
    TG_DTYPE_BF16 = 1, /**< bfloat16 bits in bf16; data is NULL */
} tg_dtype;

/** A contiguous row-major tensor. Made by the creation functions (tg_empty,
 * tg_zeros, ...) and by ops; where it lives (arena or persistent) follows
 * the scope rule of tensor.h's file comment. */
struct tg_tensor {
    uint32_t magic;         /**< TG_MAGIC while alive; lets backward spot stale pointers */
    int ndim;               /**< number of dimensions, 0 (a scalar) to TG_MAX_DIMS */
    int shape[TG_MAX_DIMS]; /**< the sizes of dimensions 0 to ndim - 1; the rest unused */
    int64_t size;           /**< number of elements */
    tg_real *data;          /**< the size values, row-major; a view's points into its source's */
    tg_tensor *grad;        /**< same shape; NULL until a backward reaches it */
    tg_node *node;          /**< the op that made it; NULL for leaves (autograd layer) */
    bool requires_grad;     /**< gradients wanted: set on leaves by tg_set_requires_grad; an op result has it
                                 when grad mode is on and an input has it (autograd layer) */
    bool persistent;        /**< malloc'd: lives until tg_free() */
    bool owns_data;         /**< false for views (reshape) */
    uint32_t grad_epoch;    /**< backward pass that last reset a non-leaf grad */
    uint32_t uses;          /**< recorded ops that take it as an input (autograd layer) */
    tg_dtype dtype;         /**< TG_DTYPE_REAL (data) or TG_DTYPE_BF16 (bf16) */
    uint16_t *bf16;         /**< a TG_DTYPE_BF16 tensor's size values as bfloat16 bits; NULL otherwise */
};
#define TG_MAGIC 0x7467726du /**< "tgrm" */

/* ---- errors ---------------------------------------------------------------- */
/** The message of the last failure, or NULL when none is recorded.
 * A function given bad input returns NULL (or -1) and records one message
 * naming the function and the shapes. A function given a NULL input returns
 * NULL and keeps the message already recorded, so a chain is checked once.
 * A message holds up to 13311 bytes (two paths of PATH_MAX and a reason),
 * so none is cut for a path the system accepts. One message for the
 * process, not one per thread. A call that succeeds leaves the message as
 * it was, so check the return value first. The string is a static buffer,
 * valid until the next error or tg_clear_error(). */
const char *tg_last_error(void);
/** Forgets the recorded message: tg_last_error() then returns NULL. */
void tg_clear_error(void);
/** Records a printf-style message, replacing any recorded one (cut at 13311
 * bytes): for code that extends tgrad (its own ops, modules) and keeps its
 * error convention. Start it with the function's name, e.g.
 * "my_op: (2,3) and (4,5) differ". */
void tg_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/** Records "<op>: NULL input" unless a message is already recorded. */
void tg_error_null(const char *op);
/** Writes "(2,3,4)" into buf (at least 64 bytes) and returns buf. A shape
 * too long for 64 bytes is cut short (without the closing parenthesis). */
const char *tg_shape_str(char *buf, int ndim, const int *shape);
/** tg_shape_str of t's shape, "NULL" for NULL t. */
const char *tg_tshape(char *buf, const tg_tensor *t);

/* ---- memory scopes -------------------------------------------------------- */
/** Opens a memory scope: everything made until the matching tg_scope_end
 * lives in the arena and is released by that end.
 * Returns 0, or -1 with an error recorded when 64 scopes are already open;
 * call tg_scope_end for a failed begin too: that end closes nothing, so
 * begins and ends stay paired and the outer scopes stay open. */
int tg_scope_begin(void);
/** Releases everything made since the matching begin (tensors, arena
 * allocations and the autograd graph recorded in it), in O(1); pointers to
 * them are invalid afterwards. With no scope open it records
 * "scope_end: no scope is open" and does nothing else. */
void tg_scope_end(void);
/** The number of scopes open now; 0 when no scope is open. */
int tg_scope_depth(void);

/** Memory counters (tg_memory): what the arena and the persistent tensors
 * hold. Tests and benchmarks read them, to check for instance that a step
 * makes no system allocation. */
typedef struct {
    size_t arena_in_use;     /**< bytes handed out by the arena now */
    size_t arena_peak;       /**< highest arena_in_use so far */
    size_t arena_reserved;   /**< bytes of arena blocks held from the system */
    size_t persistent_bytes; /**< bytes held by persistent tensors */
    uint64_t system_allocs;  /**< system allocations made by tgrad: tg_sys_alloc, tg_sys_calloc, arena blocks */
} tg_memory_stats;
/** The memory counters now (a copy; makes no allocation). */
tg_memory_stats tg_memory(void);

/** Arena allocation (64-byte aligned, rounded up to a multiple of 64 bytes,
 * uninitialised): released by the end of the innermost open scope. Outside
 * any scope it comes from the root level, released only by
 * tg_release_all(). Never returns NULL unless the system is out of memory
 * (then it records an error). */
void *tg_arena_alloc(size_t bytes);
/** True while ptr points into memory a scope has not yet released. Arena
 * memory released and handed out again reads as live again, so this catches
 * most stale pointers, not all; false for memory outside the arena. */
bool tg_arena_live(const void *ptr);
/** Counted system allocation, for persistent storage (optimizer state, ...):
 * malloc (0 bytes allocates 1), counted in tg_memory().system_allocs. NULL
 * with "out of memory allocating <n> bytes" recorded. Free with
 * tg_sys_free. */
void *tg_sys_alloc(size_t bytes);
/** The same as calloc: n zeroed elements of size bytes (a 0 counts as 1).
 * NULL with "out of memory allocating <n> x <size> bytes" recorded. */
void *tg_sys_calloc(size_t n, size_t size);
/** Frees what tg_sys_alloc or tg_sys_calloc returned, and the buffers that
 * tgrad hands to the caller to free this way; NULL is a no-op. */
void tg_sys_free(void *p);
/** Frees every arena block (at program end; all scopes must be closed): any
 * scope still open is dropped, every arena tensor and allocation becomes
 * invalid, and tgrad's internal caches (GEMM's packing buffers) are
 * released. Persistent tensors stay. The arena may be used again after. */
void tg_release_all(void);

/* ---- creation ---------------------------------------------------------------
 * Inside a scope these allocate from the arena, outside they are persistent
 * (free them with tg_free). A bad shape returns NULL with "tensor: <reason>"
 * recorded (see tg_empty). */
/** A tensor of shape (ndim, shape) with uninitialised values: in the arena
 * inside a scope, else persistent. ndim 0 is a scalar (one element; shape
 * may be NULL). NULL with "tensor: <reason>" recorded when ndim is outside
 * 0..TG_MAX_DIMS, shape is NULL for ndim > 0, a size is negative, the
 * tensor would hold more than 2^40 elements, or memory runs out. */
tg_tensor *tg_empty(int ndim, const int *shape);
/** A tensor of zeros (arena in a scope, else persistent); errors as tg_empty. */
tg_tensor *tg_zeros(int ndim, const int *shape);
/** A tensor of ones (arena in a scope, else persistent); errors as tg_empty. */
tg_tensor *tg_ones(int ndim, const int *shape);
/** A tensor with every element value (arena in a scope, else persistent);
 * errors as tg_empty. */
tg_tensor *tg_full(int ndim, const int *shape, tg_real value);
/** 1-D, [start, stop) as numpy.arange: start + i * step for every i with
 * that value before stop (past it for a negative step); empty when stop is
 * not beyond start. Arena in a scope, else persistent. NULL with
 * "arange: ..." recorded when start, stop or step is not finite, step is 0
 * or the tensor would hold more than about 1e9 elements. */
tg_tensor *tg_arange(tg_real start, tg_real stop, tg_real step);
/** A tensor of shape holding a copy of values (row-major, tg_numel(ndim,
 * shape) of them); arena in a scope, else persistent. NULL with
 * "from_array: NULL values" or tg_empty's error recorded. */
tg_tensor *tg_from_array(int ndim, const int *shape, const tg_real *values);
/** Zeros of t's shape (arena in a scope, else persistent). NULL for NULL t
 * ("zeros_like: NULL input", unless a message is already recorded). */
tg_tensor *tg_zeros_like(const tg_tensor *t);
/** A copy of the values, no graph: requires_grad false, no grad. Arena in a
 * scope, else persistent. NULL for NULL t ("clone: NULL input", unless a
 * message is already recorded). */
tg_tensor *tg_clone(const tg_tensor *t);
/** tg_empty, always persistent whatever the scope (free it with tg_free). */
tg_tensor *tg_empty_persistent(int ndim, const int *shape);
/** tg_empty, always in the arena whatever the scope (outside any scope the
 * root level, released only by tg_release_all). */
tg_tensor *tg_empty_arena(int ndim, const int *shape);
/** A tensor header over the same data with another shape (no copy): the
 * same number of elements, no graph (requires_grad false; autograd's
 * tg_reshape records one). The header is in the arena inside a scope, else
 * persistent (tg_free frees the header only); the data stays t's, so the
 * view must not outlive t. NULL with "view: (2,3) to (4,2): 6 elements vs
 * 8" (or tg_empty's shape errors, under "view") recorded; NULL t keeps the
 * recorded message. */
tg_tensor *tg_view(const tg_tensor *t, int ndim, const int *shape);
/** Frees a persistent tensor (and its grad); does nothing to arena tensors or NULL.
 * Of a view it frees the header only; views of t are invalid afterwards. */
void tg_free(tg_tensor *t);

/** Counter-based random numbers, a generator's state.
 * The value drawn for element i is a pure function of (seed, stream, counter+i),
 * so results do not depend on how work is split between threads. A copy of
 * a tg_rng draws the same numbers as the original. */
typedef struct {
    uint64_t seed;    /**< the seed given to tg_rng_new */
    uint64_t stream;  /**< the stream within the seed: 0 from tg_rng_new, a hash per tg_rng_fork */
    uint64_t counter; /**< advanced by every draw */
} tg_rng;
/** The hash behind the generator, inline for hot loops (dropout): a key per
 * (seed, stream), then one SplitMix64 step per index, i.e. the output of
 * SplitMix64 started at the key (Steele, Lea & Flood, OOPSLA 2014).
 * tg_rng_mix is SplitMix64's finaliser, a bijection of 64-bit values. */
static inline uint64_t tg_rng_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/** The key of (seed, stream), for tg_rng_hash. */
static inline uint64_t tg_rng_key(uint64_t seed, uint64_t stream) {
    return tg_rng_mix(seed * 0x9e3779b97f4a7c15ULL + tg_rng_mix(stream + 0x632be59bd9b4e019ULL));
}
/** The 64 random bits at index of the stream whose key is key: the same as
 * tg_rng_bits(seed, stream, index) with key = tg_rng_key(seed, stream). */
static inline uint64_t tg_rng_hash(uint64_t key, uint64_t index) {
    return tg_rng_mix(key + (index + 1) * 0x9e3779b97f4a7c15ULL);
}
/** A generator for seed: stream 0, counter 0. */
tg_rng tg_rng_new(uint64_t seed);
/** An independent child stream: r's seed, a stream hashed from r's stream
 * and stream, counter 0. r is not changed (r must not be NULL), so the same
 * (r, stream) always gives the same child. */
tg_rng tg_rng_fork(const tg_rng *r, uint64_t stream);
/** The 64 random bits at index of (seed, stream): a pure function, the
 * source of every draw. */
uint64_t tg_rng_bits(uint64_t seed, uint64_t stream, uint64_t index);
/** The uniform number in [0,1) at index of (seed, stream): 53 random bits of
 * tg_rng_bits. */
double tg_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t index);
/** The N(0,1) number at index of (seed, stream): Box-Muller (the cosine
 * branch) on the uniforms at indices 2 * index and 2 * index + 1. */
double tg_rng_normal_at(uint64_t seed, uint64_t stream, uint64_t index);
/** Reserves n numbers: returns the first index and advances the counter. */
uint64_t tg_rng_take(tg_rng *r, uint64_t n);
/** The next 64 random bits (tg_rng_bits at the counter); the counter advances by 1. */
uint64_t tg_rng_next_u64(tg_rng *r);
/** The next uniform number in [0,1) (tg_rng_uniform_at at the counter); the
 * counter advances by 1. */
double tg_rng_next_uniform(tg_rng *r);

/** Uniform numbers in [0,1): tg_uniform(ndim, shape, 0, 1, rng). NULL with
 * "uniform: NULL rng" or tg_empty's error recorded. */
tg_tensor *tg_rand(int ndim, const int *shape, tg_rng *rng);
/** A tensor (arena in a scope, else persistent) of lo + (hi - lo) u, u
 * uniform in [0,1), element i drawn at rng's counter + i; the counter
 * advances by the number of elements. lo and hi are not checked. NULL with
 * "uniform: NULL rng" or tg_empty's error recorded. */
tg_tensor *tg_uniform(int ndim, const int *shape, tg_real lo, tg_real hi, tg_rng *rng);
/** Standard normal numbers, N(0,1): tg_normal(ndim, shape, 0, 1, rng). NULL
 * with "normal: NULL rng" or tg_empty's error recorded. */
tg_tensor *tg_randn(int ndim, const int *shape, tg_rng *rng);
/** A tensor (arena in a scope, else persistent) of mean + std z, z standard
 * normal (tg_rng_normal_at), element i drawn at rng's counter + i; the
 * counter advances by the number of elements. NULL with "normal: NULL rng"
 * or tg_empty's error recorded. */
tg_tensor *tg_normal(int ndim, const int *shape, tg_real mean, tg_real std, tg_rng *rng);
/** Fills t in place with values drawn as tg_uniform's. NULL t or rng does
 * nothing (no error recorded). */
void tg_fill_uniform(tg_tensor *t, tg_real lo, tg_real hi, tg_rng *rng);
/** Fills t in place with values drawn as tg_normal's. NULL t or rng does
 * nothing (no error recorded). */
void tg_fill_normal(tg_tensor *t, tg_real mean, tg_real std, tg_rng *rng);

/* ---- shapes and printing ---------------------------------------------------- */
/** The number of elements of a shape: the product of its sizes (1 for ndim
 * 0). Not checked (see tg_empty for valid shapes). */
int64_t tg_numel(int ndim, const int *shape);
/** True when a and b have the same ndim and sizes; neither may be NULL. */
bool tg_same_shape(const tg_tensor *a, const tg_tensor *b);
/** NumPy broadcasting of two shapes; returns false if incompatible.
 * out (room for the larger of na and nb) gets the result and *nout its
 * length; no error is recorded. */
bool tg_broadcast_shape(int na, const int *sa, int nb, const int *sb, int *nout, int *out);
/** Prints like PyTorch: tensor([[...]]), eliding the middle of large tensors.
 * To stdout, 4 decimals (scientific notation for very large or small
 * values), the middle of each dimension elided past 1000 elements, and the
 * shape (and requires_grad) at the end; NULL prints "tensor(NULL)". */
void tg_print(const tg_tensor *t);
/** tg_print to the stream f. */
void tg_fprint(FILE *f, const tg_tensor *t);
/** The first element (the value of a scalar); 0 for NULL or an empty tensor
 * (no error recorded). */
tg_real tg_item(const tg_tensor *t);

/* ---- matrix product --------------------------------------------------------
 * The raw kernels that are public (tools/bench.c times them); the others are
 * internal (tensor/kernels.h). */
/** C = alpha * op(A) op(B) + beta * C, row-major, op = transpose when trans_*.
 * A is M x K (K x M if trans_a), B is K x N (N x K if trans_b). lda, ldb and
 * ldc are the row strides (in elements) of A, B and C as stored. Nothing is
 * checked and no error is recorded: M or N <= 0 does nothing, K <= 0 or
 * alpha 0 only scales C, and beta 0 writes C without reading it. Runs on
 * tgrad's threads, with results independent of their number. */
void tg_k_gemm(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
               const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc);
/** The same product with A and B rounded to bfloat16 (to nearest even) and
 * the sums in float: the products of mixed precision (tg_set_precision).
 * vdpbf16ps where the CPU has AVX-512 BF16, else a portable loop with the
 * same results up to the order of the float sums (gemm_bf16.c). Arguments
 * and edge cases as tg_k_gemm. */
void tg_k_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                    const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc);

#endif
