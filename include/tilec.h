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
    TL_BOOL, /* result of comparisons; not a tensor element type     */
    TL_F8E4M3, /* 8-bit float, 4 exponent bits (bias 7), 3 mantissa bits:
                  largest 448, no infinity, NaN 0x7f / 0xff (OCP FP8 E4M3) */
    TL_F8E5M2  /* 8-bit float, 5 exponent bits (bias 15), 2 mantissa bits:
                  largest 57344, infinities and NaNs as IEEE (OCP FP8 E5M2) */
} tl_dtype;

/* Size of one element in bytes (TL_BOOL: 1); 0 for TL_DTYPE_INVALID. */
TL_API size_t tl_dtype_size(tl_dtype dt);
/* Constant name such as "f32", "bf16"; "invalid" for unknown values. */
TL_API const char *tl_dtype_name(tl_dtype dt);
/* Parses "f32", "f16", "bf16", "i32", "i64", "f64", "f8e4m3", "f8e5m2";
 * TL_DTYPE_INVALID else. */
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
TL_API tl_status tl_ctx_get_device_info(tl_ctx *ctx, tl_device_info *out);

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
 * [lo, hi)), f8e4m3, f8e5m2. The 16- and 8-bit floats are the f32 draw
 * rounded to nearest even (tl_f32_to_f16, tl_f32_to_f8e4m3, ...): between
 * lo and hi each rounded to the type, hi's rounding included. lo <= hi,
 * both finite; for i32 both within [-2^31, 2^31], for f8e4m3 within
 * [-448, 448], for f8e5m2 within [-57344, 57344] (the finite range:
 * nothing saturates). Errors: TL_ERR_INVALID_ARG (a bad range, dtype,
 * n < 0, a null or, on the device, misaligned pointer); tl_random_fill
 * also TL_ERR_NO_DEVICE and those of tl_launch. */
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
/* Host conversions between float and the 8-bit types: to nearest even,
 * saturating (a value beyond the largest finite one, infinity included,
 * gives the largest finite one with its sign: PTX's cvt.rn.satfinite);
 * NaN gives 0x7f. The results match the device's conversions bit for bit. */
TL_API uint8_t tl_f32_to_f8e4m3(float x);
TL_API float tl_f8e4m3_to_f32(uint8_t v);
TL_API uint8_t tl_f32_to_f8e5m2(float x);
TL_API float tl_f8e5m2_to_f32(uint8_t v);

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
 * dropped. Element types: f32, f16, bf16, i32, i64, f64, f8e4m3, f8e5m2.
 * Errors: TL_ERR_SHAPE (rank not in 1..TL_MAX_RANK, a negative constant
 * extent or stride), TL_ERR_DTYPE (a non-integer extent, a bad element
 * type), TL_ERR_INVALID_ARG (an extent the host cannot compute, a name). */
TL_API tl_buf tl_param_tensor(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                              const tl_expr *shape, const tl_expr *strides);
/* A tensor per block, from an array of pointers (the batch of
 * cublasGemmBatchedEx): the launch argument is a device pointer to `count`
 * device pointers (8-byte aligned array), and the block whose index along
 * block axis `axis` (0, 1, 2: tl_block_idx's) is i uses the tensor at
 * pointer i, of this shape, strides (NULL: row-major) and dtype, as
 * tl_param_tensor declares one. Each launch checks that the grid along
 * `axis` is at most `count` (TL_ERR_LAUNCH_ARGS) and that the array is not
 * null when a block uses it; the tensors the pointers point at cannot be
 * checked (they are in device memory): each must be aligned to its
 * element, and hold every element the shape and strides reach. Their
 * copies into shared memory go element by element (no TMA, no cp.async:
 * their alignment is unknown at the launch). The interpreter takes a host
 * array of host pointers. tl_program_check and tl_autotune's custom
 * kernels, which copy tensors to the host, refuse such parameters
 * (TL_ERR_UNSUPPORTED). count: an integer computable from the parameters.
 * Errors: those of tl_param_tensor, and TL_ERR_INVALID_ARG for an axis
 * outside 0..2 or a count the host cannot compute. */
TL_API tl_buf tl_param_tensor_array(tl_kernel *k, const char *name, tl_dtype dtype, int rank,
                                    const tl_expr *shape, const tl_expr *strides, tl_expr count, int axis);

/* How the L2 cache should treat a global tensor's lines (tl_use_cache_policy). */
typedef enum tl_cache_policy {
    TL_CACHE_DEFAULT = 0,     /* the hardware's normal replacement                          */
    TL_CACHE_EVICT_FIRST = 1  /* read (or written) once by the whole kernel: its lines are
                                 the first the L2 replaces, so that streaming it through
                                 neither writes back nor displaces what the L2 holds for
                                 others (tensors reused across blocks, the data of the
                                 kernels around this one) */
} tl_cache_policy;
/* Sets the L2 policy of the global tensor buf's accesses: its 16-byte
 * vector loads and stores, its cp.async copies and its TMA loads (not TMA
 * multicast loads or TMA stores, which keep the default; nor element-wise
 * accesses at a tensor's ragged edges). A hint only: results are the same
 * either way, and the interpreter ignores it. Worth it for an operand the
 * kernel streams through once (a decode GEMM's weights); harmful for one
 * that other blocks read again soon after. Errors: TL_ERR_INVALID_ARG (buf
 * null, of another kernel or not a global tensor; policy not one of
 * tl_cache_policy). */
TL_API void tl_use_cache_policy(tl_kernel *k, tl_buf buf, tl_cache_policy policy);

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
/* v, computed once for each block (each block a persistent CTA runs),
 * where the block's indices are known, instead of wherever it is used:
 * a kernel's own mapping of its block index (divisions by run-time
 * values), which would otherwise be computed again at every use, inside
 * loops too. v may use constants, parameters (dims and scalars) and
 * tl_block_idx only. Returns v itself where it is a constant, a parameter
 * or a block index. Errors: TL_ERR_INVALID_ARG (a loop variable or a load
 * in v). */
TL_API tl_expr tl_block_value(tl_kernel *k, tl_expr v);
/* Converts among f32, f16, bf16, f8e4m3, f8e5m2, f64, i32, i64 (floats to
 * ints truncate; to f16/bf16 rounds to nearest even, to the 8-bit floats
 * too, saturating as tl_f32_to_f8e4m3 does). An f64 or integer value is
 * rounded once, from the whole value, on the device as in the interpreter
 * (not first to f32). */
TL_API tl_expr tl_cast(tl_kernel *k, tl_expr a, tl_dtype dtype);

/* Float-only math (the 16- and 8-bit floats are computed in f32 and
 * rounded back). */
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
/* Asks for `blocks` blocks of this kernel to fit on an SM at once (the
 * minimum of CUDA's __launch_bounds__): the registers of a thread are
 * capped at the target's registers per SM / (blocks x threads), and
 * ptxas spills what does not fit (tl_program_get_info's blocks_per_sm
 * tells what the launch gets). Worth it where blocks take turns, one
 * loading while another computes, and the compiler would otherwise spend
 * registers on unrolling. 0 (the default) leaves it to the lowering (which
 * asks for 2 where two wgmma blocks fit). Errors: TL_ERR_INVALID_ARG
 * (blocks outside 0..32). */
TL_API void tl_use_min_blocks(tl_kernel *k, int blocks);

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
 * and locals), element types f32, f16, bf16, f8e4m3, f8e5m2. The library
 * lays it out (XOR-swizzled for conflict-free tensor-core loads) and multi-buffers it
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
 * the tensor's edges (reads give 0, writes are dropped). A tile may have
 * fewer dimensions than its tensor: its leading extents are then 1 (a
 * [S, D] tile of one head of a [B, H, S, D] tensor). Lowered to TMA or
 * 16-byte cp.async for global -> shared (the launch checks the tensor's
 * alignment and runs a safe variant of the program when it is missing),
 * vector accesses for fragments <-> global, register moves for fragment ->
 * fragment (same layout). Supported: global -> shared, shared -> global,
 * fragment -> global, fragment -> shared, shared -> fragment, global ->
 * fragment, fragment -> fragment; elements f32, f16, bf16, f8e4m3 or
 * f8e5m2 on both sides.
 * Errors: TL_ERR_UNSUPPORTED (direction), TL_ERR_DTYPE, TL_ERR_SHAPE,
 * TL_ERR_SCOPE (inside tl_parallel, or a tile region whose loop has
 * closed), TL_ERR_INVALID_ARG. */
TL_API void tl_copy(tl_kernel *k, tl_region src, tl_region dst);
/* Sets every element of a shared, fragment or local buffer to 0 / value. */
TL_API void tl_clear(tl_kernel *k, tl_buf buf);
TL_API void tl_fill(tl_kernel *k, tl_buf buf, tl_expr value);

/* A software-pipelined loop over [0, extent): the tl_copy statements into
 * shared memory at the start of its body run `stages - 1` iterations ahead
 * of the rest (multi-buffered shared tiles, asynchronous copies). stages
 * is 1..8; 1 is a plain loop (tl_use_pingpong asks for more: see there).
 * Returns the loop variable; closed by tl_end. Errors: TL_ERR_INVALID_ARG
 * (stages not in 1..8), TL_ERR_DTYPE (extent not an integer), TL_ERR_SCOPE
 * (inside tl_parallel), TL_ERR_UNSUPPORTED (inside another tl_pipelined). */
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
/* C += A * B on the tensor cores: A and B bf16 or f16 (the same), B in
 * shared memory, A in shared memory or in registers (a 16-bit fragment
 * copied from an accumulator whose warps split the rows as C's do, e.g.
 * FlashAttention's P = softmax(S)), C an f32 fragment [M, N]. A and B may
 * instead be 8-bit floats (f8e4m3 or f8e5m2, the two may differ), both
 * K-major in shared memory (A [M, K], B [N, K] with TL_GEMM_TRANS_B; else
 * TL_ERR_UNSUPPORTED here), which runs on wgmma only (sm_90a; other targets:
 * TL_ERR_UNSUPPORTED from tl_compile) in K steps of 32. The block's
 * warps must split C into warp tiles whose sides are multiples of 16, and K
 * into steps of 16. The lowering picks the target's best tensor-core atom
 * (wgmma on sm_90a when the tiles allow it: M a multiple of 64 per
 * warpgroup, N a multiple of 16 up to 256, A's K a multiple of 64 in shared
 * memory; mma.sync otherwise). A transposed A (TL_GEMM_TRANS_A: A [K, M]
 * in shared memory, read M-major) runs on wgmma only: where its tiles do
 * not fit wgmma, tl_compile gives TL_ERR_UNSUPPORTED. Two gemms in a row
 * on the same A in shared memory (B as [N, K], K = 64) run as one wider
 * wgmma. Errors: TL_ERR_SHAPE (the sizes disagree or no MMA layout can
 * tile them), TL_ERR_DTYPE, TL_ERR_INVALID_ARG (operand kinds, unknown
 * flag bits, both warp policies, tl_grid not called yet),
 * TL_ERR_UNSUPPORTED (a transposed A in registers). */
TL_API void tl_gemm(tl_kernel *k, tl_buf A, tl_buf B, tl_buf C, unsigned flags);

