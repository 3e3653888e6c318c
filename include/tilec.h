/*
 * tilec.h - the public interface of libtilec, an embeddable C library for GPU
 * tile kernels.
 *
 * This header is the reference documentation. It needs nothing but the C
 * standard library: streams are `void *` (a CUstream), device pointers are
 * `uint64_t` (a CUdeviceptr), contexts of the CUDA driver are `void *` (a
 * CUcontext).
 *
 * Objects and ownership
 *   tl_ctx      created by tl_ctx_create, destroyed by tl_ctx_destroy (the
 *               caller owns it). One device, or none (offline: compile only).
 *               See "Threads" below.
 *   tl_kernel   a builder, created by tl_kernel_new, destroyed by
 *               tl_kernel_destroy. It owns every expression, buffer and
 *               statement made through it.
 *   tl_program  a compiled kernel, created by tl_compile, destroyed by
 *               tl_program_destroy. It outlives its kernel but not its
 *               context. Programs are immutable: several threads may launch
 *               one at once.
 *   tl_expr, tl_buf  small value handles into a kernel; a zero handle
 *               (TL_NONE_EXPR, TL_NONE_BUF) is the null handle.
 *
 * Threads
 *   Several threads may use one context at once to: build and compile
 *   kernels (each kernel by one thread at a time), launch, time, check and
 *   interpret programs (one program by any number of threads), run the
 *   prebuilt ops (an op's program is compiled once, by the first thread to
 *   ask), copy and fill device memory, and read or clear the cache. Each
 *   thread has its own message: tl_ctx_error gives the calling thread's
 *   last failure on the context. Not concurrent with anything else on the
 *   context: tl_ctx_destroy, and tl_baseline_gemm (its cuBLAS handles are
 *   one thread's at a time).
 *
 * Errors
 *   Calls that do work return a tl_status; the message that goes with it is
 *   on the context (tl_ctx_error) and starts with the name of the call
 *   that failed ("tl_launch: ..."). Builder calls record the first error on
 *   their kernel (status, message, the name of the call) and return a null
 *   handle; every later builder call on that kernel does nothing, and
 *   tl_compile returns the recorded status. The library never aborts, exits
 *   or prints on its own; warnings go to the log callback of the context.
 */
#ifndef TILEC_H
#define TILEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TILEC_BUILD) && defined(__GNUC__)
#define TL_API __attribute__((visibility("default")))
#else
#define TL_API
#endif

#define TILEC_VERSION_MAJOR 0
#define TILEC_VERSION_MINOR 1
#define TILEC_VERSION_PATCH 0
#define TILEC_VERSION_STRING "0.1.0"

/* Returns the library's version string, e.g. "0.1.0". Static storage. */
TL_API const char *tl_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

typedef enum tl_status {
    TL_OK = 0,
    TL_ERR_INVALID_ARG,   /* a null, foreign or out-of-range argument      */
    TL_ERR_DTYPE,         /* operands of incompatible element types         */
    TL_ERR_SHAPE,         /* wrong rank, or shapes that do not agree        */
    TL_ERR_SCOPE,         /* unbalanced tl_end, unclosed loop, use out of scope */
    TL_ERR_UNSUPPORTED,   /* valid, but not supported (on this target)      */
    TL_ERR_OUT_OF_MEMORY, /* host or device allocation failed               */
    TL_ERR_NO_DRIVER,     /* libcuda.so.1 cannot be loaded                  */
    TL_ERR_NO_DEVICE,     /* the driver loaded but found no (such) GPU      */
    TL_ERR_NO_NVRTC,      /* libnvrtc cannot be loaded                      */
    TL_ERR_NO_CUBLAS,     /* libcublas / libcublasLt cannot be loaded       */
    TL_ERR_COMPILE,       /* NVRTC rejected the generated source (see log)  */
    TL_ERR_CUDA,          /* a CUDA driver call failed (message names it)   */
    TL_ERR_LAUNCH_ARGS,   /* wrong number or kind of launch arguments       */
    TL_ERR_IO,            /* a file could not be read or written            */
    TL_ERR_INTERNAL       /* an invariant of the library broke: a bug       */
} tl_status;

/* Returns a constant name for a status, e.g. "TL_ERR_NO_DEVICE". */
TL_API const char *tl_status_name(tl_status st);

/* ------------------------------------------------------------------------ */
/* Element types                                                             */
/* ------------------------------------------------------------------------ */

typedef enum tl_dtype {
    TL_DTYPE_INVALID = 0,
    TL_F32,
    TL_F16,
    TL_BF16,
    TL_I32,
    TL_I64,
    TL_F64,  /* host references and scalars; allowed in kernels too */
    TL_BOOL  /* result of comparisons; not a tensor element type     */
} tl_dtype;

/* Size of one element in bytes (TL_BOOL: 1); 0 for TL_DTYPE_INVALID. */
TL_API size_t tl_dtype_size(tl_dtype dt);
/* Constant name such as "f32", "bf16"; "invalid" for unknown values. */
TL_API const char *tl_dtype_name(tl_dtype dt);
/* Parses "f32", "f16", "bf16", "i32", "i64", "f64"; TL_DTYPE_INVALID else. */
TL_API tl_dtype tl_dtype_from_name(const char *name);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct tl_ctx tl_ctx;

typedef enum tl_log_level { TL_LOG_DEBUG, TL_LOG_INFO, TL_LOG_WARN } tl_log_level;
typedef void (*tl_log_fn)(void *user, tl_log_level level, const char *msg);

/* Pass as tl_ctx_options.device for a context with no GPU: kernels can be
 * built, compiled (NVRTC) and interpreted, but not launched. */
#define TL_NO_DEVICE (-1)

