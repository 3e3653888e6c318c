/*
 * tutorial.c - the walk-through that `make demo` runs, one chapter per step
 * of docs/tutorial.md. Without a GPU it does everything that needs none
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

/* Chapter 1: what machine is this? A context on device 0, or an offline one. */
static int open_context(void)
{
    chapter("1. Environment check");
    int drv = 0, nv_major = 0, nv_minor = 0;
    char msg[512];
    tl_runtime_versions(&drv, &nv_major, &nv_minor, msg, sizeof msg);
    printf("libtilec %s, CUDA driver %d, NVRTC %d.%d\n", tl_version(), drv, nv_major, nv_minor);
    if (tl_ctx_create(NULL, &ctx, msg, sizeof msg) == TL_OK) {
        tl_device_info d;
        CHECK(tl_ctx_device_info(ctx, &d));
        printf("GPU: %s, compute capability %d.%d, %d SMs, %.1f GiB, L2 %d MiB,\n"
               "     shared memory %d KiB per block (%d KiB opt-in), target %s\n",
               d.name, d.cc_major, d.cc_minor, d.sm_count, (double)d.global_mem_bytes / (1 << 30), d.l2_bytes >> 20,
               d.smem_per_block >> 10, d.smem_per_block_optin >> 10, d.target);
        return 1;
    }
    printf("No GPU here (%s).\nContinuing offline: kernels are built, lowered to CUDA C, compiled for sm_90a\n"
           "with NVRTC and run in the CPU interpreter; the GPU chapters are skipped.\n",
           msg);
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) {
        fprintf(stderr, "cannot create an offline context: %s\n", msg);
        exit(1);
    }
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
    const char *loop = strstr(src, "{ // tl_pipelined");
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

int main(void)
{
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
    tl_ctx_destroy(ctx);
    printf("\nDone.\n");
    return 0;
}
