/* test_alloc_fail.c - fails every allocation of a build + emit + dump +
 * interpret + compile scenario in turn: allocation 0 in the first run, 1
 * in the second, ... until a run makes no more allocations than the failure
 * point. Two scenarios: the kernel zoo (and the cache and NVRTC), and the
 * prebuilt ops' heavy lowerings (persistent and stream-K GEMM,
 * matrix-vector, 8-bit GEMM, FlashAttention, a softmax ring). Each run must end either with TL_OK and exactly the results of a
 * run without failures (an allocation failure absorbed, e.g. by the cache,
 * must not change anything), or with TL_ERR_OUT_OF_MEMORY and a message
 * that names the call and says memory ran out; and it must free all it
 * allocated (counted here; `make asan` adds LeakSanitizer).
 *
 * How: this program is linked with -Wl,--wrap=malloc,calloc,realloc,free
 * (see the Makefile), so every allocation the library (libtilec.a, linked
 * into this program) makes goes through the wrappers below. The library
 * is not changed for the test. Allocations inside other shared libraries
 * (libc's own, NVRTC's) are not counted: their failures are theirs. */
#include "fixture.h"

#include "kernels.h"

#include <stdbool.h>

/* ---------------------------------------------------------- the wrappers */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

/* volatile: the compiler takes malloc for the builtin that touches no
 * global of ours, and would drop a store to `armed` around a call. */
static volatile long counted;      /* allocations since the run began   */
static volatile long fail_at = -1; /* the one that fails (-1: none)     */
static volatile long live;         /* allocated and not yet freed       */
static volatile bool armed;        /* counting and failing (the scenario) */

static bool fail_now(void)
{
    if (!armed)
        return false;
    return counted++ == fail_at;
}

void *__wrap_malloc(size_t n)
{
    void *p = fail_now() ? NULL : __real_malloc(n);
    live += p != NULL;
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = fail_now() ? NULL : __real_calloc(n, size);
    live += p != NULL;
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL; /* the old block stays valid, as realloc promises */
    void *q = __real_realloc(p, n);
    live += p == NULL && q != NULL;
    return q;
}

void __wrap_free(void *p)
{
    live -= p != NULL;
    __real_free(p);
}

/* ---------------------------------------------------------- the scenario */

/* What a run produces, compared with the run without failures. */
typedef struct results {
    char *src[24];         /* generated sources, in order */
    int nsrc;
    float vadd[100];       /* interpreted outputs */
    float rowsum[7];
    float gemm_c[64 * 64];
    size_t cubin_len;
    char msg[512];         /* the failure's message */
} results;

static void results_free(results *r)
{
    for (int i = 0; i < r->nsrc; i++)
        free(r->src[i]);
    r->nsrc = 0;
}

/* Keeps a copy of src, made outside the count. */
static void keep_copy(results *r, const char *src)
{
    size_t n = strlen(src) + 1;
    bool was = armed;
    armed = false;
    char *copy = malloc(n);
    armed = was;
    memcpy(copy, src, n);
    r->src[r->nsrc++] = copy;
}

/* Keeps a copy of a source the library handed over, and frees it. */
static void keep_source(results *r, char *src)
{
    keep_copy(r, src);
    tl_free_host(src);
}

static tl_status emit_both(tl_kernel *k, results *r)
{
    const char *targets[2] = {"sm_90a", "sm_80"};
    for (int t = 0; t < 2; t++) {
        char *src = NULL;
        tl_status st = tl_kernel_source(k, targets[t], &src);
        if (st != TL_OK)
            return st;
        keep_source(r, src);
    }
    return TL_OK;
}

/* The graph dump and the lowering dump (every pass) of k. */
static tl_status dumps(tl_kernel *k, results *r)
{
    char *text = NULL;
    tl_status st = tl_kernel_dump(k, &text);
    if (st == TL_OK)
        keep_source(r, text);
    text = NULL;
    if (st == TL_OK)
        st = tl_kernel_lower_dump(k, "sm_90a", "all", &text);
    if (st == TL_OK)
        keep_source(r, text);
    return st;
}

