/*
 * tutorial.c - the walk-through that `make demo` runs, one chapter per step
 * of docs/tutorial.md (chapters 1 to 6; `tutorial softmax`: chapter 9).
 * Without a GPU it does everything that needs none
 * (environment check, building, lowering, compiling for sm_90a, running in
 * the CPU interpreter) and says what it skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"

static tl_ctx *ctx;

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        tl_status st_ = (expr);                                                                    \
        if (st_ != TL_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #expr, tl_status_name(st_), tl_ctx_error(ctx)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void chapter(const char *title) { printf("\n==== %s ====\n\n", title); }

/* A context on device 0 (returns 1), or an offline one for sm_90a (0);
 * msg says why there is no GPU. */
static int create_context(char *msg, size_t len)
{
    if (tl_ctx_create(NULL, &ctx, msg, len) == TL_OK)
        return 1;
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    char why[256];
    if (tl_ctx_create(&o, &ctx, why, sizeof why) != TL_OK) {
        fprintf(stderr, "cannot create an offline context: %s\n", why);
        exit(1);
    }
    return 0;
}

/* Chapter 1: what machine is this? A context on device 0, or an offline one. */
static int open_context(void)
{
    chapter("1. Environment check");
    int drv = 0, nv_major = 0, nv_minor = 0;
    char msg[512];
    tl_runtime_versions(&drv, &nv_major, &nv_minor, msg, sizeof msg);
    printf("libtilec %s, CUDA driver %d, NVRTC %d.%d\n", tl_version(), drv, nv_major, nv_minor);
    if (create_context(msg, sizeof msg)) {
        tl_device_info d;
        CHECK(tl_ctx_get_device_info(ctx, &d));
        printf("GPU: %s, compute capability %d.%d, %d SMs, %.1f GiB, L2 %d MiB,\n"
               "     shared memory %d KiB per block (%d KiB opt-in), target %s\n",
               d.name, d.cc_major, d.cc_minor, d.sm_count, (double)d.global_mem_bytes / (1 << 30), d.l2_bytes >> 20,
               d.smem_per_block >> 10, d.smem_per_block_optin >> 10, d.target);
        return 1;
    }
    printf("No GPU here (%s).\nContinuing offline: kernels are built, lowered to CUDA C, compiled for sm_90a\n"
           "with NVRTC and run in the CPU interpreter; the GPU chapters are skipped.\n",
           msg);
    return 0;
}

/* Chapter 2: C[i] = A[i] + B[i], written with the builder. */
static tl_kernel *build_vadd(void)
{
    chapter("2. A vector add with the builder");
    printf("    tl_kernel *k = tl_kernel_new(ctx, \"vadd\");\n"
           "    tl_expr n = tl_dim(k, \"N\");                       // a run-time size\n"
           "    tl_buf A = tl_param_tensor(k, \"A\", TL_F32, 1, &n, NULL), B = ..., C = ...;\n"
           "    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 4096)), none, none, 256);\n"
           "    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 4096)),\n"
           "                       tl_parallel1(k, 4096));         // spread over 256 threads\n"
           "    tl_store(k, C, &i, tl_add(k, tl_load(k, A, &i), tl_load(k, B, &i)));\n"
           "    tl_end(k);\n");
    tl_kernel *k = tl_kernel_new(ctx, "vadd");
    tl_expr n = tl_dim(k, "N");
    tl_buf A = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_F32, 1, &n, NULL);
    tl_buf C = tl_param_tensor(k, "C", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 4096)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 4096)), tl_parallel1(k, 4096));
    tl_store(k, C, &i, tl_add(k, tl_load(k, A, &i), tl_load(k, B, &i)));
    tl_end(k);
    CHECK(tl_kernel_status(k));
    return k;
}

