/* test_emit.c - lowering and compilation without a GPU: the generated CUDA
 * of the vector add against a golden file, its shape (no toolkit header,
 * vector accesses), and NVRTC cubins for sm_80 and sm_90a of every prebuilt
 * configuration and of every kernel of the test zoo. */
#include "fixture.h"

#include "kernels.h"

#include <sys/stat.h>


static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* Compares the generated vadd with tests/golden/; TILEC_UPDATE_GOLDEN=1
 * rewrites the file instead (review the diff before committing it). */
static void test_vadd_golden(void **state)
{
    (void)state;
    const char *path = "tests/golden/vadd_f32_sm90a.cu";
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *update = getenv("TILEC_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(src, f);
        fclose(f);
    }
    char *golden = read_file(path);
    if (!golden)
        fail_msg("%s is missing (run with TILEC_UPDATE_GOLDEN=1 from the repo root)", path);
    if (strcmp(src, golden) != 0)
        fail_msg("generated vadd differs from %s:\n%s", path, src);
    free(golden);
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
                           zoo_smooth(ctx)};
        for (int i = 0; i < 5; i++) {
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
    const char *loop = strstr(src, "for (long long i");
    assert_non_null(loop);
    int barriers = 0;
    for (const char *p = loop; (p = strstr(p, "__syncthreads();")); p++)
        barriers++;
    assert_int_equal(barriers, 2); /* between the two loops, and at the end of the body */
    tl_free_host(src);
    tl_kernel_destroy(k);
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
        cmocka_unit_test(test_ptx_has_vector_accesses),
        cmocka_unit_test(test_bad_target),
        cmocka_unit_test(test_unknown_op),
    };
    return cmocka_run_group_tests_name("emit+nvrtc", tests, offline_setup, ctx_teardown);
}
