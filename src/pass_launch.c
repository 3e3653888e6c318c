/*
 * pass_launch.c - how the kernel is launched, and the names every thread
 * reads to know where it is.
 *
 * The launch plan (lowered.h): threads per CTA (the block's, two blocks'
 * for a ping-pong CTA, plus the producer warpgroup when warp-specialised),
 * the launch bounds (one CTA per SM when setmaxnreg moves registers between
 * warpgroups, two when a wgmma kernel's shared memory lets two fit, so one
 * block's copies and barriers overlap the other's tensor-core work), the
 * grid (persistent: min(ceil(blocks / 2), SMs) CTAs, computed at launch),
 * the TMA descriptors the kernel takes, and the alignment a launch must
 * have for the fast variant.
 *
 * The statements every thread starts with: tl_tid (its thread in the
 * block, or in its consumer group), tl_warp and tl_lane where fragments or
 * reductions need them, tl_wg in a warp-specialised CTA; the block indices
 * tl_bx, tl_by, tl_bz: blockIdx, remapped by tl_use_swizzle so that
 * consecutive blocks walk down panels of block rows and share the tiles of
 * A and B in L2, or, in a persistent CTA, those of the tile each iteration
 * of its tile loop is at; then the block values (tl_block_value), each
 * computed once there. A persistent tile loop's body starts with the tile
 * its iteration is at (tl_t), dealt by CTA or taken from the block counter
 * through shared slots and mbarriers, and its exit past the last tile.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static int32_t I(tli_lowered *L, int64_t v) { return tli_low_int(L, v, TL_I64); }
static int32_t bin(tli_lowered *L, tli_eop op, int32_t a, int32_t b) { return tli_low_bin(L, op, a, b); }
static int32_t th(tli_lowered *L, tli_thread_value v)
{
    tli_enode n = {.op = E_THREAD, .dtype = v >= TH_RAW_BX ? TL_I64 : TL_I32, .ival = v};
    return tli_low_expr(L, &n);
}

/* The grid dimension d as an expression (1 when not given). */
static int32_t grid_dim(tli_lowered *L, int d) { return L->ir.grid[d] ? L->ir.grid[d] : I(L, 1); }

static bool uses_thread(const tli_ir *ir, tli_thread_value v)
{
    for (int32_t i = 1; i < ir->e.n; i++)
        if (ir->e.v[i].op == E_THREAD && ir->e.v[i].ival == v)
            return true;
    return false;
}

static bool uses_block_axis(const tli_ir *ir, int axis)
{
    for (int32_t i = 1; i < ir->e.n; i++)
        if (ir->e.v[i].op == E_BLOCK_IDX && ir->e.v[i].ival == axis)
            return true;
    return false;
}

/* Whether the code the emitter writes for this kernel reads tl_warp and
 * tl_lane: accumulator fragments, reductions with shuffles. */
static bool needs_warp_lane(const tli_lowered *L)
{
    for (int32_t b = 1; b < L->ir.b.n; b++)
        if (tli_B(&L->ir, b)->scope == B_FRAGMENT && L->frag[b].kind != FRAG_ROWS)
            return true;
    return uses_thread(&L->ir, TH_WARP) || uses_thread(&L->ir, TH_LANE);
}

/* S_LET name = value onto l; a read of it. */
static int32_t add_let(tli_lowered *L, tli_list *l, const char *name, int32_t value)
{
    int32_t let = tli_low_let(L, name, value);
    tli_list_add(L, l, let);
    return tli_low_let_ref(L, let);
}

/* tl_bx, tl_by, tl_bz of block number t (an expression) of a grid gx x gy x
 * gz, with the swizzle of tl_use_swizzle(P) inside each z slice:
 *   panel = P gx; row0 = t' / panel * P; rows = min(P, gy - row0);
 *   by = row0 + t' % panel % rows; bx = t' % panel / rows    (t' = t mod gx gy)
 * With clusters of cx x cy blocks the swizzle moves whole clusters: t, gx
 * and gy count clusters, and a block keeps its place in its cluster,
 *   by = (row0 + ...) cy + blockIdx.y % cy,  bx = (...) cx + blockIdx.x % cx,
 * so the blocks the GPU runs as one cluster stay neighbours that share
 * tiles (their TMA multicast relies on it). */
