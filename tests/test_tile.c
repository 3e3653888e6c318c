/* test_tile.c - tile operations and the GEMM without a GPU: the interpreter
 * runs every tile operation and its GEMM matches a naive loop; builder and
 * layout errors; NVRTC cubins for sm_80 and sm_90a of GEMM schedules; the
 * generated CUDA of a small GEMM against a golden file; user-written tile
 * kernels that once broke the emitter (issue 12 items 4a and 5). */
#include "fixture.h"
#include "program.h"

#include <math.h>


static double h16(tl_dtype dt, uint16_t v) { return dt == TL_F16 ? tl_f16_to_f32(v) : tl_bf16_to_f32(v); }

/* Runs the prebuilt GEMM kernel of d in the interpreter and compares it with
 * test_act(A B + bias) computed in double from the same inputs. */
static void check_gemm_interp(const tl_gemm_desc *d, double tol)
{
    tl_kernel *k;
    assert_status(tl_op_gemm_build(ctx, d, &k), TL_OK);
    int64_t M = d->m, N = d->n, K = d->k;
    uint16_t *A = malloc(2 * (size_t)(M * K)), *B = malloc(2 * (size_t)(K * N)), *bias = malloc(2 * (size_t)N);
    size_t osz = tl_dtype_size(d->out_dtype);
    void *C = malloc(osz * (size_t)(M * N));
    double *R = malloc(8 * (size_t)(M * N));
    tl_random_host(A, d->in_dtype, M * K, 1, -1, 1);
    tl_random_host(B, d->in_dtype, K * N, 2, -1, 1);
    tl_random_host(bias, d->in_dtype, N, 3, -1, 1);
    memset(C, 0xFF, osz * (size_t)(M * N));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = d->has_bias ? h16(d->in_dtype, bias[j]) : 0;
            for (int64_t kk = 0; kk < K; kk++)
                acc += h16(d->in_dtype, A[i * K + kk]) *
                       h16(d->in_dtype, d->trans_b ? B[j * K + kk] : B[kk * N + j]);
            R[i * N + j] = test_act(d->epilogue, acc);
        }
    tl_arg args[7];
    int n = 0;
    args[n++] = tl_arg_int(M), args[n++] = tl_arg_int(N), args[n++] = tl_arg_int(K);
    args[n++] = tl_arg_hptr(A), args[n++] = tl_arg_hptr(B);
    if (d->has_bias)
        args[n++] = tl_arg_hptr(bias);
    args[n++] = tl_arg_hptr(C);
    assert_status(tl_interpret(k, n, args), TL_OK);
    tl_span out = {.dtype = d->out_dtype, .n = M * N, .host = C}, ref = {.dtype = TL_F64, .n = M * N, .host = R};
    tl_check_result res;
    assert_status(tl_check(NULL, &out, &ref, tol, &res), TL_OK);
    if (!res.pass)
        fail_msg("gemm %lldx%lldx%lld trans_b %d epi %d: rel %g first bad %lld", (long long)M, (long long)N,
                 (long long)K, d->trans_b, d->epilogue, res.rel_err, (long long)res.first_bad);
    free(A), free(B), free(bias), free(C), free(R);
    tl_kernel_destroy(k);
}

static const tl_gemm_schedule small_schedule = {.block_m = 32, .block_n = 32, .block_k = 16, .stages = 2, .threads = 128};

static void test_gemm_interp_matches_naive(void **state)
{
    (void)state;
    for (int tb = 0; tb < 2; tb++)
        for (int e = 0; e <= TL_EPI_GELU_TANH; e++) {
            tl_gemm_desc d = {.m = 50, .n = 70, .k = 40, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = tb,
                              .has_bias = e != 0, .epilogue = (tl_epilogue)e, .schedule = small_schedule};
            check_gemm_interp(&d, 1e-5);
        }
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_F16, .out_dtype = TL_F16, .schedule = small_schedule};
    check_gemm_interp(&d, 2e-3);
    tl_gemm_desc e = {.m = 33, .n = 65, .k = 17, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_ERF, .schedule = small_schedule};
    check_gemm_interp(&e, 1e-2);
    /* a ping-pong kernel is the same program to the interpreter */
    tl_gemm_desc pp = {.m = 130, .n = 72, .k = 80, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = 1,
                       .has_bias = 1, .epilogue = TL_EPI_GELU_TANH,
                       .schedule = {.block_m = 64, .block_n = 64, .block_k = 64, .stages = 3, .threads = 128,
                                    .pingpong = 1}};
    check_gemm_interp(&pp, 1e-5);
}

/* Every tile operation by hand: shared and fragment copies both ways, fill,
 * an element-wise loop on a fragment, a local buffer, tl_use_swizzle. */
static void test_tile_ops_roundtrip(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "tiles");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_BF16, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 32)), tl_ceildiv(k, M, tl_int(k, 16)), TL_NONE_EXPR, 64);
    tl_use_swizzle(k, 2);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf S = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){16, 32});
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){16, 32});
    tl_buf G = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){16, 32});
    tl_buf L = tl_alloc_local(k, TL_F32, 1, (int64_t[]){1});
    tl_copy(k, tl_tile(k, X, by, bx), tl_all(S));
    tl_copy(k, tl_all(S), tl_all(F));
    tl_fill(k, G, tl_f32(k, 3.0f));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){16, 32}, v);
    tl_expr zero = tl_int(k, 0);
    tl_store(k, L, &zero, tl_mul(k, tl_load(k, F, v), tl_load(k, G, v)));
    tl_store(k, F, v, tl_add(k, tl_load(k, L, &zero), tl_f32(k, 1.0f)));
    tl_end(k);
    tl_copy(k, tl_all(F), tl_all(S));
    tl_copy(k, tl_all(S), tl_tile(k, Y, by, bx));
    assert_status(tl_kernel_status(k), TL_OK);
    int64_t m = 37, n = 70;
    float *x = malloc(4 * (size_t)(m * n));
    uint16_t *y = malloc(2 * (size_t)(m * n));
    tl_random_host(x, TL_F32, m * n, 9, -2, 2);
    memset(y, 0xFF, 2 * (size_t)(m * n));
    tl_arg args[] = {tl_arg_int(m), tl_arg_int(n), tl_arg_hptr(x), tl_arg_hptr(y)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    for (int64_t i = 0; i < m * n; i++)
        assert_true(y[i] == tl_f32_to_bf16(x[i] * 3.0f + 1.0f));
    char *src;
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    assert_non_null(strstr(src, "tl_cp_async16"));
    assert_non_null(strstr(src, "tl_panel"));
    tl_free_host(src);
    tl_program *p;
    assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_80"}, &p), TL_OK);
    tl_program_destroy(p);
    free(x), free(y);
    tl_kernel_destroy(k);
}

