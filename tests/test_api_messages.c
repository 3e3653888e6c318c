/* test_api_messages.c - every failing public call leaves a message that
 * starts with its own name. The list of calls is read from
 * include/tilec.h at run time, so a function added to the header without
 * an entry here fails this test: each entry either makes its function fail
 * and checks the message, or says why the function has no failure to
 * report (no context to hold one, no status). */
#include "fixture.h"

#include <ctype.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a probe works with: an offline context, a valid kernel, and (when
 * NVRTC is there) a compiled program of it. */
static tl_kernel *good;
static tl_program *prog;
static char outmsg[1024]; /* for calls that report through a msg argument */

/* A probe makes its function fail and returns the status. */
typedef tl_status (*probe_fn)(void);

typedef struct api_entry {
    const char *name;
    probe_fn probe;      /* NULL: `why` says why there is nothing to check */
    const char *why;
    bool via_outmsg;     /* the message is in outmsg, not on the context */
    bool needs_program;  /* skipped (one line) without NVRTC */
} api_entry;

/* A fresh kernel, ready for a failing call. */
static tl_kernel *fresh(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "probe");
    assert_non_null(k);
    return k;
}

/* A fresh kernel with a grid, N, and an f32 tensor A[N]. */
static tl_kernel *fresh_grid(tl_buf *a, tl_expr *n)
{
    tl_kernel *k = fresh();
    *n = tl_dim(k, "N");
    *a = tl_param_tensor(k, "A", TL_F32, 1, n, NULL);
    tl_grid(k, tl_int(k, 2), TL_NONE_EXPR, TL_NONE_EXPR, 64);
    return k;
}

/* The builder's failures: the kernel's status, and the message on the
 * context (the probe destroys the kernel). */
static tl_status done(tl_kernel *k)
{
    tl_status st = tl_kernel_status(k);
    tl_kernel_destroy(k);
    return st;
}

#define NONE TL_NONE_EXPR
typedef tl_expr (*bin_fn)(tl_kernel *, tl_expr, tl_expr);
typedef tl_expr (*un_fn)(tl_kernel *, tl_expr);
static tl_status bad_binary(bin_fn f)
{
    tl_kernel *k = fresh();
    f(k, NONE, tl_int(k, 1));
    return done(k);
}
static tl_status bad_unary(un_fn f)
{
    tl_kernel *k = fresh();
    f(k, NONE);
    return done(k);
}

#define BIN(fn) static tl_status p_##fn(void) { return bad_binary(fn); }
#define UN(fn) static tl_status p_##fn(void) { return bad_unary(fn); }
BIN(tl_add) BIN(tl_sub) BIN(tl_mul) BIN(tl_div) BIN(tl_mod) BIN(tl_ceildiv) BIN(tl_max) BIN(tl_min)
BIN(tl_lt) BIN(tl_le) BIN(tl_gt) BIN(tl_ge) BIN(tl_eq) BIN(tl_ne) BIN(tl_and) BIN(tl_or)
UN(tl_neg) UN(tl_abs) UN(tl_not) UN(tl_exp) UN(tl_exp2) UN(tl_log) UN(tl_sqrt) UN(tl_rsqrt) UN(tl_tanh)
UN(tl_erf)

static tl_status p_tl_ctx_create(void)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_1";
    tl_ctx *c = NULL;
    return tl_ctx_create(&o, &c, outmsg, sizeof outmsg);
}

static tl_status p_tl_runtime_versions(void)
{
    tl_status st = tl_runtime_versions(NULL, NULL, NULL, outmsg, sizeof outmsg);
    if (st == TL_OK)
        snprintf(outmsg, sizeof outmsg, "tl_runtime_versions: (a driver and NVRTC: nothing failed)");
    return st == TL_OK ? TL_ERR_INTERNAL : st; /* the message is what is checked */
}

static tl_status p_tl_ctx_get_device_info(void)
{
    tl_device_info info;
    return tl_ctx_get_device_info(ctx, &info);
}
static tl_status p_tl_malloc(void)
{
    uint64_t d;
    return tl_malloc(ctx, 16, &d);
}
static tl_status p_tl_free(void) { return tl_free(ctx, 0x1000); }
static tl_status p_tl_memcpy_htod(void)
{
    char b[4] = {0};
    return tl_memcpy_htod(ctx, 0x1000, b, 4);
}
static tl_status p_tl_memcpy_dtoh(void)
{
    char b[4];
    return tl_memcpy_dtoh(ctx, b, 0x1000, 4);
}
static tl_status p_tl_memcpy_dtod(void) { return tl_memcpy_dtod(ctx, 0x1000, 0x2000, 4, NULL); }
static tl_status p_tl_memset_u8(void) { return tl_memset_u8(ctx, 0x1000, 0, 4, NULL); }
static tl_status p_tl_synchronize(void) { return tl_synchronize(ctx); }
static tl_status p_tl_random_fill(void) { return tl_random_fill(ctx, 0x1000, TL_F32, 4, 1, 1, 0, NULL); }