static int32_t in_cluster(tli_lowered *L, int32_t cluster_idx, int c, tli_thread_value raw)
{
    if (c < 2)
        return cluster_idx;
    return bin(L, E_ADD, bin(L, E_MUL, cluster_idx, I(L, c)), bin(L, E_MOD, th(L, raw), I(L, c)));
}

static void block_lets(tli_lowered *L, tli_list *l, int32_t t, int32_t gx, int32_t gy, bool with_z)
{
    const tli_ir *ir = &L->ir;
    int P = ir->swizzle;
    int32_t plane = bin(L, E_MUL, gx, gy);
    int32_t tt = with_z && ir->grid[2] ? bin(L, E_MOD, t, plane) : t;
    if (with_z && uses_block_axis(ir, 2)) /* 0 without a z dimension */
        add_let(L, l, "tl_bz", ir->grid[2] ? bin(L, E_DIV, t, plane) : I(L, 0));
    if (P && ir->grid[1]) {
        int32_t panel_let = tli_low_let(L, "tl_panel", bin(L, E_MUL, I(L, P), gx));
        tli_list_add(L, l, panel_let);
        int32_t panel = tli_low_let_ref(L, panel_let);
        int32_t row0_let = tli_low_let(L, "tl_row0", bin(L, E_MUL, bin(L, E_DIV, tt, panel), I(L, P)));
        tli_list_add(L, l, row0_let);
        int32_t row0 = tli_low_let_ref(L, row0_let);
        int32_t rows_let = tli_low_let(L, "tl_rows", bin(L, E_MIN, I(L, P), bin(L, E_SUB, gy, row0)));
        tli_list_add(L, l, rows_let);
        int32_t rows = tli_low_let_ref(L, rows_let);
        int32_t in_panel = bin(L, E_MOD, tt, panel);
        add_let(L, l, "tl_by", in_cluster(L, bin(L, E_ADD, row0, bin(L, E_MOD, in_panel, rows)), ir->cluster[1],
                                          TH_RAW_BY));
        add_let(L, l, "tl_bx", in_cluster(L, bin(L, E_DIV, in_panel, rows), ir->cluster[0], TH_RAW_BX));
        return;
    }
    if (uses_block_axis(ir, 1))
        add_let(L, l, "tl_by", bin(L, E_DIV, tt, gx));
    if (uses_block_axis(ir, 0))
        add_let(L, l, "tl_bx", bin(L, E_MOD, tt, gx));
}

/* The tensors of tl_param_tensor_array, bound to the block's pointer of
 * their array where the block indices are known: after block_lets. The
 * index expressions are made before any block let, which they make
 * needed (uses_block_axis). */
typedef struct array_bases {
    int n;
    int32_t buf[TLI_MAX_ALIGN_REQ], idx[TLI_MAX_ALIGN_REQ];
} array_bases;

static void find_arrays(tli_lowered *L, array_bases *ab)
{
    ab->n = 0;
    for (int32_t b = 1; b < L->ir.b.n && L->st == TL_OK; b++) {
        const tli_bnode *t = tli_B(&L->ir, b);
        if (t->scope != B_GLOBAL || !t->array_count)
            continue;
        if (ab->n == TLI_MAX_ALIGN_REQ) {
            tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_param_tensor_array: more than %d arrays of pointers",
                         TLI_MAX_ALIGN_REQ);
            return;
        }
        tli_enode n = {.op = E_BLOCK_IDX, .dtype = TL_I64, .ival = t->array_axis};
        ab->buf[ab->n] = b;
        ab->idx[ab->n++] = tli_low_expr(L, &n);
    }
}

static void add_array_bases(tli_lowered *L, tli_list *l, const array_bases *ab)
{
    for (int i = 0; i < ab->n; i++)
        tli_list_add(L, l, tli_low_stmt(L, &(tli_snode){.op = S_ARRAY_BASE, .buf = ab->buf[i], .a0 = ab->idx[i]}));
}

