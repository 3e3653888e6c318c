/*
 * pipeline_build.c - the statements the pipeline pass's schedules are made
 * of (pass_pipeline.c: TMA, cp.async, plain; pipeline_ws.c and
 * pipeline_turns.c: warp-specialised; pipeline_store.c: the epilogue's TMA
 * stores): the producers' copies into their slots, ifs and loops,
 * mbarriers and the rings' releases (cluster-wide where the producers
 * multicast), splicing into a statement list, persistent tile loops, wgmma
 * waits; and the probe of the buffers a statement reads and writes. Their
 * prototypes are in pipeline.h.
 */
#include "pipeline.h"

#include <string.h>

/* -------------------------------------------------------- statements */

/* Replaces every use of loop variable var in the expressions of statement
 * s itself by expression with. */
void tli_pipe_shift_one(piper *P, int32_t s, int32_t var, int32_t with)
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
int32_t tli_pipe_producer_copy(piper *P, const pipe_info *pi, int32_t c, int32_t it, tli_copy_how how, int32_t bar,
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
        tli_pipe_shift_one(P, id, pi->var, it);
    return id;
}

/* bar[idx] expects `bytes` more of TMA's transactions. */
int32_t tli_pipe_mbar_expect(piper *P, int32_t bar, int32_t idx, int64_t bytes)
{
    tli_snode e = {.op = S_MBAR_EXPECT, .buf = bar, .a0 = idx, .a1 = (int32_t)bytes};
    return tli_low_stmt(P->L, &e);
}

/* S_STAGE(bufs of pi, stage) { body } */
int32_t tli_pipe_stage_of(piper *P, const pipe_info *pi, int32_t stage, int32_t body)
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
int32_t tli_pipe_producers_of(piper *P, const pipe_info *pi, const int *of, int g, int32_t it, int32_t stage,
                              tli_copy_how how, int32_t bar, int32_t bar_idx, int64_t bytes, int threads)
{
    tli_list l = {0};
    if (how == CP_TMA)
        tli_list_add(P->L, &l, tli_pipe_mbar_expect(P, bar, bar_idx, bytes));
    for (int i = 0; i < pi->nprod; i++)
        if (!of || of[i] == g)
            tli_list_add(P->L, &l,
                         tli_pipe_producer_copy(P, pi, pi->prod[i], it, how, bar, bar_idx, threads, pi->mcast[i]));
    return tli_pipe_stage_of(P, pi, stage, l.first);
}

/* Every producer, on bar[stage]. */
int32_t tli_pipe_producers(piper *P, const pipe_info *pi, int32_t it, int32_t stage, tli_copy_how how, int32_t bar,
                           int threads)
{
    return tli_pipe_producers_of(P, pi, NULL, 0, it, stage, how, bar, stage, pi->stage_bytes, threads);
}

/* for (v = 0; v < extent; ++v) body, with a fresh variable; *var gets it. */
int32_t tli_pipe_mk_serial(piper *P, int32_t extent, int32_t *var, bool unroll)
{
    tli_snode n = {.op = S_SERIAL, .a0 = extent, .rank = 1, .x = {unroll}};
    int32_t id = tli_low_stmt(P->L, &n);
    tli_enode v = {.op = E_LOOP_VAR, .dtype = TL_I64, .loop = id, .scope = id};
    *var = tli_low_expr(P->L, &v);
    if (id)
        P->ir->s.v[id].vars[0] = *var;
    return id;
}

void tli_pipe_set_body(piper *P, int32_t s, int32_t body)
{
    P->ir->s.v[s].body = body;
    tli_set_parent(P->L, body, s);
}

int32_t tli_pipe_mbar_array(piper *P, const char *name, int64_t n)
{
    tli_bnode b = {.scope = B_MBAR, .dtype = TL_I64, .rank = 1, .cshape = {n}};
    tli_fmt(b.name, sizeof b.name, "%s", name);
    return tli_low_buf(P->L, &b);
}

int32_t tli_pipe_mbar_init(piper *P, int32_t bar, int count)
{
    tli_snode n = {.op = S_MBAR_INIT, .buf = bar, .a1 = count};
    n.x[TLI_X_MBAR_FENCE] = P->L->target.mbarrier_init_fence;
    return tli_low_stmt(P->L, &n);
}

int32_t tli_pipe_op_stmt(piper *P, tli_sop op, int32_t a0, int32_t a1)
{
    tli_snode n = {.op = (uint8_t)op, .a0 = a0, .a1 = a1};
    return tli_low_stmt(P->L, &n);
}

/* ------------------------------ the rings' mbarriers (TMA multicast) */

/* A ring's mbarriers, fenced for the cluster when other blocks will
 * complete transactions or arrive on them. */
int32_t tli_pipe_ring_init(piper *P, const pipe_info *pi, int32_t bar, int count)
{
    int32_t id = tli_pipe_mbar_init(P, bar, count);
    if (id && pi->cluster_ring)
        P->ir->s.v[id].x[TLI_X_MBAR_FENCE] = 1;
    return id;
}

