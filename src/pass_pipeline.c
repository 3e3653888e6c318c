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
 *   warpgroup joins the block as the producer; it issues the producers of
 *   every iteration into a ring of `stages` slots (TMA boxes by one thread,
 *   or cp.async / plain copies by its 128 threads), each slot's "full"
 *   mbarrier completing when it has landed; the consumers wait for a slot,
 *   run everything else the loop holds (any number of tl_gemm, element-wise
 *   loops, reductions) and release it on its "empty" mbarrier. With
 *   ping-pong, blocks of one warpgroup run two at a time in persistent CTAs
 *   and take turns on the tensor cores (an mbarrier pair), so one's epilogue
 *   overlaps the other's main loop.
 * TMA: consumers that are all wgmma gemms, producers TMA can fetch: thread
 *   0 issues the boxes `stages - 1` iterations ahead on per-slot mbarriers,
 *   warps release slots on the empty mbarriers; no block barrier in the loop.
 * cp.async: `stages - 1` iterations of copies in flight (one fewer when the
 *   consumers leave a wgmma group running into the next iteration), one
 *   commit group per iteration, one block barrier per iteration.
 * plain: copies, barrier, consumers (the sync pass places the barriers).
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

typedef struct piper {
    tli_lowered *L;
    tli_ir *ir;
    int32_t sk_acc;   /* tl_use_stream_k: the accumulator the units' partial sums are of */
    int32_t sk_steps; /* ... and the K steps of a block (at least 1) */
    int32_t run;      /* a persistent CTA's blocks whose loops run different trip counts: the trip
                         count (TLI_X_TILE_RUN), else 0 */
    int32_t counter[3]; /* tl_use_persistent(k, 2): the slots of the blocks' numbers, their full
                           and empty mbarriers (TLI_X_TILE_COUNTER), else 0 */
} piper;

static const tli_bnode *B(piper *P, int32_t b) { return tli_B(P->ir, b); }
static int esize(const tli_bnode *b) { return (int)tl_dtype_size((tl_dtype)b->dtype); }
static int32_t I(piper *P, int64_t v) { return tli_low_int(P->L, v, TL_I64); }
static int32_t I32(piper *P, int64_t v) { return tli_low_int(P->L, v, TL_I32); }
static int32_t bin(piper *P, tli_eop op, int32_t a, int32_t b) { return tli_low_bin(P->L, op, a, b); }
static int32_t let_ref(piper *P, int32_t let) { return tli_low_let_ref(P->L, let); }

/* ------------------------------------------------------- copy engines */

/* Whether global -> shared copy s can move whole 16-byte chunks: the same
 * element type, at most 2-D, rows of whole chunks. The launch checks that
 * the tensor suits it (16-byte aligned base, strides and row length); a
 * tensor of tl_param_tensor_array has a base the launch cannot see. */
static bool chunkable(piper *P, int32_t s)
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
static bool tma_ok(piper *P, int32_t s)
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
    if (ss == B_GLOBAL && ds == B_SHARED && chunkable(P, s))
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

/* ----------------------------------------------------------- helpers */

typedef struct pipe_info {
    int32_t sid;           /* the S_PIPELINED statement */
    int32_t var;           /* its loop variable (an E_LOOP_VAR) */
    int32_t extent;        /* its trip count (the builder's expression) */
    int32_t first_consumer;
    int S;                 /* stages */
    int nprod;
    int32_t prod[TLI_MAX_TMA];
    int32_t bufs[TLI_MAX_TMA]; /* their shared destinations */
    int64_t stage_bytes;   /* bytes one iteration's producers bring */
    int tail;              /* wgmma groups the consumers leave running at the end of an iteration */
    bool all_wgmma;        /* the consumers are wgmma gemms and nothing else */
    int mcast[TLI_MAX_TMA]; /* each producer's TLI_X_COPY_MCAST (plan_multicast) */
    bool cluster_ring;     /* some producer multicasts: the ring's slots are freed cluster-wide */
} pipe_info;

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
    /* the trailing wgmma gemms run on into the next iteration */
    int32_t consumers[256];
    int nc = 0;
    pi->all_wgmma = pi->first_consumer != 0;
    for (int32_t c = pi->first_consumer; c; c = tli_S(ir, c)->next) {
        bool wg = tli_S(ir, c)->op == S_GEMM && tli_S(ir, c)->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16;
        pi->all_wgmma &= wg;
        if (nc < 256)
            consumers[nc++] = c;
    }
    for (int i = nc - 1; i >= 0; i--) {
        const tli_snode *c = tli_S(ir, consumers[i]);
        if (c->op != S_GEMM || c->x[TLI_X_GEMM_ATOM] != MMA_WGMMA_M64NNK16)
            break;
        pi->tail++;
    }
    return true;
}

/* Replaces every use of loop variable var in the expressions of statement
 * s itself by expression with. */