/* The kernel's tl_block_value nodes: each is computed by a let of its own
 * name at the head of every block, after the block's indices (in each
 * persistent tile loop, or once at the top), and then read from it. */
typedef struct block_values {
    int32_t n, *node, *let; /* the nodes, in the order they were made; a let of each */
} block_values;

static bool find_block_values(tli_lowered *L, block_values *bv)
{
    const tli_ir *ir = &L->ir;
    *bv = (block_values){0};
    for (int32_t i = 1; i < ir->e.n; i++)
        bv->n += ir->e.v[i].op == E_BLOCK_VALUE;
    if (!bv->n)
        return true;
    bv->node = calloc((size_t)bv->n, sizeof *bv->node);
    bv->let = calloc((size_t)bv->n, sizeof *bv->let);
    if (!bv->node || !bv->let) {
        free(bv->node);
        free(bv->let);
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return false;
    }
    int32_t j = 0;
    for (int32_t i = 1; i < ir->e.n; i++)
        if (ir->e.v[i].op == E_BLOCK_VALUE)
            bv->node[j++] = i;
    return true;
}

/* The lets of the block values at the end of list l (a value made from
 * others follows them: nodes are made after their operands). */
static void add_block_values(tli_lowered *L, tli_list *l, block_values *bv)
{
    for (int32_t j = 0; j < bv->n && L->st == TL_OK; j++) {
        char name[32];
        tli_fmt(name, sizeof name, "tl_bv%d", bv->node[j]);
        int32_t let = tli_low_let(L, name, L->ir.e.v[bv->node[j]].a[0]);
        tli_list_add(L, l, let);
        if (!bv->let[j])
            bv->let[j] = let;
    }
}

/* Each block value node becomes a read of its let (of one name in every
 * tile loop). */
static void read_block_values(tli_lowered *L, block_values *bv)
{
    for (int32_t j = 0; j < bv->n; j++) {
        tli_enode *n = &L->ir.e.v[bv->node[j]];
        if (bv->let[j]) {
            n->op = E_LET;
            n->loop = bv->let[j];
            n->a[0] = 0;
        }
    }
    free(bv->node);
    free(bv->let);
    *bv = (block_values){0};
}

/* ------------------------------------- which block a tile loop is at */

/* An atomic on word w of the block counter (S_ATOMIC), when `when` holds
 * (0: always); named: a let of the word's old value plus `plus` (0: none),
 * or `orelse` where `when` fails. */
static int32_t atomic_op(tli_lowered *L, int op, int w, int64_t v, int32_t when, int32_t plus, int32_t orelse,
                         const char *name)
{
    int32_t off = name ? tli_ir_add_str(&L->ir, name) : 0;
    if (off < 0) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return 0;
    }
    tli_snode n = {.op = S_ATOMIC, .a0 = I(L, v), .a1 = op, .value = when, .name = off, .x = {w, plus, orelse}};
    return tli_low_stmt(L, &n);
}

/* Word i of a B_WORDS buffer: read (v == 0, an expression) or written
 * with v (a statement). */
static int32_t word(tli_lowered *L, int32_t buf, int32_t i, int32_t v)
{
    int32_t at = tli_ir_add_indices(&L->ir, &i, 1);
    if (at < 0) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return 0;
    }
    if (v) {
        tli_snode n = {.op = S_STORE, .buf = buf, .idx = at, .value = v};
        return tli_low_stmt(L, &n);
    }
    tli_enode n = {.op = E_LOAD, .dtype = TL_I64, .buf = buf, .idx = at};
    return tli_low_expr(L, &n);
}

/* The thread that takes block p of tile loop s from the counter
 * (TLI_X_TILE_COUNTER, lowered.h), onto list l; `name`: the let of its
 * number t:
 *   when p >= 2, wait until every reader has read slot p % 2
 *   t = p == 0 ? blockIdx.x : (counter[0]++) + gridDim.x
 *   slot[p % 2] = min(t, ntiles); arrive on full[p % 2]
 *   past the last block: counter[1]++, and the CTA that counts last (all
 *   gridDim.x have taken their last number) sets both words back to 0 for
 *   the stream's next launch */