static tl_status p_tl_kernel_new(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "1bad");
    tl_kernel_destroy(k);
    return k ? TL_OK : TL_ERR_INVALID_ARG;
}
static tl_status p_tl_dim(void)
{
    tl_kernel *k = fresh();
    tl_dim(k, "namespace");
    return done(k);
}
static tl_status p_tl_param_scalar(void)
{
    tl_kernel *k = fresh();
    tl_param_scalar(k, "s", TL_BOOL);
    return done(k);
}
static tl_status p_tl_param_tensor(void)
{
    tl_kernel *k = fresh();
    tl_param_tensor(k, "T", TL_F32, 0, NULL, NULL);
    return done(k);
}
static tl_status p_tl_param_tensor_array(void)
{
    tl_kernel *k = fresh();
    tl_expr n = tl_dim(k, "n");
    tl_param_tensor_array(k, "T", TL_F32, 1, &n, NULL, n, 3);
    return done(k);
}
static tl_status p_tl_grid(void)
{
    tl_kernel *k = fresh();
    tl_grid(k, NONE, NONE, NONE, 33);
    return done(k);
}
static tl_status p_tl_block_idx(void)
{
    tl_kernel *k = fresh();
    tl_block_idx(k, 3);
    return done(k);
}
static tl_status p_tl_float(void)
{
    tl_kernel *k = fresh();
    tl_float(k, 1.0, TL_I32);
    return done(k);
}
static tl_status p_tl_select(void)
{
    tl_kernel *k = fresh();
    tl_select(k, tl_int(k, 1), tl_int(k, 1), tl_int(k, 2));
    return done(k);
}
static tl_status p_tl_block_value(void)
{
    tl_kernel *k = fresh();
    tl_buf x = tl_param_tensor(k, "X", TL_I64, 1, (tl_expr[]){tl_int(k, 4)}, NULL);
    tl_block_value(k, tl_load(k, x, (tl_expr[]){tl_int(k, 0)}));
    return done(k);
}
static tl_status p_tl_use_cache_policy(void)
{
    tl_kernel *k = fresh();
    tl_use_cache_policy(k, tl_alloc_shared(k, TL_F32, 1, (int64_t[]){32}), TL_CACHE_EVICT_FIRST);
    return done(k);
}
static tl_status p_tl_cast(void)
{
    tl_kernel *k = fresh();
    tl_cast(k, tl_int(k, 1), TL_BOOL);
    return done(k);
}
static tl_status p_tl_load(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_load(k, a, NULL);
    return done(k);
}
static tl_status p_tl_store(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_store(k, a, &n, tl_int(k, 1));
    return done(k);
}
static tl_status p_tl_serial(void)
{
    tl_kernel *k = fresh();
    tl_serial(k, tl_f32(k, 1));
    return done(k);
}
static tl_status p_tl_parallel(void)
{
    tl_kernel *k = fresh();
    tl_parallel(k, 0, NULL, NULL);
    return done(k);
}
static tl_status p_tl_parallel1(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_parallel1(k, 0);
    return done(k);
}
static tl_status p_tl_if(void)
{
    tl_kernel *k = fresh();
    tl_if(k, tl_int(k, 1));
    return done(k);
}
static tl_status p_tl_else(void)
{
    tl_kernel *k = fresh();
    tl_else(k);
    return done(k);
}
static tl_status p_tl_end(void)
{
    tl_kernel *k = fresh();
    tl_end(k);
    return done(k);
}
static tl_status p_tl_alloc_shared(void)
{
    tl_kernel *k = fresh();
    tl_alloc_shared(k, TL_I32, 1, (int64_t[]){4});
    return done(k);
}
static tl_status p_tl_alloc_fragment(void)
{
    tl_kernel *k = fresh();
    tl_alloc_fragment(k, TL_F32, 5, NULL);
    return done(k);
}
static tl_status p_tl_alloc_reducer(void)
{
    tl_kernel *k = fresh();
    tl_alloc_reducer(k, TL_BF16, 1, (int64_t[]){4});
    return done(k);
}
static tl_status p_tl_finalize_reducer(void)
{
    tl_kernel *k = fresh();
    tl_finalize_reducer(k, tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4}));
    return done(k);
}
static tl_status p_tl_alloc_local(void)
{
    tl_kernel *k = fresh();
    tl_alloc_local(k, TL_F32, 1, (int64_t[]){0});
    return done(k);
}
static tl_status p_tl_tile_n(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_tile_n(k, a, &n, 2);
    return done(k);
}
static tl_status p_tl_copy(void)
{
    tl_kernel *k = fresh();
    tl_copy(k, tl_all(TL_NONE_BUF), tl_all(TL_NONE_BUF));
    return done(k);
}
static tl_status p_tl_clear(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_clear(k, a);
    return done(k);
}
static tl_status p_tl_fill(void)
{
    tl_kernel *k = fresh();
    tl_fill(k, TL_NONE_BUF, NONE);
    return done(k);
}
static tl_status p_tl_pipelined(void)
{
    tl_buf a;
    tl_expr n;
    tl_kernel *k = fresh_grid(&a, &n);
    tl_pipelined(k, n, 0);
    return done(k);
}
static tl_status p_tl_gemm(void)
{
    tl_kernel *k = fresh();
    tl_gemm(k, TL_NONE_BUF, TL_NONE_BUF, TL_NONE_BUF, 0);
    return done(k);
}
static tl_status p_tl_use_swizzle(void)
{
    tl_kernel *k = fresh();
    tl_use_swizzle(k, -1);
    return done(k);
}
static tl_status p_tl_use_min_blocks(void)
{
    tl_kernel *k = fresh();
    tl_use_min_blocks(k, -1);
    return done(k);
}
static tl_status p_tl_cluster(void)
{
    tl_kernel *k = fresh();
    tl_cluster(k, 3, 3, 1);
    return done(k);
}
static tl_status bad_cluster_reduce(void (*f)(tl_kernel *, tl_buf))
{
    tl_kernel *k = fresh();
    f(k, TL_NONE_BUF);
    return done(k);
}
static tl_status p_tl_cluster_reduce_max(void) { return bad_cluster_reduce(tl_cluster_reduce_max); }
static tl_status p_tl_cluster_reduce_sum(void) { return bad_cluster_reduce(tl_cluster_reduce_sum); }
static tl_status p_tl_cluster_reduce_min(void) { return bad_cluster_reduce(tl_cluster_reduce_min); }
static tl_status p_tl_cluster_reduce_absmax(void) { return bad_cluster_reduce(tl_cluster_reduce_absmax); }
static tl_status p_tl_cluster_reduce_sum_to(void)
{
    tl_kernel *k = fresh();
    tl_cluster_reduce_sum_to(k, TL_NONE_BUF, 0);
    return done(k);
}
static tl_status p_tl_compile(void)
{
    tl_kernel *k = fresh();
    tl_program *p = NULL;
    tl_status st = tl_compile(k, NULL, &p); /* empty: no grid */
    tl_kernel_destroy(k);
    return st;
}
static tl_status p_tl_kernel_source(void) { return tl_kernel_source(good, NULL, NULL); }
static tl_status p_tl_kernel_ptx(void)
{
    char *ptx = NULL;
    return tl_kernel_ptx(good, "sm_1", &ptx);
}
static tl_status p_tl_kernel_ptxas_report(void)
{
    char *report = NULL;
    return tl_kernel_ptxas_report(good, "sm_1", &report);
}
static tl_status p_tl_program_get_info(void) { return tl_program_get_info(prog, NULL); }
static tl_status p_tl_program_param(void)
{
    tl_param_info info;
    return tl_program_param(prog, 99, &info);
}
static tl_status p_tl_launch(void) { return tl_launch(prog, NULL, 1, NULL); }
static tl_status p_tl_interpret(void) { return tl_interpret(good, 0, NULL); }
static tl_status p_tl_program_interpret(void) { return tl_program_interpret(prog, 0, NULL); }
static tl_status never(void *user, void *stream)
{
    (void)user, (void)stream;
    return TL_OK;
}
static tl_status p_tl_time(void)
{
    tl_timing t;
    return tl_time(ctx, NULL, never, NULL, NULL, &t);
}
static tl_status p_tl_time_interleaved(void)
{
    tl_timing t;
    return tl_time_interleaved(ctx, NULL, 0, NULL, NULL, NULL, &t);
}
static tl_status p_tl_time_launch(void)
{
    tl_timing t;
    return tl_time_launch(prog, NULL, 0, NULL, NULL, &t);
}
static tl_status p_tl_check(void)
{
    tl_span s = {.dtype = TL_F32, .n = 4, .dptr = 0x1000};
    tl_check_result r;
    return tl_check(ctx, &s, &s, 0.1, &r); /* device spans, offline */
}
static tl_status p_tl_program_check(void) { return tl_program_check(prog, NULL, 0, NULL, NULL, NULL, 0.1, NULL); }
static tl_status p_tl_cache_get_stats(void) { return tl_cache_get_stats(ctx, NULL); }