static void expect_gemm_error(tl_gemm_desc *d, tl_status want, const char *fragment)
{
    tl_kernel *k = NULL;
    tl_status st = tl_op_gemm_build(ctx, d, &k);
    if (st == TL_OK) {
        tl_program *p = NULL;
        st = tl_compile(k, NULL, &p);
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    assert_status(st, want);
    if (fragment && !strstr(tl_ctx_error(ctx), fragment))
        fail_msg("message '%s' lacks '%s'", tl_ctx_error(ctx), fragment);
}

static void test_gemm_errors(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    d.schedule = (tl_gemm_schedule){.block_m = 16, .block_n = 16, .block_k = 16, .stages = 2, .threads = 256};
    expect_gemm_error(&d, TL_ERR_SHAPE, "MMA layout cannot tile");
    d.schedule = (tl_gemm_schedule){.block_m = 256, .block_n = 256, .block_k = 128, .stages = 4, .threads = 256};
    expect_gemm_error(&d, TL_ERR_SHAPE, "exceeds the limit of 232448 bytes");
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 64, .block_k = 24, .stages = 2, .threads = 128};
    expect_gemm_error(&d, TL_ERR_SHAPE, "multiple of 16");
    d.schedule = (tl_gemm_schedule){0};
    d.in_dtype = TL_F32;
    expect_gemm_error(&d, TL_ERR_DTYPE, "bf16, f16, f8e4m3 or f8e5m2");
    d.in_dtype = TL_BF16;
    d.m = 0;
    expect_gemm_error(&d, TL_ERR_INVALID_ARG, ">= 1");
}

static void test_builder_tile_errors(void **state)
{
    (void)state;
    /* shapes that disagree */
    tl_kernel *k = tl_kernel_new(ctx, "bad");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf a = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 32});
    tl_buf b = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){16, 64});
    tl_buf c = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
    tl_gemm(k, a, b, c, 0);
    assert_status(tl_kernel_status(k), TL_ERR_SHAPE);
    assert_non_null(strstr(tl_kernel_error(k), "K=32 vs 16"));
    tl_kernel_destroy(k);
    /* a fragment indexed other than by its loop's variables */
    k = tl_kernel_new(ctx, "conflict");
    tl_expr n = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){n, n}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf f = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){32, 32});
    tl_clear(k, f);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){32, 32}, v);
    tl_store(k, f, (tl_expr[]){v[1], v[0]}, tl_f32(k, 1.0f));
    tl_end(k);
    tl_copy(k, tl_all(f), tl_tile(k, X, tl_int(k, 0), tl_int(k, 0)));
    tl_program *p;
    assert_status(tl_compile(k, NULL, &p), TL_ERR_SHAPE);
    assert_non_null(strstr(tl_ctx_error(ctx), "fragment layout conflict"));
    tl_kernel_destroy(k);
    /* tile operations inside tl_parallel; tl_all of a global tensor */
    k = tl_kernel_new(ctx, "inside");
    n = tl_dim(k, "N");
    X = tl_param_tensor(k, "X", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){128});
    tl_copy(k, tl_all(X), tl_all(f));
    assert_status(tl_kernel_status(k), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_kernel_error(k), "tl_tile"));
    tl_kernel_destroy(k);
    /* an unclosed tl_pipelined is named; integer tiles cannot be copied */
    k = tl_kernel_new(ctx, "unclosed");
    n = tl_dim(k, "N");
    tl_buf I = tl_param_tensor(k, "I", TL_I32, 2, (tl_expr[]){n, n}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf s32 = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){16, 16});
    tl_expr ko = tl_pipelined(k, n, 2);
    tl_copy(k, tl_tile(k, I, ko, ko), tl_all(s32));
    assert_status(tl_kernel_status(k), TL_ERR_DTYPE);
    assert_non_null(strstr(tl_kernel_error(k), "i32"));
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "unclosed2");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf s2 = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){16});
    tl_pipelined(k, tl_int(k, 4), 2);
    tl_clear(k, s2);
    assert_status(tl_compile(k, NULL, &p), TL_ERR_SCOPE);
    assert_non_null(strstr(tl_kernel_error(k), "tl_pipelined"));
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "inside2");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){128});
    tl_parallel1(k, 128);
    tl_clear(k, f);
    assert_status(tl_kernel_status(k), TL_ERR_SCOPE);
    tl_kernel_destroy(k);
}

static const tl_gemm_schedule cubin_schedules[] = {
    {.block_m = 128, .block_n = 128, .block_k = 32, .stages = 3, .threads = 256, .swizzle = 8},
    {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 3, .threads = 256, .swizzle = 8},
    {.block_m = 64, .block_n = 64, .block_k = 32, .stages = 2, .threads = 128},
    {.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 256, .swizzle = 4},
    {.block_m = 128, .block_n = 128, .block_k = 64, .stages = 6, .threads = 128, .swizzle = 8, .pingpong = 1},
    {.block_m = 64, .block_n = 256, .block_k = 64, .stages = 5, .threads = 128, .pingpong = 1},
    {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 3, .threads = 256, .swizzle = 8, .persistent = 1},
    {.block_m = 64, .block_n = 64, .block_k = 32, .stages = 3, .threads = 128, .persistent = 1},
    {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .swizzle = 8, .cluster_m = 2,
     .cluster_n = 2}, /* TMA multicast of both operands (sm_90a only) */
};

static void test_gemm_cubins_sm80_sm90a(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof cubin_schedules / sizeof cubin_schedules[0]; i++)
            for (int tb = 0; tb < 2; tb++) {
                tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = tb ? TL_F16 : TL_BF16, .out_dtype = TL_BF16,
                                  .trans_b = tb, .has_bias = 1, .epilogue = TL_EPI_GELU_ERF,
                                  .schedule = cubin_schedules[i]};
                tl_kernel *k;
                assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
                tl_program *p;
                tl_status st = tl_compile(k, &(tl_compile_options){.target = targets[t]}, &p);
                if (cubin_schedules[i].cluster_m > 1 && t == 0) { /* sm_80 has no clusters */
                    assert_int_equal(st, TL_ERR_UNSUPPORTED);
                    assert_non_null(strstr(tl_ctx_error(ctx), "the target has no thread-block clusters"));
                    tl_kernel_destroy(k);
                    continue;
                }
                if (cubin_schedules[i].pingpong && t == 0 && st == TL_ERR_SHAPE) {
                    /* on sm_80 the ping-pong kernel (cp.async producer, mma.sync
                     * consumers) fits in 163 KiB only with few stages */
                    assert_non_null(strstr(tl_ctx_error(ctx), "exceeds the limit of 166912"));
                    tl_kernel_destroy(k);
                    continue;
                }
                if (st != TL_OK)
                    fail_msg("%s schedule %zu: %s", targets[t], i, tl_ctx_error(ctx));
                size_t n;
                const unsigned char *cubin = tl_program_cubin(p, &n);
                assert_memory_equal(cubin, "\x7f" "ELF", 4);
                /* the variant a launch with misaligned operands takes (plain
                 * copies, its own register budget) compiles too */
                const tl_program *safe;
                if (tb == 0 && tli_program_safe_variant(p, &safe) != TL_OK)
                    fail_msg("%s schedule %zu, safe variant: %s", targets[t], i, tl_ctx_error(ctx));
                tl_program_destroy(p);
                tl_kernel_destroy(k);
            }
}

/* The parameters of the warp-specialised test kernels below: A [M, K] and
 * B [N, K] in bf16, C [M, N] in f32, a block per 128 x 64 tile of C on 256
 * threads with a producer warpgroup. */
typedef struct ws_io {
    tl_buf A, B, C;
    tl_expr K, bx, by;
} ws_io;

static ws_io ws_prelude(tl_kernel *k)
{
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    ws_io io = {.A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){M, K}, NULL),
                .B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){N, K}, NULL),
                .C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){M, N}, NULL), .K = K};
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 64)), tl_ceildiv(k, M, tl_int(k, 128)), tl_int(k, 1), 256);
    tl_use_warp_specialize(k, 1);
    io.bx = tl_block_idx(k, 0), io.by = tl_block_idx(k, 1);
    return io;
}