/* Chapter 3: the generated CUDA C and its compilation. */
static tl_program *compile_vadd(tl_kernel *k)
{
    chapter("3. Lowering to CUDA C and compiling with NVRTC");
    tl_program *p;
    CHECK(tl_compile(k, NULL, &p));
    tl_program_info info;
    tl_program_get_info(p, &info);
    printf("%s\n", tl_program_source(p));
    size_t cubin;
    tl_program_cubin(p, &cubin);
    const char *from[] = {"compiled now", "memory cache", "disk cache"};
    printf("kernel %s for %s: %zu-byte cubin, %s (%.1f ms)%s\n", info.name, info.target, cubin,
           from[info.from_cache], info.compile_ms, info.loaded ? ", loaded" : ", not loaded (no GPU)");
    return p;
}

/* Chapter 4: the CPU interpreter runs the same graph: the golden model. */
static void interpret_vadd(tl_program *p)
{
    chapter("4. Running it in the CPU interpreter");
    int64_t n = 100003;
    float *a = malloc(4 * (size_t)n), *b = malloc(4 * (size_t)n), *c = malloc(4 * (size_t)n);
    double *ref = malloc(8 * (size_t)n);
    tl_random_host(a, TL_F32, n, 1, -1, 1);
    tl_random_host(b, TL_F32, n, 2, -1, 1);
    memset(c, 0xFF, 4 * (size_t)n); /* poison: NaN until written */
    for (int64_t i = 0; i < n; i++)
        ref[i] = (double)a[i] + (double)b[i];
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(a), tl_arg_hptr(b), tl_arg_hptr(c)};
    CHECK(tl_program_interpret(p, 4, args));
    tl_span out = {.dtype = TL_F32, .n = n, .host = c}, r = {.dtype = TL_F64, .n = n, .host = ref};
    tl_check_result res;
    CHECK(tl_check(NULL, &out, &r, 1e-6, &res));
    printf("n = %lld (ragged: not a multiple of the 4096-element tile): rel err %.2e, max abs %.2e -> %s\n",
           (long long)n, res.rel_err, res.max_abs_err, res.pass ? "PASS" : "FAIL");
    free(a), free(b), free(c), free(ref);
    if (!res.pass)
        exit(1);
}

typedef struct vadd_work {
    const tl_program *p;
    int64_t n;
    uint64_t a, b, c;
} vadd_work;

static tl_status launch_vadd(void *user, void *stream)
{
    vadd_work *w = user;
    tl_arg args[] = {tl_arg_int(w->n), tl_arg_dptr(w->a), tl_arg_dptr(w->b), tl_arg_dptr(w->c)};
    return tl_launch(w->p, stream, 4, args);
}

static tl_status copy_a_to_c(void *user, void *stream)
{
    vadd_work *w = user;
    return tl_memcpy_dtod(ctx, w->c, w->a, (size_t)w->n * 4, stream);
}

/* Chapter 5: on the GPU, checked against the interpreter and timed against
 * a device-to-device copy. */
static void run_on_gpu(tl_program *p)
{
    chapter("5. On the GPU: check and time");
    vadd_work w = {.p = p, .n = (int64_t)1 << 27};
    size_t bytes = (size_t)w.n * 4;
    CHECK(tl_malloc(ctx, bytes, &w.a));
    CHECK(tl_malloc(ctx, bytes, &w.b));
    CHECK(tl_malloc(ctx, bytes, &w.c));
    CHECK(tl_random_fill(ctx, w.a, TL_F32, w.n, 1, -1, 1, NULL));
    CHECK(tl_random_fill(ctx, w.b, TL_F32, w.n, 2, -1, 1, NULL));
    CHECK(tl_memset_u8(ctx, w.c, 0xFF, bytes, NULL));
    int64_t small = 1000003; /* the interpreter is the reference: keep it small */
    tl_arg args[] = {tl_arg_int(small), tl_arg_dptr(w.a), tl_arg_dptr(w.b), tl_arg_dptr(w.c)};
    tl_check_result res;
    CHECK(tl_program_check(p, NULL, 4, args, NULL, NULL, 1e-6, &res));
    printf("device vs interpreter, n = %lld: rel err %.2e -> %s\n", (long long)small, res.rel_err,
           res.pass ? "PASS" : "FAIL");
    tl_timing_options opt = {.warmup = 5, .reps = 30};
    tl_timing t_vadd, t_copy;
    CHECK(tl_time(ctx, NULL, launch_vadd, &w, &opt, &t_vadd));
    CHECK(tl_time(ctx, NULL, copy_a_to_c, &w, &opt, &t_copy));
    double gbs = 3.0 * (double)bytes / t_vadd.median_ms / 1e6, copy = 2.0 * (double)bytes / t_copy.median_ms / 1e6;
    printf("n = 2^27 f32: vadd %.3f ms = %.0f GB/s; device copy %.3f ms = %.0f GB/s; ratio %.3f\n",
           t_vadd.median_ms, gbs, t_copy.median_ms, copy, gbs / copy);
    tl_free(ctx, w.a), tl_free(ctx, w.b), tl_free(ctx, w.c);
    if (!res.pass)
        exit(1);
}

