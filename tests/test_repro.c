/*
 * test_repro.c - tl_kernel_reproducer: the C program it writes is compiled
 * with the system's C compiler against the library under test, run, and
 * must print what the original kernel gives, byte for byte: its generated
 * source (for the baked-in target or one given on the command line) and its
 * dump. Kernels: the vector add (also a golden file), the test zoo, GEMMs
 * with fused epilogues (classic and ping-pong), softmax (one pass, ring, cluster and
 * online), RMSNorm, FlashAttention, the dual GEMM of the examples, a
 * kernel of 8-bit floats, and kernels made to reach every builder call. Where no
 * C compiler is found, the programs are still written and checked for what
 * can be read from them, and the compile-and-run part says it is skipped.
 */
#include "fixture.h"

#include "kernels.h"

#include "../examples/dual_gemm.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The compiler and library of this build (the Makefile passes them, so
 * the ASan tree links its own library with its sanitizer flags). */
#ifndef TILEC_TEST_CC
#define TILEC_TEST_CC "cc"
#endif
#ifndef TILEC_TEST_LIB
#define TILEC_TEST_LIB "lib/libtilec.a"
#endif
#ifndef TILEC_TEST_LDFLAGS
#define TILEC_TEST_LDFLAGS ""
#endif

static char workdir[64];
static bool have_cc;