/* A user's kernel shaped like FlashAttention's loop: gemm 1 reads A and
 * B1, an element-wise loop reads its accumulator, gemm 2 reads A and B2;
 * warp specialised, the consumers taking turns, `stages` slots. */
static tl_kernel *two_gemm_kernel(tl_ctx *c, int stages)
{
    tl_kernel *k = tl_kernel_new(c, "two_gemms");
    ws_io io = ws_prelude(k);
    tl_buf A = io.A, B = io.B, C = io.C;
    tl_expr K = io.K, bx = io.bx, by = io.by;
    tl_use_pingpong(k, 1);
    tl_buf as = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){128, 64});
    tl_buf b1 = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64}), b2 = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf s1 = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_buf cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_clear(k, cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), stages);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(as));
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(b1));
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(b2));
    tl_clear(k, s1);
    tl_gemm(k, as, b1, s1, TL_GEMM_TRANS_B);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){128, 64}, v);
    tl_store(k, cf, v, tl_add(k, tl_load(k, cf, v), tl_load(k, s1, v)));
    tl_end(k);
    tl_gemm(k, as, b2, cf, TL_GEMM_TRANS_B);
    tl_end(k);
    tl_copy(k, tl_all(cf), tl_tile(k, C, by, bx));
    return k;
}

/* A loop body of more statements than the analysis once listed (256):
 * the gemm that ends it still runs on into the next iteration (the trailing
 * wgmma run is counted from the body's end, not from its 256th statement),
 * so each iteration waits for all but one wgmma group. */
static void test_long_loop_body_tail(void **state)
{
    (void)state;
    tl_ctx *c90 = test_offline_ctx("sm_90a");
    tl_kernel *k = tl_kernel_new(c90, "long_body");
    ws_io io = ws_prelude(k);
    tl_buf as = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){128, 64});
    tl_buf bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf scratch = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_buf cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_clear(k, cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, io.K, tl_int(k, 64)), 3);
    tl_copy(k, tl_tile(k, io.A, io.by, ko), tl_all(as));
    tl_copy(k, tl_tile(k, io.B, io.bx, ko), tl_all(bs));
    for (int i = 0; i < 300; i++)
        tl_clear(k, scratch);
    tl_gemm(k, as, bs, cf, TL_GEMM_TRANS_B);
    tl_end(k);
    tl_copy(k, tl_all(cf), tl_tile(k, io.C, io.by, io.bx));
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *loop = strstr(src, "tl_pipelined, consumer side");
    assert_non_null(loop);
    assert_non_null(strstr(loop, "tl_wgmma_wait<1>();"));
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c90);
}

/* A warp-specialised kernel that asks for two blocks an SM
 * (tl_use_min_blocks): setmaxnreg splits the CTA's half of the registers
 * (384 threads: 80 each at launch, 104 a consumer and 32 the producer),
 * not the whole SM's (232 and 40: a raise the CTA's registers cannot
 * cover, which never completes); eight blocks leave too few for setmaxnreg
 * (TL_ERR_UNSUPPORTED). Found by make fuzz-compile (five blocks: ptxas had
 * 32 registers for the consumers' wgmma). */
static void test_min_blocks_register_split(void **state)
{
    (void)state;
    tl_ctx *c90 = test_offline_ctx("sm_90a");
    const int blocks[3] = {0, 2, 8};
    const char *inc[3] = {"tl_setmaxnreg_inc<232>();", "tl_setmaxnreg_inc<104>();", NULL};
    const char *dec[3] = {"tl_setmaxnreg_dec<40>();", "tl_setmaxnreg_dec<32>();", NULL};
    const char *bounds[3] = {"__launch_bounds__(384, 1)", "__launch_bounds__(384, 2)", NULL};
    for (int i = 0; i < 3; i++) {
        tl_kernel *k = two_gemm_kernel(c90, 3);
        tl_use_min_blocks(k, blocks[i]);
        char *src = NULL;
        tl_status st = tl_kernel_source(k, "sm_90a", &src);
        if (!inc[i]) {
            assert_status(st, TL_ERR_UNSUPPORTED);
            assert_non_null(strstr(tl_ctx_error(c90), "tl_use_min_blocks(8)"));
        } else {
            assert_status(st, TL_OK);
            const char *want[] = {inc[i], dec[i], bounds[i]};
            test_expect_text(src, "min blocks", want, TEST_COUNT(want), NULL, 0);
            tl_program *p = NULL;
            if (tl_compile(k, NULL, &p) != TL_OK)
                fail_msg("%d blocks: %s", blocks[i], tl_ctx_error(c90));
            tl_program_destroy(p);
        }
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
    tl_ctx_destroy(c90);
}

/* Rings of their own (pipeline_ws.c, ring_split): with 2 stages the
 * three tiles of two_gemm_kernel form three groups (B1 read by gemm 1
 * only, A by both, B2 by gemm 2 only), six full and six empty mbarriers;
 * B1's slot goes back after the wait for gemm 1 in its own iteration, A's
 * and B2's there in the next iteration and after the loop. With 3 stages
 * the one ring stays. The kernel compiles (NVRTC) either way. */
static void test_rings_lowering(void **state)
{
    (void)state;
    tl_ctx *c90 = test_offline_ctx("sm_90a");
    for (int stages = 2; stages <= 3; stages++) {
        tl_kernel *k = two_gemm_kernel(c90, stages);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *note = strstr(src, "released (3 rings, one a group of tiles)");
        if (stages == 2) {
            assert_non_null(note);
            assert_non_null(strstr(src, "*const tl_full = (unsigned long long *)(tl_smem + 65536); // 6 mbarriers"));
            const char *w0 = strstr(note, "tl_wgmma_wait<0>();"), *own = strstr(note, "tl_mbar_arrive(&tl_empty[tl_st");
            const char *a = strstr(note, "% 2) + 2)]);"), *b2 = strstr(note, "% 2) + 4)]);");
            const char *loop = strstr(note, "tl_parallel over fragment");
            assert_true(w0 && own && a && b2 && loop && w0 < own && own < a && a < b2 && b2 < loop);
            /* after the loop: A's and B2's last slots, not B1's */
            const char *tail = strstr(b2, "tl_wgmma_wait<1>();");
            assert_non_null(tail);
            assert_non_null(strstr(tail, "1LL)) % 2) + 2)]);"));
            assert_non_null(strstr(tail, "1LL)) % 2) + 4)]);"));
            assert_null(strstr(tail, "1LL)) % 2)]);"));
        } else {
            assert_null(strstr(src, "rings, one a group"));
            assert_non_null(strstr(src, "// 3 mbarriers"));
        }
        tl_free_host(src);
        tl_program *p;
        if (tl_compile(k, NULL, &p) != TL_OK)
            fail_msg("%d stages: %s", stages, tl_ctx_error(c90));
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    tl_ctx_destroy(c90);
}

/* A user's kernel with a tile loaded ahead of its pipelined loop and read
 * by every iteration (A's first K tile, as FlashAttention's Q): with a
 * producer warpgroup the copy becomes the producer's TMA load at each
 * block's start, ahead of the ring's tiles, on a one-slot ring of its own
 * that the consumers wait on before the loop; persistent CTAs hand the
 * slot back after each block's loop and the producer waits for that
 * before the next block's load. Plain warp specialisation, persistent
 * with turns; a tile also written in the loop stays the consumers'. */
static tl_kernel *pre_tile_kernel(tl_ctx *c, int persistent, int rewrite)
{
    tl_kernel *k = tl_kernel_new(c, "pre_tile");
    ws_io io = ws_prelude(k);
    tl_buf A = io.A, B = io.B, C = io.C;
    tl_expr K = io.K, bx = io.bx, by = io.by;
    if (persistent) {
        tl_use_pingpong(k, 1);
        tl_use_persistent(k, 1);
    }
    tl_buf as = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){128, 64});
    tl_buf bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_copy(k, tl_tile(k, A, by, tl_int(k, 0)), tl_all(as));
    tl_clear(k, cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), 2);
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(bs));
    tl_gemm(k, as, bs, cf, TL_GEMM_TRANS_B);
    if (rewrite)
        tl_copy(k, tl_tile(k, A, by, ko), tl_all(as));
    tl_end(k);
    tl_copy(k, tl_all(cf), tl_tile(k, C, by, bx));
    return k;
}