typedef struct tl_ctx_options {
    int device;            /* ordinal, or TL_NO_DEVICE                       */
    void *cu_context;      /* a CUcontext the caller owns; overrides device  */
    const char *target;    /* "sm_80", "sm_90a", ...; NULL: the device's, or
                              "sm_90a" without a device                      */
    const char *cache_dir; /* NULL: $TILEC_CACHE_DIR, $XDG_CACHE_HOME/tilec,
                              ~/.cache/tilec, in that order                   */
    int disk_cache;        /* 1: memory + disk cache; 0: memory only;
                              TL_DISK_CACHE_IF_EXISTS: the directory only if
                              it exists, never created (to inspect a cache) */
    tl_log_fn log;         /* warnings and debug notes; NULL: silent         */
    void *log_user;
} tl_ctx_options;

#define TL_DISK_CACHE_IF_EXISTS 2

/* Default options: device 0, device's own target, disk cache on, silent. */
TL_API tl_ctx_options tl_ctx_default_options(void);

/* Creates a context. `opt` may be NULL (defaults). On success *out is a new
 * context the caller destroys. Errors: TL_ERR_NO_DRIVER, TL_ERR_NO_DEVICE,
 * TL_ERR_CUDA, TL_ERR_INVALID_ARG (bad target name), TL_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL and, when msg is not NULL, up to msg_len bytes of
 * an explanation are written there (there is no context yet to hold it). */
TL_API tl_status tl_ctx_create(const tl_ctx_options *opt, tl_ctx **out,
                               char *msg, size_t msg_len);
/* Destroys a context and every cached module in it. Programs made in it
 * must be destroyed first. NULL is allowed. */
TL_API void tl_ctx_destroy(tl_ctx *ctx);
/* The message of the calling thread's last failed call on this context
 * (or on a kernel or program of it); "" when none. Valid until this
 * thread's next failing call on the context. */
TL_API const char *tl_ctx_error(const tl_ctx *ctx);
/* 1 when the context has a GPU, 0 when it is offline. */
TL_API int tl_ctx_has_device(const tl_ctx *ctx);
/* The compile target of the context, e.g. "sm_90a". Owned by the context. */
TL_API const char *tl_ctx_target(const tl_ctx *ctx);

typedef struct tl_device_info {
    char name[256];
    int ordinal;
    int cc_major, cc_minor;
    int sm_count;
    uint64_t global_mem_bytes;
    int smem_per_block;        /* default limit of one block             */
    int smem_per_block_optin;  /* limit after opting in (dynamic smem)   */
    int smem_per_sm;
    int regs_per_block;
    int l2_bytes;
    int max_threads_per_block;
    int clock_khz;             /* SM clock; 0 when the driver hides it   */
    int mem_clock_khz;         /* 0 when the driver hides it             */
    int mem_bus_width_bits;
    int driver_version;        /* e.g. 13000 */
    int nvrtc_major, nvrtc_minor; /* 0 when NVRTC is missing */
    char target[16];           /* what tl_compile aims at, e.g. "sm_90a" */
} tl_device_info;

/* Fills *out with the context's device. Errors: TL_ERR_NO_DEVICE for an
 * offline context, TL_ERR_CUDA. */
TL_API tl_status tl_ctx_device_info(tl_ctx *ctx, tl_device_info *out);

/* Versions without a context: the driver's (e.g. 13000) and NVRTC's.
 * Any out pointer may be NULL. Returns TL_ERR_NO_DRIVER / TL_ERR_NO_NVRTC
 * when a library is missing (the others are still filled; missing ones are
 * 0); msg, when not NULL, receives what is missing. */
TL_API tl_status tl_runtime_versions(int *driver, int *nvrtc_major,
                                     int *nvrtc_minor, char *msg, size_t msg_len);

/* ------------------------------------------------------------------------ */
/* Device memory helpers (thin wrappers over the driver, for callers that do
 * not link the CUDA runtime). All return TL_ERR_NO_DEVICE on an offline
 * context and TL_ERR_CUDA when the driver fails.                            */
/* ------------------------------------------------------------------------ */

TL_API tl_status tl_malloc(tl_ctx *ctx, size_t bytes, uint64_t *dptr);
TL_API tl_status tl_free(tl_ctx *ctx, uint64_t dptr); /* 0 is allowed */
TL_API tl_status tl_memcpy_htod(tl_ctx *ctx, uint64_t dst, const void *src, size_t bytes);
TL_API tl_status tl_memcpy_dtoh(tl_ctx *ctx, void *dst, uint64_t src, size_t bytes);
TL_API tl_status tl_memcpy_dtod(tl_ctx *ctx, uint64_t dst, uint64_t src, size_t bytes, void *stream);
TL_API tl_status tl_memset_u8(tl_ctx *ctx, uint64_t dst, uint8_t value, size_t bytes, void *stream);
/* Waits for all work on the context's device. */
TL_API tl_status tl_synchronize(tl_ctx *ctx);

/* Fills n elements at dptr with uniform values in [lo, hi) from a counter
 * based generator: element i depends only on (seed, i). tl_random_host
 * produces bit-identical values on the host, so a reference can be computed
 * without copying inputs back. dtype: f32, f16, bf16, f64, i32 (integers in
 * [lo, hi)). lo <= hi, both finite; for i32 both within [-2^31, 2^31].
 * Errors: TL_ERR_INVALID_ARG (a bad range, dtype, n < 0, a null or, on the
 * device, misaligned pointer); tl_random_fill also TL_ERR_NO_DEVICE and
 * those of tl_launch. */
TL_API tl_status tl_random_fill(tl_ctx *ctx, uint64_t dptr, tl_dtype dtype, int64_t n,
                                uint64_t seed, double lo, double hi, void *stream);
TL_API tl_status tl_random_host(void *dst, tl_dtype dtype, int64_t n, uint64_t seed,
                                double lo, double hi);

/* Host conversions between float and the 16-bit types (round to nearest
 * even), for callers that prepare inputs or read outputs. */
TL_API uint16_t tl_f32_to_f16(float x);
TL_API float tl_f16_to_f32(uint16_t h);
TL_API uint16_t tl_f32_to_bf16(float x);
TL_API float tl_bf16_to_f32(uint16_t h);