/* Reductions along one dimension, after TileLang's T.reduce_*: for every
 * index of dst, dst[rest] = op over i of src[..., i, ...], i at position
 * `dim` of src. dst has src's shape without dimension dim (src [R, C] with
 * dim 1 gives dst [R]; a rank-1 src reduces into a fragment of shape [1]).
 * src is a fragment or a shared tile, dst a fragment; each of them f32,
 * f16 or bf16, in any mix. The arithmetic is f32 and the result is rounded
 * to dst's dtype. clear != 0 overwrites dst; clear == 0 combines the result
 * with dst's old values (a running max or sum over the iterations of a
 * loop). Each op folds the elements into its identity, or into dst's old
 * value when clear is 0:
 *   tl_reduce_max     the largest element     (identity -inf)
 *   tl_reduce_min     the smallest element    (identity +inf)
 *   tl_reduce_sum     the sum of the elements (identity 0), added in f32 in
 *                     an order of the library's (the CPU interpreter adds
 *                     exactly and rounds once: results differ by rounding)
 *   tl_reduce_absmax  the largest |element|   (identity 0)
 * max, min and absmax skip NaN elements as fmaxf and fminf do (a row of
 * NaN gives the identity); sum propagates them.
 * A tile statement: the whole block runs it, so it may stand at the top
 * level or inside tl_serial, tl_pipelined and tl_if, not inside
 * tl_parallel. The reduced fragment is used in tl_parallel loops over its
 * own shape, or over the full shape of the tile it was reduced from,
 * indexed by the loop variables of its remaining dimensions: broadcast
 * along the reduced one. With m the row maxima (dim 1) of x [R, C]:
 *     tl_expr v[2];
 *     tl_parallel(k, 2, (int64_t[]){R, C}, v);        // x[i, j] -= m[i]
 *     tl_store(k, x, v, tl_sub(k, tl_load(k, x, v), tl_load(k, m, &v[0])));
 *     tl_end(k);
 * (a [1] fragment reduced from a rank-1 tile is read at index tl_int(k, 0)).
 * Errors: TL_ERR_INVALID_ARG (dim not a dimension of src; src not a
 * fragment or shared tile, dst not a fragment, src and dst the same
 * buffer), TL_ERR_SHAPE (dst's shape, which the message spells out),
 * TL_ERR_SCOPE (inside tl_parallel). Whether the lowering can reduce a
 * fragment's layout is checked by tl_compile. */
TL_API void tl_reduce_max(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear);
TL_API void tl_reduce_sum(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear);
TL_API void tl_reduce_min(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear);
TL_API void tl_reduce_absmax(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear);

/* Deferred sums, after TileLang's T.alloc_reducer / T.finalize_reducer. A
 * row sum reduced from a fragment ends with an exchange among the threads
 * that hold the row (shuffles, and shared memory when warps share it). A
 * sum that is only carried along (FlashAttention's running denominator
 * l = l alpha + rowsum P, tile after tile) needs that exchange once, at
 * the end: a reducer is a fragment whose holders each keep a part of each
 * element, and tl_finalize_reducer adds the parts up.
 *   tl_alloc_reducer: an f32 fragment like tl_alloc_fragment's, marked
 *     as a reducer. Returns the buffer, or TL_NONE_BUF (errors as
 *     tl_alloc_fragment's; TL_ERR_DTYPE for a dtype other than f32).
 *   tl_reduce_sum into a reducer leaves each holder its own part.
 *   tl_finalize_reducer(k, r): from here on every holder of an element of
 *     r has the whole sum; r is an ordinary fragment for the rest of the
 *     kernel and may not be written again. At the body's top level (not
 *     inside a loop or tl_if), once per reducer. Errors: TL_ERR_INVALID_ARG
 *     (r is not a reducer, or is finalized already), TL_ERR_SCOPE (inside a
 *     scope).
 * Until it is finalized, a reducer may be written only by tl_clear, by
 * tl_reduce_sum of a fragment (with clear or not), by tl_copy from another reducer, and
 * by tl_store of an expression linear in reducers' loads with no other
 * term (l * alpha + rowsum: each part scaled and added as the whole would
 * be; alpha and every factor the same for all holders, as every ordinary
 * fragment element is); and read only there. Anything else (a reducer in a
 * tl_if, a gemm, a reduce source or a non-linear expression, a write after
 * the finalize) is refused by tl_compile with TL_ERR_INVALID_ARG and a
 * message naming the call. The interpreter keeps each element whole, so
 * its results are those of the same kernel with plain fragments. */
TL_API tl_buf tl_alloc_reducer(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape);
TL_API void tl_finalize_reducer(tl_kernel *k, tl_buf r);

/* Thread-block clusters (sm_90 and later): the grid's blocks in groups of
 * cx x cy x cz that the GPU runs at the same time, on nearby SMs, and that
 * can read each other's shared memory. A cluster is the blocks whose
 * indices divided by (cx, cy, cz) agree; a block's rank in its cluster is
 * (bx % cx) + cx ((by % cy) + cy (bz % cz)), computable from tl_block_idx.
 * Each extent 1..8 and their product 1..8 (the portable cluster size); all
 * 1 (the default) means no clusters. Every launch checks that the grid is
 * a multiple of the cluster along each axis (TL_ERR_LAUNCH_ARGS).
 *
 * A tl_pipelined loop at the body's top level whose copies TMA makes (the
 * wgmma loop of one warpgroup, or tl_use_warp_specialize) shares tiles
 * between the blocks of a cluster: a copy whose source tile does not
 * depend on tl_block_idx along some cluster axes is the same tile for the
 * blocks that differ only along those axes, so each of them loads a slice
 * of its rows and TMA multicasts the slices to all of them (the tile's
 * rows must split into slices of whole multiples of 8). A slot of the ring
 * is then refilled only once every block of the cluster has released it,
 * with cluster barriers before the loop and after it (before the
 * epilogue's stores). tl_use_swizzle
 * moves whole clusters, each block keeping its place in its cluster.
 *
 * Compiling for a target without clusters, or with tl_use_pingpong or
 * tl_use_persistent, gives TL_ERR_UNSUPPORTED. Errors: TL_ERR_INVALID_ARG
 * (the extents), TL_ERR_SCOPE (after the first statement). */
TL_API void tl_cluster(tl_kernel *k, int cx, int cy, int cz);

/* All-reduce of a fragment across the blocks of a cluster: afterwards
 * every block of the cluster holds, at each index i of `buf`, op over the
 * cluster's blocks of their buf[i] (max, sum, min; absmax: the largest
 * |buf[i]|), combined in f32 in rank order, so that every block gets the
 * same bits. A row split over a cluster reduces its part in each block
 * with tl_reduce_* and then combines the parts with this:
 *     tl_reduce_max(k, x, m, 1, 1);          // this block's columns
 *     tl_cluster_reduce_max(k, m);           // the whole row's
 * The exchange goes through shared memory (a slot per element, read by the
 * other blocks with ld.shared::cluster) and a cluster barrier. Every
 * thread of every block of the cluster must reach each call, the same
 * number of times: outside tl_parallel, and not under a condition that
 * differs between the blocks of a cluster (the interpreter reports one
 * that does; on the GPU it hangs). Needs tl_cluster. Errors:
 * TL_ERR_INVALID_ARG (buf not a fragment, or not f32, f16 or bf16; no
 * tl_cluster), TL_ERR_SCOPE (inside tl_parallel). */
TL_API void tl_cluster_reduce_max(tl_kernel *k, tl_buf buf);
TL_API void tl_cluster_reduce_sum(tl_kernel *k, tl_buf buf);
TL_API void tl_cluster_reduce_min(tl_kernel *k, tl_buf buf);
TL_API void tl_cluster_reduce_absmax(tl_kernel *k, tl_buf buf);
/* The sum for one block: block `root` (its rank in the cluster) of every
 * cluster gets, at each index, the sum over the cluster's blocks (in rank
 * order, in f32); the others' buf keeps its values. Only the root reads
 * the other blocks' slots, which is what a split-K GEMM needs (one block
 * stores the tile). The same rules as tl_cluster_reduce_sum. Errors: its
 * errors, and TL_ERR_INVALID_ARG for a root outside 0..cluster size - 1. */
TL_API void tl_cluster_reduce_sum_to(tl_kernel *k, tl_buf buf, int root);

/* Rasterises blocks for L2 reuse: consecutive blocks walk down a panel of
 * `panel` block rows (gridDim.y) before moving along the row. The kernel
 * sees the remapped tl_block_idx. 0 or 1: off. */
TL_API void tl_use_swizzle(tl_kernel *k, int panel);

/* Warp specialisation: one more warpgroup joins each block as the producer
 * of the kernel's tl_pipelined loop: it issues every copy into shared
 * memory of every iteration (TMA boxes from one thread when the tiles allow
 * it, else cp.async or plain copies from its 128 threads) into a ring of
 * `stages` slots, each slot's readiness an mbarrier; the block's own
 * threads run everything else the loop holds (any number of tl_gemm,
 * element-wise loops, reductions) and the rest of the body. With at most 2
 * stages and TMA, tiles read by different statements of the loop (K by
 * one tl_gemm, V by the next) get rings of their own, each slot going back
 * to the producer as soon as its last reader is done rather than at the
 * iteration's end. With TMA, a tl_copy at the body's top level ahead of the
 * loop into a shared tile that only the loop reads (and nothing else
 * writes), FlashAttention's Q, is the producer's too: loaded at each
 * block's start before the ring's tiles, the block's threads waiting for
 * it just before the loop (not in ping-pong's blocks of 128 threads nor
 * with tl_use_stream_k or multicast). On sm_90a the
 * producer gives its registers to the consumers (setmaxnreg). Requirements,
 * checked by tl_compile (TL_ERR_UNSUPPORTED, naming the one not met): the
 * block is whole warpgroups (a multiple of 128 threads); the body holds
 * exactly one tl_pipelined loop, at its top level, of at least 2 stages,
 * starting with at least one copy into shared memory, its trip count not
 * read from memory; mbarriers (sm_80 or later). on: 1 or 0. */
TL_API void tl_use_warp_specialize(tl_kernel *k, int on);

/* Ping-pong: warp specialisation where two consumer warpgroups take turns
 * on the tensor cores, in one of two forms by the block's size:
 *   - blocks of 128 threads: the kernel becomes persistent: min(ceil(blocks
 *     / 2), SMs) CTAs of 384 threads (a producer and two consumer
 *     warpgroups, each running the whole block body for its own blocks,
 *     tl_block_idx and tl_use_swizzle keeping their meaning), and one
 *     consumer's epilogue (the statements after the loop) overlaps the
 *     other's main loop. The pipelined loop needs at least 3 stages and the
 *     same trip count in every block. Shared buffers outside the pipeline
 *     are private to each consumer (twice the memory).
 *   - blocks of 256 or 384 threads (two or three warpgroups, each holding
 *     its own rows of the tl_gemm tiles): each tl_gemm of the pipelined
 *     loop is a turn the groups take in order (0, 1, [2,] 0, ...), so what
 *     one group does between its tensor-core calls (a softmax, say) runs
 *     while the others' are on the tensor cores. Every tl_gemm of the loop
 *     must sit at its top level.
 *     on = 2 also overlaps inside each group (FlashAttention-3's order):
 *     when the loop is [.. gemm g1, other work W, gemm g2 ..], tile j's g1
 *     and tile j - 1's g2 are issued in one turn and W of tile j runs
 *     while g2 is on the tensor cores (the statements up to g1 must not
 *     touch what those from g2 on write, or on = 2 acts as 1; so it
 *     does with tl_use_persistent).
 * Requirements otherwise: those of tl_use_warp_specialize. on: 0, 1 or 2
 * (another value: TL_ERR_INVALID_ARG). */
TL_API void tl_use_pingpong(tl_kernel *k, int on);