static void take_block(tli_lowered *L, tli_list *l, const tli_snode *s, int32_t ntiles, const char *name)
{
    int32_t p = s->vars[0], two = I(L, 2), at = bin(L, E_MOD, p, two), g = th(L, TH_GRID_X);
    int32_t slots = s->x[TLI_X_TILE_SLOTS], full = s->x[TLI_X_TILE_SLOT_FULL], empty = s->x[TLI_X_TILE_SLOT_EMPTY];
    int32_t parity = bin(L, E_MOD, bin(L, E_SUB, bin(L, E_DIV, p, two), I(L, 1)), two);
    tli_list_add(L, l, tli_low_if(L, bin(L, E_GE, p, two), tli_low_mbar(L, S_MBAR_WAIT, empty, at, parity), 0));
    int32_t t = atomic_op(L, 0, 0, 1, bin(L, E_NE, p, I(L, 0)), g, th(L, TH_RAW_BX), name);
    tli_list_add(L, l, t);
    int32_t tv = tli_low_let_ref(L, t), past = bin(L, E_GE, tv, ntiles);
    tli_list_add(L, l, word(L, slots, at, bin(L, E_MIN, tv, ntiles)));
    tli_list_add(L, l, tli_low_mbar(L, S_MBAR_ARRIVE, full, at, 0));
    tli_list done = {0}, clear = {0};
    int32_t count = atomic_op(L, 0, 1, 1, 0, 0, 0, "tl_done");
    tli_list_add(L, &done, count);
    tli_list_add(L, &clear, atomic_op(L, 1, 0, 0, 0, 0, 0, NULL));
    tli_list_add(L, &clear, atomic_op(L, 1, 1, 0, 0, 0, 0, NULL));
    int32_t last = bin(L, E_EQ, tli_low_let_ref(L, count), bin(L, E_SUB, g, I(L, 1)));
    tli_list_add(L, &done, tli_low_if(L, last, clear.first, 0));
    tli_list_add(L, l, tli_low_if(L, past, done.first, 0));
}

/* Leaves the tile loop when cond holds (onto l). */
static void exit_when(tli_lowered *L, tli_list *l, int32_t cond)
{
    tli_snode brk = {.op = S_BREAK};
    tli_list_add(L, l, tli_low_if(L, cond, tli_low_stmt(L, &brk), 0));
}

/* The statements that give tile loop s its block number tl_t, then leave
 * the loop past the last block, onto l. Blocks dealt by CTA: t = p G +
 * blockIdx.x (k at a time: p / k k G + k blockIdx.x + p % k). From the
 * counter: the taker takes them; a reader waits for slot p % 2, reads it
 * and arrives on its empty mbarrier (each thread's arrival orders its own
 * read before the next write); of a producer of several threads, the first
 * takes and every thread reads the slot. s: a copy of the loop's node. */
static void tile_number(tli_lowered *L, tli_list *l, const tli_snode *s, int32_t ntiles)
{
    int32_t p = s->vars[0], k = s->x[TLI_X_TILE_PERSIST], role = s->x[TLI_X_TILE_COUNTER];
    int32_t g = th(L, TH_GRID_X), bx = th(L, TH_RAW_BX);
    if (role == TLI_COUNTER_TAKER) {
        take_block(L, l, s, ntiles, "tl_t");
    } else if (role) {
        int32_t at = bin(L, E_MOD, p, I(L, 2)), parity = bin(L, E_MOD, bin(L, E_DIV, p, I(L, 2)), I(L, 2));
        int32_t full = s->x[TLI_X_TILE_SLOT_FULL], empty = s->x[TLI_X_TILE_SLOT_EMPTY];
        int32_t tid = th(L, TH_TID), zero = tli_low_int(L, 0, TL_I32);
        int32_t reader = role == TLI_COUNTER_READER ? 0 : bin(L, E_NE, tid, zero);
        int32_t wait = tli_low_mbar(L, S_MBAR_WAIT, full, at, parity);
        int32_t arrive = tli_low_mbar(L, S_MBAR_ARRIVE, empty, at, 0);
        if (reader) {
            tli_list first = {0};
            take_block(L, &first, s, ntiles, "tl_tk");
            tli_list_add(L, l, tli_low_if(L, bin(L, E_EQ, tid, zero), first.first, wait));
        } else {
            tli_list_add(L, l, wait);
        }
        add_let(L, l, "tl_t", word(L, s->x[TLI_X_TILE_SLOTS], at, 0));
        tli_list_add(L, l, reader ? tli_low_if(L, reader, arrive, 0) : arrive);
    } else {
        int32_t v;
        if (k == 1) {
            v = bin(L, E_ADD, bin(L, E_MUL, p, g), bx);
        } else {
            int32_t kk = I(L, k), turn = bin(L, E_MUL, bin(L, E_DIV, p, kk), kk); /* p / k k */
            v = bin(L, E_ADD, bin(L, E_ADD, bin(L, E_MUL, turn, g), bin(L, E_MUL, kk, bx)), bin(L, E_MOD, p, kk));
        }
        add_let(L, l, "tl_t", v);
    }
    exit_when(L, l, bin(L, E_GE, th(L, TH_TILE), ntiles));
}

