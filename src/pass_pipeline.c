/*
 * pass_pipeline.c - how tiles reach shared memory, and how a tl_pipelined
 * loop keeps them coming while the tensor cores work.
 *
 * Every tl_copy gets an engine (lowered.h, tli_copy_how): 16-byte cp.async
 * for global -> shared tiles whose rows are whole 16-byte chunks (unless
 * the safe variant is being built), register-wise copies for fragments,
 * element by element otherwise. A standalone cp.async copy is committed
 * here; the sync pass waits for it just before its tile is next touched.
 *
 * A tl_pipelined loop's leading global -> shared copies are its producers,
 * the rest its consumers. Four schedules, the first that applies:
 *
 * warp-specialised (tl_use_warp_specialize, tl_use_pingpong): one more
 *   warpgroup joins the block as the producer and fills a ring of slots
 *   that the consumers wait for and release on mbarriers (pipeline_ws.c).
 * TMA: consumers that are all wgmma gemms, producers TMA can fetch: thread
 *   0 issues the boxes `stages - 1` iterations ahead on per-slot mbarriers,
 *   warps release slots on the empty mbarriers; no block barrier in the loop.
 * cp.async: `stages - 1` iterations of copies in flight (one fewer when the
 *   consumers leave a wgmma group running into the next iteration), one
 *   commit group per iteration, one block barrier per iteration.
 * plain: copies, barrier, consumers (the sync pass places the barriers).
 *
 * This file: the copy engines, what a pipelined loop holds (analyse), the
 * tiles a cluster's blocks share (multicast), the TMA, cp.async and plain
 * schedules, and the pass's walk. The rest of the pass: pipeline.h (its
 * state and what its files share), pipeline_build.c (the statements the
 * schedules are made of), pipeline_ws.c (the warp-specialised schedule),
 * pipeline_turns.c (consumer warpgroups taking turns on the tensor cores),
 * pipeline_store.c (the epilogue's TMA stores).
 */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- copy engines */

/* Whether global -> shared copy s can move whole 16-byte chunks: the same
 * element type, at most 2-D, rows of whole chunks. The launch checks that
 * the tensor suits it (16-byte aligned base, strides and row length); a
 * tensor of tl_param_tensor_array has a base the launch cannot see. */
bool tli_pipe_chunkable(piper *P, int32_t s)
{
    const tli_snode *n = tli_S(P->ir, s);
    const tli_bnode *g = B(P, tli_copy_buf(P->ir, n->a0)), *t = B(P, tli_copy_buf(P->ir, n->a1));
    int per = 16 / esize(t);
    return !P->L->safe && !g->array_count && tli_target_has_copy(&P->L->target, COPY_ENGINE_CP_ASYNC) &&
           g->dtype == t->dtype && t->rank <= 2 && g->rank >= t->rank && t->cshape[t->rank - 1] % per == 0;
}

/* Whether producer s can be TMA boxes: a 2-D tile of 16-bit or 8-bit
 * elements into a buffer of 128-byte swizzled rows (blocked, or exactly one
 * 128-byte row wide), of at most 256 rows. */
bool tli_pipe_tma_ok(piper *P, int32_t s)
{
    const tli_snode *n = tli_S(P->ir, s);
    int32_t sb = tli_copy_buf(P->ir, n->a1);
    const tli_bnode *g = B(P, tli_copy_buf(P->ir, n->a0)), *t = B(P, sb);
    if (P->L->safe || g->array_count || !tli_target_has_copy(&P->L->target, COPY_ENGINE_TMA))
        return false;
    if (g->rank < 2 || g->rank > 4 || t->rank != 2 || g->dtype != t->dtype || esize(t) > 2 || t->cshape[0] > 256)
        return false;
    int64_t w = tli_row128((tl_dtype)t->dtype);
    return P->L->smem[sb].blocked ? t->cshape[1] % w == 0 : t->cshape[1] == w;
}

static void set_how(piper *P, int32_t s, tli_copy_how how) { P->ir->s.v[s].x[TLI_X_COPY_HOW] = how; }

