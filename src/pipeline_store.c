/*
 * pipeline_store.c - the epilogue's TMA stores: after the warp-specialised
 * loop of a persistent CTA (pipeline_ws.c calls
 * tli_pipe_epilogue_tma_stores), the block's accumulator goes to global
 * memory through a staging tile in shared memory and TMA.
 */
#include "pipeline.h"

#include <string.h>

/* ------------------------------------------ the epilogue's TMA stores */

/* In persistent CTAs (tl_use_persistent) a block's store of its
 * accumulator to global memory after the pipelined loop goes through a
 * staging tile in shared memory and TMA: the consumers write the tile's
 * 64-column blocks into it (128-byte swizzled rows, TMA's layout) and one
 * thread stores them, the store draining while the next block's main loop
 * runs. Stored from registers, every CTA's tile went out at once after its
 * main loop while the tensor cores waited. The staging tile holds at most
 * STAGE_BYTES; a wider tile goes in rounds, each waiting for the previous
 * round's reads of it. Ragged edges need nothing: TMA writes no element
 * outside the tensor. The copy qualifies when it is the whole f32
 * accumulator (a wgmma or mma.sync layout: adjacent column pairs) to a
 * tile of a global tensor of 16-bit elements, at the consumers' top level
 * (every consumer thread reaches its barriers), of at most 256 rows and
 * whole 64-column blocks, and nothing else in the block writes that tensor
 * or reads it afterwards (shares_target). Not taken when the block's
 * groups take turns (tl_use_pingpong on 256 or 384 threads): the rounds' block
 * barriers would realign the groups at every block's end, and the turns'
 * whole point is that they run half a turn apart. Their accumulators go
 * out from registers (16 bytes a lane where the rows allow: emit_tile.c's
 * quad stores). */
#define STAGE_BYTES 32768

static bool tma_storable(piper *P, int32_t s)
{
    const tli_ir *ir = P->ir;
    const tli_snode *n = tli_S(ir, s);
    if (n->op != S_COPY || n->a0 >= 0 || n->a1 <= 0 || !tli_R(ir, n->a1)->tiled)
        return false;
    int32_t fb = -n->a0, gb = tli_copy_buf(ir, n->a1);
    const tli_bnode *f = B(P, fb), *g = B(P, gb);
    tli_frag_kind k = P->L->frag[fb].kind;
    return f->scope == B_FRAGMENT && f->dtype == TL_F32 && f->rank == 2 && (k == FRAG_WGMMA || k == FRAG_MMA) &&
           g->scope == B_GLOBAL && !g->array_count && (g->dtype == TL_BF16 || g->dtype == TL_F16) && g->rank >= 2 &&
           g->rank <= 4 && f->cshape[0] <= 256 && f->cshape[1] % 64 == 0;
}

/* The 64-column blocks of accumulator f that one staging round holds: as
 * many as fit STAGE_BYTES, at least one, at most all of them. */
static int64_t staging_blocks(const tli_bnode *f)
{
    int64_t blocks = f->cshape[1] / 64, per = STAGE_BYTES / (f->cshape[0] * 128);
    return per < 1 ? 1 : per > blocks ? blocks : per;
}

/* Copy s as rounds of staging-tile writes and TMA stores (see above). */
static void tma_store_rounds(piper *P, int32_t s)
{
    tli_lowered *L = P->L;
    tli_ir *ir = P->ir;
    int32_t fb = -ir->s.v[s].a0, gb = tli_copy_buf(ir, ir->s.v[s].a1);
    int64_t rows = B(P, fb)->cshape[0], blocks = B(P, fb)->cshape[1] / 64, per = staging_blocks(B(P, fb));
    int rounds = (int)((blocks + per - 1) / per);
    tli_bnode st = {.scope = B_SHARED, .dtype = B(P, gb)->dtype, .rank = 2, .cshape = {rows, per * 64}};
    /* tl_stage_ and the tensor's name; past what the name holds, the
     * tensor's number after a double underscore, which no user name has */
    if (strlen(B(P, gb)->name) + sizeof "tl_stage_" <= sizeof st.name)
        tli_fmt(st.name, sizeof st.name, "tl_stage_%s", B(P, gb)->name);
    else
        tli_fmt(st.name, sizeof st.name, "tl_stage__%d", (int)gb);
    int32_t stage = tli_low_buf(L, &st);
    if (!stage)
        return;
    L->smem[stage].blocked = true;
    L->smem[stage].stages = 1;
    int32_t tid0 = bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0));
    int32_t tail = 0; /* the previous round's store */
    for (int r = 0; r < rounds && L->st == TL_OK; r++) {
        int32_t c = s;
        if (r > 0) { /* a copy of the statement for each further round, after the last */
            tli_snode n = ir->s.v[s];
            n.next = n.name = 0;
            c = tli_low_stmt(L, &n);
            if (!c)
                return;
            tli_pipe_splice_around(P, tail, 0, c);
        }
        tli_snode *n = &ir->s.v[c];
        n->x[TLI_X_COPY_HOW] = CP_TMA_STORE;
        n->x[TLI_X_COPY_STAGING] = stage;
        n->x[TLI_X_COPY_ROUND] = r;
        n->x[TLI_X_COPY_MANAGED] = 1;
        tli_list before = {0}, after = {0};
        /* the staging tile is free: the last store's reads of it are done */
        tli_list_add(L, &before, tli_low_if(P->L, tid0, tli_pipe_op_stmt(P, S_BULK_WAIT, 0, 1), 0));
        tli_list_op(L, &before, S_BARRIER, 0, 0);
        tli_list_op(L, &after, S_FENCE_ASYNC, 0, 0); /* each thread's writes, for TMA to read */
        tli_list_op(L, &after, S_BARRIER, 0, 0);     /* every thread's part written and fenced */
        tli_snode ts = {.op = S_TMA_STORE, .buf = stage, .a0 = c};
        tail = tli_low_if(P->L, tid0, tli_low_stmt(L, &ts), 0);
        tli_list_add(L, &after, tail);
        tli_pipe_splice_around(P, c, before.first, after.first);
        if (r == 0)
            tli_low_note(L, c, "through a staging tile of %lld x %lld and TMA stores, %d round%s: the store drains "
                         "under the next block's main loop", (long long)rows, (long long)(per * 64), rounds,
                         rounds > 1 ? "s" : "");
    }
}

