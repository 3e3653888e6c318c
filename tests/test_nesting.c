/* test_nesting.c - what api.md promises about nesting scopes: tl_serial
 * (and tl_if) inside tl_parallel run for each iteration of the parallel
 * loop on its own, which is how a hand-written reduction sums along an
 * axis per element; the generated code compiles and the interpreter
 * agrees with a direct sum. */
#include "fixture.h"

/* S[r] = sum over j of X[r, j], one row per parallel iteration, summed in
 * a local by a serial loop; rows whose sum is negative are stored as 0 by a
 * tl_if inside the same iteration. */
static tl_kernel *row_sums(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "row_sums");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_buf S = tl_param_tensor(k, "S", TL_F32, 1, &M, NULL);
    tl_grid(k, tl_ceildiv(k, M, tl_int(k, 64)), TL_NONE_EXPR, TL_NONE_EXPR, 64);
    tl_buf acc = tl_alloc_local(k, TL_F32, 1, (int64_t[]){1});
    tl_expr r = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 64)), tl_parallel1(k, 64));
    tl_expr z = tl_int(k, 0);
    tl_store(k, acc, &z, tl_f32(k, 0));
    tl_expr j = tl_serial(k, N);
    tl_store(k, acc, &z, tl_add(k, tl_load(k, acc, &z), tl_load(k, X, (tl_expr[]){r, j})));
    tl_end(k);
    tl_if(k, tl_lt(k, tl_load(k, acc, &z), tl_f32(k, 0)));
    tl_store(k, S, &r, tl_f32(k, 0));
    tl_else(k);
    tl_store(k, S, &r, tl_load(k, acc, &z));
    tl_end(k);
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

static void test_serial_inside_parallel(void **state)
{
    (void)state;
    tl_kernel *k = row_sums();
    enum { M = 70, N = 9 };
    float x[M * N], s[M];
    for (int i = 0; i < M * N; i++)
        x[i] = (float)((i * 7) % 13) - (i < N ? 20.0f : 4.0f);
    tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_hptr(x), tl_arg_hptr(s)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    for (int r = 0; r < M; r++) {
        float want = 0;
        for (int j = 0; j < N; j++)
            want += x[r * N + j];
        assert_true(s[r] == (want < 0 ? 0.0f : want));
    }
    test_ptx_or_skip(ctx, k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serial_inside_parallel),
    };
    return cmocka_run_group_tests_name("nesting", tests, offline_setup, ctx_teardown);
}
