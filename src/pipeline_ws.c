/*
 * pipeline_ws.c - the warp-specialised schedule of a tl_pipelined loop
 * (tl_use_warp_specialize, tl_use_pingpong), the first of the pipeline
 * pass's schedules that applies (pass_pipeline.c).
 *
 * One more warpgroup joins the block as the producer; it issues the
 * producers of every iteration into a ring of `stages` slots (TMA boxes by
 * one thread, or cp.async / plain copies by its 128 threads), each slot's
 * "full" mbarrier completing when it has landed; the consumers wait for a
 * slot, run everything else the loop holds (any number of tl_gemm,
 * element-wise loops, reductions) and release it on its "empty" mbarrier.
 * With ping-pong, blocks of one warpgroup run two at a time in persistent
 * CTAs and take turns on the tensor cores (an mbarrier pair), so one's
 * epilogue overlaps the other's main loop.
 *
 * This file: the registers of the two roles, the producer's engine, rings
 * of their own for tiles read at different points (ring_split), the
 * producer's branch, the consumers' loop and where they release slots,
 * their private buffers, tiles the producer loads ahead of the loop, the
 * block counter, and the schedule that puts them together
 * (tli_pipe_schedule_warp_specialized). Elsewhere: the turns a block's
 * consumer warpgroups take on the tensor cores (pipeline_turns.c), the
 * epilogue's TMA stores (pipeline_store.c), the statement builders
 * (pipeline_build.c), the shared types (pipeline.h).
 */
#include "pipeline.h"

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

/* The CTA's registers: its share of the SM's 64K where tl_use_min_blocks
 * asks for that many blocks an SM (the launch bound then caps each thread
 * at 64K / (threads x blocks); a split of the whole 64K would ask for more
 * than the CTA holds, and the consumers' raise would never complete). */
static int reg_pool(int consumer_threads, int min_blocks)
{
    int threads = consumer_threads + 128;
    return 65536 / (min_blocks > 1 ? min_blocks : 1) / threads / 8 * 8 * threads;
}

static int consumer_regs(int consumer_threads, int min_blocks)
{
    int pool = reg_pool(consumer_threads, min_blocks);
    int r = (pool - 128 * PRODUCER_REGS) / consumer_threads / 8 * 8;
    if (r >= 240)
        return 240;
    return pool - (r + 8) * consumer_threads >= 128 * PRODUCER_REGS_MIN ? r + 8 : r;
}

/* The producer's registers beside consumer_regs's: what the consumers
 * leave of the pool, at most 40, a multiple of 8. */
static int producer_regs(int consumer_threads, int min_blocks)
{
    int left = (reg_pool(consumer_threads, min_blocks) - consumer_regs(consumer_threads, min_blocks) * consumer_threads) /
               128 / 8 * 8;
    return left > PRODUCER_REGS ? PRODUCER_REGS : left;
}

/* The producer engine of a warp-specialised loop: TMA when every producer
 * can be boxes, else cp.async when every one is chunkable, else plain
 * copies (the safe variant). */
tli_copy_how tli_pipe_producer_engine(piper *P, const pipe_info *pi)
{
    bool tma = true, chunks = true;
    for (int i = 0; i < pi->nprod; i++) {
        tma &= tli_pipe_tma_ok(P, pi->prod[i]);
        chunks &= tli_pipe_chunkable(P, pi->prod[i]);
    }
    return tma ? CP_TMA : chunks ? CP_ASYNC16 : CP_ELEMENTS;
}

/* ------------------------------------------------ rings of their own */

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

