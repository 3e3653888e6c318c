/* fill_cache.c - an experiment tool, not part of the library: compiles the
 * programs a benchmark run will ask for into a cubin cache directory on a
 * machine without a GPU (an offline sm_90a context; NVRTC needs no GPU), so
 * that the directory, carried to the GPU machine and named by
 * TILEC_CACHE_DIR, spares the call its compiles. The keys match when both
 * sides run the same library build and NVRTC (bench/NOTES.md, session 23:
 * a call of 50 bench points in 50-80 s instead of minutes).
 *   fill_cache DIR attn "S D CAUSAL [BM BN STAGES THREADS WS PP PS]" ...
 *       bench_attention's points (B = 16k / S, H = 2048 / D, bf16); a
 *       schedule of zeros, or none, is the op's default
 *   fill_cache DIR gemm MxNxK ...
 *       tl_op_gemm's default programs for bf16, B as [N, K] and as [K, N]
 *       (bench_gemm_small's shapes)
 *   fill_cache --cubins OUT DIR ...
 *       also writes each program's cubin to OUT/KERNEL.cubin, for
 *       cuobjdump on the GPU machine. Read SASS from these: nvcc given the
 *       same source and device header can make different code than the
 *       library's NVRTC (bench/NOTES.md, session 24).
 * Build: cc -std=c11 -O2 -Iinclude -o /tmp/fill_cache
 *        tools/experiments/fill_cache.c lib/libtilec.a -ldl -lpthread -lm */
#include "tilec.h"
#include <stdio.h>
#include <string.h>

static const char *cubin_dir; /* --cubins: where programs' cubins go, or NULL */

/* Writes p's cubin to cubin_dir/KERNEL.cubin when --cubins was given. */
static int save_cubin(const tl_program *p)
{
    if (!cubin_dir)
        return 0;
    size_t n = 0;
    const void *c = tl_program_cubin(p, &n);
    tl_program_info info;
    if (tl_program_get_info(p, &info) != TL_OK)
        return 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.cubin", cubin_dir, info.name);
    FILE *f = fopen(path, "wb");
    int ok = f && c && fwrite(c, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "fill_cache: cannot write %s\n", path);
    return !ok;
}

static int attn_point(tl_ctx *ctx, const char *point)
{
    int a[10] = {0};
    if (sscanf(point, "%d %d %d %d %d %d %d %d %d %d", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7], &a[8],
               &a[9]) < 3 || a[0] <= 0 || a[1] <= 0) {
        fprintf(stderr, "fill_cache: '%s' is not \"S D CAUSAL [schedule]\"\n", point);
        return 1;
    }
    tl_flash_attn_desc d = {.batch = 16384 / a[0] ? 16384 / a[0] : 1, .heads = 2048 / a[1], .kv_heads = 2048 / a[1],
                            .seq_q = a[0], .seq_kv = a[0], .head_dim = a[1], .dtype = TL_BF16, .causal = a[2],
                            .schedule = {a[3], a[4], a[5], a[6], a[7], a[8], a[9]}};
    const tl_program *p;
    if (tl_op_flash_attn_program(ctx, &d, &p) != TL_OK) {
        fprintf(stderr, "fill_cache: %s: %s\n", point, tl_ctx_error(ctx));
        return 1;
    }
    return save_cubin(p);
}

static int gemm_shape(tl_ctx *ctx, const char *shape)
{
    long long m, n, k;
    if (sscanf(shape, "%lldx%lldx%lld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
        fprintf(stderr, "fill_cache: '%s' is not MxNxK\n", shape);
        return 1;
    }
    for (int t = 0; t < 2; t++) {
        tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t};
        tl_compile_options co = {.target = "sm_90a"};
        tl_kernel *kern = NULL;
        tl_program *p = NULL;
        tl_status st = tl_op_gemm_build(ctx, &d, &kern);
        if (st == TL_OK)
            st = tl_compile(kern, &co, &p);
        int unsaved = st == TL_OK && save_cubin(p);
        tl_program_destroy(p);
        tl_kernel_destroy(kern);
        if (unsaved)
            return 1;
        if (st != TL_OK) {
            fprintf(stderr, "fill_cache: %s: %s\n", shape, tl_ctx_error(ctx));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "--cubins") == 0) {
        cubin_dir = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 4 || (strcmp(argv[2], "attn") != 0 && strcmp(argv[2], "gemm") != 0)) {
        fprintf(stderr, "usage: fill_cache [--cubins OUT] DIR attn \"S D CAUSAL [schedule]\" ... | "
                        "fill_cache [--cubins OUT] DIR gemm MxNxK ...\n");
        return 2;
    }
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    o.cache_dir = argv[1];
    tl_ctx *ctx;
    char msg[256];
    if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) {
        fprintf(stderr, "fill_cache: %s\n", msg);
        return 1;
    }
    int bad = 0;
    for (int i = 3; i < argc; i++)
        bad |= strcmp(argv[2], "attn") == 0 ? attn_point(ctx, argv[i]) : gemm_shape(ctx, argv[i]);
    tl_ctx_destroy(ctx);
    return bad;
}