/* Chapter 6: a tensor-core GEMM with a fused bias + GELU epilogue, built by
 * the library with the same builder calls a user would write. */
static void gemm_chapter(int gpu)
{
    chapter("6. A tensor-core GEMM in C");
    tl_gemm_desc d = {.m = 200, .n = 320, .k = 136, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_ERF};
    tl_kernel *k;
    CHECK(tl_op_gemm_build(ctx, &d, &k));
    tl_program *p;
    CHECK(tl_compile(k, NULL, &p));
    tl_program_info info;
    tl_program_get_info(p, &info);
    const char *src = tl_program_source(p);
    const char *loop = strstr(src, "// tl_pipelined");
    printf("The main loop of %s (%s, %d threads, %d bytes of shared memory):\n\n", info.name, info.target,
           info.threads, info.smem_bytes);
    if (loop) { /* the first lines of the pipelined loop */
        const char *end = loop;
        for (int lines = 0; lines < 14 && (end = strchr(end + 1, '\n')); lines++)
            ;
        printf("%.*s\n    ...\n\n", end ? (int)(end - loop) : 200, loop);
    }
    /* the interpreter runs the whole graph: pipelined copies, tl_gemm, epilogue */
    size_t na = (size_t)(d.m * d.k), nb = (size_t)(d.k * d.n), nc = (size_t)(d.m * d.n);
    uint16_t *a = malloc(2 * na), *b = malloc(2 * nb), *bias = malloc(2 * (size_t)d.n), *c = malloc(2 * nc);
    double *ref = malloc(8 * nc);
    tl_random_host(a, TL_BF16, (int64_t)na, 11, -1, 1);
    tl_random_host(b, TL_BF16, (int64_t)nb, 12, -1, 1);
    tl_random_host(bias, TL_BF16, d.n, 13, -1, 1);
    for (int64_t i = 0; i < d.m; i++)
        for (int64_t j = 0; j < d.n; j++) {
            double x = tl_bf16_to_f32(bias[j]);
            for (int64_t q = 0; q < d.k; q++)
                x += (double)tl_bf16_to_f32(a[i * d.k + q]) * tl_bf16_to_f32(b[q * d.n + j]);
            ref[i * d.n + j] = 0.5 * x * (1 + erf(x / sqrt(2.0)));
        }
    memset(c, 0xFF, 2 * nc);
    tl_arg hargs[] = {tl_arg_int(d.m), tl_arg_int(d.n), tl_arg_int(d.k), tl_arg_hptr(a), tl_arg_hptr(b),
                      tl_arg_hptr(bias), tl_arg_hptr(c)};
    CHECK(tl_program_interpret(p, 7, hargs));
    tl_span out = {.dtype = TL_BF16, .n = (int64_t)nc, .host = c}, r = {.dtype = TL_F64, .n = (int64_t)nc, .host = ref};
    tl_check_result res;
    CHECK(tl_check(NULL, &out, &r, 1e-2, &res));
    printf("interpreter, %lldx%lldx%lld bf16 + bias + GELU vs a float64 loop: rel err %.2e -> %s\n", (long long)d.m,
           (long long)d.n, (long long)d.k, res.rel_err, res.pass ? "PASS" : "FAIL");
    if (gpu && info.loaded) {
        uint64_t da, db, dbias, dc;
        CHECK(tl_malloc(ctx, 2 * na, &da));
        CHECK(tl_malloc(ctx, 2 * nb, &db));
        CHECK(tl_malloc(ctx, 2 * (size_t)d.n, &dbias));
        CHECK(tl_malloc(ctx, 2 * nc, &dc));
        CHECK(tl_memcpy_htod(ctx, da, a, 2 * na));
        CHECK(tl_memcpy_htod(ctx, db, b, 2 * nb));
        CHECK(tl_memcpy_htod(ctx, dbias, bias, 2 * (size_t)d.n));
        CHECK(tl_memset_u8(ctx, dc, 0xFF, 2 * nc, NULL));
        CHECK(tl_op_gemm(ctx, &d, da, db, dbias, dc, NULL));
        CHECK(tl_synchronize(ctx));
        tl_span dout = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = dc};
        tl_check_result gres;
        CHECK(tl_check(ctx, &dout, &r, 1e-2, &gres));
        printf("GPU (tl_op_gemm) vs the float64 loop: rel err %.2e -> %s\n", gres.rel_err, gres.pass ? "PASS" : "FAIL");
        tl_free(ctx, da), tl_free(ctx, db), tl_free(ctx, dbias), tl_free(ctx, dc);
        res.pass = res.pass && gres.pass;
        printf("\nThe schedule sweep and the fused-epilogue comparison follow (tilec bench gemm,\n"
               "bench_epilogue); bench/NOTES.md keeps the figures.\n");
    }
    free(a), free(b), free(bias), free(c), free(ref);
    tl_program_destroy(p);
    tl_kernel_destroy(k);
    if (!res.pass)
        exit(1);
}