/* The engine of a copy outside any pipeline (and the default inside one). */
static tli_copy_how copy_engine(piper *P, int32_t s)
{
    const tli_snode *n = tli_S(P->ir, s);
    int32_t sb = tli_copy_buf(P->ir, n->a0), db = tli_copy_buf(P->ir, n->a1);
    int ss = B(P, sb)->scope, ds = B(P, db)->scope;
    if (ss == B_FRAGMENT || ds == B_FRAGMENT) {
        int32_t f = ss == B_FRAGMENT ? sb : db;
        int other = ss == B_FRAGMENT ? ds : ss;
        return P->L->frag[f].kind == FRAG_ROWS && other == B_GLOBAL ? CP_FRAG_ROWS : CP_FRAG;
    }
    if (ss == B_GLOBAL && ds == B_SHARED && tli_pipe_chunkable(P, s))
        return CP_ASYNC16;
    return CP_ELEMENTS;
}

/* Whether register copy s may store 16 bytes a lane (TLI_X_COPY_QUADS):
 * an f32 accumulator of mma.sync or wgmma whose warp tile has column
 * blocks in fours, to 16-bit elements of a global tensor. */
static bool quad_stores(piper *P, int32_t s)
{
    const tli_snode *n = tli_S(P->ir, s);
    int32_t fb = tli_copy_buf(P->ir, n->a0), gb = tli_copy_buf(P->ir, n->a1);
    const tli_frag_layout *fl = &P->L->frag[fb];
    return B(P, fb)->scope == B_FRAGMENT && B(P, gb)->scope == B_GLOBAL && B(P, fb)->dtype == TL_F32 &&
           esize(B(P, gb)) == 2 && (fl->kind == FRAG_MMA || fl->kind == FRAG_WGMMA) && fl->w.nt % 4 == 0;
}

/* Engines for the copies of a body; a standalone cp.async copy is
 * followed by its commit. */
static void assign_engines(piper *P, int32_t first)
{
    for (int32_t s = first; s && P->L->st == TL_OK; s = P->ir->s.v[s].next) {
        tli_snode *n = &P->ir->s.v[s];
        if (n->op == S_COPY && !n->x[TLI_X_COPY_HOW]) {
            tli_copy_how how = copy_engine(P, s);
            set_how(P, s, how);
            n->x[TLI_X_COPY_QUADS] = how == CP_FRAG && quad_stores(P, s);
            if (how == CP_ASYNC16) {
                tli_snode c = {.op = S_CP_COMMIT};
                int32_t id = tli_low_stmt(P->L, &c);
                if (!id)
                    return;
                P->ir->s.v[id].next = P->ir->s.v[s].next;
                P->ir->s.v[id].parent = P->ir->s.v[s].parent;
                P->ir->s.v[s].next = id;
                s = id;
            }
        }
        if (P->ir->s.v[s].op != S_PIPELINED) {
            assign_engines(P, P->ir->s.v[s].body);
            assign_engines(P, P->ir->s.v[s].orelse);
        }
    }
}

/* ---------------------------------------------------------- analysis */

static bool analyse(piper *P, int32_t sid, pipe_info *pi)
{
    tli_ir *ir = P->ir;
    memset(pi, 0, sizeof *pi);
    pi->sid = sid;
    pi->S = tli_S(ir, sid)->a1;
    pi->var = tli_S(ir, sid)->vars[0];
    pi->extent = tli_S(ir, sid)->a0;
    pi->first_consumer = tli_first_consumer(ir, sid);
    for (int32_t c = tli_S(ir, sid)->body; c != pi->first_consumer; c = tli_S(ir, c)->next) {
        if (pi->nprod == TLI_MAX_TMA) {
            tli_low_fail(P->L, TL_ERR_UNSUPPORTED, "tl_pipelined: more than %d copies lead the loop", TLI_MAX_TMA);
            return false;
        }
        int32_t sb = tli_copy_buf(ir, tli_S(ir, c)->a1);
        for (int i = 0; i < pi->nprod; i++)
            if (pi->bufs[i] == sb) {
                tli_low_fail(P->L, TL_ERR_UNSUPPORTED, "tl_pipelined: two copies of one iteration fill '%s'",
                             B(P, sb)->name);
                return false;
            }
        pi->prod[pi->nprod] = c;
        pi->bufs[pi->nprod++] = sb;
        pi->stage_bytes += tli_buf_elems(B(P, sb)) * esize(B(P, sb));
    }
    /* the trailing wgmma gemms run on into the next iteration: the run of them that ends the body */
    pi->all_wgmma = pi->first_consumer != 0;
    for (int32_t c = pi->first_consumer; c; c = tli_S(ir, c)->next) {
        bool wg = tli_S(ir, c)->op == S_GEMM && tli_S(ir, c)->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16;
        pi->all_wgmma &= wg;
        pi->tail = wg ? pi->tail + 1 : 0;
    }
    return true;
}

