/* test_emit.c - lowering and compilation without a GPU: the generated CUDA
 * of the vector add against a golden file, its shape (no toolkit header,
 * vector accesses), and NVRTC cubins for sm_80 and sm_90a of every prebuilt
 * configuration and of every kernel of the test zoo. */
#include "fixture.h"

#include "kernels.h"

#include <sys/stat.h>


/* Compares the generated vadd with tests/golden/ (TILEC_UPDATE_GOLDEN=1
 * rewrites it). */
static void test_vadd_golden(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    test_check_golden("tests/golden/vadd_f32_sm90a.cu", src, "vadd");
    tl_free_host(src);
    tl_kernel_destroy(k);
}

static void test_source_is_self_contained(void **state)
{
    (void)state;
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int d = 0; d < 3; d++) {
        tl_kernel *k;
        assert_status(tl_op_build(ctx, "vadd", dts[d], &k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, NULL, &src), TL_OK);
        assert_null(strstr(src, "#include <"));
        assert_non_null(strstr(src, "#include \"tl_device.cuh\""));
        assert_non_null(strstr(src, "extern \"C\" __global__"));
        /* unit-stride accesses become whole-chunk (16-byte) accesses */
        assert_non_null(strstr(src, "tl_ld_chunk("));
        assert_non_null(strstr(src, "tl_st_chunk("));
        assert_non_null(strstr(src, dts[d] == TL_F32 ? "tl_vec<float, 4>" : (dts[d] == TL_F16 ? "tl_vec<tl_f16, 8>" : "tl_vec<tl_bf16, 8>")));
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
}

static void test_kernel_names_are_unique_per_source(void **state)
{
    (void)state;
    tl_kernel *a, *b;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &a), TL_OK);
    assert_status(tl_op_build(ctx, "vadd", TL_F16, &b), TL_OK);
    tl_program *pa, *pb;
    assert_status(tl_compile(a, NULL, &pa), TL_OK);
    assert_status(tl_compile(b, NULL, &pb), TL_OK);
    tl_program_info ia, ib;
    tl_program_get_info(pa, &ia);
    tl_program_get_info(pb, &ib);
    assert_string_not_equal(ia.name, ib.name);
    assert_int_equal(ia.loaded, 0); /* offline: compiled, not loaded */
    assert_int_equal(ia.num_params, 4);
    tl_param_info pi;
    assert_status(tl_program_param(pa, 0, &pi), TL_OK);
    assert_string_equal(pi.name, "N");
    assert_int_equal(pi.kind, TL_PARAM_DIM);
    assert_status(tl_program_param(pa, 3, &pi), TL_OK);
    assert_string_equal(pi.name, "C");
    assert_int_equal(pi.written, 1);
    assert_status(tl_program_param(pa, 4, &pi), TL_ERR_INVALID_ARG);
    /* launching needs a device */
    tl_arg args[] = {tl_arg_int(1), tl_arg_dptr(256), tl_arg_dptr(256), tl_arg_dptr(256)};
    assert_status(tl_launch(pa, NULL, 4, args), TL_ERR_NO_DEVICE);
    tl_program_destroy(pa);
    tl_program_destroy(pb);
    tl_kernel_destroy(a);
    tl_kernel_destroy(b);
}

static void expect_cubin(tl_kernel *k, const char *target)
{
    assert_status(tl_kernel_status(k), TL_OK);
    tl_compile_options opt = {.target = target};
    tl_program *p = NULL;
    tl_status st = tl_compile(k, &opt, &p);
    if (st != TL_OK)
        fail_msg("%s for %s: %s: %s", tl_kernel_error(k), target, tl_status_name(st), tl_ctx_error(ctx));
    size_t n;
    const unsigned char *cubin = tl_program_cubin(p, &n);
    assert_true(n > 64);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);
    tl_program_info info;
    tl_program_get_info(p, &info);
    assert_string_equal(info.target, target);
    tl_program_destroy(p);
}

static void test_prebuilt_cubins_sm80_sm90a(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 3; d++) {
            tl_kernel *k;
            assert_status(tl_op_build(ctx, "vadd", dts[d], &k), TL_OK);
            expect_cubin(k, targets[t]);
            tl_kernel_destroy(k);
        }
}

static void test_zoo_cubins_sm80_sm90a(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    for (int t = 0; t < 2; t++) {
        tl_kernel *ks[] = {zoo_axpby_2d(ctx), zoo_rowsum(ctx), zoo_mixed(ctx), zoo_shift(ctx, TL_BF16),
                           zoo_smooth(ctx), zoo_fastmath(ctx), zoo_staged(ctx), zoo_written_operand(ctx)};
        for (int i = 0; i < 8; i++) {
            expect_cubin(ks[i], targets[t]);
            tl_kernel_destroy(ks[i]);
        }
    }
}

/* Block-level statements that store are followed by a barrier, also at the
 * end of a serial loop body (the next iteration reads what this one wrote). */
