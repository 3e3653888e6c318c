/*
 * bench_gemm.c - the prebuilt GEMM against cuBLAS at the shapes of
 * ANCHORS.md, bf16 in and out, B as [N, K] (NT) and as [K, N] (NN).
 *
 * 1024^3, 2048^3 and 4096^3 sweep the whole default list of schedules;
 * the larger shapes try the four fastest of the 4096^3 sweep of the same
 * layout and the op's own choice for the shape. Each sweep times cuBLAS in the same run (only ratios taken in one
 * run compare). Ends with a table: shape, best schedule, our TFLOP/s,
 * cuBLAS's, ratio.
 *
 * Usage: bench_gemm [MxNxK]   (one shape, whole sweep, both layouts)
 */
#include "bench.h"
#include "gemm_sweep.h"

#include <stdbool.h>
#include <string.h>

#define TOP 4

typedef struct shape {
    int64_t m, n, k;
    int full; /* the whole default sweep, else the TOP of 4096^3 */
} shape;

static const shape anchor_shapes[] = {
    {4096, 4096, 4096, 1}, /* first: the others take its best */
    {1024, 1024, 1024, 1},  {2048, 2048, 2048, 1},  {8192, 8192, 8192, 0},
    {16384, 16384, 16384, 0}, {8192, 8192, 1024, 0}, {4096, 14336, 4096, 0},
    {16384, 4096, 4096, 0}, {4096, 4096, 16384, 0},
};
#define N_ANCHORS (int)(sizeof anchor_shapes / sizeof anchor_shapes[0])

typedef struct summary_row {
    shape s;
    int trans_b;
    char best[96];
    double ours, cublas; /* TFLOP/s */
    int ok;
} summary_row;

/* The TOP fastest passing entries, fastest first. */
static int pick_top(const gemm_sweep_entry *e, int n, tl_gemm_schedule *top)
{
    int used[64] = {0}, count = 0;
    for (; count < TOP; count++) {
        int best = -1;
        for (int i = 0; i < n && i < 64; i++)
            if (e[i].ok && !used[i] && (best < 0 || e[i].ms < e[best].ms))
                best = i;
        if (best < 0)
            break;
        used[best] = 1;
        top[count] = e[best].schedule;
    }
    return count;
}

static void run_shape(tl_ctx *ctx, const shape *s, int trans_b, const tl_gemm_schedule *configs, int nconfigs,
                      gemm_sweep_entry *entries, summary_row *row)
{
    gemm_sweep_result res = {.entries = entries};
    int best = gemm_sweep_ex(ctx, s->m, s->n, s->k, TL_BF16, trans_b, configs, nconfigs, stdout, &res);
    memset(row, 0, sizeof *row);
    row->s = *s;
    row->trans_b = trans_b;
    row->cublas = res.cublas_tflops;
    if (best == -2) {
        fprintf(stderr, "bench_gemm: the sweep could not run\n");
        exit(1);
    }
    if (best >= 0) {
        row->ok = 1;
        row->ours = entries[best].tflops;
        gemm_schedule_text(&configs[best], row->best, sizeof row->best);
    } else {
        snprintf(row->best, sizeof row->best, "(none passed)");
    }
}

static void print_summary(const summary_row *rows, int n)
{
    printf("\nGEMM bf16 in, f32 accumulate, bf16 out: best schedule per shape against cuBLAS in the same run\n");
    printf("%-20s %-3s %-42s %9s %9s %7s\n", "M x N x K", "B", "best schedule", "ours", "cuBLAS", "ratio");
    for (int i = 0; i < n; i++) {
        char sh[48];
        snprintf(sh, sizeof sh, "%lldx%lldx%lld", (long long)rows[i].s.m, (long long)rows[i].s.n,
                 (long long)rows[i].s.k);
        if (rows[i].ok)
            printf("%-20s %-3s %-42s %9.1f %9.1f %7.3f\n", sh, rows[i].trans_b ? "NT" : "NN", rows[i].best,
                   rows[i].ours, rows[i].cublas, rows[i].ours / rows[i].cublas);
        else
            printf("%-20s %-3s %-42s %9s %9.1f %7s\n", sh, rows[i].trans_b ? "NT" : "NN", rows[i].best, "-",
                   rows[i].cublas, "-");
    }
    printf("(TFLOP/s = 2 M N K / median time)\n");
}

int main(int argc, char **argv)
{
    shape one = {0, 0, 0, 1};
    if (argc > 1 && gemm_parse_shape(argv[1], &one.m, &one.n, &one.k) != 0) {
        fprintf(stderr, "usage: bench_gemm [MxNxK]\n");
        return 2;
    }
    tl_ctx *ctx = bench_open("bench_gemm");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    int nfull;
    const tl_gemm_schedule *full = gemm_default_sweep(&nfull);
    gemm_sweep_entry *entries = calloc((size_t)nfull, sizeof *entries);
    summary_row rows[2 * N_ANCHORS];
    int nrows = 0;
    if (!entries)
        return 1;
    const shape *shapes = argc > 1 ? &one : anchor_shapes;
    int nshapes = argc > 1 ? 1 : N_ANCHORS;
    for (int trans_b = 1; trans_b >= 0; trans_b--) {
        tl_gemm_schedule top[TOP], tried[TOP + 1];
        int ntop = 0;
        for (int i = 0; i < nshapes; i++) {
            const shape *s = &shapes[i];
            if (s->full) {
                run_shape(ctx, s, trans_b, full, nfull, entries, &rows[nrows++]);
                if (s->m == 4096 && s->n == 4096 && s->k == 4096)
                    ntop = pick_top(entries, nfull, top);
            } else {
                /* the top of 4096^3 (without a passing one, the library's
                 * first), and the op's own choice for this shape (the
                 * ping-pong kernel for a short K) when it is not among them */
                int n = ntop ? ntop : 1;
                memcpy(tried, ntop ? top : full, (size_t)n * sizeof *tried);
                tl_gemm_desc d = {.m = s->m, .n = s->n, .k = s->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                                  .trans_b = trans_b};
                tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d);
                bool seen = false;
                for (int j = 0; j < n; j++)
                    seen |= memcmp(&tried[j], &own, sizeof own) == 0;
                if (!seen && own.block_m)
                    tried[n++] = own;
                run_shape(ctx, s, trans_b, tried, n, entries, &rows[nrows++]);
            }
        }
    }
    print_summary(rows, nrows);
    free(entries);
    tl_ctx_destroy(ctx);
    return 0;
}