static void test_pre_tile_lowering(void **state)
{
    (void)state;
    tl_ctx *c90 = test_offline_ctx("sm_90a");
    for (int persistent = 0; persistent < 2; persistent++) {
        tl_kernel *k = pre_tile_kernel(c90, persistent, 0);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *expect = strstr(src, "tl_mbar_expect(&tl_pre_full[0], 16384);");
        const char *load = strstr(src, "tl_tma_load_2d(tl_smem");
        const char *ring = strstr(src, "tl_mbar_expect(&tl_full[");
        const char *wait = strstr(src, "tl_mbar_wait(&tl_pre_full[0], ");
        const char *loop = strstr(src, "// tl_pipelined, consumer side");
        assert_true(expect && load && ring && wait && loop && expect < load && load < ring && wait < loop);
        assert_null(strstr(src, "tl_cp_async16("));
        const char *back = strstr(src, "tl_mbar_arrive(&tl_pre_empty[0]);");
        const char *before = strstr(src, "tl_mbar_wait(&tl_pre_empty[0], ");
        if (persistent) {
            assert_true(back && before && before < expect && back > loop);
            assert_non_null(strstr(wait, "tl_p % 2LL"));
            /* no buffer of the consumers' own is left for the next block to rewrite: the two groups
             * run on into it without meeting at the block's end */
            assert_null(strstr(back, "tl_bar_sync("));
        } else {
            assert_null(back);
            assert_null(before);
        }
        tl_free_host(src);
        tl_program *p;
        if (tl_compile(k, NULL, &p) != TL_OK)
            fail_msg("persistent %d: %s", persistent, tl_ctx_error(c90));
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    tl_kernel *k = pre_tile_kernel(c90, 0, 1); /* the loop writes the tile too: the consumers keep their copy */
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_null(strstr(src, "tl_pre_full"));
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c90);
}

/* tl_use_pingpong: a producer warpgroup and two consumer warpgroups that
 * take turns (the register budget moved with setmaxnreg, an order barrier
 * pair, a named barrier per consumer instead of __syncthreads in the block
 * body, private copies of the bias buffer); and the requirements, each
 * named when it is not met. */
static void test_pingpong_lowering(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH, .schedule = cubin_schedules[4]};
    tl_kernel *k;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"__launch_bounds__(384, 1)", "tl_setmaxnreg_dec<40>()", "tl_setmaxnreg_inc<232>()",
                          "tl_mbar_wait(&tl_order[tl_wg]", "tl_mbar_arrive(&tl_order[(1 - tl_wg)])",
                          "tl_bar_sync((tl_wg + 1), 128);", "(tl_wg) * 128 + ",
                          "(((tl_p / 2LL) * 2LL) * (long long)gridDim.x)",
                          "tl_tma_load_2d("};
    test_expect_text(src, "ping-pong source", want, TEST_COUNT(want), NULL, 0);
    /* inside the consumers' block body no barrier waits for the producer */
    const char *consumers = strstr(src, "tl_setmaxnreg_inc");
    assert_non_null(consumers);
    assert_null(strstr(consumers, "__syncthreads"));
    tl_free_host(src);
    tl_kernel_destroy(k);

    struct { tl_gemm_schedule s; const char *why; } bad[] = {
        {{.block_m = 256, .block_n = 128, .block_k = 64, .stages = 4, .threads = 512, .pingpong = 1}, "two or three (256 or 384"},
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 2, .threads = 128, .pingpong = 1}, "at least 3 stages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d.schedule = bad[i].s;
        assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
        tl_program *p;
        assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &p), TL_ERR_UNSUPPORTED);
        if (!strstr(tl_ctx_error(ctx), bad[i].why))
            fail_msg("schedule %zu: '%s' does not say '%s'", i, tl_ctx_error(ctx), bad[i].why);
        tl_kernel_destroy(k);
    }

    /* two warpgroups in one block take turns at the loop's tl_gemm */
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                    .pingpong = 1};
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_non_null(strstr(src, "tl_mbar_wait(&tl_order[tl_wg]"));
    assert_non_null(strstr(src, "a turn on the tensor cores"));
    tl_free_host(src);
    tl_kernel_destroy(k);

    /* the consumers may be any statements: mma.sync gemms (no wgmma fits
     * 32-wide K tiles) take their tiles from a cp.async producer */
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 64, .block_k = 32, .stages = 3, .threads = 128,
                                    .pingpong = 1};
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_non_null(strstr(src, "tl_mma_16816"));
    assert_non_null(strstr(src, "tl_cp_async_mbar_arrive("));
    assert_non_null(strstr(src, "tl_setmaxnreg_inc<"));
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* Compiles k for target with NVRTC (skips where it is missing) and
 * destroys it. */
static void compile_or_skip(tl_kernel *k, const char *target)
{
    char *ptx = NULL;
    tl_status st = tl_kernel_ptx(k, target, &ptx);
    tl_free_host(ptx);
    tl_kernel_destroy(k);
    if (st == TL_ERR_NO_NVRTC) {
        printf("  skip: NVRTC is missing: the generated source was not compiled\n");
        skip();
    }
    if (st != TL_OK)
        fail_msg("%s: %s", target, tl_ctx_error(ctx));
}

/* Issue 12 item 4a: strides given as {ld, tl_int(k, 1)} (a constant unit
 * stride, documented as valid) made a user-written tile copy use `A_s1`,
 * which the prologue never declares: the kernel now compiles, and the copy
 * moves the right elements. */
static void test_tile_copy_constant_unit_stride(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        tl_kernel *k = tl_kernel_new(ctx, "unit_stride");
        tl_expr M = tl_dim(k, "M"), K = tl_dim(k, "K"), ld = tl_dim(k, "ld");
        tl_buf A = tl_param_tensor(k, "A", TL_F32, 2, (tl_expr[]){M, K}, (tl_expr[]){ld, tl_int(k, 1)});
        tl_buf B = tl_param_tensor(k, "B", TL_F32, 2, (tl_expr[]){M, K}, NULL);
        tl_grid(k, tl_ceildiv(k, M, tl_int(k, 32)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_expr bx = tl_block_idx(k, 0);
        tl_buf S = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){32, 32});
        tl_copy(k, tl_tile(k, A, bx, tl_int(k, 0)), tl_all(S));
        tl_copy(k, tl_all(S), tl_tile(k, B, bx, tl_int(k, 0)));
        assert_status(tl_kernel_status(k), TL_OK);
        enum { m = 40, kk = 32, lda = 48 };
        static float a[m * lda], b[m * kk];
        for (int i = 0; i < m * lda; i++)
            a[i] = (float)i;
        memset(b, 0, sizeof b);
        tl_arg args[] = {tl_arg_int(m), tl_arg_int(kk), tl_arg_int(lda), tl_arg_hptr(a), tl_arg_hptr(b)};
        assert_status(tl_interpret(k, 5, args), TL_OK);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < kk; j++)
                if (b[i * kk + j] != a[i * lda + j])
                    fail_msg("B[%d][%d] = %g, wanted A[%d][%d] = %g", i, j, b[i * kk + j], i, j, a[i * lda + j]);
        compile_or_skip(k, t ? "sm_90a" : "sm_80");
    }
}

