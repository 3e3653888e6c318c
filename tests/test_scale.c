/* test_scale.c - kernels far larger than anyone writes by hand, through
 * every stage that must stay linear in their size: a chain of 100,000
 * expression nodes (it overflowed the stack in the builder's checks, the
 * interpreter and the emitter, and took minutes and gigabytes to emit
 * when each level copied the text below it), shared subexpressions
 * doubled 26 times (x = x + x: 2^26 paths, seconds to check, lower and
 * interpret when every use was walked again), a grid expression doubled
 * 22 times (25 MB of source when the emitter printed it as a tree),
 * 100,000 statements, and loops nested as deep as scopes go (the barrier
 * pass's walks were exponential in the depth). Each case runs each stage under a time limit, so a
 * stage that goes exponential or recursive fails here rather than hanging,
 * and bounds the size of its source, which grows with the size of the
 * kernel's DAG and not with the paths through it; the time and the peak
 * memory of each stage are printed.
 *
 * Issue 12 item 10's figures are checked on the 100,000 statements:
 * emitted (tl_kernel_source) in under 1 s and 200 MB on a plain build.
 * NVRTC compiles the generated code of smaller instances of each shape
 * (the full ones take NVRTC minutes), so temporaries are valid C++ too. */
#include "fixture.h"

#include "kernel.h"

#include <malloc.h>
#include <stdlib.h>
#include <time.h>

#define CHAIN 100000
#define DOUBLINGS 26
#define GRID_DOUBLINGS 22
#define STATEMENTS 100000
#define COMPILED_CHAIN 2000 /* what NVRTC compiles in about a second */

typedef struct scale_case {
    const char *name;
    tl_kernel *(*build)(int size);
    int size;           /* of the chain, the doublings, the statements */
    int64_t n;          /* the N to interpret with */
    double want;        /* OUT[0] after interpretation */
    size_t max_source;  /* bytes of generated source */
    bool compile;       /* NVRTC compiles it (with NVRTC present) */
    tl_kernel *k;       /* between the stages */
} scale_case;

/* A kernel "name" with N, X[N] and OUT[N] (f64), one block of 32 threads,
 * and a parallel loop whose variable is *i (closed by the caller). */
static tl_kernel *elementwise(const char *name, tl_buf *x, tl_buf *out, tl_expr *i)
{
    tl_kernel *k = tl_kernel_new(ctx, name);
    tl_expr n = tl_dim(k, "N");
    *x = tl_param_tensor(k, "X", TL_F64, 1, &n, NULL);
    *out = tl_param_tensor(k, "OUT", TL_F64, 1, &n, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    *i = tl_parallel1(k, 32);
    return k;
}

/* OUT[i] = a chain of `size` additions and multiplications on X[i] (exact
 * in f64: adds of 1 and multiplies by 1). */
static tl_kernel *build_chain(int size)
{
    tl_buf x, out;
    tl_expr i;
    tl_kernel *k = elementwise("chain", &x, &out, &i);
    tl_expr v = tl_load(k, x, &i), one = tl_float(k, 1.0, TL_F64);
    for (int s = 0; s < size; s++)
        v = s % 2 ? tl_mul(k, v, one) : tl_add(k, v, one);
    tl_store(k, out, &i, v);
    tl_end(k);
    return k;
}

/* OUT[i] = X[i] doubled `size` times by x = x + x, inside a parallel loop
 * (every iteration evaluates the DAG). */
static tl_kernel *build_doublings(int size)
{
    tl_buf x, out;
    tl_expr i;
    tl_kernel *k = elementwise("doublings", &x, &out, &i);
    tl_expr v = tl_load(k, x, &i);
    for (int s = 0; s < size; s++)
        v = tl_add(k, v, v);
    tl_store(k, out, &i, v);
    tl_end(k);
    return k;
}

/* The grid, a shape and a stride are host expressions: the grid doubled
 * GRID_DOUBLINGS times (g = g + g from N), the shape a chain `size` deep.
 * With N = 0 the grid is empty, but every launch evaluates them, and the
 * generated code prints them (the grid in its comment, the shape in its
 * prologue). */
static tl_kernel *build_host_exprs(int size)
{
    tl_kernel *k = tl_kernel_new(ctx, "host_exprs");
    tl_expr n = tl_dim(k, "N"), g = n, deep = n;
    for (int s = 0; s < GRID_DOUBLINGS; s++)
        g = tl_add(k, g, g);
    for (int s = 0; s < size; s++)
        deep = tl_add(k, deep, tl_int(k, s % 2));
    tl_expr one = tl_int(k, 1);
    tl_buf out = tl_param_tensor(k, "OUT", TL_F64, 1, &deep, &one);
    tl_grid(k, g, g, TL_NONE_EXPR, 32);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, out, &i, tl_float(k, 1.0, TL_F64));
    tl_end(k);
    return k;
}