/* Stream-K's unit p (TLI_X_TILE_STREAMK, lowered.h) of tile loop s, onto
 * l: with nk K steps a block (the loop's value), dp = ntiles / G whole
 * blocks a CTA and W = ntiles nk - dp G nk steps left, shared out as [lo,
 * hi) = dp G nk + [blockIdx.x W / G, (blockIdx.x + 1) W / G):
 *   p < dp: block p G + blockIdx.x, steps [0, nk), base p nk
 *   else, q = p - dp: block lo / nk + q, from start = q == 0 ? lo : (lo /
 *   nk + q) nk (the q-th block boundary past lo) to min(hi, the next
 *   boundary); none left when start >= hi; base dp nk + start - lo (this
 *   CTA's steps before the unit: its ring position). No division by nk
 *   but lo / nk, the same in every unit.
 * Each unit is a function of p, so the fix-up's `continue` is the next
 * unit. (The same units as a walk that moves a position on, unit by unit:
 * bench/NOTES.md, session 39.) tl_sk_nk, tl_sk_w0 and tl_sk_w are the
 * names S_SK_FIXUP's printer reads. */
static void stream_k_unit(tli_lowered *L, tli_list *l, const tli_snode *s, int32_t ntiles)
{
    int32_t p = s->vars[0], g = th(L, TH_GRID_X), bx = th(L, TH_RAW_BX), one = I(L, 1), zero = I(L, 0);
    int32_t nk = add_let(L, l, "tl_sk_nk", s->value);
    int32_t dp = add_let(L, l, "tl_sk_dp", bin(L, E_DIV, ntiles, g));
    int32_t w0 = add_let(L, l, "tl_sk_w0", bin(L, E_MUL, bin(L, E_MUL, dp, g), nk));
    int32_t w = add_let(L, l, "tl_sk_w", bin(L, E_SUB, bin(L, E_MUL, ntiles, nk), w0));
    int32_t lo = add_let(L, l, "tl_sk_lo", bin(L, E_ADD, w0, bin(L, E_DIV, bin(L, E_MUL, bx, w), g)));
    int32_t next = bin(L, E_ADD, bx, one);
    int32_t hi = add_let(L, l, "tl_sk_hi", bin(L, E_ADD, w0, bin(L, E_DIV, bin(L, E_MUL, next, w), g)));
    int32_t q = add_let(L, l, "tl_sk_q", bin(L, E_SUB, p, dp));
    int32_t first = add_let(L, l, "tl_sk_first", bin(L, E_DIV, lo, nk)); /* the block lo is in */
    int32_t whole = bin(L, E_LT, p, dp), at_lo = bin(L, E_EQ, q, zero), other = bin(L, E_ADD, first, q);
    tli_enode sel = {.op = E_SELECT, .dtype = TL_I64, .a = {at_lo, lo, bin(L, E_MUL, other, nk)}};
    int32_t start = add_let(L, l, "tl_sk_start", tli_low_expr(L, &sel));
    exit_when(L, l, bin(L, E_AND, bin(L, E_GE, p, dp), bin(L, E_GE, start, hi))); /* the share used up */
    sel.a[0] = whole; /* the unit's block, its steps and its ring position: whole, or a part */
    sel.a[1] = bin(L, E_ADD, bin(L, E_MUL, p, g), bx), sel.a[2] = other;
    add_let(L, l, "tl_t", tli_low_expr(L, &sel));
    sel.a[1] = zero, sel.a[2] = bin(L, E_SUB, start, bin(L, E_MUL, other, nk));
    add_let(L, l, "tl_j0", tli_low_expr(L, &sel));
    sel.a[1] = nk, sel.a[2] = bin(L, E_SUB, bin(L, E_MIN, hi, bin(L, E_MUL, bin(L, E_ADD, other, one), nk)),
                                  bin(L, E_MUL, other, nk));
    add_let(L, l, "tl_j1", tli_low_expr(L, &sel));
    sel.a[1] = bin(L, E_MUL, p, nk), sel.a[2] = bin(L, E_ADD, bin(L, E_MUL, dp, nk), bin(L, E_SUB, start, lo));
    add_let(L, l, "tl_sk_base", tli_low_expr(L, &sel));
}