/* Chapter 6, 8-bit inputs: the same op with f8e4m3 A and B ([N, K]), their
 * per-tensor scales in tl_gemm_args, a bf16 C; in the interpreter against
 * float64 of the decoded codes, then on the GPU when it is sm_90a. */
static void fp8_section(int gpu)
{
    printf("\n---- 8-bit inputs (FP8) ----\n\n");
    tl_gemm_desc d = {.m = 96, .n = 160, .k = 256, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1};
    tl_gemm_args g = tl_gemm_default_args();
    g.scale_a = 0.5, g.scale_b = 4.0; /* the dequantisation factors of A and B */
    tl_kernel *k;
    if (tl_op_gemm_ex_build(ctx, &d, &g, &k) != TL_OK) { /* a target without wgmma says so */
        printf("%s\n(skipped)\n", tl_ctx_error(ctx));
        return;
    }
    char *src;
    CHECK(tl_kernel_source(k, tl_ctx_target(ctx), &src));
    const char *mma = strstr(src, "wgmma.mma_async");
    if (mma)
        printf("The tensor-core instruction: %.*s\n", (int)strcspn(mma, " \""), mma);
    tl_free_host(src);
    size_t na = (size_t)(d.m * d.k), nb = (size_t)(d.n * d.k), nc = (size_t)(d.m * d.n);
    uint8_t *a = malloc(na), *b = malloc(nb);
    uint16_t *c = malloc(2 * nc);
    double *ref = malloc(8 * nc);
    CHECK(tl_random_host(a, TL_F8E4M3, (int64_t)na, 21, -1, 1));
    CHECK(tl_random_host(b, TL_F8E4M3, (int64_t)nb, 22, -1, 1));
    double alpha = (double)(float)(g.scale_a * g.scale_b);
    for (int64_t i = 0; i < d.m; i++)
        for (int64_t j = 0; j < d.n; j++) {
            double x = 0;
            for (int64_t q = 0; q < d.k; q++)
                x += (double)tl_f8e4m3_to_f32(a[i * d.k + q]) * tl_f8e4m3_to_f32(b[j * d.k + q]);
            ref[i * d.n + j] = alpha * x;
        }
    memset(c, 0xFF, 2 * nc);
    /* a call with scales runs the strided kernel: its documented arguments */
    tl_arg hargs[] = {tl_arg_int(d.m), tl_arg_int(d.n), tl_arg_int(d.k), tl_arg_int(1), tl_arg_int(d.k),
                      tl_arg_int(d.k), tl_arg_int(d.n), tl_arg_int(d.m * d.k), tl_arg_int(d.n * d.k),
                      tl_arg_int(d.m * d.n), tl_arg_int(1), tl_arg_int(1), tl_arg_float(alpha), tl_arg_hptr(a),
                      tl_arg_hptr(b), tl_arg_hptr(c)};
    CHECK(tl_interpret(k, 16, hargs));
    tl_kernel_destroy(k);
    tl_span out = {.dtype = TL_BF16, .n = (int64_t)nc, .host = c}, r = {.dtype = TL_F64, .n = (int64_t)nc, .host = ref};
    tl_check_result res;
    CHECK(tl_check(NULL, &out, &r, 1e-2, &res));
    printf("interpreter, %lldx%lldx%lld f8e4m3 (scales 0.5 and 4) -> bf16 vs a float64 loop: rel err %.2e -> %s\n",
           (long long)d.m, (long long)d.n, (long long)d.k, res.rel_err, res.pass ? "PASS" : "FAIL");
    if (gpu) {
        uint64_t da, db, dc;
        CHECK(tl_malloc(ctx, na, &da));
        CHECK(tl_malloc(ctx, nb, &db));
        CHECK(tl_malloc(ctx, 2 * nc, &dc));
        CHECK(tl_memcpy_htod(ctx, da, a, na));
        CHECK(tl_memcpy_htod(ctx, db, b, nb));
        CHECK(tl_memset_u8(ctx, dc, 0xFF, 2 * nc, NULL));
        g.a = da, g.b = db, g.c = dc;
        CHECK(tl_op_gemm_ex(ctx, &d, &g, NULL));
        CHECK(tl_synchronize(ctx));
        tl_span dout = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = dc};
        tl_check_result gres;
        CHECK(tl_check(ctx, &dout, &r, 1e-2, &gres));
        printf("GPU (tl_op_gemm_ex) vs the float64 loop: rel err %.2e -> %s\n", gres.rel_err,
               gres.pass ? "PASS" : "FAIL");
        tl_free(ctx, da), tl_free(ctx, db), tl_free(ctx, dc);
        res.pass = res.pass && gres.pass;
    }
    free(a), free(b), free(c), free(ref);
    if (!res.pass)
        exit(1);
}