/* Persistent CTAs for a warp-specialised kernel: min(blocks, SMs) CTAs,
 * each running the blocks blockIdx.x, blockIdx.x + gridDim.x, ... in turn
 * (tl_block_idx and tl_use_swizzle keep their meaning), all its consumer
 * warpgroups on one block at a time. The producer runs ahead across
 * blocks: it fills the ring with the next block's tiles while the
 * consumers run this block's epilogue (the statements after the loop), so
 * no block pays a pipeline fill, and no CTA is launched per block; a tile
 * the producer loads ahead of the loop (tl_use_warp_specialize) is handed
 * back as soon as the loop has read it for the last time (in its last
 * iteration where the loop's body waits for every wgmma after the gemm that
 * reads it, else after the loop), so the next block's loads under the rest
 * of this one. With
 * TMA (sm_90a), a tl_copy of a whole f32 accumulator to a tile of a 16-bit
 * tensor at the body's top level is stored through a staging tile in
 * shared memory (up to 32 KiB more) by TMA, draining under the next
 * block's main loop, unless something else in the block writes that
 * tensor or reads it afterwards; launches then need the tensor 16-byte
 * aligned, rows of whole 16 bytes (else the safe variant runs).
 * The TMA store is left out when the staging tile would not fit beside
 * the kernel's other shared memory, and under tl_use_pingpong on 256 or
 * 384 threads, whose turns its barriers would realign (the accumulator is
 * then stored from registers). With tl_use_pingpong on 256 or 384 threads
 * the consumer warpgroups go on taking turns across the blocks.
 * Requirements, checked by tl_compile (TL_ERR_UNSUPPORTED, naming the one
 * not met): tl_use_warp_specialize or tl_use_pingpong (ping-pong on 128
 * threads is persistent already), no tl_cluster. The pipelined loop's trip
 * count may depend on tl_block_idx (causal attention): the ring's positions
 * and the turns' numbers are then running sums over the CTA's earlier
 * blocks.
 * on = 2: the same CTAs, each taking its next block from a counter in
 * global memory as it starts one (block blockIdx.x first, then the
 * counter's next value + gridDim.x): the blocks start in the grid's order
 * whatever each CTA takes, as one-block-a-CTA launches run them, and a CTA
 * whose blocks were short takes more (causal attention: blocks of unequal
 * length, longest first). One producer thread takes each number and hands
 * it to the consumers through shared memory. The counter is two words of
 * the library's per-stream workspace (the one tl_use_stream_k's launches
 * use, allocated and zeroed on the stream's first such launch, freed with
 * the context), which every launch leaves zero: the last CTA to finish
 * clears it. Launches on one stream run one after another; launches on
 * different streams use different counters. A stream that is capturing a
 * CUDA graph must have had such a launch before (allocating the workspace
 * waits for the stream: TL_ERR_CUDA while capturing). Further
 * requirements (TL_ERR_UNSUPPORTED): not with tl_use_stream_k, nor with
 * tl_use_pingpong on 128 threads (its two groups take alternate blocks).
 * on: 0, 1 or 2 (another value: TL_ERR_INVALID_ARG from tl_compile). */
TL_API void tl_use_persistent(tl_kernel *k, int on);

/* Stream-K for a persistent kernel (tl_use_persistent): each CTA runs
 * whole blocks for every full wave of blocks (block p G + blockIdx.x in
 * turn, G CTAs), then an equal share of the remaining blocks' iterations
 * of the pipelined loop (their blocks x trip count, cut into G contiguous
 * ranges), so a last wave that does not fill the GPU no longer leaves SMs
 * idle: 3.9 waves of tiles are meant to run as 3.9, not 4 (measured on the
 * H200, bench/NOTES.md: within 1 % of whole blocks on GEMMs of 13-16
 * waves, 5 % slower at 3.9 waves, faster only where whole blocks leave
 * most SMs idle). A block whose iterations two or
 * more CTAs share is finished by the CTA that ran its first iteration: the
 * others write their partial accumulators to a workspace and raise a flag,
 * and it adds them, always in the same order (the result does not depend
 * on timing; it may differ from the unsplit kernel's in the last bits, the
 * sums being associated differently). The library keeps the workspace (an
 * f32 slot of the accumulator per SM, and a flag each) per context and
 * stream, allocated on a stream's first stream-K launch and freed with the
 * context, and launches such kernels cooperatively (every CTA resident at
 * once, which the flags need); the CTA that reads a flag lowers it again,
 * so a launch leaves the flags as it found them (a CUDA graph may capture
 * it, once the stream's workspace exists: a launch that must grow it
 * first waits for the stream, which a capturing stream refuses:
 * TL_ERR_CUDA). Stream-K launches on different streams use different
 * workspaces and may run at once.
 * Requirements, checked by tl_compile (TL_ERR_UNSUPPORTED, naming the one
 * not met), besides tl_use_persistent's: not tl_use_pingpong; the
 * pipelined loop at the body's top level, its body copies and tl_gemm
 * calls into one f32 fragment (the accumulator), which a tl_clear at the
 * top level sets to zero before the loop. What the block does before the
 * loop runs for every unit of it; what it does after, only in the CTA that
 * finishes it. on: 1 or 0. */
TL_API void tl_use_stream_k(tl_kernel *k, int on);

/* Names a shared, fragment or local buffer in the generated code, dumps and
 * messages (otherwise it is tl_smem<N>, tl_frag<N>, tl_local<N>). The name
 * follows the rules of parameter names (see "parameters" above: no C++
 * keyword or reserved spelling, no tl_ prefix, which the library keeps for
 * the names it generates), and is not already a parameter's or another
 * buffer's. Errors: TL_ERR_INVALID_ARG. */
TL_API void tl_name(tl_kernel *k, tl_buf buf, const char *name);

/* ------------------------------------------------------------------------ */
/* Inspecting a kernel                                                       */
/* ------------------------------------------------------------------------ */

/* The kernel's graph as text: parameters, buffers, then every statement
 * with its id, nested bodies indented. *text is malloc'ed (tl_free_host).
 * Works on a kernel with a recorded error too (it shows what was built).
 * Errors: TL_ERR_INVALID_ARG, TL_ERR_OUT_OF_MEMORY. */
TL_API tl_status tl_kernel_dump(tl_kernel *k, char **text);

/* The kernel lowered for target (NULL: the context's) as text after pass
 * `pass` ("verify", "layout", "threads", "reduce", "pipeline", "smem",
 * "sync", "launch"), or after each of them ("all"): what every pass decided
 * (layouts, copy engines, pipeline structure, barriers, the launch plan).
 * Setting the environment variable TILEC_DUMP to a pass name or "all"
 * prints the same on stderr whenever a kernel is compiled. *text is
 * malloc'ed. Errors: TL_ERR_INVALID_ARG (unknown pass), the kernel's
 * recorded error, and those of lowering (as tl_compile). */
TL_API tl_status tl_kernel_lower_dump(tl_kernel *k, const char *target, const char *pass, char **text);

/* A C program that rebuilds k with the same builder calls and prints its
 * generated source: a bug report in one file (compile it against
 * libtilec: cc repro.c -ltilec -ldl -lpthread -lm). It needs no GPU: run
 * without arguments, it prints tl_kernel_source for the target of k's
 * context; a target name as an argument picks another; the argument
 * "dump" prints tl_kernel_dump instead. The rebuilt kernel is the same
 * graph, ids included, so what it prints is byte for byte what k gives (a
 * kernel that does not compile, for a scope left open, fails the same
 * way). *c_source is malloc'ed; free it with tl_free_host. Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_OUT_OF_MEMORY, the kernel's recorded error (a
 * kernel with one has no reproducer; tl_compile records the errors of an
 * incomplete kernel on it). */