/* A foreign directory deeper than clear digs, at an entry's path. */
static tl_status p_tl_cache_clear(void)
{
    char dir[] = "/tmp/tilec-api-XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.cache_dir = dir;
    tl_ctx *c = NULL;
    assert_status(tl_ctx_create(&o, &c, NULL, 0), TL_OK);
    int n = snprintf(path, sizeof path, "%s/00", dir);
    mkdir(path, 0755);
    n += snprintf(path + n, sizeof path - (size_t)n, "/%064d.tlc", 0);
    for (int i = 0; i < 20; i++) {
        mkdir(path, 0755);
        n += snprintf(path + n, sizeof path - (size_t)n, "/d");
    }
    tl_status st = tl_cache_clear(c);
    snprintf(outmsg, sizeof outmsg, "%s", tl_ctx_error(c));
    tl_ctx_destroy(c);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return st;
}

static tl_status p_tl_op_vadd(void) { return tl_op_vadd(ctx, NULL, 0, 0, 0, NULL); }
static tl_status p_tl_op_vadd_program(void)
{
    const tl_program *p;
    return tl_op_vadd_program(ctx, NULL, &p);
}
static const tl_gemm_desc bad_gemm = {.m = 0, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
static tl_status p_tl_op_gemm(void) { return tl_op_gemm(ctx, &bad_gemm, 0, 0, 0, 0, NULL); }
static tl_status p_tl_op_gemm_schedule(void)
{
    tl_gemm_schedule s = tl_op_gemm_schedule(ctx, &bad_gemm);
    return s.block_m ? TL_OK : TL_ERR_INVALID_ARG;
}
static tl_status p_tl_op_gemm_program(void)
{
    const tl_program *p;
    return tl_op_gemm_program(ctx, &bad_gemm, &p);
}
static tl_status p_tl_op_gemm_build(void)
{
    tl_kernel *k;
    return tl_op_gemm_build(ctx, &bad_gemm, &k);
}
static tl_status p_tl_baseline_gemm(void) { return tl_baseline_gemm(ctx, &bad_gemm, 0, 0, 0, 0, NULL); }
static const tl_gemm_args no_args; /* batch 0 */
static tl_status p_tl_op_gemm_ex(void) { return tl_op_gemm_ex(ctx, &bad_gemm, &no_args, NULL); }
static tl_status p_tl_op_gemm_ex_program(void)
{
    const tl_program *p;
    return tl_op_gemm_ex_program(ctx, &bad_gemm, &no_args, &p);
}
static tl_status p_tl_op_gemm_ex_build(void)
{
    tl_kernel *k;
    return tl_op_gemm_ex_build(ctx, &bad_gemm, &no_args, &k);
}
static tl_status p_tl_baseline_gemm_ex(void) { return tl_baseline_gemm_ex(ctx, &bad_gemm, &no_args, NULL); }
static tl_status p_tl_op_bias_act(void) { return tl_op_bias_act(ctx, TL_I32, 1, 1, 0x1000, 0, TL_EPI_NONE, NULL); }
static tl_status p_tl_op_bias_act_build(void)
{
    tl_kernel *k;
    return tl_op_bias_act_build(ctx, TL_F32, (tl_epilogue)9, 0, &k);
}
static tl_status p_tl_op_build(void)
{
    tl_kernel *k;
    return tl_op_build(ctx, "nope", TL_F32, &k);
}

static tl_status bad_reduce(void (*f)(tl_kernel *, tl_buf, tl_buf, int, int))
{
    tl_kernel *k = fresh();
    f(k, TL_NONE_BUF, TL_NONE_BUF, 0, 1);
    return done(k);
}
static tl_status p_tl_reduce_max(void) { return bad_reduce(tl_reduce_max); }
static tl_status p_tl_reduce_sum(void) { return bad_reduce(tl_reduce_sum); }
static tl_status p_tl_reduce_min(void) { return bad_reduce(tl_reduce_min); }
static tl_status p_tl_reduce_absmax(void) { return bad_reduce(tl_reduce_absmax); }
static tl_status p_tl_name(void)
{
    tl_kernel *k = fresh();
    tl_buf s = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){32});
    tl_name(k, s, "tl_mine"); /* the tl_ prefix is the library's */
    return done(k);
}
static tl_status p_tl_kernel_dump(void) { return tl_kernel_dump(good, NULL); }
static tl_status p_tl_kernel_reproducer(void) { return tl_kernel_reproducer(good, NULL); }
static tl_status p_tl_kernel_lower_dump(void)
{
    char *t = NULL;
    return tl_kernel_lower_dump(good, NULL, "no-such-pass", &t);
}