static void shift_one(piper *P, int32_t s, int32_t var, int32_t with)
{
    tli_ir *ir = P->ir;
    tli_snode n = ir->s.v[s];
    switch ((tli_sop)n.op) {
    case S_STORE: {
        int rank = tli_B(ir, n.buf)->rank;
        int32_t idx[TL_MAX_RANK];
        for (int d = 0; d < rank; d++)
            idx[d] = tli_low_subst(P->L, ir->pool.v[n.idx + d], var, with);
        int32_t at = tli_ir_add_indices(ir, idx, rank);
        if (at < 0)
            tli_low_fail(P->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        n.idx = at;
        n.value = tli_low_subst(P->L, n.value, var, with);
        break;
    }
    case S_SERIAL: case S_IF: n.a0 = tli_low_subst(P->L, n.a0, var, with); break;
    case S_FILL: n.value = n.value ? tli_low_subst(P->L, n.value, var, with) : 0; break;
    case S_COPY:
        for (int side = 0; side < 2; side++) {
            int32_t operand = side ? n.a1 : n.a0;
            if (operand <= 0 || !tli_R(ir, operand)->tiled)
                continue;
            tli_rnode rr = *tli_R(ir, operand);
            for (int d = 0; d < tli_B(ir, rr.buf)->rank; d++)
                rr.idx[d] = tli_low_subst(P->L, rr.idx[d], var, with);
            int32_t id = tli_ir_add_region(ir, &rr);
            if (!id)
                tli_low_fail(P->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
            if (side)
                n.a1 = id;
            else
                n.a0 = id;
        }
        break;
    default: break;
    }
    ir->s.v[s].idx = n.idx;
    ir->s.v[s].value = n.value;
    ir->s.v[s].a0 = n.a0;
    ir->s.v[s].a1 = n.a1;
}

/* A copy of producer c for iteration `it` (an expression), engine how,
 * completing on mbarrier bar[bar_idx] when TMA. */
static int32_t producer_copy(piper *P, const pipe_info *pi, int32_t c, int32_t it, tli_copy_how how, int32_t bar,
                             int32_t bar_idx, int threads, int mcast)
{
    tli_snode n = *tli_S(P->ir, c);
    n.next = n.body = n.orelse = 0;
    memset(n.x, 0, sizeof n.x);
    n.x[TLI_X_COPY_HOW] = how;
    n.x[TLI_X_COPY_BAR] = bar;
    n.x[TLI_X_COPY_BAR_IDX] = bar_idx;
    n.x[TLI_X_COPY_THREADS] = threads;
    n.x[TLI_X_COPY_MANAGED] = 1;
    n.x[TLI_X_COPY_MCAST] = how == CP_TMA ? mcast : 0;
    int32_t id = tli_low_stmt(P->L, &n);
    if (id && it) /* (it 0: a copy outside the loop, as it stands) */
        shift_one(P, id, pi->var, it);
    return id;
}

/* bar[idx] expects `bytes` more of TMA's transactions. */
static int32_t mbar_expect(piper *P, int32_t bar, int32_t idx, int64_t bytes)
{
    tli_snode e = {.op = S_MBAR_EXPECT, .buf = bar, .a0 = idx, .a1 = (int32_t)bytes};
    return tli_low_stmt(P->L, &e);
}

/* S_STAGE(bufs of pi, stage) { body } */
static int32_t stage_of(piper *P, const pipe_info *pi, int32_t stage, int32_t body)
{
    tli_snode n = {.op = S_STAGE, .a0 = stage, .body = body, .rank = 0};
    for (int i = 0; i < pi->nprod; i++) {
        if (n.rank == TL_MAX_RANK) { /* more buffers than one node holds: nest */
            int32_t inner = tli_low_stmt(P->L, &n);
            tli_set_parent(P->L, body, inner);
            n = (tli_snode){.op = S_STAGE, .a0 = stage, .body = inner};
            body = inner;
        }
        n.vars[n.rank++] = pi->bufs[i];
    }
    int32_t id = tli_low_stmt(P->L, &n);
    tli_set_parent(P->L, body, id);
    return id;
}

/* The producers of iteration `it` into slot `stage` whose group in `of`
 * is g (of NULL: all of them; ring_split), each with engine how (TMA:
 * completing on bar[bar_idx], after the expect of `bytes` there). */
static int32_t producers_of(piper *P, const pipe_info *pi, const int *of, int g, int32_t it, int32_t stage,
                            tli_copy_how how, int32_t bar, int32_t bar_idx, int64_t bytes, int threads)
{
    tli_list l = {0};
    if (how == CP_TMA)
        tli_list_add(P->L, &l, mbar_expect(P, bar, bar_idx, bytes));
    for (int i = 0; i < pi->nprod; i++)
        if (!of || of[i] == g)
            tli_list_add(P->L, &l, producer_copy(P, pi, pi->prod[i], it, how, bar, bar_idx, threads, pi->mcast[i]));
    return stage_of(P, pi, stage, l.first);
}

/* Every producer, on bar[stage]. */
static int32_t producers(piper *P, const pipe_info *pi, int32_t it, int32_t stage, tli_copy_how how, int32_t bar,
                         int threads)
{
    return producers_of(P, pi, NULL, 0, it, stage, how, bar, stage, pi->stage_bytes, threads);
}

static int32_t mk_if(piper *P, int32_t cond, int32_t body, int32_t orelse)
{
    tli_snode n = {.op = S_IF, .a0 = cond, .body = body, .orelse = orelse};
    int32_t id = tli_low_stmt(P->L, &n);
    tli_set_parent(P->L, body, id);
    tli_set_parent(P->L, orelse, id);
    return id;
}

/* for (v = 0; v < extent; ++v) body, with a fresh variable; *var gets it. */
static int32_t mk_serial(piper *P, int32_t extent, int32_t *var, bool unroll)
{
    tli_snode n = {.op = S_SERIAL, .a0 = extent, .rank = 1, .x = {unroll}};
    int32_t id = tli_low_stmt(P->L, &n);
    tli_enode v = {.op = E_LOOP_VAR, .dtype = TL_I64, .loop = id, .scope = id};
    *var = tli_low_expr(P->L, &v);
    if (id)
        P->ir->s.v[id].vars[0] = *var;
    return id;
}

static void set_body(piper *P, int32_t s, int32_t body)
{
    P->ir->s.v[s].body = body;
    tli_set_parent(P->L, body, s);
}

static int32_t mbar_array(piper *P, const char *name, int64_t n)
{
    tli_bnode b = {.scope = B_MBAR, .dtype = TL_I64, .rank = 1, .cshape = {n}};
    tli_fmt(b.name, sizeof b.name, "%s", name);
    return tli_low_buf(P->L, &b);
}

static int32_t mbar_init(piper *P, int32_t bar, int count)
{
    tli_snode n = {.op = S_MBAR_INIT, .buf = bar, .a1 = count};
    n.x[TLI_X_MBAR_FENCE] = P->L->target.mbarrier_init_fence;
    return tli_low_stmt(P->L, &n);
}

static int32_t mbar_op(piper *P, tli_sop op, int32_t bar, int32_t idx, int32_t parity_or_n)
{
    tli_snode n = {.op = (uint8_t)op, .buf = bar, .a0 = idx};
    if (op == S_MBAR_WAIT)
        n.value = parity_or_n;
    else
        n.a1 = parity_or_n;
    return tli_low_stmt(P->L, &n);
}

/* (x / S) % 2: the parity of the phase slot x % S is in at position x */
static int32_t parity(piper *P, int32_t x, int S) { return bin(P, E_MOD, bin(P, E_DIV, x, I(P, S)), I(P, 2)); }

static int32_t op_stmt(piper *P, tli_sop op, int32_t a0, int32_t a1)
{
    tli_snode n = {.op = (uint8_t)op, .a0 = a0, .a1 = a1};
    return tli_low_stmt(P->L, &n);
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

/* A ring's mbarriers, fenced for the cluster when other blocks will
 * complete transactions or arrive on them. */
static int32_t ring_init(piper *P, const pipe_info *pi, int32_t bar, int count)
{
    int32_t id = mbar_init(P, bar, count);
    if (id && pi->cluster_ring)
        P->ir->s.v[id].x[TLI_X_MBAR_FENCE] = 1;
    return id;
}

/* A ring's empty mbarriers: an arrival per consumer warp, of every block of
 * the cluster when other blocks multicast into the slots. */
static int32_t empty_init(piper *P, const pipe_info *pi, int32_t bar, int warps)
{
    return ring_init(P, pi, bar, warps * (pi->cluster_ring ? tli_cluster_size(P->ir) : 1));
}

/* A warp releases slot idx of empty mbarrier bar when `when` holds (0:
 * always): its lane 0 arrives on its own block's mbarrier, or, when other
 * blocks multicast into the ring, lane r on block r's (each block's
 * producer refills the slot in all of its group: every block must have
 * freed it), the cluster's arrivals side by side rather than one lane's
 * in turn. */
static int32_t release_if(piper *P, const pipe_info *pi, int32_t when, int32_t bar, int32_t idx)
{
    int32_t lane = tli_low_thread(P->L, TH_LANE);
    int32_t who = pi->cluster_ring ? bin(P, E_LT, lane, I32(P, tli_cluster_size(P->ir)))
                                   : bin(P, E_EQ, lane, I32(P, 0));
    int32_t id = mbar_op(P, S_MBAR_ARRIVE, bar, idx, 0);
    if (id && pi->cluster_ring) {
        P->ir->s.v[id].x[TLI_X_MBAR_CLUSTER] = 1;
        P->ir->s.v[id].value = lane; /* the block it arrives at */
    }
    return mk_if(P, when ? bin(P, E_AND, when, who) : who, id, 0);
}

/* After the mbarriers' initialisation: a block barrier, or a cluster one
 * when other blocks will arrive on them and write into the ring. */
static void init_done(piper *P, const pipe_info *pi, tli_list *l)
{
    tli_list_op(P->L, l, pi->cluster_ring ? S_CLUSTER_SYNC : S_BARRIER, 0, 0);
}

/* After the main loop, when the ring is the cluster's: a cluster barrier,
 * so that no block leaves while another may still arrive on its mbarriers
 * (every block's last arrivals come before its own barrier arrival, which
 * releases them). Here rather than at the kernel's end: the release would
 * wait there for the epilogue's stores to complete (MEMBAR.ALL.GPU, +1.4
 * us of a 10 us GEMM on the H200); the producer arrives at the end of its
 * own branch. */
static void loop_exit_sync(piper *P, const pipe_info *pi, tli_list *l)
{
    if (pi->cluster_ring)
        tli_list_op(P->L, l, S_CLUSTER_SYNC, 0, 0);
}

/* Puts the chain `before` ahead of statement s and `after` behind it, in
 * the list that holds s. */
static void splice_around(piper *P, int32_t s, int32_t before, int32_t after)
{
    tli_ir *ir = P->ir;
    int32_t next = ir->s.v[s].next;
    if (after) {
        int32_t last = after;
        for (int32_t x = after; x; x = ir->s.v[x].next)
            ir->s.v[x].parent = ir->s.v[s].parent, last = x;
        ir->s.v[last].next = next;
        ir->s.v[s].next = after;
    }
    if (before) {
        int32_t last = before;
        for (int32_t x = before; x; x = ir->s.v[x].next)
            last = x;
        ir->s.v[last].next = 0;
        int32_t rest = ir->s.v[s].next;
        ir->s.v[s].next = 0;
        int32_t first = before;
        ir->s.v[last].next = s;
        ir->s.v[s].next = rest;
        /* the list that held s now holds before .. s .. */
        int32_t parent = ir->s.v[s].parent;
        int32_t *link = &ir->body;
        if (parent) {
            link = &ir->s.v[parent].body;
            for (int32_t x = ir->s.v[parent].orelse; x; x = ir->s.v[x].next)
                if (x == s)
                    link = &ir->s.v[parent].orelse;
        }
        while (*link != s)
            link = &ir->s.v[*link].next;
        *link = first;
        for (int32_t x = before; x != s; x = ir->s.v[x].next)
            ir->s.v[x].parent = parent;
    }
}

/* tl_j0, tl_j1, tl_sk_base: the stream-K unit the tile loop is at */
static int32_t sk_value(piper *P, tli_thread_value v)
{
    tli_enode n = {.op = E_THREAD, .dtype = TL_I64, .ival = v};
    return tli_low_expr(P->L, &n);
}

static int32_t cast32(piper *P, int32_t e)
{
    tli_enode n = {.op = E_CAST, .dtype = TL_I32, .a = {e}, .scope = tli_E(P->ir, e)->scope};
    return tli_low_expr(P->L, &n);
}

/* A persistent loop over this CTA's blocks p = start, start + step, ...;
 * *p gets its variable. The body is set later. */
static int32_t mk_tile_loop(piper *P, int32_t start, int step, int counter_role, int32_t *p)
{
    tli_snode n = {.op = S_TILE_LOOP, .a0 = start, .a1 = step, .rank = 1};
    n.x[TLI_X_TILE_PERSIST] = P->L->launch.persistent;
    if (P->counter[0]) { /* blocks from the counter: the producer takes them, the consumers read them */
        n.x[TLI_X_TILE_COUNTER] = counter_role;
        n.x[TLI_X_TILE_SLOTS] = P->counter[0];
        n.x[TLI_X_TILE_SLOT_FULL] = P->counter[1];
        n.x[TLI_X_TILE_SLOT_EMPTY] = P->counter[2];
    }
    if (P->ir->stream_k) { /* units of K steps: the trip count cuts the blocks' steps into them */
        n.x[TLI_X_TILE_STREAMK] = 1;
        n.value = P->sk_steps;
    } else if (P->run) { /* running sums of the blocks' trip counts */
        n.x[TLI_X_TILE_RUN] = 1;
        n.value = P->run;
    }
    int32_t id = tli_low_stmt(P->L, &n);
    tli_enode v = {.op = E_LOOP_VAR, .dtype = TL_I64, .loop = id, .scope = id};
    *p = tli_low_expr(P->L, &v);
    if (id)
        P->ir->s.v[id].vars[0] = *p;
    return id;
}

/* A wgmma wait on list l, in kernels with wgmma gemms: at most n groups in
 * flight after it. */
static void wgmma_wait(piper *P, tli_list *l, int n)
{
    if (P->L->wgmma)
        tli_list_op(P->L, l, S_WGMMA_WAIT, 0, n);
}

/* The consumers of pi wrapped in their slot: S_STAGE(bufs, stage) {...}. */
static int32_t consumers_at(piper *P, const pipe_info *pi, int32_t stage)
{
    int32_t first = pi->first_consumer;
    return first ? stage_of(P, pi, stage, first) : 0;
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
        int32_t c = producer_copy(P, pi, pi->prod[i], pi->var, 0, 0, 0, 0, 0);
        if (c)
            P->ir->s.v[c].x[TLI_X_COPY_MANAGED] = 0;
        tli_list_add(P->L, &copies, c);
    }
    assign_engines(P, copies.first);
    tli_list_add(P->L, &body, copies.first);
    tli_list_add(P->L, &body, pi->first_consumer);
    P->ir->s.v[pi->sid].op = S_SERIAL;
    set_body(P, pi->sid, body.first);
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
    int32_t pro = mk_serial(P, I32(P, ahead), &sv, true);
    tli_list pb = {0};
    tli_list_add(L, &pb, mk_if(P, bin(P, E_LT, sv, n), producers(P, pi, sv, sv, CP_ASYNC16, 0, 0), 0));
    tli_list_op(L, &pb, S_CP_COMMIT, 0, 0);
    set_body(P, pro, pb.first);
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
    tli_list_add(L, &refill, mk_if(P, bin(P, E_LT, next, n),
                                   producers(P, pi, next, bin(P, E_MOD, next, I(P, S)), CP_ASYNC16, 0, 0), 0));
    tli_list_op(L, &refill, S_CP_COMMIT, 0, 0);
    int32_t consume = consumers_at(P, pi, bin(P, E_MOD, pi->var, I(P, S)));
    if (pi->tail) { /* wgmma first, then the copies into the slot two iterations back */
        tli_list_add(L, &body, consume);
        wgmma_wait(P, &body, pi->tail);
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
    set_body(P, pi->sid, body.first);
    tli_list tail = {0};
    if (pi->tail)
        wgmma_wait(P, &tail, 0);
    tli_list_op(L, &tail, S_CP_WAIT, 0, 0);
    splice_around(P, pi->sid, out.first, tail.first);
}

/* Bookkeeping shared by the two mbarrier schedules. */
typedef struct ring {
    int32_t full, empty;  /* B_MBAR arrays of S */
} ring;

static void schedule_tma(piper *P, const pipe_info *pi)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    ring r = {mbar_array(P, "tl_full", S), mbar_array(P, "tl_empty", S)};
    if (!r.full || !r.empty)
        return;
    tli_list out = {0};
    tli_list_add(L, &out, ring_init(P, pi, r.full, 1));
    tli_list_add(L, &out, empty_init(P, pi, r.empty, P->ir->threads / 32));
    init_done(P, pi, &out);
    int32_t n_let = tli_low_let(L, "tl_n#", pi->extent);
    tli_list_add(L, &out, n_let);
    int32_t n = let_ref(P, n_let);
    int32_t tid0 = bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0));
    /* prologue: thread 0 fills the first S - 1 slots */
    int32_t sv;
    int32_t pro = mk_serial(P, bin(P, E_MIN, I(P, S - 1), n), &sv, false);
    set_body(P, pro, producers(P, pi, sv, sv, CP_TMA, r.full, 0));
    tli_list_add(L, &out, mk_if(P, tid0, pro, 0));
    /* the loop */
    tli_list body = {0};
    int32_t slot = bin(P, E_MOD, pi->var, I(P, S));
    tli_list_add(L, &body, mbar_op(P, S_MBAR_WAIT, r.full, slot, parity(P, pi->var, S)));
    tli_list_add(L, &body, consumers_at(P, pi, slot));
    wgmma_wait(P, &body, pi->tail);
    int32_t prev = bin(P, E_MOD, bin(P, E_SUB, pi->var, I(P, 1)), I(P, S));
    tli_list_add(L, &body, release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), r.empty, prev));
    /* thread 0 refills the slot the previous iteration released */
    tli_list refill = {0};
    int32_t it_let = tli_low_let(L, "tl_it#", bin(P, E_ADD, pi->var, I(P, S - 1)));
    int32_t it = let_ref(P, it_let);
    int32_t sn_let = tli_low_let(L, "tl_sn#", bin(P, E_MOD, it, I(P, S)));
    int32_t sn = let_ref(P, sn_let);
    tli_list_add(L, &refill, it_let);
    tli_list_add(L, &refill, sn_let);
    tli_list_add(L, &refill, mk_if(P, bin(P, E_GE, it, I(P, S)),
                                   mbar_op(P, S_MBAR_WAIT, r.empty, sn, parity(P, bin(P, E_SUB, it, I(P, S)), S)), 0));
    tli_list_add(L, &refill, producers(P, pi, it, sn, CP_TMA, r.full, 0));
    int32_t more = bin(P, E_LT, bin(P, E_ADD, pi->var, I(P, S - 1)), n);
    tli_list_add(L, &body, mk_if(P, bin(P, E_AND, tid0, more), refill.first, 0));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = n;
    set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid, "tl_pipelined: %d stages fed by TMA (thread 0), mbarriers instead of block barriers%s", S,
                 pi->cluster_ring ? "; tiles the cluster's blocks share are multicast, slots freed cluster-wide" : "");
    tli_list tail = {0};
    wgmma_wait(P, &tail, 0);
    loop_exit_sync(P, pi, &tail);
    splice_around(P, pi->sid, out.first, tail.first);
}