TL_API tl_status tl_kernel_reproducer(tl_kernel *k, char **c_source);

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
 * caller destroys. Compiling is verify -> lower (the passes of
 * tl_kernel_lower_dump) -> emit CUDA C -> NVRTC (or the cache). Errors: the
 * kernel's recorded error; TL_ERR_SCOPE (unclosed scope), TL_ERR_INVALID_ARG
 * (empty kernel, no tl_grid, a bad target); TL_ERR_SHAPE, TL_ERR_UNSUPPORTED
 * (the lowering's, naming the builder call at fault); TL_ERR_NO_NVRTC;
 * TL_ERR_COMPILE (NVRTC's log is in the context's message: tl_ctx_error);
 * TL_ERR_CUDA. */
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
/* Lowers and compiles k for target (NULL: the context's) as tl_compile
 * does, with ptxas's verbose report on, and gives the report: NVRTC's log,
 * whose ptxas lines give the kernel's registers per thread, its spill
 * stores and loads and stack, and its performance advisories (codes
 * C75xx, e.g. "wgmma.mma_async instructions are serialized due to
 * insufficient register resources", or a warpgroup.arrive injected). The
 * cubin is neither kept nor cached, and ptxas runs every time (NVRTC 12.9
 * and later is told not to take the cubin from the driver's compute
 * cache, where a hit would come without a report). *report is malloc'ed (an empty string
 * when NVRTC said nothing); free with tl_free_host. Errors as tl_compile. */
TL_API tl_status tl_kernel_ptxas_report(tl_kernel *k, const char *target, char **report);
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
    int blocks_per_sm;     /* blocks one SM holds at once, from its
                              registers, shared memory and threads (0
                              when not loaded or the driver cannot tell) */
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
    int pointer_array;  /* tensors of tl_param_tensor_array: the argument
                           is a device array of device pointers */
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
 * nothing. A program of tl_use_stream_k or tl_use_persistent(k, 2) also
 * gets the library's workspace for stream (allocated and zeroed on its
 * first such launch, which waits for the stream; TL_ERR_OUT_OF_MEMORY when
 * that fails); every launch leaves it as it found it. */
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
    tl_dtype dtype;  /* f32, f16, bf16, f64, f8e4m3, f8e5m2 (i32/i64
                        compare as numbers) */
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
TL_API tl_status tl_cache_get_stats(tl_ctx *ctx, tl_cache_stats *out);
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
 * swizzle panel. An all-zero schedule leaves the choice to the op: the
 * tuning database's record for the context's GPU and this problem's class
 * (see tl_autotune), else a heuristic table chosen from measurements
 * (src/ops/gemm_schedule.c, bench/NOTES.md). On sm_90a: for M = 1 with
 * B as [N, K] and 16-bit inputs the matrix-vector kernel (gemv), unless
 * N / 64 tiles alone give every SM a CTA (then as M <= 16 below); for
 * decode shapes with M <= 16 (K >= 1024, operands TMA can read) C^T =
 * B^T A^T (swap_ab) on 64x16x64 blocks, 8 stages (fewer where a split over
 * clusters would need more than half the GPU's slots; 4 for B as [K, N]
 * when the CTAs are at least the SMs), 128 threads, K split for about
 * two CTAs an SM in slices of at least 32 K steps; with M <= 32 the same
 * on 64x32x64 blocks, 4 stages; 16-bit inputs whose tiles give every SM a
 * CTA unsplit, or 64x32 tiles of B as [N, K] in two slices that do, take
 * K steps of 128 at 4 stages;
 * for other decode shapes (32 < M <= 64) 64x128x64 blocks on 128
 * threads: with at least 64 such tiles, 8 stages, a producer warpgroup
 * and C stored by TMA (persistent = 1), else 4 stages and K split into as
 * many slices as give each SM about one CTA (split_k);
 * for 97 to 132 tiles of 128x128 (about one wave of them) that TMA can
 * read, 128x128x64 blocks, 5 stages, 256 threads, persistent;
 * for at most 64 tiles of 128x256 (1024^3), 64x128x64 blocks on 128
 * threads: with 6 stages, a producer warpgroup and C stored by TMA
 * (persistent = 1) when TMA can read the operands (K, and N for B as
 * [K, N], multiples of 8; 16-byte aligned pointers), else the classic
 * kernel with 4 stages; for a K of at most 1024 bytes that TMA can read,
 * 128x128x64 blocks, 4 stages, 256 threads, persistent; otherwise
 * 128x256x64 blocks, 4 stages, 256 threads,
 * persistent where TMA reads the operands, else classic. Where B's rows
 * of 16-bit inputs (its leading dimension in bytes: K of B as [N, K] or N
 * of B as [K, N] for dense operands, tl_gemm_args.ldb otherwise) are not
 * whole 32-byte sectors, which makes the L2 serve each row in several
 * requests, the 1024^3 row takes 128x128x64 blocks, 5 stages, 256 threads, persistent,
 * and the last one, for B as [N, K], its 128x256x64 blocks without
 * persistence in clusters of two along M that TMA multicasts B to, for B
 * as [K, N] 256x128x64 blocks, 4 stages, 256 threads, persistent
 * (bench/NOTES.md). Elsewhere
 * mma.sync with 128x256x32, 3 stages, 256 threads. 8-bit inputs: the same
 * with block_k doubled (the same bytes a stage). With or without an
 * epilogue alike. In any other schedule zero fields take the values of
 * the target's schedule for large shapes (the last rows) and swizzle 0 is
 * off. */
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
    int split_k;            /* 0 or 1: one pass over K. 2..16: split-K,
                               for problems with too few tiles to fill the
                               GPU (decode: M up to 64): K is cut into
                               split_k slices of whole block_k steps
                               (slice z takes steps z, z + split_k, ...),
                               each slice's product goes to an f32 workspace
                               (allocated on the stream, stream-ordered),
                               and a second kernel adds the slices in
                               order (the result does not depend on timing),
                               applies the bias and activation and writes
                               C. On a target with clusters, at most 8
                               slices of a tile of at most 4096 / split_k
                               elements are one kernel instead: a tile's
                               slices are a cluster that adds them, in
                               order, through distributed shared memory
                               (no workspace). Not with pingpong. Used by the plain call
                               (tl_op_gemm, and tl_op_gemm_ex with dense
                               rows, one entry, alpha 1, beta 0); the
                               general kernels ignore it. */
    int swap_ab;            /* 1: the kernel computes C^T = B^T A^T, its
                               tiles block_m rows of B^T by block_n rows
                               of A: for skinny M (decode), where the least
                               wgmma M (64) would leave most of an M tile
                               empty, a tile of 64 x 16 instead. With B
                               as [K, N] (no trans_b) B^T is read as a
                               transposed A, which needs wgmma (sm_90a;
                               else TL_ERR_INVALID_ARG); C is written
                               through its transpose (element by element:
                               meant for M up to 64). Not with pingpong;
                               the general kernels ignore it, as split_k. */
    int persistent;         /* 1: a producer warpgroup and the block's
                               consumers in min(tiles, SMs) persistent CTAs
                               (tl_use_warp_specialize + tl_use_persistent):
                               the next tile's loads overlap this one's
                               epilogue, no CTA launch per tile; on sm_90a
                               a 16-bit C is stored through shared memory
                               and TMA, draining under the next tile's main
                               loop (a call whose C rows TMA cannot write,
                               ldc or the pointer off 16 bytes, runs the same
                               tile one CTA a tile instead). sm_90a or
                               sm_80 (mbarriers); threads a multiple of 128,
                               stages >= 2. Not with pingpong, split_k or
                               swap_ab (TL_ERR_INVALID_ARG). 2: the same
                               CTAs taking their tiles from a counter
                               (tl_use_persistent(k, 2); not with
                               stream_k). 0, 1 or 2. */
    int cluster_m;          /* 0 or 1: no clusters. 2..8: blocks in
                               thread-block clusters of cluster_m tiles
                               along M (and cluster_n along N; the product
                               at most 8): the blocks of a cluster that
                               share a tile of B (same columns) or of A
                               (same rows) load it once between them, each
                               a slice of its rows, and TMA multicasts the
                               slices to all of them (sm_90a, TMA-readable
                               rows; otherwise each block loads its own).
                               It halves the L2 traffic of the shared
                               operand at a cluster of 2, what small tiles
                               are bound by (1024^3). The grid is rounded
                               up to whole clusters. Needs a target with
                               clusters (sm_90 and later); not with
                               pingpong, persistent, split_k or swap_ab
                               (TL_ERR_INVALID_ARG). */
    int cluster_n;
    int stream_k;           /* 1 (with persistent = 1): the persistent CTAs
                               take equal shares of all tiles' K steps
                               (tl_use_stream_k) instead of whole tiles, so
                               a last wave of tiles that does not fill the
                               GPU costs its share of the work, not a whole
                               wave; a tile split between CTAs is finished
                               by the one that ran its first K steps,
                               adding the others' partial sums in a fixed
                               order (deterministic). The library keeps an
                               f32 workspace of one tile per SM for each
                               stream that runs it. 0: whole tiles. Needs
                               persistent (else TL_ERR_INVALID_ARG); a call
                               that runs the tile one CTA a tile instead
                               (see persistent) drops it. */
    int gemv;               /* 1: decode's matrix-vector kernel on the CUDA
                               cores, for B as [N, K] (trans_b) and 16-bit
                               inputs: each block dots block_n rows of B
                               with the M <= block_m rows of A (block_m 1..8;
                               0: M rounded up to a power of two), K in
                               chunks of block_k columns (a power of two,
                               32..8192), on threads threads (a multiple of
                               32, 32..1024; each thread holds block_m x
                               block_n x block_k / threads f32 sums, at
                               most 128); zeros take 1 x 2048 x 64;
                               stages, swizzle, warp_policy ignored.
                               Reads B once at close to the device's
                               bandwidth, where a tensor-core tile of 64
                               rows would be mostly empty. Not with
                               pingpong, split_k, swap_ab, persistent,
                               clusters or stream_k (TL_ERR_INVALID_ARG);
                               the general kernels (tl_op_gemm_ex with
                               strides, batches, alpha or beta) run their
                               default schedule instead. */
} tl_gemm_schedule;

typedef struct tl_gemm_desc {
    int64_t m, n, k;
    tl_dtype in_dtype;      /* bf16, f16, or an 8-bit float (f8e4m3,
                               f8e5m2: sm_90a only, trans_b = 1, K steps
                               (schedule.block_k) in multiples of 128,
                               per-tensor scales in tl_gemm_args; else
                               TL_ERR_UNSUPPORTED / TL_ERR_INVALID_ARG) */
    tl_dtype out_dtype;     /* bf16, f16 or f32 */
    int trans_b;            /* B given as [N, K] */
    int has_bias;
    tl_epilogue epilogue;
    tl_gemm_schedule schedule; /* zeros: defaults */
} tl_gemm_desc;

/* Runs the GEMM on stream. a, b, c (and bias when has_bias) are device
 * pointers, aligned to their element size. Any M, N, K >= 1: ragged edges
 * are masked; rows that start 16-byte aligned (K, and N for B as [K, N],
 * multiples of 8 — of 16 for 8-bit inputs —, pointers 16-byte aligned)
 * take the asynchronous-copy fast path, others an element-wise path. The
 * bias is of in_dtype, or of out_dtype for 8-bit inputs (an 8-bit bias
 * would lose what the f32 accumulator keeps); 8-bit inputs are exact in
 * the f32 products, so the result differs from an f32 GEMM of the same
 * (dequantised) values by the sums' rounding and C's: the tensor cores add
 * each K step's products with fewer bits kept than an f32 FMA chain
 * (cuBLASLt's fast accumulation), a relative error (norm-wise, tl_check)
 * of about 2e-4 in an f32 C at K up to 4096 (the GPU tests' bound 2e-3),
 * and C's rounding on top for a 16-bit C (about 2e-3; bound 1e-2). C = act(A B + bias) in f32 on the
 * accumulator; the activations use tl_use_fast_math (the tanh GELU on the
 * hardware tanh, relative error about 2^-11; the erf GELU on an erf with
 * absolute error below 1e-6), well below the rounding of a 16-bit output.
 * Errors: TL_ERR_INVALID_ARG (sizes, misaligned pointers, which one),
 * TL_ERR_DTYPE, those of tl_compile and tl_launch. It is tl_op_gemm_ex
 * (below: leading dimensions, batches, alpha, beta) with
 * tl_gemm_default_args() and these four pointers. */
TL_API tl_status tl_op_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias,
                            uint64_t c, void *stream);
/* The schedule tl_op_gemm_program compiles for d: d->schedule with the
 * op's choices filled in (see tl_gemm_schedule: a tuning record, else the
 * heuristic). tl_op_gemm itself runs the target's schedule for large
 * shapes instead of a ping-pong schedule when a or b is not 16-byte
 * aligned, and the heuristic's when a recorded schedule fails to compile
 * (with a warning). A NULL ctx or d, or an invalid d, gives zeros. */
TL_API tl_gemm_schedule tl_op_gemm_schedule(tl_ctx *ctx, const tl_gemm_desc *d);
/* The compiled program tl_op_gemm uses for d (owned by the context). Its
 * launch arguments: M, N, K, A, B, [bias,] C. */
TL_API tl_status tl_op_gemm_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_program **out);
/* Builds the GEMM kernel of d (schedule included) for inspection or
 * sweeping. *out is a new kernel the caller destroys. For a schedule that
 * splits K (split_k) over a workspace, this and tl_op_gemm_program give the
 * first of the two kernels: the slices' products into the workspace
 * (launch arguments M, N, K, A, B, W: f32 [split_k, M, N]); a split over
 * clusters (see split_k) is one kernel with the plain arguments. */
TL_API tl_status tl_op_gemm_build(tl_ctx *ctx, const tl_gemm_desc *d, tl_kernel **out);

/* The operands of a tl_op_gemm_ex call, as a BLAS caller has them: row
 * strides (sub-matrices of larger buffers), a batch (strided, or arrays
 * of pointers as cublasGemmBatchedEx takes), and the scales alpha and
 * beta with C read as an input. Start from tl_gemm_default_args() (alpha
 * 1, batch 1, everything else 0): a zeroed struct has alpha 0 and batch 0,
 * which is an error. The matrices are row
 * major, as in tl_op_gemm; element (i, j) of entry e of a strided batch is
 *   A: a + e stride_a + i lda + j      ([M, K])
 *   B: b + e stride_b + i ldb + j      ([K, N], or [N, K] with trans_b)
 *   C: c + e stride_c + i ldc + j      ([M, N])
 * in elements, and of a pointer-array batch a_array[e] + i lda + j (and so
 * on). Each entry computes
 *   C = act(alpha (A B) + beta C + bias)
 * in f32, in that order: the product is scaled, beta times C's old value
 * (converted to f32) added, then the bias, then the activation, and the
 * result is converted to out_dtype once (cuBLASLt's order, D = epilogue(
 * alpha A B + beta C + bias)). With beta == 0 C is not read (it may hold
 * anything, NaN included); A and B are read whatever alpha is. The bias
 * [N] is the same for every entry. */