/* ------------------------------------------------------------------------ */
/* The kernel builder                                                         */
/* ------------------------------------------------------------------------ */

typedef struct tl_kernel tl_kernel;

/* Value handles. `kid` ties a handle to its kernel (a handle from another
 * kernel is an error), `id` 0 is the null handle. Do not fill them by hand. */
typedef struct tl_expr { uint32_t kid, id; } tl_expr;
typedef struct tl_buf { uint32_t kid, id; } tl_buf;

#ifdef __cplusplus /* C++ has list-initialised temporaries, not compound literals */
#define TL_NONE_EXPR (tl_expr{0, 0})
#define TL_NONE_BUF (tl_buf{0, 0})
#else
#define TL_NONE_EXPR ((tl_expr){0, 0})
#define TL_NONE_BUF ((tl_buf){0, 0})
#endif
static inline int tl_expr_is_null(tl_expr e) { return e.id == 0; }
static inline int tl_buf_is_null(tl_buf b) { return b.id == 0; }

#define TL_MAX_RANK 4

/* Creates an empty kernel named `name` ([A-Za-z_][A-Za-z0-9_]*, at most 63
 * characters). Returns NULL when ctx is NULL, the name is bad or memory runs
 * out; the reason is then on ctx. The caller destroys it. */
TL_API tl_kernel *tl_kernel_new(tl_ctx *ctx, const char *name);
/* Frees the kernel and everything made through it. NULL is allowed. */
TL_API void tl_kernel_destroy(tl_kernel *k);
/* The first error recorded on k (TL_OK when none). */
TL_API tl_status tl_kernel_status(const tl_kernel *k);
/* Its message, "tl_xxx: what went wrong", or "" when none. Owned by k. */
TL_API const char *tl_kernel_error(const tl_kernel *k);

/* --- parameters: they become launch arguments, in the order declared --- */

/* Parameter names are identifiers ([A-Za-z_][A-Za-z0-9_]*, at most 63
 * characters) that are free in the generated CUDA C++: not a C++ keyword
 * or alternative token (`namespace`, `and`, `xor_eq`, `nullptr`, ...), not
 * a name C++ reserves (containing `__`, or `_` and a capital first), not
 * `NULL`, a CUDA built-in (`threadIdx`, `warpSize`, ...) or a math function
 * the generated code calls (`expf`, `fmaxf`, ...), and not starting with
 * `tl_`. A kernel takes at most TL_MAX_PARAMS parameters. Errors of the
 * declaring calls: TL_ERR_INVALID_ARG (a bad, reserved or repeated name,
 * naming the rule it breaks), TL_ERR_UNSUPPORTED (too many parameters). */
#define TL_MAX_PARAMS 64

/* A symbolic dimension: a run-time i64 size, one launch argument. */
TL_API tl_expr tl_dim(tl_kernel *k, const char *name);
/* A scalar parameter of dtype f32, f16, bf16, i32, i64 or f64. */
TL_API tl_expr tl_param_scalar(tl_kernel *k, const char *name, tl_dtype dtype);
/* A tensor in global memory: a device pointer argument. `shape` has `rank`
 * integer expressions (constants, dims, arithmetic of them). `strides`, in
 * elements, may be NULL for row-major contiguous. Extents and strides must
 * be >= 0: a negative constant is refused here, any other is checked at
 * launch. Accesses out of the shape are masked: loads give 0, stores are
 * dropped. Element types: f32, f16, bf16, i32, i64, f64. Errors:
 * TL_ERR_SHAPE (rank not in 1..TL_MAX_RANK, a negative constant extent or
 * stride), TL_ERR_DTYPE (a non-integer extent, a bad element type),
 * TL_ERR_INVALID_ARG (an extent the host cannot compute, a name). */
TL_API tl_buf tl_param_tensor(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                              const tl_expr *shape, const tl_expr *strides);

/* --- launch shape --- */

/* Sets the grid (integer expressions of dims and scalars; a null handle
 * means 1) and the number of threads per block (32..1024, a multiple of 32).
 * Must be called once, before any statement. */
TL_API void tl_grid(tl_kernel *k, tl_expr gx, tl_expr gy, tl_expr gz, int threads);
/* The block index along axis 0, 1 or 2 (i64). */
TL_API tl_expr tl_block_idx(tl_kernel *k, int axis);

/* --- expressions --- */

TL_API tl_expr tl_int(tl_kernel *k, int64_t v);            /* i64 constant */
TL_API tl_expr tl_i32(tl_kernel *k, int32_t v);            /* i32 constant */
TL_API tl_expr tl_float(tl_kernel *k, double v, tl_dtype dtype); /* float constant */
TL_API tl_expr tl_f32(tl_kernel *k, float v);              /* f32 constant */

/* Arithmetic. Both operands must have the same dtype, except that i32 and
 * i64 mix (the i32 operand is converted to i64; the result is i64).
 * tl_div on integers truncates toward zero; tl_mod is the C remainder and
 * integer-only; tl_ceildiv is (a+b-1)/b, meant for non-negative integers.
 * Integer operations on constants are folded at build time, exactly: a
 * result that does not fit the type, or a division by the constant 0, is
 * TL_ERR_INVALID_ARG. At run time integer + - * neg abs wrap around (two's
 * complement); in the interpreter MIN / -1 is MIN and a division or
 * remainder by 0 gives 0 (on the device the result of those two is
 * unspecified). Errors: TL_ERR_DTYPE, TL_ERR_INVALID_ARG. */