/* Slot `slot` of group g's ring: the mbarriers' index. */
static int32_t ring_slot(piper *P, int32_t slot, int g, int S) { return g ? bin(P, E_ADD, slot, I32(P, g * S)) : slot; }

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
    if (!tli_pipe_probe_init(P, &q))
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
        tli_pipe_probe_fill(P, &q, s);
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
    tli_pipe_probe_free(&q);
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
    if (!at || !tli_pipe_probe_init(P, &q))
        return;
    int first[TLI_MAX_TMA], last[TLI_MAX_TMA];
    bool bad = false;
    for (int i = 0; i < pi->nprod; i++)
        first[i] = last[i] = -1;
    int pos = 0;
    for (int32_t s = pi->first_consumer; s && !bad; s = ir->s.v[s].next, pos++) {
        tli_pipe_probe_fill(P, &q, s);
        for (int i = 0; i < pi->nprod; i++) {
            bad |= tli_bufset_has(&q.wr, pi->bufs[i]);
            if (tli_bufset_has(&q.rd, pi->bufs[i])) {
                if (first[i] < 0)
                    first[i] = pos;
                last[i] = pos;
            }
        }
    }
    tli_pipe_probe_free(&q);
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

/* The ring position of iteration j of the block whose loop variable
 * (persistent) is p: p n + j, in 32 bits (ring arithmetic on the issue path:
 * a 64-bit division by a stage count that is not a power of two costs
 * dozens of instructions). */
static int32_t ring_pos(piper *P, int32_t p, int32_t n, int32_t j)
{
    if (P->ir->stream_k) /* the steps of this CTA's earlier units, then j */
        return tli_pipe_cast32(P, bin(P, E_ADD, tli_pipe_sk_value(P, TH_SK_BASE), j));
    if (P->run) /* the iterations of this CTA's earlier blocks, then j */
        return tli_pipe_cast32(P, bin(P, E_ADD, tli_pipe_sk_value(P, TH_RUN), j));
    return tli_pipe_cast32(P, p ? bin(P, E_ADD, bin(P, E_MUL, p, n), j) : j);
}

/* A stream-K unit's loop: its n = j1 - j0 steps, step j being the block's
 * step j + j0 (the caller shifts the statements by that). */
static int32_t sk_trip_count(piper *P)
{
    return bin(P, E_SUB, tli_pipe_sk_value(P, TH_SK_J1), tli_pipe_sk_value(P, TH_SK_J0));
}

/* ------------------------------------------------------- the producer */

/* The producer warpgroup's work: for each block of the CTA (its one block,
 * or every block of a persistent CTA in order), the producers of every
 * iteration into the ring, each slot refilled once released. */