typedef struct tl_gemm_args {
    uint64_t a, b, bias, c;   /* device pointers: the matrices (entry 0 of a
                                 strided batch); bias [N] of in_dtype (of
                                 out_dtype for 8-bit inputs), read only
                                 with d->has_bias. a, b, c must be 0
                                 for a pointer-array batch. */
    int64_t lda, ldb, ldc;    /* elements between rows: lda >= K; ldb >= N
                                 (>= K with trans_b); ldc >= N. 0: dense
                                 (the row's length). */
    int64_t batch;            /* GEMMs in the call, 1..65535 (the default
                                 args: 1) */
    int64_t stride_a, stride_b, stride_c; /* strided batch: elements between
                                 entries (>= 0; ignored for one entry).
                                 stride_a or stride_b 0: one matrix for every
                                 entry; stride_c must keep the entries' C
                                 apart. 0 in a pointer-array batch. */
    uint64_t a_array, b_array, c_array; /* pointer-array batch (all three or
                                 none): device arrays of `batch` device
                                 pointers (8-byte aligned), each to a matrix
                                 laid out with lda, ldb, ldc */
    double alpha, beta;       /* scales, rounded to f32 */
    double scale_a, scale_b;  /* per-tensor scales of A and B (the FP8
                                 recipes' dequantisation factors): the
                                 product is (alpha scale_a scale_b) A B,
                                 the three multiplied in double, then
                                 rounded to f32 once; 1 in the default
                                 args, and 0 means 1 too (alpha is the
                                 one that may be 0); for any input type */
} tl_gemm_args;

/* alpha 1, batch 1, scale_a and scale_b 1 and every other field 0: one
 * dense GEMM once a, b, c are set. */
TL_API tl_gemm_args tl_gemm_default_args(void);

/* The GEMM of d on the operands of args, on stream (asynchronously): the
 * entry point a BLAS caller expects (see tl_gemm_args for what it
 * computes). d gives the problem of one entry (M, N, K, types, layout of
 * B, bias and activation, schedule); args the memory. A call with dense
 * rows, one entry, alpha 1 and beta 0 runs tl_op_gemm's program; any other
 * runs a general program of the same kernel (ops/gemm.c), one per type,
 * layout, epilogue and schedule, whose row strides, batch, batch strides
 * and alpha are launch arguments; beta != 0 (C read) and a pointer-array
 * batch are compiled in, each a program of its own. The batch is the
 * grid's z dimension (the persistent ping-pong kernel walks it as tiles
 * too); its schedule is the one tl_op_gemm_schedule picks for batch x M
 * rows, with rows TMA can read only when lda, ldb, stride_a and stride_b
 * are multiples of 8 and the batch is strided. Operands the fast copies
 * cannot take (pointers not 16-byte aligned, a row stride or batch stride
 * not a multiple of 16 bytes) run the program's element-wise variant:
 * slower, never an error. The matrices of a pointer-array batch are read
 * element by element (their alignment is in device memory, unknown at the
 * launch). Errors (the message starts "tl_op_gemm_ex:" and names the
 * argument): TL_ERR_INVALID_ARG (NULL d or args; those of tl_op_gemm; a
 * negative ld or stride; lda, ldb or ldc shorter than its row; a batch
 * outside 1..65535; a stride_c with which two entries' C share an element;
 * a pointer-array batch with one array missing, or with a, b, c or a
 * stride set; an array not 8-byte aligned), TL_ERR_DTYPE, those of
 * tl_compile and tl_launch. Entries of c_array must not overlap each other
 * or any entry's A or B (not checked: the arrays are in device memory),
 * nor may a strided C overlap A or B. */
TL_API tl_status tl_op_gemm_ex(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, void *stream);
/* The program tl_op_gemm_ex runs for d and args (owned by the context).
 * Only the shape of args is read, not its pointers: a, b, c, bias and the
 * arrays' values are ignored but for which of a_array or a is used, and
 * the sizes and strides are checked as by tl_op_gemm_ex. For the dense,
 * single, alpha 1, beta 0 call it is tl_op_gemm_program's program; for the
 * others its launch arguments are, in order:
 *   strided:       M, N, K, batch, lda, ldb, ldc, stride_a, stride_b,
 *                  stride_c, batch_a, batch_b, alpha, [beta,] A, B,
 *                  [bias,] C
 *   pointer array: M, N, K, batch, lda, ldb, ldc, alpha, [beta,] A, B,
 *                  [bias,] C (A, B, C the device arrays of pointers)
 * (beta only when args->beta != 0, bias only with d->has_bias). batch_a is
 * 1 when stride_a is 0 (entry e reads A's entry min(e, batch_a - 1)), else
 * batch; batch_b likewise; alpha and beta are floats, the others integers
 * and device pointers. Errors: as tl_op_gemm_ex before the launch. */
TL_API tl_status tl_op_gemm_ex_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args,
                                       const tl_program **out);
/* The kernel of tl_op_gemm_ex_program, not compiled (inspection,
 * interpretation: with host pointers, tl_interpret runs it, pointer arrays
 * included, whose entries are then host pointers). *out is a new kernel the
 * caller destroys, named gemm_<nn|nt><in>_<out>[_strided|_ptrarray][_beta].
 * Errors: as tl_op_gemm_ex_program. */
TL_API tl_status tl_op_gemm_ex_build(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args,
                                     tl_kernel **out);

/* c[i, j] = act(c[i, j] + bias[j]) in place, for c [m, n] row-major and
 * bias [n] (0: none), both of dtype (f32, f16, bf16; 16-bit values are
 * computed in f32), act one of tl_epilogue (TL_EPI_NONE: the bias alone).
 * An element-wise kernel of its own: the unfused epilogue that a fused
 * GEMM is measured against. Compiled on first use and kept in the context.
 * c and bias must be aligned to the element size. Errors:
 * TL_ERR_INVALID_ARG (sizes, a null c, a misaligned pointer),
 * TL_ERR_DTYPE, TL_ERR_NO_DEVICE, those of tl_compile and tl_launch. */
TL_API tl_status tl_op_bias_act(tl_ctx *ctx, tl_dtype dtype, int64_t m, int64_t n, uint64_t c, uint64_t bias,
                             tl_epilogue epi, void *stream);
/* Builds the kernel of tl_op_bias_act: Y[i, j] = act(X[i, j] + bias[j]).
 * Launch arguments: M, N, X, [bias,] Y (bias when has_bias). X and Y may be
 * the same tensor (tl_op_bias_act passes c for both); as two parameters the
 * loads of X stay vectorised, which a tensor both read and written in one
 * loop would not be. *out is a new kernel the caller destroys. Errors:
 * TL_ERR_DTYPE, TL_ERR_INVALID_ARG (unknown epilogue). */
TL_API tl_status tl_op_bias_act_build(tl_ctx *ctx, tl_dtype dtype, tl_epilogue epi, int has_bias, tl_kernel **out);

/* The schedule of a row-wise op (tl_op_softmax, tl_op_rmsnorm): a block
 * holds `rows` rows of `width` columns as an f32 register fragment [rows,
 * width] spread over `threads` threads. cols <= width: one pass with the
 * rows in registers (one program per width serves every cols up to it);
 * cols > width: the online path, a loop over chunks of width columns that
 * reads each row twice. An all-zero schedule is tl_op_softmax's choice: a
 * tuning record for this GPU and the problem's class (see tl_autotune),
 * else the default, from a table
 * in src/ops/rows.c: width the smallest power of two >= cols, up to 32768
 * (one pass), else the online path in chunks of 16384 columns
 * (tl_op_rmsnorm: 32768); stages 1,
 * except rows wider than 16384 columns (both ops), which take a ring of 2
 * where shared memory holds it, filled by a producer warpgroup (loader 2)
 * beside 512 threads (measured, bench/NOTES.md). In any
 * other schedule, zero fields take the default's values for that width.
 * width: a power of two up to 2^20; rows >= 1 with rows * width <= 2^24;
 * threads a multiple of 32 in 32..1024. How many registers a thread may
 * hold is checked by tl_compile (TL_ERR_SHAPE).
 * stages, how the one-pass path keeps memory busy while a block reduces
 * (the online path ignores it):
 *   1     no pipeline: a block takes one tile of `rows` rows, loaded
 *         straight into registers;
 *   2..8  a block takes several tiles in turn, as many as make the grid
 *         one wave of the GPU (from its SM count and the program's blocks
 *         per SM, at launch), dealt in stride (block b takes tiles b,
 *         b + G, b + 2G, ..., G the blocks launched, so that the blocks
 *         read neighbouring rows at once), each arriving through a ring of `stages`
 *         shared-memory slots that cp.async fills stages - 1 tiles ahead
 *         (stages x rows x width input elements of shared memory).
 * loader, who fills the ring (stages 2..8; ignored otherwise):
 *   0     the default: 2 where the default ring is (rows wider than 16384
 *         columns, no cluster) and the block has room for the producer
 *         (threads left 0 halve from 1024 to 512 for it), else 1;
 *   1     the block's own threads, as described under stages;
 *   2     a producer warpgroup of its own, 128 threads more than
 *         `threads` (which then reduce), that issues the cp.async copies
 *         S - 1 tiles ahead; the blocks are one tile each, run by
 *         persistent CTAs that take their next tile from a counter as
 *         they finish one (tl_use_warp_specialize and tl_use_persistent 2:
 *         a CTA whose rows went fast takes more, so the CTAs end
 *         together), and the consumers hand a slot back as soon as they
 *         have read it. Needs threads a multiple of 128 up to 896, no
 *         cluster, and mbarriers (sm_80 or later): TL_ERR_INVALID_ARG
 *         otherwise, naming what is missing.
 * With stages other than 1 and loader 1 the program takes one more launch
 * argument, the last: how many blocks the GPU runs at once (tl_op_softmax
 * and tl_op_rmsnorm pass its SM count times the program's blocks_per_sm;
 * any value is correct, 0 counting as 1).
 * cluster, a row split over several blocks (sm_90 and later): 0 or 1, a
 * block holds whole rows; 2..8, a cluster of that many blocks holds each
 * tile of rows, block r of the cluster columns [r width, (r + 1) width),
 * and their partial maxima and sums are combined through distributed
 * shared memory (tl_cluster_reduce_*), so one pass covers rows of up to
 * cluster x width columns with a fragment of width columns per block
 * (the online path is not split: cols > cluster x width with cluster >= 2
 * is TL_ERR_INVALID_ARG). No default splits a row: at 2048 x 32768 the
 * split ran slower than one block a row (bench/NOTES.md); the tuner tries
 * splits of 2 and 4 where the GPU has clusters. */
typedef struct tl_softmax_schedule {
    int width;
    int rows;
    int threads;
    int stages;
    int cluster;
    int loader;
} tl_softmax_schedule;

/* Y[i, :] = softmax(X[i, :]) over the rows of X [rows, cols]:
 * y_ij = exp(x_ij - m_i) / sum_j exp(x_ij - m_i), m_i the row's maximum,
 * computed in f32 (as exp2((x - m) log2 e), with the hardware's
 * approximate exp2: relative error about 2^-22, terms below 2^-126 taken
 * as 0, well under the rounding of any output type). Row-major with row strides
 * ld_in and ld_out in elements (0: cols). Subtracting the maximum keeps
 * every exponent <= 0, so no input overflows. A row whose elements are
 * all -inf gives zeros (never NaN); a NaN, or +inf, in a row makes that
 * row NaN. */
typedef struct tl_softmax_desc {
    int64_t rows, cols;             /* rows >= 0, cols >= 1            */
    int64_t ld_in, ld_out;          /* >= cols; 0: cols (contiguous)   */
    tl_dtype in_dtype, out_dtype;   /* f32, f16 or bf16 each           */
    tl_softmax_schedule schedule;   /* zeros: the default              */
} tl_softmax_desc;