static void test_barriers_in_serial_loops(void **state)
{
    (void)state;
    tl_kernel *k = zoo_smooth(ctx);
    char *src;
    assert_status(tl_kernel_source(k, NULL, &src), TL_OK);
    const char *loop = strstr(src, "for (long long tl_i");
    assert_non_null(loop);
    int barriers = 0;
    for (const char *p = loop; (p = strstr(p, "__syncthreads();")); p++)
        barriers++;
    assert_int_equal(barriers, 2); /* between the two loops, and at the end of the body */
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* tl_block_value: a block's own mapping of its index, computed once where
 * the block indices are (a let), read wherever it is used (here inside a
 * serial loop, whose body no longer divides); the interpreter gives the
 * same values; a value of a loop variable or a load is refused. */
static void test_block_values(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "block_values");
    tl_expr NB = tl_dim(k, "NB"), G = tl_dim(k, "G");
    tl_buf Y = tl_param_tensor(k, "Y", TL_I64, 2, (tl_expr[]){NB, tl_int(k, 4)}, NULL);
    tl_grid(k, NB, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr b = tl_block_idx(k, 0);
    tl_expr q = tl_block_value(k, tl_div(k, b, G)), r = tl_block_value(k, tl_mod(k, b, G));
    assert_true(tl_block_value(k, G).id == G.id); /* a parameter is its own value */
    tl_expr s = tl_serial(k, tl_int(k, 4));
    tl_store(k, Y, (tl_expr[]){b, s}, tl_add(k, tl_mul(k, tl_add(k, tl_mul(k, q, tl_int(k, 1000)), r), tl_int(k, 10)), s));
    tl_end(k);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *let = strstr(src, "const long long tl_bv"), *loop = strstr(src, "for (long long");
    assert_true(let && loop && let < loop);
    assert_null(strstr(loop, "/ G")); /* the loop reads the lets */
    assert_null(strstr(loop, "% G"));
    tl_free_host(src);
    int64_t y[7 * 4];
    tl_arg args[] = {tl_arg_int(7), tl_arg_int(3), tl_arg_hptr(y)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int i = 0; i < 7 * 4; i++)
        assert_int_equal(y[i], ((i / 4 / 3) * 1000 + (i / 4 % 3)) * 10 + i % 4);
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "block_value_errors");
    tl_buf X = tl_param_tensor(k, "X", TL_I64, 1, (tl_expr[]){tl_int(k, 4)}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_block_value(k, tl_load(k, X, (tl_expr[]){tl_int(k, 0)}));
    assert_int_equal(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "reads a buffer"));
    tl_kernel_destroy(k);
}

/* tl_use_cache_policy: the marked tensor's 16-byte accesses take the
 * evict-first variants, the others keep the plain ones; the results are
 * the same (the interpreter ignores the hint); bad uses are refused. */
static tl_kernel *scale_rows(int mark_x, int mark_y)
{
    tl_kernel *k = tl_kernel_new(ctx, "scale_rows");
    tl_expr M = tl_dim(k, "M"), W = tl_int(k, 256);
    tl_buf X = tl_param_tensor(k, "X", TL_F16, 2, (tl_expr[]){M, W}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F16, 2, (tl_expr[]){M, W}, NULL);
    if (mark_x)
        tl_use_cache_policy(k, X, TL_CACHE_EVICT_FIRST);
    if (mark_y)
        tl_use_cache_policy(k, Y, TL_CACHE_EVICT_FIRST);
    tl_grid(k, M, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr r = tl_block_idx(k, 0);
    tl_expr c = tl_parallel1(k, 256);
    tl_expr x = tl_load(k, X, (tl_expr[]){r, c});
    tl_store(k, Y, (tl_expr[]){r, c}, tl_cast(k, tl_mul(k, tl_cast(k, x, TL_F32), tl_f32(k, 2.0f)), TL_F16));
    tl_end(k);
    return k;
}

static void test_cache_policy(void **state)
{
    (void)state;
    for (int mark = 0; mark < 3; mark++) { /* none, X, X and Y */
        tl_kernel *k = scale_rows(mark >= 1, mark >= 2);
        assert_status(tl_kernel_status(k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        if ((strstr(src, "tl_ld_chunk_ef(") != NULL) != (mark >= 1) || (strstr(src, "tl_st_chunk_ef(") != NULL) != (mark >= 2))
            fail_msg("marks %d: the evict-first accesses do not follow the marks:\n%s", mark, src);
        assert_non_null(strstr(src, mark >= 2 ? "tl_st_chunk_ef(" : "tl_st_chunk("));
        tl_free_host(src);
        char *ptx = NULL;
        tl_status st = tl_kernel_ptx(k, "sm_90a", &ptx);
        if (st != TL_ERR_NO_NVRTC) {
            assert_status(st, TL_OK);
            assert_int_equal(strstr(ptx, "L2::cache_hint") != NULL, mark >= 1);
        }
        tl_free_host(ptx);
        enum { R = 3, C = 256 };
        uint16_t x[R * C], y[R * C];
        for (int i = 0; i < R * C; i++)
            x[i] = tl_f32_to_f16((float)(i % 97) - 48.0f), y[i] = 0x7e00; /* NaN */
        tl_arg args[] = {tl_arg_int(R), tl_arg_hptr(x), tl_arg_hptr(y)};
        assert_status(tl_interpret(k, 3, args), TL_OK);
        for (int i = 0; i < R * C; i++)
            assert_true(tl_f16_to_f32(y[i]) == 2.0f * ((float)(i % 97) - 48.0f));
        tl_kernel_destroy(k);
    }
    tl_kernel *k = tl_kernel_new(ctx, "cache_policy_errors");
    tl_buf S = tl_alloc_shared(k, TL_F16, 1, (int64_t[]){64});
    tl_use_cache_policy(k, S, TL_CACHE_EVICT_FIRST);
    assert_int_equal(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "not a global tensor"));
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "cache_policy_errors");
    tl_buf X = tl_param_tensor(k, "X", TL_F16, 1, (tl_expr[]){tl_int(k, 4)}, NULL);
    tl_use_cache_policy(k, X, (tl_cache_policy)7);
    assert_int_equal(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "policy 7"));
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "cache_policy_errors");
    tl_use_cache_policy(k, TL_NONE_BUF, TL_CACHE_EVICT_FIRST);
    assert_int_equal(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "tl_use_cache_policy"));
    tl_kernel_destroy(k);
}

