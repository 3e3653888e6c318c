/*
 * pass_layout.c - where every fragment element lives, and which tensor-core
 * atom each tl_gemm runs on.
 *
 * A tl_gemm's accumulator takes the layout of the first MMA atom of the
 * target that fits its tiles (lowered.h: wgmma's m64nN, else mma.sync's
 * m16n8); its shared operands are then stored the way that atom reads them
 * (in 64-column blocks of swizzled 128-byte rows for wgmma). The layouts of
 * the other fragments follow from how they are used, propagated to a fixed
 * point:
 *   - a fragment copied to or from another fragment has its layout;
 *   - the result of tl_reduce_* is a slice of its source's layout (each
 *     thread keeps the rows, or columns, it already holds);
 *   - fragments a tl_parallel indexes by all of its variables share one
 *     layout; one it indexes by only some is the slice of that layout along
 *     the missing dimensions (a broadcast);
 *   - an A operand taken from registers must have the accumulator layout of
 *     an m x K tile split over the warps as C is (FlashAttention's P); one
 *     that nothing else decides (copied from shared memory) is given it.
 * A fragment nothing decides gets blocked rows (FRAG_ROWS): runs of 16
 * bytes of a row per thread, rows spread over as many threads as there are
 * rows, so that global accesses are 16-byte vectors and a row reduction
 * stays inside few lanes.

 * Two wgmma gemms in a row on the same A (a gated MLP's two projections)
 * become one wider wgmma (pair_gemms).
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

typedef struct layouter {
    tli_lowered *L;
    tli_ir *ir;
    bool changed;
} layouter;

static const char *buf_name(layouter *Y, int32_t b) { return tli_B(Y->ir, b)->name; }

/* Whether the layouts x and y put the elements they keep along the
 * dimension other than `dim` in the same registers of the same threads:
 * two accumulators whose warps split the rows alike have the same row
 * slices whatever their widths. */
static bool kept_alike(const tli_frag_layout *x, const tli_frag_layout *y, int dim)
{
    if (x->kind != y->kind)
        return false;
    if (x->kind == FRAG_ROWS)
        return dim == 1 ? x->rows.tr == y->rows.tr && x->rows.tc == y->rows.tc && x->rows.rows == y->rows.rows
                        : x->rows.tr == y->rows.tr && x->rows.tc == y->rows.tc && x->rows.v == y->rows.v &&
                              x->rows.cols == y->rows.cols;
    if (x->kind != FRAG_MMA && x->kind != FRAG_WGMMA)
        return false;
    if (dim == 1)
        return x->w.wgm == y->w.wgm && x->w.wgn == y->w.wgn && x->w.wm == y->w.wm;
    return x->w.wgm == y->w.wgm && x->w.wgn == y->w.wgn && x->w.wn == y->w.wn;
}

static bool layouts_equal(const tli_lowered *L, const tli_frag_layout *x, const tli_frag_layout *y, int depth)
{
    if (x->kind != y->kind || depth > 8)
        return false;
    switch (x->kind) {
    case FRAG_MMA:
    case FRAG_WGMMA:
        return x->w.wgm == y->w.wgm && x->w.wgn == y->w.wgn && x->w.wm == y->w.wm && x->w.wn == y->w.wn;
    case FRAG_ROWS:
        return memcmp(&x->rows, &y->rows, sizeof x->rows) == 0;
    case FRAG_SLICE:
        return x->dim == y->dim &&
               (x->parent == y->parent || kept_alike(&L->frag[x->parent], &L->frag[y->parent], x->dim));
    default: return true;
    }
}

bool tli_layout_equal(const tli_lowered *L, int32_t a, int32_t b)
{
    return a == b || layouts_equal(L, &L->frag[a], &L->frag[b], 0);
}

bool tli_slice_of_alike(const tli_lowered *L, int32_t slice, int32_t owner)
{
    const tli_frag_layout *f = &L->frag[slice];
    return f->kind == FRAG_SLICE && (f->parent == owner || kept_alike(&L->frag[f->parent], &L->frag[owner], f->dim));
}

static bool same_layout(const tli_lowered *L, int32_t a, int32_t b, int depth)
{
    return layouts_equal(L, &L->frag[a], &L->frag[b], depth);
}