/* At the top of every persistent tile loop: its block number (or
 * stream-K's unit), then the block indices (and tensors of arrays, block
 * values). */
static void tile_loop_lets(tli_lowered *L, int32_t first, int32_t gx, int32_t gy, int32_t ntiles,
                           const array_bases *ab, block_values *bv)
{
    for (int32_t s = first; s; s = L->ir.s.v[s].next) {
        if (L->ir.s.v[s].op == S_TILE_LOOP) {
            tli_list l = {0};
            tli_snode loop = L->ir.s.v[s]; /* (a copy: making statements moves the array) */
            if (loop.x[TLI_X_TILE_STREAMK])
                stream_k_unit(L, &l, &loop, ntiles);
            else
                tile_number(L, &l, &loop, ntiles);
            block_lets(L, &l, th(L, TH_TILE), gx, gy, true);
            add_block_values(L, &l, bv);
            add_array_bases(L, &l, ab);
            tli_list_add(L, &l, L->ir.s.v[s].body);
            L->ir.s.v[s].body = l.first;
            tli_set_parent(L, l.first, s);
        }
        tile_loop_lets(L, L->ir.s.v[s].body, gx, gy, ntiles, ab, bv);
        tile_loop_lets(L, L->ir.s.v[s].orelse, gx, gy, ntiles, ab, bv);
    }
}

/* The TMA descriptor of copy s: one per (tensor, box). */
static void tma_maps(tli_lowered *L, int32_t first)
{
    tli_launch_plan *lp = &L->launch;
    for (int32_t s = first; s && L->st == TL_OK; s = L->ir.s.v[s].next) {
        tli_snode *n = &L->ir.s.v[s];
        bool store = n->op == S_COPY && n->x[TLI_X_COPY_HOW] == CP_TMA_STORE;
        if (n->op == S_COPY && (n->x[TLI_X_COPY_HOW] == CP_TMA || store)) {
            /* a load's box is its shared tile's (or 128-byte block's); a
             * store's is one 64-column block of its staging tile */
            int32_t g = tli_copy_buf(&L->ir, store ? n->a1 : n->a0);
            int32_t t = store ? n->x[TLI_X_COPY_STAGING] : tli_copy_buf(&L->ir, n->a1);
            const tli_bnode *tb = tli_B(&L->ir, t);
            int64_t inner = L->smem[t].blocked ? tli_row128((tl_dtype)tb->dtype) : tb->cshape[1], outer = tb->cshape[0];
            if (!store) /* a multicast load's box is its slice of the rows */
                outer /= tli_mcast_group(&L->ir, n->x[TLI_X_COPY_MCAST]);
            int m = 0;
            while (m < lp->nmaps && !(lp->maps[m].buf == g && lp->maps[m].box_inner == inner &&
                                      lp->maps[m].box_outer == outer))
                m++;
            if (m == TLI_MAX_TMA) {
                tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_pipelined: more than %d TMA descriptors", TLI_MAX_TMA);
                return;
            }
            if (m == lp->nmaps)
                lp->maps[lp->nmaps++] = (tli_tma_map){g, inner, outer};
            n->x[TLI_X_COPY_MAP] = m;
        }
        tma_maps(L, n->body);
        tma_maps(L, L->ir.s.v[s].orelse);
    }
}