/* tl_use_fast_math swaps the f32 functions for the approximate ones (and
 * leaves f64 alone); without it the precise library functions stay. */
static void test_fast_math_source(void **state)
{
    (void)state;
    static const char *const fast[] = {"tl_tanh_approx(", "tl_erf_approx(", "tl_exp_approx(", "tl_exp2_approx(",
                                       "tl_log_approx(", "tl_div_approx("};
    static const char *const precise[] = {"tanhf(", "erff(", "expf(", "exp2f(", "logf("};
    for (int on = 0; on < 2; on++) {
        tl_kernel *k = zoo_fastmath(ctx);
        tl_use_fast_math(k, on);
        char *src;
        assert_status(tl_kernel_source(k, NULL, &src), TL_OK);
        for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
            if ((strstr(src, fast[i]) != NULL) != on)
                fail_msg("fast math %d: %s %s", on, fast[i], on ? "missing" : "present");
        for (size_t i = 0; i < sizeof precise / sizeof precise[0]; i++)
            if ((strstr(src, precise[i]) != NULL) == on)
                fail_msg("fast math %d: %s %s", on, precise[i], on ? "present" : "missing");
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
    tl_kernel *k = tl_kernel_new(ctx, "f64");
    tl_expr N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F64, 1, &N, NULL);
    tl_grid(k, N, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_use_fast_math(k, 1);
    tl_expr i = tl_block_idx(k, 0);
    tl_store(k, X, &i, tl_tanh(k, tl_load(k, X, &i)));
    char *src;
    assert_status(tl_kernel_source(k, NULL, &src), TL_OK);
    assert_non_null(strstr(src, "tanh("));
    assert_null(strstr(src, "tl_tanh_approx"));
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_use_fast_math(NULL, 1); /* ignored */
}

/* The standalone copy into shared memory is committed where it stands and
 * waited for (wait, barrier) only before the first statement that touches
 * its buffer; the in-range shared read S[(j + 1) % 64] has no bounds test
 * while the possibly out-of-range one keeps it. */
static void test_deferred_copy_and_bounds(void **state)
{
    (void)state;
    tl_kernel *k = zoo_staged(ctx);
    char *src;
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    const char *commit = strstr(src, "tl_cp_async_commit();");
    const char *fill = strstr(src, "= 1.0f;");
    const char *wait = strstr(src, "tl_cp_async_wait<0>();");
    const char *read = strstr(src, "2.0f *");
    assert_non_null(commit);
    assert_non_null(fill);
    assert_non_null(wait);
    assert_non_null(read);
    assert_true(commit < fill && fill < wait && wait < read);
    assert_non_null(strstr(wait, "__syncthreads();"));
    assert_non_null(strstr(read, "* tl_smem3["));
    assert_null(strstr(read, "tl_ld(tl_smem3"));
    tl_free_host(src);
    tl_kernel_destroy(k);

    /* S[j + 1] can reach 64: the read keeps its test and reads 0 there */
    k = tl_kernel_new(ctx, "edge");
    tl_expr N = tl_dim(k, "N");
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 1, &N, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 64);
    tl_buf S = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){64});
    tl_expr i = tl_parallel1(k, 64);
    tl_store(k, S, &i, tl_cast(k, i, TL_F32));
    tl_end(k);
    tl_expr j = tl_parallel1(k, 64);
    tl_store(k, Y, &j, tl_load(k, S, (tl_expr[]){tl_add(k, j, tl_int(k, 1))}));
    tl_end(k);
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    assert_non_null(strstr(src, ", 64))"));
    tl_free_host(src);
    float y[64];
    tl_arg args[] = {tl_arg_int(64), tl_arg_hptr(y)};
    assert_status(tl_interpret(k, 2, args), TL_OK);
    for (int t = 0; t < 63; t++)
        assert_true(y[t] == (float)(t + 1));
    assert_true(y[63] == 0.0f);
    tl_kernel_destroy(k);
}

