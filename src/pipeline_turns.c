/*
 * pipeline_turns.c - the consumer warpgroups of one block taking turns on
 * the tensor cores, in the warp-specialised schedule (pipeline_ws.c): the
 * turn barriers around the loop's gemms (tli_pipe_add_turns), and the
 * rotated loop that issues one tile's first gemm and the previous tile's
 * second in one turn (tli_pipe_find_rotation, tli_pipe_rotated_loop).
 */
#include "pipeline.h"

/* ------------------------------------------ turns on the tensor cores */

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
 * end arrives on the next group's barrier. The first 16 gemms of a body
 * are turn boundaries; any past them count as other work and run in
 * whatever turn they fall (an order on the tensor cores, never a data
 * dependence, so nothing is lost but the overlap). */

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
    return tli_low_if(P->L, when ? bin(P, E_AND, when, cond) : cond,
                          tli_low_mbar(P->L, S_MBAR_WAIT, w->order, group, par), 0);
}

void tli_pipe_add_turns(piper *P, const ws_plan *w, int32_t stage_node, int32_t i, int32_t n, int32_t p, int stages)
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
        int32_t done = tli_pipe_sk_value(P, TH_RUN);
        base = tli_pipe_cast32(P, each    ? bin(P, E_MUL, done, I(P, G))
                                  : b > 0 ? bin(P, E_ADD, done, tli_pipe_sk_value(P, TH_RUN_BLOCKS))
                                          : done);
    } else if (p) {
        base = tli_pipe_cast32(P, bin(P, E_MUL, p, each    ? bin(P, E_MUL, n, I(P, G))
                                                   : b > 0 ? bin(P, E_ADD, n, I(P, 1))
                                                           : n));
    }
    int32_t i32 = tli_pipe_cast32(P, i);
    int32_t arrive = each ? 0 : tli_low_mbar(P->L, S_MBAR_ARRIVE, w->order, other, 0);
    for (int j = 0; j < G && L->st == TL_OK; j++) {
        int32_t before = 0, after = 0;
        if (each) { /* turn i G + j */
            int32_t tg = turn_number(P, w, bin(P, E_ADD, bin(P, E_ADD, base, bin(P, E_MUL, i32, I32(P, G))), I32(P, j)), group);
            before = turn_wait(P, w, group, tg, 0);
            tli_pipe_splice_around(P, g[j], before,
                                   tli_low_if(P->L, lane0, tli_low_mbar(P->L, S_MBAR_ARRIVE, w->order, other, 0), 0));
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
            after = tli_low_if(P->L, lane0, arrive, 0);
        else if (b > 0 && j == G - 1) /* the last iteration's final turn ends after its last gemm */
            after = tli_low_if(P->L, bin(P, E_AND, last, lane0),
                                   tli_low_mbar(P->L, S_MBAR_ARRIVE, w->order, other, 0), 0);
        tli_pipe_splice_around(P, g[j], before, after);
        if (j == b)
            tli_low_note(L, g[j], "a turn on the tensor cores starts here (the one before it has ended)");
        else if (after)
            tli_low_note(L, g[j], "ends a turn on the tensor cores: the next warpgroup goes");
    }
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
        if (tli_pipe_staged_buf(pi, b))
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

bool tli_pipe_find_rotation(piper *P, const pipe_info *pi, rotation *r)
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

void tli_pipe_shift_stmts(piper *P, int32_t first, int32_t var, int32_t with)
{
    for (int32_t s = first; s && P->L->st == TL_OK; s = P->ir->s.v[s].next) {
        tli_pipe_shift_one(P, s, var, with);
        tli_pipe_shift_stmts(P, P->ir->s.v[s].body, var, with);
        tli_pipe_shift_stmts(P, P->ir->s.v[s].orelse, var, with);
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
        tli_pipe_shift_one(P, id, var, with);
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
    int32_t kg = turn_number(P, w, tli_pipe_cast32(P, k), group);
    int32_t wait = tli_low_if(P->L, bin(P, E_GT, kg, I32(P, 0)),
                                  tli_low_mbar(P->L, S_MBAR_WAIT, w->order, group,
                                                   bin(P, E_MOD, bin(P, E_SUB, kg, I32(P, 1)), I32(P, 2))),
                                  0);
    tli_list_add(L, l, wait);
    tli_list_add(L, l, work);
    int32_t lane0 = bin(P, E_EQ, tli_low_thread(L, TH_LANE), I32(P, 0));
    tli_list_add(L, l, tli_low_if(P->L, lane0, tli_low_mbar(P->L, S_MBAR_ARRIVE, w->order, other, 0), 0));
}

/* The rotated consumer loop (see above) in place of the pipelined
 * statement, for n tiles: a prologue with tile 0's A1 and A2, a loop over
 * tiles j = 1 .. n - 1 issuing A1(j) and B(j - 1) in one turn, then A2(j),
 * and an epilogue with B(n - 1). No wgmma is issued under a condition that
 * a later wait depends on (ptxas would serialise every wgmma). */
void tli_pipe_rotated_loop(piper *P, const pipe_info *pi, const ws_plan *w, const rotation *r, int32_t n,
                           tli_list *out)
{
    tli_lowered *L = P->L;
    int S = pi->S;
    int32_t v = pi->var; /* the loop's variable: tile j = v + 1 */
    int32_t zero = I(P, 0), last = bin(P, E_SUB, n, I(P, 1));
    /* prologue: tile 0 */
    tli_list pro = {0};
    tli_list_add(L, &pro, tli_low_mbar(P->L, S_MBAR_WAIT, w->r.full, I32(P, 0), I32(P, 0)));
    turn(P, w, &pro, zero, tli_pipe_stage_of(P, pi, I32(P, 0), copy_stmts(P, r->a1, v, zero)));
    tli_pipe_wgmma_wait(P, &pro, 0);
    tli_list_add(L, &pro, tli_pipe_stage_of(P, pi, I32(P, 0), copy_stmts(P, r->a2, v, zero)));
    /* epilogue: B of tile n - 1, and its slot released */
    int32_t lseq = tli_pipe_cast32(P, last), lslot = bin(P, E_MOD, lseq, I32(P, S));
    tli_list epi = {0};
    turn(P, w, &epi, n, tli_pipe_stage_of(P, pi, lslot, copy_stmts(P, r->b, v, last)));
    tli_pipe_wgmma_wait(P, &epi, 0);
    tli_list_add(L, &epi, tli_pipe_release_if(P, pi, 0, w->r.empty, lslot));
    /* the loop, on the original statements: A1, A2 of tile v + 1, B of tile v */
    int32_t next = bin(P, E_ADD, v, I(P, 1));
    tli_pipe_shift_stmts(P, r->a1, v, next);
    tli_pipe_shift_stmts(P, r->a2, v, next);
    tli_list body = {0};
    int32_t seq_let = tli_low_let(L, "tl_seq#", tli_pipe_cast32(P, next));
    int32_t seq = let_ref(P, seq_let);
    int32_t st_let = tli_low_let(L, "tl_st#", bin(P, E_MOD, seq, I32(P, S)));
    int32_t st = let_ref(P, st_let);
    int32_t prev = bin(P, E_MOD, bin(P, E_ADD, seq, I32(P, S - 1)), I32(P, S));
    tli_list_add(L, &body, seq_let);
    tli_list_add(L, &body, st_let);
    int32_t phase = bin(P, E_MOD, bin(P, E_DIV, seq, I32(P, S)), I32(P, 2));
    tli_list_add(L, &body, tli_low_mbar(P->L, S_MBAR_WAIT, w->r.full, st, phase));
    tli_list issue = {0};
    tli_list_add(L, &issue, tli_pipe_stage_of(P, pi, st, r->a1));
    tli_list_add(L, &issue, tli_pipe_stage_of(P, pi, prev, r->b));
    turn(P, w, &body, next, issue.first);
    tli_list_add(L, &body, tli_pipe_stage_of(P, pi, st, r->a2));
    tli_pipe_wgmma_wait(P, &body, 0); /* B of tile v: done already where A2 rewrote its accumulator */
    tli_list_add(L, &body, tli_pipe_release_if(P, pi, 0, w->r.empty, prev));
    P->ir->s.v[pi->sid].op = S_SERIAL;
    P->ir->s.v[pi->sid].a0 = bin(P, E_SUB, n, I(P, 1));
    tli_pipe_set_body(P, pi->sid, body.first);
    tli_low_note(L, pi->sid,
                 "tl_pipelined, consumer side, rotated: S of tile j and O of tile j - 1 issued in one turn, tile j's "
                 "softmax under O's gemm (%d-slot ring)",
                 S);
    int32_t more = bin(P, E_GT, n, zero);
    tli_list_add(L, out, tli_low_if(P->L, more, pro.first, 0));
    tli_pipe_splice_around(P, pi->sid, out->first, tli_low_if(P->L, more, epi.first, 0));
}