/* Whether the statements of list `first` other than s could race with a
 * TMA store of s into buffer b: any access after s (the store is still in
 * flight) or a write before it (ordinary stores and TMA's would need a
 * proxy fence between them). Reads before s are done by then. */
static bool shares_target(piper *P, int32_t first, int32_t s, int32_t b)
{
    probe q;
    bool hit = true; /* out of memory: the lowering fails */
    if (tli_pipe_probe_init(P, &q)) {
        hit = false;
        bool after = false;
        for (int32_t x = first; x && !hit; x = P->ir->s.v[x].next) {
            if (x == s) {
                after = true;
                continue;
            }
            bool reads, writes;
            tli_pipe_probe_stmt(P, &q, x, b, &reads, &writes);
            hit = writes || (after && reads);
        }
    }
    tli_pipe_probe_free(&q);
    return hit;
}

/* Whether copy s's staging tile fits beside the shared memory the kernel
 * already takes (FlashAttention's ring leaves no room for one). */
static bool staging_fits(piper *P, int32_t s)
{
    const tli_bnode *f = B(P, -P->ir->s.v[s].a0);
    int64_t align = P->L->wgmma ? 1024 : 128;
    int64_t bytes = (f->cshape[0] * staging_blocks(f) * 128 + align - 1) / align * align;
    return tli_smem_need(P->L) + bytes <= P->L->smem_limit;
}

/* Whether expression e has one value in the whole block: made of
 * constants, parameters, the block's indices and lets of such (no thread,
 * loop variable or load). Each node of the DAG is looked at once; false
 * when out of memory (the stores then stay as they are). */
static bool block_uniform(const tli_ir *ir, int32_t e)
{
    tli_marks m = {0};
    bool ok = tli_marks_begin(&m, ir);
    if (ok)
        tli_marks_push(&m, e);
    for (int32_t x; ok && (x = tli_marks_next(&m));) {
        const tli_enode *n = tli_E(ir, x);
        if (n->op == E_LOOP_VAR || n->op == E_LOAD || (n->op == E_THREAD && n->ival < TH_RAW_BX))
            ok = false; /* the thread's own, a loop's or memory's */
        else if (n->op == E_LET)
            tli_marks_push(&m, tli_S(ir, n->loop)->a0);
        else
            tli_marks_push_operands(&m, ir, x);
    }
    ok = ok && !m.oom;
    tli_marks_free(&m);
    return ok;
}

/* Copy s of list `first` through TMA, where it can (tma_storable) and
 * nothing else in the list races with it; whether it did. */
static bool tma_store_in(piper *P, int32_t first, int32_t s)
{
    if (!tma_storable(P, s) || shares_target(P, first, s, tli_copy_buf(P->ir, P->ir->s.v[s].a1)) ||
        !staging_fits(P, s))
        return false;
    tma_store_rounds(P, s);
    return true;
}

/* The accumulator stores of the consumers' top level (body: the block body
 * with the pipelined loop lowered) that go through TMA, and those one
 * level down in an if whose condition is the same for the whole block (its
 * block barriers then meet): a kernel whose blocks end in one of two ways
 * (FlashAttention's whole blocks and parts of the keys). Whether any did. */
bool tli_pipe_epilogue_tma_stores(piper *P, int32_t body)
{
    if (P->L->safe || !tli_target_has_copy(&P->L->target, COPY_ENGINE_TMA))
        return false;
    tli_ir *ir = P->ir;
    bool any = false;
    for (int32_t s = body; s && P->L->st == TL_OK;) {
        int32_t next = ir->s.v[s].next;
        any |= tma_store_in(P, body, s);
        if (ir->s.v[s].op == S_IF && block_uniform(ir, ir->s.v[s].a0)) {
            int32_t br[2] = {ir->s.v[s].body, ir->s.v[s].orelse};
            for (int i = 0; i < 2; i++)
                for (int32_t x = br[i]; x && P->L->st == TL_OK;) {
                    int32_t xn = ir->s.v[x].next;
                    /* the rest of the block (the if as one statement) and the other branch
                     * (written before: it runs in other blocks) leave the target alone */
                    int32_t b = ir->s.v[x].op == S_COPY && ir->s.v[x].a1 > 0 ? tli_copy_buf(ir, ir->s.v[x].a1) : 0;
                    if (b && !shares_target(P, body, s, b) && !shares_target(P, br[1 - i], 0, b))
                        any |= tma_store_in(P, br[i], x);
                    x = xn;
                }
        }
        s = next;
    }
    return any;
}