static tl_status interpret_vadd(tl_kernel *k, results *r)
{
    float a[100], b[100];
    for (int i = 0; i < 100; i++)
        a[i] = (float)i, b[i] = 0.5f * (float)i, r->vadd[i] = -1;
    tl_arg args[] = {tl_arg_int(100), tl_arg_hptr(a), tl_arg_hptr(b), tl_arg_hptr(r->vadd)};
    return tl_interpret(k, 4, args);
}

static tl_status interpret_rowsum(tl_kernel *k, results *r)
{
    float x[7 * 9];
    for (int i = 0; i < 7 * 9; i++)
        x[i] = (float)(i % 11) - 3.0f;
    tl_arg args[] = {tl_arg_int(7), tl_arg_int(9), tl_arg_hptr(x), tl_arg_hptr(r->rowsum)};
    return tl_interpret(k, 4, args);
}

static tl_status interpret_gemm(tl_kernel *k, results *r)
{
    static uint16_t a[64 * 32], b[32 * 64];
    for (int i = 0; i < 64 * 32; i++) {
        a[i] = tl_f32_to_bf16((float)(i % 7) - 3);
        b[i] = tl_f32_to_bf16((float)(i % 5) - 2);
    }
    tl_arg args[] = {tl_arg_int(64), tl_arg_int(64), tl_arg_int(32), tl_arg_hptr(a), tl_arg_hptr(b),
                     tl_arg_hptr(r->gemm_c)};
    return tl_interpret(k, 6, args);
}

/* A GEMM small enough to interpret quickly: 64 x 64 x 32 blocks, 128
 * threads, f32 output. */
static tl_status build_gemm(tl_ctx *c, tl_kernel **k)
{
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 32, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 64, .block_k = 32, .stages = 2, .threads = 128};
    return tl_op_gemm_build(c, &d, k);
}

/* The prebuilt ops' heavier lowerings, built and emitted (no NVRTC): the
 * GEMM in persistent CTAs and stream-K units (a producer warpgroup, the
 * staging tile's TMA stores, the partial sums' fixup), decode's
 * matrix-vector kernel, an 8-bit GEMM (sm_90a only), FlashAttention
 * (consumer groups taking turns, K and V on rings of their own; and the
 * same in persistent CTAs taking blocks from a counter, on running sums)
 * and the softmax of long rows (a ring of shared tiles). */
static tl_status scenario_ops(tl_ctx *c, results *r, bool nvrtc)
{
    (void)nvrtc;
    tl_kernel *ks[6] = {NULL};
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH,
                      .schedule = {.block_m = 128, .block_n = 128, .block_k = 64, .stages = 2, .threads = 256,
                                   .persistent = 1, .stream_k = 1}};
    tl_status st = tl_op_gemm_build(c, &d, &ks[0]);
    tl_gemm_desc v = {.m = 1, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = 1,
                      .schedule = {.gemv = 1}};
    if (st == TL_OK)
        st = tl_op_gemm_build(c, &v, &ks[1]);
    /* two stages: K and V on rings of their own on sm_90a (pipeline_ws.c); 64-key tiles so that
     * the same kernel fits sm_80's shared memory */
    tl_flash_attn_desc fa = {.batch = 1, .heads = 2, .kv_heads = 1, .seq_q = 100, .seq_kv = 100, .head_dim = 128,
                             .dtype = TL_BF16, .causal = 1,
                             .schedule = {.block_m = 128, .block_n = 64, .stages = 2, .threads = 256,
                                          .warp_specialize = 1, .pingpong = 1}};
    if (st == TL_OK)
        st = tl_op_flash_attn_build(c, &fa, &ks[2]);
    fa.schedule.persistent = 2; /* persistent CTAs taking blocks from a counter, on running sums */
    if (st == TL_OK)
        st = tl_op_flash_attn_build(c, &fa, &ks[5]);
    tl_softmax_desc sm = {.rows = 8, .cols = 8192, .in_dtype = TL_F16, .out_dtype = TL_F16,
                          .schedule = {.stages = 3}}; /* 48 KiB of ring: sm_80 holds it too */
    if (st == TL_OK)
        st = tl_op_softmax_build(c, &sm, &ks[3]);
    tl_gemm_desc f8 = {.m = 64, .n = 64, .k = 128, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1};
    if (st == TL_OK)
        st = tl_op_gemm_build(c, &f8, &ks[4]);
    for (int i = 0; i < 6 && st == TL_OK; i++)
        if (i != 4) /* (8-bit: below) */
            st = emit_both(ks[i], r);
    if (st == TL_OK) { /* 8-bit inputs: wgmma's only */
        char *src = NULL;
        st = tl_kernel_source(ks[4], "sm_90a", &src);
        if (st == TL_OK)
            keep_source(r, src);
    }
    for (int i = 0; i < 6; i++)
        tl_kernel_destroy(ks[i]);
    return st;
}

