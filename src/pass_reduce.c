/*
 * pass_reduce.c - how each tl_reduce_* combines values across threads.
 *
 * The result of reducing a fragment is a slice of its layout: every
 * thread that holds part of a row (say) ends up holding that row's result.
 * Each thread first combines its own registers (the emitter's per-thread
 * partial); the threads that share a result then differ only in some bits
 * of their index within the block. The bits inside the lane number become a
 * butterfly of shuffles (xor by each bit); bits in the warp number need
 * shared memory: the statement is split into phase 1 (each warp's partial
 * into a scratch tile) and phase 2 (each thread combines the partials of
 * the warps of its group), and the sync pass puts a barrier between them.
 *
 * A reduction of a shared tile needs none of this: each thread computes
 * the results it holds by walking the reduced dimension in shared memory.
 *
 * tl_cluster_reduce_*: one thread per element of the fragment (the holder
 * whose varying bits are zero) writes it into this block's exchange slots,
 * a cluster barrier, and every holder reads the slot of each block of the
 * cluster (ld.shared::cluster) and folds them in rank order. The kernel's
 * cluster reductions share one exchange tile of two halves, taken in turn:
 * a block writes a half again only two cluster barriers after it last
 * wrote it, and every block read that half before it arrived at the
 * second of them, so one barrier per reduction is enough. A kernel whose
 * only cluster reduction runs once (outside every loop: a split-K GEMM's
 * accumulator) needs one half; the barrier at the kernel's end keeps it
 * alive while others read it.
 */
#include "lower.h"

#include <string.h>

/* The bits of the thread index (within the block) that vary among the
 * threads holding one element of the slice of `src` along `dim`. */
static unsigned varying_bits(const tli_lowered *L, int32_t src, int dim)
{
    const tli_frag_layout *p = &L->frag[src];
    int T = L->ir.threads;
    unsigned all = (unsigned)T - 1;
    if (p->kind == FRAG_ROWS) {
        unsigned col_bits = (unsigned)p->rows.tc - 1;
        bool keep_rows = dim == 1 || tli_B(&L->ir, src)->rank == 1;
        return keep_rows ? col_bits : all & ~col_bits;
    }
    /* m16n8 / m64nN accumulators: lane = 4 row + column pair */
    const tli_warp_layout *w = &p->w;
    if (dim == 1) { /* keep rows: the quad's four lanes, and warps splitting N */
        unsigned warp_bits = w->wgmma ? 0 : (unsigned)(w->wgn - 1);
        return 3u | warp_bits << 5;
    }
    /* keep columns: the eight rows of a quad column, and warps stacked on M */
    unsigned warp_bits = w->wgmma ? (unsigned)(T / 32 - 1) : (unsigned)((T / 32 - 1) & ~(unsigned)(w->wgn - 1));
    return 0x1cu | warp_bits << 5;
}