/* C = A B^T with C cleared just before the gemm: on wgmma the clear folds
 * into the first k-step (scale-d = 0) and no register of C is zeroed; a
 * fill with another value, or mma.sync, keeps its statement. */
static tl_kernel *clear_then_gemm(float fill)
{
    tl_kernel *k = tl_kernel_new(ctx, "clear_gemm");
    tl_expr n64 = tl_int(k, 64);
    tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){n64, n64}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_BF16, 2, (tl_expr[]){n64, n64}, NULL);
    tl_buf C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){n64, n64}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Bs = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
    tl_name(k, As, "As");
    tl_name(k, Bs, "Bs");
    tl_name(k, Cf, "Cf");
    tl_expr z = tl_int(k, 0);
    tl_copy(k, tl_tile(k, A, z, z), tl_all(As));
    tl_copy(k, tl_tile(k, B, z, z), tl_all(Bs));
    if (fill == 0.0f)
        tl_clear(k, Cf);
    else
        tl_fill(k, Cf, tl_f32(k, fill));
    tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
    tl_copy(k, tl_all(Cf), tl_tile(k, C, z, z));
    return k;
}

static void test_clear_folds_into_wgmma(void **state)
{
    (void)state;
    char *src;
    tl_kernel *k = clear_then_gemm(0.0f);
    assert_status(tl_kernel_status(k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_non_null(strstr(src, "tl_gemm Cf = As * Bs^T"));
    assert_non_null(strstr(src, ", tl_k > 0);"));
    assert_null(strstr(src, "Cf[tl_r] = tl_zero"));
    tl_free_host(src);
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK); /* mma.sync has no scale-d: the clear stays */
    assert_non_null(strstr(src, "Cf[tl_r] = tl_zero"));
    tl_free_host(src);
    /* the interpreter runs the graph as built: C = A B^T from zero */
    static uint16_t a[64 * 64], b[64 * 64];
    static float c[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        a[i] = 0x3f80; /* bf16 1.0 */
        b[i] = i % 64 == 0 ? 0x4000 : 0; /* B [N, K]: 2.0 at k = 0, so C = A B^T = 2 */
        c[i] = -1.0f;
    }
    tl_arg args[] = {tl_arg_hptr(a), tl_arg_hptr(b), tl_arg_hptr(c)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int i = 0; i < 64 * 64; i++)
        assert_true(c[i] == 2.0f);
    tl_kernel_destroy(k);
    k = clear_then_gemm(1.0f); /* not a clear: the fill stays and the gemm accumulates */
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_null(strstr(src, "tl_k > 0"));
    assert_non_null(strstr(src, "tl_gemm Cf += As * Bs^T"));
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* A shared tile the threads write with plain stores and wgmma then reads:
 * the writes are fenced for the async proxy before the barrier (sm_90a);
 * mma.sync reads through the generic proxy and needs no fence (sm_80). */
static void test_written_operand_fenced(void **state)
{
    (void)state;
    tl_kernel *k = zoo_written_operand(ctx);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *store = strstr(src, "Ws["), *fence = store ? strstr(store, "tl_fence_proxy_async();") : NULL;
    const char *bar = fence ? strstr(fence, "__syncthreads();") : NULL, *gemm = strstr(src, "{ // tl_gemm");
    if (!store || !fence || !bar || !gemm || gemm < bar)
        fail_msg("want the stores to Ws, a proxy fence, a barrier, then the gemm:\n%s", src);
    tl_free_host(src);
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    assert_null(strstr(src, "tl_fence_proxy_async();"));
    tl_free_host(src);
    /* the interpreter: C = A W^T, A[i, k] = (i + k) mod 3 - 1 (exact: every sum is a multiple of 1/4) */
    enum { N = 128 };
    static uint16_t a[N * 64];
    static float c[N * 64];
    for (int i = 0; i < N * 64; i++) {
        a[i] = tl_f32_to_bf16((float)((i / 64 + i % 64) % 3 - 1));
        c[i] = -1.0f;
    }
    tl_arg args[] = {tl_arg_int(N), tl_arg_hptr(a), tl_arg_hptr(c)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int i = 0; i < N; i++)
        for (int n = 0; n < 64; n++) {
            double want = 0;
            for (int kk = 0; kk < 64; kk++)
                want += ((i + kk) % 3 - 1) * (((n + 3 * kk) % 7 - 3) / 4.0);
            if (c[i * 64 + n] != want)
                fail_msg("C[%d, %d] = %g, want %g", i, n, c[i * 64 + n], want);
        }
    tl_kernel_destroy(k);
}

/* A wgmma reads its warpgroup's rows of A through descriptors built at
 * every wgmma; the warpgroup number comes from a lane-0 broadcast so that
 * the compiler keeps them in uniform registers. Only on wgmma targets, and
 * only for those rows (tl_warp stays a plain value: bench/NOTES.md,
 * session 23). */
static void test_wgmma_rows_warp_uniform(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "gemm", TL_BF16, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *let = strstr(src, "const int tl_wgi = tl_warp_uniform((tl_tid / 128));");
    const char *a = strstr(src, "*const tl_A = "), *rows = a ? strstr(a, "tl_wgi * ") : NULL;
    if (!let || !a || a < let || !rows || rows > strchr(a, ';'))
        fail_msg("want tl_wgi broadcast, then A's rows from it:\n%s", src);
    assert_non_null(strstr(src, "const int tl_warp = (tl_tid / 32);"));
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_ctx *c80 = test_offline_ctx("sm_80"); /* the op's mma.sync schedule there */
    assert_status(tl_op_build(c80, "gemm", TL_BF16, &k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_OK);
    assert_null(strstr(src, "tl_warp_uniform("));
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c80);
}

static void test_ptx_has_vector_accesses(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    char *ptx;
    assert_status(tl_kernel_ptx(k, "sm_80", &ptx), TL_OK);
    assert_non_null(strstr(ptx, ".target sm_80"));
    assert_non_null(strstr(ptx, ".visible .entry vadd_f32_"));
    assert_non_null(strstr(ptx, "ld.global.v4"));
    assert_non_null(strstr(ptx, "st.global.v4"));
    tl_free_host(ptx);
    tl_kernel_destroy(k);
}

static void test_bad_target(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    tl_compile_options opt = {.target = "compute_90"};
    tl_program *p;
    assert_status(tl_compile(k, &opt, &p), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "compute_90"));
    tl_kernel_destroy(k);
}

/* Constants at the edges of their types and a negated negative literal
 * print as C++ reads them the same way: INT32_MIN and INT64_MIN as
 * expressions (the literals 2147483648 and 9223372036854775808LL are a
 * long and an unsigned, which turned a signed compare unsigned), an f32
 * constant past FLT_MAX as the infinity the literal is (not "inff"), and
 * -(-1.5f) not "--1.5f" (a decrement). Each compiles. */
static void test_edge_constants(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "edge_constants");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL), c = tl_param_tensor(k, "C", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 256)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), tl_parallel1(k, 256));
    tl_expr x = tl_load(k, a, &i);
    tl_expr v = tl_add(k, x, tl_neg(k, tl_f32(k, -1.5f)));
    v = tl_min(k, v, tl_float(k, 1e39, TL_F32));
    v = tl_add(k, v, tl_select(k, tl_gt(k, i, tl_int(k, INT64_MIN)), tl_f32(k, 1.0f), tl_f32(k, 0.0f)));
    v = tl_add(k, v, tl_cast(k, tl_max(k, tl_cast(k, i, TL_I32), tl_i32(k, INT32_MIN)), TL_F32));
    tl_store(k, c, &i, v);
    tl_end(k);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"(-(-1.5f))", "__int_as_float(0x7f800000)", "(-9223372036854775807LL - 1)",
                          "(-2147483647 - 1)"};
    const char *not_want[] = {"--1.5f", "inff", "9223372036854775808", "2147483648"};
    test_expect_text(src, "edge constants", want, TEST_COUNT(want), not_want, TEST_COUNT(not_want));
    tl_free_host(src);
    expect_cubin(k, "sm_90a");
    tl_kernel_destroy(k);
}

