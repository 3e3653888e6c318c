/* test_threads.c - one context, several threads: programs interpreted and
 * launched at once (the header promises programs may be used from several
 * threads; their failures used to race on the context's one message
 * buffer), each thread's failure message its own, kernels built and
 * compiled at once through one cubin cache, and an op's program asked for
 * by every thread at once (compiled once). `make tsan` runs this file under
 * ThreadSanitizer, which reports the races the plain run cannot see. */
#include "fixture.h"

#include <pthread.h>

#define THREADS 6
#define ROUNDS 20

/* out[i] = a[i] * scale for i < N, 64 elements per block. */
static tl_kernel *scale_kernel(tl_ctx *c, const char *name)
{
    tl_kernel *k = tl_kernel_new(c, name);
    tl_expr n = tl_dim(k, "N"), scale = tl_param_scalar(k, "scale", TL_F32);
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_buf out = tl_param_tensor(k, "OUT", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 64)), TL_NONE_EXPR, TL_NONE_EXPR, 64);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 64)), tl_parallel1(k, 64));
    tl_store(k, out, &i, tl_mul(k, tl_load(k, a, &i), scale));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

typedef struct worker {
    pthread_t thread;
    int id;
    const tl_program *prog;
    tl_kernel *kernel;
    int errors;          /* what went wrong, counted (asserts are not
                            thread-safe in cmocka) */
    char why[256];
} worker;

static void note(worker *w, const char *what, const char *detail)
{
    if (!w->errors++)
        snprintf(w->why, sizeof w->why, "thread %d: %s: %s", w->id, what, detail);
}

static void run_workers(worker *w, void *(*fn)(void *))
{
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        assert_int_equal(pthread_create(&w[i].thread, NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].thread, NULL);
    for (int i = 0; i < THREADS; i++)
        if (w[i].errors)
            fail_msg("%s", w[i].why);
}

/* Interprets correctly, then fails in a way of its own (an argument count
 * that names the thread) and finds exactly its own message. */
static void *interpret_worker(void *arg)
{
    worker *w = arg;
    enum { N = 200 };
    float a[N], out[N];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            a[i] = (float)(i + w->id);
        tl_arg args[] = {tl_arg_int(N), tl_arg_float(w->id + 1), tl_arg_hptr(a), tl_arg_hptr(out)};
        tl_status st = w->prog ? tl_program_interpret(w->prog, 4, args) : tl_interpret(w->kernel, 4, args);
        if (st != TL_OK)
            note(w, "interpret", tl_ctx_error(ctx));
        for (int i = 0; i < N; i++)
            if (out[i] != (float)(i + w->id) * (float)(w->id + 1))
                note(w, "interpret", "wrong value");
        int wrong = 10 + w->id;
        st = w->prog ? tl_program_interpret(w->prog, wrong, args) : tl_interpret(w->kernel, wrong, args);
        char want[64];
        snprintf(want, sizeof want, "takes 4 arguments, got %d", wrong);
        if (st != TL_ERR_LAUNCH_ARGS || !strstr(tl_ctx_error(ctx), want))
            note(w, "own message", tl_ctx_error(ctx));
    }
    return NULL;
}

static void test_interpret_one_program(void **state)
{
    (void)state;
    tl_kernel *k = scale_kernel(ctx, "scale");
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++)
        w[i].kernel = k;
    run_workers(w, interpret_worker);
    tl_kernel_destroy(k);
}

static tl_program *compile_or_skip(tl_kernel *k)
{
    tl_program *p = NULL;
    tl_status st = tl_compile(k, NULL, &p);
    if (st == TL_ERR_NO_NVRTC) {
        printf("  skip: NVRTC is missing: no program to share\n");
        skip();
    }
    if (st != TL_OK)
        fail_msg("tl_compile: %s", tl_ctx_error(ctx));
    return p;
}

static void test_interpret_compiled_program(void **state)
{
    (void)state;
    tl_kernel *k = scale_kernel(ctx, "scale");
    tl_program *p = compile_or_skip(k);
    tl_kernel_destroy(k);
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++)
        w[i].prog = p;
    run_workers(w, interpret_worker);
    tl_program_destroy(p);
}