static int32_t producer_branch(piper *P, const pipe_info *pi, const ws_plan *w)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    int32_t tile = 0, p = 0;
    if (w->persistent)
        tile = tli_pipe_mk_tile_loop(P, I(P, 0), 1, w->how == CP_TMA ? TLI_COUNTER_TAKER : TLI_COUNTER_PRODUCERS, &p);
    tli_list blk = {0};
    if (w->pre.n) { /* the block's Q-like tiles first, once the consumers have handed the slot back */
        if (w->persistent)
            tli_list_add(L, &blk,
                         tli_low_if(P->L, bin(P, E_GT, p, I(P, 0)),
                                        tli_low_mbar(P->L, S_MBAR_WAIT, w->pre.empty, I32(P, 0),
                                                         bin(P, E_MOD, bin(P, E_SUB, p, I(P, 1)), I(P, 2))), 0));
        tli_list_add(L, &blk, tli_pipe_mbar_expect(P, w->pre.full, I32(P, 0), w->pre.bytes));
        for (int i = 0; i < w->pre.n; i++) /* TMA boxes on the slot's full mbarrier */
            tli_list_add(L, &blk,
                         tli_pipe_producer_copy(P, pi, w->pre.copy[i], 0, CP_TMA, w->pre.full, I32(P, 0), 0, 0));
    }
    int32_t n_let = tli_low_let(L, "tl_n#", w->stream_k ? sk_trip_count(P) : pi->extent);
    tli_list_add(L, &blk, n_let);
    int32_t n = let_ref(P, n_let);
    int32_t j;
    int32_t loop = tli_pipe_mk_serial(P, n, &j, false);
    int32_t step = w->stream_k ? bin(P, E_ADD, j, tli_pipe_sk_value(P, TH_SK_J0)) : j; /* the block's K step */
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
        tli_list_add(L, &it, tli_low_if(P->L, bin(P, E_GE, seq, I32(P, S)),
                                            tli_low_mbar(P->L, S_MBAR_WAIT, w->r.empty, idx, phase), 0));
        tli_list_add(L, &it, tli_pipe_producers_of(P, pi, w->sp.of, g, step, sn, w->how, w->r.full, idx, w->sp.bytes[g],
                                                   w->how == CP_TMA ? 0 : 128));
    }
    if (w->how != CP_TMA) /* each producer thread arrives when its own copies have landed */
        tli_list_add(L, &it, tli_low_mbar(P->L, S_MBAR_ARRIVE, w->r.full, sn, w->how == CP_ASYNC16));
    tli_pipe_set_body(P, loop, it.first);
    tli_list_add(L, &blk, loop);
    int32_t work = blk.first;
    if (tile) {
        tli_pipe_set_body(P, tile, blk.first);
        work = tile;
    }
    tli_list out = {0};
    if (L->target.setmaxnreg)
        tli_list_add(L, &out, tli_pipe_op_stmt(P, S_SETMAXNREG, 0, producer_regs(w->consumer_threads, P->ir->min_blocks)));
    if (w->how == CP_TMA) /* one thread issues every box */
        work = tli_low_if(P->L, bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0)), work, 0);
    tli_list_add(L, &out, work);
    tli_pipe_loop_exit_sync(P, pi, &out); /* the consumers' is after their loop */
    return out.first;
}