bool tli_pipe_staged_buf(const pipe_info *pi, int32_t b)
{
    for (int i = 0; i < pi->nprod; i++)
        if (pi->bufs[i] == b)
            return true;
    return false;
}

/* ------------------------------------------------ TMA multicast */

/* The cluster axes along which producer c's source tile is the same for
 * every block (TLI_X_COPY_MCAST), or 0 when the blocks cannot share it:
 * no cluster, or the tile's rows do not split into one slice per member of
 * the multicast group in whole 8-row atoms of the 128-byte swizzle (a
 * slice then lands where the whole box would have put those rows). */
static int multicast_axes(piper *P, int32_t c)
{
    const tli_ir *ir = P->ir;
    const tli_rnode *r = tli_R(ir, tli_S(ir, c)->a0);
    int axes = 0, g = 1;
    for (int a = 0; a < 3 && r->tiled; a++) {
        if (ir->cluster[a] < 2)
            continue;
        bool uses = false;
        for (int d = 0; d < B(P, r->buf)->rank && !uses; d++)
            uses = tli_uses_block_axis(P->L, r->idx[d], a);
        if (!uses) {
            axes |= 1 << a;
            g *= ir->cluster[a];
        }
    }
    int64_t rows = B(P, tli_copy_buf(ir, tli_S(ir, c)->a1))->cshape[0];
    return axes && rows % (8 * g) == 0 ? axes : 0;
}

/* Which producers of a TMA-fed loop the blocks of a cluster share. Only a
 * loop at the kernel's top level: the cluster barriers a shared ring needs
 * must be reached by every thread of every block. */
static void plan_multicast(piper *P, pipe_info *pi, bool tma)
{
    if (!tma || tli_cluster_size(P->ir) < 2 || !P->L->target.clusters || tli_S(P->ir, pi->sid)->parent)
        return;
    for (int i = 0; i < pi->nprod; i++)
        pi->cluster_ring |= (pi->mcast[i] = multicast_axes(P, pi->prod[i])) != 0;
}

/* ------------------------------------------------------- the schedules */

/* Ordinary copies, each with the engine it would have outside the loop
 * (16-byte cp.async where its rows are whole chunks, then its commit: the
 * sync pass waits for it before the consumers touch its tile, and places
 * the barriers), then the consumers. Element by element, a 16-bit 128x128
 * tile took 64 scalar loads a thread: FlashAttention with two stages and
 * no producer ran 20 TFLOP/s (bench/NOTES.md session 33). */
static void schedule_plain(piper *P, const pipe_info *pi)
{
    tli_list body = {0};
    for (int i = 0; i < pi->nprod; i++)
        P->L->smem[pi->bufs[i]].stages = 1;
    tli_list copies = {0};
    for (int i = 0; i < pi->nprod; i++) { /* (engine 0: assign_engines picks it) */
        int32_t c = tli_pipe_producer_copy(P, pi, pi->prod[i], pi->var, 0, 0, 0, 0, 0);
        if (c)
            P->ir->s.v[c].x[TLI_X_COPY_MANAGED] = 0;
        tli_list_add(P->L, &copies, c);
    }
    assign_engines(P, copies.first);
    tli_list_add(P->L, &body, copies.first);
    tli_list_add(P->L, &body, pi->first_consumer);
    P->ir->s.v[pi->sid].op = S_SERIAL;
    tli_pipe_set_body(P, pi->sid, body.first);
    tli_low_note(P->L, pi->sid, "tl_pipelined: plain loop, copies then compute");
}