/* Registers per thread of layout f (of fragment b). */
static int64_t regs_of(const tli_lowered *L, const tli_frag_layout *f)
{
    switch (f->kind) {
    case FRAG_MMA:
    case FRAG_WGMMA: return (int64_t)f->w.mt * f->w.nt * 4;
    case FRAG_ROWS: return f->rows.nri * f->rows.ncj * f->rows.v;
    case FRAG_SLICE: {
        const tli_frag_layout *p = &L->frag[f->parent];
        if (p->kind == FRAG_ROWS)
            return f->dim == 1 || p->rows.rows == 1 ? p->rows.nri : p->rows.ncj * p->rows.v;
        return f->dim == 1 ? (int64_t)p->w.mt * 2 : (int64_t)p->w.nt * 2;
    }
    default: return 0;
    }
}

/* Gives fragment b the layout *f; a conflict if it has another. */
static void set_layout(layouter *Y, int32_t b, const tli_frag_layout *f, const char *why)
{
    tli_frag_layout *cur = &Y->L->frag[b];
    if (cur->kind == FRAG_NONE) {
        *cur = *f;
        cur->per_thread = regs_of(Y->L, cur);
        Y->changed = true;
        return;
    }
    /* compare through a temporary slot: same_layout works on buffer ids */
    tli_frag_layout saved = Y->L->frag[0];
    Y->L->frag[0] = *f;
    bool same = same_layout(Y->L, b, 0, 0);
    Y->L->frag[0] = saved;
    if (!same)
        tli_low_fail(Y->L, TL_ERR_SHAPE, "%s: fragment layout conflict: '%s' would need two different layouts", why,
                     buf_name(Y, b));
}

/* ------------------------------------------------------------ the gemms */

static void gemm_layout(layouter *Y, int32_t s)
{
    tli_lowered *L = Y->L;
    const tli_snode *n = tli_S(Y->ir, s);
    const tli_bnode *a = tli_B(Y->ir, n->gemm[0]), *c = tli_B(Y->ir, n->gemm[2]);
    int64_t k = (n->a1 & TL_GEMM_TRANS_A) ? a->cshape[0] : a->cshape[1];
    tli_frag_layout fl = {0};
    tli_mma_atom atom = MMA_NONE;
    char why[200] = "the target has no tensor-core MMA";
    for (int i = 0; i < TLI_MAX_ATOMS && L->target.mma[i] && atom == MMA_NONE; i++) {
        if (L->target.mma[i] == MMA_WGMMA_M64NNK16 && tli_gemm_wgmma_layout(Y->ir, s, Y->ir->threads, &fl.w)) {
            atom = MMA_WGMMA_M64NNK16;
            fl.kind = FRAG_WGMMA;
        } else if (L->target.mma[i] == MMA_SYNC_M16N8K16 && (n->a1 & TL_GEMM_TRANS_A)) {
            tli_fmt(why, sizeof why, "a transposed A (TL_GEMM_TRANS_A) needs wgmma, and its tiles do not fit it");
        } else if (L->target.mma[i] == MMA_SYNC_M16N8K16 && tli_dtype_is_f8((tl_dtype)a->dtype)) {
            tli_fmt(why, sizeof why, "8-bit operands need wgmma (sm_90a: M a multiple of 64 per warpgroup, K of 128), "
                    "and these tiles or this target do not have it");
        } else if (L->target.mma[i] == MMA_SYNC_M16N8K16 &&
                   tli_gemm_warp_layout(c->cshape[0], c->cshape[1], k, Y->ir->threads, (unsigned)n->a1, &fl.w, why,
                                        sizeof why)) {
            atom = MMA_SYNC_M16N8K16;
            fl.kind = FRAG_MMA;
        }
    }
    if (atom == MMA_NONE) {
        tli_low_fail(L, TL_ERR_UNSUPPORTED, "tl_gemm: %s (target %s)", why, L->target.name);
        return;
    }
    Y->ir->s.v[s].x[TLI_X_GEMM_ATOM] = atom;
    Y->ir->s.v[s].x[TLI_X_GEMM_A_REGS] = a->scope == B_FRAGMENT;
    if (atom == MMA_WGMMA_M64NNK16) {
        L->wgmma = true;
        L->async_proxy = true;
        if (a->scope == B_SHARED)
            L->smem[n->gemm[0]].blocked = true;
        L->smem[n->gemm[1]].blocked = true;
    }
    set_layout(Y, n->gemm[2], &fl, "tl_gemm");
}