/* The compiles: the vadd op's program (a disk-cache hit: the directory
 * holds it before the runs start), vadd again (a memory hit), and last, so
 * that few failure points re-run NVRTC, vadd bypassing the cache (NVRTC). */
static tl_status compiles(tl_ctx *c, tl_kernel *vadd, results *r)
{
    const tl_program *op;
    tl_vadd_desc d = {.dtype = TL_F32, .n = 1};
    tl_status st = tl_op_vadd_program(c, &d, &op);
    tl_compile_options opts[2] = {{.no_cache = 0}, {.no_cache = 1}};
    for (int i = 0; i < 2 && st == TL_OK; i++) {
        tl_program *p = NULL;
        st = tl_compile(vadd, &opts[i], &p);
        if (st == TL_OK) {
            tl_program_cubin(p, &r->cubin_len);
            keep_copy(r, tl_program_source(p));
        }
        tl_program_destroy(p);
    }
    return st;
}

/* Builds, emits, dumps and interprets the kernels of the zoo, then
 * compiles. */
static tl_status scenario_kernels(tl_ctx *c, results *r, bool nvrtc)
{
    tl_kernel *vadd = NULL, *rowsum = zoo_rowsum(c), *mixed = zoo_mixed(c), *gemm = NULL;
    tl_status st = tl_op_build(c, "vadd", TL_F32, &vadd);
    if (st == TL_OK)
        st = build_gemm(c, &gemm);
    tl_kernel *ks[4] = {vadd, rowsum, mixed, gemm};
    for (int i = 0; i < 4 && st == TL_OK; i++)
        st = ks[i] ? emit_both(ks[i], r) : TL_ERR_OUT_OF_MEMORY; /* tl_kernel_new failed */
    if (st == TL_OK)
        st = dumps(rowsum, r);
    if (st == TL_OK)
        st = interpret_vadd(vadd, r);
    if (st == TL_OK)
        st = interpret_rowsum(rowsum, r);
    if (st == TL_OK)
        st = interpret_gemm(gemm, r);
    if (st == TL_OK && nvrtc)
        st = compiles(c, vadd, r);
    for (int i = 0; i < 4; i++)
        tl_kernel_destroy(ks[i]);
    return st;
}

static char cache_dir[64];

typedef tl_status (*scenario_fn)(tl_ctx *c, results *r, bool nvrtc);

static tl_status scenario(scenario_fn body, results *r, bool nvrtc)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.cache_dir = cache_dir;
    tl_ctx *c = NULL;
    tl_status st = tl_ctx_create(&o, &c, r->msg, sizeof r->msg);
    if (st != TL_OK)
        return st;
    st = body(c, r, nvrtc);
    if (st != TL_OK)
        snprintf(r->msg, sizeof r->msg, "%s", tl_ctx_error(c));
    tl_ctx_destroy(c);
    return st;
}