/* A GEMM kernel of the builder on blocks of `threads` (64 rows a warpgroup
 * of A, 64 columns of B), for the schedule flags' requirements; the trip
 * count of its pipelined loop depends on the block when by_block. */
static tl_kernel *small_gemm_kernel_c(int threads, bool by_block, tl_dtype cdt, int stores)
{
    int64_t bm = threads / 2;
    tl_kernel *k = tl_kernel_new(ctx, "small_gemm");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){N, K}, NULL);
    tl_buf C = tl_param_tensor(k, "C", cdt, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 64)), tl_ceildiv(k, M, tl_int(k, bm)), TL_NONE_EXPR, threads);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){bm, 64});
    tl_buf Bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){bm, 64});
    tl_clear(k, Cf);
    tl_expr steps = tl_ceildiv(k, K, tl_int(k, 64));
    tl_expr ko = tl_pipelined(k, by_block ? tl_min(k, steps, tl_add(k, by, tl_int(k, 1))) : steps, 3);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
    tl_end(k);
    for (int i = 0; i < stores; i++)
        tl_copy(k, tl_all(Cf), tl_tile(k, C, by, bx));
    return k;
}

static tl_kernel *small_gemm_kernel(int threads, bool by_block)
{
    return small_gemm_kernel_c(threads, by_block, TL_F32, 1);
}

/* A GEMM-shaped kernel in clusters of cx x cy blocks (grid x over N, y
 * over M): A's tile depends on the block's y only, B's on its x only. */
static tl_kernel *cluster_gemm_kernel(int threads, int cx, int cy, int swizzle)
{
    int64_t bm = threads / 2;
    tl_kernel *k = tl_kernel_new(ctx, "cluster_gemm");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){N, K}, NULL);
    tl_buf C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_mul(k, tl_ceildiv(k, N, tl_int(k, 64 * cx)), tl_int(k, cx)),
            tl_mul(k, tl_ceildiv(k, M, tl_int(k, bm * cy)), tl_int(k, cy)), TL_NONE_EXPR, threads);
    tl_cluster(k, cx, cy, 1);
    tl_use_swizzle(k, swizzle);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){bm, 64});
    tl_buf Bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){bm, 64});
    tl_clear(k, Cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), 3);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
    tl_end(k);
    tl_copy(k, tl_all(Cf), tl_tile(k, C, by, bx));
    return k;
}

/* tl_cluster on a TMA-fed pipeline: the tile the cluster's blocks share is
 * loaded a slice a block and multicast, the ring's slots are freed by
 * every block of the cluster, cluster barriers after the mbarriers'
 * initialisation and before the blocks leave; with and without a producer
 * warpgroup, with the swizzle moving whole clusters; refused with
 * ping-pong and persistent CTAs, each named. */
static void test_cluster_multicast_lowering(void **state)
{
    (void)state;
    /* one warpgroup, TMA by thread 0; pairs along y share B's tile */
    tl_kernel *k = cluster_gemm_kernel(128, 1, 2, 0);
    char *src = NULL, *dump = NULL;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"__cluster_dims__(1, 2, 1)", "tl_mcast_group<1, 2, 1, 2>(tl_slice, tl_mask);",
                          "tl_tma_load_2d_mc(tl_smem5 + (tl_i11) * 4096 + tl_slice * 2048, &tl_map1, (int)((tl_i11) * 64LL), "
                          "(int)((tl_bx) * 64LL + (long long)tl_slice * 32)",
                          "tl_tma_load_2d(tl_smem4", "tl_mbar_init(&tl_empty[tl_s], 8);",
                          "if ((tl_i2 > 0LL) && (tl_lane < 2)) {\n            tl_mbar_arrive_remote(&tl_empty[((tl_i2 - 1LL) % 3LL)], (unsigned)(tl_lane));", "tl_cluster_sync();\n    const long long tl_n10"};
    test_expect_text(src, "the multicast kernel", want, TEST_COUNT(want), (const char *[]){"tl_tma_load_2d_mc(tl_smem4"}, 1);
    /* a cluster barrier after the main loop (no block leaves while another may arrive on its
     * mbarriers), before C's stores (its release would wait for them) */
    assert_non_null(strstr(src, "tl_wgmma_wait<0>();\n    tl_cluster_sync();\n    { // tl_copy tl_frag6 -> C"));
    tl_free_host(src);
    assert_status(tl_kernel_lower_dump(k, "sm_90a", "pipeline", &dump), TL_OK);
    test_expect_text(dump, "the pipeline dump",
                     (const char *[]){"multicast over axes y", "of the cluster", "barrier.cluster"}, 3,
                     NULL, 0);
    tl_free_host(dump);
    compile_or_skip(k, "sm_90a");
    /* a producer warpgroup; pairs along x share A's tile; the swizzle moves whole clusters */
    k = cluster_gemm_kernel(256, 2, 1, 8);
    tl_use_warp_specialize(k, 1);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *ws[] = {"__cluster_dims__(2, 1, 1)", "if (tl_wg == 2)", "tl_mcast_group<2, 1, 1, 1>(tl_slice, tl_mask);",
                        "tl_mbar_init(&tl_empty[tl_s], 16);", "tl_mbar_arrive_remote(&tl_empty[",
                        "((long long)blockIdx.x % 2LL)", "((long long)gridDim.x / 2LL)",
                        "        }\n        tl_cluster_sync();\n    } else { // the consumers"};
    test_expect_text(src, "the warp-specialised multicast kernel", ws, TEST_COUNT(ws), NULL, 0);
    tl_free_host(src);
    compile_or_skip(k, "sm_90a");
    /* what clusters exclude */
    k = cluster_gemm_kernel(128, 1, 2, 0);
    tl_use_pingpong(k, 1);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_ERR_UNSUPPORTED);
    test_expect_text(tl_ctx_error(ctx), "the error", (const char *[]){"tl_cluster (1 x 2 x 1): not with tl_use_pingpong"}, 1,
                     NULL, 0);
    tl_kernel_destroy(k);
    k = cluster_gemm_kernel(256, 1, 2, 0);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 1);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_ERR_UNSUPPORTED);
    test_expect_text(tl_ctx_error(ctx), "the error", (const char *[]){"tl_use_persistent: not with tl_cluster"}, 1,
                     NULL, 0);
    tl_kernel_destroy(k);
}

/* setmaxnreg moves registers between the warpgroups of a CTA and cannot
 * add any: the producer's and the consumers' counts must fit in what the
 * CTA is launched with (its launch bound's share of the 64K registers, a
 * multiple of 8 a thread), or a consumer's raise never completes (a GPU run
 * hung on 240 + 32 at 384 threads). For every warp-specialised block size
 * up to 1024 threads in all, with and without turns: the split fits, in
 * multiples of 8, the producer keeps 32 to 40, and the consumers get at
 * most 240. Two groups keep 232 / 40, three get 160 / 32. */