/* mma.sync reads its shared operands with the plain swizzle of whole rows;
 * a tile that a wgmma gemm needs blocked must have 64 columns for both to
 * agree. */
static void check_operand_storage(layouter *Y, int32_t first)
{
    for (int32_t s = first; s && Y->L->st == TL_OK; s = tli_S(Y->ir, s)->next) {
        const tli_snode *n = tli_S(Y->ir, s);
        check_operand_storage(Y, n->body);
        check_operand_storage(Y, n->orelse);
        if (n->op != S_GEMM || n->x[TLI_X_GEMM_ATOM] != MMA_SYNC_M16N8K16)
            continue;
        for (int i = 0; i < 2; i++) {
            const tli_bnode *b = tli_B(Y->ir, n->gemm[i]);
            if (b->scope == B_SHARED && Y->L->smem[n->gemm[i]].blocked && b->cshape[1] != 64)
                tli_low_fail(Y->L, TL_ERR_UNSUPPORTED,
                             "tl_gemm: '%s' is read by a wgmma gemm and by an mma.sync gemm; with %lld columns the two "
                             "need different shared layouts",
                             b->name, (long long)b->cshape[1]);
        }
    }
}

/* An A operand in registers: the accumulator layout of an m x K tile with
 * C's split of rows over warps (warpgroups). */
static void check_a_regs(layouter *Y, int32_t s)
{
    const tli_snode *n = tli_S(Y->ir, s);
    const tli_frag_layout *a = &Y->L->frag[n->gemm[0]], *c = &Y->L->frag[n->gemm[2]];
    if (!n->x[TLI_X_GEMM_A_REGS])
        return;
    bool wg = n->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16;
    bool ok = a->kind == (wg ? FRAG_WGMMA : FRAG_MMA) && a->w.wgm == c->w.wgm && a->w.wm == c->w.wm &&
              a->w.wgn == 1 && c->w.wgn == 1;
    if (a->kind != FRAG_NONE && !ok)
        tli_low_fail(Y->L, TL_ERR_SHAPE,
                     "tl_gemm: A in registers ('%s') must have the accumulator layout of a GEMM whose warps split the "
                     "rows as C's do, each warp owning whole rows (copy it from such an accumulator, e.g. P = S)",
                     buf_name(Y, n->gemm[0]));
}

/* ---------------------------------------------------------- propagation */

/* The dimensions of loop `loop` that fragment access idx (rank r) skips,
 * as a bit mask; the verify pass has checked the indices are the loop's
 * variables in order. */
static unsigned skipped_dims(const tli_ir *ir, int32_t idx, int rank, int32_t loop)
{
    unsigned used = 0;
    for (int d = 0; d < rank; d++)
        used |= 1u << tli_E(ir, ir->pool.v[idx + d])->ival;
    return ((1u << tli_S(ir, loop)->rank) - 1) & ~used;
}

typedef struct loop_frags {
    int32_t part[16];   /* fragments the loop touches */
    unsigned skip[16];  /* the loop dimensions each one's indices skip */
    int nparts;
} loop_frags;

static void note_access(layouter *Y, loop_frags *lf, int32_t buf, int32_t idx, int32_t loop)
{
    const tli_bnode *b = tli_B(Y->ir, buf);
    if (b->scope != B_FRAGMENT)
        return;
    unsigned skip = skipped_dims(Y->ir, idx, b->rank, loop);
    for (int i = 0; i < lf->nparts; i++)
        if (lf->part[i] == buf && lf->skip[i] == skip)
            return;
    if (lf->nparts == 16) {
        tli_low_fail(Y->L, TL_ERR_UNSUPPORTED, "tl_parallel: one loop touches more than 16 fragments");
        return;
    }
    lf->part[lf->nparts] = buf;
    lf->skip[lf->nparts++] = skip;
}

static void scan_expr_frags(layouter *Y, loop_frags *lf, int32_t root, int32_t loop)
{
    tli_marks *m = &Y->L->walk;
    if (!tli_marks_begin(m, Y->ir))
        return;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        const tli_enode *n = tli_E(Y->ir, e);
        if (n->scope == 0)
            continue;
        if (n->op == E_LOAD)
            note_access(Y, lf, n->buf, n->idx, loop);
        tli_marks_push_operands(m, Y->ir, e);
    }
}

