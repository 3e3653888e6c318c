/* fill_tune_cache.c - an experiment tool, not part of the library: compiles
 * every candidate of the attention tuner's space (tl_autotune "flash_attn")
 * for some problems into a cubin cache directory, on a machine without a
 * GPU (an offline sm_90a context), so that a tuning run on the GPU machine
 * with TILEC_CACHE_DIR there spares its compiles (a program does not depend
 * on the sizes, only on the schedule, head_dim, mask and dtype).
 *   fill_tune_cache DIR B H S D CAUSAL [B H S D CAUSAL ...]
 * Build (it uses the library's internal headers):
 *   cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o /tmp/fill_tune_cache
 *      tools/experiments/fill_tune_cache.c lib/libtilec.a -ldl -lpthread -lm */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_CANDIDATES 64

int main(int argc, char **argv)
{
    if (argc < 7 || (argc - 2) % 5) {
        fprintf(stderr, "usage: fill_tune_cache DIR B H S D CAUSAL [B H S D CAUSAL ...]\n");
        return 2;
    }
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    o.cache_dir = argv[1];
    tl_ctx *c;
    if (tl_ctx_create(&o, &c, NULL, 0) != TL_OK)
        return 1;
    const tli_tune_op *op = tli_tune_op_find("flash_attn");
    int rc = 0;
    for (int a = 2; a + 5 <= argc; a += 5) {
        tl_flash_attn_desc d = {.batch = atoll(argv[a]), .heads = atoll(argv[a + 1]), .seq_q = atoll(argv[a + 2]),
                                .head_dim = atoll(argv[a + 3]), .dtype = TL_BF16, .causal = atoi(argv[a + 4])};
        d.kv_heads = d.heads;
        d.seq_kv = d.seq_q;
        tl_tune_config cfg[MAX_CANDIDATES];
        tl_compile_job jobs[MAX_CANDIDATES];
        int n = tli_tune_op_space(c, op, &d, cfg, MAX_CANDIDATES), built = 0;
        for (int i = 0; i < n; i++)
            if (op->build(c, &d, &cfg[i], &jobs[built].kernel) == TL_OK)
                jobs[built].safe_variant = 0, jobs[built++].program = NULL;
        tl_status st = tl_compile_many(c, jobs, built, NULL, 0);
        printf("%s %s %s %s causal %s: %d candidates, %d built, %s\n", argv[a], argv[a + 1], argv[a + 2], argv[a + 3],
               argv[a + 4], n, built, tl_status_name(st));
        rc |= st != TL_OK;
        for (int i = 0; i < built; i++) {
            tl_program_destroy(jobs[i].program);
            tl_kernel_destroy(jobs[i].kernel);
        }
    }
    tl_ctx_destroy(c);
    return rc;
}