/* ------------------------------------------------------ the consumers */

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
    if (!at || !tli_pipe_probe_init(P, &q))
        return 0;
    bool touched = false; /* (at is a statement of the body's top level: from it on) */
    for (int32_t s = at; s && !touched; s = P->ir->s.v[s].next)
        for (int i = 0; i < w->pre.n && !touched; i++) {
            bool reads, writes;
            tli_pipe_probe_stmt(P, &q, s, pre_buf(P, w, i), &reads, &writes);
            touched = reads || writes;
        }
    tli_pipe_probe_free(&q);
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
    if (!tli_pipe_probe_init(P, &q))
        return 0;
    int32_t last = 0;
    bool bad = false;
    for (int32_t s = pi->first_consumer; s && !bad; s = P->ir->s.v[s].next) {
        tli_pipe_probe_fill(P, &q, s);
        for (int i = 0; i < pi->nprod; i++) {
            bool reads = tli_bufset_has(&q.rd, pi->bufs[i]);
            bad |= tli_bufset_has(&q.wr, pi->bufs[i]) || (reads && tli_S(P->ir, s)->op == S_GEMM);
            if (reads)
                last = s;
        }
    }
    tli_pipe_probe_free(&q);
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
        tli_pipe_shift_stmts(P, pi->first_consumer, pi->var, bin(P, E_ADD, pi->var, tli_pipe_sk_value(P, TH_SK_J0)));
    int32_t lane0 = bin(P, E_EQ, tli_low_thread(L, TH_LANE), I32(P, 0));
    int32_t group = tli_low_thread(L, TH_WG);
    if (w->persistent == 2) { /* the other group has issued its main loop of the block before */
        int32_t parity_ = bin(P, E_MOD, bin(P, E_DIV, bin(P, E_SUB, p, I(P, 1)), I(P, 2)), I(P, 2));
        tli_list_add(L, &out, tli_low_if(P->L, bin(P, E_GT, p, I(P, 0)),
                                             tli_low_mbar(P->L, S_MBAR_WAIT, w->order, group, parity_), 0));
    }
    if (w->pre.n) /* the producer's tiles from ahead of the loop (block p's: phase p) */
        tli_list_add(L, &out, tli_low_mbar(P->L, S_MBAR_WAIT, w->pre.full, I32(P, 0),
                                               p ? bin(P, E_MOD, p, I(P, 2)) : I(P, 0)));
    rotation rot;
    if (w->turns && !w->persistent && P->ir->pingpong == 2 && tli_pipe_find_rotation(P, pi, &rot)) {
        tli_pipe_rotated_loop(P, pi, w, &rot, n, &out);
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
        tli_list_add(L, &body, tli_low_mbar(P->L, S_MBAR_WAIT, w->r.full, ring_slot(P, st, g, S), phase));
    if (w->how != CP_TMA && L->async_proxy) /* plain shared stores that wgmma reads */
        tli_list_op(L, &body, S_FENCE_ASYNC, 0, 0);
    int32_t at = tli_pipe_consumers_at(P, pi, st);
    tli_list_add(L, &body, at);
    if (w->turns && at)
        tli_pipe_add_turns(P, w, at, pi->var, n, p, S);
    int32_t early = early_release_point(P, pi, w);
    if (early) {
        tli_list rel = {0};
        tli_list_op(L, &rel, S_WARP_SYNC, 0, 0);
        tli_list_add(L, &rel, tli_pipe_release_if(P, pi, 0, w->r.empty, st));
        tli_pipe_splice_around(P, early, 0, rel.first);
        tli_low_note(L, rel.first, "the slot read for the last time: handed back to the producer");
    }
    int32_t prev = bin(P, E_MOD, bin(P, E_SUB, seq, I32(P, 1)), I32(P, S));
    int32_t pre_at = pre_release_point(P, pi, w);
    if (sp->G > 1 || pre_at) { /* the releases at the release point */
        tli_list rel = {0};
        tli_pipe_wgmma_wait(P, &rel, 0);
        for (int g = 0; sp->G > 1 && g < sp->G; g++) /* (one ring: released at the body's end) */
            tli_list_add(L, &rel, sp->early[g] ? tli_pipe_release_if(P, pi, 0, w->r.empty, ring_slot(P, st, g, S))
                                               : tli_pipe_release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), w->r.empty,
                                                                     ring_slot(P, prev, g, S)));
        if (pre_at) /* the block's last iteration: the next block's Q-like tiles may come */
            tli_list_add(L, &rel, tli_pipe_release_if(P, pi, bin(P, E_EQ, pi->var, bin(P, E_SUB, n, I(P, 1))),
                                                      w->pre.empty, I32(P, 0)));
        tli_pipe_splice_around(P, pre_at ? pre_at : sp->at, rel.first, 0);
        if (sp->G > 1)
            tli_low_note(L, rel.first, "the slots of the tiles read so far released (%d rings, one a group of tiles)",
                         sp->G);
        else
            tli_low_note(L, rel.first, "the tiles loaded ahead of the loop read for the last time in the last iteration");
    }
    tli_pipe_wgmma_wait(P, &body, pi->tail);
    if (sp->G == 1 && !early)
        tli_list_add(L, &body, tli_pipe_release_if(P, pi, bin(P, E_GT, pi->var, I(P, 0)), w->r.empty, prev));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = n;
    tli_pipe_set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid, "tl_pipelined, consumer side: ring slots of %d stages filled by the producer", S);
    tli_list tail = {0};
    if (w->persistent == 2) /* the other group's turn */
        tli_list_add(L, &tail, tli_low_if(P->L, lane0, tli_low_mbar(P->L, S_MBAR_ARRIVE, w->order,
                                                                         bin(P, E_SUB, I32(P, 1), group), 0), 0));
    tli_pipe_wgmma_wait(P, &tail, 0);
    if (w->pre.n && w->persistent) /* read for the last time (plan_pre_loads): the next block's may come */
        tli_list_add(L, &tail,
                     tli_pipe_release_if(P, pi, pre_at ? bin(P, E_EQ, n, I(P, 0)) : 0, w->pre.empty, I32(P, 0)));
    int32_t last = bin(P, E_MOD, ring_pos(P, p, n, bin(P, E_SUB, n, I(P, 1))), I32(P, S));
    for (int g = 0; g < sp->G && !early; g++) /* (early groups: released in the loop) */
        if (!sp->early[g])
            tli_list_add(L, &tail,
                         tli_pipe_release_if(P, pi, bin(P, E_GT, n, I(P, 0)), w->r.empty, ring_slot(P, last, g, S)));
    if (w->stream_k) { /* the unit's partial sum: handed on, or the others' added */
        tli_snode fx = {.op = S_SK_FIXUP, .buf = P->sk_acc, .a0 = P->sk_steps};
        tli_list_add(L, &tail, tli_low_stmt(L, &fx));
    }
    tli_pipe_loop_exit_sync(P, pi, &tail);
    tli_pipe_splice_around(P, pi->sid, out.first, tail.first);
    return 0;
}