static void scan_body_frags(layouter *Y, loop_frags *lf, int32_t first, int32_t loop)
{
    for (int32_t s = first; s; s = tli_S(Y->ir, s)->next) {
        const tli_snode *n = tli_S(Y->ir, s);
        if (n->op == S_STORE) {
            note_access(Y, lf, n->buf, n->idx, loop);
            scan_expr_frags(Y, lf, n->value, loop);
        } else if (n->op == S_IF || n->op == S_SERIAL) {
            scan_expr_frags(Y, lf, n->a0, loop);
        }
        scan_body_frags(Y, lf, n->body, loop);
        scan_body_frags(Y, lf, n->orelse, loop);
    }
}

/* The single dimension of a skip mask (slices of more are not supported). */
static int one_dim(unsigned skip)
{
    for (int d = 0; d < TL_MAX_RANK; d++)
        if (skip == 1u << d)
            return d;
    return -1;
}

static void slice_of(layouter *Y, int32_t dst, int32_t src, int dim, const char *api)
{
    const tli_frag_layout *p = &Y->L->frag[src];
    const tli_bnode *sb = tli_B(Y->ir, src);
    if (p->kind == FRAG_NONE)
        return;
    if (p->kind == FRAG_SLICE || dim < 0 || sb->rank > 2) {
        tli_low_fail(Y->L, TL_ERR_UNSUPPORTED,
                     "%s: fragment '%s' cannot be reduced or broadcast that way: slices are taken along one dimension "
                     "of a rank-1 or rank-2 fragment",
                     api, sb->name);
        return;
    }
    tli_frag_layout f = {.kind = FRAG_SLICE, .parent = src, .dim = sb->rank == 1 ? 1 : dim, .replicated = true};
    set_layout(Y, dst, &f, api);
}

/* The fragment whose layout loop `loop` follows: one indexed by all the
 * loop's variables, preferably one whose layout is known (0: none). */
static int32_t loop_owner(const tli_lowered *L, const loop_frags *lf)
{
    int32_t owner = 0;
    for (int i = 0; i < lf->nparts; i++)
        if (lf->skip[i] == 0 && (!owner || (L->frag[owner].kind == FRAG_NONE && L->frag[lf->part[i]].kind != FRAG_NONE)))
            owner = lf->part[i];
    return owner;
}

static void propagate_loop(layouter *Y, int32_t loop)
{
    loop_frags lf = {0};
    scan_body_frags(Y, &lf, tli_S(Y->ir, loop)->body, loop);
    int32_t owner = loop_owner(Y->L, &lf);
    if (!owner || Y->L->frag[owner].kind == FRAG_NONE)
        return;
    for (int i = 0; i < lf.nparts && Y->L->st == TL_OK; i++) {
        if (lf.part[i] == owner)
            continue;
        if (lf.skip[i] == 0) /* full-shape fragments share one layout */
            set_layout(Y, lf.part[i], &Y->L->frag[owner], "tl_parallel");
        else
            slice_of(Y, lf.part[i], owner, one_dim(lf.skip[i]), "tl_parallel");
    }
}

static void propagate(layouter *Y, int32_t first)
{
    tli_ir *ir = Y->ir;
    for (int32_t s = first; s && Y->L->st == TL_OK; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_COPY) {
            int32_t a = tli_copy_buf(ir, n->a0), b = tli_copy_buf(ir, n->a1);
            if (tli_B(ir, a)->scope == B_FRAGMENT && tli_B(ir, b)->scope == B_FRAGMENT) {
                if (Y->L->frag[a].kind != FRAG_NONE)
                    set_layout(Y, b, &Y->L->frag[a], "tl_copy");
                else if (Y->L->frag[b].kind != FRAG_NONE)
                    set_layout(Y, a, &Y->L->frag[b], "tl_copy");
            }
        } else if (n->op == S_REDUCE && tli_B(ir, n->gemm[0])->scope == B_FRAGMENT) {
            slice_of(Y, n->gemm[1], n->gemm[0], n->rank, "tl_reduce");
        } else if (n->op == S_PARALLEL) {
            propagate_loop(Y, s);
        }
        propagate(Y, n->body);
        propagate(Y, n->orelse);
    }
}

/* ---------------------------------------------------------- defaults */

static int pow2_floor(int64_t x)
{
    int p = 1;
    while ((int64_t)p * 2 <= x && p < (1 << 30))
        p *= 2;
    return p;
}