static void schedule_cp_async(piper *P, const pipe_info *pi)
{
    tli_lowered *L = P->L;
    int S = pi->S, ahead = pi->tail ? S - 2 : S - 1;
    if (ahead < 1) {
        schedule_plain(P, pi);
        return;
    }
    tli_list out = {0};
    int32_t n_let = tli_low_let(L, "tl_n#", pi->extent);
    tli_list_add(L, &out, n_let);
    int32_t n = let_ref(P, n_let);
    /* prologue: the first `ahead` iterations in flight, one group each */
    int32_t sv;
    int32_t pro = tli_pipe_mk_serial(P, I32(P, ahead), &sv, true);
    tli_list pb = {0};
    tli_list_add(L, &pb,
                 tli_low_if(P->L, bin(P, E_LT, sv, n), tli_pipe_producers(P, pi, sv, sv, CP_ASYNC16, 0, 0), 0));
    tli_list_op(L, &pb, S_CP_COMMIT, 0, 0);
    tli_pipe_set_body(P, pro, pb.first);
    tli_list_add(L, &out, pro);
    /* the loop */
    tli_list body = {0};
    tli_list_op(L, &body, S_CP_WAIT, 0, ahead - 1);
    if (L->async_proxy)
        tli_list_op(L, &body, S_FENCE_ASYNC, 0, 0);
    tli_list_op(L, &body, S_BARRIER, 0, 0);
    int32_t next_let = tli_low_let(L, "tl_next#", bin(P, E_ADD, pi->var, I(P, ahead)));
    int32_t next = let_ref(P, next_let);
    tli_list refill = {0};
    tli_list_add(L, &refill, next_let);
    tli_list_add(L, &refill,
                 tli_low_if(P->L, bin(P, E_LT, next, n),
                                tli_pipe_producers(P, pi, next, bin(P, E_MOD, next, I(P, S)), CP_ASYNC16, 0, 0), 0));
    tli_list_op(L, &refill, S_CP_COMMIT, 0, 0);
    int32_t consume = tli_pipe_consumers_at(P, pi, bin(P, E_MOD, pi->var, I(P, S)));
    if (pi->tail) { /* wgmma first, then the copies into the slot two iterations back */
        tli_list_add(L, &body, consume);
        tli_pipe_wgmma_wait(P, &body, pi->tail);
        tli_list_add(L, &body, refill.first);
    } else {
        tli_list_add(L, &body, refill.first);
        tli_list_add(L, &body, consume);
    }
    /* the loop keeps its id, so its variable (the consumers use it) stays valid */
    tli_low_note(L, pi->sid, "tl_pipelined: %d stages, cp.async copies %d iteration%s ahead%s", S, ahead,
                 ahead > 1 ? "s" : "", pi->tail ? " of the wgmma" : "");
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = n;
    tli_pipe_set_body(P, pi->sid, body.first);
    tli_list tail = {0};
    if (pi->tail)
        tli_pipe_wgmma_wait(P, &tail, 0);
    tli_list_op(L, &tail, S_CP_WAIT, 0, 0);
    tli_pipe_splice_around(P, pi->sid, out.first, tail.first);
}

