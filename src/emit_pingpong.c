/*
 * emit_pingpong.c - the persistent, warp-specialised form of a kernel
 * (tl_use_pingpong) whose body is: statements, one TMA-fed wgmma pipelined
 * loop, statements. One CTA of 384 threads walks blocks (tiles)
 * t(p) = p / 2 * 2 G + 2 blockIdx.x + p % 2, p = 0, 1, ... (G CTAs):
 *
 *   warpgroup 2, the producer: one thread issues the TMA boxes of every
 *     k tile of every block of the CTA into a ring of S stages, in order,
 *     each stage refilled once its empty barrier says it was read;
 *   warpgroups 0 and 1, the consumers: warpgroup w runs the whole block
 *     body for blocks p = w, w + 2, ..., as a 128-thread block of its own
 *     (tl_tid = threadIdx.x % 128, a named barrier for __syncthreads,
 *     private copies of the shared buffers outside the pipeline). Its k
 *     tiles are the ring's entries p n .. p n + n - 1 (n k tiles per block).
 *
 * The consumers take turns on the tensor cores: warpgroup w starts its
 * main loop of block p once the other has finished issuing that of block
 * p - 1 (an mbarrier pair, tl_order), and then the other runs its epilogue
 * (the statements after the loop) while w's wgmma run. The turn-taking
 * also keeps each full-barrier wait at most one phase ahead: when w waits
 * for ring entry q, every entry before p n has been consumed, and the
 * entries of its own block are waited in order, so entry q - S has
 * completed its phase and the parity test cannot be fooled by q - 2 S.
 *
 * Registers: the producer drops to 40 per thread (setmaxnreg), the
 * consumers rise to 232: 2 x 128 x 232 + 128 x 40 = 64512 of 65536.
 */
#include "emit_internal.h"

#include <string.h>

#define CONSUMER_REGS 232
#define PRODUCER_REGS 40

static bool expr_uses_block(const tli_ir *ir, int32_t e)
{
    if (!e)
        return false;
    const tli_enode *n = tli_E(ir, e);
    if (n->op == E_BLOCK_IDX || n->op == E_LOOP_VAR || n->op == E_LOAD)
        return true;
    for (int i = 0; i < 3; i++)
        if (n->a[i] && expr_uses_block(ir, n->a[i]))
            return true;
    return false;
}

static int count_pipelines(const tli_ir *ir, int32_t first)
{
    int n = 0;
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *x = tli_S(ir, s);
        n += x->op == S_PIPELINED;
        n += count_pipelines(ir, x->body) + count_pipelines(ir, x->orelse);
    }
    return n;
}

/* The top-level pipelined loop (0 if none) and its first consumer. */
static int32_t the_pipeline(const tli_ir *ir, int32_t *first_consumer)
{
    for (int32_t s = ir->body; s; s = tli_S(ir, s)->next)
        if (tli_S(ir, s)->op == S_PIPELINED) {
            int32_t c = tli_S(ir, s)->body;
            while (c && tli_is_producer(ir, c))
                c = tli_S(ir, c)->next;
            *first_consumer = c;
            return s;
        }
    return 0;
}

bool tli_pingpong_ok(emitter *E, char *why, size_t len)
{
    const tli_ir *ir = E->ir;
    int32_t fc = 0, sid = the_pipeline(ir, &fc);
    const tli_snode *s = sid ? tli_S(ir, sid) : NULL, *g = fc ? tli_S(ir, fc) : NULL;
    const char *no = NULL;
    if (strcmp(E->target, "sm_90a") != 0)
        no = "it needs the sm_90a target (wgmma, TMA, setmaxnreg)";
    else if (ir->threads != 128)
        no = "a block must be one warpgroup: 128 threads";
    else if (ir->grid[2])
        no = "the grid must be 2-D";
    else if (!sid || count_pipelines(ir, ir->body) != 1)
        no = "the body needs exactly one tl_pipelined loop, at its top level";
    else if (s->a1 < 3 || 2 * s->a1 + 2 > 32)
        no = "the pipelined loop needs 3 to 15 stages";
    else if (!g || g->op != S_GEMM || g->next || !E->plan.frag[g->gemm[2]].w.wgmma)
        no = "the pipelined loop's compute must be one tl_gemm on wgmma";
    else if (expr_uses_block(ir, s->a0))
        no = "the pipelined loop's extent must not depend on the block or on memory";
    if (!no) {
        int copies = 0;
        for (int32_t c = s->body; c != fc; c = tli_S(ir, c)->next, copies++)
            if (!tli_e_tma_copy_ok(E, c))
                no = "every copy of the pipelined loop must be a TMA box (2-D, 128-byte rows of 16-bit elements)";
        if (!no && copies > TLI_MAX_TMA)
            no = "too many copies in the pipelined loop";
    }
    if (no)
        tli_fmt(why, len, "%s", no);
    return no == NULL;
}