static int setup(void **state)
{
    offline_setup(state);
    snprintf(workdir, sizeof workdir, "/tmp/tilec-repro-XXXXXX");
    if (!mkdtemp(workdir))
        return -1;
    have_cc = system(TILEC_TEST_CC " --version >/dev/null 2>&1") == 0;
    if (!have_cc)
        printf("reproducers are written but not compiled or run: no C compiler '%s'\n", TILEC_TEST_CC);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    if (workdir[0])
        nftw(workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return ctx_teardown(state);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Runs a shell command with stdout and stderr to files of the work
 * directory; returns the exit status (-1: it did not exit) and, when out
 * and err are not NULL, what it printed (malloc'ed). */
static int run(const char *cmd, char **out, char **err)
{
    char full[2048], out_path[128], err_path[128];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", workdir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", workdir);
    snprintf(full, sizeof full, "%s >'%s' 2>'%s'", cmd, out_path, err_path);
    int ws = system(full);
    if (out)
        *out = test_read_file(out_path);
    if (err)
        *err = test_read_file(err_path);
    return ws != -1 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Compiles the reproducer at <workdir>/<name>.c into <workdir>/<name>,
 * warnings as errors: the program a user gets must build cleanly. */
static void compile(const char *name)
{
    char cmd[1024], *out, *err;
    snprintf(cmd, sizeof cmd,
             TILEC_TEST_CC " -std=c11 -Wall -Wextra -Werror -O0 -Iinclude " TILEC_TEST_LDFLAGS
                           " -o '%s/%s' '%s/%s.c' " TILEC_TEST_LIB " -ldl -lpthread -lm",
             workdir, name, workdir, name);
    int status = run(cmd, &out, &err);
    if (status != 0)
        fail_msg("compiling the reproducer of %s failed (%d):\n%s%s", name, status, out, err);
    free(out);
    free(err);
}

/* Runs the compiled reproducer with args; its output must be `want`, or,
 * when want_st is not TL_OK, it must fail naming that status. */
static void expect_run(const char *name, const char *args, tl_status want_st, const char *want)
{
    char cmd[512], *out, *err;
    snprintf(cmd, sizeof cmd, "'%s/%s' %s", workdir, name, args);
    int status = run(cmd, &out, &err);
    if (want_st == TL_OK && (status != 0 || strcmp(out, want) != 0)) {
        print_message("--- reproducer's output (exit %d) ---\n%s\n--- stderr ---\n%s\n", status, out, err);
        fail_msg("the reproducer of %s, run with '%s', does not print what the kernel gives", name, args);
    }
    if (want_st != TL_OK && (status != 1 || !strstr(err, tl_status_name(want_st))))
        fail_msg("the reproducer of %s, run with '%s', exits %d, not 1 with %s:\n%s", name, args, status,
                 tl_status_name(want_st), err);
    free(out);
    free(err);
}

/* The reproducer of k, written as <workdir>/<name>.c, compiled, run for
 * the context's target (baked in) and for each of `targets`, and with
 * "dump": each run must match the original kernel. */
static void check_repro(tl_kernel *k, const char *name, const char *const *targets, int ntargets)
{
    char *repro, path[256];
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    snprintf(path, sizeof path, "%s/%s.c", workdir, name);
    write_file(path, repro);
    /* a second reproducer of the same kernel is the same text */
    char *again;
    assert_status(tl_kernel_reproducer(k, &again), TL_OK);
    assert_string_equal(repro, again);
    tl_free_host(again);
    tl_free_host(repro);
    if (!have_cc)
        return;
    compile(name);
    for (int t = -1; t < ntargets; t++) {
        char *src = NULL;
        tl_status st = tl_kernel_source(k, t < 0 ? NULL : targets[t], &src);
        expect_run(name, t < 0 ? "" : targets[t], st, src);
        tl_free_host(src);
    }
    char *dump;
    assert_status(tl_kernel_dump(k, &dump), TL_OK);
    expect_run(name, "dump", TL_OK, dump);
    tl_free_host(dump);
}

/* ------------------------------------------------------------------------ */
/* Kernels of the library and of the zoo                                    */
/* ------------------------------------------------------------------------ */

static void test_repro_vadd(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    test_check_golden("tests/golden/repro_vadd.c", repro, "reproducer of vadd");
    tl_free_host(repro);
    check_repro(k, "vadd_f32", (const char *const[]){"sm_80"}, 1);
    tl_kernel_destroy(k);
    assert_status(tl_op_build(ctx, "vadd", TL_BF16, &k), TL_OK);
    check_repro(k, "vadd_bf16", NULL, 0);
    tl_kernel_destroy(k);
}

static void test_repro_zoo(void **state)
{
    (void)state;
    struct {
        const char *name;
        tl_kernel *k;
    } zoo[] = {
        {"axpby_2d", zoo_axpby_2d(ctx)}, {"rowsum", zoo_rowsum(ctx)},     {"mixed", zoo_mixed(ctx)},
        {"shift", zoo_shift(ctx, TL_F16)}, {"smooth", zoo_smooth(ctx)}, {"fastmath", zoo_fastmath(ctx)},
        {"staged", zoo_staged(ctx)},
    };
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        assert_status(tl_kernel_status(zoo[i].k), TL_OK);
        check_repro(zoo[i].k, zoo[i].name, (const char *const[]){"sm_80"}, i == 0 || i == 6);
        tl_kernel_destroy(zoo[i].k);
    }
}

static void check_gemm(tl_ctx *c, const tl_gemm_desc *d, const char *name)
{
    tl_kernel *k;
    assert_status(tl_op_gemm_build(c, d, &k), TL_OK);
    check_repro(k, name, NULL, 0);
    tl_kernel_destroy(k);
}

/* NN and NT with a bias and both GELUs, the ping-pong default, and an
 * sm_80 schedule baked into its reproducer by its context. */
static void test_repro_gemm(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 512, .n = 512, .k = 512, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .has_bias = 1,
                      .epilogue = TL_EPI_GELU_ERF};
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256};
    check_gemm(ctx, &d, "gemm_nn_bias_gelu");
    d.trans_b = 1;
    d.epilogue = TL_EPI_GELU_TANH;
    d.out_dtype = TL_F32;
    d.schedule.warp_policy = TL_GEMM_WARP_ROWS;
    check_gemm(ctx, &d, "gemm_nt_bias_gelu");
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                    .pingpong = 1};
    check_gemm(ctx, &d, "gemm_pingpong");
    d.schedule = (tl_gemm_schedule){0};
    d.m = d.n = 4096; /* the op's choice: persistent CTAs, C through TMA */
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).persistent, 1);
    check_gemm(ctx, &d, "gemm_persistent");
    d.m = d.n = 512;
    tl_ctx *ctx80 = test_offline_ctx("sm_80");
    d.trans_b = 0;
    d.in_dtype = TL_F16;
    check_gemm(ctx80, &d, "gemm_sm80");
    tl_ctx_destroy(ctx80);
    /* tl_op_gemm_ex's kernels: a strided batch reading C, and arrays of
     * pointers (tl_param_tensor_array) */
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 2, g.stride_a = g.stride_b = g.stride_c = 512 * 512, g.beta = 1;
    tl_kernel *k;
    assert_status(tl_op_gemm_ex_build(ctx, &d, &g, &k), TL_OK);
    check_repro(k, "gemm_strided_beta", NULL, 0);
    tl_kernel_destroy(k);
    g = tl_gemm_default_args();
    g.batch = 2, g.a_array = g.b_array = g.c_array = 8, g.lda = 600;
    assert_status(tl_op_gemm_ex_build(ctx, &d, &g, &k), TL_OK);
    check_repro(k, "gemm_ptrarray", (const char *const[]){"sm_80"}, 1);
    tl_kernel_destroy(k);
    /* the decode kernels: C^T = B^T A^T with B^T a transposed A, K split
     * over a cluster along z (tl_cluster, tl_cluster_reduce_sum, tl_if) */
    tl_gemm_desc dd = {.m = 4, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    assert_true(tl_op_gemm_schedule(ctx, &dd).swap_ab == 1);
    check_gemm(ctx, &dd, "gemm_decode_nn_cluster");
}