/* The narrowest float element among the kernel's tensors: a fragment's
 * runs are 16 bytes of those, so that its loads and stores of global
 * memory are 16-byte vectors. */
static int narrowest_tensor(const tli_ir *ir, int esz)
{
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        int e = (int)tl_dtype_size((tl_dtype)b->dtype);
        if (b->scope == B_GLOBAL && tli_dtype_is_float((tl_dtype)b->dtype) && e < esz)
            esz = e;
    }
    return esz;
}

/* The widest element among the kernel's tensors a tile copy can move (f32
 * and narrower floats). */
static int widest_tensor(const tli_ir *ir)
{
    int w = 1;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        int e = (int)tl_dtype_size((tl_dtype)b->dtype);
        if (b->scope == B_GLOBAL && tli_dtype_is_float((tl_dtype)b->dtype) && e <= 4 && e > w)
            w = e;
    }
    return w;
}

/* Blocked rows for fragment b over T threads (see lowered.h). A run is
 * one access of global memory for any tensor it is copied to or from, and
 * an access is at most 32 bytes (tl_vec_io, two 16-byte ones): so at most
 * 32 bytes of the widest tensor (an f8 fragment's 16 elements of an f32
 * tensor would be 64). */
static tli_frag_layout rows_layout(const tli_ir *ir, const tli_bnode *b, int T)
{
    tli_rows_layout r = {0};
    r.cols = b->cshape[b->rank - 1];
    r.rows = 1;
    for (int d = 0; d + 1 < b->rank; d++)
        r.rows *= b->cshape[d];
    int esz = narrowest_tensor(ir, (int)tl_dtype_size((tl_dtype)b->dtype));
    r.v = 16 / esz;
    int widest = widest_tensor(ir);
    while (r.v * widest > 32)
        r.v /= 2;
    while (r.v > 1 && r.cols % r.v)
        r.v /= 2;
    int64_t runs = r.cols / r.v;
    /* rows first over the threads, then each row's runs over the rest */
    int tc = pow2_floor(runs < T ? runs : T);
    int want = T / pow2_floor(r.rows < T ? r.rows : T);
    if (want < tc)
        tc = want;
    while (tc > 1 && T % tc)
        tc /= 2;
    r.tc = tc;
    r.tr = T / tc;
    r.nri = (r.rows + r.tr - 1) / r.tr;
    r.ncj = (runs + r.tc - 1) / r.tc;
    tli_frag_layout f = {.kind = FRAG_ROWS, .rows = r};
    return f;
}

/* Whether fragment b is only ever a slice (a reduction's result): it waits
 * for its source's layout instead of taking a default. */
static bool is_reduce_dst(const tli_ir *ir, int32_t first, int32_t b)
{
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_REDUCE && n->gemm[1] == b && tli_B(ir, n->gemm[0])->scope == B_FRAGMENT)
            return true;
        if (is_reduce_dst(ir, n->body, b) || is_reduce_dst(ir, n->orelse, b))
            return true;
    }
    return false;
}

/* A wgmma gemm right after the tl_clear of its accumulator starts from
 * zero instead: its first k-step runs with scale-d = 0 and the clear goes,
 * which saves zeroing every accumulator register each time (FlashAttention
 * clears S = Q K^T once per K/V tile). *prev_lk is the link that holds the
 * statement before gemm s; true when the clear was folded (s hangs there). */
static bool fold_clear(layouter *Y, int32_t *prev_lk, int32_t s)
{
    tli_snode *g = &Y->ir->s.v[s];
    const tli_snode *c = tli_S(Y->ir, *prev_lk);
    if (g->x[TLI_X_GEMM_ATOM] != MMA_WGMMA_M64NNK16 || c->op != S_FILL || c->value || c->buf != g->gemm[2] ||
        g->gemm[0] == g->gemm[2] || g->gemm[1] == g->gemm[2])
        return false;
    *prev_lk = s;
    g->x[TLI_X_GEMM_ZERO] = 1;
    return true;
}

/* The gemms of the list held by *lk: their atoms and accumulator layouts
 * (check: the A operands in registers, once every layout is known). */