/* Chapter 9: the row softmax from fragment reductions. First the one-pass
 * kernel of docs/tutorial.md, written with the builder as printed there. */
static tl_kernel *build_softmax_by_hand(void)
{
    enum { R = 8, W = 1024, THREADS = 256 };
    tl_kernel *k = tl_kernel_new(ctx, "softmax");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F16, 2, (tl_expr[]){M, N}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F16, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, M, tl_int(k, R)), TL_NONE_EXPR, TL_NONE_EXPR, THREADS);
    tl_expr row0 = tl_mul(k, tl_block_idx(k, 0), tl_int(k, R));
    tl_buf x = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, W});
    tl_buf m = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){R});
    tl_buf s = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){R});
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){R, W}, v); /* x = the rows, -inf past N */
    tl_expr at[2] = {tl_add(k, row0, v[0]), v[1]};
    tl_expr xv = tl_cast(k, tl_load(k, X, at), TL_F32);
    tl_store(k, x, v, tl_select(k, tl_lt(k, v[1], N), xv, tl_f32(k, -INFINITY)));
    tl_end(k);
    tl_reduce_max(k, x, m, 1, 1); /* m[i] = max_j x[i, j] */
    tl_parallel(k, 2, (int64_t[]){R, W}, v); /* x = exp(x - m) */
    tl_expr d = tl_sub(k, tl_load(k, x, v), tl_load(k, m, &v[0]));
    tl_store(k, x, v, tl_exp2(k, tl_mul(k, d, tl_f32(k, 1.44269504f))));
    tl_end(k);
    tl_reduce_sum(k, x, s, 1, 1); /* s[i] = sum_j x[i, j] */
    tl_parallel(k, 2, (int64_t[]){R, W}, v); /* Y = x / s */
    tl_expr at2[2] = {tl_add(k, row0, v[0]), v[1]};
    tl_store(k, Y, at2, tl_cast(k, tl_div(k, tl_load(k, x, v), tl_load(k, s, &v[0])), TL_F16));
    tl_end(k);
    CHECK(tl_kernel_status(k));
    return k;
}