static void test_repro_rows(void **state)
{
    (void)state;
    tl_kernel *k;
    tl_softmax_desc s = {.rows = 64, .cols = 1000, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    assert_status(tl_op_softmax_build(ctx, &s, &k), TL_OK);
    check_repro(k, "softmax_one_pass", NULL, 0);
    tl_kernel_destroy(k);
    s.cols = 100000;
    s.in_dtype = TL_F32;
    assert_status(tl_op_softmax_build(ctx, &s, &k), TL_OK);
    check_repro(k, "softmax_online", NULL, 0);
    tl_kernel_destroy(k);
    tl_rmsnorm_desc r = {.rows = 64, .cols = 4096, .in_dtype = TL_F16, .out_dtype = TL_F32, .eps = 1e-6};
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_OK);
    check_repro(k, "rmsnorm", NULL, 0);
    tl_kernel_destroy(k);
    /* a ring of shared tiles: tl_pipelined, the tile copy, the blocks dim */
    s = (tl_softmax_desc){.rows = 64, .cols = 2000, .in_dtype = TL_F16, .out_dtype = TL_F16,
                          .schedule = {.width = 2048, .rows = 2, .threads = 128, .stages = 3}};
    assert_status(tl_op_softmax_build(ctx, &s, &k), TL_OK);
    check_repro(k, "softmax_ring", NULL, 0);
    tl_kernel_destroy(k);
    r.schedule = (tl_softmax_schedule){.stages = 2};
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_OK);
    check_repro(k, "rmsnorm_ring", NULL, 0);
    tl_kernel_destroy(k);
    /* a row split over a cluster: tl_cluster, tl_use_min_blocks, the cluster reductions */
    s.schedule = (tl_softmax_schedule){.width = 1024, .rows = 1, .threads = 256, .stages = 3, .cluster = 2};
    assert_status(tl_op_softmax_build(ctx, &s, &k), TL_OK);
    check_repro(k, "softmax_cluster", NULL, 0);
    tl_kernel_destroy(k);
    r.schedule = (tl_softmax_schedule){.width = 2048, .rows = 1, .threads = 512, .cluster = 2};
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_OK);
    check_repro(k, "rmsnorm_cluster", NULL, 0);
    tl_kernel_destroy(k);
}