static void require(tli_lowered *L, int32_t buf, int kind)
{
    tli_launch_plan *lp = &L->launch;
    for (int i = 0; i < lp->nalign; i++)
        if (lp->align[i].buf == buf) {
            lp->align[i].kind |= kind;
            return;
        }
    if (lp->nalign < TLI_MAX_ALIGN_REQ)
        lp->align[lp->nalign++] = (tli_align_req){buf, kind};
    else
        tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_copy: more than %d tensors read by asynchronous copies",
                     TLI_MAX_ALIGN_REQ);
}

static void alignment(tli_lowered *L, int32_t first)
{
    for (int32_t s = first; s && L->st == TL_OK; s = L->ir.s.v[s].next) {
        const tli_snode *n = &L->ir.s.v[s];
        if (n->op == S_COPY && n->x[TLI_X_COPY_HOW] == CP_TMA)
            require(L, tli_copy_buf(&L->ir, n->a0), TLI_ALIGN_TMA);
        if (n->op == S_COPY && n->x[TLI_X_COPY_HOW] == CP_TMA_STORE)
            require(L, tli_copy_buf(&L->ir, n->a1), TLI_ALIGN_TMA);
        if (n->op == S_COPY && n->x[TLI_X_COPY_HOW] == CP_ASYNC16)
            require(L, tli_copy_buf(&L->ir, n->a0), TLI_ALIGN_CHUNKS | TLI_ALIGN_TMA);
        alignment(L, n->body);
        alignment(L, L->ir.s.v[s].orelse);
    }
}

/* Registers per thread the kernel's fragments take (16-bit elements two
 * to a register). */
static int64_t fragment_registers(const tli_lowered *L)
{
    int64_t regs = 0;
    for (int32_t b = 1; b < L->ir.b.n && b < L->nbufs_planned; b++)
        if (L->ir.b.v[b].scope == B_FRAGMENT && L->frag[b].kind != FRAG_NONE)
            regs += (L->frag[b].per_thread * tl_dtype_size((tl_dtype)L->ir.b.v[b].dtype) + 3) / 4;
    return regs;
}

/* Two CTAs per SM hide one's epilogue behind the other's main loop, when
 * both fit: their shared memory, and the registers that cap leaves each
 * thread (regs_per_sm / (2 threads)) over the fragments plus about 64 for
 * addresses, indices and descriptors. A cap below what the fragments need
 * fails ptxas (a 64x256 f32 accumulator per warpgroup alone is 128). */
static bool two_blocks_fit(const tli_lowered *L, const tli_launch_plan *lp)
{
    if (lp->smem_bytes * 2 > L->smem_limit || lp->threads > 512)
        return false;
    int64_t cap = L->target.regs_per_sm / (lp->threads * 2);
    return fragment_registers(L) + 64 <= cap;
}