static int popcount(unsigned x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* The exchange among the threads that hold each element of dst: `vary`,
 * the bits of the thread index that differ among them. */
static void exchange(tli_lowered *L, int32_t s, unsigned vary)
{
    tli_ir *ir = &L->ir;
    tli_snode *n = &ir->s.v[s];
    int32_t dst = n->gemm[1];
    unsigned lanes = vary & 31u, warps = vary >> 5;
    n->x[TLI_X_RED_LANES] = (int32_t)lanes;
    n->x[TLI_X_RED_WARPS] = (int32_t)warps;
    if (!warps)
        return;
    /* a scratch tile: one partial per warp of a group for each element */
    int64_t elems = 1;
    const tli_bnode *db = tli_B(ir, dst);
    for (int d = 0; d < db->rank; d++)
        elems *= db->cshape[d];
    int group = 1 << popcount(warps);
    tli_bnode sb = {.scope = B_SHARED, .dtype = TL_F32, .rank = 1, .cshape = {elems * group}};
    tli_fmt(sb.name, sizeof sb.name, "tl_red%d", s);
    int32_t scratch = tli_low_buf(L, &sb);
    if (!scratch)
        return;
    n = &ir->s.v[s];
    n->x[TLI_X_RED_SCRATCH] = scratch;
    n->x[TLI_X_RED_GROUP] = group;
    n->x[TLI_X_RED_PHASE] = 1;
    tli_snode second = *n;
    second.x[TLI_X_RED_PHASE] = 2;
    second.body = second.orelse = 0;
    int32_t id = tli_low_stmt(L, &second);
    if (!id)
        return;
    ir->s.v[id].next = ir->s.v[s].next;
    ir->s.v[s].next = id;
}

static void lower_reduce(tli_lowered *L, int32_t s)
{
    tli_ir *ir = &L->ir;
    tli_snode *n = &ir->s.v[s];
    int32_t src = n->gemm[0], dst = n->gemm[1];
    if (tli_B(ir, src)->scope != B_FRAGMENT)
        return; /* shared source: per-thread walks, nothing to decide */
    if (!tli_slice_of_alike(L, dst, src) || L->frag[dst].dim != (tli_B(ir, src)->rank == 1 ? 1 : n->rank)) {
        tli_low_fail(L, TL_ERR_SHAPE,
                     "tl_reduce: fragment layout conflict: '%s' is also used where it cannot be the reduction of '%s'",
                     tli_B(ir, dst)->name, tli_B(ir, src)->name);
        return;
    }
    /* into a reducer, each thread keeps its part: the exchange waits for
     * tl_finalize_reducer */
    if (!tli_B(ir, dst)->reducer)
        exchange(L, s, varying_bits(L, src, n->rank));
}

/* The bits of tl_tid that vary among the threads holding one element of
 * cluster-reduced fragment b (0: each element has one holder). */
static bool holders_vary(tli_lowered *L, int32_t b, unsigned *vary)
{
    const tli_frag_layout *f = &L->frag[b];
    *vary = 0;
    if (f->kind == FRAG_SLICE)
        *vary = varying_bits(L, f->parent, f->dim);
    else if (f->kind == FRAG_NONE || f->replicated)
        return false;
    return true;
}

/* tl_finalize_reducer: the exchange of a reduction into the reducer, with
 * each thread's own value of it as its partial (TLI_REDUCE_FINAL). A
 * reducer whose elements have one holder each is whole already: the
 * statement stays and the emitter writes nothing for it. */
static void lower_finalize(tli_lowered *L, int32_t s)
{
    tli_ir *ir = &L->ir;
    int32_t r = ir->s.v[s].buf;
    unsigned vary;
    if (!holders_vary(L, r, &vary) || !vary)
        return;
    tli_snode *n = &ir->s.v[s];
    n->op = S_REDUCE;
    n->rank = L->frag[r].dim;
    n->a1 = R_SUM | TLI_REDUCE_FINAL;
    n->gemm[0] = n->gemm[1] = r;
    n->buf = 0;
    exchange(L, s, vary);
}

static void lower_cluster_reduce(tli_lowered *L, int32_t s, int32_t *scratch, int halves)
{
    tli_ir *ir = &L->ir;
    int32_t b = ir->s.v[s].buf;
    unsigned vary;
    if (!holders_vary(L, b, &vary)) {
        tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_cluster_reduce: the layout of fragment '%s' is not one it can "
                     "exchange (a fragment of a tl_parallel loop, a tl_reduce result, or a gemm accumulator)",
                     tli_B(ir, b)->name);
        return;
    }
    int64_t elems = tli_buf_elems(tli_B(ir, b));
    if (!*scratch) {
        tli_bnode sb = {.scope = B_SHARED, .dtype = TL_F32, .rank = 1, .cshape = {halves * elems}};
        tli_fmt(sb.name, sizeof sb.name, "tl_cluster_slots");
        if (!(*scratch = tli_low_buf(L, &sb)))
            return;
    } else if (halves * elems > ir->b.v[*scratch].cshape[0]) {
        ir->b.v[*scratch].cshape[0] = halves * elems;
    }
    ir->s.v[s].x[TLI_X_RED_SCRATCH] = *scratch;
    ir->s.v[s].x[TLI_X_RED_LANES] = (int32_t)vary;
    ir->s.v[s].x[TLI_X_RED_GROUP] = halves;
}

/* How many cluster reductions the statements from first run, counting
 * each inside a loop as two (it may run again). */
static int cluster_reductions(const tli_ir *ir, int32_t first, bool in_loop)
{
    int n = 0;
    for (int32_t s = first; s && n < 2; s = tli_S(ir, s)->next) {
        const tli_snode *x = tli_S(ir, s);
        bool loop = in_loop || x->op == S_SERIAL || x->op == S_PIPELINED || x->op == S_PARALLEL;
        if (x->op == S_CLUSTER_REDUCE)
            n += in_loop ? 2 : 1;
        n += cluster_reductions(ir, x->body, loop) + cluster_reductions(ir, x->orelse, in_loop);
    }
    return n;
}

static void walk(tli_lowered *L, int32_t first, int32_t *cluster_scratch, int halves)
{
    for (int32_t s = first; s && L->st == TL_OK; s = L->ir.s.v[s].next) {
        if (L->ir.s.v[s].op == S_REDUCE && L->ir.s.v[s].x[TLI_X_RED_PHASE] == 0)
            lower_reduce(L, s);
        else if (L->ir.s.v[s].op == S_CLUSTER_REDUCE)
            lower_cluster_reduce(L, s, cluster_scratch, halves);
        else if (L->ir.s.v[s].op == S_FINALIZE)
            lower_finalize(L, s);
        walk(L, L->ir.s.v[s].body, cluster_scratch, halves);
        walk(L, L->ir.s.v[s].orelse, cluster_scratch, halves);
    }
}

void tli_pass_reduce(tli_lowered *L)
{
    int32_t cluster_scratch = 0;
    walk(L, L->ir.body, &cluster_scratch, cluster_reductions(&L->ir, L->ir.body, false) > 1 ? 2 : 1);
}