/* FlashAttention, causal with the log-sum-exp and not, and the gated dual
 * GEMM of the examples: several tl_gemm, reductions and element-wise loops
 * in one warp-specialised pipelined loop. */
static void test_repro_attention_dual_gemm(void **state)
{
    (void)state;
    tl_flash_attn_desc d = {.batch = 2, .heads = 4, .kv_heads = 2, .seq_q = 200, .seq_kv = 300, .head_dim = 128,
                            .dtype = TL_BF16, .causal = 1, .lse = 1};
    tl_kernel *k;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_OK);
    check_repro(k, "flash_attn_causal", NULL, 0);
    tl_kernel_destroy(k);
    d.causal = 0, d.lse = 0, d.head_dim = 64, d.dtype = TL_F16;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_OK);
    check_repro(k, "flash_attn", NULL, 0);
    tl_kernel_destroy(k);
    k = dual_gemm_build(ctx, TL_BF16, &dual_gemm_default);
    assert_status(tl_kernel_status(k), TL_OK);
    check_repro(k, "dual_gemm", NULL, 0);
    tl_kernel_destroy(k);
}

/* ------------------------------------------------------------------------ */
/* Every builder call, and the corners of the replay                        */
/* ------------------------------------------------------------------------ */

/* Parameters declared among tile buffers, statements and other nodes;
 * names given to buffers; values nothing uses; every dtype of constant,
 * special floats, every expression op, every reduction, fills, and
 * if/else inside a serial loop. Its dump must come back; its source too,
 * or the same error. */
static tl_kernel *everything_kernel(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "everything");
    tl_expr R = tl_dim(k, "R");
    tl_buf acc = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){4, 32});
    tl_name(k, acc, "acc");
    tl_int(k, 12345); /* nothing takes it */
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){R, tl_int(k, 32)}, NULL);
    tl_expr alpha = tl_param_scalar(k, "alpha", TL_F64);
    tl_param_scalar(k, "unused", TL_I32);
    tl_grid(k, tl_ceildiv(k, R, tl_int(k, 4)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_use_fast_math(k, 1);
    tl_use_swizzle(k, 4);
    tl_expr row0 = tl_mul(k, tl_block_idx(k, 0), tl_int(k, 4));
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, (tl_expr[]){R, tl_int(k, 32)},
                               (tl_expr[]){tl_add(k, tl_int(k, 32), tl_int(k, 0)), tl_i32(k, 1)});
    tl_buf m = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_buf s = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_alloc_local(k, TL_I32, 1, (int64_t[]){2}); /* never used */
    tl_copy(k, tl_tile(k, X, tl_block_idx(k, 0), tl_int(k, 0)), tl_all(acc));
    tl_fill(k, m, tl_f32(k, -INFINITY));
    tl_clear(k, s);
    tl_reduce_max(k, acc, m, 1, 0);
    tl_reduce_min(k, acc, s, 1, 1);
    tl_reduce_absmax(k, acc, s, 1, 0);
    tl_reduce_sum(k, acc, s, 1, 0);
    tl_expr n = tl_serial(k, tl_i32(k, 2));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){4, 32}, v);
    tl_expr x = tl_load(k, acc, v);
    tl_load(k, m, v); /* nothing takes it */
    tl_if(k, tl_and(k, tl_lt(k, x, tl_f32(k, 0.1f)), tl_not(k, tl_eq(k, n, tl_int(k, INT64_MIN)))));
    tl_expr odd = tl_ne(k, tl_mod(k, tl_cast(k, v[1], TL_I32), tl_i32(k, INT32_MIN)), tl_i32(k, 0));
    tl_expr h = tl_cast(k, tl_float(k, -0.0, TL_F16), TL_F32);
    tl_store(k, acc, v, tl_select(k, tl_or(k, odd, tl_ge(k, x, h)), tl_exp(k, tl_neg(k, x)), tl_float(k, NAN, TL_F32)));
    tl_else(k);
    tl_expr d = tl_cast(k, tl_mul(k, tl_cast(k, x, TL_F64), alpha), TL_F32);
    tl_expr t = tl_add(k, tl_tanh(k, d), tl_erf(k, tl_abs(k, d)));
    t = tl_sub(k, t, tl_div(k, tl_log(k, tl_exp2(k, d)), tl_sqrt(k, tl_rsqrt(k, tl_float(k, 0x1p-149, TL_F32)))));
    t = tl_max(k, tl_min(k, t, tl_float(k, INFINITY, TL_F32)), tl_cast(k, tl_float(k, 1.5, TL_BF16), TL_F32));
    tl_store(k, acc, v, tl_select(k, tl_le(k, t, tl_f32(k, 1e30f)), t, tl_f32(k, 0)));
    tl_end(k);
    tl_end(k);
    tl_end(k);
    tl_expr w[2];
    tl_parallel(k, 2, (int64_t[]){4, 32}, w);
    tl_expr gi = tl_add(k, row0, w[0]);
    tl_store(k, Y, (tl_expr[]){gi, w[1]}, tl_sub(k, tl_load(k, acc, w), tl_load(k, m, &w[0])));
    tl_end(k);
    return k;
}