static void walk_gemms(layouter *Y, int32_t *lk, bool check)
{
    int32_t *prev_lk = NULL;
    while (*lk && Y->L->st == TL_OK) {
        int32_t s = *lk;
        if (tli_S(Y->ir, s)->op == S_GEMM) {
            if (check) {
                check_a_regs(Y, s);
            } else {
                gemm_layout(Y, s);
                if (prev_lk && fold_clear(Y, prev_lk, s))
                    lk = prev_lk;
            }
        }
        walk_gemms(Y, &Y->ir->s.v[s].body, check);
        walk_gemms(Y, &Y->ir->s.v[s].orelse, check);
        prev_lk = lk;
        lk = &Y->ir->s.v[s].next;
    }
}

/* Two wgmma gemms in a row that read the same A from shared memory, each
 * into its own accumulator (a gated MLP's gate and up projections), become
 * one: the second's B tile is placed right after the first's, so the pair
 * is one [N1 + N2, K] K-major operand (K = 64: one block of 128-byte rows,
 * whose concatenation is the wider tile's layout), and one m64n(N1 + N2)
 * wgmma a k16 step reads A once where two read it twice (shared-memory
 * traffic: A 64 x 16 plus B per step, against the tensor cores' pace).
 * Its accumulator registers are the first C's then the second's, in the
 * order wgmma numbers its n8 column blocks. */
static bool pairable(layouter *Y, const tli_snode *g, const tli_snode *h)
{
    const tli_ir *ir = Y->ir;
    if (g->op != S_GEMM || h->op != S_GEMM || g->x[TLI_X_GEMM_ATOM] != MMA_WGMMA_M64NNK16 ||
        h->x[TLI_X_GEMM_ATOM] != MMA_WGMMA_M64NNK16 || g->x[TLI_X_GEMM_A_REGS] || h->x[TLI_X_GEMM_A_REGS] ||
        g->x[TLI_X_GEMM_PAIR_C])
        return false;
    if (g->gemm[0] != h->gemm[0] || g->a1 != h->a1 || !(g->a1 & TL_GEMM_TRANS_B) || (g->a1 & TL_GEMM_TRANS_A) ||
        g->x[TLI_X_GEMM_ZERO] != h->x[TLI_X_GEMM_ZERO])
        return false;
    int32_t b1 = g->gemm[1], b2 = h->gemm[1], c1 = g->gemm[2], c2 = h->gemm[2];
    const tli_bnode *B1 = tli_B(ir, b1), *B2 = tli_B(ir, b2);
    if (b1 == b2 || c1 == c2 || c2 == g->gemm[0] || c2 == b1 || c1 == b2 || B1->scope != B_SHARED ||
        B2->scope != B_SHARED || B1->dtype != B2->dtype || B1->cshape[1] != 64 || B2->cshape[1] != 64 ||
        Y->L->smem[b2].after || Y->L->smem[b1].after)
        return false;
    const tli_frag_layout *f1 = &Y->L->frag[c1], *f2 = &Y->L->frag[c2];
    return f1->kind == FRAG_WGMMA && f2->kind == FRAG_WGMMA && f1->w.wgm == f2->w.wgm && f1->w.mt == f2->w.mt &&
           f1->w.wm == f2->w.wm && f1->w.wn + f2->w.wn <= 256;
}

static void pair_gemms(layouter *Y, int32_t first)
{
    for (int32_t s = first; s && Y->L->st == TL_OK; s = tli_S(Y->ir, s)->next) {
        tli_snode *g = &Y->ir->s.v[s];
        pair_gemms(Y, g->body);
        pair_gemms(Y, g->orelse);
        if (!g->next || !pairable(Y, g, tli_S(Y->ir, g->next)))
            continue;
        const tli_snode *h = tli_S(Y->ir, g->next);
        g->x[TLI_X_GEMM_PAIR_B] = h->gemm[1];
        g->x[TLI_X_GEMM_PAIR_C] = h->gemm[2];
        Y->L->smem[h->gemm[1]].after = g->gemm[1];
        g->next = h->next;
    }
}

/* A gemm's A operand in registers that nothing else gave a layout (one
 * copied from shared memory, say): the layout the MMA reads it in, that of
 * an accumulator of the m x K tile with C's split of rows over warps (or
 * warpgroups). Sets at most one; whether one was set. */