TL_API tl_expr tl_add(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_sub(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_mul(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_div(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_mod(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_ceildiv(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_max(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_min(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_neg(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_abs(tl_kernel *k, tl_expr a);

/* Comparisons (operands as for arithmetic) give TL_BOOL; logic takes BOOL. */
TL_API tl_expr tl_lt(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_le(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_gt(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_ge(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_eq(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_ne(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_and(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_or(tl_kernel *k, tl_expr a, tl_expr b);
TL_API tl_expr tl_not(tl_kernel *k, tl_expr a);
/* cond ? a : b; cond is TL_BOOL, a and b of one dtype. */
TL_API tl_expr tl_select(tl_kernel *k, tl_expr cond, tl_expr a, tl_expr b);
/* Converts among f32, f16, bf16, f64, i32, i64 (floats to ints truncate;
 * to f16/bf16 rounds to nearest even). */
TL_API tl_expr tl_cast(tl_kernel *k, tl_expr a, tl_dtype dtype);

/* Float-only math (f16/bf16 are computed in f32 and rounded back). */
TL_API tl_expr tl_exp(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_exp2(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_log(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_sqrt(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_rsqrt(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_tanh(tl_kernel *k, tl_expr a);
TL_API tl_expr tl_erf(tl_kernel *k, tl_expr a);

/* Trades accuracy for speed in k's f32 math (f64 math is untouched):
 * tanh becomes the hardware approximation (tanh.approx.f32, relative error
 * about 2^-11), exp and exp2 the ex2.approx unit (2 ulp plus, for exp, the
 * rounding of x * log2(e); subnormal results flush to 0), log the
 * lg2.approx one, f32 division div.approx (2 ulp for divisors below
 * 2^126), erf a rational-exponential approximation (absolute error below
 * 1e-6). sqrt and rsqrt keep their full-precision forms. Off by
 * default; the CPU interpreter computes the exact functions either way.
 * Unlike tl_compile_options.fast_math (NVRTC's --use_fast_math, for the
 * whole program, which leaves tanh and erf precise), this is part of the
 * kernel and its generated source. on: 1 or 0. No errors (a NULL or failed
 * kernel is ignored). */
TL_API void tl_use_fast_math(tl_kernel *k, int on);

/* --- memory --- */

/* Reads buf[idx[0], ..., idx[rank-1]] (integer indices). Out of the
 * tensor's shape it reads 0. Errors: TL_ERR_SHAPE, TL_ERR_DTYPE. */
TL_API tl_expr tl_load(tl_kernel *k, tl_buf buf, const tl_expr *idx);
/* Writes value (of the buffer's dtype exactly: cast first) to buf[idx...];
 * dropped out of the shape. */
TL_API void tl_store(tl_kernel *k, tl_buf buf, const tl_expr *idx, tl_expr value);

/* --- control flow: each opens a scope that tl_end closes --- */

/* A loop over [0, extent) run in order by every thread of the block.
 * Inside tl_parallel (as tl_if may be too) it runs for each iteration of
 * the parallel loop on its own: a per-element loop, e.g. a reduction
 * along an axis into a local. */
TL_API tl_expr tl_serial(tl_kernel *k, tl_expr extent);
/* An element-wise parallel loop over a constant index space of `rank`
 * dimensions (1..TL_MAX_RANK), spread over the threads of the block and
 * vectorised where the accesses allow. Iterations must be independent.
 * The loop variables (i64) are written to vars[0..rank-1]. */
TL_API void tl_parallel(tl_kernel *k, int rank, const int64_t *extents, tl_expr *vars);
/* One-dimensional tl_parallel; returns its variable. */
TL_API tl_expr tl_parallel1(tl_kernel *k, int64_t extent);
/* if (cond) { ... [tl_else] ... } closed by tl_end. */
TL_API void tl_if(tl_kernel *k, tl_expr cond);
TL_API void tl_else(tl_kernel *k);
/* Closes the innermost open tl_serial, tl_parallel or tl_if. */
TL_API void tl_end(tl_kernel *k);

/* --- tiles: shared memory, register fragments, per-thread locals --- */

/* A block of a buffer: the whole buffer (tl_all), or the tile of a global
 * tensor at tile indices (tl_tile), whose extents are those of the buffer on
 * the other side of the tl_copy. Value handle; do not fill by hand. */
typedef struct tl_region { tl_buf buf; uint32_t id; } tl_region;

/* A tile in shared memory, visible to the whole block. Constant shape
 * (each extent 1..2^20, at most 2^24 elements in all, as for fragments
 * and locals), element types f32, f16, bf16. The library lays it out
 * (XOR-swizzled for conflict-free tensor-core loads) and multi-buffers it
 * inside tl_pipelined. Errors: TL_ERR_SHAPE, TL_ERR_DTYPE. */
TL_API tl_buf tl_alloc_shared(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape);
/* A tile held in registers, spread over the threads of the block. Its layout
 * is inferred: the accumulator layout when tl_gemm writes it, else a plain
 * spread over the threads. Element-wise work on it goes in a tl_parallel
 * loop over its whole shape that indexes it by the loop variables. */
TL_API tl_buf tl_alloc_fragment(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape);
/* Per-thread private storage (registers), indexed inside tl_parallel or
 * serial code by each thread on its own. */
TL_API tl_buf tl_alloc_local(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape);

/* The whole of buf. */
static inline tl_region tl_all(tl_buf buf) { tl_region r; r.buf = buf; r.id = 0; return r; }
/* The tile of global tensor buf at tile indices idx[0..rank-1] (rank of
 * buf): it starts at idx[d] * extent[d] along each axis. The indices are
 * evaluated where the region is copied, so a region whose indices use a
 * loop variable may be copied only inside that loop (tl_copy gives
 * TL_ERR_SCOPE after it). */
TL_API tl_region tl_tile_n(tl_kernel *k, tl_buf buf, const tl_expr *idx, int n);
#ifdef __cplusplus
/* C++ has no compound literals: the indices become the array of a
 * variadic function template, which counts them too. */
extern "C++" {
template <typename... I> inline tl_region tl_tile_list(tl_kernel *k, tl_buf buf, I... idx)
{
    const tl_expr list[] = {idx...};
    return tl_tile_n(k, buf, list, (int)sizeof...(I));
}
}
#define tl_tile(k, buf, ...) tl_tile_list((k), (buf), __VA_ARGS__)
#else
#define tl_tile(k, buf, ...)                                                                       \
    tl_tile_n((k), (buf), (tl_expr[]){__VA_ARGS__}, (int)(sizeof((tl_expr[]){__VA_ARGS__}) / sizeof(tl_expr)))
#endif

/* Copies src to dst element by element (converting the element type when
 * they differ), where both have the same extents. Global tiles are masked at
 * the tensor's edges (reads give 0, writes are dropped). Lowered to 16-byte
 * cp.async for global -> shared, vector stores for fragment -> global.
 * Supported: global -> shared, shared -> global, fragment -> global,
 * fragment -> shared, shared -> fragment, global -> fragment; elements
 * f32, f16 or bf16 on both sides. Errors: TL_ERR_UNSUPPORTED (direction),
 * TL_ERR_DTYPE, TL_ERR_SHAPE, TL_ERR_SCOPE (inside tl_parallel, or a tile
 * region whose loop has closed), TL_ERR_INVALID_ARG. */
TL_API void tl_copy(tl_kernel *k, tl_region src, tl_region dst);
/* Sets every element of a shared, fragment or local buffer to 0 / value. */
TL_API void tl_clear(tl_kernel *k, tl_buf buf);
TL_API void tl_fill(tl_kernel *k, tl_buf buf, tl_expr value);

/* A software-pipelined loop over [0, extent): the tl_copy statements into
 * shared memory at the start of its body run `stages - 1` iterations ahead
 * of the rest (multi-buffered shared tiles, asynchronous copies). stages 1
 * is a plain loop. Returns the loop variable; closed by tl_end. */
TL_API tl_expr tl_pipelined(tl_kernel *k, tl_expr extent, int stages);

/* tl_gemm flags. Without a TRANS flag A is [M, K] and B is [K, N]; with
 * TL_GEMM_TRANS_A A is [K, M], with TL_GEMM_TRANS_B B is [N, K]. The warp
 * policy says how the block's warps split the C tile: as square as
 * possible (default), along M (full rows), or along N (full columns). */
enum {
    TL_GEMM_TRANS_A = 1u << 0,
    TL_GEMM_TRANS_B = 1u << 1,
    TL_GEMM_WARP_SQUARE = 0,
    TL_GEMM_WARP_ROWS = 1u << 4,
    TL_GEMM_WARP_COLS = 1u << 5
};
/* C += A * B on the tensor cores: A and B bf16 or f16 (the same) in shared
 * memory, C an f32 fragment [M, N]. The block's warps must split C into
 * warp tiles whose sides are multiples of 16, and K into steps of 16. Errors: TL_ERR_SHAPE (the sizes
 * disagree or the MMA layout cannot tile them), TL_ERR_DTYPE,
 * TL_ERR_UNSUPPORTED (A in a fragment, transposed A), TL_ERR_INVALID_ARG
 * (unknown flag bits, both warp policies, before tl_grid, operands that
 * are not shared tiles and an f32 fragment). */
TL_API void tl_gemm(tl_kernel *k, tl_buf A, tl_buf B, tl_buf C, unsigned flags);

/* Rasterises blocks for L2 reuse: consecutive blocks walk down a panel of
 * `panel` block rows (gridDim.y) before moving along the row. The kernel
 * sees the remapped tl_block_idx. 0 or 1: off. */
TL_API void tl_use_swizzle(tl_kernel *k, int panel);

/* Lowers k as a persistent, warp-specialised kernel (sm_90a): each CTA has
 * a producer warpgroup, which issues every TMA copy of the tl_pipelined
 * loop, and two consumer warpgroups that take turns, each running the
 * block body for its own blocks (tiles), so that one's epilogue (the
 * statements after the loop) overlaps the other's main loop on the tensor
 * cores. The grid becomes persistent: min(ceil(blocks / 2), SMs) CTAs of
 * 384 threads walk the blocks in order (tl_block_idx and tl_use_swizzle
 * keep their meaning). Requirements, checked by tl_compile
 * (TL_ERR_UNSUPPORTED, naming the one not met): target sm_90a; 128
 * threads per block (one warpgroup); a 2-D grid; exactly one tl_pipelined
 * loop, at the top of the body, of at least 3 stages, whose copies can be
 * TMA boxes and whose compute is one wgmma tl_gemm. At launch the tensors
 * the loop copies must suit TMA (16-byte aligned base and rows), else
 * tl_launch returns TL_ERR_UNSUPPORTED. Shared buffers outside the
 * pipeline are private to each consumer (twice the memory). on: 1 or 0. */
TL_API void tl_use_pingpong(tl_kernel *k, int on);

/* ------------------------------------------------------------------------ */
/* Compilation                                                               */
/* ------------------------------------------------------------------------ */

typedef struct tl_program tl_program;

typedef struct tl_compile_options {
    const char *target;  /* NULL: the context's target ("sm_80", "sm_90a")  */
    int no_cache;        /* 1: skip the cache (neither read nor written)     */
    int fast_math;       /* 1: --use_fast_math                                */
    int line_info;       /* 1: -lineinfo (for profilers)                      */
} tl_compile_options;

/* Verifies k, lowers it to CUDA C, compiles it with NVRTC (or takes the
 * cubin from the cache) and, on a context with a device whose architecture
 * matches the target, loads it. `opt` may be NULL. *out is a new program the
 * caller destroys. Errors: the kernel's recorded error; TL_ERR_SCOPE
 * (unclosed scope), TL_ERR_INVALID_ARG (empty kernel, no tl_grid);
 * TL_ERR_NO_NVRTC; TL_ERR_COMPILE (the NVRTC log is on the context and in
 * tl_program_log is not available since no program is made); TL_ERR_CUDA. */
TL_API tl_status tl_compile(tl_kernel *k, const tl_compile_options *opt, tl_program **out);
TL_API void tl_program_destroy(tl_program *p);

/* The generated CUDA C (NUL-terminated, owned by p). */
TL_API const char *tl_program_source(const tl_program *p);
/* The cubin (owned by p). */
TL_API const void *tl_program_cubin(const tl_program *p, size_t *size);

/* Lowers k to CUDA C without compiling it. *src is malloc'ed; free it with
 * tl_free_host. */
TL_API tl_status tl_kernel_source(tl_kernel *k, const char *target, char **src);
/* Lowers and compiles k to PTX for target (NULL: the context's). *ptx is
 * malloc'ed; free with tl_free_host. Errors as tl_compile. */
TL_API tl_status tl_kernel_ptx(tl_kernel *k, const char *target, char **ptx);
/* Frees memory the library handed to the caller (NULL allowed). */
TL_API void tl_free_host(void *p);

typedef struct tl_program_info {
    char name[64];         /* the kernel's extern "C" symbol            */
    char target[16];       /* e.g. "sm_90a"                             */
    int loaded;            /* 1 when it can be launched in this context */
    int from_cache;        /* 0 compiled now, 1 memory hit, 2 disk hit  */
    double compile_ms;     /* lowering + NVRTC (0 on a cache hit)       */
    int num_params;        /* launch arguments expected                 */
    int threads;           /* threads per block                         */
    int smem_bytes;        /* dynamic shared memory per block           */
    int regs;              /* registers per thread (0 when not loaded)  */
} tl_program_info;
TL_API tl_status tl_program_get_info(const tl_program *p, tl_program_info *out);

/* Name and kind of parameter i (in launch order). */
typedef enum tl_param_kind { TL_PARAM_TENSOR, TL_PARAM_DIM, TL_PARAM_SCALAR } tl_param_kind;
typedef struct tl_param_info {
    const char *name;   /* owned by the program */
    tl_param_kind kind;
    tl_dtype dtype;     /* element type (tensor), i64 (dim), scalar's type */
    int rank;           /* tensors */
    int written;        /* tensors the kernel stores to */
} tl_param_info;
TL_API tl_status tl_program_param(const tl_program *p, int i, tl_param_info *out);

/* ------------------------------------------------------------------------ */
/* Launching                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum tl_arg_kind { TL_ARG_DEVICE_PTR = 1, TL_ARG_HOST_PTR, TL_ARG_INT, TL_ARG_FLOAT } tl_arg_kind;
typedef struct tl_arg {
    tl_arg_kind kind;
    union { uint64_t dptr; void *hptr; int64_t i; double f; } v;
} tl_arg;

static inline tl_arg tl_arg_dptr(uint64_t p) { tl_arg a; a.kind = TL_ARG_DEVICE_PTR; a.v.dptr = p; return a; }
static inline tl_arg tl_arg_hptr(void *p) { tl_arg a; a.kind = TL_ARG_HOST_PTR; a.v.hptr = p; return a; }
static inline tl_arg tl_arg_int(int64_t i) { tl_arg a; a.kind = TL_ARG_INT; a.v.i = i; return a; }
static inline tl_arg tl_arg_float(double f) { tl_arg a; a.kind = TL_ARG_FLOAT; a.v.f = f; return a; }

/* Launches p with one argument per parameter, in declaration order: device
 * pointers for tensors, integers for dims and integer scalars, floats for
 * float scalars. The grid comes from the dims. Dynamic shared memory is set
 * as the program needs. Every tensor is checked against the arguments
 * first: its extents and strides must evaluate >= 0, its offsets must stay
 * within 2^63 bytes, and its pointer must be aligned to the element size
 * and non-null unless the tensor is empty. Errors: TL_ERR_LAUNCH_ARGS
 * (count, kinds, a NULL args with nargs > 0, negative dims, a tensor that
 * fails those checks, a grid beyond the device's limits), TL_ERR_NO_DEVICE
 * (offline or not loaded), TL_ERR_CUDA. A grid of zero blocks launches
 * nothing. */
TL_API tl_status tl_launch(const tl_program *p, void *stream, int nargs, const tl_arg *args);

/* Runs the kernel graph on the CPU (the golden model): host pointers for
 * tensors, block by block, iteration by iteration. Meant for small inputs.
 * Arguments are checked as by tl_launch (a tensor's host buffer must hold
 * every element its extents and strides reach). Errors:
 * TL_ERR_LAUNCH_ARGS, TL_ERR_OUT_OF_MEMORY, and the kernel's recorded
 * error. */
TL_API tl_status tl_interpret(tl_kernel *k, int nargs, const tl_arg *args);
TL_API tl_status tl_program_interpret(const tl_program *p, int nargs, const tl_arg *args);

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct tl_timing_options {
    int warmup;    /* untimed runs first (default 5 when 0)            */
    int reps;      /* timed runs (default 20 when 0)                   */
    int flush_l2;  /* 1: overwrite a buffer twice the L2 before each run */
} tl_timing_options;

typedef struct tl_timing {
    double median_ms, min_ms, mean_ms, max_ms;
    int reps;
} tl_timing;

/* A unit of device work to time: enqueue it on `stream`, return a status. */
typedef tl_status (*tl_work_fn)(void *user, void *stream);

/* Times `fn` with CUDA events around each repetition. opt may be NULL.
 * Errors: TL_ERR_NO_DEVICE, TL_ERR_CUDA, or the first failure of fn. */
TL_API tl_status tl_time(tl_ctx *ctx, void *stream, tl_work_fn fn, void *user,
                         const tl_timing_options *opt, tl_timing *out);
/* Times n works together: after `warmup` rounds of all of them, each of
 * the `reps` repetitions runs fns[0](users[0]), ..., fns[n-1](users[n-1])
 * in turn, each between its own events, so every work sees the same
 * clocks, temperature and power state (a GPU under sustained load drifts
 * by several percent within a second, which skews back-to-back tl_time
 * calls). out[j] gets work j's summary. reps x n is at most 100000.
 * Errors: TL_ERR_INVALID_ARG (n < 1, a NULL array or fn), those of tl_time. */
TL_API tl_status tl_time_interleaved(tl_ctx *ctx, void *stream, int n, tl_work_fn const *fns, void *const *users,
                                     const tl_timing_options *opt, tl_timing *out);
/* Times launches of p with the given arguments. */
TL_API tl_status tl_time_launch(const tl_program *p, void *stream, int nargs, const tl_arg *args,
                                const tl_timing_options *opt, tl_timing *out);

/* ------------------------------------------------------------------------ */
/* Checking                                                                  */
/* ------------------------------------------------------------------------ */

/* A run of n elements on the host (host != NULL) or the device (dptr). */
typedef struct tl_span {
    tl_dtype dtype;  /* f32, f16, bf16, f64 (i32/i64 compare as numbers) */
    int64_t n;
    const void *host;
    uint64_t dptr;
} tl_span;

typedef struct tl_check_result {
    double rel_err;       /* ||out - ref||_2 / ||ref||_2 (abs norm if ref is 0) */
    double max_abs_err;
    int64_t first_bad;    /* first non-finite or out-of-tolerance element; -1 */
    int64_t nonfinite;    /* NaN or Inf elements in out                   */
    int pass;             /* nonfinite == 0 && rel_err <= tol              */
} tl_check_result;

/* Compares out with ref (same n). An element counts as bad when out is not
 * finite or |out - ref| > tol * max(|ref|, rms(ref)). Device spans need a
 * context with a device (ctx may be NULL for host-only spans).
 * Errors: TL_ERR_INVALID_ARG, TL_ERR_NO_DEVICE, TL_ERR_OUT_OF_MEMORY. */
TL_API tl_status tl_check(tl_ctx *ctx, const tl_span *out, const tl_span *ref, double tol,
                          tl_check_result *res);

/* A reference for tl_program_check: given host copies of the arguments
 * (tensors as TL_ARG_HOST_PTR), it computes the written tensors in place. */
typedef tl_status (*tl_ref_fn)(void *user, int nargs, const tl_arg *host_args);

/* Checks a program on the device against a reference: copies every tensor
 * argument to the host, runs the reference (ref NULL: the CPU interpreter)
 * on the copies, launches p, and compares each tensor p writes. *res gets
 * the worst tensor's result. Tensors must be contiguous spans from their
 * pointer to their last element. */
TL_API tl_status tl_program_check(const tl_program *p, void *stream, int nargs, const tl_arg *args,
                                  tl_ref_fn ref, void *ref_user, double tol, tl_check_result *res);

/* ------------------------------------------------------------------------ */
/* The cache                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct tl_cache_stats {
    char dir[1024];          /* "" when the disk cache is off            */
    int disk_enabled;        /* 0 when off or fallen back to memory      */
    int64_t disk_entries, disk_bytes;
    int64_t mem_entries;
    int64_t mem_hits, disk_hits, misses, stores, corrupt_rebuilt;
} tl_cache_stats;

/* The cache's directory and counters. Errors: TL_ERR_INVALID_ARG. */
TL_API tl_status tl_cache_stats_get(tl_ctx *ctx, tl_cache_stats *out);
/* Removes every entry from memory and disk: files in the directory that
 * are named like entries and start as entries do (others are left alone),
 * and whatever is in the way at a path the cache owns (a directory where
 * an entry goes, a file where a shard directory goes). The directory may
 * be shared by other users: entries are read only when they are regular
 * files (never through a symlink, never blocking on a FIFO), and an
 * obstacle costs only the entries it blocks their disk copy, with one
 * warning. Errors: TL_ERR_IO. */
TL_API tl_status tl_cache_clear(tl_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Prebuilt operations                                                       */
/* ------------------------------------------------------------------------ */

/* c[i] = a[i] + b[i] for i < n; a, b, c device pointers of `dtype` (f32,
 * f16, bf16), any n >= 0, any alignment of the element type (a pointer
 * not aligned to its element size is TL_ERR_INVALID_ARG, before any
 * launch). */
typedef struct tl_vadd_desc {
    tl_dtype dtype;
    int64_t n;
} tl_vadd_desc;

/* Runs the vector add on stream. The program is compiled on first use and
 * kept in the context. Errors: TL_ERR_INVALID_ARG, TL_ERR_DTYPE, and those
 * of tl_compile and tl_launch. */
TL_API tl_status tl_op_vadd(tl_ctx *ctx, const tl_vadd_desc *d, uint64_t a, uint64_t b,
                            uint64_t c, void *stream);
/* The compiled program tl_op_vadd uses (owned by the context). */
TL_API tl_status tl_op_vadd_program(tl_ctx *ctx, const tl_vadd_desc *d, const tl_program **out);

/* C = epilogue(A * B [+ bias]): row-major, A [M, K]; B [K, N], or [N, K]
 * with trans_b; bias [N] (same dtype as A) or none; f32 accumulation; the
 * epilogue fused into the register accumulator before the single store. */
typedef enum tl_epilogue {
    TL_EPI_NONE = 0,
    TL_EPI_RELU,
    TL_EPI_GELU_ERF,   /* x * 0.5 * (1 + erf(x / sqrt 2)) */
    TL_EPI_GELU_TANH   /* x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} tl_epilogue;

/* A schedule: the block tile, K step, pipeline depth, threads and L2
 * swizzle panel. An all-zero schedule is the target's default: on sm_90a,
 * for a GEMM with a bias or an activation, the ping-pong kernel with
 * 128x128x64 blocks, 4 stages, 128 threads, swizzle 8 when TMA can read
 * the operands (K, and N for B as [K, N], multiples of 8; 16-byte aligned
 * pointers); otherwise the classic wgmma kernel with 128x256x64 blocks, 4
 * stages, 256 threads; elsewhere mma.sync with 128x256x32, 3 stages, 256
 * threads. In any other schedule zero fields take the classic default's
 * values and swizzle 0 is off. */
typedef struct tl_gemm_schedule {
    int block_m, block_n, block_k;
    int stages;
    int threads;
    int swizzle;
    unsigned warp_policy;   /* TL_GEMM_WARP_SQUARE, _ROWS or _COLS (any
                               other value: TL_ERR_INVALID_ARG) */
    int pingpong;           /* 1: tl_use_pingpong (sm_90a; threads must be
                               128, block_k 64, stages >= 3): persistent
                               CTAs whose two consumer warpgroups overlap
                               one block's epilogue with the next one's
                               main loop. Operands that TMA cannot take
                               (not 16-byte aligned) fall back to the
                               default schedule at launch. */
} tl_gemm_schedule;

typedef struct tl_gemm_desc {
    int64_t m, n, k;
    tl_dtype in_dtype;      /* bf16 or f16 */
    tl_dtype out_dtype;     /* bf16, f16 or f32 */
    int trans_b;            /* B given as [N, K] */
    int has_bias;
    tl_epilogue epilogue;
    tl_gemm_schedule schedule; /* zeros: defaults */
} tl_gemm_desc;

/* Runs the GEMM on stream. a, b, c (and bias when has_bias) are device
 * pointers, aligned to their element size. Any M, N, K >= 1: ragged edges
 * are masked; rows that start 16-byte aligned (K, and N for B as [K, N],
 * multiples of 8, pointers 16-byte aligned) take the asynchronous-copy fast
 * path, others an element-wise path. C = act(A B + bias) in f32 on the
 * accumulator; the activations use tl_use_fast_math (the tanh GELU on the
 * hardware tanh, relative error about 2^-11; the erf GELU on an erf with
 * absolute error below 1e-6), well below the rounding of a 16-bit output.
 * Errors: TL_ERR_INVALID_ARG (sizes, misaligned pointers, which one),
 * TL_ERR_DTYPE, those of tl_compile and tl_launch. */
TL_API tl_status tl_op_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias,
                            uint64_t c, void *stream);
/* The schedule tl_op_gemm_program compiles for d: d->schedule with the
 * target's defaults filled in (see tl_gemm_schedule). tl_op_gemm itself
 * runs the classic default instead of a ping-pong schedule when a or b is
 * not 16-byte aligned. A NULL ctx or d, or an invalid d, gives zeros. */
TL_API tl_gemm_schedule tl_op_gemm_schedule(tl_ctx *ctx, const tl_gemm_desc *d);
/* The compiled program tl_op_gemm uses for d (owned by the context). Its
 * launch arguments: M, N, K, A, B, [bias,] C. */
TL_API tl_status tl_op_gemm_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_program **out);
/* Builds the GEMM kernel of d (schedule included) for inspection or
 * sweeping. *out is a new kernel the caller destroys. */
TL_API tl_status tl_op_gemm_build(tl_ctx *ctx, const tl_gemm_desc *d, tl_kernel **out);

/* The same GEMM through cuBLAS, as the baseline of benchmarks and the
 * reference of GPU tests (the library's own kernels never call it). Same
 * semantics as tl_op_gemm: row-major A [M, K], B [K, N] or [N, K] with
 * trans_b, bias [N] of in_dtype, f32 accumulation, C of out_dtype (the
 * input type or f32; cuBLAS has no other). The schedule is ignored. No
 * bias and no epilogue: cublasGemmEx; otherwise cublasLtMatmul with the
 * BIAS, RELU, RELU_BIAS, GELU or GELU_BIAS epilogue (cuBLASLt's GELU is the
 * tanh form, so TL_EPI_GELU_TANH maps to it and TL_EPI_GELU_ERF is
 * TL_ERR_UNSUPPORTED). cuBLAS and cuBLASLt are loaded on first use; their
 * handles, a 32 MiB workspace and the last cuBLASLt plans stay in the
 * context until it is destroyed. Any sizes and alignments. Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_DTYPE, TL_ERR_UNSUPPORTED (a combination
 * cuBLAS(Lt) does not offer), TL_ERR_NO_DEVICE (offline context),
 * TL_ERR_NO_CUBLAS (the libraries cannot be loaded), TL_ERR_CUDA (a cuBLAS
 * call failed: the message names it and its status). */
TL_API tl_status tl_baseline_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias,
                                  uint64_t c, void *stream);

/* c[i, j] = act(c[i, j] + bias[j]) in place, for c [m, n] row-major and
 * bias [n] (0: none), both of dtype (f32, f16, bf16; 16-bit values are
 * computed in f32), act one of tl_epilogue (TL_EPI_NONE: the bias alone).
 * An element-wise kernel of its own: the unfused epilogue that a fused
 * GEMM is measured against. Compiled on first use and kept in the context.
 * c and bias must be aligned to the element size. Errors:
 * TL_ERR_INVALID_ARG (sizes, a null c, a misaligned pointer),
 * TL_ERR_DTYPE, TL_ERR_NO_DEVICE, those of tl_compile and tl_launch. */
TL_API tl_status tl_bias_act(tl_ctx *ctx, tl_dtype dtype, int64_t m, int64_t n, uint64_t c, uint64_t bias,
                             tl_epilogue epi, void *stream);
/* Builds the kernel of tl_bias_act: Y[i, j] = act(X[i, j] + bias[j]).
 * Launch arguments: M, N, X, [bias,] Y (bias when has_bias). X and Y may be
 * the same tensor (tl_bias_act passes c for both); as two parameters the
 * loads of X stay vectorised, which a tensor both read and written in one
 * loop would not be. *out is a new kernel the caller destroys. Errors:
 * TL_ERR_DTYPE, TL_ERR_INVALID_ARG (unknown epilogue). */
TL_API tl_status tl_bias_act_build(tl_ctx *ctx, tl_dtype dtype, tl_epilogue epi, int has_bias, tl_kernel **out);

/* Builds the kernel of a prebuilt op by name ("vadd") with its default
 * schedule for `dtype`. *out is a new kernel the caller destroys.
 * Errors: TL_ERR_INVALID_ARG (unknown op), TL_ERR_DTYPE. */
TL_API tl_status tl_op_build(tl_ctx *ctx, const char *op, tl_dtype dtype, tl_kernel **out);
/* NULL-terminated list of op names for tl_op_build. Static storage. */
TL_API const char *const *tl_op_names(void);

#ifdef __cplusplus
}
#endif
#endif /* TILEC_H */