/* ----------------------------------------------- warp specialisation */

/* Registers per thread after setmaxnreg. The CTA holds what it was
 * launched with: 64K registers over all its threads, a multiple of 8 per
 * thread (ptxas gives these kernels their launch bound's share: 168 at
 * 384 threads, 128 at 512), and setmaxnreg only moves them between
 * warpgroups: a raise the pool cannot cover never completes (a CTA that
 * hangs). The producer keeps 40 (as CUTLASS's producers do) and the
 * consumers share the rest in multiples of 8, at most 240; where the
 * rounding leaves them short of the next multiple of 8 by no more than the
 * producer can give down to 32, it gives it: three consumer warpgroups get
 * 160 with a producer of 32, not 152 with 40 (at 152 ptxas serialises
 * FlashAttention D 64's wgmma, its C7512 advisory: a gemm's accumulator
 * and operands in flight do not fit). */
#define PRODUCER_REGS 40
#define PRODUCER_REGS_MIN 32

static int reg_pool(int consumer_threads)
{
    int threads = consumer_threads + 128;
    return 65536 / threads / 8 * 8 * threads;
}

static int consumer_regs(int consumer_threads)
{
    int pool = reg_pool(consumer_threads);
    int r = (pool - 128 * PRODUCER_REGS) / consumer_threads / 8 * 8;
    if (r >= 240)
        return 240;
    return pool - (r + 8) * consumer_threads >= 128 * PRODUCER_REGS_MIN ? r + 8 : r;
}

/* The producer's registers beside consumer_regs's: what the consumers
 * leave of the pool, at most 40, a multiple of 8. */
static int producer_regs(int consumer_threads)
{
    int left = (reg_pool(consumer_threads) - consumer_regs(consumer_threads) * consumer_threads) / 128 / 8 * 8;
    return left > PRODUCER_REGS ? PRODUCER_REGS : left;
}

/* The producer engine of a warp-specialised loop: TMA when every producer
 * can be boxes, else cp.async when every one is chunkable, else plain
 * copies (the safe variant). */
static tli_copy_how producer_engine(piper *P, const pipe_info *pi)
{
    bool tma = true, chunks = true;
    for (int i = 0; i < pi->nprod; i++) {
        tma &= tma_ok(P, pi->prod[i]);
        chunks &= chunkable(P, pi->prod[i]);
    }
    return tma ? CP_TMA : chunks ? CP_ASYNC16 : CP_ELEMENTS;
}

/* Rings of their own, in a pipeline of at most two slots whose tiles are
 * read at different points of the loop body. FlashAttention's consumers
 * read K in the first gemm and V in the second: on one ring a slot's K
 * stays held until V's
 * gemm is done, and with two stages the producer could not fetch the next
 * tile before the iteration's end (two stages lost a fifth, bench/NOTES.md
 * session 4). Producers with the same first and last reader form a group;
 * each group has full and empty mbarriers of its own (slot s of group g at
 * g S + s). The consumers release slots at the release point: the first
 * statement that reads the accumulator of the wgmma issued just before it,
 * where the sync pass would wait for every wgmma group anyway (an explicit
 * wait of depth 0 goes there). Groups whose readers all come before that
 * point are released there in their own iteration, the others there in the
 * next one (and after the loop). They wait for every group's slot at the
 * iteration's top, as for one ring: a wait just before V's gemm, inside
 * the ping-pong turn, cost 5 % (session 14). With three or more slots the
 * third covers the one ring's late release, and rings of their own cost
 * 3 % there (measured): one ring. TMA producers of one block's ring only
 * (no multicast), not the rotated loop, not stream-K. */
typedef struct ring_split {
    int G;                      /* groups (1: one ring for every tile, none of this) */
    int of[TLI_MAX_TMA];        /* each producer's group (all 0 when G is 1) */
    bool early[TLI_MAX_TMA];    /* released in its own iteration */
    int64_t bytes[TLI_MAX_TMA]; /* a slot's bytes */
    int32_t at;                 /* the release point */
} ring_split;

/* Slot `slot` of group g's ring: the mbarriers' index. */
static int32_t ring_slot(piper *P, int32_t slot, int g, int S) { return g ? bin(P, E_ADD, slot, I32(P, g * S)) : slot; }

/* The buffers statements read and write, the sets allocated once for a
 * walk. Out of memory, the lowering fails (a silent fallback would change
 * the code) and probe_init answers false. */
typedef struct probe {
    tli_bufset rd, wr;
} probe;

static void probe_free(probe *q)
{
    tli_bufset_free(&q->rd);
    tli_bufset_free(&q->wr);
}

static bool probe_init(piper *P, probe *q)
{
    *q = (probe){0};
    if (tli_bufset_init(&q->rd, P->ir->b.n) && tli_bufset_init(&q->wr, P->ir->b.n))
        return true;
    probe_free(q); /* (nothing left to free for a caller that gives up) */
    tli_low_fail(P->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return false;
}

/* The buffers statement x reads (q->rd) and writes (q->wr). */
static void probe_fill(piper *P, probe *q, int32_t x)
{
    tli_bufset_clear(&q->rd);
    tli_bufset_clear(&q->wr);
    tli_stmt_access(P->L, x, &q->rd, &q->wr);
}

/* Whether statement x reads buffer b (*reads) and writes it (*writes). */
static void probe_stmt(piper *P, probe *q, int32_t x, int32_t b, bool *reads, bool *writes)
{
    probe_fill(P, q, x);
    *reads = tli_bufset_has(&q->rd, b);
    *writes = tli_bufset_has(&q->wr, b);
}

static bool reads_acc(const tli_bufset *rd, const tli_bufset *wr, const tli_snode *g)
{
    int32_t a = g->gemm[2], a2 = tli_gemm_acc2(g);
    return tli_bufset_has(rd, a) || tli_bufset_has(wr, a) || (a2 && (tli_bufset_has(rd, a2) || tli_bufset_has(wr, a2)));
}

/* The loop body's release point (see ring_split): the first statement at
 * its top level that reads the accumulator of a wgmma issued before it;
 * *at_pos is its position. 0 where there is none, where that statement
 * reads an older group's only (a wait that leaves younger groups running is
 * not a full one), or past 16 wgmmas. */
static int32_t release_point(piper *P, const pipe_info *pi, int *at_pos)
{
    tli_ir *ir = P->ir;
    probe q;
    if (!probe_init(P, &q))
        return 0;
    int32_t wg[16], at = 0;
    int nw = 0, pos = 0;
    for (int32_t s = pi->first_consumer; s; s = ir->s.v[s].next, pos++) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_GEMM && n->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16) {
            if (nw == 16)
                break;
            wg[nw++] = s;
            continue;
        }
        if (!nw)
            continue;
        probe_fill(P, &q, s);
        bool older = false;
        for (int j = 0; j < nw - 1; j++)
            older |= reads_acc(&q.rd, &q.wr, tli_S(ir, wg[j]));
        if (reads_acc(&q.rd, &q.wr, tli_S(ir, wg[nw - 1]))) {
            at = s, *at_pos = pos;
            break;
        }
        if (older)
            break;
    }
    probe_free(&q);
    return at;
}