/* ------------------------------------------------------------- checking */

/* NULL when a and b agree, else what differs. */
static const char *difference(const results *a, const results *b)
{
    if (a->nsrc != b->nsrc)
        return "the number of sources";
    for (int i = 0; i < a->nsrc; i++)
        if (strcmp(a->src[i], b->src[i]) != 0)
            return "a generated source";
    if (a->cubin_len != b->cubin_len)
        return "the cubin";
    if (memcmp(a->vadd, b->vadd, sizeof a->vadd) || memcmp(a->rowsum, b->rowsum, sizeof a->rowsum) ||
        memcmp(a->gemm_c, b->gemm_c, sizeof a->gemm_c))
        return "an interpreted result";
    return NULL;
}

/* An out-of-memory message: names a call, says what ran out. */
static bool oom_message_ok(const char *msg)
{
    return strncmp(msg, "tl_", 3) == 0 && strstr(msg, "out of") && strstr(msg, "memory");
}

static void every_allocation_fails_in_turn(scenario_fn body)
{
    bool nvrtc = tl_runtime_versions(NULL, NULL, NULL, NULL, 0) != TL_ERR_NO_NVRTC;
    if (!nvrtc)
        printf("  note: NVRTC is missing: the compiles are left out of the scenario\n");
    static results ref, run;
    memset(&ref, 0, sizeof ref);
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tilec-allocfail-XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    assert_status(scenario(body, &ref, nvrtc), TL_OK); /* fills the disk cache */
    results_free(&ref);
    long before = live;
    armed = true;
    counted = 0;
    fail_at = -1;
    assert_status(scenario(body, &ref, nvrtc), TL_OK);
    armed = false;
    long total = counted, absorbed = 0, problems = 0;
    assert_int_equal(live - before, ref.nsrc); /* only our copies remain */
    for (fail_at = 0; fail_at < total; fail_at++) {
        memset(&run, 0, sizeof run);
        before = live;
        counted = 0;
        armed = true;
        tl_status st = scenario(body, &run, nvrtc);
        armed = false;
        char what[700] = "";
        const char *diff = st == TL_OK ? difference(&run, &ref) : NULL;
        if (diff)
            snprintf(what, sizeof what, "TL_OK, but %s differs", diff);
        else if (st != TL_OK && (st != TL_ERR_OUT_OF_MEMORY || !oom_message_ok(run.msg)))
            snprintf(what, sizeof what, "%s, '%.600s'", tl_status_name(st), run.msg);
        else if (live - before != run.nsrc) /* our copies of the sources are all that may remain */
            snprintf(what, sizeof what, "%ld blocks leaked", live - before - run.nsrc);
        absorbed += st == TL_OK;
        if (what[0] && problems++ < 10)
            printf("  allocation %ld of %ld failed: %s\n", fail_at, total, what);
        results_free(&run);
    }
    results_free(&ref);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
    if (problems)
        fail_msg("%ld of %ld allocation failures were mishandled (the first ones above)", problems, total);
    printf("  %ld allocations failed in turn: %ld absorbed (TL_OK, same results), the rest TL_ERR_OUT_OF_MEMORY "
           "with a message and no leak\n", total, absorbed);
}

static void test_every_allocation_fails_in_turn(void **state)
{
    (void)state;
    every_allocation_fails_in_turn(scenario_kernels);
}

static void test_every_allocation_fails_in_turn_ops(void **state)
{
    (void)state;
    every_allocation_fails_in_turn(scenario_ops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_in_turn),
        cmocka_unit_test(test_every_allocation_fails_in_turn_ops),
    };
    return cmocka_run_group_tests_name("alloc_fail", tests, NULL, NULL);
}