/* Integers and f64 reach bf16 and the 8-bit floats whole (tl_to_*(long long) /
 * (double), rounded once through tl_f32_odd), not through a (float) cast that
 * rounds first; the overloads compile. The GPU tier checks the values
 * (test_gpu's zoo, zoo_round_once). */
static void test_narrow_casts_round_once(void **state)
{
    (void)state;
    tl_kernel *k = zoo_round_once(ctx);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"tl_to_bf16((long long)(", "tl_to_f8e4m3(("};
    const char *not_want[] = {"tl_to_bf16((float)("};
    test_expect_text(src, "narrow casts", want, TEST_COUNT(want), not_want, TEST_COUNT(not_want));
    tl_free_host(src);
    expect_cubin(k, "sm_90a");
    expect_cubin(k, "sm_80");
    tl_kernel_destroy(k);
}

/* In-tile coordinates of a run loop (declared int) keep their IR type, i64,
 * where C++ would not widen them: j * j of columns up to 65535 (past 2^31)
 * in 64 bits, and tl_max(j, 5) a call of one type (it matched no template).
 * The interpreter computes both in i64. */
static void test_run_coordinates_in_64_bits(void **state)
{
    (void)state;
    for (int use_max = 0; use_max < 2; use_max++) {
        tl_kernel *k = tl_kernel_new(ctx, "row_positions");
        tl_expr R = tl_dim(k, "R"), C = tl_int(k, 65536);
        tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){R, C}, NULL);
        tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, (tl_expr[]){R, C}, NULL);
        tl_grid(k, R, TL_NONE_EXPR, TL_NONE_EXPR, 1024);
        tl_buf f = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){1, 65536});
        tl_expr bx = tl_block_idx(k, 0);
        tl_copy(k, tl_tile(k, X, bx, tl_int(k, 0)), tl_all(f));
        tl_expr v[2];
        tl_parallel(k, 2, (int64_t[]){1, 65536}, v);
        tl_expr j = use_max ? tl_max(k, v[1], tl_int(k, 5)) : tl_mul(k, v[1], v[1]);
        tl_store(k, Y, (tl_expr[]){tl_add(k, bx, v[0]), v[1]}, tl_add(k, tl_load(k, f, v), tl_cast(k, j, TL_F32)));
        tl_end(k);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        assert_non_null(strstr(src, "in runs of")); /* (the run loop's form) */
        assert_non_null(strstr(src, use_max ? "tl_max(((long long)tl_i" : "(((long long)tl_i"));
        tl_free_host(src);
        expect_cubin(k, "sm_90a");
        tl_kernel_destroy(k);
    }
}