/* Runs the softmax on stream: x and y are device pointers aligned to their
 * element sizes that do not overlap (rows that start 16-byte aligned are
 * read and written in 16-byte vectors). rows = 0 does nothing. The program
 * is compiled on first use and kept in the context, one per dtypes and
 * effective schedule (one-pass width, or online): the sizes are launch
 * arguments. Errors: TL_ERR_INVALID_ARG (NULL descriptor, sizes, strides,
 * a schedule field, a null or misaligned pointer: the message names it),
 * TL_ERR_DTYPE, those of tl_compile and tl_launch. */
TL_API tl_status tl_op_softmax(tl_ctx *ctx, const tl_softmax_desc *d, uint64_t x, uint64_t y, void *stream);
/* The schedule tl_op_softmax runs for d: d->schedule with the defaults
 * filled in. Zeros for a NULL ctx or d, or an invalid d. */
TL_API tl_softmax_schedule tl_op_softmax_schedule(tl_ctx *ctx, const tl_softmax_desc *d);
/* The compiled program tl_op_softmax uses for d (owned by the context).
 * Launch arguments: M, N, ld_in, ld_out (integers), X, Y (pointers), and
 * for a schedule with stages other than 1 and loader 1 the blocks the GPU
 * runs at once (an integer). */
TL_API tl_status tl_op_softmax_program(tl_ctx *ctx, const tl_softmax_desc *d, const tl_program **out);
/* Builds the softmax kernel of d (schedule included) for inspection, the
 * interpreter or a sweep. *out is a new kernel the caller destroys. */
TL_API tl_status tl_op_softmax_build(tl_ctx *ctx, const tl_softmax_desc *d, tl_kernel **out);

/* Y[i, j] = X[i, j] / sqrt(mean_j(X[i, j]^2) + eps) * w[j], RMSNorm over
 * the rows of X [rows, cols], in f32; w has cols elements of in_dtype.
 * Strides, dtypes and schedules (defaults included) as for
 * tl_softmax_desc. eps >= 0 (a row of zeros with eps = 0 gives NaN, as the
 * formula does). */
typedef struct tl_rmsnorm_desc {
    int64_t rows, cols;
    int64_t ld_in, ld_out;
    tl_dtype in_dtype, out_dtype;
    double eps;
    tl_softmax_schedule schedule;
} tl_rmsnorm_desc;

/* Runs RMSNorm on stream; x, w, y as for tl_op_softmax. Errors as
 * tl_op_softmax, and TL_ERR_INVALID_ARG for a negative or non-finite eps. */
TL_API tl_status tl_op_rmsnorm(tl_ctx *ctx, const tl_rmsnorm_desc *d, uint64_t x, uint64_t w, uint64_t y,
                               void *stream);
/* The schedule, the program and the kernel of tl_op_rmsnorm, as those of
 * tl_op_softmax. The program's launch arguments: M, N, ld_in, ld_out
 * (integers), X, Y, W (pointers), eps (a float)[, blocks at once]. */
TL_API tl_softmax_schedule tl_op_rmsnorm_schedule(tl_ctx *ctx, const tl_rmsnorm_desc *d);
TL_API tl_status tl_op_rmsnorm_program(tl_ctx *ctx, const tl_rmsnorm_desc *d, const tl_program **out);
TL_API tl_status tl_op_rmsnorm_build(tl_ctx *ctx, const tl_rmsnorm_desc *d, tl_kernel **out);

/* FlashAttention forward: O = softmax(scale Q K^T [+ causal mask]) V per
 * (batch, head), never materialising the scores in global memory. Q and O
 * are [batch, heads, seq_q, head_dim], K and V [batch, kv_heads, seq_kv,
 * head_dim], each given by its pointer and its strides in elements for
 * batch, head and sequence (the head_dim stride is 1): [B, H, S, D] and
 * [B, S, H, D] tensors are both just strides. heads must be a multiple of
 * kv_heads (grouped-query attention; kv_heads 1 is multi-query): head h
 * reads K/V head h / (heads / kv_heads). seq_q and seq_kv may differ; with
 * causal, query i attends key j when j <= i + seq_kv - seq_q (the mask is
 * aligned to the bottom-right corner, as PyTorch and FlashAttention do), so
 * a query row with no key to attend (seq_q > seq_kv) gets zeros, and its
 * log-sum-exp is -inf. */
typedef struct tl_flash_attn_schedule {
    int block_m;           /* query rows per block (64, 128; on sm_90a 192 with
                              384 threads: three consumer warpgroups, which
                              take turns in a ring with pingpong 1) */
    int block_n;           /* keys per iteration (64, 128, 176 ...) */
    int stages;            /* K/V tiles in flight */
    int threads;           /* consumer threads per block (128 per 64 rows on sm_90a) */
    int warp_specialize;   /* 1: a producer warpgroup loads K and V (tl_use_warp_specialize) */
    int pingpong;          /* 1: the consumer warpgroups take turns on the tensor cores;
                              2: and each issues the next tile's Q K^T with this one's P V
                              (tl_use_pingpong's overlap) */
    int persistent;        /* 1: min(blocks, SMs) CTAs, each running blocks in
                              turn, the producer loading the next block's Q
                              and K/V under this one's end (tl_use_persistent;
                              warp_specialize; the sm_90a default, non-causal
                              at head_dim 64 up to 4096 keys and at 128 up
                              to 8192); 2: the same CTAs taking blocks from
                              a counter, query blocks longest first
                              (tl_use_persistent(k, 2); the sm_90a default
                              for causal attention, and at head_dim 256 up
                              to 4096 keys) */
    int split_kv;          /* 0: the op's choice; 1: each block walks all the
                              keys of its query rows; 2..64: the keys of each
                              query block split over split_kv blocks (in
                              contiguous runs of whole key tiles), each writing
                              its normalised part of O and its base-2
                              log-sum-exp to a workspace on the stream, then a
                              second kernel (tl_op_flash_attn_combine_build)
                              merging the parts into O and the log-sum-exp.
                              The op's choice splits where the query blocks
                              fill less than half of the GPU's SMs (decoding:
                              a few query rows against many keys): into about
                              one wave of blocks, each of at least four key
                              tiles. (On sm_90a the default for at most 64
                              query rows is one consumer warpgroup of 64
                              rows.) */
    int split_tail;        /* 0: the op's choice; 1: none; 2..16: a balanced
                              last wave: with the grid's N query blocks on W
                              CTAs at once (the SMs, one block each), the
                              last N mod W blocks split their keys into
                              split_tail parts each, as split_kv does (the
                              same two kernels: parts to the workspace, then
                              the combine), so that the last wave's work
                              spreads over all the CTAs; the first blocks
                              write O as usual. Ignored where split_kv >= 2.
                              The op's choice: up to 3 parts, for
                              non-causal blocks of one a SM (shared memory
                              past half of an SM's) unless persistent CTAs
                              dealt blocks in turn take turns (measured no
                              gain), where a model of the waves (each part
                              paying two key tiles more, the combine three)
                              gains. */
} tl_flash_attn_schedule;

typedef struct tl_flash_attn_desc {
    int64_t batch, heads, kv_heads;
    int64_t seq_q, seq_kv;
    int64_t head_dim;          /* 64, 128 or 256 */
    tl_dtype dtype;            /* bf16 or f16: Q, K, V and O */
    int causal;
    double scale;              /* 0: 1 / sqrt(head_dim) */
    /* strides in elements of batch, head and sequence; all zero: contiguous
     * [B, H, S, D] */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int lse;                   /* 1: also write the rows' natural-log
                                  log-sum-exp, f32 [batch, heads, seq_q]
                                  contiguous */
    tl_flash_attn_schedule schedule; /* block_m to persistent all zero: the
                                        tuning database's record for the
                                        problem's class on this GPU
                                        (tl_autotune with "flash_attn"), else
                                        the target's default, with split_kv
                                        and split_tail as given; otherwise
                                        a zero block_m, block_n, stages or
                                        threads takes the default's, and
                                        the flags are as given (0: off) */
} tl_flash_attn_desc;

/* Runs the attention on stream; q, k, v, o (and lse when d->lse) are device
 * pointers aligned to their elements (TMA and 16-byte copies are used when
 * the strides and pointers allow them, a slower safe path otherwise).
 * Grouped-query heads with at most 64 query rows each (decoding) run as
 * the problem with each K/V head's heads / kv_heads query heads stacked as
 * the rows of one head (kv_heads heads of heads / kv_heads x seq_q rows),
 * so that their rows fill blocks and each K/V tile is read once for the
 * group: where seq_q is 1 (causal too: its one row sees every key), or
 * non-causal where each head's rows of Q and of O are contiguous (head
 * stride = seq_q x sequence stride); tl_op_flash_attn_schedule reports
 * the schedule of the stacked problem, and tl_op_flash_attn_program and
 * _build give the kernel of d as it is. A schedule that splits the keys
 * (split_kv, split_tail) takes a workspace of 4 P R (head_dim + 1) bytes
 * from the stream-ordered allocator for the two kernels (given back on the
 * stream after them), P the parts (the split blocks times their parts) and
 * R = min(seq_q, block_m).
 * Errors: TL_ERR_INVALID_ARG (sizes, strides, heads not a multiple of
 * kv_heads, pointers, which one), TL_ERR_DTYPE, TL_ERR_UNSUPPORTED
 * (head_dim), TL_ERR_OUT_OF_MEMORY (the workspace), those of tl_compile
 * and tl_launch. */
TL_API tl_status tl_op_flash_attn(tl_ctx *ctx, const tl_flash_attn_desc *d, uint64_t q, uint64_t k, uint64_t v,
                                  uint64_t o, uint64_t lse, void *stream);
/* The schedule tl_op_flash_attn runs for d, that of the stacked problem
 * where it stacks grouped-query heads (zeros for an invalid d). */
TL_API tl_flash_attn_schedule tl_op_flash_attn_schedule(tl_ctx *ctx, const tl_flash_attn_desc *d);
/* The compiled program for d (owned by the context); its launch arguments:
 * B, H, HKV, SQ, SKV (dims), the strides of Q, K, V, O (4 x 3 dims), Q, K,
 * V, O, [LSE] (pointers), scale_log2 (a float: scale * log2(e)).
 * Where the schedule splits the keys (split_kv >= 2, or split_tail >= 2
 * with blocks past the last whole wave) it is the first of the two kernels,
 * with the arguments B, H, HKV, SQ, SKV, NFULL, NSPLIT (dims), the strides
 * of Q, K, V, O (4 x 3 dims), Q, K, V, O, [LSE], WO, WL (pointers),
 * scale_log2. Its grid is one axis of NFULL + (N - NFULL) NSPLIT items, N
 * = ceil(SQ / block_m) H B the query blocks, in the order query block
 * fastest (last first when causal), then head, then batch: item i < NFULL
 * is block i, written to O (and LSE) as above; item NFULL + j is part j mod
 * NSPLIT of block NFULL + j / NSPLIT: its run of the block's key tiles (in
 * runs of ceil(tiles / NSPLIT)), its part of O, f32, normalised by its own
 * sum, written to WO [(N - NFULL) NSPLIT, R, head_dim] at j and the base-2
 * log-sum-exp of its scaled scores to WL [(N - NFULL) NSPLIT, R] (both
 * contiguous; R = min(SQ, block_m); -inf and zeros for a run with no key
 * to attend). split_kv takes NFULL = 0. */
TL_API tl_status tl_op_flash_attn_program(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_program **out);
/* The kernel of d, for inspection; the caller destroys it (the first of the
 * two kernels where the schedule splits the keys). */