/* ------------ the consumers' own buffers, loads ahead, the block counter */

/* Whether b is a shared buffer outside the pipeline's ring: the consumers'
 * own, which a persistent CTA's next block rewrites. */
static bool private_shared(piper *P, const pipe_info *pi, int32_t b)
{
    return B(P, b)->scope == B_SHARED && !tli_pipe_staged_buf(pi, b);
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
    if (!top || !tli_pipe_probe_init(P, &q))
        return;
    int32_t prev = 0;
    for (int32_t c = ir->body; c && c != pi->sid && P->L->st == TL_OK;) {
        int32_t next = ir->s.v[c].next;
        const tli_snode *n = tli_S(ir, c);
        bool ok = n->op == S_COPY && pi->nprod + w->pre.n < TLI_MAX_TMA; /* a TMA descriptor each */
        int32_t b = ok ? tli_copy_buf(ir, n->a1) : 0;
        ok = ok && B(P, tli_copy_buf(ir, n->a0))->scope == B_GLOBAL && B(P, b)->scope == B_SHARED &&
             !tli_pipe_staged_buf(pi, b) && tli_pipe_tma_ok(P, c);
        for (int d = 0; ok && d < B(P, tli_copy_buf(ir, n->a0))->rank; d++)
            ok = block_invariant(P, tli_R(ir, n->a0)->idx[d]);
        for (int32_t x = ir->body; ok && x; x = ir->s.v[x].next) {
            bool reads, writes;
            if (x == c)
                continue;
            tli_pipe_probe_stmt(P, &q, x, b, &reads, &writes);
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
    tli_pipe_probe_free(&q);
    if (!w->pre.n)
        return;
    w->pre.full = tli_pipe_mbar_array(P, "tl_pre_full", 1);
    w->pre.empty = tli_pipe_mbar_array(P, "tl_pre_empty", 1);
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
    P->counter[1] = tli_pipe_mbar_array(P, "tl_block_full", 2);
    P->counter[2] = tli_pipe_mbar_array(P, "tl_block_empty", 2);
    P->L->launch.block_counter = true;
}

/* ------------------------------------------------------ the schedule */

void tli_pipe_schedule_warp_specialized(piper *P, const pipe_info *pi)
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
    w.how = tli_pipe_producer_engine(P, pi);
    plan_split(P, pi, &w.sp, w.how);
    int groups = w.persistent == 2 ? 2 : 1;
    w.consumer_threads = ir->threads * groups;
    w.r = (ring){tli_pipe_mbar_array(P, "tl_full", pi->S * w.sp.G), tli_pipe_mbar_array(P, "tl_empty", pi->S * w.sp.G)};
    w.order = w.persistent == 2 || w.turns ? tli_pipe_mbar_array(P, "tl_order", w.turns ? w.groups : 2) : 0;
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
        tile = tli_pipe_mk_tile_loop(P, tli_low_thread(L, TH_WG), 2, TLI_COUNTER_READER, &p);
    else if (w.persistent)
        tile = tli_pipe_mk_tile_loop(P, I(P, 0), 1, TLI_COUNTER_READER, &p);
    consumer_loop(P, pi, &w, p);
    /* (the staging tiles have their own waits; without such buffers the groups run on into the next
     * block without meeting) */
    bool own_shared = has_private_shared(P, pi, &w);
    /* (not when the groups take turns: the staging tile's block barriers would make them meet at
     * every block's end, where the turns keep them half a turn apart. FlashAttention D 64 lost 3-9 % at
     * 512-2k keys to them against 16-byte register stores, session 19) */
    bool tma_stores = w.persistent == 1 && !w.turns && tli_pipe_epilogue_tma_stores(P, ir->body);
    int32_t consumer_body = private_buffers(P, pi, ir->body, groups);
    if (tile) {
        tli_list tb = {0};
        tli_list_add(L, &tb, consumer_body);
        if (own_shared) /* the next block rewrites this group's buffers */
            tli_list_op(L, &tb, S_BARRIER, 0, 0);
        tli_pipe_set_body(P, tile, tb.first);
        consumer_body = tile;
    }
    tli_list cons = {0};
    if (L->target.setmaxnreg) {
        int creg = consumer_regs(w.consumer_threads, ir->min_blocks);
        int preg = producer_regs(w.consumer_threads, ir->min_blocks);
        if (creg < 24 || preg < 24) { /* setmaxnreg's least */
            tli_low_fail(L, TL_ERR_UNSUPPORTED,
                         "tl_use_min_blocks(%d): a warp-specialised block of %d threads would have %d registers a "
                         "consumer thread and %d a producer thread, below setmaxnreg's 24",
                         ir->min_blocks, w.consumer_threads + 128, creg, preg);
            return;
        }
        tli_list_add(L, &cons, tli_pipe_op_stmt(P, S_SETMAXNREG, 1, creg));
    }
    tli_list_add(L, &cons, consumer_body);
    if (tma_stores) /* the last block's stores complete before the CTA ends */
        tli_list_add(L, &cons, tli_low_if(P->L, bin(P, E_EQ, tli_low_thread(L, TH_TID), I32(P, 0)),
                                              tli_pipe_op_stmt(P, S_BULK_WAIT, 0, 0), 0));
    int32_t prod = producer_branch(P, pi, &w);
    /* the CTA: the mbarriers, then the two roles */
    int consumer_warps = ir->threads / 32;
    tli_list top = {0};
    tli_list_add(L, &top, tli_pipe_ring_init(P, pi, w.r.full, w.how == CP_TMA ? 1 : 128));
    tli_list_add(L, &top, tli_pipe_empty_init(P, pi, w.r.empty, consumer_warps));
    if (w.order) /* one arrival per warp of the group whose turn ends */
        tli_list_add(L, &top, tli_pipe_mbar_init(P, w.order, 4));
    if (w.pre.n) {
        tli_list_add(L, &top, tli_pipe_mbar_init(P, w.pre.full, 1));
        tli_list_add(L, &top, tli_pipe_mbar_init(P, w.pre.empty, consumer_warps));
    }
    if (P->counter[0]) { /* one producer thread writes a block's number; the consumers (and the producer's
                            other threads, cp.async) read it */
        tli_list_add(L, &top, tli_pipe_mbar_init(P, P->counter[1], 1));
        tli_list_add(L, &top, tli_pipe_mbar_init(P, P->counter[2], ir->threads + (w.how == CP_TMA ? 0 : 127)));
    }
    tli_pipe_init_done(P, pi, &top);
    int32_t producer_wg = I32(P, w.consumer_threads / 128);
    int32_t roles = tli_low_if(P->L, bin(P, E_EQ, tli_low_thread(L, TH_WG), producer_wg), prod, cons.first);
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