/* An accumulator stored to a tile whose index may be negative (the block
 * index less a shift, or a temporary used twice): the unmasked fast path
 * takes the tile only where it lies within the tensor from its first row
 * (its rows before the tensor were written before), and its origin's names
 * do not meet the statement's temporaries (tl_t1 was declared twice). On
 * sm_80 and sm_90a, both compiled. */
static void test_store_tile_origin(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    for (int t = 0; t < 2; t++) {
        tl_ctx *c = test_offline_ctx(targets[t]);
        tl_kernel *k = tl_kernel_new(c, "shifted_tile");
        tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_int(k, 32);
        tl_expr shift = tl_param_scalar(k, "shift", TL_I64);
        tl_buf A = tl_param_tensor(k, "A", TL_F16, 2, (tl_expr[]){M, K}, NULL);
        tl_buf B = tl_param_tensor(k, "B", TL_F16, 2, (tl_expr[]){K, N}, NULL);
        tl_buf C = tl_param_tensor(k, "C", TL_F16, 2, (tl_expr[]){M, N}, NULL);
        tl_grid(k, tl_ceildiv(k, M, tl_int(k, 64)), tl_ceildiv(k, N, tl_int(k, 64)), TL_NONE_EXPR, 128);
        tl_buf as = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){64, 32}), bs = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){32, 64});
        tl_buf acc = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
        tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
        tl_copy(k, tl_tile(k, A, bx, tl_int(k, 0)), tl_all(as));
        tl_copy(k, tl_tile(k, B, tl_int(k, 0), by), tl_all(bs));
        tl_clear(k, acc);
        tl_gemm(k, as, bs, acc, 0);
        tl_expr row = tl_sub(k, bx, shift);
        tl_copy(k, tl_all(acc), tl_tile(k, C, row, by));
        tl_expr twice = tl_mul(k, bx, shift); /* used twice: a temporary of the statement */
        tl_copy(k, tl_all(acc), tl_tile(k, C, tl_add(k, twice, twice), by));
        char *src;
        assert_status(tl_kernel_source(k, targets[t], &src), TL_OK);
        const char *want[] = {"tl_in_span(tl_org0, 64LL, tl_C_d0) && tl_in_span(tl_org1, 64LL, tl_C_d1)"};
        const char *not_want[] = {"tl_org0 + 64LL <=", "tl_t0"};
        test_expect_text(src, targets[t], want, TEST_COUNT(want), not_want, TEST_COUNT(not_want));
        tl_free_host(src);
        tl_program *p = NULL;
        if (tl_compile(k, NULL, &p) != TL_OK)
            fail_msg("%s: %s", targets[t], tl_ctx_error(c));
        tl_program_destroy(p);
        tl_kernel_destroy(k);
        tl_ctx_destroy(c);
    }
}

/* An f8 fragment copied from and to tensors of a wider float (f32, f16):
 * its runs are at most 32 bytes of the widest tensor, an access the device
 * header has (a run of 16 f8 was one 64-byte load of f32: no
 * tl_vec_io<64>, found by make fuzz-compile); with f16 they stay 16. */