/* The row-wise ops of each f16 row in double: softmax (a row of -inf gives
 * zeros), or RMSNorm with weights w when w is not NULL. */
static double *row_reference(const uint16_t *x, const uint16_t *w, int64_t rows, int64_t cols, double eps)
{
    double *ref = malloc(8 * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows; i++) {
        const uint16_t *r = x + i * cols;
        double m = -INFINITY, sum = 0, sq = 0;
        for (int64_t j = 0; j < cols; j++) {
            double v = tl_f16_to_f32(r[j]);
            m = fmax(m, v);
            sq += v * v;
        }
        for (int64_t j = 0; j < cols; j++)
            sum += m == -INFINITY ? 0 : exp(tl_f16_to_f32(r[j]) - m);
        for (int64_t j = 0; j < cols; j++) {
            double v = tl_f16_to_f32(r[j]);
            if (w)
                ref[i * cols + j] = v / sqrt(sq / (double)cols + eps) * tl_f16_to_f32(w[j]);
            else
                ref[i * cols + j] = m == -INFINITY ? 0 : exp(v - m) / sum;
        }
    }
    return ref;
}

/* Interprets softmax kernel k on f16 rows (row 1 around 1e4: its exp
 * overflows f32) against the reference. The op's kernels (op = 1) take row
 * strides, M, N, ld_in, ld_out, X, Y, and have the guards for a row of
 * -inf, which row 0 then is; the hand-written one takes M, N, X, Y. */
static int interpret_softmax(tl_kernel *k, const char *what, int64_t rows, int64_t cols, int op)
{
    size_t n = (size_t)(rows * cols);
    uint16_t *x = malloc(2 * n), *y = malloc(2 * n);
    tl_random_host(x, TL_F16, (int64_t)n, 21, -5, 5);
    for (int64_t j = 0; j < cols; j++) {
        if (op)
            x[j] = tl_f32_to_f16(-INFINITY);
        x[cols + j] = tl_f32_to_f16(1e4f - (float)(j % 9));
    }
    memset(y, 0xFF, 2 * n);
    tl_arg args[6] = {tl_arg_int(rows), tl_arg_int(cols), tl_arg_int(cols), tl_arg_int(cols)};
    args[op ? 4 : 2] = tl_arg_hptr(x);
    args[op ? 5 : 3] = tl_arg_hptr(y);
    CHECK(tl_interpret(k, op ? 6 : 4, args));
    double *ref = row_reference(x, NULL, rows, cols, 0);
    tl_span out = {.dtype = TL_F16, .n = (int64_t)n, .host = y}, r = {.dtype = TL_F64, .n = (int64_t)n, .host = ref};
    tl_check_result res;
    CHECK(tl_check(NULL, &out, &r, 2e-3, &res));
    int zeros = 1;
    for (int64_t j = 0; op && j < cols; j++)
        zeros = zeros && tl_f16_to_f32(y[j]) == 0.0f;
    printf("  %-40s %3lld x %-5lld rel err %.2e, %lld NaN%s -> %s\n", what, (long long)rows, (long long)cols,
           res.rel_err, (long long)res.nonfinite, !op ? "" : zeros ? ", the -inf row all 0" : ", the -inf row NOT 0",
           res.pass && zeros ? "PASS" : "FAIL");
    free(x), free(y), free(ref);
    return res.pass && zeros;
}