/* `size` stores, one after another, each OUT[0] += 1. */
static tl_kernel *build_statements(int size)
{
    tl_kernel *k = tl_kernel_new(ctx, "statements");
    tl_expr n = tl_dim(k, "N");
    tl_buf x = tl_param_tensor(k, "X", TL_F64, 1, &n, NULL), out = tl_param_tensor(k, "OUT", TL_F64, 1, &n, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr zero = tl_int(k, 0), one = tl_float(k, 1.0, TL_F64);
    tl_store(k, out, &zero, tl_load(k, x, &zero));
    for (int s = 1; s < size; s++)
        tl_store(k, out, &zero, tl_add(k, tl_load(k, out, &zero), one));
    return k;
}

/* `size` loops of N iterations nested in one another around a shared
 * tile's round trip: OUT[i] = X[31 - i] + 1 through S, written by one
 * parallel loop and read across threads by the next (the barrier pass
 * walks each loop body twice to find what one iteration leaves behind, and
 * walked the innermost body 2^size times until it remembered the walks of
 * inner loops). */
static tl_kernel *build_nested(int size)
{
    tl_kernel *k = tl_kernel_new(ctx, "nested");
    tl_expr n = tl_dim(k, "N"), len = tl_int(k, 32);
    tl_buf x = tl_param_tensor(k, "X", TL_F64, 1, &len, NULL), out = tl_param_tensor(k, "OUT", TL_F64, 1, &len, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_buf sh = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){32});
    for (int d = 0; d < size; d++)
        tl_serial(k, n);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, sh, &i, tl_cast(k, tl_load(k, x, &i), TL_F32));
    tl_end(k);
    i = tl_parallel1(k, 32);
    tl_expr j = tl_sub(k, tl_int(k, 31), i);
    tl_store(k, out, &i, tl_add(k, tl_cast(k, tl_load(k, sh, &j), TL_F64), tl_float(k, 1.0, TL_F64)));
    tl_end(k);
    for (int d = 0; d < size; d++)
        tl_end(k);
    return k;
}

/* ---------------------------------------------------------------- stages */

static tl_status stage_build(scale_case *c)
{
    c->k = c->build(c->size);
    return tl_kernel_status(c->k);
}

static tl_status stage_verify(scale_case *c) { return tli_kernel_verify(c->k, "test_scale"); }

static tl_status stage_interpret(scale_case *c)
{
    enum { BUF = 64 };
    double x[BUF], out[BUF];
    for (int i = 0; i < BUF; i++)
        x[i] = 3.0, out[i] = -1.0;
    tl_arg args[] = {tl_arg_int(c->n), tl_arg_hptr(x), tl_arg_hptr(out)};
    bool has_x = strcmp(c->name, "host_exprs") != 0;
    tl_status st = has_x ? tl_interpret(c->k, 3, args) : tl_interpret(c->k, 2, (tl_arg[]){args[0], args[2]});
    if (st == TL_OK && out[0] != c->want)
        fail_msg("%s: OUT[0] = %g, wanted %g", c->name, out[0], c->want);
    return st;
}

static tl_status stage_emit(scale_case *c)
{
    char *src = NULL;
    tl_status st = tl_kernel_source(c->k, NULL, &src);
    size_t len = src ? strlen(src) : 0;
    tl_free_host(src);
    if (st == TL_OK)
        printf("  %-10s source     %zu bytes\n", c->name, len);
    if (len > c->max_source)
        fail_msg("%s: %zu bytes of source (at most %zu): the emitter printed a shared expression more than once",
                 c->name, len, c->max_source);
    return st;
}

static tl_status stage_compile(scale_case *c)
{
    if (!c->compile || tl_runtime_versions(NULL, NULL, NULL, NULL, 0) == TL_ERR_NO_NVRTC)
        return TL_OK;
    tl_program *p = NULL;
    tl_compile_options o = {.no_cache = 1};
    tl_status st = tl_compile(c->k, &o, &p);
    tl_program_destroy(p);
    return st;
}

typedef struct stage {
    const char *name;
    tl_status (*run)(scale_case *c);
    double limit_s; /* generous (five times more under the sanitizers):
                       linear work takes a fraction of it, exponential work
                       far more (emitting the doublings took 6 s) */
} stage;

static const stage stages[] = {
    {"build", stage_build, 30},     {"verify", stage_verify, 5}, {"interpret", stage_interpret, 30},
    {"emit", stage_emit, 2},        {"compile", stage_compile, 60},
};

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A figure of /proc/self/status in MiB (Linux; 0 elsewhere): VmRSS, the
 * resident memory, or VmHWM, its peak since the last reset_peak. */