static void test_repro_everything(void **state)
{
    (void)state;
    tl_kernel *k = everything_kernel();
    assert_status(tl_kernel_status(k), TL_OK);
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    /* what only the program text shows: names, dropped results, floats */
    const char *const expect[] = {
        "tl_name(k, b_acc, \"acc\");", "\n    tl_int(k, 12345);\n", "tl_param_scalar(k, \"unused\", TL_I32);",
        "tl_float(k, -INFINITY, TL_F32)", "tl_float(k, NAN, TL_F32)", "tl_float(k, -0x0p+0 /* -0 */, TL_F16)",
        "tl_float(k, 0x1p-149", "tl_int(k, INT64_MIN)", "tl_i32(k, INT32_MIN)", "tl_use_swizzle(k, 4);",
        "tl_reduce_absmax(k, b_acc, b5, 1, 0);", "tl_reduce_min(k, b_acc, b5, 1, 1);", "tl_else(k);",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (!strstr(repro, expect[i]))
            fail_msg("the reproducer lacks \"%s\":\n%s", expect[i], repro);
    tl_free_host(repro);
    check_repro(k, "everything", (const char *const[]){"sm_80"}, 1);
    tl_kernel_destroy(k);
}

/* A shared tile and a tl_gemm with flags, a pipelined loop, warp
 * specialisation in persistent CTAs, a local buffer, and a tensor declared after statements
 * (launch order is declaration order: it stays last). */
static void test_repro_tiles(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "tiles");
    tl_expr K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", TL_F16, 2, (tl_expr[]){tl_int(k, 64), K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_F16, 2, (tl_expr[]){tl_int(k, 64), K}, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 1);
    tl_buf As = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){64, 64});
    tl_buf Bs = tl_alloc_shared(k, TL_F16, 2, (int64_t[]){64, 64});
    tl_name(k, Bs, "Bs");
    tl_buf C = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
    tl_clear(k, C);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 64)), 3);
    tl_copy(k, tl_tile(k, A, tl_int(k, 0), ko), tl_all(As));
    tl_copy(k, tl_tile(k, B, tl_int(k, 0), ko), tl_all(Bs));
    tl_gemm(k, As, Bs, C, TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS);
    tl_end(k);
    tl_buf O = tl_param_tensor(k, "O", TL_F32, 2, (tl_expr[]){tl_int(k, 64), tl_int(k, 64)}, NULL);
    tl_copy(k, tl_all(C), tl_tile(k, O, tl_int(k, 0), tl_int(k, 0)));
    assert_status(tl_kernel_status(k), TL_OK);
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    assert_non_null(strstr(repro, "tl_gemm(k, b3, b_Bs, b5, TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS);"));
    assert_non_null(strstr(repro, "tl_use_warp_specialize(k, 1);"));
    assert_non_null(strstr(repro, "tl_use_persistent(k, 1);"));
    assert_non_null(strstr(repro, "tl_pipelined(k, e"));
    const char *o = strstr(repro, "tl_param_tensor(k, \"O\"");
    assert_non_null(o);
    assert_true(o > strstr(repro, "tl_end(k);"));
    tl_free_host(repro);
    check_repro(k, "tiles", NULL, 0);
    tl_use_persistent(k, 2); /* blocks from a counter: the mode itself is written back */
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    assert_non_null(strstr(repro, "tl_use_persistent(k, 2);"));
    assert_null(strstr(repro, "tl_use_persistent(k, 1);"));
    tl_free_host(repro);
    check_repro(k, "tiles_counter", NULL, 0);
    tl_kernel_destroy(k);
}