static const tl_softmax_desc bad_softmax = {.rows = -1, .cols = 8, .in_dtype = TL_F32, .out_dtype = TL_F32};
static tl_status p_tl_op_softmax(void) { return tl_op_softmax(ctx, &bad_softmax, 0x1000, 0x2000, NULL); }
static tl_status p_tl_op_softmax_schedule(void)
{
    tl_softmax_schedule s = tl_op_softmax_schedule(ctx, &bad_softmax);
    return s.threads ? TL_OK : TL_ERR_INVALID_ARG;
}
static tl_status p_tl_op_softmax_program(void)
{
    const tl_program *p;
    return tl_op_softmax_program(ctx, &bad_softmax, &p);
}
static tl_status p_tl_op_softmax_build(void)
{
    tl_kernel *k;
    return tl_op_softmax_build(ctx, &bad_softmax, &k);
}
static const tl_rmsnorm_desc bad_rmsnorm = {.rows = 4, .cols = 0, .in_dtype = TL_F32, .out_dtype = TL_F32};
static tl_status p_tl_op_rmsnorm(void) { return tl_op_rmsnorm(ctx, &bad_rmsnorm, 0x1000, 0x2000, 0x3000, NULL); }
static tl_status p_tl_op_rmsnorm_schedule(void)
{
    tl_softmax_schedule s = tl_op_rmsnorm_schedule(ctx, &bad_rmsnorm);
    return s.threads ? TL_OK : TL_ERR_INVALID_ARG;
}
static tl_status p_tl_op_rmsnorm_program(void)
{
    const tl_program *p;
    return tl_op_rmsnorm_program(ctx, &bad_rmsnorm, &p);
}
static tl_status p_tl_op_rmsnorm_build(void)
{
    tl_kernel *k;
    return tl_op_rmsnorm_build(ctx, &bad_rmsnorm, &k);
}
/* heads not a multiple of kv_heads */
static const tl_flash_attn_desc bad_attn = {
    .batch = 1, .heads = 3, .kv_heads = 2, .seq_q = 64, .seq_kv = 64, .head_dim = 64, .dtype = TL_BF16};