/* sp->G stays 1 where the loop does not qualify (see above). */
static void plan_split(piper *P, const pipe_info *pi, ring_split *sp, tli_copy_how how)
{
    tli_ir *ir = P->ir;
    *sp = (ring_split){.G = 1, .bytes = {pi->stage_bytes}};
    if (!P->L->wgmma || how != CP_TMA || pi->S > 2 || pi->cluster_ring || ir->pingpong == 2 || ir->stream_k)
        return;
    int at_pos = -1;
    int32_t at = release_point(P, pi, &at_pos);
    probe q;
    if (!at || !probe_init(P, &q))
        return;
    int first[TLI_MAX_TMA], last[TLI_MAX_TMA];
    bool bad = false;
    for (int i = 0; i < pi->nprod; i++)
        first[i] = last[i] = -1;
    int pos = 0;
    for (int32_t s = pi->first_consumer; s && !bad; s = ir->s.v[s].next, pos++) {
        probe_fill(P, &q, s);
        for (int i = 0; i < pi->nprod; i++) {
            bad |= tli_bufset_has(&q.wr, pi->bufs[i]);
            if (tli_bufset_has(&q.rd, pi->bufs[i])) {
                if (first[i] < 0)
                    first[i] = pos;
                last[i] = pos;
            }
        }
    }
    probe_free(&q);
    for (int i = 0; i < pi->nprod; i++)
        bad |= first[i] < 0; /* a tile nothing reads: keep the one ring */
    if (bad)
        return;
    /* the groups, in the order of their first readers (the producer fetches them in that order) */
    ring_split t = {.at = at};
    for (int f = 0; f < pos; f++)
        for (int l = f; l < pos; l++) {
            int g = -1;
            for (int i = 0; i < pi->nprod; i++) {
                if (first[i] != f || last[i] != l)
                    continue;
                if (g < 0) {
                    g = t.G++;
                    t.early[g] = l < at_pos;
                }
                t.of[i] = g;
                t.bytes[g] += tli_buf_elems(B(P, pi->bufs[i])) * esize(B(P, pi->bufs[i]));
            }
        }
    if (t.G > 1)
        *sp = t;
}

typedef struct ws_plan {
    ring_split sp;       /* the tiles' rings (sp.G of them) */
    ring r;
    int32_t order;       /* ping-pong's turn mbarriers (0: none) */
    tli_copy_how how;    /* the producer's engine */
    int persistent;      /* blocks a persistent CTA runs at once (0: not persistent): 2 for
                            ping-pong's blocks of one warpgroup, one per consumer group; 1 for
                            tl_use_persistent, every consumer group on the same block */
    bool turns;          /* the consumer warpgroups of one block take turns at each tl_gemm */
    int groups;          /* with turns: how many (2 or 3), in a ring: 0, 1, .., 0, .. */
    int consumer_threads; /* the CTA's, every consumer warpgroup (ping-pong's two blocks: both) */
    bool stream_k;       /* tl_use_stream_k: the tile loops walk units of K steps (lowered.h) */
    struct {             /* copies ahead of the loop that the producer issues (plan_pre_loads) */
        int n;
        int32_t copy[TLI_MAX_TMA];
        int64_t bytes;   /* what they bring: the full mbarrier's transaction count */
        int32_t full, empty; /* a one-slot ring: loaded; handed back (persistent CTAs) */
    } pre;
} ws_plan;

/* The shared tile pre-loaded copy i (plan_pre_loads) writes. */
static int32_t pre_buf(piper *P, const ws_plan *w, int i) { return tli_copy_buf(P->ir, tli_S(P->ir, w->pre.copy[i])->a1); }

/* Ping-pong inside a block of two or three consumer warpgroups
 * (tl_use_pingpong on 256 or 384 threads): the groups take turns issuing
 * the loop's tl_gemm calls, in a ring, so that what one group does between
 * its tensor-core calls runs while the others' are on the tensor cores. A
 * turn ends where the loop body does the most other work between two gemms
 * (the softmax between S = Q K^T and O += P V): with gemms g0 .. g(G-1) and
 * that gap before g_b, a turn is g_b .. g(G-1) of iteration i and
 * g0 .. g(b-1) of iteration i + 1 (b = 0: the gemms of one iteration).
 * Group 0 goes first; turn k of group g > 0 follows turn k of group g - 1,
 * and turn k > 0 of group 0 follows turn k - 1 of the last group. So turn k
 * of group g waits for phase kg - 1 of order[g], kg = k + (g > 0), and its
 * end arrives on the next group's barrier. */

/* The group whose turn follows this one's: 1 - g of two, (g + 1) mod 3 of
 * three. */
static int32_t next_group(piper *P, const ws_plan *w, int32_t group)
{
    if (w->groups == 2)
        return bin(P, E_SUB, I32(P, 1), group);
    return bin(P, E_MOD, bin(P, E_ADD, group, I32(P, 1)), I32(P, w->groups));
}

/* Turn k's number kg = k + (g > 0) as turn_wait takes it (g itself, of two). */
static int32_t turn_number(piper *P, const ws_plan *w, int32_t k, int32_t group)
{
    return bin(P, E_ADD, k, w->groups == 2 ? group : bin(P, E_GT, group, I32(P, 0)));
}

/* Statements in the list starting at s, nested ones included. */
static int count_stmts(const tli_ir *ir, int32_t s)
{
    int n = 0;
    for (; s; s = ir->s.v[s].next)
        n += 1 + count_stmts(ir, ir->s.v[s].body) + count_stmts(ir, ir->s.v[s].orelse);
    return n;
}

/* Before turn kg of a group (kg: turn_number): wait for the turn before it
 * in the ring (phase kg - 1 of the group's order barrier), unless kg is the
 * very first; `when` (0: always) also holds. */
static int32_t turn_wait(piper *P, const ws_plan *w, int32_t group, int32_t kg, int32_t when)
{
    int32_t par = bin(P, E_MOD, bin(P, E_SUB, kg, I32(P, 1)), I32(P, 2));
    int32_t cond = bin(P, E_GT, kg, I32(P, 0));
    return mk_if(P, when ? bin(P, E_AND, when, cond) : cond, mbar_op(P, S_MBAR_WAIT, w->order, group, par), 0);
}

static void add_turns(piper *P, const ws_plan *w, int32_t stage_node, int32_t i, int32_t n, int32_t p, int stages)
{
    tli_lowered *L = P->L;
    tli_ir *ir = P->ir;
    int32_t g[16];
    int gap[16], G = 0, run = 0, tail = 0;
    for (int32_t s = ir->s.v[stage_node].body; s; s = ir->s.v[s].next) {
        if (ir->s.v[s].op == S_GEMM && G < 16) {
            gap[G] = run;
            g[G++] = s;
            run = 0;
        } else {
            run += 1 + count_stmts(ir, ir->s.v[s].body) + count_stmts(ir, ir->s.v[s].orelse);
        }
    }
    if (!G)
        return;
    tail = run; /* after the last gemm: joins the gap before g0 of the next iteration */
    gap[0] += tail;
    int b = 0;
    for (int j = 1; j < G; j++)
        if (gap[j] > gap[b])
            b = j;
    /* A turn across the loop's end waits for the next slot while the other
     * group still has to release the one before: with 2 stages that slot is
     * the one the producer needs (a deadlock). Then every gemm is a turn. */
    bool each = b > 0 && stages < 3 && w->sp.G == 1; /* (rings of their own: the slot is released before) */
    int32_t group = tli_low_thread(L, TH_WG), other = next_group(P, w, group);
    int32_t lane0 = bin(P, E_EQ, tli_low_thread(L, TH_LANE), I32(P, 0));
    int32_t last = bin(P, E_EQ, i, bin(P, E_SUB, n, I(P, 1)));
    /* A persistent CTA's groups go on taking turns from one block to the
     * next: the turns of its earlier blocks (p of them, each with n G turns
     * when every gemm is one, n + 1 when a turn spans the loop's end, else
     * n) come first, so turn numbers, and the barriers' phases, run on.
     * Where the blocks' trip counts differ, from the running sums (a block
     * whose loop runs no iteration takes no turn). */
    int32_t base = I32(P, 0);
    if (p && P->run) {
        int32_t done = sk_value(P, TH_RUN);
        base = cast32(P, each    ? bin(P, E_MUL, done, I(P, G))
                         : b > 0 ? bin(P, E_ADD, done, sk_value(P, TH_RUN_BLOCKS))
                                 : done);
    } else if (p) {
        base = cast32(P, bin(P, E_MUL, p, each ? bin(P, E_MUL, n, I(P, G)) : b > 0 ? bin(P, E_ADD, n, I(P, 1)) : n));
    }
    int32_t i32 = cast32(P, i);
    int32_t arrive = each ? 0 : mbar_op(P, S_MBAR_ARRIVE, w->order, other, 0);
    for (int j = 0; j < G && L->st == TL_OK; j++) {
        int32_t before = 0, after = 0;
        if (each) { /* turn i G + j */
            int32_t tg = turn_number(P, w, bin(P, E_ADD, bin(P, E_ADD, base, bin(P, E_MUL, i32, I32(P, G))), I32(P, j)), group);
            before = turn_wait(P, w, group, tg, 0);
            splice_around(P, g[j], before, mk_if(P, lane0, mbar_op(P, S_MBAR_ARRIVE, w->order, other, 0), 0));
            tli_low_note(L, g[j], "a turn on the tensor cores of its own (2 stages: no turn across the loop's end)");
            continue;
        }
        if (j == b) { /* a turn starts: turn i + (b > 0) of this group */
            int32_t k = bin(P, E_ADD, base, b ? bin(P, E_ADD, i32, I32(P, 1)) : i32);
            before = turn_wait(P, w, group, turn_number(P, w, k, group), 0);
        } else if (j == 0) { /* b > 0: turn 0 is g0 .. g(b-1) of iteration 0; group g > 0 waits for group
                              * g - 1's (and, in a persistent CTA's later blocks, group 0 for the last group's
                              * last) */
            before = turn_wait(P, w, group, turn_number(P, w, base, group), bin(P, E_EQ, i, I(P, 0)));
        }
        if (j == (b + G - 1) % G) /* the turn ends */
            after = mk_if(P, lane0, arrive, 0);
        else if (b > 0 && j == G - 1) /* the last iteration's final turn ends after its last gemm */
            after = mk_if(P, bin(P, E_AND, last, lane0), mbar_op(P, S_MBAR_ARRIVE, w->order, other, 0), 0);
        splice_around(P, g[j], before, after);
        if (j == b)
            tli_low_note(L, g[j], "a turn on the tensor cores starts here (the one before it has ended)");
        else if (after)
            tli_low_note(L, g[j], "ends a turn on the tensor cores: the next warpgroup goes");
    }
}

