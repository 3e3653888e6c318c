/* cubin_override.c - an experiment tool, not part of the library: puts
 * the cubin of a hand-edited FlashAttention source under the cache key of
 * the op's generated one, so that tl_op_flash_attn (bench_attention, with
 * TILEC_CACHE_DIR=DIR) runs the edit. Two cache directories, one with the
 * override and one without, give an A/B of an idea in one run before it
 * is built into the lowering (bench/NOTES.md, session 13).
 *   cubin_override DIR - D CAUSAL [BN STAGES [PERSISTENT]]          print the op's source
 *   cubin_override DIR EDITED.cu D CAUSAL [BN STAGES [PERSISTENT]]  compile EDITED.cu, store it
 *   cubin_override DIR BUILT.cubin D CAUSAL [...]   store a cubin built elsewhere (e.g. nvcc's
 *       of the printed source: is NVRTC's code the slower one? bench/NOTES.md, session 24)
 *   D may be D@S: the default at S keys for bench_attention's batch and heads (the grid's).
 *   cubin_override DIR -|EDITED.cu|BUILT.cubin gemm MxNxK[:nt|:nn]   the same for tl_op_gemm's
 *       default bf16 program (one program: not the split-K decode shapes)
 * (BN STAGES: the schedule 128 x BN, STAGES stages, 256 threads, a producer
 * warpgroup, ping-pong, persistent CTAs when PERSISTENT is 1; without them
 * the op's default.)
 * The edit must keep the kernel's name and parameters. Build (uses the
 * library's internals):
 *   cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o /tmp/cubin_override \
 *      tools/experiments/cubin_override.c lib/libtilec.a -ldl -lpthread -lm */
#define _GNU_SOURCE /* memmem */
#include "tilec.h"
#include "program.h"
#include "ctx.h"
#include "cache.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void tli_program_cache_key(const tl_program *p, const tl_compile_options *opt, uint8_t key[32]);
tl_status tli_program_nvrtc(tl_program *p, const tl_compile_options *opt, char **log);
int main(int argc, char **argv)
{
    if (argc != 5 && argc != 7 && argc != 8) return 2;
    tl_ctx_options o = tl_ctx_default_options();
    o.cache_dir = argv[1];
    tl_ctx *ctx; char msg[256];
    if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) {
        o.device = TL_NO_DEVICE, o.target = "sm_90a";
        if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) { fprintf(stderr, "%s\n", msg); return 1; }
    }
    tl_program *p = NULL;
    if (strcmp(argv[3], "gemm") == 0) { /* tl_op_gemm's default program, bf16, as bench_gemm_small builds it */
        long long m, n, kk;
        char layout[3] = "nt";
        if (sscanf(argv[4], "%lldx%lldx%lld:%2s", &m, &n, &kk, layout) < 3) return 2;
        tl_gemm_desc g = {.m = m, .n = n, .k = kk, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                          .trans_b = strcmp(layout, "nn") != 0};
        tl_compile_options co = {.target = "sm_90a"};
        tl_kernel *kern = NULL;
        if (tl_op_gemm_build(ctx, &g, &kern) != TL_OK || tl_compile(kern, &co, &p) != TL_OK) {
            fprintf(stderr, "%s\n", tl_ctx_error(ctx));
            return 1;
        }
    } else {
        /* D, or D@S: the op's default at S keys with bench_attention's batch and heads (B = 16k / S,
         * H = 2048 / D), as the grid runs it; plain D is B 1, H 16, S 4096 */
        int hd = atoi(argv[3]), seq = 4096;
        const char *at = strchr(argv[3], '@');
        if (at)
            seq = atoi(at + 1);
        if (hd <= 0 || seq <= 0) return 2;
        tl_flash_attn_desc d = {.batch = at ? (16384 / seq ? 16384 / seq : 1) : 1, .heads = at ? 2048 / hd : 16,
                                .kv_heads = at ? 2048 / hd : 16, .seq_q = seq, .seq_kv = seq,
                                .head_dim = hd, .dtype = TL_BF16, .causal = atoi(argv[4])};
        if (argc >= 7)
            d.schedule = (tl_flash_attn_schedule){.block_m = 128, .block_n = atoi(argv[5]), .stages = atoi(argv[6]),
                                                  .threads = 256, .warp_specialize = 1, .pingpong = 1,
                                                  .persistent = argc == 8 ? atoi(argv[7]) : 0};
        const tl_program *cp;
        if (tl_op_flash_attn_program(ctx, &d, &cp) != TL_OK) { fprintf(stderr, "%s\n", tl_ctx_error(ctx)); return 1; }
        p = (tl_program *)cp;
    }
    uint8_t key[32];
    tli_program_cache_key(p, &p->opt, key);
    if (strcmp(argv[2], "-") == 0) { fputs(p->source, stdout); return 0; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *src = calloc(1, n + 1); if (fread(src, 1, n, f) != (size_t)n) return 1; fclose(f);
    /* an edited source or a ready cubin (its symbol table) must name the program's kernel */
    if (!memmem(src, (size_t)n, p->kname, strlen(p->kname))) {
        fprintf(stderr, "kernel %s not in %s\n", p->kname, argv[2]);
        return 1;
    }
    size_t len = strlen(argv[2]);
    if (len > 6 && strcmp(argv[2] + len - 6, ".cubin") == 0) { /* a ready cubin: store it as it is */
        tl_status put = tli_cache_put(ctx->cache, key, src, (size_t)n, "override (cubin file)");
        printf("override %s with %s: %ld bytes, put %d\n", p->kname, argv[2], n, (int)put);
        return put != TL_OK;
    }
    char *orig = p->source;
    p->source = src;
    free(p->cubin); p->cubin = NULL;
    char *log = NULL;
    if (tli_program_nvrtc(p, &p->opt, &log) != TL_OK) { fprintf(stderr, "nvrtc: %s\n", log ? log : "?"); return 1; }
    tl_status st = tli_cache_put(ctx->cache, key, p->cubin, p->cubin_len, "override");
    printf("override %s: %zu bytes, put %d\n", p->kname, p->cubin_len, (int)st);
    p->source = orig;
    return st != TL_OK;
}