static long status_mib(const char *key)
{
    long kib = 0;
    char line[256];
    size_t n = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kib = atol(line + n + 1);
    if (f)
        fclose(f);
    return kib / 1024;
}

/* Starts measuring a stage's memory: the resident memory now. */
static long reset_peak(void)
{
#ifdef __GLIBC__
    malloc_trim(0); /* what earlier stages freed is not this stage's */
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f); /* VmHWM = VmRSS */
        fclose(f);
    }
    return status_mib("VmRSS");
}


/* Under the sanitizers time and memory are theirs as much as ours. */
static bool sanitized(void)
{
    const char *s = getenv("TILEC_SANITIZE");
    return s && *s;
}

static void run_case(scale_case *c)
{
    double slower = sanitized() ? 5 : 1;
    for (size_t s = 0; s < sizeof stages / sizeof stages[0]; s++) {
        long rss = reset_peak();
        double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        tl_status st = stages[s].run(c);
        double dt = seconds(CLOCK_MONOTONIC) - t0, cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        long grew = status_mib("VmHWM") - rss; /* the stage's own peak */
        printf("  %-10s %-10s %7.3f s (cpu %.3f s), peak +%ld MiB\n", c->name, stages[s].name, dt, cpu, grew);
        if (st != TL_OK)
            fail_msg("%s: %s: %s: %s", c->name, stages[s].name, tl_status_name(st), tl_ctx_error(ctx));
        if (dt > stages[s].limit_s * slower)
            fail_msg("%s: %s took %.1f s (limit %.0f s)", c->name, stages[s].name, dt, stages[s].limit_s * slower);
        /* issue 12 item 10: 100,000 statements emitted in 1 s and 200 MB
         * (processor time: the wall clock is the machine's load too). On the
         * shared 2-core machine the same emit took 0.57 to 1.06 s of
         * processor time from one run to the next, so the bound holds the
         * best of three: an emitter that got slower fails all three. */
        bool emit_bound = c->build == build_statements && stages[s].run == stage_emit && !sanitized();
        for (int again = 0; emit_bound && cpu > 1.0 && again < 2; again++) {
            c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
            if (stage_emit(c) == TL_OK) {
                double t = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
                printf("  %-10s %-10s again: cpu %.3f s\n", c->name, stages[s].name, t);
                cpu = t < cpu ? t : cpu;
            }
        }
        if (emit_bound && (cpu > 1.0 || grew > 200))
            fail_msg("%s: emitted in %.2f s and %ld MiB (at most 1 s and 200 MiB)", c->name, cpu, grew);
    }
    tl_kernel_destroy(c->k);
}

static void test_deep_chain(void **state)
{
    (void)state;
    scale_case c = {"chain", build_chain, CHAIN, 40, 3.0 + CHAIN / 2, 40u * CHAIN, false, NULL};
    run_case(&c);
    scale_case compiled = {"chain", build_chain, COMPILED_CHAIN, 40, 3.0 + COMPILED_CHAIN / 2, 40u * COMPILED_CHAIN,
                        true, NULL};
    run_case(&compiled);
}

static void test_shared_subexpressions(void **state)
{
    (void)state;
    scale_case c = {"doublings", build_doublings, DOUBLINGS, 40, 3.0 * (double)(1 << DOUBLINGS), 8192, true, NULL};
    run_case(&c);
}

static void test_host_expressions(void **state)
{
    (void)state;
    /* N = 0: nothing runs */
    scale_case c = {"host_exprs", build_host_exprs, CHAIN, 0, -1.0, 40u * CHAIN, false, NULL};
    run_case(&c);
    scale_case compiled = {"host_exprs", build_host_exprs, COMPILED_CHAIN, 0, -1.0, 40u * COMPILED_CHAIN, true, NULL};
    run_case(&compiled);
}

static void test_nested_loops(void **state)
{
    (void)state;
    /* as deep as scopes nest: the grid's scope and 31 loops */
    scale_case c = {"nested", build_nested, 31, 1, 4.0, 200000, true, NULL};
    run_case(&c);
}

static void test_many_statements(void **state)
{
    (void)state;
    scale_case c = {"statements", build_statements, STATEMENTS, 1, 3.0 + STATEMENTS - 1, 200u * STATEMENTS, false,
                    NULL};
    run_case(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_shared_subexpressions),
        cmocka_unit_test(test_host_expressions),
        cmocka_unit_test(test_many_statements),
        cmocka_unit_test(test_nested_loops),
    };
    return cmocka_run_group_tests_name("scale", tests, offline_setup, ctx_teardown);
}