static void test_register_split_fits(void **state)
{
    (void)state;
    int built = 0;
    for (int threads = 128; threads <= 896; threads += 128)
        for (int pingpong = 0; pingpong < 2; pingpong++) {
            if (pingpong && (threads == 128 || threads > 384))
                continue;
            tl_kernel *k = small_gemm_kernel(threads, false);
            tl_use_warp_specialize(k, 1);
            tl_use_pingpong(k, pingpong);
            char *src = NULL;
            if (tl_kernel_source(k, "sm_90a", &src) != TL_OK) {
                assert_true(threads > 512); /* (wider blocks may be refused for other reasons) */
                tl_kernel_destroy(k);
                continue;
            }
            const char *lb = strstr(src, "__launch_bounds__("), *dec = strstr(src, "tl_setmaxnreg_dec<"),
                       *inc = strstr(src, "tl_setmaxnreg_inc<");
            assert_true(lb && dec && inc);
            int total = atoi(lb + strlen("__launch_bounds__(")), p = atoi(dec + strlen("tl_setmaxnreg_dec<")),
                c = atoi(inc + strlen("tl_setmaxnreg_inc<"));
            assert_int_equal(total, threads + 128);
            int pool = 65536 / total / 8 * 8 * total;
            if (c * threads + p * 128 > pool || c % 8 || p % 8 || p < 32 || p > 40 || c > 240)
                fail_msg("%d consumer threads (pingpong %d): consumers %d, producer %d, pool %d", threads, pingpong,
                         c, p, pool);
            if (threads == 256)
                assert_true(c == 232 && p == 40);
            if (threads == 384)
                assert_true(c == 160 && p == 32);
            built++;
            tl_free_host(src);
            tl_kernel_destroy(k);
        }
    assert_true(built >= 6);
}

/* tl_use_persistent: the requirements, each named when it is not met, and
 * a kernel that meets them compiles for sm_90a (TMA producer) and sm_80
 * (cp.async producer), its source looping over the CTA's blocks; with
 * ping-pong on 256 threads too (the turns' numbers count the CTA's earlier
 * blocks). A trip count that depends on the block takes running sums
 * (not with stream-K, nor with ping-pong's blocks of one warpgroup). */
static void test_persistent_lowering(void **state)
{
    (void)state;
    const struct {
        int threads, ws, pingpong, stream_k;
        bool by_block;
        const char *why;
    } bad[] = {
        {256, 0, 0, 0, false, "tl_use_persistent: it needs tl_use_warp_specialize"},
        {256, 1, 0, 1, true, "tl_use_stream_k: the pipelined loop's trip count must not depend on the block"},
        {128, 0, 1, 0, true, "tl_use_pingpong: the pipelined loop's extent must not depend on the block"},
        {512, 0, 1, 0, false, "tl_use_pingpong: a block must be one warpgroup (128 threads: two blocks take turns), "
                              "two or three (256 or 384"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_kernel *k = small_gemm_kernel(bad[i].threads, bad[i].by_block);
        tl_use_warp_specialize(k, bad[i].ws);
        tl_use_pingpong(k, bad[i].pingpong);
        tl_use_persistent(k, 1);
        tl_use_stream_k(k, bad[i].stream_k);
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_ERR_UNSUPPORTED);
        if (!strstr(tl_ctx_error(ctx), bad[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, tl_ctx_error(ctx), bad[i].why);
        tl_kernel_destroy(k);
    }
    tl_kernel *pp = small_gemm_kernel(256, false);
    tl_use_pingpong(pp, 1);
    tl_use_persistent(pp, 1);
    char *pp_src = NULL;
    assert_status(tl_kernel_source(pp, "sm_90a", &pp_src), TL_OK);
    test_expect_text(pp_src, "persistent ping-pong", (const char *[]){"this CTA's blocks", "tl_mbar_wait(&tl_order"},
                     2, NULL, 0);
    tl_free_host(pp_src);
    tl_kernel_destroy(pp);
    const char *targets[] = {"sm_90a", "sm_80"};
    for (int t = 0; t < 2; t++) {
        tl_kernel *k = small_gemm_kernel(256, false);
        tl_use_warp_specialize(k, 1);
        tl_use_persistent(k, 1);
        char *src = NULL;
        assert_status(tl_kernel_source(k, targets[t], &src), TL_OK);
        const char *want[] = {"persistent CTAs of 384 threads",
                              "const long long tl_t = ((tl_p * (long long)gridDim.x) + (long long)blockIdx.x);",
                              "if (tl_wg == 2)", t ? "tl_cp_async" : "tl_tma_load_2d("};
        test_expect_text(src, targets[t], want, TEST_COUNT(want), NULL, 0);
        tl_free_host(src);
        compile_or_skip(k, targets[t]);
    }
    /* trip counts that differ by block: the ring's positions, and ping-pong's
     * turn numbers, are running sums over the CTA's earlier blocks, kept by
     * both the producer's and the consumers' tile loops */
    for (int pingpong = 0; pingpong < 2; pingpong++)
        for (int t = 0; t < 2 - pingpong; t++) {
            tl_kernel *k = small_gemm_kernel(256, true);
            tl_use_warp_specialize(k, 1);
            tl_use_pingpong(k, pingpong);
            tl_use_persistent(k, 1);
            char *src = NULL;
            assert_status(tl_kernel_source(k, targets[t], &src), TL_OK);
            const char *want[] = {"long long tl_run_sum = 0, tl_run_nonempty = 0;",
                                  "const long long tl_run = tl_run_sum, tl_run_blocks = tl_run_nonempty;",
                                  "tl_run_sum += tl_run_n; tl_run_nonempty += tl_run_n > 0;", "(tl_run + "};
            const char *uniform[] = {"(tl_p * tl_n"};
            test_expect_text(src, targets[t], want, TEST_COUNT(want), uniform, TEST_COUNT(uniform));
            /* the producer's tile loop and the consumers' each keep their own sums */
            const char *first = strstr(src, "tl_run_sum += tl_run_n");
            assert_non_null(first);
            assert_non_null(strstr(first + 1, "tl_run_sum += tl_run_n"));
            if (pingpong) /* each iteration's one gemm is a turn: n turns a block */
                assert_non_null(strstr(src, "tl_mbar_wait(&tl_order[tl_wg], (unsigned)((((((int)(tl_run) + "));
            tl_free_host(src);
            compile_or_skip(k, targets[t]);
        }
    /* a 16-bit C goes through a staging tile and TMA on sm_90a, unless the
     * block writes C elsewhere too (stores of both kinds to one tensor would
     * need a proxy fence; a later one would race with the store in flight) */
    for (int stores = 1; stores <= 2; stores++) {
        tl_kernel *k = small_gemm_kernel_c(256, false, TL_BF16, stores);
        tl_use_warp_specialize(k, 1);
        tl_use_persistent(k, 1);
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *tma[] = {"tl_stage_C", "tl_tma_store_2d(&tl_map", "tl_bulk_commit();", "tl_bulk_wait_read<0>();",
                             "tl_bulk_wait<0>();"};
        if (stores == 1)
            test_expect_text(src, "one store of C", tma, TEST_COUNT(tma), NULL, 0);
        else
            test_expect_text(src, "C stored twice", NULL, 0, tma, TEST_COUNT(tma));
        tl_free_host(src);
        compile_or_skip(k, "sm_90a");
    }
}

/* Two 16-bit outputs stored through TMA from one accumulator, their names
 * 60 characters long and alike in the first 55: each staging tile gets its
 * own name (tl_stage_ and the tensor's name held only 54 of its characters,
 * and both tiles were declared under one name: TL_ERR_COMPILE). */
static void test_staging_names_of_long_tensors(void **state)
{
    (void)state;
    char n1[61], n2[61];
    memset(n1, 'c', 60);
    n1[60] = '\0';
    memcpy(n2, n1, sizeof n1);
    n1[59] = 'x';
    n2[59] = 'y';
    tl_kernel *k = tl_kernel_new(ctx, "two_outputs");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){N, K}, NULL);
    tl_buf C1 = tl_param_tensor(k, n1, TL_BF16, 2, (tl_expr[]){M, N}, NULL);
    tl_buf C2 = tl_param_tensor(k, n2, TL_BF16, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 64)), tl_ceildiv(k, M, tl_int(k, 128)), TL_NONE_EXPR, 256);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 1);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){128, 64});
    tl_buf Bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){128, 64});
    tl_clear(k, Cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), 3);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
    tl_copy(k, tl_tile(k, B, bx, ko), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
    tl_end(k);
    tl_copy(k, tl_all(Cf), tl_tile(k, C1, by, bx));
    tl_copy(k, tl_all(Cf), tl_tile(k, C2, by, bx));
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *first = strstr(src, "tl_tma_store_2d(");
    assert_non_null(first); /* both stores through TMA, */
    assert_non_null(strstr(first + 1, "tl_tma_store_2d("));
    tl_free_host(src);
    compile_or_skip(k, "sm_90a"); /* under two names */
}