/* A ring's empty mbarriers: an arrival per consumer warp, of every block of
 * the cluster when other blocks multicast into the slots. */
int32_t tli_pipe_empty_init(piper *P, const pipe_info *pi, int32_t bar, int warps)
{
    return tli_pipe_ring_init(P, pi, bar, warps * (pi->cluster_ring ? tli_cluster_size(P->ir) : 1));
}

/* A warp releases slot idx of empty mbarrier bar when `when` holds (0:
 * always): its lane 0 arrives on its own block's mbarrier, or, when other
 * blocks multicast into the ring, lane r on block r's (each block's
 * producer refills the slot in all of its group: every block must have
 * freed it), the cluster's arrivals side by side rather than one lane's
 * in turn. */
int32_t tli_pipe_release_if(piper *P, const pipe_info *pi, int32_t when, int32_t bar, int32_t idx)
{
    int32_t lane = tli_low_thread(P->L, TH_LANE);
    int32_t who = pi->cluster_ring ? bin(P, E_LT, lane, I32(P, tli_cluster_size(P->ir)))
                                   : bin(P, E_EQ, lane, I32(P, 0));
    int32_t id = tli_low_mbar(P->L, S_MBAR_ARRIVE, bar, idx, 0);
    if (id && pi->cluster_ring) {
        P->ir->s.v[id].x[TLI_X_MBAR_CLUSTER] = 1;
        P->ir->s.v[id].value = lane; /* the block it arrives at */
    }
    return tli_low_if(P->L, when ? bin(P, E_AND, when, who) : who, id, 0);
}

/* After the mbarriers' initialisation: a block barrier, or a cluster one
 * when other blocks will arrive on them and write into the ring. */
void tli_pipe_init_done(piper *P, const pipe_info *pi, tli_list *l)
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
void tli_pipe_loop_exit_sync(piper *P, const pipe_info *pi, tli_list *l)
{
    if (pi->cluster_ring)
        tli_list_op(P->L, l, S_CLUSTER_SYNC, 0, 0);
}

/* --------------------------------------- lists, tile loops, waits */

/* Puts the chain `before` ahead of statement s and `after` behind it, in
 * the list that holds s. */
void tli_pipe_splice_around(piper *P, int32_t s, int32_t before, int32_t after)
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
int32_t tli_pipe_sk_value(piper *P, tli_thread_value v)
{
    tli_enode n = {.op = E_THREAD, .dtype = TL_I64, .ival = v};
    return tli_low_expr(P->L, &n);
}

int32_t tli_pipe_cast32(piper *P, int32_t e)
{
    tli_enode n = {.op = E_CAST, .dtype = TL_I32, .a = {e}, .scope = tli_E(P->ir, e)->scope};
    return tli_low_expr(P->L, &n);
}

/* A persistent loop over this CTA's blocks p = start, start + step, ...;
 * *p gets its variable. The body is set later. */
int32_t tli_pipe_mk_tile_loop(piper *P, int32_t start, int step, int counter_role, int32_t *p)
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
void tli_pipe_wgmma_wait(piper *P, tli_list *l, int n)
{
    if (P->L->wgmma)
        tli_list_op(P->L, l, S_WGMMA_WAIT, 0, n);
}

/* The consumers of pi wrapped in their slot: S_STAGE(bufs, stage) {...}. */
int32_t tli_pipe_consumers_at(piper *P, const pipe_info *pi, int32_t stage)
{
    int32_t first = pi->first_consumer;
    return first ? tli_pipe_stage_of(P, pi, stage, first) : 0;
}

/* ---------------------------------- the buffers statements touch */

void tli_pipe_probe_free(probe *q)
{
    tli_bufset_free(&q->rd);
    tli_bufset_free(&q->wr);
}

bool tli_pipe_probe_init(piper *P, probe *q)
{
    *q = (probe){0};
    if (tli_bufset_init(&q->rd, P->ir->b.n) && tli_bufset_init(&q->wr, P->ir->b.n))
        return true;
    tli_pipe_probe_free(q); /* (nothing left to free for a caller that gives up) */
    tli_low_fail(P->L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    return false;
}

/* The buffers statement x reads (q->rd) and writes (q->wr). */
void tli_pipe_probe_fill(piper *P, probe *q, int32_t x)
{
    tli_bufset_clear(&q->rd);
    tli_bufset_clear(&q->wr);
    tli_stmt_access(P->L, x, &q->rd, &q->wr);
}

/* Whether statement x reads buffer b (*reads) and writes it (*writes). */
void tli_pipe_probe_stmt(piper *P, probe *q, int32_t x, int32_t b, bool *reads, bool *writes)
{
    tli_pipe_probe_fill(P, q, x);
    *reads = tli_bufset_has(&q->rd, b);
    *writes = tli_bufset_has(&q->wr, b);
}