TL_API tl_status tl_op_flash_attn_build(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_kernel **out);
/* The second kernel of a split schedule: for each row of the split blocks
 * (NFULL to N - 1), O = the sum over its NSPLIT parts of WO weighted by
 * 2^(WL - lse2), lse2 = log2 of the sum of 2^WL (zeros, and -inf, for a row
 * no part attended), stored to O in d->dtype; [LSE] = lse2 ln 2. Launch
 * arguments: B, H, SQ, NFULL, NSPLIT, the strides of O (3 dims), WO, WL,
 * O, [LSE]. It depends on d's dtype, head_dim, causal and lse and on the
 * schedule's block_m only. The caller destroys *out. Errors: those of
 * tl_op_flash_attn_build. */
TL_API tl_status tl_op_flash_attn_combine_build(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_kernel **out);

/* Builds the kernel of a prebuilt op by name ("vadd") with its default
 * schedule for `dtype` (for "gemm", the target's schedule for large
 * shapes: there is no problem to choose for; B as [K, N], C of dtype, or
 * for an 8-bit dtype B as [N, K] and a bf16 C). *out is a new kernel the
 * caller destroys. "softmax" and "rmsnorm" are the one-pass programs for
 * rows of 1024 columns, dtype in and out. "flash_attn" (bf16 or f16) is
 * the attention of head_dim 128, not causal, 4 x 16 heads of 4096
 * queries and keys: the target's default for long sequences
 * (tl_op_flash_attn_build gives any other problem's). Errors: TL_ERR_INVALID_ARG (unknown op),
 * TL_ERR_DTYPE. */
TL_API tl_status tl_op_build(tl_ctx *ctx, const char *op, tl_dtype dtype, tl_kernel **out);
/* NULL-terminated list of op names for tl_op_build. Static storage. */
TL_API const char *const *tl_op_names(void);

/* ------------------------------------------------------------------------ */
/* Parallel compilation, autotuning and the tuning database                 */
/* ------------------------------------------------------------------------ */

/* One kernel of a batch for tl_compile_many. The caller sets `kernel` and
 * `safe_variant` (zero-initialise the rest); the call fills the rest. The kernel stays the caller's: it is neither
 * destroyed nor changed, except that a verification error is recorded on
 * it exactly as tl_compile records it. */
typedef struct tl_compile_job {
    tl_kernel *kernel;     /* in: a kernel of the context                   */
    int safe_variant;      /* in: 1: also compile the program's safe variant
                              (for tensors that miss the 16-byte alignment
                              it assumes, see tl_copy), which tl_launch
                              would otherwise compile at the first such
                              launch; a program that assumes nothing has
                              none. If it fails, the job fails            */
    tl_program *program;   /* out: a new program the caller destroys; NULL
                              when status is not TL_OK                      */
    tl_status status;      /* out: what tl_compile would have returned      */
    char message[1024];    /* out: why it failed ("" on success); a long
                              NVRTC log is cut to fit                       */
} tl_compile_job;

/* Compiles n kernels of ctx, as n calls of tl_compile(jobs[i].kernel, opt,
 * &jobs[i].program) would, but with NVRTC running on several threads:
 * every kernel is verified and lowered in turn on the calling thread, the
 * cubins missing from the cache (kernels with the same source compile
 * once) are compiled by `threads` threads at once (the calling thread and
 * threads - 1 others; 0: $TILEC_COMPILE_THREADS when set, else the online
 * CPUs), then stored in the cache and loaded in turn. The worker threads
 * touch only NVRTC; other threads may use the context meanwhile, as with
 * tl_compile (a kernel by one thread at a time: not the batch's kernels
 * during the call). A kernel that fails gets its own status and
 * message and does not stop the others. Returns TL_OK when every job
 * succeeded; otherwise the status of the first failed job, with
 * "tl_compile_many: F of n kernels failed; job i: ..." on the context.
 * Errors of the call itself (nothing is compiled): TL_ERR_INVALID_ARG
 * (ctx NULL, n < 0, jobs NULL with n > 0, threads < 0). Per job:
 * TL_ERR_INVALID_ARG (kernel NULL or of another context) and the errors of
 * tl_compile. n = 0 does nothing. */
TL_API tl_status tl_compile_many(tl_ctx *ctx, tl_compile_job *jobs, int n, const tl_compile_options *opt,
                                 int threads);

/* --- configurations --- */

#define TL_TUNE_MAX_PARAMS 16

/* A configuration to try: integers whose meaning the op gives (a custom
 * kernel's builder gives its own). For "gemm" they are the fields of
 * tl_gemm_schedule in order: block_m, block_n, block_k, stages, threads,
 * swizzle, warp_policy, pingpong (named bm bn bk st th sw wp pp); for
 * "softmax" and "rmsnorm" those of tl_softmax_schedule: width, rows,
 * threads, stages, cluster, loader; for "flash_attn" those of tl_flash_attn_schedule:
 * block_m, block_n, stages, threads, warp_specialize, pingpong, persistent
 * (named bm bn st th ws pp ps). */
typedef struct tl_tune_config {
    int v[TL_TUNE_MAX_PARAMS];
} tl_tune_config;

/* Conversions between a GEMM schedule and its configuration. */
TL_API tl_tune_config tl_gemm_schedule_to_config(const tl_gemm_schedule *s);
TL_API tl_gemm_schedule tl_gemm_schedule_from_config(const tl_tune_config *c);

/* The schedules tl_autotune tries for d on the context's target when the
 * request gives no space: block tiles of 64 to 256, K steps of 32 and 64
 * (on sm_90a only 64, the step of the wgmma kernels), 2 to 6 stages, 128
 * or 256 threads, swizzle 0, 8 or 16, and on sm_90a the ping-pong kernel when
 * TMA can read the rows. Writes at most max of them
 * to out (out may be NULL when max is 0) and returns how many there are.
 * ctx or d NULL: every schedule of the list, unfiltered. */
TL_API int tl_gemm_candidates(tl_ctx *ctx, const tl_gemm_desc *d, tl_gemm_schedule *out, int max);

/* Writes the configuration as "name=value ..." text (the op's parameter
 * names; NULL or an unknown op: p0=... up to the last non-zero value).
 * Returns buf. */
TL_API char *tl_tune_config_text(const char *op, const tl_tune_config *c, char *buf, size_t len);

/* --- tl_autotune --- */

/* Progress of a tuning run, for a tl_tune_progress_fn. */
typedef struct tl_tune_progress {
    const char *phase;     /* "compile", "measure", "final" or "done"       */
    int done, total;       /* candidates measured (compiled in "compile")   */
    int passed;            /* candidates that passed their check so far     */
    double best_ms;        /* the fastest so far; 0 while none passed       */
    const char *best;      /* its configuration as text; "" while none      */
    double elapsed_s;
    double left_s;         /* estimated time left; < 0 when unknown         */
} tl_tune_progress;
typedef void (*tl_tune_progress_fn)(void *user, const tl_tune_progress *p);

/* A ready progress reporter: `user` is a FILE * (NULL: stderr). On a
 * terminal it redraws one bar ("[#####.....] 12/23  best 0.1959 ms ...
 * 3 s left") and ends it with a newline at "done"; otherwise it writes a
 * plain line per event. The library prints nothing unless given this. */
TL_API void tl_tune_progress_stderr(void *user, const tl_tune_progress *p);

/* A generator of candidates: fills *out with candidate i and returns 1, or
 * returns 0 when there are no more (at most 4096 candidates). */
typedef int (*tl_tune_space_fn)(void *user, int i, tl_tune_config *out);
/* Builds the kernel of a custom candidate; *out is a new kernel that the
 * tuner destroys. A failure rejects this candidate only. */
typedef tl_status (*tl_tune_build_fn)(void *user, tl_ctx *ctx, const tl_tune_config *cfg, tl_kernel **out);

typedef struct tl_tune_request {
    /* What to tune: a prebuilt op ... */
    const char *op;             /* "gemm", "softmax", "rmsnorm", "flash_attn";
                                   NULL: a custom kernel                     */
    const void *desc;           /* the op's descriptor (const tl_gemm_desc *,
                                   const tl_softmax_desc *,
                                   const tl_rmsnorm_desc *,
                                   const tl_flash_attn_desc *)               */
    /* ... or a custom kernel (op NULL) */
    tl_tune_build_fn build;     /* required for a custom kernel              */
    void *build_user;
    int nargs;                  /* its launch arguments, with device        */
    const tl_arg *args;         /* pointers for tensors                      */
    tl_ref_fn ref;              /* reference on host copies (see
                                   tl_program_check); NULL: the CPU
                                   interpreter of the first candidate that
                                   compiled (small problems only)            */
    void *ref_user;
    double flop, bytes;         /* work of one launch, for the rate in
                                   TFLOP/s (flop) or GB/s (bytes); 0: none   */
    const char *const *param_names; /* names of v[0], v[1], ... in reports,
                                   NULL-terminated; NULL: p0, p1, ...        */
    /* The space: a list, else a generator, else (ops) the op's own space */
    const tl_tune_config *configs;
    int nconfigs;
    tl_tune_space_fn space;
    void *space_user;
    /* How */
    double tol;                 /* relative error allowed; 0: 1e-2          */
    double budget_s;            /* wall-clock budget for compiling and
                                   measuring; 0: none (see tl_autotune)      */
    int screen_reps;            /* timed runs per candidate; 0: 10           */
    int final_reps;             /* timed runs in the final round; 0: 20      */
    int finalists;              /* candidates in the final round; 0: 4       */
    int compile_threads;        /* as tl_compile_many's threads              */
    int save;                   /* 1: record the best in the tuning database
                                   (prebuilt ops only)                       */
    void *stream;               /* where candidates run (NULL: default)      */
    tl_tune_progress_fn progress; /* NULL: silent                            */
    void *progress_user;
} tl_tune_request;

typedef enum tl_tune_outcome {
    TL_TUNE_PASSED = 0,     /* compiled, passed its check, timed             */
    TL_TUNE_REJECTED,       /* the builder or the lowering refused it: a
                               resource limit (shared memory), a shape the
                               target cannot tile, a feature it lacks       */
    TL_TUNE_COMPILE_FAILED, /* NVRTC failed (ptxas limits included)          */
    TL_TUNE_RUN_FAILED,     /* loading, launching or timing failed (e.g.
                               more registers or threads than the device
                               has)                                          */
    TL_TUNE_WRONG,          /* ran, but its output failed the check         */
    TL_TUNE_SKIPPED         /* not measured: the time budget was spent       */
} tl_tune_outcome;

/* "passed", "rejected", "compile failed", "run failed", "wrong", "skipped". */
TL_API const char *tl_tune_outcome_name(tl_tune_outcome o);

typedef struct tl_tune_entry {
    int index;              /* position of the candidate in the space       */
    tl_tune_config config;
    char text[160];         /* the configuration as text                    */
    tl_tune_outcome outcome;
    tl_status status;       /* of the step that failed; TL_OK otherwise     */
    int finalist;           /* 1: its time is from the final round          */
    double ms;              /* median time; 0 when not timed                */
    double rate;            /* in the result's unit; 0 without a work size  */
    double ratio;           /* baseline_ms / ms: above 1 is faster than the
                               baseline; 0 without one                       */
    double rel_err;         /* of its check; 0 when not checked             */
    char note[512];         /* why it failed or was skipped; "" if passed   */
} tl_tune_entry;

typedef struct tl_tune_result {
    char op[32];            /* the request's op, or "custom"                */
    char shape[64];         /* the problem, e.g. "4096x4096x4096"           */
    char unit[16];          /* "TFLOP/s", "GB/s" or ""                      */
    char baseline[64];      /* e.g. "cuBLAS"; "" when there is none         */
    double baseline_ms, baseline_rate;
    int n;                  /* entries: one per candidate                   */
    int passed;             /* entries[0 .. passed-1] passed, fastest first;
                               the others follow in space order             */
    int compiled;           /* candidates that compiled                     */
    tl_tune_entry *entries;
    double compile_s;       /* building and compiling every candidate, and
                               setting up the problem (operands, reference) */
    double total_s;         /* the whole run                                */
    int saved;              /* 1: entries[0] went into the tuning database  */
} tl_tune_result;