static void test_narrow_fragment_wide_tensor(void **state)
{
    (void)state;
    const tl_dtype frag[2] = {TL_F8E5M2, TL_F8E4M3}, wide[2] = {TL_F32, TL_F16};
    for (int c = 0; c < 2; c++) {
        tl_kernel *k = tl_kernel_new(ctx, "narrow_rows");
        tl_expr N = tl_dim(k, "N");
        tl_buf X = tl_param_tensor(k, "X", wide[c], 2, (tl_expr[]){N, tl_int(k, 64)}, NULL);
        tl_buf Y = tl_param_tensor(k, "Y", wide[c], 2, (tl_expr[]){N, tl_int(k, 64)}, NULL);
        tl_grid(k, tl_ceildiv(k, N, tl_int(k, 4)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_buf f = tl_alloc_fragment(k, frag[c], 2, (int64_t[]){4, 64});
        tl_expr bx = tl_block_idx(k, 0);
        tl_copy(k, tl_tile(k, X, bx, tl_int(k, 0)), tl_all(f));
        tl_copy(k, tl_all(f), tl_tile(k, Y, bx, tl_int(k, 0)));
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        assert_non_null(strstr(src, c == 0 ? "runs of 8 elements" : "runs of 16 elements"));
        tl_free_host(src);
        expect_cubin(k, "sm_90a");
        tl_kernel_destroy(k);
    }
}

/* An f32 fragment of an odd width (runs of one element) stored to an f8
 * tensor: a 1-byte tl_vec_io (there was none: TL_ERR_COMPILE, found by
 * .ci/run's fuzz-compile; tests/fuzz/regress/compile-f8-store-run-of-one). */
static void test_f8_store_runs_of_one(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "f8_odd_rows");
    tl_expr N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){N, tl_int(k, 63)}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F8E5M2, 2, (tl_expr[]){N, tl_int(k, 63)}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 4)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf f = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){4, 63});
    tl_expr bx = tl_block_idx(k, 0);
    tl_copy(k, tl_tile(k, X, bx, tl_int(k, 0)), tl_all(f));
    tl_copy(k, tl_all(f), tl_tile(k, Y, bx, tl_int(k, 0)));
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_non_null(strstr(src, "tl_vec<tl_f8e5m2, 1>"));
    tl_free_host(src);
    expect_cubin(k, "sm_90a");
    expect_cubin(k, "sm_80");
    tl_kernel_destroy(k);
}

/* A parallel loop of no more iterations than threads is an `if (tl_tid <
 * n)`: `#pragma unroll` was printed before it too, where it applies to no
 * loop (the review's low finding). Every unroll pragma precedes a for. */
static void test_unroll_only_before_loops(void **state)
{
    (void)state;
    for (int n = 64; n <= 512; n *= 8) { /* one iteration a thread at most, then four */
        tl_kernel *k = tl_kernel_new(ctx, "unroll_before");
        tl_expr len = tl_dim(k, "N");
        tl_buf x = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){len, tl_int(k, 3)}, NULL);
        tl_grid(k, tl_ceildiv(k, len, tl_int(k, n)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, n)), tl_parallel1(k, n));
        tl_store(k, x, (tl_expr[]){i, tl_int(k, 1)}, tl_f32(k, 1.0f)); /* a column: element by element */
        tl_end(k);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        assert_non_null(strstr(src, n < 128 ? "if (tl_tid < 64) {" : "#pragma unroll"));
        for (const char *p = strstr(src, "#pragma unroll"); p; p = strstr(p + 1, "#pragma unroll")) {
            const char *next = strchr(p, '\n');
            assert_non_null(next);
            next += strspn(next, " \n");
            if (strncmp(next, "for (", 5) != 0)
                fail_msg("n %d: #pragma unroll before '%.40s'", n, next);
        }
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
}

/* The printed kernel's name: a kernel name of 63 characters is cut so that
 * the 8 hex digits of the hash stay whole (they were cut off, and two
 * different kernels of one long name printed one name). */
static void test_long_kernel_name_keeps_hash(void **state)
{
    (void)state;
    char name[64], printed[2][80];
    memset(name, 'k', 63);
    name[63] = '\0';
    for (int v = 0; v < 2; v++) {
        tl_kernel *k = tl_kernel_new(ctx, name);
        tl_expr n = tl_dim(k, "N");
        tl_buf x = tl_param_tensor(k, "X", TL_F32, 1, &n, NULL);
        tl_grid(k, tl_ceildiv(k, n, tl_int(k, 128)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 128)), tl_parallel1(k, 128));
        tl_store(k, x, &i, tl_f32(k, v ? 2.0f : 1.0f));
        tl_end(k);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *at = strstr(src, "\nkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk");
        assert_non_null(at);
        size_t len = strcspn(at + 1, "(");
        assert_int_equal(len, 63);
        memcpy(printed[v], at + 1, len);
        printed[v][len] = '\0';
        assert_int_equal(printed[v][54], '_');
        assert_int_equal(strspn(printed[v] + 55, "0123456789abcdef"), 8);
        tl_free_host(src);
        expect_cubin(k, "sm_90a");
        tl_kernel_destroy(k);
    }
    assert_string_not_equal(printed[0], printed[1]);
}