/* The ring position of iteration j of the block whose loop variable
 * (persistent) is p: p n + j, in 32 bits (ring arithmetic on the issue path:
 * a 64-bit division by a stage count that is not a power of two costs
 * dozens of instructions). */
static int32_t ring_pos(piper *P, int32_t p, int32_t n, int32_t j)
{
    if (P->ir->stream_k) /* the steps of this CTA's earlier units, then j */
        return cast32(P, bin(P, E_ADD, sk_value(P, TH_SK_BASE), j));
    if (P->run) /* the iterations of this CTA's earlier blocks, then j */
        return cast32(P, bin(P, E_ADD, sk_value(P, TH_RUN), j));
    return cast32(P, p ? bin(P, E_ADD, bin(P, E_MUL, p, n), j) : j);
}

/* A stream-K unit's loop: its n = j1 - j0 steps, step j being the block's
 * step j + j0 (the caller shifts the statements by that). */
static int32_t sk_trip_count(piper *P) { return bin(P, E_SUB, sk_value(P, TH_SK_J1), sk_value(P, TH_SK_J0)); }

/* The producer warpgroup's work: for each block of the CTA (its one block,
 * or every block of a persistent CTA in order), the producers of every
 * iteration into the ring, each slot refilled once released. */
static int32_t producer_branch(piper *P, const pipe_info *pi, const ws_plan *w)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    int32_t tile = 0, p = 0;
    if (w->persistent)
        tile = mk_tile_loop(P, I(P, 0), 1, w->how == CP_TMA ? TLI_COUNTER_TAKER : TLI_COUNTER_PRODUCERS, &p);
    tli_list blk = {0};
    if (w->pre.n) { /* the block's Q-like tiles first, once the consumers have handed the slot back */
        if (w->persistent)
            tli_list_add(L, &blk, mk_if(P, bin(P, E_GT, p, I(P, 0)),
                                        mbar_op(P, S_MBAR_WAIT, w->pre.empty, I32(P, 0),
                                                bin(P, E_MOD, bin(P, E_SUB, p, I(P, 1)), I(P, 2))), 0));
        tli_list_add(L, &blk, mbar_expect(P, w->pre.full, I32(P, 0), w->pre.bytes));
        for (int i = 0; i < w->pre.n; i++) /* TMA boxes on the slot's full mbarrier */
            tli_list_add(L, &blk, producer_copy(P, pi, w->pre.copy[i], 0, CP_TMA, w->pre.full, I32(P, 0), 0, 0));
    }
    int32_t n_let = tli_low_let(L, "tl_n#", w->stream_k ? sk_trip_count(P) : pi->extent);
    tli_list_add(L, &blk, n_let);
    int32_t n = let_ref(P, n_let);
    int32_t j;
    int32_t loop = mk_serial(P, n, &j, false);
    int32_t step = w->stream_k ? bin(P, E_ADD, j, sk_value(P, TH_SK_J0)) : j; /* the block's K step */
    tli_list it = {0};
    int32_t seq_let = tli_low_let(L, "tl_seq#", ring_pos(P, p, n, j));
    int32_t seq = let_ref(P, seq_let);
    int32_t sn_let = tli_low_let(L, "tl_sn#", bin(P, E_MOD, seq, I32(P, S)));
    int32_t sn = let_ref(P, sn_let);
    tli_list_add(L, &it, seq_let);
    tli_list_add(L, &it, sn_let);
    int32_t phase = bin(P, E_MOD, bin(P, E_SUB, bin(P, E_DIV, seq, I32(P, S)), I32(P, 1)), I32(P, 2));
    for (int g = 0; g < w->sp.G; g++) { /* each ring's slot (ring_split), once its consumers released it */
        int32_t idx = ring_slot(P, sn, g, S);
        tli_list_add(L, &it, mk_if(P, bin(P, E_GE, seq, I32(P, S)), mbar_op(P, S_MBAR_WAIT, w->r.empty, idx, phase), 0));
        tli_list_add(L, &it, producers_of(P, pi, w->sp.of, g, step, sn, w->how, w->r.full, idx, w->sp.bytes[g],
                                          w->how == CP_TMA ? 0 : 128));
    }
    if (w->how != CP_TMA) /* each producer thread arrives when its own copies have landed */
        tli_list_add(L, &it, mbar_op(P, S_MBAR_ARRIVE, w->r.full, sn, w->how == CP_ASYNC16));
    set_body(P, loop, it.first);
    tli_list_add(L, &blk, loop);
    int32_t work = blk.first;
    if (tile) {
        set_body(P, tile, blk.first);
        work = tile;
    }
    tli_list out = {0};
    if (L->target.setmaxnreg)
        tli_list_add(L, &out, op_stmt(P, S_SETMAXNREG, 0, producer_regs(w->consumer_threads)));
    if (w->how == CP_TMA) /* one thread issues every box */
        work = mk_if(P, bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0)), work, 0);
    tli_list_add(L, &out, work);
    loop_exit_sync(P, pi, &out); /* the consumers' is after their loop */
    return out.first;
}

/* ------------------------------------------- rotation of the consumers */

/* Rotated consumers (in-block ping-pong of two warpgroups): the body
 * [A1 = .. g1, A2, B = g2 ..] of a loop whose first tl_gemm g1 is followed
 * by other work A2 (a softmax) and then a second tl_gemm g2 runs as
 *   for j in 0 .. n:  A1(j) [j < n];  B(j - 1) [j > 0];  A2(j) [j < n]
 * so that each warpgroup issues S = Q K^T of tile j and O += P V of tile
 * j - 1 back to back (one turn on the tensor cores), and then works on
 * tile j's softmax while P V still runs: FlashAttention-3's overlap inside
 * a warpgroup, on top of the ping-pong between the two. A1 moves ahead of
 * the previous iteration's B, so it must not touch what B writes nor write
 * what B reads (the ring's tiles aside: each iteration reads its own
 * slot). The sync pass then waits for g1 alone before A2 reads its result,
 * and for g2 where A2 overwrites its accumulator or its A registers. */
typedef struct rotation {
    int32_t a1, a2, b;   /* the three lists (a2 may not be empty) */
} rotation;

static bool staged_buf(const pipe_info *pi, int32_t b)
{
    for (int i = 0; i < pi->nprod; i++)
        if (pi->bufs[i] == b)
            return true;
    return false;
}

/* Whether lists x and y can swap: neither writes what the other touches
 * (staged tiles, only read by consumers, aside). */
static bool independent(piper *P, const pipe_info *pi, int32_t x, int32_t y)
{
    tli_ir *ir = P->ir;
    tli_bufset rx = {0}, wx = {0}, ry = {0}, wy = {0};
    bool ok = tli_bufset_init(&rx, ir->b.n) && tli_bufset_init(&wx, ir->b.n) && tli_bufset_init(&ry, ir->b.n) &&
              tli_bufset_init(&wy, ir->b.n);
    if (!ok) /* not "dependent": a kernel that compiles differently when memory is short */
        tli_low_fail(P->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int32_t s = x; ok && s; s = ir->s.v[s].next)
        tli_stmt_access(P->L, s, &rx, &wx);
    for (int32_t s = y; ok && s; s = ir->s.v[s].next)
        tli_stmt_access(P->L, s, &ry, &wy);
    for (int32_t b = 1; ok && b < ir->b.n; b++) {
        if (staged_buf(pi, b))
            continue;
        bool xw = tli_bufset_has(&wx, b), yw = tli_bufset_has(&wy, b);
        bool xt = xw || tli_bufset_has(&rx, b), yt = yw || tli_bufset_has(&ry, b);
        if ((xw && yt) || (yw && xt))
            ok = false;
    }
    tli_bufset_free(&rx);
    tli_bufset_free(&wx);
    tli_bufset_free(&ry);
    tli_bufset_free(&wy);
    return ok;
}

/* Statements whose expressions the rotation knows how to shift and copy
 * (an S_LET would need its uses renamed in a copy). */
static bool shiftable(const tli_ir *ir, int32_t first)
{
    for (int32_t s = first; s; s = ir->s.v[s].next) {
        switch ((tli_sop)ir->s.v[s].op) {
        case S_STORE: case S_SERIAL: case S_IF: case S_FILL: case S_COPY: case S_PARALLEL: case S_GEMM:
        case S_REDUCE: case S_CLUSTER_REDUCE: break;
        default: return false;
        }
        if (!shiftable(ir, ir->s.v[s].body) || !shiftable(ir, ir->s.v[s].orelse))
            return false;
    }
    return true;
}

static bool find_rotation(piper *P, const pipe_info *pi, rotation *r)
{
    tli_ir *ir = P->ir;
    int32_t g1 = 0, g2 = 0, before_g2 = 0;
    for (int32_t s = pi->first_consumer, prev = 0; s; prev = s, s = ir->s.v[s].next) {
        if (ir->s.v[s].op != S_GEMM || ir->s.v[s].x[TLI_X_GEMM_ATOM] != MMA_WGMMA_M64NNK16)
            continue;
        if (!g1) {
            g1 = s;
        } else if (!g2) {
            g2 = s;
            before_g2 = prev;
        }
    }
    if (!g1 || !g2 || before_g2 == g1 || !shiftable(ir, pi->first_consumer))
        return false;
    *r = (rotation){pi->first_consumer, ir->s.v[g1].next, g2};
    /* cut the lists: A1 ends at g1, A2 before g2 */
    int32_t g1_next = ir->s.v[g1].next;
    ir->s.v[g1].next = 0;
    ir->s.v[before_g2].next = 0;
    if (independent(P, pi, r->a1, r->b))
        return true;
    ir->s.v[g1].next = g1_next;
    ir->s.v[before_g2].next = g2;
    return false;
}