static tl_status p_tl_op_flash_attn(void) { return tl_op_flash_attn(ctx, &bad_attn, 1, 2, 3, 4, 0, NULL); }
static tl_status p_tl_op_flash_attn_schedule(void)
{
    tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &bad_attn);
    return s.block_m ? TL_OK : TL_ERR_INVALID_ARG;
}
static tl_status p_tl_op_flash_attn_program(void)
{
    const tl_program *p;
    return tl_op_flash_attn_program(ctx, &bad_attn, &p);
}
static tl_status p_tl_op_flash_attn_build(void)
{
    tl_kernel *k;
    return tl_op_flash_attn_build(ctx, &bad_attn, &k);
}
static tl_status p_tl_op_flash_attn_combine_build(void)
{
    tl_kernel *k;
    return tl_op_flash_attn_combine_build(ctx, &bad_attn, &k);
}
static tl_status p_tl_compile_many(void) { return tl_compile_many(ctx, NULL, 1, NULL, 1); }
static tl_status p_tl_autotune(void)
{
    tl_tune_result *r = NULL;
    return tl_autotune(ctx, NULL, &r);
}
static tl_status p_tl_tune_db_list(void) { return tl_tune_db_list(ctx, NULL, NULL); }
/* A database path that is a directory cannot be rewritten. */
static tl_status p_tl_tune_db_clear(void)
{
    char dir[] = "/tmp/tilec-api-XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.cache_dir = dir;
    tl_ctx *c = NULL;
    assert_status(tl_ctx_create(&o, &c, NULL, 0), TL_OK);
    snprintf(path, sizeof path, "%s", tl_tune_db_path(c));
    mkdir(path, 0755);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/x");
    mkdir(path, 0755);
    tl_status st = tl_tune_db_clear(c);
    snprintf(outmsg, sizeof outmsg, "%s", tl_ctx_error(c));
    tl_ctx_destroy(c);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return st;
}