void tli_pass_launch(tli_lowered *L)
{
    tli_ir *ir = &L->ir;
    tli_launch_plan *lp = &L->launch;
    int groups = lp->persistent ? lp->persistent : 1;
    lp->block_threads = ir->threads;
    lp->threads = ir->threads * groups + (L->warp_specialized ? 128 : 0);
    for (int d = 0; d < 3; d++)
        lp->grid[d] = ir->grid[d];
    if (L->warp_specialized && L->target.setmaxnreg)
        lp->min_blocks = 1; /* setmaxnreg needs a register cap at entry */
    else if (L->wgmma)
        lp->min_blocks = two_blocks_fit(L, lp) ? 2 : 1;
    if (ir->min_blocks > lp->min_blocks) /* tl_use_min_blocks: the kernel's own wish */
        lp->min_blocks = ir->min_blocks;
    lp->max_regs = lp->min_blocks ? L->target.regs_per_sm / (lp->threads * lp->min_blocks) : 255;
    if (lp->max_regs > 255)
        lp->max_regs = 255;
    tma_maps(L, ir->body);
    alignment(L, ir->body);
    array_bases ab;
    find_arrays(L, &ab);
    block_values bv;
    if (!find_block_values(L, &bv))
        return;
    /* who am I: the statements every thread starts with */
    tli_list top = {0};
    if (L->warp_specialized) {
        add_let(L, &top, "tl_wg", bin(L, E_DIV, th(L, TH_RAW_TID), tli_low_int(L, 128, TL_I32)));
        add_let(L, &top, "tl_tid", bin(L, E_MOD, th(L, TH_RAW_TID), tli_low_int(L, ir->threads, TL_I32)));
    } else {
        add_let(L, &top, "tl_tid", th(L, TH_RAW_TID));
    }
    if (needs_warp_lane(L)) {
        add_let(L, &top, "tl_warp", bin(L, E_DIV, th(L, TH_TID), tli_low_int(L, 32, TL_I32)));
        add_let(L, &top, "tl_lane", bin(L, E_MOD, th(L, TH_TID), tli_low_int(L, 32, TL_I32)));
    }
    /* The warpgroup whose rows of A a wgmma reads from shared memory, as a
     * warp-uniform value (TLI_X_LET_WARP_UNIFORM): its descriptors, built
     * at every wgmma, then stay in uniform registers. Only these: marking
     * tl_warp itself uniform changes every fragment index computed from it
     * and measured a spill in a kernel at its register limit (bench/NOTES.md,
     * session 23). A consumer warpgroup is 128 threads, so tl_tid / 128 is
     * the same in a whole warp. */
    if (L->wgmma) {
        add_let(L, &top, "tl_wgi", bin(L, E_DIV, th(L, TH_TID), tli_low_int(L, 128, TL_I32)));
        L->ir.s.v[top.last].x[TLI_X_LET_WARP_UNIFORM] = 1;
    }
    if (lp->persistent) {
        int32_t gx = add_let(L, &top, "tl_gx", grid_dim(L, 0));
        int32_t gy = add_let(L, &top, "tl_gy", grid_dim(L, 1));
        int32_t ntiles = add_let(L, &top, "tl_ntiles", bin(L, E_MUL, bin(L, E_MUL, gx, gy), grid_dim(L, 2)));
        tile_loop_lets(L, ir->body, gx, gy, ntiles, &ab, &bv);
    } else if (ir->swizzle && ir->grid[1]) {
        int32_t gx = th(L, TH_GRID_X), gy = th(L, TH_GRID_Y), bx = th(L, TH_RAW_BX), by = th(L, TH_RAW_BY);
        if (tli_cluster_size(ir) > 1) { /* in units of clusters */
            int32_t cx = I(L, ir->cluster[0] > 1 ? ir->cluster[0] : 1), cy = I(L, ir->cluster[1] > 1 ? ir->cluster[1] : 1);
            gx = bin(L, E_DIV, gx, cx);
            gy = bin(L, E_DIV, gy, cy);
            bx = bin(L, E_DIV, bx, cx);
            by = bin(L, E_DIV, by, cy);
        }
        block_lets(L, &top, bin(L, E_ADD, bin(L, E_MUL, by, gx), bx), gx, gy, false);
        if (uses_block_axis(ir, 2))
            add_let(L, &top, "tl_bz", th(L, TH_RAW_BZ));
    } else {
        static const tli_thread_value raw[3] = {TH_RAW_BX, TH_RAW_BY, TH_RAW_BZ};
        static const char *const names[3] = {"tl_bx", "tl_by", "tl_bz"};
        for (int a = 0; a < 3; a++)
            if (uses_block_axis(ir, a))
                add_let(L, &top, names[a], th(L, raw[a]));
    }
    if (!lp->persistent) {
        add_block_values(L, &top, &bv);
        add_array_bases(L, &top, &ab);
    }
    read_block_values(L, &bv);
    tli_list_add(L, &top, ir->body);
    ir->body = top.first;
    tli_set_parent(L, ir->body, 0);
}