/* tl_use_persistent(k, 2): the producer's thread takes the CTA's blocks
 * from a counter in global memory (a kernel parameter) and hands each
 * block's number to the consumers through a slot in shared memory; the
 * last CTA to finish sets the counter back to zero. Uniform trip counts,
 * running sums and ping-pong on 256 threads, a cp.async producer; what it
 * refuses, by name. */
static void test_persistent_counter(void **state)
{
    (void)state;
    tl_kernel *k = small_gemm_kernel(256, false);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 3);
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_ERR_INVALID_ARG);
    test_expect_text(tl_ctx_error(ctx), "the error", (const char *[]){"tl_use_persistent", "mode 3"}, 2, NULL, 0);
    tl_kernel_destroy(k);
    const struct {
        int threads, pingpong, stream_k;
        const char *target, *why;
    } bad[] = {
        {256, 0, 1, "sm_90a", "tl_use_persistent(k, 2): not with tl_use_stream_k"},
        {128, 1, 0, "sm_90a", "tl_use_persistent(k, 2): not with tl_use_pingpong on 128 threads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k = small_gemm_kernel(bad[i].threads, false);
        tl_use_warp_specialize(k, 1);
        tl_use_pingpong(k, bad[i].pingpong);
        tl_use_persistent(k, 2);
        tl_use_stream_k(k, bad[i].stream_k);
        assert_status(tl_kernel_source(k, bad[i].target, &src), TL_ERR_UNSUPPORTED);
        if (!strstr(tl_ctx_error(ctx), bad[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, tl_ctx_error(ctx), bad[i].why);
        tl_kernel_destroy(k);
    }
    for (int v = 0; v < 3; v++) { /* uniform trip counts, running sums, ping-pong on 256 threads */
        k = small_gemm_kernel(256, v == 1);
        tl_use_warp_specialize(k, 1);
        tl_use_pingpong(k, v == 2);
        tl_use_persistent(k, 2);
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *want[] = {"unsigned *tl_block_counter)", "taking blocks from a counter",
                              "then the block counter (two words, zero)",
                              "tl_mbar_init(&tl_block_full[tl_s], 1);", "tl_mbar_init(&tl_block_empty[tl_s], 256);",
                              "tl_mbar_wait(&tl_block_empty[(tl_p % 2LL)], (unsigned)((((tl_p / 2LL) - 1LL) % 2LL)));",
                              "const long long tl_t = ((tl_p != 0LL) ? (long long)atomicAdd(tl_block_counter + 0, "
                              "(unsigned)(1LL)) + (long long)gridDim.x : (long long)blockIdx.x);",
                              "tl_block_slot[(tl_p % 2LL)] = tl_min(tl_t, tl_ntiles);",
                              "const long long tl_done = (long long)atomicAdd(tl_block_counter + 1, (unsigned)(1LL));",
                              "if (tl_done == ((long long)gridDim.x - 1LL)) {",
                              "atomicExch(tl_block_counter + 0, (unsigned)(0LL));",
                              "atomicExch(tl_block_counter + 1, (unsigned)(0LL));",
                              "tl_mbar_wait(&tl_block_full[(tl_p % 2LL)], (unsigned)(((tl_p / 2LL) % 2LL)));",
                              "const long long tl_t = tl_block_slot[(tl_p % 2LL)];",
                              "tl_mbar_arrive(&tl_block_empty[(tl_p % 2LL)]);"};
        const char *dealt[] = {"tl_t = ((tl_p * (long long)gridDim.x) + (long long)blockIdx.x)"};
        test_expect_text(src, v == 1 ? "running sums" : v ? "ping-pong" : "uniform", want, TEST_COUNT(want), dealt,
                         TEST_COUNT(dealt));
        /* the producer takes each number before the consumers read it */
        assert_true(strstr(src, "atomicAdd(tl_block_counter + 0,") < strstr(src, "= tl_block_slot[(tl_p % 2LL)];"));
        if (v == 1)
            assert_non_null(strstr(src, "tl_run_sum += tl_run_n"));
        tl_free_host(src);
        char *dump = NULL; /* the pipeline pass's dump says which loop takes the blocks and which reads them */
        assert_status(tl_kernel_lower_dump(k, "sm_90a", "pipeline", &dump), TL_OK);
        const char *roles[] = {"blocks from the counter (taken) through tl_block_slot, tl_block_full / tl_block_empty",
                               "blocks from the counter (read) through tl_block_slot"};
        test_expect_text(dump, "the pipeline dump", roles, TEST_COUNT(roles), NULL, 0);
        tl_free_host(dump);
        /* the launch pass writes the protocol out as statements (the emitter prints only the loop) */
        assert_status(tl_kernel_lower_dump(k, "sm_90a", "launch", &dump), TL_OK);
        const char *lowered[] = {"tl_t = atomic.add counter[0], 1 + gridDim.x when ne(", ", else blockIdx.x", "tl_done = atomic.add counter[1], 1",
                                 "atomic.exch counter[0], 0", "atomic.exch counter[1], 0",
                                 "mbarrier.wait tl_block_empty[", "mbarrier.arrive tl_block_full[",
                                 "mbarrier.wait tl_block_full[", "mbarrier.arrive tl_block_empty[", "break"};
        test_expect_text(dump, "the launch dump", lowered, TEST_COUNT(lowered), NULL, 0);
        tl_free_host(dump);
        compile_or_skip(k, "sm_90a");
    }
    /* a cp.async producer (sm_80) runs its tile loop in all its threads: the first takes the blocks
     * and writes the slot, every thread reads it, and the other 127 hand it back as the consumers do */
    k = small_gemm_kernel(256, true);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 2);
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    const char *cp[] = {"if (tl_tid == 0) {", "} else {",
                        "tl_mbar_init(&tl_block_empty[tl_s], 383);", "tl_cp_async",
                        "const long long tl_tk = ((tl_p != 0LL) ? (long long)atomicAdd(tl_block_counter + 0, "
                        "(unsigned)(1LL)) + (long long)gridDim.x",
                        "const long long tl_t = tl_block_slot[(tl_p % 2LL)];", "if (tl_tid != 0) {"};
    test_expect_text(src, "sm_80", cp, TEST_COUNT(cp), NULL, 0);
    const char *take = strstr(src, "const long long tl_tk");
    const char *read = strstr(src, "const long long tl_t = tl_block_slot");
    assert_true(take < read && read < strstr(read, "if (tl_tid != 0) {"));
    tl_free_host(src);
    compile_or_skip(k, "sm_80");
}

/* Issue 12 item 5: tl_use_pingpong on a kernel whose grid x is the null
 * handle (one block along x) recursed without end while emitting. Both
 * forms (blocks of 128 threads: persistent; of 256: turns) emit and
 * compile. */
static void test_pingpong_null_grid_x(void **state)
{
    (void)state;
    for (int threads = 128; threads <= 256; threads += 128) {
        int64_t bm = threads / 2;
        tl_kernel *k = tl_kernel_new(ctx, "pingpong_grid");
        tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
        tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){M, K}, NULL);
        tl_buf B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){N, K}, NULL);
        tl_buf C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){M, N}, NULL);
        tl_grid(k, TL_NONE_EXPR, tl_ceildiv(k, M, tl_int(k, bm)), TL_NONE_EXPR, threads);
        tl_expr by = tl_block_idx(k, 1), zero = tl_int(k, 0);
        tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){bm, 64});
        tl_buf Bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
        tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){bm, 64});
        tl_clear(k, Cf);
        tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), 3);
        tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
        tl_copy(k, tl_tile(k, B, zero, ko), tl_all(Bs));
        tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
        tl_end(k);
        tl_copy(k, tl_all(Cf), tl_tile(k, C, by, zero));
        tl_use_pingpong(k, 1);
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        assert_non_null(strstr(src, "tl_setmaxnreg_inc"));
        tl_free_host(src);
        compile_or_skip(k, "sm_90a");
    }
}