#define P(fn) {#fn, p_##fn, NULL, false, false}
#define PMSG(fn) {#fn, p_##fn, NULL, true, false}
#define PPROG(fn) {#fn, p_##fn, NULL, false, true}
#define WHY(fn, text) {#fn, NULL, text, false, false}

static const char nothing_fails[] = "cannot fail: a pure lookup or conversion";
static const char no_status[] = "returns nothing: no failure to report";
static const char query[] = "a query of an object: no status, and NULL gives a documented default";

static const api_entry entries[] = {
    WHY(tl_version, nothing_fails), WHY(tl_status_name, nothing_fails), WHY(tl_dtype_size, nothing_fails),
    WHY(tl_dtype_name, nothing_fails), WHY(tl_dtype_from_name, nothing_fails),
    WHY(tl_ctx_default_options, nothing_fails), WHY(tl_f32_to_f16, nothing_fails),
    WHY(tl_f16_to_f32, nothing_fails), WHY(tl_f32_to_bf16, nothing_fails), WHY(tl_bf16_to_f32, nothing_fails),
    WHY(tl_f32_to_f8e4m3, nothing_fails), WHY(tl_f8e4m3_to_f32, nothing_fails), WHY(tl_f32_to_f8e5m2, nothing_fails),
    WHY(tl_f8e5m2_to_f32, nothing_fails),
    WHY(tl_op_names, nothing_fails),
    WHY(tl_ctx_destroy, no_status), WHY(tl_kernel_destroy, no_status), WHY(tl_program_destroy, no_status),
    WHY(tl_free_host, no_status),
    WHY(tl_use_fast_math, "documented to have no errors (a NULL or failed kernel is ignored)"),
    WHY(tl_use_pingpong, "documented to have no errors; tl_compile checks its requirements"),
    WHY(tl_ctx_error, query), WHY(tl_ctx_has_device, query), WHY(tl_ctx_target, query),
    WHY(tl_kernel_status, query), WHY(tl_kernel_error, query), WHY(tl_program_source, query),
    WHY(tl_program_cubin, query),
    WHY(tl_random_host, "takes no context to hold a message (documented)"),
    WHY(tl_i32, "fails only when out of memory (test_alloc_fail covers that)"),
    WHY(tl_int, "fails only when out of memory (test_alloc_fail covers that)"),
    WHY(tl_f32, "fails only when out of memory (test_alloc_fail covers that)"),
    PMSG(tl_ctx_create), PMSG(tl_runtime_versions),
    P(tl_ctx_get_device_info), P(tl_malloc), P(tl_free), P(tl_memcpy_htod), P(tl_memcpy_dtoh), P(tl_memcpy_dtod),
    P(tl_memset_u8), P(tl_synchronize), P(tl_random_fill),
    P(tl_kernel_new), P(tl_dim), P(tl_param_scalar), P(tl_param_tensor), P(tl_param_tensor_array), P(tl_grid),
    P(tl_block_idx),
    P(tl_float),
    P(tl_add), P(tl_sub), P(tl_mul), P(tl_div), P(tl_mod), P(tl_ceildiv), P(tl_max), P(tl_min), P(tl_lt),
    P(tl_le), P(tl_gt), P(tl_ge), P(tl_eq), P(tl_ne), P(tl_and), P(tl_or), P(tl_neg), P(tl_abs), P(tl_not),
    P(tl_exp), P(tl_exp2), P(tl_log), P(tl_sqrt), P(tl_rsqrt), P(tl_tanh), P(tl_erf),
    P(tl_select), P(tl_block_value), P(tl_use_cache_policy), P(tl_cast), P(tl_load), P(tl_store), P(tl_serial), P(tl_parallel), P(tl_parallel1),
    P(tl_if), P(tl_else), P(tl_end), P(tl_alloc_shared), P(tl_alloc_fragment), P(tl_alloc_reducer), P(tl_finalize_reducer), P(tl_alloc_local),
    P(tl_tile_n), P(tl_copy), P(tl_clear), P(tl_fill), P(tl_pipelined), P(tl_gemm), P(tl_use_swizzle),
    P(tl_compile), P(tl_kernel_source), P(tl_kernel_ptx), P(tl_kernel_ptxas_report), P(tl_interpret),
    PPROG(tl_program_get_info), PPROG(tl_program_param), PPROG(tl_launch), PPROG(tl_program_interpret),
    P(tl_time), P(tl_time_interleaved), PPROG(tl_time_launch), P(tl_check), PPROG(tl_program_check),
    P(tl_cache_get_stats), PMSG(tl_cache_clear),
    P(tl_op_vadd), P(tl_op_vadd_program), P(tl_op_gemm), P(tl_op_gemm_schedule), P(tl_op_gemm_program),
    P(tl_op_gemm_build), P(tl_baseline_gemm), P(tl_op_gemm_ex), P(tl_op_gemm_ex_program), P(tl_op_gemm_ex_build),
    P(tl_baseline_gemm_ex), WHY(tl_gemm_default_args, "returns a value; it cannot fail"), P(tl_op_bias_act), P(tl_op_bias_act_build), P(tl_op_build),
    P(tl_reduce_max), P(tl_reduce_sum), P(tl_reduce_min), P(tl_reduce_absmax), P(tl_name), P(tl_kernel_dump),
    P(tl_use_min_blocks), P(tl_cluster), P(tl_cluster_reduce_max), P(tl_cluster_reduce_sum), P(tl_cluster_reduce_min),
    P(tl_cluster_reduce_absmax), P(tl_cluster_reduce_sum_to),
    P(tl_kernel_lower_dump), P(tl_kernel_reproducer),
    P(tl_op_softmax), P(tl_op_softmax_schedule), P(tl_op_softmax_program), P(tl_op_softmax_build),
    P(tl_op_rmsnorm), P(tl_op_rmsnorm_schedule), P(tl_op_rmsnorm_program), P(tl_op_rmsnorm_build),
    P(tl_op_flash_attn), P(tl_op_flash_attn_schedule), P(tl_op_flash_attn_program), P(tl_op_flash_attn_build),
    P(tl_op_flash_attn_combine_build),
    P(tl_compile_many), P(tl_autotune), P(tl_tune_db_list), PMSG(tl_tune_db_clear),
    WHY(tl_use_warp_specialize, "documented to have no errors; tl_compile checks its requirements"),
    WHY(tl_use_persistent, "documented to have no errors; tl_compile checks its requirements"),
    WHY(tl_use_stream_k, "documented to have no errors; tl_compile checks its requirements"),
    WHY(tl_gemm_candidates, "returns a count: a list of schedules, d only filters it"),
    WHY(tl_gemm_schedule_to_config, nothing_fails), WHY(tl_gemm_schedule_from_config, nothing_fails),
    WHY(tl_tune_config_text, nothing_fails), WHY(tl_tune_outcome_name, nothing_fails),
    WHY(tl_tune_progress_stderr, no_status), WHY(tl_tune_result_destroy, no_status),
    WHY(tl_tune_db_path, query),
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

/* The public functions of the header: every `TL_API ... tl_name(`. */
static int header_functions(char names[][64], int max)
{
    char *h = test_read_file("include/tilec.h");
    if (!h)
        fail_msg("include/tilec.h not found: run from the repository root");
    int n = 0;
    for (char *p = strstr(h, "TL_API "); p; p = strstr(p + 1, "TL_API ")) {
        char *paren = strchr(p, '(');
        if (!paren || paren - p > 200)
            continue;
        char *end = paren;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        char *start = end;
        while (start > p && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
            start--;
        if (strncmp(start, "tl_", 3) != 0 || n >= max)
            continue;
        snprintf(names[n++], 64, "%.*s", (int)(end - start), start);
    }
    free(h);
    return n;
}

static const api_entry *entry_of(const char *name)
{
    for (size_t i = 0; i < N_ENTRIES; i++)
        if (strcmp(entries[i].name, name) == 0)
            return &entries[i];
    return NULL;
}

/* Leaves a message no probe leaves, so a probe that leaves none is seen. */
static void mark(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "marker");
    tl_end(k);
    tl_kernel_destroy(k);
    snprintf(outmsg, sizeof outmsg, "(no message)");
}

/* Runs e's probe; "" when the call failed with a message that starts with
 * its name, else what is wrong. */
static const char *check_entry(const api_entry *e, char *why, size_t n)
{
    mark();
    tl_status st = e->probe();
    const char *msg = e->via_outmsg ? outmsg : tl_ctx_error(ctx);
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s: ", e->name);
    if (st == TL_OK)
        snprintf(why, n, "%s: the probe did not fail", e->name);
    else if (strncmp(msg, prefix, strlen(prefix)) != 0)
        snprintf(why, n, "%s (%s): message '%.300s'", e->name, tl_status_name(st), msg);
    else
        why[0] = '\0';
    return why;
}

static void test_every_public_function(void **state)
{
    (void)state;
    static char names[256][64];
    int n = header_functions(names, 256);
    assert_true(n > 100);
    int bad = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        const api_entry *e = entry_of(names[i]);
        char why[512];
        if (!e) {
            printf("  %s is in tilec.h but not in test_api_messages.c: add a probe (or say why it has none)\n",
                   names[i]);
            bad++;
        } else if (!e->probe) {
            continue;
        } else if (e->needs_program && !prog) {
            skipped++;
        } else if (check_entry(e, why, sizeof why)[0]) {
            printf("  %s\n", why);
            bad++;
        }
    }
    if (skipped)
        printf("  %d calls on a compiled program not probed: NVRTC is missing\n", skipped);
    if (bad)
        fail_msg("%d public functions fail without a message naming them (listed above)", bad);
}