/* Two paired wgmma gemms of one width whose splits differ (160 + 16, then
 * 16 + 160): two helpers, ..._pair80 and ..._pair8, both defined (the
 * second was taken for the first's prefix and never printed). */
static void test_paired_helpers_of_one_width(void **state)
{
    (void)state;
    tl_ctx *c90 = test_offline_ctx("sm_90a");
    tl_kernel *k = tl_kernel_new(c90, "pairs");
    tl_expr n = tl_dim(k, "N");
    tl_buf O = tl_param_tensor(k, "O", TL_F32, 2, (tl_expr[]){n, tl_int(k, 176)}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf a1 = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){64, 64}), a2 = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){64, 64});
    const int64_t wide[2] = {160, 64}, narrow[2] = {16, 64};
    tl_buf b1 = tl_alloc_shared(k, TL_F16, 2, wide), b2 = tl_alloc_shared(k, TL_F16, 2, narrow);
    tl_buf b3 = tl_alloc_shared(k, TL_F16, 2, narrow), b4 = tl_alloc_shared(k, TL_F16, 2, wide);
    tl_buf c1 = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 160}), c2 = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 16});
    tl_buf c3 = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 16}), c4 = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 160});
    tl_buf sh[6] = {a1, a2, b1, b2, b3, b4}, fr[4] = {c1, c2, c3, c4};
    for (int j = 0; j < 6; j++)
        tl_fill(k, sh[j], tl_float(k, 1.0, TL_F16));
    for (int j = 0; j < 4; j++)
        tl_clear(k, fr[j]);
    tl_gemm(k, a1, b1, c1, TL_GEMM_TRANS_B); /* a pair: 160 + 16 */
    tl_gemm(k, a1, b2, c2, TL_GEMM_TRANS_B);
    tl_gemm(k, a2, b3, c3, TL_GEMM_TRANS_B); /* a pair: 16 + 160 */
    tl_gemm(k, a2, b4, c4, TL_GEMM_TRANS_B);
    tl_expr z = tl_int(k, 0);
    tl_copy(k, tl_all(c1), tl_tile(k, O, z, z));
    tl_copy(k, tl_all(c4), tl_tile(k, O, tl_int(k, 1), z));
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"void tl_wgmma_m64n176k16_f16_tb_pair80(", "void tl_wgmma_m64n176k16_f16_tb_pair8("};
    test_expect_text(src, "two pairs of one width", want, TEST_COUNT(want), NULL, 0);
    tl_free_host(src);
    tl_program *p = NULL;
    if (tl_compile(k, NULL, &p) != TL_OK)
        fail_msg("%s", tl_ctx_error(c90));
    tl_program_destroy(p);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c90);
}

static void test_unknown_op(void **state)
{
    (void)state;
    tl_kernel *k = (tl_kernel *)0x1;
    assert_status(tl_op_build(ctx, "vmul", TL_F32, &k), TL_ERR_INVALID_ARG);
    assert_null(k);
    assert_non_null(strstr(tl_ctx_error(ctx), "vmul"));
    assert_status(tl_op_build(ctx, "vadd", TL_I32, &k), TL_ERR_DTYPE);
    assert_string_equal(tl_op_names()[0], "vadd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vadd_golden),
        cmocka_unit_test(test_source_is_self_contained),
        cmocka_unit_test(test_kernel_names_are_unique_per_source),
        cmocka_unit_test(test_prebuilt_cubins_sm80_sm90a),
        cmocka_unit_test(test_zoo_cubins_sm80_sm90a),
        cmocka_unit_test(test_barriers_in_serial_loops),
        cmocka_unit_test(test_block_values),
        cmocka_unit_test(test_cache_policy),
        cmocka_unit_test(test_fast_math_source),
        cmocka_unit_test(test_deferred_copy_and_bounds),
        cmocka_unit_test(test_clear_folds_into_wgmma),
        cmocka_unit_test(test_written_operand_fenced),
        cmocka_unit_test(test_wgmma_rows_warp_uniform),
        cmocka_unit_test(test_ptx_has_vector_accesses),
        cmocka_unit_test(test_bad_target),
        cmocka_unit_test(test_edge_constants),
        cmocka_unit_test(test_narrow_fragment_wide_tensor),
        cmocka_unit_test(test_f8_store_runs_of_one),
        cmocka_unit_test(test_unroll_only_before_loops),
        cmocka_unit_test(test_long_kernel_name_keeps_hash),
        cmocka_unit_test(test_store_tile_origin),
        cmocka_unit_test(test_run_coordinates_in_64_bits),
        cmocka_unit_test(test_narrow_casts_round_once),
        cmocka_unit_test(test_paired_helpers_of_one_width),
        cmocka_unit_test(test_unknown_op),
    };
    return cmocka_run_group_tests_name("emit+nvrtc", tests, offline_setup, ctx_teardown);
}
