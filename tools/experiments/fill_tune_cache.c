/* fill_tune_cache.c - an experiment tool, not part of the library: compiles
 * every candidate of a tuner's space (tl_autotune's "flash_attn" or "gemm")
 * for some problems into a cubin cache directory, on a machine without a
 * GPU (an offline sm_90a context), so that a tuning run on the GPU machine
 * with TILEC_CACHE_DIR there spares its compiles (a program does not depend
 * on the sizes, only on the schedule and the problem's class).
 *   fill_tune_cache DIR PROBLEM [PROBLEM ...]
 *   PROBLEM: flash_attn B H S D CAUSAL  (bf16, as many keys as queries)
 *            gemm MxNxK nt|nn           (bf16, B as [N, K] or [K, N])
 * The offline context counts 132 SMs, the H200's; on another GPU the
 * spaces that depend on the SM count differ.
 * Build (it uses the library's internal headers):
 *   cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o /tmp/fill_tune_cache
 *      tools/experiments/fill_tune_cache.c lib/libtilec.a -ldl -lpthread -lm */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compiles op's space for desc into the context's cache. */
static int fill(tl_ctx *c, const char *name, const void *desc, const char *title)
{
    const tli_tune_op *op = tli_tune_op_find(name);
    tl_tune_config *cfg = malloc(TLI_TUNE_MAX_CANDIDATES * sizeof *cfg);
    tl_compile_job *jobs = calloc(TLI_TUNE_MAX_CANDIDATES, sizeof *jobs);
    if (!op || !cfg || !jobs) {
        free(cfg), free(jobs);
        return 1;
    }
    int n = tli_tune_op_space(c, op, desc, cfg, TLI_TUNE_MAX_CANDIDATES), built = 0;
    for (int i = 0; i < n; i++)
        if (op->build(c, desc, &cfg[i], &jobs[built].kernel) == TL_OK)
            jobs[built].safe_variant = 0, jobs[built++].program = NULL;
    tl_status st = tl_compile_many(c, jobs, built, NULL, 0);
    printf("%s: %d candidates, %d built, %s\n", title, n, built, tl_status_name(st));
    for (int i = 0; i < built; i++) {
        tl_program_destroy(jobs[i].program);
        tl_kernel_destroy(jobs[i].kernel);
    }
    free(cfg), free(jobs);
    return st != TL_OK;
}

static int usage(void)
{
    fprintf(stderr, "usage: fill_tune_cache DIR PROBLEM...\n"
                    "  PROBLEM: flash_attn B H S D CAUSAL | gemm MxNxK nt|nn\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    o.cache_dir = argv[1];
    tl_ctx *c;
    if (tl_ctx_create(&o, &c, NULL, 0) != TL_OK)
        return 1;
    int rc = 0;
    for (int a = 2; a < argc;) {
        char title[160];
        if (!strcmp(argv[a], "flash_attn") && a + 5 < argc) {
            tl_flash_attn_desc d = {.batch = atoll(argv[a + 1]), .heads = atoll(argv[a + 2]),
                                    .seq_q = atoll(argv[a + 3]), .head_dim = atoll(argv[a + 4]),
                                    .dtype = TL_BF16, .causal = atoi(argv[a + 5])};
            d.kv_heads = d.heads;
            d.seq_kv = d.seq_q;
            snprintf(title, sizeof title, "flash_attn %s %s %s %s causal %s", argv[a + 1], argv[a + 2],
                     argv[a + 3], argv[a + 4], argv[a + 5]);
            rc |= fill(c, "flash_attn", &d, title);
            a += 6;
        } else if (!strcmp(argv[a], "gemm") && a + 2 < argc) {
            long long m, n, k;
            if (sscanf(argv[a + 1], "%lldx%lldx%lld", &m, &n, &k) != 3 ||
                (strcmp(argv[a + 2], "nt") && strcmp(argv[a + 2], "nn")))
                return usage();
            tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                              .trans_b = !strcmp(argv[a + 2], "nt")};
            snprintf(title, sizeof title, "gemm %s %s", argv[a + 1], argv[a + 2]);
            rc |= fill(c, "gemm", &d, title);
            a += 3;
        } else
            return usage();
    }
    tl_ctx_destroy(c);
    return rc;
}