/* Inside a loop over p: the block t(p) of this CTA (leaving the loop past
 * the last) and its tl_bx, tl_by, as tl_use_swizzle maps them. */
static void emit_block_of(emitter *E)
{
    int P = E->ir->swizzle;
    tli_e_line(E, "const long long tl_t = tl_p / 2 * 2 * gridDim.x + 2 * blockIdx.x + tl_p %% 2;");
    tli_e_line(E, "if (tl_t >= tl_ntiles)");
    tli_e_line(E, "    break;");
    if (P) {
        tli_e_line(E, "const long long tl_panel = %dLL * tl_gx, tl_row0 = tl_t / tl_panel * %dLL;", P, P);
        tli_e_line(E, "const long long tl_rows = tl_min(%dLL, tl_gy - tl_row0);", P);
        tli_e_line(E, "const long long tl_by = tl_row0 + tl_t %% tl_panel %% tl_rows, tl_bx = tl_t %% tl_panel / tl_rows;");
    } else {
        tli_e_line(E, "const long long tl_bx = tl_t %% tl_gx, tl_by = tl_t / tl_gx;");
    }
}

/* The producer warpgroup's branch: one thread issues the TMA boxes of every
 * k tile of every block of the CTA, in order. */
static void emit_producer(emitter *E, const tli_snode *s, int32_t fc)
{
    int S = s->a1;
    tli_e_line(E, "tl_setmaxnreg_dec<%d>();", PRODUCER_REGS);
    tli_e_line(E, "if (tl_tid == 0) {");
    E->indent++;
    tli_e_line(E, "long long tl_seq = 0;");
    tli_e_line(E, "for (long long tl_p = 0;; ++tl_p) {");
    E->indent++;
    emit_block_of(E);
    tli_e_line(E, "const long long tl_n = %s;", tli_e_single(E, s->a0));
    tli_e_line(E, "for (long long tl_j = 0; tl_j < tl_n; ++tl_j, ++tl_seq) {");
    E->indent++;
    tli_e_line(E, "const int tl_sn = (int)((unsigned)tl_seq %% %du);", S);
    tli_e_line(E, "if (tl_seq >= %d)", S);
    tli_e_line(E, "    tl_mbar_wait(&tl_empty[tl_sn], ((unsigned)tl_seq / %du - 1) & 1);", S);
    tli_e_tma_stage(E, s, fc, "tl_j", "tl_sn", "&tl_full[tl_sn]");
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_pingpong_body(emitter *E)
{
    const tli_ir *ir = E->ir;
    int32_t fc = 0, sid = the_pipeline(ir, &fc);
    const tli_snode *s = tli_S(ir, sid);
    int S = s->a1;
    tli_e_line(E, "// tl_use_pingpong: persistent blocks, a TMA producer warpgroup, two consumer warpgroups taking turns");
    tli_e_line(E, "const long long tl_gx = %s, tl_gy = %s, tl_ntiles = tl_gx * tl_gy;",
               tli_e_single(E, ir->grid[0]), ir->grid[1] ? tli_e_single(E, ir->grid[1]) : "1LL");
    tli_e_line(E, "unsigned long long *const tl_full = (unsigned long long *)(tl_smem + %lld);",
               (long long)E->plan.barriers);
    tli_e_line(E, "unsigned long long *const tl_empty = tl_full + %d, *const tl_order = tl_full + %d;", S, 2 * S);
    tli_e_line(E, "if (threadIdx.x == 0) {");
    tli_e_line(E, "    for (int tl_s = 0; tl_s < %d; ++tl_s) {", S);
    tli_e_line(E, "        tl_mbar_init(&tl_full[tl_s], 1);");
    tli_e_line(E, "        tl_mbar_init(&tl_empty[tl_s], 4); // the 4 warps of the consuming warpgroup");
    tli_e_line(E, "    }");
    tli_e_line(E, "    tl_mbar_init(&tl_order[0], 4);");
    tli_e_line(E, "    tl_mbar_init(&tl_order[1], 4);");
    tli_e_line(E, "    tl_mbar_init_fence();");
    tli_e_line(E, "}");
    tli_e_line(E, "__syncthreads();");
    tli_e_line(E, "if (tl_wg == 2) { // producer: the TMA boxes of every k tile of every block, in order");
    E->indent++;
    emit_producer(E, s, fc);
    E->indent--;
    tli_e_line(E, "} else { // consumers: warpgroup tl_wg runs blocks p = tl_wg, tl_wg + 2, ...");
    E->indent++;
    tli_e_line(E, "tl_setmaxnreg_inc<%d>();", CONSUMER_REGS);
    tli_e_line(E, "for (long long tl_p = tl_wg;; tl_p += 2) {");
    E->indent++;
    emit_block_of(E);
    /* the shared buffers outside the pipeline: this warpgroup's copy */
    for (int32_t b = 1; b < ir->b.n; b++)
        if (tli_B(ir, b)->scope == B_SHARED && !E->stage[b])
            E->stage[b] = "tl_wg";
    E->pingpong = true;
    tli_e_stmts(E, ir->body);
    /* the next block's statements rewrite this warpgroup's buffers */
    tli_e_sync(E);
    E->pingpong = false;
    for (int32_t b = 1; b < ir->b.n; b++)
        if (E->stage[b] && strcmp(E->stage[b], "tl_wg") == 0)
            E->stage[b] = NULL;
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_pingpong_pipelined(emitter *E, int32_t sid, int32_t fc)
{
    const tli_ir *ir = E->ir;
    const tli_snode *s = tli_S(ir, sid);
    int S = s->a1;
    const char *v = tli_e_fmt(E, "i%d_0", sid);
    tli_e_line(E, "{ // tl_pipelined, consumer side: ring entries tl_p n .. tl_p n + n - 1 of %d stages", S);
    E->indent++;
    tli_e_line(E, "const long long tl_n%d = %s, tl_seq0 = tl_p * tl_n%d;", sid, tli_e_single(E, s->a0), sid);
    tli_e_line(E, "if (tl_p > 0) // the other warpgroup has issued its main loop of block p - 1");
    tli_e_line(E, "    tl_mbar_wait(&tl_order[tl_wg], (unsigned)((tl_p - 1) / 2) & 1);");
    tli_e_line(E, "for (long long %s = 0; %s < tl_n%d; ++%s) {", v, v, sid, v);
    E->indent++;
    /* ring positions in 32 bits: a 64-bit division by a stage count that is
     * not a power of two costs dozens of instructions on the issue path */
    tli_e_line(E, "const unsigned tl_seq = (unsigned)(tl_seq0 + %s), tl_st = tl_seq %% %du;", v, S);
    tli_e_line(E, "tl_mbar_wait(&tl_full[tl_st], (tl_seq / %du) & 1);", S);
    tli_e_consumer_stage(E, s, fc, "tl_st");
    tli_e_gemm_wgmma(E, tli_S(ir, fc), 1);
    tli_e_consumer_stage(E, s, fc, NULL);
    tli_e_line(E, "if (%s > 0 && tl_lane == 0) // the wgmma of the previous entry is done", v);
    tli_e_line(E, "    tl_mbar_arrive(&tl_empty[(tl_seq - 1) %% %du]);", S);
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "if (tl_lane == 0) // the other warpgroup's turn");
    tli_e_line(E, "    tl_mbar_arrive(&tl_order[1 - tl_wg]);");
    tli_e_line(E, "tl_wgmma_wait<0>();");
    tli_e_line(E, "if (tl_n%d > 0 && tl_lane == 0)", sid);
    tli_e_line(E, "    tl_mbar_arrive(&tl_empty[(unsigned)(tl_seq0 + tl_n%d - 1) %% %du]);", sid, S);
    E->indent--;
    tli_e_line(E, "}");
}