/* On sm_90a the default schedule of a GEMM, with an epilogue or without,
 * is the persistent kernel (a producer warpgroup, C through TMA) when TMA
 * can read the rows (K, N multiples of 8), on 128x256 tiles when they fill
 * the GPU and on 64x128 (one consumer warpgroup) when there are few; the
 * classic kernel when TMA cannot read the rows. */
static void test_default_schedules_sm90a(void **state)
{
    (void)state;
    struct { int64_t m, k, n; int bias; tl_epilogue e; int persistent, block_m; } cases[] = {
        {4096, 4096, 4096, 1, TL_EPI_GELU_TANH, 1, 128}, {4096, 4096, 4096, 0, TL_EPI_RELU, 1, 128},
        {4096, 4096, 4096, 0, TL_EPI_NONE, 1, 128},       {4096, 4100, 4096, 1, TL_EPI_GELU_ERF, 0, 128},
        {100, 64, 64, 1, TL_EPI_GELU_TANH, 1, 64},         {100, 64, 63, 1, TL_EPI_GELU_ERF, 0, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = TL_BF16,
                          .out_dtype = TL_BF16, .has_bias = cases[i].bias, .epilogue = cases[i].e};
        tl_kernel *k;
        assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        if ((strstr(src, "tl_tma_store_2d") != NULL) != cases[i].persistent)
            fail_msg("case %zu: the TMA store of C %s", i, cases[i].persistent ? "expected" : "not expected");
        tl_free_host(src);
        tl_kernel_destroy(k);
        tl_gemm_schedule sch = tl_op_gemm_schedule(ctx, &d);
        assert_int_equal(sch.persistent, cases[i].persistent);
        assert_int_equal(sch.pingpong, 0);
        assert_int_equal(sch.block_m, cases[i].block_m);
    }
    tl_gemm_desc bad = {.m = 0, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    assert_int_equal(tl_op_gemm_schedule(ctx, &bad).block_m, 0);
    assert_int_equal(tl_op_gemm_schedule(NULL, &bad).block_m, 0);
    assert_int_equal(tl_op_gemm_schedule(ctx, NULL).block_m, 0);
}

/* The default schedule follows the context's target: an sm_80 context gets
 * one that fits an A100's shared memory, and mma.sync in its PTX. */
static void test_gemm_ptx_sm80(void **state)
{
    (void)state;
    tl_ctx *c80 = test_offline_ctx("sm_80");
    tl_kernel *k;
    assert_status(tl_op_build(c80, "gemm", TL_BF16, &k), TL_OK);
    char *ptx;
    assert_status(tl_kernel_ptx(k, "sm_80", &ptx), TL_OK);
    assert_non_null(strstr(ptx, "mma.sync.aligned.m16n8k16"));
    assert_non_null(strstr(ptx, "ldmatrix.sync.aligned"));
    assert_non_null(strstr(ptx, "cp.async.cg.shared.global"));
    tl_free_host(ptx);
    tl_kernel_destroy(k);
    /* the sm_90a default is too big for sm_80: a clear error with the sizes */
    assert_status(tl_op_build(ctx, "gemm", TL_BF16, &k), TL_OK);
    assert_status(tl_kernel_ptx(k, "sm_80", &ptx), TL_ERR_SHAPE);
    assert_non_null(strstr(tl_ctx_error(ctx), "166912"));
    tl_kernel_destroy(k);
    assert_status(tl_op_build(ctx, "gemm", TL_BF16, &k), TL_OK);
    assert_status(tl_kernel_ptx(k, "sm_90a", &ptx), TL_OK);
    assert_non_null(strstr(ptx, "wgmma.mma_async"));
    tl_free_host(ptx);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c80);
}

static void test_gemm_golden(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .has_bias = 1,
                      .epilogue = TL_EPI_RELU, .schedule = small_schedule};
    tl_kernel *k;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    test_check_golden("tests/golden/gemm_small_sm80.cu", src, "GEMM");
    tl_free_host(src);
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_interp_matches_naive),
        cmocka_unit_test(test_tile_ops_roundtrip),
        cmocka_unit_test(test_gemm_errors),
        cmocka_unit_test(test_builder_tile_errors),
        cmocka_unit_test(test_gemm_ptx_sm80),
        cmocka_unit_test(test_gemm_golden),
        cmocka_unit_test(test_gemm_cubins_sm80_sm90a),
        cmocka_unit_test(test_pingpong_lowering),
        cmocka_unit_test(test_rings_lowering),
        cmocka_unit_test(test_long_loop_body_tail),
        cmocka_unit_test(test_min_blocks_register_split),
        cmocka_unit_test(test_pre_tile_lowering),
        cmocka_unit_test(test_persistent_lowering),
        cmocka_unit_test(test_staging_names_of_long_tensors),
        cmocka_unit_test(test_register_split_fits),
        cmocka_unit_test(test_persistent_counter),
        cmocka_unit_test(test_cluster_multicast_lowering),
        cmocka_unit_test(test_tile_copy_constant_unit_stride),
        cmocka_unit_test(test_pingpong_null_grid_x),
        cmocka_unit_test(test_default_schedules_sm90a),
    };
    return cmocka_run_group_tests_name("tiles+gemm", tests, offline_setup, ctx_teardown);
}