static bool a_operand_layout(layouter *Y, int32_t first)
{
    for (int32_t s = first; s && Y->L->st == TL_OK; s = tli_S(Y->ir, s)->next) {
        const tli_snode *n = tli_S(Y->ir, s);
        if (a_operand_layout(Y, n->body) || a_operand_layout(Y, n->orelse))
            return true;
        if (n->op != S_GEMM || !n->x[TLI_X_GEMM_A_REGS] || Y->L->frag[n->gemm[0]].kind != FRAG_NONE)
            continue;
        const tli_frag_layout *c = &Y->L->frag[n->gemm[2]];
        const tli_bnode *a = tli_B(Y->ir, n->gemm[0]);
        if ((c->kind != FRAG_WGMMA && c->kind != FRAG_MMA) || c->w.wgn != 1 || a->rank != 2 || a->cshape[1] % 16)
            continue; /* check_a_regs says why */
        tli_frag_layout f = {.kind = c->kind};
        f.w = (tli_warp_layout){.wgm = c->w.wgm, .wgn = 1, .wm = c->w.wm, .wn = a->cshape[1], .mt = c->w.mt,
                                .nt = (int)(a->cshape[1] / 8), .wgmma = c->w.wgmma};
        set_layout(Y, n->gemm[0], &f, "tl_gemm");
        return true;
    }
    return false;
}

static void settle(layouter *Y)
{
    for (int round = 0; round < 64 && Y->L->st == TL_OK; round++) {
        Y->changed = false;
        propagate(Y, Y->ir->body);
        if (Y->changed)
            continue;
        /* nothing follows from the uses: an A operand in registers takes
         * the MMA's operand layout; else the first fragment without a
         * layout that is not waiting to be a slice takes blocked rows */
        if (a_operand_layout(Y, Y->ir->body))
            continue;
        for (int32_t b = 1; b < Y->ir->b.n && !Y->changed; b++)
            if (tli_B(Y->ir, b)->scope == B_FRAGMENT && Y->L->frag[b].kind == FRAG_NONE &&
                !is_reduce_dst(Y->ir, Y->ir->body, b)) {
                tli_frag_layout f = rows_layout(Y->ir, tli_B(Y->ir, b), Y->ir->threads);
                set_layout(Y, b, &f, "tl_alloc_fragment");
            }
        if (!Y->changed)
            return;
    }
}

/* Records on each tl_parallel that touches fragments the fragment whose
 * registers it iterates (TLI_X_PAR_FRAG), for the threads pass. */
static void record_owners(layouter *Y, int32_t first)
{
    for (int32_t s = first; s && Y->L->st == TL_OK; s = tli_S(Y->ir, s)->next) {
        tli_snode *n = &Y->ir->s.v[s];
        if (n->op == S_PARALLEL) {
            loop_frags lf = {0};
            scan_body_frags(Y, &lf, n->body, s);
            int32_t owner = loop_owner(Y->L, &lf);
            if (lf.nparts && !owner)
                tli_low_fail(Y->L, TL_ERR_SHAPE,
                             "tl_parallel: the loop reads a reduced fragment ('%s') but touches no fragment of its own "
                             "full shape, whose registers the threads would iterate",
                             buf_name(Y, lf.part[0]));
            Y->ir->s.v[s].x[TLI_X_PAR_FRAG] = owner;
        }
        record_owners(Y, Y->ir->s.v[s].body);
        record_owners(Y, Y->ir->s.v[s].orelse);
    }
}

void tli_pass_layout(tli_lowered *L)
{
    layouter Y = {L, &L->ir, false};
    walk_gemms(&Y, &L->ir.body, false);
    if (L->st == TL_OK)
        check_operand_storage(&Y, L->ir.body);
    settle(&Y);
    if (L->st == TL_OK)
        walk_gemms(&Y, &L->ir.body, true);
    if (L->st == TL_OK)
        pair_gemms(&Y, L->ir.body);
    for (int32_t b = 1; b < L->ir.b.n && L->st == TL_OK; b++) {
        const tli_bnode *bn = tli_B(&L->ir, b);
        if (bn->scope != B_FRAGMENT)
            continue;
        if (L->frag[b].kind == FRAG_NONE) /* a reduction result whose source never got one */
            L->frag[b] = rows_layout(&L->ir, bn, L->ir.threads), L->frag[b].per_thread = regs_of(L, &L->frag[b]);
        if (L->frag[b].per_thread > 512)
            tli_low_fail(L, TL_ERR_SHAPE, "tl_alloc_fragment: fragment '%s' needs %lld registers per thread (at most 512)",
                         bn->name, (long long)L->frag[b].per_thread);
    }
    if (L->st == TL_OK)
        record_owners(&Y, L->ir.body);
}