static void shift_stmts(piper *P, int32_t first, int32_t var, int32_t with)
{
    for (int32_t s = first; s && P->L->st == TL_OK; s = P->ir->s.v[s].next) {
        shift_one(P, s, var, with);
        shift_stmts(P, P->ir->s.v[s].body, var, with);
        shift_stmts(P, P->ir->s.v[s].orelse, var, with);
    }
}

/* A copy of the statements of list first (nested ones too), loop variable
 * var replaced by expression with. The copies of a tl_parallel keep its
 * variables (printed by the loop they belong to, in the copy's scope). */
static int32_t copy_stmts(piper *P, int32_t first, int32_t var, int32_t with)
{
    tli_list l = {0};
    for (int32_t s = first; s && P->L->st == TL_OK; s = P->ir->s.v[s].next) {
        tli_snode n = P->ir->s.v[s];
        n.next = n.body = n.orelse = 0;
        int32_t id = tli_low_stmt(P->L, &n);
        if (!id)
            return 0;
        shift_one(P, id, var, with);
        int32_t body = copy_stmts(P, P->ir->s.v[s].body, var, with);
        int32_t orelse = copy_stmts(P, P->ir->s.v[s].orelse, var, with);
        P->ir->s.v[id].body = body;
        P->ir->s.v[id].orelse = orelse;
        tli_set_parent(P->L, body, id);
        tli_set_parent(P->L, orelse, id);
        tli_list_add(P->L, &l, id);
    }
    return l.first;
}

/* One turn on the tensor cores of this warpgroup, around list `work`:
 * group g's turn k waits for the turn before it in the ring (add_turns),
 * and hands over to the next group when its gemms are issued. */
static void turn(piper *P, const ws_plan *w, tli_list *l, int32_t k, int32_t work)
{
    tli_lowered *L = P->L;
    int32_t group = tli_low_thread(L, TH_WG), other = next_group(P, w, group);
    int32_t kg = turn_number(P, w, cast32(P, k), group);
    int32_t wait = mk_if(P, bin(P, E_GT, kg, I32(P, 0)),
                         mbar_op(P, S_MBAR_WAIT, w->order, group, bin(P, E_MOD, bin(P, E_SUB, kg, I32(P, 1)), I32(P, 2))),
                         0);
    tli_list_add(L, l, wait);
    tli_list_add(L, l, work);
    int32_t lane0 = bin(P, E_EQ, tli_low_thread(L, TH_LANE), I32(P, 0));
    tli_list_add(L, l, mk_if(P, lane0, mbar_op(P, S_MBAR_ARRIVE, w->order, other, 0), 0));
}

/* The rotated consumer loop (see above) in place of the pipelined
 * statement, for n tiles: a prologue with tile 0's A1 and A2, a loop over
 * tiles j = 1 .. n - 1 issuing A1(j) and B(j - 1) in one turn, then A2(j),
 * and an epilogue with B(n - 1). No wgmma is issued under a condition that
 * a later wait depends on (ptxas would serialise every wgmma). */
static void rotated_loop(piper *P, const pipe_info *pi, const ws_plan *w, const rotation *r, int32_t n,
                         tli_list *out)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    int32_t v = pi->var; /* the loop's variable: tile j = v + 1 */
    int32_t zero = I(P, 0), last = bin(P, E_SUB, n, I(P, 1));
    /* prologue: tile 0 */
    tli_list pro = {0};
    tli_list_add(L, &pro, mbar_op(P, S_MBAR_WAIT, w->r.full, I32(P, 0), I32(P, 0)));
    turn(P, w, &pro, zero, stage_of(P, pi, I32(P, 0), copy_stmts(P, r->a1, v, zero)));
    wgmma_wait(P, &pro, 0);
    tli_list_add(L, &pro, stage_of(P, pi, I32(P, 0), copy_stmts(P, r->a2, v, zero)));
    /* epilogue: B of tile n - 1, and its slot released */
    int32_t lseq = cast32(P, last), lslot = bin(P, E_MOD, lseq, I32(P, S));
    tli_list epi = {0};
    turn(P, w, &epi, n, stage_of(P, pi, lslot, copy_stmts(P, r->b, v, last)));
    wgmma_wait(P, &epi, 0);
    tli_list_add(L, &epi, release_if(P, pi, 0, w->r.empty, lslot));
    /* the loop, on the original statements: A1, A2 of tile v + 1, B of tile v */
    int32_t next = bin(P, E_ADD, v, I(P, 1));
    shift_stmts(P, r->a1, v, next);
    shift_stmts(P, r->a2, v, next);
    tli_list body = {0};
    int32_t seq_let = tli_low_let(L, "tl_seq#", cast32(P, next));
    int32_t seq = let_ref(P, seq_let);
    int32_t st_let = tli_low_let(L, "tl_st#", bin(P, E_MOD, seq, I32(P, S)));
    int32_t st = let_ref(P, st_let);
    int32_t prev = bin(P, E_MOD, bin(P, E_ADD, seq, I32(P, S - 1)), I32(P, S));
    tli_list_add(L, &body, seq_let);
    tli_list_add(L, &body, st_let);
    int32_t phase = bin(P, E_MOD, bin(P, E_DIV, seq, I32(P, S)), I32(P, 2));
    tli_list_add(L, &body, mbar_op(P, S_MBAR_WAIT, w->r.full, st, phase));
    tli_list issue = {0};
    tli_list_add(L, &issue, stage_of(P, pi, st, r->a1));
    tli_list_add(L, &issue, stage_of(P, pi, prev, r->b));
    turn(P, w, &body, next, issue.first);
    tli_list_add(L, &body, stage_of(P, pi, st, r->a2));
    wgmma_wait(P, &body, 0); /* B of tile v: done already where A2 rewrote its accumulator */
    tli_list_add(L, &body, release_if(P, pi, 0, w->r.empty, prev));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = bin(P, E_SUB, n, I(P, 1));
    set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid,
                 "tl_pipelined, consumer side, rotated: S of tile j and O of tile j - 1 issued in one turn, tile j's "
                 "softmax under O's gemm (%d-slot ring)",
                 S);
    int32_t more = bin(P, E_GT, n, zero);
    tli_list_add(L, out, mk_if(P, more, pro.first, 0));
    splice_around(P, pi->sid, out->first, mk_if(P, more, epi.first, 0));
}

/* Where a persistent CTA's consumers hand the slot of the tiles loaded
 * ahead of the loop (plan_pre_loads) back: at the loop body's release
 * point (release_point; with a wait for every wgmma there), in the block's
 * last iteration, when nothing from there on touches those tiles; so the
 * producer loads the next block's Q under the last softmax, P V and the
 * epilogue, and the next block's first K and V after it (bench/NOTES.md,
 * session 16: +2-3 % at 2k keys). 0: after the loop. The release point is
 * the one the rings share (ring_split) where they are split. */
static int32_t pre_release_point(piper *P, const pipe_info *pi, const ws_plan *w)
{
    if (!w->pre.n || w->persistent != 1 || !P->L->wgmma)
        return 0;
    int at_pos = -1;
    int32_t at = w->sp.G > 1 ? w->sp.at : release_point(P, pi, &at_pos);
    probe q;
    if (!at || !probe_init(P, &q))
        return 0;
    bool touched = false; /* (at is a statement of the body's top level: from it on) */
    for (int32_t s = at; s && !touched; s = P->ir->s.v[s].next)
        for (int i = 0; i < w->pre.n && !touched; i++) {
            bool reads, writes;
            probe_stmt(P, &q, s, pre_buf(P, w, i), &reads, &writes);
            touched = reads || writes;
        }
    probe_free(&q);
    return touched ? 0 : at;
}

/* Where the consumers may hand a slot back in its own iteration: after
 * the last statement at the body's top level that reads a ring's tile,
 * when every reader is a plain load into registers (no gemm reads the
 * ring at the top level, and the kernel has no wgmma, which reads shared
 * memory after its statement, nested in a tl_if or a loop too; mma.sync
 * loops keep their release, unmeasured) and nothing writes the ring. The warps
 * read the slot, meet (__syncwarp, so that lane 0's arrival comes after
 * every lane's reads) and give it back before they work on what they
 * read, so the producer refills it meanwhile: S slots keep S tiles on
 * their way beside the one in registers (the row ops, which read their
 * tile at the top of the body: bench/NOTES.md session 32). 0: none (the
 * slot is released at the next iteration's end, as before). */
static int32_t early_release_point(piper *P, const pipe_info *pi, const ws_plan *w)
{
    if (P->L->wgmma || w->sp.G != 1 || w->turns || w->persistent == 2 || w->stream_k || pi->cluster_ring)
        return 0;
    probe q;
    if (!probe_init(P, &q))
        return 0;
    int32_t last = 0;
    bool bad = false;
    for (int32_t s = pi->first_consumer; s && !bad; s = P->ir->s.v[s].next) {
        probe_fill(P, &q, s);
        for (int i = 0; i < pi->nprod; i++) {
            bool reads = tli_bufset_has(&q.rd, pi->bufs[i]);
            bad |= tli_bufset_has(&q.wr, pi->bufs[i]) || (reads && tli_S(P->ir, s)->op == S_GEMM);
            if (reads)
                last = s;
        }
    }
    probe_free(&q);
    return bad ? 0 : last;
}

/* The consumer side of the loop, in place of the pipelined statement: wait
 * for each slot, run the consumers on it, release the previous slot (or
 * this one after its last reader, early_release_point). p: the persistent
 * tile loop's variable (0: none). */