/* Launches of one program from every thread: offline they fail (no
 * device), each with its own message, as bad arguments do. */
static void *launch_worker(void *arg)
{
    worker *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        tl_arg args[] = {tl_arg_int(64), tl_arg_float(1), tl_arg_dptr(0x1000), tl_arg_dptr(0x2000)};
        tl_status st = tl_launch(w->prog, NULL, 4, args);
        if (st != TL_ERR_NO_DEVICE || !strstr(tl_ctx_error(ctx), "not loaded"))
            note(w, "launch offline", tl_ctx_error(ctx));
        args[2] = tl_arg_dptr(0x1001 + (uint64_t)w->id * 0x100);
        char want[64];
        snprintf(want, sizeof want, "0x%llx", (unsigned long long)args[2].v.dptr);
        st = tl_launch(w->prog, NULL, 4, args);
        if (st != TL_ERR_LAUNCH_ARGS || !strstr(tl_ctx_error(ctx), want))
            note(w, "own launch message", tl_ctx_error(ctx));
    }
    return NULL;
}

static void test_launch_one_program(void **state)
{
    (void)state;
    tl_kernel *k = scale_kernel(ctx, "scale");
    tl_program *p = compile_or_skip(k);
    tl_kernel_destroy(k);
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++)
        w[i].prog = p;
    run_workers(w, launch_worker);
    tl_program_destroy(p);
}

/* Every thread builds and compiles kernels of its own in one context whose
 * cubin cache is on disk: the cache and the kernel tags are shared. */
static tl_ctx *disk_ctx;

static void *compile_worker(void *arg)
{
    worker *w = arg;
    for (int r = 0; r < 3; r++) {
        char name[32];
        snprintf(name, sizeof name, "k%d_%d", w->id, r % 2); /* repeats hit the cache */
        tl_kernel *k = scale_kernel(disk_ctx, name);
        tl_program *p = NULL;
        if (tl_compile(k, NULL, &p) != TL_OK)
            note(w, "compile", tl_ctx_error(disk_ctx));
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    return NULL;
}

static void test_compile_in_parallel(void **state)
{
    (void)state;
    if (tl_runtime_versions(NULL, NULL, NULL, NULL, 0) == TL_ERR_NO_NVRTC) {
        printf("  skip: NVRTC is missing\n");
        skip();
    }
    char dir[] = "/tmp/tilec-threads-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.cache_dir = dir;
    assert_status(tl_ctx_create(&o, &disk_ctx, NULL, 0), TL_OK);
    worker w[THREADS];
    memset(w, 0, sizeof w);
    run_workers(w, compile_worker);
    tl_cache_stats s;
    assert_status(tl_cache_get_stats(disk_ctx, &s), TL_OK);
    assert_int_equal(s.disk_entries, 2 * THREADS);
    assert_int_equal(tl_cache_clear(disk_ctx), TL_OK);
    tl_ctx_destroy(disk_ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Every thread asks for the vadd program at once: one compile, one
 * program. */
static void *op_worker(void *arg)
{
    worker *w = arg;
    tl_vadd_desc d = {.dtype = TL_F16, .n = 10};
    if (tl_op_vadd_program(ctx, &d, &w->prog) != TL_OK)
        note(w, "tl_op_vadd_program", tl_ctx_error(ctx));
    return NULL;
}

static void test_op_program_once(void **state)
{
    (void)state;
    if (tl_runtime_versions(NULL, NULL, NULL, NULL, 0) == TL_ERR_NO_NVRTC) {
        printf("  skip: NVRTC is missing\n");
        skip();
    }
    worker w[THREADS];
    memset(w, 0, sizeof w);
    run_workers(w, op_worker);
    for (int i = 1; i < THREADS; i++)
        assert_ptr_equal(w[i].prog, w[0].prog);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpret_one_program),
        cmocka_unit_test(test_interpret_compiled_program),
        cmocka_unit_test(test_launch_one_program),
        cmocka_unit_test(test_compile_in_parallel),
        cmocka_unit_test(test_op_program_once),
    };
    return cmocka_run_group_tests_name("threads", tests, offline_setup, ctx_teardown);
}