/* The 8-bit floats (kernels.h, zoo_fp8): tensors and tiles of both types, constants
 * and casts; the reproducer names them by their enum and gives back the
 * source (sm_90a and sm_80) and the dump. */
static void test_repro_fp8(void **state)
{
    (void)state;
    tl_kernel *k = zoo_fp8(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    const char *const expect[] = {"TL_F8E4M3, 2,", "TL_F8E5M2, 2,", "tl_alloc_shared(k, TL_F8E5M2",
                                  ", TL_F8E4M3)", "tl_cast(k, "};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (!strstr(repro, expect[i]))
            fail_msg("the reproducer lacks \"%s\":\n%s", expect[i], repro);
    assert_null(strstr(repro, "TL_DTYPE_INVALID"));
    tl_free_host(repro);
    check_repro(k, "fp8", (const char *const[]){"sm_80"}, 1);
    tl_kernel_destroy(k);
}

/* Two tiles made at one point of the clock, then nodes, then a third tile
 * the first statement takes: the replay declared the third at the first
 * two's clock (the fuzzer found it: TL_ERR_INTERNAL "a declaration made at
 * 19 comes at 16"). */
static void test_repro_tiles_at_one_clock(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "clock");
    tl_expr N = tl_dim(k, "N");
    tl_buf A = tl_param_tensor(k, "A", TL_F32, 2, (tl_expr[]){N, N}, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_alloc_shared(k, TL_F32, 2, (int64_t[]){32, 32});
    tl_alloc_shared(k, TL_F32, 2, (int64_t[]){32, 32});
    tl_expr bx = tl_block_idx(k, 0);
    tl_block_idx(k, 1);
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){32, 32});
    tl_clear(k, F); /* a statement with no expression: nothing else catches the replay up */
    tl_copy(k, tl_all(F), tl_tile(k, A, bx, tl_int(k, 0)));
    assert_status(tl_kernel_status(k), TL_OK);
    check_repro(k, "clock", NULL, 0);
    tl_kernel_destroy(k);
}

/* A kernel of one f32 tensor A [N], one block of 32 threads per element,
 * and no statement yet. */