static int32_t consumer_loop(piper *P, const pipe_info *pi, const ws_plan *w, int32_t p)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    tli_list out = {0};
    int32_t n_let = tli_low_let(L, "tl_n#", w->stream_k ? sk_trip_count(P) : pi->extent);
    tli_list_add(L, &out, n_let);
    int32_t n = let_ref(P, n_let);
    if (w->stream_k) /* the unit's step j is the block's j + j0 */
        shift_stmts(P, pi->first_consumer, pi->var, bin(P, E_ADD, pi->var, sk_value(P, TH_SK_J0)));
    int32_t lane0 = bin(P, E_EQ, tli_low_thread(L, TH_LANE), I32(P, 0));
    int32_t group = tli_low_thread(L, TH_WG);
    if (w->persistent == 2) { /* the other group has issued its main loop of the block before */
        int32_t parity_ = bin(P, E_MOD, bin(P, E_DIV, bin(P, E_SUB, p, I(P, 1)), I(P, 2)), I(P, 2));
        tli_list_add(L, &out, mk_if(P, bin(P, E_GT, p, I(P, 0)), mbar_op(P, S_MBAR_WAIT, w->order, group, parity_), 0));
    }
    if (w->pre.n) /* the producer's tiles from ahead of the loop (block p's: phase p) */
        tli_list_add(L, &out, mbar_op(P, S_MBAR_WAIT, w->pre.full, I32(P, 0),
                                      p ? bin(P, E_MOD, p, I(P, 2)) : I(P, 0)));
    rotation rot;
    if (w->turns && !w->persistent && P->ir->pingpong == 2 && find_rotation(P, pi, &rot)) {
        rotated_loop(P, pi, w, &rot, n, &out);
        return 0;
    }
    tli_list body = {0};
    int32_t seq_let = tli_low_let(L, "tl_seq#", ring_pos(P, p, n, pi->var));
    int32_t seq = let_ref(P, seq_let);
    int32_t st_let = tli_low_let(L, "tl_st#", bin(P, E_MOD, seq, I32(P, S)));
    int32_t st = let_ref(P, st_let);
    tli_list_add(L, &body, seq_let);
    tli_list_add(L, &body, st_let);
    int32_t phase = bin(P, E_MOD, bin(P, E_DIV, seq, I32(P, S)), I32(P, 2));
    const ring_split *sp = &w->sp;
    for (int g = 0; g < sp->G; g++) /* every ring's slot, here rather than before its first reader (see ring_split) */
        tli_list_add(L, &body, mbar_op(P, S_MBAR_WAIT, w->r.full, ring_slot(P, st, g, S), phase));
    if (w->how != CP_TMA && L->async_proxy) /* plain shared stores that wgmma reads */
        tli_list_op(L, &body, S_FENCE_ASYNC, 0, 0);
    int32_t at = consumers_at(P, pi, st);
    tli_list_add(L, &body, at);
    if (w->turns && at)
        add_turns(P, w, at, pi->var, n, p, S);
    int32_t early = early_release_point(P, pi, w);
    if (early) {
        tli_list rel = {0};
        tli_list_op(L, &rel, S_WARP_SYNC, 0, 0);
        tli_list_add(L, &rel, release_if(P, pi, 0, w->r.empty, st));
        splice_around(P, early, 0, rel.first);
        tli_low_note(L, rel.first, "the slot read for the last time: handed back to the producer");
    }
    int32_t prev = bin(P, E_MOD, bin(P, E_SUB, seq, I32(P, 1)), I32(P, S));
    int32_t pre_at = pre_release_point(P, pi, w);
    if (sp->G > 1 || pre_at) { /* the releases at the release point */
        tli_list rel = {0};
        wgmma_wait(P, &rel, 0);
        for (int g = 0; sp->G > 1 && g < sp->G; g++) /* (one ring: released at the body's end) */
            tli_list_add(L, &rel, sp->early[g] ? release_if(P, pi, 0, w->r.empty, ring_slot(P, st, g, S))
                                               : release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), w->r.empty,
                                                            ring_slot(P, prev, g, S)));
        if (pre_at) /* the block's last iteration: the next block's Q-like tiles may come */
            tli_list_add(L, &rel, release_if(P, pi, bin(P, E_EQ, pi->var, bin(P, E_SUB, n, I(P, 1))), w->pre.empty,
                                             I32(P, 0)));
        splice_around(P, pre_at ? pre_at : sp->at, rel.first, 0);
        if (sp->G > 1)
            tli_low_note(L, rel.first, "the slots of the tiles read so far released (%d rings, one a group of tiles)",
                         sp->G);
        else
            tli_low_note(L, rel.first, "the tiles loaded ahead of the loop read for the last time in the last iteration");
    }
    wgmma_wait(P, &body, pi->tail);
    if (sp->G == 1 && !early)
        tli_list_add(L, &body, release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), w->r.empty, prev));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = n;
    set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid, "tl_pipelined, consumer side: ring slots of %d stages filled by the producer", S);
    tli_list tail = {0};
    if (w->persistent == 2) /* the other group's turn */
        tli_list_add(L, &tail, mk_if(P, lane0, mbar_op(P, S_MBAR_ARRIVE, w->order, bin(P, E_SUB, I32(P, 1), group), 0), 0));
    wgmma_wait(P, &tail, 0);
    if (w->pre.n && w->persistent) /* read for the last time (plan_pre_loads): the next block's may come */
        tli_list_add(L, &tail, release_if(P, pi, pre_at ? bin(P, E_EQ, n, I(P, 0)) : 0, w->pre.empty, I32(P, 0)));
    int32_t last = bin(P, E_MOD, ring_pos(P, p, n, bin(P, E_SUB, n, I(P, 1))), I32(P, S));
    for (int g = 0; g < sp->G && !early; g++) /* (early groups: released in the loop) */
        if (!sp->early[g])
            tli_list_add(L, &tail, release_if(P, pi, bin(P, E_GT, n, I(P, 0)), w->r.empty, ring_slot(P, last, g, S)));
    if (w->stream_k) { /* the unit's partial sum: handed on, or the others' added */
        tli_snode fx = {.op = S_SK_FIXUP, .buf = P->sk_acc, .a0 = P->sk_steps};
        tli_list_add(L, &tail, tli_low_stmt(L, &fx));
    }
    loop_exit_sync(P, pi, &tail);
    splice_around(P, pi->sid, out.first, tail.first);
    return 0;
}

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
    tli_fmt(st.name, sizeof st.name, "tl_stage_%s", B(P, gb)->name);
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
            splice_around(P, tail, 0, c);
        }
        tli_snode *n = &ir->s.v[c];
        n->x[TLI_X_COPY_HOW] = CP_TMA_STORE;
        n->x[TLI_X_COPY_STAGING] = stage;
        n->x[TLI_X_COPY_ROUND] = r;
        n->x[TLI_X_COPY_MANAGED] = 1;
        tli_list before = {0}, after = {0};
        /* the staging tile is free: the last store's reads of it are done */
        tli_list_add(L, &before, mk_if(P, tid0, op_stmt(P, S_BULK_WAIT, 0, 1), 0));
        tli_list_op(L, &before, S_BARRIER, 0, 0);
        tli_list_op(L, &after, S_BARRIER, 0, 0); /* every thread's part written and fenced */
        tli_snode ts = {.op = S_TMA_STORE, .buf = stage, .a0 = c};
        tail = mk_if(P, tid0, tli_low_stmt(L, &ts), 0);
        tli_list_add(L, &after, tail);
        splice_around(P, c, before.first, after.first);
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
    if (probe_init(P, &q)) {
        hit = false;
        bool after = false;
        for (int32_t x = first; x && !hit; x = P->ir->s.v[x].next) {
            if (x == s) {
                after = true;
                continue;
            }
            bool reads, writes;
            probe_stmt(P, &q, x, b, &reads, &writes);
            hit = writes || (after && reads);
        }
    }
    probe_free(&q);
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
static bool epilogue_tma_stores(piper *P, int32_t body)
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

/* Whether b is a shared buffer outside the pipeline's ring: the consumers'
 * own, which a persistent CTA's next block rewrites. */
static bool private_shared(piper *P, const pipe_info *pi, int32_t b)
{
    return B(P, b)->scope == B_SHARED && !staged_buf(pi, b);
}

/* Whether the consumers write a shared buffer of their own that the next
 * block of a persistent CTA rewrites (tiles the producer loads ahead of the
 * loop are its, handed back through their own mbarrier: plan_pre_loads). */
static bool has_private_shared(piper *P, const pipe_info *pi, const ws_plan *w)
{
    for (int32_t b = 1; b < P->ir->b.n; b++) {
        bool pre = false;
        for (int i = 0; i < w->pre.n; i++)
            pre |= pre_buf(P, w, i) == b;
        if (private_shared(P, pi, b) && !pre)
            return true;
    }
    return false;
}

/* Shared buffers outside the pipeline get one copy per consumer group of a
 * ping-pong CTA (their blocks run at once); the consumer code addresses
 * its own, at stage tl_wg. */
static int32_t private_buffers(piper *P, const pipe_info *pi, int32_t body, int groups)
{
    if (groups < 2)
        return body;
    tli_snode n = {.op = S_STAGE, .a0 = tli_low_thread(P->L, TH_WG), .body = body};
    for (int32_t b = 1; b < P->ir->b.n; b++) {
        if (!private_shared(P, pi, b))
            continue;
        P->L->smem[b].stages = groups;
        if (n.rank == TL_MAX_RANK) {
            int32_t inner = tli_low_stmt(P->L, &n);
            tli_set_parent(P->L, n.body, inner);
            n = (tli_snode){.op = S_STAGE, .a0 = n.a0, .body = inner};
        }
        n.vars[n.rank++] = b;
    }
    if (!n.rank)
        return body;
    int32_t id = tli_low_stmt(P->L, &n);
    tli_set_parent(P->L, body, id);
    return id;
}

/* Whether expression e is the same for every thread of the block and
 * needs nothing the consumers define (constants, parameters, the block's
 * index): what the producer can evaluate in their place. */
static bool block_invariant(piper *P, int32_t e)
{
    if (!e)
        return true;
    const tli_enode *n = tli_E(P->ir, e);
    switch ((tli_eop)n->op) {
    case E_LOOP_VAR: case E_LOAD: case E_LET: case E_THREAD: return false;
    default: return block_invariant(P, n->a[0]) && block_invariant(P, n->a[1]) && block_invariant(P, n->a[2]);
    }
}

/* Copies ahead of the pipelined loop into the consumers' own shared tiles
 * (FlashAttention's Q) become the producer's: TMA boxes it issues at each
 * block's start, before the ring's first tiles, completing on a one-slot
 * ring of their own; the consumers wait for it just before the loop, and
 * in a persistent CTA hand the slot back after it, so that the next
 * block's tile loads while they finish this one (as the consumers' own
 * cp.async, it was issued only after the previous block's epilogue, and
 * waited for in full: one load latency a block). A copy qualifies when it
 * is at the block's top level ahead of the loop, TMA-able, its tile's
 * indices the block's alone (block_invariant), into a buffer of no ring
 * that nothing but the loop reads and nothing else writes; not in
 * ping-pong's per-group blocks (their tiles are per group) nor
 * stream-K. The copies are unlinked from the consumers' body here. */
