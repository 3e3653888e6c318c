/* test_reducer.c - reducers (tl_alloc_reducer, tl_finalize_reducer) without
 * a GPU: the running row sum of kernels.h in the interpreter against a
 * float64 reference, the same as with plain fragments; the generated code
 * (no exchange in the loop's sum, one after it: shuffles, or shuffles and
 * shared memory where a row spans warps) compiled for sm_80 and sm_90a;
 * FlashAttention's denominator taken this way; and each misuse refused
 * with a message naming its call. */
#include "fixture.h"
#include "kernels.h"

#include <math.h>

static void run_interp(bool reducer, int64_t T, int64_t R, int64_t C, int threads, float *out)
{
    float *x = malloc(sizeof *x * (size_t)(T * R * C)), *alpha = malloc(sizeof *alpha * (size_t)(T * R));
    tl_random_host(x, TL_F32, T * R * C, 5, -1, 1);
    tl_random_host(alpha, TL_F32, T * R, 6, 0.25, 1);
    memset(out, 0xA5, sizeof *out * (size_t)R);
    tl_kernel *k = zoo_running_sum(ctx, reducer, R, C, threads);
    assert_status(tl_kernel_status(k), TL_OK);
    tl_arg args[] = {tl_arg_int(T), tl_arg_hptr(x), tl_arg_hptr(alpha), tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    double *want = malloc(sizeof *want * (size_t)R);
    zoo_running_sum_ref(T, R, C, x, alpha, want);
    for (int64_t r = 0; r < R; r++)
        if (!(fabs(out[r] - want[r]) <= 1e-5 * (1 + fabs(want[r]))))
            fail_msg("running sum (%s) row %lld: %.9g, want %.9g", reducer ? "reducer" : "plain", (long long)r, out[r],
                     want[r]);
    tl_kernel_destroy(k);
    free(x), free(alpha), free(want);
}

static void test_interpreter_sums_as_plain_fragments(void **state)
{
    (void)state;
    const int64_t shapes[][3] = {{4, 256, 128}, {2, 4096, 256}};
    for (int s = 0; s < 2; s++)
        for (int64_t T = 1; T <= 5; T += 4) {
            int64_t R = shapes[s][0], C = shapes[s][1];
            float *a = malloc(sizeof *a * (size_t)R), *b = malloc(sizeof *b * (size_t)R);
            run_interp(true, T, R, C, (int)shapes[s][2], a);
            run_interp(false, T, R, C, (int)shapes[s][2], b);
            assert_memory_equal(a, b, sizeof *a * (size_t)R);
            free(a), free(b);
        }
}

static bool has(const char *src, const char *what) { return strstr(src, what) != NULL; }

/* The loop's sum keeps parts; the finalize exchanges them, through shared
 * memory only where a row's holders span warps. */
static void test_code_exchanges_once(void **state)
{
    (void)state;
    const struct {
        int64_t R, C;
        int threads;
        bool warps;
    } cases[] = {{4, 256, 128, false}, {2, 4096, 256, true}};
    for (int c = 0; c < 2; c++) {
        tl_kernel *k = zoo_running_sum(ctx, true, cases[c].R, cases[c].C, cases[c].threads);
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        assert_true(has(src, "-> reducer tl_frag"));
        assert_true(has(src, "each thread keeps its part"));
        const char *fin = strstr(src, "tl_finalize_reducer");
        assert_non_null(fin);
        assert_true(has(fin, "tl_shfl_xor"));
        assert_int_equal(has(fin, "phase 2"), cases[c].warps);
        /* no shuffle before the finalize: the loop's sum exchanges nothing */
        const char *sh = strstr(src, "tl_shfl_xor");
        assert_true(sh > fin);
        tl_free_host(src);
        const char *targets[] = {"sm_80", "sm_90a"};
        for (int t = 0; t < 2; t++) {
            tl_program *p = NULL;
            tl_status st = tl_compile(k, &(tl_compile_options){.target = targets[t]}, &p);
            if (st == TL_ERR_NO_NVRTC) {
                tl_kernel_destroy(k);
                skip();
            }
            if (st != TL_OK)
                fail_msg("%s: %s", targets[t], tl_ctx_error(ctx));
            tl_program_destroy(p);
        }
        tl_kernel_destroy(k);
    }
}

/* FlashAttention's row sums are reducers (one finalize of l before O / l),
 * except in D 64's causal kernel on two groups of 128 rows, which measured
 * slower so (flash_attn.c, defer_row_sums). */
static void test_flash_attention_defers_its_sum(void **state)
{
    (void)state;
    const struct {
        int d, causal, seq;
        bool defer;
    } cases[] = {{64, 0, 4096, true}, {128, 0, 4096, true}, {128, 1, 4096, true}, {64, 1, 4096, false},
                 {64, 1, 16384, true}, {256, 0, 1024, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tl_flash_attn_desc desc = {.batch = 2, .heads = 4, .kv_heads = 4, .seq_q = cases[c].seq,
                                   .seq_kv = cases[c].seq, .head_dim = cases[c].d, .dtype = TL_BF16,
                                   .causal = cases[c].causal};
        tl_kernel *k = NULL;
        assert_status(tl_op_flash_attn_build(ctx, &desc, &k), TL_OK);
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        if (has(src, "tl_reduce_sum S -> reducer rowsum") != cases[c].defer ||
            has(src, "tl_finalize_reducer l") != cases[c].defer)
            fail_msg("D %d causal %d S %d: the row sums %sdeferred", cases[c].d, cases[c].causal, cases[c].seq,
                     cases[c].defer ? "not " : "");
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
}

/* A kernel of one block, 128 threads, with F [4, 64] from X and reducers
 * r, q and fragment f [4]; `misuse` picks what goes wrong. */
static tl_kernel *misuse_kernel(int misuse)
{
    tl_kernel *k = tl_kernel_new(ctx, "misuse");
    tl_expr zero = tl_int(k, 0);
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){tl_int(k, 4), tl_int(k, 64)}, NULL);
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 1, (tl_expr[]){tl_int(k, 4)}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){4, 64});
    tl_buf r = tl_alloc_reducer(k, TL_F32, 1, (int64_t[]){4}), q = tl_alloc_reducer(k, TL_F32, 1, (int64_t[]){4});
    tl_buf f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_copy(k, tl_tile(k, X, zero, zero), tl_all(F));
    tl_reduce_max(k, F, f, 1, 1);
    tl_reduce_sum(k, F, r, 1, 1);
    tl_expr i;
    switch (misuse) {
    case 1: /* r * r */
        i = tl_parallel1(k, 4);
        tl_store(k, q, &i, tl_mul(k, tl_load(k, r, &i), tl_load(k, r, &i)));
        tl_end(k);
        break;
    case 2: /* a plain term */
        i = tl_parallel1(k, 4);
        tl_store(k, q, &i, tl_add(k, tl_load(k, r, &i), tl_load(k, f, &i)));
        tl_end(k);
        break;
    case 3: /* a plain fragment from a reducer's part */
        i = tl_parallel1(k, 4);
        tl_store(k, f, &i, tl_load(k, r, &i));
        tl_end(k);
        break;
    case 4: /* a non-linear function of a part */
        i = tl_parallel1(k, 4);
        tl_store(k, q, &i, tl_exp(k, tl_load(k, r, &i)));
        tl_end(k);
        break;
    case 5: tl_reduce_max(k, F, q, 1, 1); break;
    case 6: tl_fill(k, q, tl_f32(k, 1.0f)); break;
    case 7: tl_copy(k, tl_all(r), tl_all(f)); break;
    case 8: tl_copy(k, tl_all(f), tl_all(q)); break;
    case 9: /* a condition on a part */
        i = tl_parallel1(k, 4);
        tl_if(k, tl_gt(k, tl_load(k, r, &i), tl_f32(k, 0)));
        tl_store(k, f, &i, tl_f32(k, 0));
        tl_end(k);
        tl_end(k);
        break;
    case 10: /* written after its finalize */
        tl_finalize_reducer(k, r);
        tl_reduce_sum(k, F, r, 1, 0);
        break;
    case 11: { /* summed from a shared tile: every holder would hold the whole sum */
        tl_buf Xs = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){4, 64});
        tl_copy(k, tl_tile(k, X, zero, zero), tl_all(Xs));
        tl_reduce_sum(k, Xs, q, 1, 1);
        tl_finalize_reducer(k, q);
        break;
    }
    default: /* fine: q = 2 r - r / 4, then both finalized */
        i = tl_parallel1(k, 4);
        tl_store(k, q, &i, tl_sub(k, tl_mul(k, tl_f32(k, 2), tl_load(k, r, &i)), tl_div(k, tl_load(k, r, &i), tl_f32(k, 4))));
        tl_end(k);
        tl_finalize_reducer(k, q);
        break;
    }
    if (misuse != 10)
        tl_finalize_reducer(k, r);
    i = tl_parallel1(k, 4);
    tl_store(k, Out, &i, tl_add(k, tl_load(k, r, &i), tl_load(k, f, &i)));
    tl_end(k);
    return k;
}