static tl_kernel *one_tensor_kernel(const char *name, tl_expr *N, tl_buf *A)
{
    tl_kernel *k = tl_kernel_new(ctx, name);
    *N = tl_dim(k, "N");
    *A = tl_param_tensor(k, "A", TL_F32, 1, N, NULL);
    tl_grid(k, *N, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    return k;
}

/* A kernel the builder accepted but that cannot compile (a scope left
 * open, no grid) still has a reproducer: it fails as the original does. */
static void test_repro_incomplete(void **state)
{
    (void)state;
    tl_expr N;
    tl_buf A;
    tl_kernel *k = one_tensor_kernel("open_scope", &N, &A);
    tl_if(k, tl_gt(k, N, tl_int(k, 0)));
    tl_else(k);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, A, &i, tl_f32(k, 1));
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    assert_null(strstr(repro, "tl_end(k);"));
    assert_non_null(strstr(repro, "tl_else(k);"));
    tl_free_host(repro);
    check_repro(k, "open_scope", NULL, 0); /* tl_kernel_source records TL_ERR_SCOPE on k */
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "no_grid");
    tl_dim(k, "N");
    check_repro(k, "no_grid", NULL, 0);
    tl_kernel_destroy(k);
}

/* Expressions as deep as the user makes them, and a DAG whose tree would
 * have 2^60 nodes: written in time linear in the graph, without
 * recursion. The program is checked by reading it, not compiled. */
static void test_repro_deep(void **state)
{
    (void)state;
    tl_expr N;
    tl_buf A;
    tl_kernel *k = one_tensor_kernel("deep", &N, &A);
    tl_expr x = tl_load(k, A, (tl_expr[]){tl_block_idx(k, 0)});
    for (int i = 0; i < 60; i++)
        x = tl_add(k, x, x);
    for (int i = 0; i < 100000; i++)
        x = tl_mul(k, x, tl_f32(k, 1.0f));
    tl_store(k, A, (tl_expr[]){tl_block_idx(k, 0)}, x);
    assert_status(tl_kernel_status(k), TL_OK);
    char *repro;
    assert_status(tl_kernel_reproducer(k, &repro), TL_OK);
    int calls = 0;
    const char *end = strstr(repro, "\nint main(");
    assert_non_null(end);
    for (const char *p = repro; p < end; p++) /* not strstr: ASan's reads the whole rest each time */
        calls += *p == ' ' && strncmp(p, " = tl_", 6) == 0;
    /* N, A, block index, load, 60 adds, 100000 x (constant, product), a
     * block index for the store */
    assert_int_equal(calls, 1 + 1 + 1 + 1 + 60 + 200000 + 1);
    tl_free_host(repro);
    tl_kernel_destroy(k);
}

static void test_repro_errors(void **state)
{
    (void)state;
    char *repro = (char *)"untouched";
    assert_status(tl_kernel_reproducer(NULL, &repro), TL_ERR_INVALID_ARG);
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    assert_status(tl_kernel_reproducer(k, NULL), TL_ERR_INVALID_ARG);
    assert_true(strncmp(tl_ctx_error(ctx), "tl_kernel_reproducer:", 21) == 0);
    tl_kernel_destroy(k);
    /* a broken kernel has no reproducer: its recorded error, named */
    k = tl_kernel_new(ctx, "broken");
    tl_dim(k, "tl_reserved");
    assert_status(tl_kernel_reproducer(k, &repro), TL_ERR_INVALID_ARG);
    assert_null(repro);
    const char *msg = tl_ctx_error(ctx);
    assert_true(strncmp(msg, "tl_kernel_reproducer:", 21) == 0);
    assert_non_null(strstr(msg, "broken"));
    assert_non_null(strstr(msg, tl_kernel_error(k)));
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repro_vadd),      cmocka_unit_test(test_repro_zoo),
        cmocka_unit_test(test_repro_gemm),      cmocka_unit_test(test_repro_rows),
        cmocka_unit_test(test_repro_attention_dual_gemm),
        cmocka_unit_test(test_repro_everything), cmocka_unit_test(test_repro_tiles),
        cmocka_unit_test(test_repro_tiles_at_one_clock), cmocka_unit_test(test_repro_fp8),
        cmocka_unit_test(test_repro_incomplete), cmocka_unit_test(test_repro_deep),
        cmocka_unit_test(test_repro_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