static void plan_pre_loads(piper *P, const pipe_info *pi, ws_plan *w)
{
    tli_ir *ir = P->ir;
    if (w->how != CP_TMA || w->persistent == 2 || w->stream_k || pi->cluster_ring)
        return;
    bool top = false;
    for (int32_t s = ir->body; s; s = ir->s.v[s].next)
        top |= s == pi->sid;
    probe q;
    if (!top || !probe_init(P, &q))
        return;
    int32_t prev = 0;
    for (int32_t c = ir->body; c && c != pi->sid && P->L->st == TL_OK;) {
        int32_t next = ir->s.v[c].next;
        const tli_snode *n = tli_S(ir, c);
        bool ok = n->op == S_COPY && pi->nprod + w->pre.n < TLI_MAX_TMA; /* a TMA descriptor each */
        int32_t b = ok ? tli_copy_buf(ir, n->a1) : 0;
        ok = ok && B(P, tli_copy_buf(ir, n->a0))->scope == B_GLOBAL && B(P, b)->scope == B_SHARED &&
             !staged_buf(pi, b) && tma_ok(P, c);
        for (int d = 0; ok && d < B(P, tli_copy_buf(ir, n->a0))->rank; d++)
            ok = block_invariant(P, tli_R(ir, n->a0)->idx[d]);
        for (int32_t x = ir->body; ok && x; x = ir->s.v[x].next) {
            bool reads, writes;
            if (x == c)
                continue;
            probe_stmt(P, &q, x, b, &reads, &writes);
            /* the loop may read it; nothing else, before or after it, may touch it */
            ok = !(reads || writes) || (x == pi->sid && !writes);
        }
        if (!ok) {
            prev = c;
            c = next;
            continue;
        }
        w->pre.copy[w->pre.n++] = c;
        w->pre.bytes += tli_buf_elems(B(P, b)) * esize(B(P, b));
        if (next && ir->s.v[next].op == S_CP_COMMIT) /* its commit goes too */
            next = ir->s.v[next].next;
        if (prev)
            ir->s.v[prev].next = next;
        else
            ir->body = next;
        c = next;
    }
    probe_free(&q);
    if (!w->pre.n)
        return;
    w->pre.full = mbar_array(P, "tl_pre_full", 1);
    w->pre.empty = mbar_array(P, "tl_pre_empty", 1);
}

/* tl_use_persistent(k, 2): the CTA's producer thread takes its blocks
 * from a counter in global memory (blockIdx.x first, then the counter's
 * next value + gridDim.x), so that the blocks start in the grid's order
 * whatever each takes, as the hardware hands them out one block a CTA, and
 * a CTA that finishes early takes more. It passes each block's number to
 * the consumers (and to a cp.async producer's other threads) through two
 * slots in shared memory with mbarriers of their own (full: written;
 * empty: every reader has read it). One block at a time; not stream-K,
 * whose units are dealt by CTA. */
static void plan_counter(piper *P, const ws_plan *w)
{
    const char *no = NULL;
    if (w->persistent != 1)
        no = "not with tl_use_pingpong on 128 threads (its consumer groups take alternate blocks)";
    else if (w->stream_k)
        no = "not with tl_use_stream_k (its units are dealt by CTA)";
    if (no) {
        tli_low_fail(P->L, TL_ERR_UNSUPPORTED, "tl_use_persistent(k, 2): %s", no);
        return;
    }
    tli_bnode b = {.scope = B_WORDS, .dtype = TL_I64, .rank = 1, .cshape = {2}};
    tli_fmt(b.name, sizeof b.name, "tl_block_slot");
    P->counter[0] = tli_low_buf(P->L, &b);
    P->counter[1] = mbar_array(P, "tl_block_full", 2);
    P->counter[2] = mbar_array(P, "tl_block_empty", 2);
    P->L->launch.block_counter = true;
}

static void schedule_warp_specialized(piper *P, const pipe_info *pi)
{
    tli_lowered *L = P->L;
    tli_ir *ir = P->ir;
    const char *api = ir->pingpong ? "tl_use_pingpong" : "tl_use_warp_specialize";
    ws_plan w = {.persistent = ir->pingpong && ir->threads == 128 ? 2 : ir->persistent ? 1 : 0,
                 .turns = ir->pingpong && ir->threads >= 256, .groups = ir->threads / 128,
                 .stream_k = ir->stream_k};
    if (!L->target.mbarrier) {
        tli_low_fail(L, TL_ERR_UNSUPPORTED, "%s: it needs mbarriers (sm_80 or later), not %s", api, L->target.name);
        return;
    }
    w.how = producer_engine(P, pi);
    plan_split(P, pi, &w.sp, w.how);
    int groups = w.persistent == 2 ? 2 : 1;
    w.consumer_threads = ir->threads * groups;
    w.r = (ring){mbar_array(P, "tl_full", pi->S * w.sp.G), mbar_array(P, "tl_empty", pi->S * w.sp.G)};
    w.order = w.persistent == 2 || w.turns ? mbar_array(P, "tl_order", w.turns ? w.groups : 2) : 0;
    if (ir->persistent == 2)
        plan_counter(P, &w);
    if (L->st != TL_OK)
        return;
    L->warp_specialized = true;
    L->launch.persistent = w.persistent;
    if (w.stream_k) { /* (pass_verify: one f32 fragment accumulator, the loop's gemms) */
        for (int32_t c = pi->first_consumer; c && !P->sk_acc; c = tli_S(ir, c)->next)
            if (tli_S(ir, c)->op == S_GEMM)
                P->sk_acc = tli_S(ir, c)->gemm[2];
        /* at least one step a block, so that K = 0 still gives every block a unit */
        P->sk_steps = bin(P, E_MAX, pi->extent, I(P, 1));
        L->launch.sk_slot_floats = L->frag[P->sk_acc].per_thread * ir->threads;
    }
    /* the consumers: the block body with the loop replaced, in a tile loop
     * over their blocks when persistent (ping-pong: group g takes p = g,
     * g + 2, ...; else all groups take p = 0, 1, ...) */
    plan_pre_loads(P, pi, &w);
    if (L->st != TL_OK)
        return;
    /* (pass_verify: only one block a CTA at a time, without stream-K, lets the trip count vary) */
    P->run = w.persistent == 1 && !w.stream_k && tli_uses_block(L, pi->extent) ? pi->extent : 0;
    int32_t tile = 0, p = 0;
    if (w.persistent == 2)
        tile = mk_tile_loop(P, tli_low_thread(L, TH_WG), 2, TLI_COUNTER_READER, &p);
    else if (w.persistent)
        tile = mk_tile_loop(P, I(P, 0), 1, TLI_COUNTER_READER, &p);
    consumer_loop(P, pi, &w, p);
    /* (the staging tiles have their own waits; without such buffers the groups run on into the next
     * block without meeting) */
    bool own_shared = has_private_shared(P, pi, &w);
    /* (not when the groups take turns: the staging tile's block barriers would make them meet at
     * every block's end, where the turns keep them half a turn apart. FlashAttention D 64 lost 3-9 % at
     * 512-2k keys to them against 16-byte register stores, session 19) */
    bool tma_stores = w.persistent == 1 && !w.turns && epilogue_tma_stores(P, ir->body);
    int32_t consumer_body = private_buffers(P, pi, ir->body, groups);
    if (tile) {
        tli_list tb = {0};
        tli_list_add(L, &tb, consumer_body);
        if (own_shared) /* the next block rewrites this group's buffers */
            tli_list_op(L, &tb, S_BARRIER, 0, 0);
        set_body(P, tile, tb.first);
        consumer_body = tile;
    }
    tli_list cons = {0};
    if (L->target.setmaxnreg)
        tli_list_add(L, &cons, op_stmt(P, S_SETMAXNREG, 1, consumer_regs(w.consumer_threads)));
    tli_list_add(L, &cons, consumer_body);
    if (tma_stores) /* the last block's stores complete before the CTA ends */
        tli_list_add(L, &cons, mk_if(P, bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0)),
                                     op_stmt(P, S_BULK_WAIT, 0, 0), 0));
    int32_t prod = producer_branch(P, pi, &w);
    /* the CTA: the mbarriers, then the two roles */
    int consumer_warps = ir->threads / 32;
    tli_list top = {0};
    tli_list_add(L, &top, ring_init(P, pi, w.r.full, w.how == CP_TMA ? 1 : 128));
    tli_list_add(L, &top, empty_init(P, pi, w.r.empty, consumer_warps));
    if (w.order) /* one arrival per warp of the group whose turn ends */
        tli_list_add(L, &top, mbar_init(P, w.order, 4));
    if (w.pre.n) {
        tli_list_add(L, &top, mbar_init(P, w.pre.full, 1));
        tli_list_add(L, &top, mbar_init(P, w.pre.empty, consumer_warps));
    }
    if (P->counter[0]) { /* one producer thread writes a block's number; the consumers (and the producer's
                            other threads, cp.async) read it */
        tli_list_add(L, &top, mbar_init(P, P->counter[1], 1));
        tli_list_add(L, &top, mbar_init(P, P->counter[2], ir->threads + (w.how == CP_TMA ? 0 : 127)));
    }
    init_done(P, pi, &top);
    int32_t producer_wg = I32(P, w.consumer_threads / 128);
    int32_t roles = mk_if(P, bin(P, E_EQ, tli_low_thread(L, TH_WG), producer_wg), prod, cons.first);
    ir->s.v[roles].x[TLI_X_IF_ROLES] = 1;
    tli_low_note(L, roles, "%s: a producer warpgroup (%s) and %d consumer warpgroup%s%s", api,
                 w.how == CP_TMA ? "TMA" : w.how == CP_ASYNC16 ? "cp.async" : "plain copies",
                 w.consumer_threads / 128, w.consumer_threads > 128 ? "s" : "",
                 w.persistent == 2 ? ", persistent, taking turns on the tensor cores"
                 : w.persistent    ? ", persistent (the producer runs ahead into the next block)"
                 : w.turns    ? ", taking turns at each tl_gemm"
                              : "");
    tli_list_add(L, &top, roles);
    ir->body = top.first;
    tli_set_parent(L, ir->body, 0);
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
        plan_multicast(P, &pi, producer_engine(P, &pi) == CP_TMA);
        schedule_warp_specialized(P, &pi);
        return;
    }
    bool tma = pi.S >= 2 && pi.all_wgmma, chunks = pi.S >= 2;
    for (int i = 0; i < pi.nprod; i++) {
        tma &= tma_ok(P, pi.prod[i]);
        chunks &= chunkable(P, pi.prod[i]);
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