/* Every entry names a function of the header: none is stale. */
static void test_no_stale_entries(void **state)
{
    (void)state;
    static char names[256][64];
    int n = header_functions(names, 256);
    for (size_t i = 0; i < N_ENTRIES; i++) {
        bool found = false;
        for (int j = 0; j < n && !found; j++)
            found = strcmp(names[j], entries[i].name) == 0;
        if (!found)
            fail_msg("%s has an entry but is not in tilec.h", entries[i].name);
    }
}

/* NVRTC failures of tl_compile name tl_compile (they named nothing): here
 * NVRTC cannot be found, in a fresh process (this program run with
 * --nvrtc-missing: the loader looks once per process) whose TILEC_NVRTC
 * points nowhere. */
static const char *self_path;

static int nvrtc_missing_child(void)
{
    tl_ctx *c = test_offline_ctx("sm_90a");
    tl_kernel *k = tl_kernel_new(c, "k");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, a, &i, tl_f32(k, 1));
    tl_end(k);
    tl_program *p = NULL;
    tl_status st = tl_compile(k, NULL, &p);
    int ok = st == TL_ERR_NO_NVRTC && strncmp(tl_ctx_error(c), "tl_compile: ", 12) == 0;
    if (!ok)
        fprintf(stderr, "tl_compile gave %s: %s\n", tl_status_name(st), tl_ctx_error(c));
    char *ptx = NULL;
    st = tl_kernel_ptx(k, NULL, &ptx);
    if (st != TL_ERR_NO_NVRTC || strncmp(tl_ctx_error(c), "tl_kernel_ptx: ", 15) != 0) {
        fprintf(stderr, "tl_kernel_ptx gave %s: %s\n", tl_status_name(st), tl_ctx_error(c));
        ok = 0;
    }
    char *report = NULL;
    st = tl_kernel_ptxas_report(k, NULL, &report);
    if (st != TL_ERR_NO_NVRTC || report || strncmp(tl_ctx_error(c), "tl_kernel_ptxas_report: ", 24) != 0) {
        fprintf(stderr, "tl_kernel_ptxas_report gave %s: %s\n", tl_status_name(st), tl_ctx_error(c));
        ok = 0;
    }
    tl_kernel_destroy(k);
    tl_ctx_destroy(c);
    return ok ? 0 : 1;
}

static void test_compile_names_nvrtc_failures(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TILEC_NVRTC", "/nonexistent/libnvrtc.so", 1);
        execl(self_path, self_path, "--nvrtc-missing", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static int setup(void **state)
{
    offline_setup(state);
    tl_kernel *k = tl_kernel_new(ctx, "good");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 64)), NONE, NONE, 64);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 64)), tl_parallel1(k, 64));
    tl_store(k, a, &i, tl_f32(k, 2));
    tl_end(k);
    good = k;
    if (tl_compile(good, NULL, &prog) != TL_OK)
        prog = NULL;
    return 0;
}

static int teardown(void **state)
{
    tl_program_destroy(prog);
    tl_kernel_destroy(good);
    return ctx_teardown(state);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc > 1 && strcmp(argv[1], "--nvrtc-missing") == 0)
        return nvrtc_missing_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_public_function),
        cmocka_unit_test(test_no_stale_entries),
        cmocka_unit_test(test_compile_names_nvrtc_failures),
    };
    return cmocka_run_group_tests_name("api_messages", tests, setup, teardown);
}