typedef struct rows_work {
    int op; /* 0: copy, 1: softmax, 2: rmsnorm */
    tl_softmax_desc sd;
    tl_rmsnorm_desc rd;
    uint64_t x, w, y;
} rows_work;

static tl_status run_rows(void *user, void *stream)
{
    rows_work *r = user;
    size_t bytes = (size_t)(r->sd.rows * r->sd.cols) * 2;
    if (r->op == 0)
        return tl_memcpy_dtod(ctx, r->y, r->x, bytes, stream);
    if (r->op == 1)
        return tl_op_softmax(ctx, &r->sd, r->x, r->y, stream);
    return tl_op_rmsnorm(ctx, &r->rd, r->x, r->w, r->y, stream);
}

/* tl_op_softmax and tl_op_rmsnorm at 16384 x 1024 fp16, each checked
 * against float64 and timed interleaved with a copy of the same bytes. */
static int rows_on_gpu(void)
{
    const int64_t rows = 16384, cols = 1024;
    size_t n = (size_t)(rows * cols);
    rows_work w[3];
    w[0] = (rows_work){.sd = {.rows = rows, .cols = cols, .in_dtype = TL_F16, .out_dtype = TL_F16}};
    w[0].rd = (tl_rmsnorm_desc){.rows = rows, .cols = cols, .in_dtype = TL_F16, .out_dtype = TL_F16, .eps = 1e-6};
    CHECK(tl_malloc(ctx, 2 * n, &w[0].x));
    CHECK(tl_malloc(ctx, 2 * n, &w[0].y));
    CHECK(tl_malloc(ctx, 2 * (size_t)cols, &w[0].w));
    CHECK(tl_random_fill(ctx, w[0].x, TL_F16, (int64_t)n, 31, -5, 5, NULL));
    CHECK(tl_random_fill(ctx, w[0].w, TL_F16, cols, 32, 0.5, 1.5, NULL));
    w[1] = w[0], w[2] = w[0];
    w[1].op = 1, w[2].op = 2;
    uint16_t *hx = malloc(2 * n), *hw = malloc(2 * (size_t)cols);
    tl_random_host(hx, TL_F16, (int64_t)n, 31, -5, 5);
    tl_random_host(hw, TL_F16, cols, 32, 0.5, 1.5);
    int pass = 1;
    for (int op = 1; op <= 2; op++) {
        CHECK(tl_memset_u8(ctx, w[op].y, 0xFF, 2 * n, NULL));
        CHECK(run_rows(&w[op], NULL));
        CHECK(tl_synchronize(ctx));
        double *ref = row_reference(hx, op == 2 ? hw : NULL, rows, cols, 1e-6);
        tl_span out = {.dtype = TL_F16, .n = (int64_t)n, .dptr = w[op].y};
        tl_span r = {.dtype = TL_F64, .n = (int64_t)n, .host = ref};
        tl_check_result res;
        CHECK(tl_check(ctx, &out, &r, 2e-3, &res));
        printf("  GPU %-8s vs float64: rel err %.2e -> %s\n", op == 1 ? "softmax" : "rmsnorm", res.rel_err,
               res.pass ? "PASS" : "FAIL");
        pass = pass && res.pass;
        free(ref);
    }
    tl_work_fn fns[3] = {run_rows, run_rows, run_rows};
    void *users[3] = {&w[0], &w[1], &w[2]};
    tl_timing t[3];
    tl_timing_options opt = {.warmup = 10, .reps = 30};
    CHECK(tl_time_interleaved(ctx, NULL, 3, fns, users, &opt, t));
    double bytes = 4.0 * (double)n, copy = bytes / t[0].median_ms / 1e6;
    printf("  16384 x 1024 fp16, read once + written once: copy %.0f GB/s; softmax %.0f GB/s = %.2f x copy; "
           "rmsnorm %.0f GB/s = %.2f x copy\n", copy, bytes / t[1].median_ms / 1e6, t[0].median_ms / t[1].median_ms,
           bytes / t[2].median_ms / 1e6, t[0].median_ms / t[2].median_ms);
    tl_free(ctx, w[0].x), tl_free(ctx, w[0].y), tl_free(ctx, w[0].w);
    free(hx), free(hw);
    return pass;
}