static void test_misuse_refused_with_the_call(void **state)
{
    (void)state;
    const char *want[] = {"",
                          "tl_store: the value stored into reducer",
                          "tl_store: the value stored into reducer",
                          "tl_store: the value stored reads reducer",
                          "tl_store: the value stored into reducer",
                          "tl_reduce_max: reducer",
                          "tl_fill: reducer",
                          "tl_copy: reducer",
                          "tl_copy: reducer",
                          "tl_if: the condition reads reducer",
                          "tl_reduce_sum: reducer",
                          "tl_reduce_sum: reducer 'tl_frag"};
    for (int m = 0; m <= 11; m++) {
        tl_kernel *k = misuse_kernel(m);
        assert_status(tl_kernel_status(k), TL_OK);
        char *src = NULL;
        tl_status st = tl_kernel_source(k, "sm_90a", &src);
        if (m == 0) {
            if (st != TL_OK)
                fail_msg("the fine kernel: %s", tl_ctx_error(ctx));
        } else {
            if (st != TL_ERR_INVALID_ARG || !strstr(tl_ctx_error(ctx), want[m]))
                fail_msg("misuse %d: %s, '%s' (want '%s')", m, tl_status_name(st), tl_ctx_error(ctx), want[m]);
        }
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
}

static void test_builder_errors(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "errs");
    assert_true(tl_alloc_reducer(k, TL_F16, 1, (int64_t[]){4}).id == 0);
    assert_status(tl_kernel_status(k), TL_ERR_DTYPE);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_alloc_reducer"));
    tl_kernel_destroy(k);

    k = tl_kernel_new(ctx, "errs");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_finalize_reducer(k, tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4}));
    assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "is not a reducer"));
    tl_kernel_destroy(k);

    k = tl_kernel_new(ctx, "errs");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf r = tl_alloc_reducer(k, TL_F32, 1, (int64_t[]){4});
    tl_clear(k, r);
    tl_serial(k, tl_int(k, 2));
    tl_finalize_reducer(k, r);
    assert_status(tl_kernel_status(k), TL_ERR_SCOPE);
    assert_non_null(strstr(tl_ctx_error(ctx), "top level"));
    tl_kernel_destroy(k);

    k = tl_kernel_new(ctx, "errs");
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    r = tl_alloc_reducer(k, TL_F32, 1, (int64_t[]){4});
    tl_clear(k, r);
    tl_finalize_reducer(k, r);
    tl_finalize_reducer(k, r);
    assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "finalized already"));
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreter_sums_as_plain_fragments),
        cmocka_unit_test(test_code_exchanges_once),
        cmocka_unit_test(test_flash_attention_defers_its_sum),
        cmocka_unit_test(test_misuse_refused_with_the_call),
        cmocka_unit_test(test_builder_errors),
    };
    test_apply_filter();
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