static void schedule_tma(piper *P, const pipe_info *pi)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    ring r = {tli_pipe_mbar_array(P, "tl_full", S), tli_pipe_mbar_array(P, "tl_empty", S)};
    if (!r.full || !r.empty)
        return;
    tli_list out = {0};
    tli_list_add(L, &out, tli_pipe_ring_init(P, pi, r.full, 1));
    tli_list_add(L, &out, tli_pipe_empty_init(P, pi, r.empty, P->ir->threads / 32));
    tli_pipe_init_done(P, pi, &out);
    int32_t n_let = tli_low_let(L, "tl_n#", pi->extent);
    tli_list_add(L, &out, n_let);
    int32_t n = let_ref(P, n_let);
    int32_t tid0 = bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0));
    /* prologue: thread 0 fills the first S - 1 slots */
    int32_t sv;
    int32_t pro = tli_pipe_mk_serial(P, bin(P, E_MIN, I(P, S - 1), n), &sv, false);
    tli_pipe_set_body(P, pro, tli_pipe_producers(P, pi, sv, sv, CP_TMA, r.full, 0));
    tli_list_add(L, &out, tli_low_if(P->L, tid0, pro, 0));
    /* the loop */
    tli_list body = {0};
    int32_t slot = bin(P, E_MOD, pi->var, I(P, S));
    tli_list_add(L, &body, tli_low_mbar(P->L, S_MBAR_WAIT, r.full, slot, parity(P, pi->var, S)));
    tli_list_add(L, &body, tli_pipe_consumers_at(P, pi, slot));
    tli_pipe_wgmma_wait(P, &body, pi->tail);
    int32_t prev = bin(P, E_MOD, bin(P, E_SUB, pi->var, I(P, 1)), I(P, S));
    tli_list_add(L, &body, tli_pipe_release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), r.empty, prev));
    /* thread 0 refills the slot the previous iteration released */
    tli_list refill = {0};
    int32_t it_let = tli_low_let(L, "tl_it#", bin(P, E_ADD, pi->var, I(P, S - 1)));
    int32_t it = let_ref(P, it_let);
    int32_t sn_let = tli_low_let(L, "tl_sn#", bin(P, E_MOD, it, I(P, S)));
    int32_t sn = let_ref(P, sn_let);
    tli_list_add(L, &refill, it_let);
    tli_list_add(L, &refill, sn_let);
    tli_list_add(L, &refill,
                 tli_low_if(P->L, bin(P, E_GE, it, I(P, S)),
                                tli_low_mbar(P->L, S_MBAR_WAIT, r.empty, sn, parity(P, bin(P, E_SUB, it, I(P, S)), S)),
                                0));
    tli_list_add(L, &refill, tli_pipe_producers(P, pi, it, sn, CP_TMA, r.full, 0));
    int32_t more = bin(P, E_LT, bin(P, E_ADD, pi->var, I(P, S - 1)), n);
    tli_list_add(L, &body, tli_low_if(P->L, bin(P, E_AND, tid0, more), refill.first, 0));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = n;
    tli_pipe_set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid, "tl_pipelined: %d stages fed by TMA (thread 0), mbarriers instead of block barriers%s", S,
                 pi->cluster_ring ? "; tiles the cluster's blocks share are multicast, slots freed cluster-wide" : "");
    tli_list tail = {0};
    tli_pipe_wgmma_wait(P, &tail, 0);
    tli_pipe_loop_exit_sync(P, pi, &tail);
    tli_pipe_splice_around(P, pi->sid, out.first, tail.first);
}

/* ---------------------------------------------------------------- pass */

static void lower_pipelined(piper *P, int32_t sid)
{
    pipe_info pi;
    if (!analyse(P, sid, &pi))
        return;
    for (int i = 0; i < pi.nprod; i++) {
        set_how(P, pi.prod[i], CP_ELEMENTS);
        if (pi.S > P->L->smem[pi.bufs[i]].stages) /* multi-buffered: one copy per slot */
            P->L->smem[pi.bufs[i]].stages = pi.S;
    }
    assign_engines(P, pi.first_consumer);
    if (P->ir->warp_specialize || P->ir->pingpong) {
        plan_multicast(P, &pi, tli_pipe_producer_engine(P, &pi) == CP_TMA);
        tli_pipe_schedule_warp_specialized(P, &pi);
        return;
    }
    bool tma = pi.S >= 2 && pi.all_wgmma, chunks = pi.S >= 2;
    for (int i = 0; i < pi.nprod; i++) {
        tma &= tli_pipe_tma_ok(P, pi.prod[i]);
        chunks &= tli_pipe_chunkable(P, pi.prod[i]);
    }
    plan_multicast(P, &pi, tma);
    if (tma)
        schedule_tma(P, &pi);
    else if (chunks)
        schedule_cp_async(P, &pi);
    else
        schedule_plain(P, &pi);
}

static void walk(piper *P, int32_t first)
{
    for (int32_t s = first; s && P->L->st == TL_OK;) {
        int32_t next = P->ir->s.v[s].next;
        if (P->ir->s.v[s].op == S_PIPELINED) {
            lower_pipelined(P, s);
        } else {
            walk(P, P->ir->s.v[s].body);
            walk(P, P->ir->s.v[s].orelse);
        }
        s = next;
    }
}

void tli_pass_pipeline(tli_lowered *L)
{
    piper P = {.L = L, .ir = &L->ir};
    assign_engines(&P, L->ir.body);
    walk(&P, L->ir.body);
}