static void softmax_chapter(int gpu)
{
    chapter("9. Softmax with fragment reductions");
    printf("    tl_parallel(k, 2, (int64_t[]){R, W}, v);         // x = the rows, -inf past N\n"
           "    ...\n"
           "    tl_reduce_max(k, x, m, 1, 1);                      // m[i] = max_j x[i, j]\n"
           "    tl_parallel(k, 2, (int64_t[]){R, W}, v);         // x = exp2((x - m[i]) log2 e)\n"
           "    ...\n"
           "    tl_reduce_sum(k, x, s, 1, 1);                      // s[i] = sum_j x[i, j]\n"
           "    tl_parallel(k, 2, (int64_t[]){R, W}, v);         // Y = x / s[i]\n"
           "    ...\n\n"
           "In the interpreter, against float64:\n");
    tl_kernel *k = build_softmax_by_hand();
    int pass = interpret_softmax(k, "by hand (8 rows x 1024 per block)", 100, 1000, 0);
    tl_kernel_destroy(k);
    tl_softmax_desc d = {.rows = 37, .cols = 1000, .in_dtype = TL_F16, .out_dtype = TL_F16};
    CHECK(tl_op_softmax_build(ctx, &d, &k));
    pass = interpret_softmax(k, "tl_op_softmax, one pass", d.rows, d.cols, 1) && pass;
    tl_kernel_destroy(k);
    d = (tl_softmax_desc){.rows = 3, .cols = 5000, .in_dtype = TL_F16, .out_dtype = TL_F16,
                          .schedule = {.width = 1024}};
    CHECK(tl_op_softmax_build(ctx, &d, &k));
    pass = interpret_softmax(k, "tl_op_softmax, online (1024-col chunks)", d.rows, d.cols, 1) && pass;
    tl_kernel_destroy(k);
    if (gpu)
        pass = rows_on_gpu() && pass;
    else
        printf("\n(The GPU part, tl_op_softmax and tl_op_rmsnorm against a device copy, skipped: no GPU.)\n");
    if (!pass)
        exit(1);
}

int main(int argc, char **argv)
{
    /* `tutorial softmax` runs chapter 9 alone: make demo runs it after the
     * GEMM benchmarks (chapters 7 and 8, other programs) */
    if (argc > 1 && strcmp(argv[1], "softmax") == 0) {
        char msg[512];
        softmax_chapter(create_context(msg, sizeof msg));
        tl_ctx_destroy(ctx);
        return 0;
    }
    int gpu = open_context();
    tl_kernel *k = build_vadd();
    tl_program *p = compile_vadd(k);
    tl_kernel_destroy(k); /* the program keeps what it needs */
    interpret_vadd(p);
    if (gpu)
        run_on_gpu(p);
    else
        printf("\n(Chapter 5, on the GPU, skipped: no GPU on this machine.)\n");
    tl_program_destroy(p);
    gemm_chapter(gpu);
    fp8_section(gpu);
    tl_ctx_destroy(ctx);
    printf("\nDone.\n");
    return 0;
}
