/* test_scale.c - kernels far larger than anyone writes by hand, through
 * every stage that must stay linear in their size: a chain of 100,000
 * expression nodes (it overflowed the stack in the builder's checks and
 * the interpreter), shared subexpressions doubled 26 times (x = x + x: 2^26
 * paths, seconds to check and over a minute to interpret when every use was
 * walked again), a grid expression doubled 22 times, and 100,000
 * statements. Each case runs each stage under a time limit, so a stage that
 * goes exponential or recursive fails here rather than hanging; the time
 * and the peak memory of each stage are printed.
 *
 * The stages are a table: emission (tl_kernel_source, 100,000 statements in
 * under 1 s and 200 MB, issue 12 item 10) joins it when the emitter is
 * linear. */
#include "fixture.h"

#include "kernel.h"

#include <sys/resource.h>
#include <time.h>

#define CHAIN 100000
#define DOUBLINGS 26
#define GRID_DOUBLINGS 22
#define STATEMENTS 100000

typedef struct scale_case {
    const char *name;
    tl_kernel *(*build)(void);
    int64_t n;        /* the N to interpret with */
    double want;      /* OUT[0] after interpretation */
    tl_kernel *k;     /* between the stages */
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

/* OUT[i] = a chain of CHAIN additions and multiplications on X[i] (exact
 * in f64: adds of 1 and multiplies by 1). */
static tl_kernel *build_chain(void)
{
    tl_buf x, out;
    tl_expr i;
    tl_kernel *k = elementwise("chain", &x, &out, &i);
    tl_expr v = tl_load(k, x, &i), one = tl_float(k, 1.0, TL_F64);
    for (int s = 0; s < CHAIN; s++)
        v = s % 2 ? tl_mul(k, v, one) : tl_add(k, v, one);
    tl_store(k, out, &i, v);
    tl_end(k);
    return k;
}

/* OUT[i] = X[i] doubled DOUBLINGS times by x = x + x, inside a parallel
 * loop (every iteration evaluates the DAG). */
static tl_kernel *build_doublings(void)
{
    tl_buf x, out;
    tl_expr i;
    tl_kernel *k = elementwise("doublings", &x, &out, &i);
    tl_expr v = tl_load(k, x, &i);
    for (int s = 0; s < DOUBLINGS; s++)
        v = tl_add(k, v, v);
    tl_store(k, out, &i, v);
    tl_end(k);
    return k;
}

/* The grid, a shape and a stride are host expressions doubled
 * GRID_DOUBLINGS times (g = g + g from N): with N = 0 the grid is empty,
 * but every launch evaluates them. The shape's own chain is CHAIN deep. */
static tl_kernel *build_host_exprs(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "host_exprs");
    tl_expr n = tl_dim(k, "N"), g = n, deep = n;
    for (int s = 0; s < GRID_DOUBLINGS; s++)
        g = tl_add(k, g, g);
    for (int s = 0; s < CHAIN; s++)
        deep = tl_add(k, deep, tl_int(k, s % 2));
    tl_expr one = tl_int(k, 1);
    tl_buf out = tl_param_tensor(k, "OUT", TL_F64, 1, &deep, &one);
    tl_grid(k, g, g, TL_NONE_EXPR, 32);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, out, &i, tl_float(k, 1.0, TL_F64));
    tl_end(k);
    return k;
}

/* STATEMENTS stores, one after another, each OUT[0] += 1. */
static tl_kernel *build_statements(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "statements");
    tl_expr n = tl_dim(k, "N");
    tl_buf x = tl_param_tensor(k, "X", TL_F64, 1, &n, NULL), out = tl_param_tensor(k, "OUT", TL_F64, 1, &n, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr zero = tl_int(k, 0), one = tl_float(k, 1.0, TL_F64);
    tl_store(k, out, &zero, tl_load(k, x, &zero));
    for (int s = 1; s < STATEMENTS; s++)
        tl_store(k, out, &zero, tl_add(k, tl_load(k, out, &zero), one));
    return k;
}

/* ---------------------------------------------------------------- stages */

static tl_status stage_build(scale_case *c)
{
    c->k = c->build();
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

typedef struct stage {
    const char *name;
    tl_status (*run)(scale_case *c);
    double limit_s; /* generous: linear work takes a fraction of it, even
                       under the sanitizers; exponential work takes far more */
} stage;

static const stage stages[] = {
    {"build", stage_build, 30},
    {"verify", stage_verify, 5},
    {"interpret", stage_interpret, 30},
};

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long peak_mib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

static void run_case(scale_case *c)
{
    for (size_t s = 0; s < sizeof stages / sizeof stages[0]; s++) {
        double t0 = seconds();
        tl_status st = stages[s].run(c);
        double dt = seconds() - t0;
        printf("  %-10s %-9s %7.3f s, peak %ld MiB\n", c->name, stages[s].name, dt, peak_mib());
        if (st != TL_OK)
            fail_msg("%s: %s: %s: %s", c->name, stages[s].name, tl_status_name(st), tl_ctx_error(ctx));
        if (dt > stages[s].limit_s)
            fail_msg("%s: %s took %.1f s (limit %.0f s)", c->name, stages[s].name, dt, stages[s].limit_s);
    }
    tl_kernel_destroy(c->k);
}

static void test_deep_chain(void **state)
{
    (void)state;
    scale_case c = {"chain", build_chain, 40, 3.0 + CHAIN / 2, NULL};
    run_case(&c);
}

static void test_shared_subexpressions(void **state)
{
    (void)state;
    scale_case c = {"doublings", build_doublings, 40, 3.0 * (double)(1 << DOUBLINGS), NULL};
    run_case(&c);
}

static void test_host_expressions(void **state)
{
    (void)state;
    scale_case c = {"host_exprs", build_host_exprs, 0, -1.0, NULL}; /* N = 0: nothing runs */
    run_case(&c);
}

static void test_many_statements(void **state)
{
    (void)state;
    scale_case c = {"statements", build_statements, 1, 3.0 + STATEMENTS - 1, NULL};
    run_case(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_shared_subexpressions),
        cmocka_unit_test(test_host_expressions),
        cmocka_unit_test(test_many_statements),
    };
    return cmocka_run_group_tests_name("scale", tests, offline_setup, ctx_teardown);
}