/* Tunes a prebuilt op for one descriptor or a custom kernel for one set of
 * arguments: builds every candidate of the space and compiles them all with
 * tl_compile_many; then, in space order, checks each one that compiled
 * against the reference (outputs poisoned first; a tensor the kernel also
 * reads is restored to its original contents instead) and times it
 * (tl_time, screen_reps runs after 2 warm-up runs), until the budget is
 * spent (the candidate under way finishes; the rest are SKIPPED). A prebuilt
 * op's own space starts with the schedule the op runs untuned (its
 * heuristic or default table), so a budget spent early still measures it
 * and a record is never one slower than no tuning. Then
 * times the `finalists` fastest together with the baseline, interleaved
 * (tl_time_interleaved, 3 warm-up and final_reps runs each), so that the
 * ranking at the top is taken under the same clocks; the final round is
 * not cut by the budget. Ranks the candidates that passed (finalists first
 * by their final time, then the others by their screening time) and, with
 * save, records the best in the tuning database (see tl_tune_db_path) so
 * that the op runs it from then on, in this and in new processes.
 * A candidate that is refused, fails to compile, load or run, or computes
 * a wrong result is reported in its entry and skipped; it is never fatal.
 * A kernel that faults on the device (an illegal address) leaves the CUDA
 * context unusable, so every later candidate fails to run.
 *   "gemm": the descriptor's problem on random operands in [-1, 1), rotated
 * over enough copies that no run finds them in L2; the reference is cuBLAS
 * (cuBLASLt with the epilogue) with an f32 output, or, where cuBLAS does
 * not offer the epilogue or is missing, the op's heuristic schedule with
 * an f32 output; the baseline is cuBLAS(Lt) with the descriptor's output.
 * Rates in TFLOP/s (2 M N K per run). Candidates are one-pass programs:
 * where the op's heuristic splits K (decode shapes) the op keeps that
 * schedule and reads no record, so nothing is saved there (saved stays 0,
 * with a warning through the log).
 *   "softmax": the descriptor's rows and columns (contiguous) of random
 * values in [-4, 4), rotated over copies as for the GEMM; the reference a
 * float64 softmax computed on the host from the same random bits; the
 * baseline a device-to-device copy of the input; rates in GB/s (the input
 * read and the output written once). The space: one-pass widths holding
 * 8, 16 or 32 elements per thread at 128 to 1024 threads, each without a
 * pipeline and with a ring of 3 stages where shared memory holds it, rows
 * split over clusters of 2 and 4 blocks (32 elements a thread, with and
 * without the ring) where the GPU has clusters and a block's share is at
 * least 4096 columns, and chunks of 2048 to 8192 columns narrower than the
 * row.
 *   "rmsnorm": as "softmax", with weights of random values in [-1, 1) and
 * the descriptor's eps in the float64 reference; its records are its own.
 *   "flash_attn": the descriptor's sizes, scale, causal and lse, its tensors
 * contiguous [B, H, S, D], of random values in [-1, 1), rotated over copies
 * as for the GEMM; the reference is the op's untuned output (its default
 * schedule, splits included), itself first checked against a float64
 * attention of sampled rows (the first two, the last two and three rows
 * between, of up to four heads; within max(tol, 1e-2)); the baseline is
 * that untuned run; rates in TFLOP/s (4 B H SQ SKV D per run, halved when
 * causal, as bench_attention counts). Each candidate is one kernel whose
 * blocks walk all their keys (split_kv = split_tail = 1); a record leaves
 * the splits to the op, and is saved only where the best candidate beat
 * the untuned run in the final round (saved stays 0 otherwise, with a
 * warning through the log). The op consults records only where it does
 * not split every block's keys. The space, on sm_90a: two consumer
 * warpgroups of 64 rows taking turns (head_dim up to 128) and, at head_dim
 * 64, three without turns, with key tiles around the defaults (128 to 192
 * at head_dim 64, 128 to 176 at 128, 48 to 80 at 256), 2 to 4 stages, and
 * persistent CTAs dealt blocks in turn or from a counter; one warpgroup of
 * 64 rows for at most 64 query rows; on mma.sync targets: 128 rows on 4 or
 * 8 warps and 64 on 4, key tiles of 32 to 128, 2 or 3 stages; each with
 * its ring in shared memory. Decoding problems (grouped-query heads the op
 * stacks as rows, or keys it splits over blocks because the query blocks
 * fill less than half of the GPU and there are at least 8 key tiles) are
 * TL_ERR_UNSUPPORTED.
 *   Custom: every candidate must take the same arguments.
 * On success *out is a new result the caller frees with
 * tl_tune_result_destroy, also when no candidate passed (passed == 0; the
 * database is then left alone). Errors (no result): TL_ERR_INVALID_ARG (no
 * op and no build, an unknown op, an empty or over-long space, bad
 * numbers), the descriptor's errors, TL_ERR_NO_DEVICE (an offline
 * context), TL_ERR_OUT_OF_MEMORY, and the failures of setting up the
 * problem (allocating, filling, computing the reference), which say what
 * failed. */
TL_API tl_status tl_autotune(tl_ctx *ctx, const tl_tune_request *req, tl_tune_result **out);
TL_API void tl_tune_result_destroy(tl_tune_result *r);

/* --- the tuning database --- */

/* One record: the best configuration for an op on a class of problems, a
 * GPU and a library version, and what it was measured at. */
typedef struct tl_tune_record {
    char op[32];            /* "gemm", "softmax", "rmsnorm", "flash_attn"   */
    char dtypes[32];        /* e.g. "bf16->bf16"                            */
    char layout[64];        /* e.g. "nt", "nn+bias+gelu_tanh"               */
    char shape_class[64];   /* e.g. "m4096,n4096,k4096", "m<=64,n4096,k4096" */
    char gpu[128];          /* the device's name, e.g. "NVIDIA H200"        */
    char version[32];       /* libtilec's version                           */
    char config[160];       /* the configuration as text                    */
    double ms;              /* its time at `shape`                          */
    double ratio;           /* against the baseline; 0 without one          */
    char shape[64];         /* the problem it was tuned on                  */
    int64_t when;           /* seconds since 1970                           */
} tl_tune_record;

/* The database file: tune.db in the cubin cache's directory (see
 * tl_ctx_options.cache_dir); "" when the context's disk cache is off, in
 * which case records live in the context only. Owned by the context. */
TL_API const char *tl_tune_db_path(tl_ctx *ctx);
/* Every record of the database (all ops, GPUs and versions). *out is
 * malloc'ed (free it with tl_free_host; NULL when *n is 0). A damaged or
 * foreign file is rebuilt from its valid lines, with a warning through the
 * log callback. Errors: TL_ERR_INVALID_ARG, TL_ERR_OUT_OF_MEMORY, TL_ERR_IO. */
TL_API tl_status tl_tune_db_list(tl_ctx *ctx, tl_tune_record **out, int *n);
/* Removes every record, from the file and from the context. Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_IO. */
TL_API tl_status tl_tune_db_clear(tl_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Baselines: vendor libraries, for benchmarks and tests                     */
/* ------------------------------------------------------------------------ */
/* Not part of the kernel API: what the library's kernels are measured and
 * checked against. */

/* tl_op_gemm's problem through cuBLAS, as the baseline of benchmarks and the
 * reference of GPU tests (the library's own kernels never call it). Same
 * semantics as tl_op_gemm: row-major A [M, K], B [K, N] or [N, K] with
 * trans_b, bias [N] of in_dtype, f32 accumulation, C of out_dtype (the
 * input type or f32; cuBLAS has no other). The schedule is ignored. No
 * bias and no epilogue: cublasGemmEx; otherwise cublasLtMatmul with the
 * BIAS, RELU, RELU_BIAS, GELU or GELU_BIAS epilogue (cuBLASLt's GELU is the
 * tanh form, so TL_EPI_GELU_TANH maps to it and TL_EPI_GELU_ERF is
 * TL_ERR_UNSUPPORTED).
 *   8-bit inputs (in_dtype f8e4m3 or f8e5m2, A and B both of it): always
 * cublasLtMatmul, with CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 operands, f32
 * compute and scale, C of out_dtype (bf16, f16 or f32), and its fast
 * accumulation on (CUBLASLT_MATMUL_DESC_FAST_ACCUM 1: the tensor cores'
 * accumulator takes every step's products, no partial sums promoted to
 * CUDA-core f32, as in tl_op_gemm's kernels). The bias is then of
 * out_dtype, as tl_op_gemm's is for 8-bit inputs; cuBLASLt reads that for
 * bf16 and f16 outputs only (an f32 output with a bias:
 * TL_ERR_UNSUPPORTED). Its FP8 GEMM offers B as [N, K] only (trans_b),
 * needs rows, batch strides and pointers 16-byte aligned (K, lda, ldb
 * multiples of 16; N, ldc multiples of 16 bytes of out_dtype) and has no
 * pointer-array batch: otherwise TL_ERR_UNSUPPORTED, before any GPU call.
 * E5M2 x E5M2, which cuBLASLt documents no kernel for (CUDA 12, 13):
 * TL_ERR_UNSUPPORTED from its heuristic. There are no scale arguments:
 * per-tensor scales are alpha = scale_a scale_b (tl_baseline_gemm_ex),
 * which cuBLASLt applies the same way.
 *   cuBLAS and cuBLASLt are loaded on first use; their
 * handles, a 32 MiB workspace and the last cuBLASLt plans stay in the
 * context until it is destroyed. Any sizes and alignments (but 8-bit
 * inputs' above). Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_DTYPE, TL_ERR_UNSUPPORTED (a combination
 * cuBLAS(Lt) does not offer), TL_ERR_NO_DEVICE (offline context),
 * TL_ERR_NO_CUBLAS (the libraries cannot be loaded), TL_ERR_CUDA (a cuBLAS
 * call failed: the message names it and its status). */
TL_API tl_status tl_baseline_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias,
                                  uint64_t c, void *stream);
/* tl_op_gemm_ex's call through cuBLAS, with the same arguments and
 * meaning (tl_gemm_args): leading dimensions and alpha, beta go to
 * cublasGemmEx; a strided batch to cublasGemmStridedBatchedEx; a
 * pointer-array batch to cublasGemmBatchedEx; with a bias or an activation,
 * cublasLtMatmul with the leading dimensions, the batch (BATCH_COUNT,
 * STRIDED_BATCH_OFFSET on every layout, one bias for every entry) and
 * alpha, beta (D = epilogue(alpha A B + beta C + bias), C and D both c).
 * tl_baseline_gemm is this with tl_gemm_default_args() and a, b, bias, c.
 * Sizes 0..INT_MAX (M or N 0: nothing), any alignment; no check that
 * outputs do not overlap. Errors: as tl_baseline_gemm (messages start
 * "tl_baseline_gemm_ex:"), and TL_ERR_INVALID_ARG (NULL args, a leading
 * dimension shorter than its row or over INT_MAX, a batch outside
 * 1..INT_MAX, negative strides, an incomplete pointer-array form),
 * TL_ERR_UNSUPPORTED (a pointer-array batch with a bias or an activation:
 * cuBLASLt has none; a cuBLAS without the batched calls). */
TL_API tl_status tl_baseline_gemm_ex(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* TILEC_H */
