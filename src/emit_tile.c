/*
 * emit_tile.c - printing the tile statements of a lowered kernel: shared
 * tiles in the dynamic shared memory (with their swizzle and stages),
 * fragments as per-thread register arrays in the layout the layout pass
 * chose, copies by the engine the pipeline pass chose, tl_gemm on the atom
 * the layout pass chose (mma.sync from ldmatrix, or wgmma from shared
 * memory or registers), and reductions as the reduce pass split them.
 */
#include "emit_internal.h"

#include "emit.h"

#include <stdlib.h>
#include <string.h>

static const tli_bnode *buf_of(emitter *E, int32_t b) { return tli_B(E->ir, b); }
static int esize(const tli_bnode *b) { return (int)tl_dtype_size((tl_dtype)b->dtype); }
static const tli_frag_layout *lay(emitter *E, int32_t b) { return &E->L->frag[b]; }
static const char *ctype(const tli_bnode *b) { return tli_dtype_ctype((tl_dtype)b->dtype); }

static char *shape_text(emitter *E, const tli_bnode *b)
{
    tli_str s;
    tli_str_init(&s);
    for (int d = 0; d < b->rank; d++)
        tli_str_appendf(&s, "%s%lld", d ? "x" : "", (long long)b->cshape[d]);
    return tli_e_take(E, &s);
}

static const char *layout_text(emitter *E, int32_t b)
{
    const tli_frag_layout *f = lay(E, b);
    switch (f->kind) {
    case FRAG_MMA:
        return tli_e_fmt(E, "m16n8 accumulators, %dx%d warps of %lldx%lld", f->w.wgm, f->w.wgn, (long long)f->w.wm,
                         (long long)f->w.wn);
    case FRAG_WGMMA:
        return tli_e_fmt(E, "m64n%lld accumulators, %d warpgroup%s of %lld rows", (long long)f->w.wn, f->w.wgm,
                         f->w.wgm > 1 ? "s" : "", (long long)f->w.wm);
    case FRAG_ROWS:
        return tli_e_fmt(E, "runs of %d, %dx%d threads over rows x columns", f->rows.v, f->rows.tr, f->rows.tc);
    case FRAG_SLICE:
        return tli_e_fmt(E, "%s reduced along dimension %d", buf_of(E, f->parent)->name, f->dim);
    default: return "?";
    }
}

/* ---------------------------------------------------------- declarations */

void tli_e_tile_decls(emitter *E)
{
    const tli_ir *ir = E->ir;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = buf_of(E, i);
        const char *ct = ctype(b);
        const tli_smem_info *si = &E->L->smem[i];
        if (b->scope == B_SHARED) {
            tli_e_line(E, "%s *const %s = (%s *)(tl_smem + %lld); // shared %s %s, %d stage%s%s", ct, b->name, ct,
                       (long long)si->offset, shape_text(E, b), tl_dtype_name((tl_dtype)b->dtype), si->stages,
                       si->stages > 1 ? "s" : "",
                       si->blocked ? tli_e_fmt(E, ", %lld-column blocks", (long long)tli_row128((tl_dtype)b->dtype)) : "");
        } else if (b->scope == B_WORDS) {
            tli_e_line(E, "volatile long long *const %s = (volatile long long *)(tl_smem + %lld); // %lld words",
                       b->name, (long long)si->offset, (long long)b->cshape[0]);
        } else if (b->scope == B_MBAR) {
            tli_e_line(E, "unsigned long long *const %s = (unsigned long long *)(tl_smem + %lld); // %lld mbarriers",
                       b->name, (long long)si->offset, (long long)b->cshape[0]);
        } else if (b->scope == B_FRAGMENT) {
            tli_e_line(E, "%s %s[%lld]; // fragment %s: %s", ct, b->name, (long long)lay(E, i)->per_thread,
                       shape_text(E, b), layout_text(E, i));
        } else if (b->scope == B_LOCAL) {
            tli_e_line(E, "%s %s[%lld]; // local %s", ct, b->name, (long long)tli_buf_elems(b), shape_text(E, b));
        }
    }
}

/* ------------------------------------------------------------ accesses */

static const char *stage_base(emitter *E, int32_t buf)
{
    const char *st = E->stage[buf];
    if (!st || strcmp(st, "0") == 0 || strcmp(st, "0LL") == 0)
        return "0";
    return tli_e_fmt(E, "(%s) * %lld", st, (long long)E->L->smem[buf].stage_elems);
}

static bool swizzled(const tli_bnode *b)
{
    if (b->rank != 2)
        return false;
    int64_t bytes = b->cshape[1] * esize(b);
    int64_t chunks = bytes / 16;
    return bytes % 16 == 0 && chunks >= 1 && (chunks & (chunks - 1)) == 0;
}

/* Flat row-major offset of constant-shape buffer b. */
static const char *flat_offset(emitter *E, const tli_bnode *b, const char *const *idx)
{
    const char *o = "0";
    int64_t st = 1;
    for (int d = b->rank - 1; d >= 0; d--) {
        o = tli_e_add(E, o, st == 1 ? tli_e_fmt(E, "(%s)", idx[d]) : tli_e_mul(E, idx[d], st));
        st *= b->cshape[d];
    }
    return o;
}

/* The in-bounds test of an access to an on-chip buffer: one tl_in per
 * index that the range analysis cannot place inside the shape (ids: the
 * index expressions, or NULL for generated indices, which are in range);
 * "true" when none is needed. */
static char *const_bounds(emitter *E, const tli_bnode *b, const char *const *idx, const int32_t *ids)
{
    tli_str s;
    tli_str_init(&s);
    for (int d = 0; ids && d < b->rank; d++) {
        int64_t lo, hi;
        if (tli_expr_range(E->ir, ids[d], &lo, &hi) && lo >= 0 && hi < b->cshape[d])
            continue;
        tli_str_appendf(&s, "%stl_in(%s, %lld)", s.len ? " && " : "", idx[d], (long long)b->cshape[d]);
    }
    if (!s.len)
        tli_str_append(&s, "true");
    return tli_e_take(E, &s);
}

void tli_e_smem_access(emitter *E, int32_t buf, const char *const *idx, const int32_t *ids, char **off, char **ok)
{
    const tli_bnode *b = buf_of(E, buf);
    const char *base = stage_base(E, buf);
    long long w = (long long)tli_row128((tl_dtype)b->dtype);
    if (E->L->smem[buf].blocked) /* [C / w][R][w], 128-byte swizzled rows */
        *off = (char *)tli_e_add(E, base,
                                 tli_e_fmt(E, "(int)(%s) / %lld * %lld + tl_swz_off<%lld, %d>((int)(%s), (int)(%s) %% %lld)",
                                           idx[1], w, (long long)(w * b->cshape[0]), w, esize(b), idx[0], idx[1], w));
    else if (swizzled(b))
        *off = (char *)tli_e_add(E, base, tli_e_fmt(E, "tl_swz_off<%lld, %d>((int)(%s), (int)(%s))",
                                                    (long long)b->cshape[1], esize(b), idx[0], idx[1]));
    else
        *off = (char *)tli_e_add(E, base, flat_offset(E, b, idx));
    *ok = const_bounds(E, b, idx, ids);
}

/* A read of an on-chip buffer; a plain one where the indices are known to
 * be in range. */
static char *checked_read(emitter *E, const char *name, const char *off, const char *ok)
{
    return strcmp(ok, "true") == 0 ? tli_e_fmt(E, "%s[%s]", name, off) : tli_e_fmt(E, "tl_ld(%s + (%s), %s)", name, off, ok);
}

/* "if (ok) " before a store, or nothing when ok is "true". */
static const char *guard_text(emitter *E, const char *ok)
{
    return strcmp(ok, "true") == 0 ? "" : tli_e_fmt(E, "if (%s) ", ok);
}

/* ------------------------------------------------------------ fragments */

/* The register of slice layout (parent p, dimension dim) that holds the
 * result for parent register r. */
static const char *slice_reg(emitter *E, int32_t parent, int dim, const char *r)
{
    const tli_frag_layout *p = lay(E, parent);
    if (p->kind == FRAG_ROWS) {
        int64_t run = p->rows.ncj * p->rows.v;
        if (buf_of(E, parent)->rank == 1)
            return "0";
        return dim == 1 ? tli_e_fmt(E, "(%s) / %lld", r, (long long)run) : tli_e_fmt(E, "(%s) %% %lld", r, (long long)run);
    }
    int nt = p->w.nt;
    return dim == 1 ? tli_e_fmt(E, "(%s) / %d * 2 + (%s) %% 4 / 2", r, 4 * nt, r)
                    : tli_e_fmt(E, "(%s) / 4 %% %d * 2 + (%s) %% 2", r, nt, r);
}

/* Coordinates of register r of fragment buf into idx[0..rank); *guard
 * (NULL when every register holds an element) says whether it does. */
static void frag_coords(emitter *E, int32_t buf, const char *r, const char **idx, const char **guard);

void tli_e_frag_coords(emitter *E, int32_t buf, const char *r, const char **idx, const char **guard)
{
    frag_coords(E, buf, r, idx, guard);
}

/* The warp's row and column offsets in an mma.sync split of wgn warps
 * along N, as the leading terms of an index ("" when a term is 0, no
 * "/ 1" or "% 1" when the split has one column of warps). */
static const char *warp_row_term(emitter *E, const tli_warp_layout *w)
{
    return w->wgn == 1 ? tli_e_fmt(E, "tl_warp * %lld + ", (long long)w->wm)
                       : tli_e_fmt(E, "(tl_warp / %d) * %lld + ", w->wgn, (long long)w->wm);
}
static const char *warp_col_term(emitter *E, const tli_warp_layout *w)
{
    return w->wgn == 1 ? "" : tli_e_fmt(E, "(tl_warp %% %d) * %lld + ", w->wgn, (long long)w->wn);
}

static void frag_coords(emitter *E, int32_t buf, const char *r, const char **idx, const char **guard)
{
    const tli_bnode *b = buf_of(E, buf);
    const tli_frag_layout *f = lay(E, buf);
    *guard = NULL;
    if (f->kind == FRAG_WGMMA || f->kind == FRAG_MMA) {
        const tli_warp_layout *w = &f->w;
        if (w->wgmma) {
            idx[0] = tli_e_fmt(E, "(tl_warp / 4) * %lld + (%s) / %d * 64 + (tl_warp %% 4) * 16 + tl_lane / 4 + (%s) %% 4 / 2 * 8",
                               (long long)w->wm, r, 4 * w->nt, r);
            idx[1] = tli_e_fmt(E, "(%s) / 4 %% %d * 8 + tl_lane %% 4 * 2 + (%s) %% 2", r, w->nt, r);
        } else {
            idx[0] = tli_e_fmt(E, "%s(%s) / %d * 16 + tl_lane / 4 + (%s) %% 4 / 2 * 8", warp_row_term(E, w), r,
                               4 * w->nt, r);
            idx[1] = tli_e_fmt(E, "%s(%s) / 4 %% %d * 8 + tl_lane %% 4 * 2 + (%s) %% 2", warp_col_term(E, w), r, w->nt, r);
        }
        return;
    }
    if (f->kind == FRAG_SLICE) {
        const tli_frag_layout *p = lay(E, f->parent);
        const char *c;
        if (p->kind == FRAG_ROWS) {
            const tli_rows_layout *x = &p->rows;
            if (buf_of(E, f->parent)->rank == 1) {
                idx[0] = "0";
                return;
            }
            if (f->dim == 1) {
                c = tli_e_fmt(E, "(%s) * %d + tl_tid / %d", r, x->tr, x->tc);
                if (x->nri * x->tr > x->rows)
                    *guard = tli_e_fmt(E, "%s < %lld", c, (long long)x->rows);
            } else {
                c = tli_e_fmt(E, "((%s) / %d * %d + tl_tid %% %d) * %d + (%s) %% %d", r, x->v, x->tc, x->tc, x->v, r, x->v);
                if (x->ncj * x->tc * x->v > x->cols)
                    *guard = tli_e_fmt(E, "%s < %lld", c, (long long)x->cols);
            }
        } else if (p->w.wgmma) {
            c = f->dim == 1 ? tli_e_fmt(E, "(tl_warp / 4) * %lld + (%s) / 2 * 64 + (tl_warp %% 4) * 16 + tl_lane / 4 + (%s) %% 2 * 8",
                                        (long long)p->w.wm, r, r)
                            : tli_e_fmt(E, "(%s) / 2 * 8 + tl_lane %% 4 * 2 + (%s) %% 2", r, r);
        } else {
            c = f->dim == 1 ? tli_e_fmt(E, "%s(%s) / 2 * 16 + tl_lane / 4 + (%s) %% 2 * 8", warp_row_term(E, &p->w), r, r)
                            : tli_e_fmt(E, "%s(%s) / 2 * 8 + tl_lane %% 4 * 2 + (%s) %% 2", warp_col_term(E, &p->w), r, r);
        }
        idx[0] = c;
        return;
    }
    /* blocked rows */
    const tli_rows_layout *x = &f->rows;
    int64_t run = x->ncj * x->v;
    const char *row = tli_e_fmt(E, "(%s) / %lld * %d + tl_tid / %d", r, (long long)run, x->tr, x->tc);
    const char *col = tli_e_fmt(E, "((%s) / %d %% %lld * %d + tl_tid %% %d) * %d + (%s) %% %d", r, x->v, (long long)x->ncj,
                                x->tc, x->tc, x->v, r, x->v);
    if (x->tr == 1 && x->nri == 1)
        row = "0";
    bool pad_r = x->nri * x->tr > x->rows, pad_c = x->ncj * x->tc * x->v > x->cols;
    if (pad_r || pad_c)
        *guard = tli_e_fmt(E, "%s%s%s", pad_r ? tli_e_fmt(E, "%s < %lld", row, (long long)x->rows) : "",
                           pad_r && pad_c ? " && " : "", pad_c ? tli_e_fmt(E, "%s < %lld", col, (long long)x->cols) : "");
    idx[b->rank - 1] = col;
    int64_t inner = 1;
    for (int d = b->rank - 2; d >= 0; d--) {
        idx[d] = d > 0 ? tli_e_fmt(E, "(%s) / %lld %% %lld", row, (long long)inner, (long long)b->cshape[d])
                       : (inner == 1 ? row : tli_e_fmt(E, "(%s) / %lld", row, (long long)inner));
        inner *= b->cshape[d];
    }
}

/* The register text of fragment buf inside the loop over fragment
 * E->frag_loop's registers (tl_r). */
static const char *frag_reg(emitter *E, int32_t buf)
{
    int32_t owner = E->frag_loop;
    if (!owner) {
        tli_e_fail(E, "fragment '%s' touched outside its layout loop", buf_of(E, buf)->name);
        return "0";
    }
    if (tli_layout_equal(E->L, buf, owner))
        return "tl_r";
    const tli_frag_layout *f = lay(E, buf);
    if (tli_slice_of_alike(E->L, buf, owner))
        return slice_reg(E, owner, f->dim, "tl_r");
    tli_e_fail(E, "fragment '%s' does not follow the layout of '%s'", buf_of(E, buf)->name, buf_of(E, owner)->name);
    return "0";
}

char *tli_e_tile_load(emitter *E, const tli_enode *n)
{
    const tli_bnode *b = buf_of(E, n->buf);
    const char *idx[TL_MAX_RANK];
    const int32_t *ids = &E->ir->pool.v[n->idx];
    if (b->scope == B_FRAGMENT)
        return tli_e_fmt(E, "%s[%s]", b->name, frag_reg(E, n->buf));
    for (int d = 0; d < b->rank; d++)
        idx[d] = tli_e_expr(E, ids[d]);
    if (b->scope == B_WORDS) /* (a lowered protocol's word: who reads it and when is its) */
        return tli_e_fmt(E, "%s[%s]", b->name, idx[0]);
    if (b->scope == B_LOCAL)
        return checked_read(E, b->name, flat_offset(E, b, idx), const_bounds(E, b, idx, ids));
    char *off, *ok;
    tli_e_smem_access(E, n->buf, idx, ids, &off, &ok);
    return checked_read(E, b->name, off, ok);
}

/* Inside a loop over a layout that several threads share (a slice), only
 * one of the threads holding an element writes it to memory. */
static const char *primary_guard(emitter *E)
{
    if (!E->frag_loop || !lay(E, E->frag_loop)->replicated)
        return NULL;
    const tli_frag_layout *f = lay(E, E->frag_loop), *p = lay(E, f->parent);
    if (p->kind == FRAG_ROWS)
        return buf_of(E, f->parent)->rank == 1 ? "tl_tid == 0"
               : f->dim == 1                   ? tli_e_fmt(E, "tl_tid %% %d == 0", p->rows.tc)
                                               : tli_e_fmt(E, "tl_tid / %d == 0", p->rows.tc);
    if (f->dim == 1)
        return p->w.wgmma || p->w.wgn == 1 ? "tl_lane % 4 == 0" : tli_e_fmt(E, "tl_lane %% 4 == 0 && tl_warp %% %d == 0", p->w.wgn);
    return p->w.wgmma ? "tl_lane < 4 && tl_warp % 4 == 0" : tli_e_fmt(E, "tl_lane < 4 && tl_warp / %d == 0", p->w.wgn);
}

void tli_e_tile_store(emitter *E, const tli_snode *s, const char *val, const char *const *idx)
{
    const tli_bnode *b = buf_of(E, s->buf);
    const int32_t *ids = &E->ir->pool.v[s->idx];
    if (b->scope == B_FRAGMENT) {
        tli_e_line(E, "%s[%s] = %s;", b->name, frag_reg(E, s->buf), val);
        return;
    }
    if (b->scope == B_LOCAL) {
        tli_e_line(E, "%s%s[%s] = %s;", guard_text(E, const_bounds(E, b, idx, ids)), b->name, flat_offset(E, b, idx),
                   val);
        return;
    }
    if (b->scope == B_WORDS) {
        tli_e_line(E, "%s[%s] = %s;", b->name, idx[0], val);
        return;
    }
    char *off, *ok;
    tli_e_smem_access(E, s->buf, idx, ids, &off, &ok);
    const char *prim = primary_guard(E);
    if (prim)
        ok = tli_e_fmt(E, "%s && %s", prim, ok);
    if (E->inside_parallel)
        tli_e_line(E, "%s%s[%s] = %s;", guard_text(E, ok), b->name, off, val);
    else
        tli_e_line(E, "if (tl_tid == 0 && %s) %s[%s] = %s;", ok, b->name, off, val);
}

/*   #pragma unroll
 *   for (int tl_r = 0; tl_r < 64; ++tl_r) { const long long tl_i7_0 = row, tl_i7_1 = col; body }  */
void tli_e_frag_parallel(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int32_t f = s->x[TLI_X_PAR_FRAG];
    if (s->x[TLI_X_PAR_LANES] > 1) {
        int32_t saved = E->frag_loop;
        E->frag_loop = f;
        tli_e_frag_runs(E, sid);
        E->frag_loop = saved;
        return;
    }
    const tli_bnode *b = buf_of(E, f);
    int64_t count = lay(E, f)->per_thread;
    int32_t unit = s->x[TLI_X_PAR_UNIT_SCALE];
    if (unit) { /* a scaling by f[row] that a thread whose registers of f are all 1 skips (pass_threads) */
        tli_str c;
        tli_str_init(&c);
        for (int64_t r = 0; r < lay(E, unit)->per_thread; r++)
            tli_str_appendf(&c, "%s%s[%lld] != 1.0f", r ? " || " : "", buf_of(E, unit)->name, (long long)r);
        E->oom |= c.oom; /* (a condition lost to memory would print another kernel: the emitter fails) */
        tli_e_line(E, "if (%s) // a factor of 1 everywhere would leave %s as it is", c.data ? c.data : "true", b->name);
        tli_str_free(&c);
    }
    tli_e_line(E, "{ // tl_parallel over fragment %s (%s): %lld register%s per thread", b->name, shape_text(E, b),
               (long long)count, count > 1 ? "s" : "");
    E->indent++;
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) {", (long long)count);
    E->indent++;
    const char *idx[TL_MAX_RANK], *guard;
    frag_coords(E, f, "tl_r", idx, &guard);
    for (int d = 0; d < s->rank; d++) {
        /* named after the loop the variable was made for: a copy of a loop
         * (the rotation's prologue) declares the original's names in its own scope */
        const tli_enode *v = tli_E(E->ir, s->vars[d]);
        const char *name = s->rank > 1 ? tli_e_fmt(E, "tl_i%d_%d", v->loop, d) : tli_e_fmt(E, "tl_i%d", v->loop);
        tli_e_line(E, "const long long %s = %s;", name, idx[d]);
        E->var_int[s->vars[d]] = VAR_INT_RANGE;
    }
    if (guard) {
        tli_e_line(E, "if (%s) {", guard);
        E->indent++;
    }
    int32_t saved = E->frag_loop;
    E->frag_loop = f;
    E->inside_parallel = true;
    tli_e_stmts(E, s->body);
    E->inside_parallel = false;
    E->frag_loop = saved;
    for (int d = 0; d < s->rank; d++)
        E->var_int[s->vars[d]] = VAR_I64;
    if (guard) {
        E->indent--;
        tli_e_line(E, "}");
    }
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_fill(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    const tli_bnode *b = buf_of(E, s->buf);
    const char *ct = ctype(b);
    const char *v = s->value ? tli_e_single(E, s->value) : tli_e_fmt(E, "tl_zero<%s>()", ct);
    if (b->scope == B_SHARED) {
        tli_e_line(E, "for (int tl_e = tl_tid; tl_e < %lld; tl_e += %d) %s[%s] = %s;", (long long)tli_buf_elems(b),
                   E->ir->threads, b->name, tli_e_add(E, stage_base(E, s->buf), "tl_e"), v);
        return;
    }
    int64_t n = b->scope == B_FRAGMENT ? lay(E, s->buf)->per_thread : tli_buf_elems(b);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) %s[tl_r] = %s;", (long long)n, b->name, v);
}

/* --------------------------------------------------------------- copies */

/* Global index texts of element `local` of the tile of tensor `region`
 * whose local extents are ext[0..rank): the tile's origin idx[d] * ext[d]
 * plus local; a tensor of higher rank than the tile has extents of 1 in
 * its leading dimensions. */
static void tile_global_idx(emitter *E, int32_t region, const int64_t *ext, int rank, const char *const *local,
                            const char **out)
{
    const tli_rnode *r = tli_R(E->ir, region);
    int grank = buf_of(E, r->buf)->rank, lead = grank - rank;
    for (int d = 0; d < grank; d++) {
        const char *t = tli_e_single(E, r->idx[d]);
        int64_t c;
        bool zero = tli_expr_const_int(E->ir, r->idx[d], &c) && c == 0;
        if (d < lead)
            out[d] = t;
        else if (zero)
            out[d] = local[d - lead];
        else
            out[d] = tli_e_add(E, tli_e_fmt(E, "(%s) * %lldLL", t, (long long)ext[d - lead]), local[d - lead]);
    }
}

/* Value text converted from type `from` to `to` (through f32, except f64
 * and integers going to a 16- or 8-bit float: those round once, from the
 * whole value, as tl_f32_odd in the device header explains). */
static const char *convert(emitter *E, const char *v, tl_dtype from, tl_dtype to)
{
    if (from == to)
        return v;
    if (tli_dtype_is_narrow_float(to) && (from == TL_F64 || from == TL_I32 || from == TL_I64))
        return tli_e_fmt(E, "tl_to_%s((%s)(%s))", tl_dtype_name(to), from == TL_F64 ? "double" : "long long", v);
    return tli_e_fmt(E, "tl_conv<%s>(tl_f32(%s))", tli_dtype_ctype(to), v);
}

/* The threads a copy runs on. */
static int copy_threads(emitter *E, const tli_snode *s)
{
    return s->x[TLI_X_COPY_THREADS] ? s->x[TLI_X_COPY_THREADS] : E->ir->threads;
}

/* Opens "for (int v = tl_tid; v < n; v += T) {", or "if (tl_tid < n) {"
 * when every thread has at most one iteration. */
static void open_spread(emitter *E, const char *v, int64_t n, int T, bool unroll)
{
    if (n <= T) {
        tli_e_line(E, "if (tl_tid < %lld) {", (long long)n);
        tli_e_line(E, "    const int %s = tl_tid;", v);
    } else {
        if (unroll)
            tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int %s = tl_tid; %s < %lld; %s += %d) {", v, v, (long long)n, v, T);
    }
    E->indent++;
}

static void close_block(emitter *E)
{
    E->indent--;
    tli_e_line(E, "}");
}

/* tl_o<d>: the global origin of the tile of region `reg` for local tile t. */
static void tile_origin(emitter *E, int32_t reg, const tli_bnode *t, const char **gi_out, const char *const *loc)
{
    const char *zero[TL_MAX_RANK] = {"0", "0", "0", "0"}, *origin[TL_MAX_RANK];
    tile_global_idx(E, reg, t->cshape, t->rank, zero, origin);
    int grank = buf_of(E, tli_R(E->ir, reg)->buf)->rank, lead = grank - t->rank;
    for (int d = 0; d < grank; d++) {
        tli_e_line(E, "const long long tl_o%d = %s;", d, origin[d]);
        gi_out[d] = d < lead ? tli_e_fmt(E, "tl_o%d", d) : tli_e_add(E, tli_e_fmt(E, "tl_o%d", d), loc[d - lead]);
    }
}

/* Global tile <-> shared, element by element:
 *   for (tl_e = tl_tid; tl_e < ELEMS; tl_e += T) { tl_l<d> = ...; dst[...] = src[...]; } */
static void emit_copy_elements(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), db = tli_copy_buf(ir, s->a1);
    bool to_shared = buf_of(E, sb)->scope == B_GLOBAL;
    int32_t gb = to_shared ? sb : db, tb = to_shared ? db : sb, reg = to_shared ? s->a0 : s->a1;
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, tb);
    tli_e_line(E, "{ // tl_copy %s %s %s (%s), element by element", to_shared ? g->name : t->name, to_shared ? "tile ->" : "->",
               to_shared ? t->name : tli_e_fmt(E, "%s tile", g->name), shape_text(E, t));
    E->indent++;
    const char *loc[TL_MAX_RANK], *gi[TL_MAX_RANK];
    for (int d = 0; d < t->rank; d++)
        loc[d] = tli_e_fmt(E, "tl_l%d", d);
    tile_origin(E, reg, t, gi, loc);
    open_spread(E, "tl_e", tli_buf_elems(t), copy_threads(E, s), false);
    int64_t inner = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        const char *q = inner == 1 ? "tl_e" : tli_e_fmt(E, "tl_e / %lld", (long long)inner);
        tli_e_line(E, "const int tl_l%d = %s%s;", d, q, d > 0 ? tli_e_fmt(E, " %% %lld", (long long)t->cshape[d]) : "");
        inner *= t->cshape[d];
    }
    char *goff, *gok, *soff, *sok;
    tli_e_global_access(E, gb, gi, &goff, &gok);
    tli_e_smem_access(E, tb, loc, NULL, &soff, &sok);
    if (to_shared)
        tli_e_line(E, "%s[%s] = %s;", t->name, soff,
                   convert(E, tli_e_fmt(E, "tl_ld(%s + (%s), %s)", g->name, goff, gok), (tl_dtype)g->dtype,
                           (tl_dtype)t->dtype));
    else
        tli_e_line(E, "if (%s) %s[%s] = %s;", gok, g->name, goff,
                   convert(E, tli_e_fmt(E, "%s[%s]", t->name, soff), (tl_dtype)t->dtype, (tl_dtype)g->dtype));
    close_block(E);
    close_block(E);
}

/* The chunks of emit_copy_async16 when the threads cover whole rows of
 * chunks: a thread's column is the same in every chunk and its row steps
 * by T / row_chunks, so its global address is one pointer plus a multiple
 * of one row step (written as the full index per chunk, the 64-bit
 * products and the tile origin were recomputed for every chunk of every
 * tile: FlashAttention's sm_80 loop, bench/NOTES.md session 15). */
static void emit_copy_async16_rows(emitter *E, int32_t gb, int32_t sb, const char *const *gi, int T,
                                   int per, int64_t row_chunks, int64_t n)
{
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, sb);
    int lead = g->rank - 2;
    int64_t rows = T / row_chunks;
    tli_e_line(E, "const int tl_r0 = tl_tid / %lld, tl_l1 = tl_tid %% %lld * %d;", (long long)row_chunks,
               (long long)row_chunks, per);
    const char *gb0[TL_MAX_RANK];
    for (int d = 0; d < g->rank; d++)
        gb0[d] = gi[d];
    gb0[lead] = tli_e_add(E, tli_e_fmt(E, "tl_o%d", lead), "tl_r0");
    char *goff, *gok, *soff, *sok;
    tli_e_global_access(E, gb, gb0, &goff, &gok);
    tli_e_line(E, "const %s *const tl_g = %s + (%s);", ctype(g), g->name, goff);
    tli_e_line(E, "const long long tl_gstep = %lldLL * %s;", (long long)rows, tli_e_stride(E, gb, lead));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_c = 0; tl_c < %lld; ++tl_c) {", (long long)n);
    E->indent++;
    tli_e_line(E, "const int tl_l0 = tl_r0 + tl_c * %lld;", (long long)rows);
    tli_e_global_access(E, gb, gi, &goff, &gok);
    /* in shared memory too, whole 8-row groups (the swizzle's period) apart
     * are one constant apart: [R][C] rows of C elements, or blocked [C / w][R][w] */
    const char *loc[2] = {"tl_l0", "tl_l1"}, *loc0[2] = {"tl_r0", "tl_l1"};
    if (rows % 8 == 0) {
        int64_t w = E->L->smem[sb].blocked ? tli_row128((tl_dtype)t->dtype) : t->cshape[1];
        tli_e_smem_access(E, sb, loc0, NULL, &soff, &sok);
        soff = tli_e_fmt(E, "%s + tl_c * %lld", soff, (long long)(rows * w));
    } else {
        tli_e_smem_access(E, sb, loc, NULL, &soff, &sok);
    }
    tli_e_line(E, "tl_cp_async16%s(%s + (%s), tl_g + tl_c * tl_gstep, %s);", tli_e_policy(E, gb), t->name, soff, gok);
    close_block(E);
}

/* Global tile -> shared in 16-byte cp.async chunks (the launch guarantees
 * 16-byte aligned rows for this program; the commit is a statement of its
 * own). */
static void emit_copy_async16(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t gb = tli_copy_buf(ir, s->a0), sb = tli_copy_buf(ir, s->a1);
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, sb);
    int per = 16 / esize(t), last = t->rank - 1;
    int64_t row_chunks = t->cshape[last] / per, chunks = tli_buf_elems(t) / per;
    tli_e_line(E, "{ // tl_copy %s tile (%s) -> %s: 16-byte cp.async chunks", g->name, shape_text(E, t), t->name);
    E->indent++;
    const char *loc[2] = {"tl_l0", "tl_l1"}, *gi[TL_MAX_RANK];
    if (t->rank == 1)
        loc[0] = "tl_l0";
    tile_origin(E, s->a0, t, gi, loc);
    int T = copy_threads(E, s);
    if (t->rank == 2 && t->cshape[0] > 1 && chunks > T && chunks % T == 0 && T % row_chunks == 0) {
        emit_copy_async16_rows(E, gb, sb, gi, T, per, row_chunks, chunks / T);
        close_block(E);
        return;
    }
    if (chunks > T && chunks % T == 0) {
        /* a constant count per thread: straight-line code once unrolled,
         * where `tl_q < chunks` from tl_tid left the compiler a remainder
         * loop (it cannot see tl_tid < T) and the row of every chunk to
         * recompute */
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_c = 0; tl_c < %lld; ++tl_c) {", (long long)(chunks / T));
        tli_e_line(E, "    const int tl_q = tl_tid + tl_c * %d;", T);
        E->indent++;
    } else {
        open_spread(E, "tl_q", chunks, T, true);
    }
    if (t->rank == 2 && t->cshape[0] == 1) { /* one row: every chunk's row is the tile's */
        tli_e_line(E, "const int tl_l0 = 0;");
        tli_e_line(E, "const int tl_l1 = tl_q * %d;", per);
    } else if (t->rank == 2) {
        tli_e_line(E, "const int tl_l0 = tl_q / %lld;", (long long)row_chunks);
        tli_e_line(E, "const int tl_l1 = tl_q %% %lld * %d;", (long long)row_chunks, per);
    } else {
        tli_e_line(E, "const int tl_l0 = tl_q * %d;", per);
    }
    char *goff, *gok, *soff, *sok;
    tli_e_global_access(E, gb, gi, &goff, &gok);
    tli_e_smem_access(E, sb, loc, NULL, &soff, &sok);
    tli_e_line(E, "tl_cp_async16%s(%s + (%s), %s + (%s), %s);", tli_e_policy(E, gb), t->name, soff, g->name, goff, gok);
    close_block(E);
    close_block(E);
}

/* TMA boxes of a producer: a tile of 64-column blocks is one box per block
 * ([R][64] each), completing on the copy's mbarrier; coordinates innermost
 * first, leading dimensions of a higher-rank tensor at the tile's index. */
static void emit_copy_tma(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t gb = tli_copy_buf(ir, s->a0), sb = tli_copy_buf(ir, s->a1);
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, sb);
    bool blocked = E->L->smem[sb].blocked;
    int64_t inner = blocked ? tli_row128((tl_dtype)t->dtype) : t->cshape[1], boxes = t->cshape[1] / inner;
    const char *zero[2] = {"0", "0"}, *origin[TL_MAX_RANK];
    tile_global_idx(E, s->a0, t->cshape, 2, zero, origin);
    const char *bar = tli_e_mbar(E, s->x[TLI_X_COPY_BAR], s->x[TLI_X_COPY_BAR_IDX]);
    const char *base = tli_e_add(E, stage_base(E, sb), "0");
    /* multicast (lowered.h, TLI_X_COPY_MCAST): this block's slice of every
     * box's rows, into the same offset of each block of its group */
    int axes = s->x[TLI_X_COPY_MCAST], group = tli_mcast_group(ir, axes);
    int64_t rows = t->cshape[0] / group;
    if (group > 1) {
        tli_e_line(E, "{ // tl_copy %s -> %s: rows [%lld tl_slice, +%lld) of each box, multicast to %d blocks", g->name,
                   t->name, (long long)rows, (long long)rows, group);
        E->indent++;
        tli_e_line(E, "unsigned tl_slice;");
        tli_e_line(E, "unsigned short tl_mask;");
        tli_e_line(E, "tl_mcast_group<%d, %d, %d, %d>(tl_slice, tl_mask);", ir->cluster[0] > 1 ? ir->cluster[0] : 1,
                   ir->cluster[1] > 1 ? ir->cluster[1] : 1, ir->cluster[2] > 1 ? ir->cluster[2] : 1, axes);
        origin[g->rank - 2] = tli_e_fmt(E, "%s + (long long)tl_slice * %lld", origin[g->rank - 2], (long long)rows);
        base = tli_e_fmt(E, "%s + tl_slice * %lld", base, (long long)(rows * inner));
    }
    for (int64_t j = 0; j < boxes; j++) {
        tli_str c;
        tli_str_init(&c);
        tli_str_appendf(&c, "(int)(%s)", tli_e_add(E, origin[g->rank - 1], tli_e_fmt(E, "%lld", (long long)(j * inner))));
        for (int d = g->rank - 2; d >= 0; d--)
            tli_str_appendf(&c, ", (int)(%s)", origin[d]);
        const char *dst = tli_e_add(E, base, tli_e_fmt(E, "%lld", (long long)(j * inner * t->cshape[0])));
        tli_e_line(E, "tl_tma_load_%dd%s(%s + %s, &tl_map%d, %s, %s%s);", g->rank, group > 1 ? "_mc" : tli_e_policy(E, gb),
                   t->name, dst,
                   s->x[TLI_X_COPY_MAP], tli_e_take(E, &c), bar, group > 1 ? ", tl_mask" : "");
    }
    if (group > 1) {
        E->indent--;
        tli_e_line(E, "}");
    }
}

/* tl_v: accumulator registers tl_r and tl_r + 1 of fragment f (adjacent
 * columns) converted to o's type. */
static void emit_pair_vec(emitter *E, const tli_bnode *f, const tli_bnode *o)
{
    tli_e_line(E, "tl_vec<%s, 2> tl_v;", ctype(o));
    tli_e_line(E, "tl_v.e[0] = %s;", convert(E, tli_e_fmt(E, "%s[tl_r]", f->name), TL_F32, (tl_dtype)o->dtype));
    tli_e_line(E, "tl_v.e[1] = %s;", convert(E, tli_e_fmt(E, "%s[tl_r + 1]", f->name), TL_F32, (tl_dtype)o->dtype));
}

/* Opens a loop over accumulator fb's column pairs: registers tl_r and
 * tl_r + 1 at row tl_l0, columns tl_l1 and tl_l1 + 1. */
static void open_pairs(emitter *E, int32_t fb)
{
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += 2) {", (long long)lay(E, fb)->per_thread);
    E->indent++;
    const char *loc[TL_MAX_RANK], *guard;
    frag_coords(E, fb, "tl_r", loc, &guard);
    tli_e_line(E, "const int tl_l0 = %s, tl_l1 = %s;", loc[0], loc[1]);
}

/* Round X_COPY_ROUND of an accumulator's TMA store (lowered.h,
 * CP_TMA_STORE): each thread writes its column pairs of the round's
 * 64-column blocks into the staging tile ([blocks][R][64], 128-byte
 * swizzled rows: TMA's layout). The fence for the async proxy, the
 * barrier and the store follow as statements of their own (pipeline_store.c). */
static void emit_copy_tma_store(emitter *E, const tli_snode *s)
{
    int32_t fb = tli_copy_buf(E->ir, s->a0), sb = s->x[TLI_X_COPY_STAGING];
    const tli_bnode *f = buf_of(E, fb), *st = buf_of(E, sb);
    int64_t rows = st->cshape[0], lo = (int64_t)s->x[TLI_X_COPY_ROUND] * st->cshape[1], hi = lo + st->cshape[1];
    bool all = lo == 0 && hi >= f->cshape[1];
    tli_e_line(E, "{ // tl_copy %s -> %s, columns [%lld, %lld): into %s for TMA", f->name,
               buf_of(E, tli_copy_buf(E->ir, s->a1))->name, (long long)lo,
               (long long)(hi < f->cshape[1] ? hi : f->cshape[1]), st->name);
    E->indent++;
    open_pairs(E, fb);
    if (!all) {
        if (lo)
            tli_e_line(E, "if (tl_l1 >= %lld && tl_l1 < %lld) {", (long long)lo, (long long)hi);
        else
            tli_e_line(E, "if (tl_l1 < %lld) {", (long long)hi);
        E->indent++;
    }
    emit_pair_vec(E, f, st);
    const char *col = lo ? tli_e_fmt(E, "(tl_l1 - %lld)", (long long)lo) : "tl_l1";
    tli_e_line(E, "tl_st_vec(%s + (%s / 64 * %lld + tl_swz_off<64, %d>(tl_l0, tl_l1 %% 64)), tl_v);", st->name, col,
               (long long)(rows * 64), esize(st));
    if (!all)
        close_block(E);
    close_block(E);
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_tma_store(emitter *E, const tli_snode *s)
{
    const tli_snode *c = tli_S(E->ir, s->a0);
    int32_t fb = tli_copy_buf(E->ir, c->a0), ob = tli_copy_buf(E->ir, c->a1);
    const tli_bnode *f = buf_of(E, fb), *o = buf_of(E, ob), *st = buf_of(E, s->buf);
    int64_t per = st->cshape[1] / 64, first = (int64_t)c->x[TLI_X_COPY_ROUND] * per, blocks = f->cshape[1] / 64;
    const char *zero[2] = {"0", "0"}, *origin[TL_MAX_RANK];
    tile_global_idx(E, c->a1, f->cshape, 2, zero, origin);
    for (int64_t j = first; j < first + per && j < blocks; j++) {
        tli_str xy;
        tli_str_init(&xy);
        tli_str_appendf(&xy, "(int)(%s)", tli_e_add(E, origin[o->rank - 1], tli_e_fmt(E, "%lld", (long long)(j * 64))));
        for (int d = o->rank - 2; d >= 0; d--)
            tli_str_appendf(&xy, ", (int)(%s)", origin[d]);
        int64_t at = (j - first) * st->cshape[0] * 64;
        tli_e_line(E, "tl_tma_store_%dd(&tl_map%d, %s, %s);", o->rank, c->x[TLI_X_COPY_MAP],
                   at ? tli_e_fmt(E, "%s + %lld", st->name, (long long)at) : st->name, tli_e_take(E, &xy));
    }
    tli_e_line(E, "tl_bulk_commit();");
}

/* The accumulator's store as 16-byte stores, where the tile is inside, its
 * rows start 16 bytes apart and aligned (stride, origin column and pointer):
 * in the mma.sync and wgmma layouts the four lanes of a quad hold a row's
 * column pairs of every 8-column block; for each row and four blocks they
 * exchange their pairs (tl_quad_transpose4) so that lane q holds block q's
 * 8 columns. A quarter of the store instructions, every sector written
 * whole (the pairs wrote each 32-byte sector in two halves: FlashAttention's
 * O, bench/NOTES.md session 18). Prints "if (...) { ... } else ". */
static void emit_frag_quad_rows(emitter *E, int32_t fb, int32_t ob, const char *inside, const char *lead16,
                                const char *s0, const char *cb)
{
    const tli_bnode *f = buf_of(E, fb), *o = buf_of(E, ob);
    const tli_warp_layout *w = &lay(E, fb)->w;
    int per = 16 / esize(o);
    tli_e_line(E, "if (%s && %s %% %d == 0 && tl_org1 %% %d == 0%s &&", inside, s0, per, per, lead16);
    tli_e_line(E, "    tl_aligned<16>(%s)) { // the whole tile inside, rows 16-byte aligned: a quad's pairs "
                  "transposed, 8 columns a store", o->name);
    E->indent++;
    tli_e_line(E, "%s", cb);
    tli_e_line(E, "const int tl_q = tl_lane %% 4;");
    tli_e_line(E, "#pragma unroll");
    /* group g: m tile g / (nt / 2), row half g / (nt / 4) % 2, column blocks 4 (g % (nt / 4)) + 0..3 */
    tli_e_line(E, "for (int tl_g = 0; tl_g < %lld; ++tl_g) {", (long long)(lay(E, fb)->per_thread / 8));
    E->indent++;
    tli_e_line(E, "const int tl_r = tl_g / %d * %d + tl_g %% %d * 16 + tl_g / %d %% 2 * 2;", w->nt / 2, 4 * w->nt,
               w->nt / 4, w->nt / 4);
    tli_e_line(E, "tl_vec<%s, 8> tl_v;", ctype(o));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < 4; ++tl_i) tl_v.w[tl_i] = tl_pack2((%s *)0, %s[tl_r + 4 * tl_i], "
                  "%s[tl_r + 4 * tl_i + 1]);", ctype(o), f->name, f->name);
    tli_e_line(E, "tl_quad_transpose4(tl_v.w, tl_q);");
    const char *at[TL_MAX_RANK], *blk[TL_MAX_RANK], *guard;
    frag_coords(E, fb, "tl_r", at, &guard);
    frag_coords(E, fb, "tl_r + 4 * tl_q", blk, &guard); /* block q's first pair, less lane q's 2 columns */
    tli_e_line(E, "const int tl_l0 = %s, tl_l1 = %s - tl_q * 2;", at[0], blk[1]);
    tli_e_line(E, "tl_st_vec(tl_cb + (tl_l0 * (int)%s + tl_l1), tl_v);", s0);
    close_block(E);
    E->indent--;
    tli_e_line(E, "} else");
}

/* The fast path of an accumulator -> global store, for a tile wholly
 * inside the tensor with a unit inner stride and an even row stride: every
 * pair of neighbouring elements is one aligned 4- or 8-byte store at a
 * constant offset from one of the thread's row pointers, with no tests.
 * Prints "if (interior) { ... } else" and returns; the masked loop follows
 * as the else branch. Without it each pair cost ~30 instructions of 64-bit
 * index arithmetic, bounds and alignment tests (a tenth of a 4096^3 GEMM).
 * quads (the lowering's TLI_X_COPY_QUADS): a 16-byte path goes first. */
static void emit_frag_pairs_interior(emitter *E, int32_t fb, int32_t ob, int32_t oreg, bool quads)
{
    const tli_bnode *f = buf_of(E, fb), *o = buf_of(E, ob);
    const char *zero[2] = {"0", "0"}, *origin[TL_MAX_RANK];
    tile_global_idx(E, oreg, f->cshape, 2, zero, origin);
    int lead = o->rank - 2;
    /* (not tl_t<N>: the names of the statement's temporaries) */
    tli_e_line(E, "const long long tl_org0 = %s, tl_org1 = %s;", origin[lead], origin[lead + 1]);
    const char *s0 = tli_e_stride(E, ob, lead), *s1 = tli_e_stride(E, ob, lead + 1);
    const char *base = "tl_org0 * %s + tl_org1";
    tli_str pre, lead_ok, lead16;
    tli_str_init(&pre);
    tli_str_init(&lead_ok);
    tli_str_init(&lead16);
    /* leading indices: inside, and at even strides, so the pairs stay aligned
     * (at strides of whole 16 bytes for the quads' 16-byte stores) */
    for (int d = 0; d < lead; d++) {
        tli_str_appendf(&pre, "(%s) * %s + ", origin[d], tli_e_stride(E, ob, d));
        tli_str_appendf(&lead_ok, " && tl_in(%s, %s) && %s %% 2 == 0", origin[d], tli_e_dim(E, ob, d),
                        tli_e_stride(E, ob, d));
        tli_str_appendf(&lead16, " && tl_in(%s, %s) && %s %% %d == 0", origin[d], tli_e_dim(E, ob, d),
                        tli_e_stride(E, ob, d), 16 / esize(o));
    }
    const char *oct = ctype(o);
    /* (the origin may be negative: a user's tile index less a shift, whose rows before the tensor the masked
     * path drops) */
    const char *inside = tli_e_fmt(E, "tl_in_span(tl_org0, %lldLL, %s) && tl_in_span(tl_org1, %lldLL, %s)%s && "
                                      "%s <= 2147483647LL / %lld",
                                   (long long)f->cshape[0], tli_e_dim(E, ob, lead), (long long)f->cshape[1],
                                   tli_e_dim(E, ob, lead + 1), strcmp(s1, "1") == 0 ? "" : tli_e_fmt(E, " && %s == 1", s1),
                                   s0, (long long)(f->cshape[0] + 1));
    const char *cb = tli_e_fmt(E, "%s *const tl_cb = %s + (%s%s);", oct, o->name, tli_e_take(E, &pre),
                               tli_e_fmt(E, base, s0));
    const char *l16 = tli_e_take(E, &lead16); /* (taken either way: the emitter frees what it keeps) */
    if (quads)
        emit_frag_quad_rows(E, fb, ob, inside, l16, s0, cb);
    /* offsets within the tile in 32 bits: 64-bit ones cost a register pair
     * per store, which pushed the kernel into spills */
    tli_e_line(E, "if (%s && %s %% 2 == 0%s &&", inside, s0, tli_e_take(E, &lead_ok));
    tli_e_line(E, "    tl_aligned<%d>(%s)) { // the whole tile inside: unmasked pair stores", 2 * esize(o), o->name);
    E->indent++;
    tli_e_line(E, "%s", cb);
    open_pairs(E, fb);
    emit_pair_vec(E, f, o);
    tli_e_line(E, "tl_st_vec(tl_cb + (tl_l0 * (int)%s + tl_l1), tl_v);", s0);
    close_block(E);
    E->indent--;
    tli_e_line(E, "} else // masked: the tile crosses an edge, or the pointer or stride is odd");
}

/* Fragment <-> global tile or shared, or fragment -> fragment of the same
 * layout, register by register. Accumulator pairs (c0, c1) are adjacent
 * columns: one 2-element store to global when both are inside and aligned. */
static void emit_copy_frag(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), db = tli_copy_buf(ir, s->a1);
    if (buf_of(E, sb)->scope == B_FRAGMENT && buf_of(E, db)->scope == B_FRAGMENT) {
        const tli_bnode *x = buf_of(E, sb), *y = buf_of(E, db);
        int64_t n = lay(E, db)->per_thread;
        bool halves = x->dtype == TL_F32 && (y->dtype == TL_BF16 || y->dtype == TL_F16) && n % 2 == 0;
        tli_e_line(E, "#pragma unroll // tl_copy %s -> %s, register by register%s", x->name, y->name,
                   halves ? ", two conversions at once" : "");
        if (halves) /* one cvt per pair (FlashAttention's P = S every tile) instead of two and a repack */
            tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += 2) tl_conv2(&%s[tl_r], %s[tl_r], %s[tl_r + 1]);",
                       (long long)n, y->name, x->name, x->name);
        else
            tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) %s[tl_r] = %s;", (long long)n, y->name,
                       convert(E, tli_e_fmt(E, "%s[tl_r]", x->name), (tl_dtype)x->dtype, (tl_dtype)y->dtype));
        return;
    }
    bool from_frag = buf_of(E, sb)->scope == B_FRAGMENT;
    int32_t fb = from_frag ? sb : db, ob = from_frag ? db : sb, oreg = from_frag ? s->a1 : s->a0;
    const tli_bnode *f = buf_of(E, fb), *o = buf_of(E, ob);
    const tli_frag_layout *fl = lay(E, fb);
    bool mma = fl->kind == FRAG_MMA || fl->kind == FRAG_WGMMA;
    bool pairs = from_frag && mma && o->scope == B_GLOBAL;
    tli_e_line(E, "{ // tl_copy %s -> %s (%s)", buf_of(E, sb)->name, buf_of(E, db)->name, shape_text(E, f));
    E->indent++;
    if (pairs && f->rank == 2 && oreg > 0 && tli_R(ir, oreg)->tiled)
        emit_frag_pairs_interior(E, fb, ob, oreg, s->x[TLI_X_COPY_QUADS] != 0);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += %d) {", (long long)fl->per_thread, pairs ? 2 : 1);
    E->indent++;
    const char *loc[TL_MAX_RANK], *guard, *oi[TL_MAX_RANK];
    frag_coords(E, fb, "tl_r", loc, &guard);
    for (int d = 0; d < f->rank; d++) {
        tli_e_line(E, "const long long tl_l%d = %s;", d, loc[d]);
        loc[d] = tli_e_fmt(E, "tl_l%d", d);
    }
    if (guard) {
        tli_e_line(E, "if (%s) {", guard);
        E->indent++;
    }
    char *off, *ok;
    if (o->scope == B_GLOBAL) {
        tile_global_idx(E, oreg, f->cshape, f->rank, loc, oi);
        tli_e_global_access(E, ob, oi, &off, &ok);
    } else {
        tli_e_smem_access(E, ob, loc, NULL, &off, &ok);
    }
    if (pairs) {
        int last = o->rank - 1;
        tli_str rows;
        tli_str_init(&rows);
        for (int d = 0; d < last; d++)
            tli_str_appendf(&rows, "%stl_in(%s, %s)", d ? " && " : "", oi[d], tli_e_dim(E, ob, d));
        const char *in_rows = tli_e_take(E, &rows);
        emit_pair_vec(E, f, o);
        tli_e_line(E, "tl_st_chunk%s(%s + (%s), %s, %s, %s, %s, tl_v);", tli_e_policy(E, ob), o->name, off,
                   tli_e_stride(E, ob, last), oi[last],
                   tli_e_dim(E, ob, last), *in_rows ? in_rows : "true");
    } else if (from_frag) {
        const char *v = convert(E, tli_e_fmt(E, "%s[tl_r]", f->name), (tl_dtype)f->dtype, (tl_dtype)o->dtype);
        tli_e_line(E, "if (%s) %s[%s] = %s;", ok, o->name, off, v);
    } else {
        const char *v = o->scope == B_GLOBAL ? tli_e_fmt(E, "tl_ld(%s + (%s), %s)", o->name, off, ok)
                                             : tli_e_fmt(E, "%s[%s]", o->name, off);
        tli_e_line(E, "%s[tl_r] = %s;", f->name, convert(E, v, (tl_dtype)o->dtype, (tl_dtype)f->dtype));
    }
    if (guard)
        close_block(E);
    close_block(E);
    close_block(E);
}

/* Blocked-rows fragment <-> global tile: each run of v elements of a row
 * is one access (16 bytes when aligned and inside), masked at the edges. */
static void emit_copy_frag_rows(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), db = tli_copy_buf(ir, s->a1);
    bool from_frag = buf_of(E, sb)->scope == B_FRAGMENT;
    int32_t fb = from_frag ? sb : db, gb = from_frag ? db : sb, reg = from_frag ? s->a1 : s->a0;
    const tli_bnode *f = buf_of(E, fb), *g = buf_of(E, gb);
    const tli_rows_layout *x = &lay(E, fb)->rows;
    tli_e_line(E, "{ // tl_copy %s -> %s (%s): runs of %d elements", buf_of(E, sb)->name, buf_of(E, db)->name,
               shape_text(E, f), x->v);
    E->indent++;
    int64_t per = lay(E, fb)->per_thread;
    /* Into registers: every run's load first, then the conversions (a load
     * behind the chunk's branch is waited for where the branches join; one
     * run at a time would put a single load of a thread in flight). */
    if (!from_frag)
        tli_e_line(E, "tl_vec<%s, %d> tl_v[%lld];", ctype(g), x->v, (long long)(per / x->v));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += %d) {", (long long)per, x->v);
    E->indent++;
    const char *loc[TL_MAX_RANK], *guard, *gi[TL_MAX_RANK];
    frag_coords(E, fb, "tl_r", loc, &guard);
    for (int d = 0; d < f->rank; d++) {
        tli_e_line(E, "const long long tl_l%d = %s;", d, loc[d]);
        loc[d] = tli_e_fmt(E, "tl_l%d", d);
    }
    /* padding registers (past the tile) move nothing: their row is out */
    tile_global_idx(E, reg, f->cshape, f->rank, loc, gi);
    int last = g->rank - 1;
    char *off, *ok;
    tli_e_global_access(E, gb, gi, &off, &ok);
    tli_str live;
    tli_str_init(&live);
    tli_str_append(&live, guard ? guard : "true");
    for (int d = 0; d < last; d++)
        tli_str_appendf(&live, " && tl_in(%s, %s)", gi[d], tli_e_dim(E, gb, d));
    const char *args = tli_e_fmt(E, "%s + (%s), %s, %s, %s, %s", g->name, off, tli_e_stride(E, gb, last), gi[last],
                                 tli_e_dim(E, gb, last), tli_e_take(E, &live));
    if (from_frag) {
        tli_e_line(E, "tl_vec<%s, %d> tl_v;", ctype(g), x->v);
        for (int e = 0; e < x->v; e++)
            tli_e_line(E, "tl_v.e[%d] = %s;", e,
                       convert(E, tli_e_fmt(E, "%s[tl_r + %d]", f->name, e), (tl_dtype)f->dtype, (tl_dtype)g->dtype));
        tli_e_line(E, "tl_st_chunk%s(%s, tl_v);", tli_e_policy(E, gb), args);
    } else {
        tli_e_line(E, "tl_ld_chunk%s(tl_v[tl_r / %d], %s);", tli_e_policy(E, gb), x->v, args);
    }
    close_block(E);
    if (!from_frag) { /* the conversions, once every load is in flight */
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += %d) {", (long long)per, x->v);
        E->indent++;
        for (int e = 0; e < x->v; e++)
            tli_e_line(E, "%s[tl_r + %d] = %s;", f->name, e,
                       convert(E, tli_e_fmt(E, "tl_v[tl_r / %d].e[%d]", x->v, e), (tl_dtype)g->dtype,
                               (tl_dtype)f->dtype));
        close_block(E);
    }
    close_block(E);
}

void tli_e_copy(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    switch ((tli_copy_how)s->x[TLI_X_COPY_HOW]) {
    case CP_ELEMENTS: emit_copy_elements(E, s); break;
    case CP_ASYNC16: emit_copy_async16(E, s); break;
    case CP_TMA: emit_copy_tma(E, s); break;
    case CP_FRAG: emit_copy_frag(E, s); break;
    case CP_FRAG_ROWS: emit_copy_frag_rows(E, s); break;
    case CP_TMA_STORE: emit_copy_tma_store(E, s); break;
    default: tli_e_fail(E, "a copy without an engine"); break;
    }
}

/* ----------------------------------------------------------------- gemm */

/* The asm statement of one wgmma m64n<n>k<k>.f32.<ta>.<tb> into a helper:
 * n / 2 accumulator registers (d's, and e's from register `split` on when
 * split > 0), A from four registers or a descriptor, B's descriptor, then
 * `imm`: the transpose immediates (", tb" for A in registers, ", ta, tb"
 * otherwise; "" for the 8-bit forms, which have none). */
static void wgmma_asm(tli_str *h, int n, int k, const char *ta, const char *tb, bool a_regs, const char *imm, int split)
{
    int regs = n / 2, na = a_regs ? 4 : 1;
    tli_str_appendf(h, "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n", regs + na + 1);
    tli_str_appendf(h, "        \"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {\"\n        \"", n, k, ta, tb);
    for (int i = 0; i < regs; i++)
        tli_str_appendf(h, "%%%d%s", i, i + 1 < regs ? (i % 16 == 15 ? ", \"\n        \"" : ", ") : "");
    if (a_regs)
        tli_str_appendf(h, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1%s;\\n}\\n\"\n        : ", regs, regs + 1,
                        regs + 2, regs + 3, regs + 4, imm);
    else
        tli_str_appendf(h, "}, %%%d, %%%d, p, 1, 1%s;\\n}\\n\"\n        : ", regs, regs + 1, imm);
    for (int i = 0; i < regs; i++)
        tli_str_appendf(h, "\"+f\"(%s[%d])%s", split && i >= split ? "e" : "d", split && i >= split ? i - split : i,
                        i + 1 < regs ? (i % 8 == 7 ? ",\n          " : ", ") : "");
    if (a_regs)
        tli_str_appendf(h, "\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d));\n}\n\n");
    else
        tli_str_appendf(h, "\n        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n}\n\n");
}

/* The helper of one warpgroup-wide m64nNk16 wgmma with f32 accumulators
 * (emitted once per kernel): A from shared memory (descriptor da; K-major,
 * or M-major with trans_a) or from registers (four 32-bit registers
 * a[0..3] holding two 16-bit values each), B from shared memory
 * (descriptor db, transposed with trans_b); scale_d 0 ignores d's old
 * values (a gemm that starts from zero). split > 0: a paired gemm
 * (lowered.h, TLI_X_GEMM_PAIR_C), both operands K-major in shared memory,
 * whose first `split` accumulator registers are d's and the rest e's:
 *   wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 {d...}, da|{a...}, db, p, 1, 1[, 0, tb]; */
static const char *wgmma_helper(emitter *E, int n, tl_dtype dt, bool trans_b, bool a_regs, bool trans_a, int split)
{
    const char *ty = dt == TL_F16 ? "f16" : "bf16";
    tli_str *h = &E->helpers;
    const char *name;
    if (split) {
        name = tli_e_fmt(E, "tl_wgmma_m64n%dk16_%s_tb_pair%d", n, ty, split);
        if (h->data && strstr(h->data, tli_e_fmt(E, "%s(", name))) /* (the whole name: _pair8 is in _pair80) */
            return name;
    } else {
        name = tli_e_fmt(E, "tl_wgmma_m64n%dk16_%s%s%s%s", n, ty, trans_b ? "_tb" : "", a_regs ? "_rs" : "",
                         trans_a ? "_ta" : "");
        bool *done = &E->wgmma_fn[(dt == TL_F16) * 2 + trans_b][n / 8][trans_a ? 2 : a_regs];
        if (*done)
            return name;
        *done = true;
    }
    if (split) {
        tli_str_appendf(h, "// One warpgroup-wide m64n%dk16 MMA of two gemms on one A (their B tiles adjacent), both\n"
                           "// from shared memory: accumulator registers %d.. are the second gemm's.\n", n, split);
        tli_str_appendf(h, "__device__ __forceinline__ void %s(float *d, float *e, unsigned long long da, "
                           "unsigned long long db, int scale_d)\n{\n", name);
    } else {
        tli_str_appendf(h, "// One warpgroup-wide m64n%dk16 MMA, A from %s, B from shared memory.\n", n,
                        a_regs ? "registers" : trans_a ? "shared memory, M-major" : "shared memory");
        tli_str_appendf(h, "__device__ __forceinline__ void %s(float *d, %s, unsigned long long db, int scale_d)\n{\n",
                        name, a_regs ? "const unsigned *a" : "unsigned long long da");
    }
    /* the register form takes no transpose flag for A */
    const char *imm = a_regs ? tli_e_fmt(E, ", %d", trans_b ? 1 : 0)
                             : tli_e_fmt(E, ", %d, %d", trans_a ? 1 : 0, trans_b ? 1 : 0);
    wgmma_asm(h, n, 16, ty, ty, a_regs, imm, split);
    return name;
}

/* The helper of one warpgroup-wide m64nNk32 wgmma of 8-bit floats (A of
 * type ta, B of type tb, either f8e4m3 or f8e5m2), both operands K-major
 * in shared memory: the only form wgmma has for them (no transposes, no A
 * in registers here). */
static const char *wgmma_f8_helper(emitter *E, int n, tl_dtype ta, tl_dtype tb)
{
    const char *a = ta == TL_F8E5M2 ? "e5m2" : "e4m3", *b = tb == TL_F8E5M2 ? "e5m2" : "e4m3";
    const char *name = tli_e_fmt(E, "tl_wgmma_m64n%dk32_%s_%s", n, a, b);
    tli_str *h = &E->helpers;
    if (h->data && strstr(h->data, tli_e_fmt(E, "%s(", name)))
        return name;
    tli_str_appendf(h, "// One warpgroup-wide m64n%dk32 MMA of 8-bit floats (%s x %s), A and B K-major in shared memory.\n",
                    n, a, b);
    tli_str_appendf(h, "__device__ __forceinline__ void %s(float *d, unsigned long long da, unsigned long long db, "
                       "int scale_d)\n{\n", name);
    wgmma_asm(h, n, 32, a, b, false, "", 0);
    return name;
}

/* Registers of the A operand of k16 step `k` (text) for m tile `i` (text)
 * from a 16-bit fragment in the accumulator layout with nt n8 tiles per
 * row of tiles: the pairs (c0, c1), (c2, c3) of n8 tiles 2k and 2k + 1. */
static void pack_a_regs(emitter *E, const char *a, int nt, const char *i, const char *k)
{
    const char *t0 = tli_e_fmt(E, "((%s) * %d + 2 * (%s)) * 4", i, nt, k);
    tli_e_line(E, "const unsigned tl_a[4] = {tl_pack2(%s[%s], %s[%s + 1]), tl_pack2(%s[%s + 2], %s[%s + 3]),", a, t0, a,
               t0, a, t0, a, t0);
    tli_e_line(E, "                          tl_pack2(%s[%s + 4], %s[%s + 5]), tl_pack2(%s[%s + 6], %s[%s + 7])};", a, t0,
               a, t0, a, t0, a, t0);
}

/* sm_90a: each warpgroup runs its m64 tiles of C with wgmma, B read from
 * the swizzled shared tile through descriptors, A from shared memory too
 * or from the registers of a 16-bit fragment; K / 16 steps, committed as
 * one group (the sync pass waits for it where its results are needed). */
/* for (tl_i = 0; tl_i < mt; ++tl_i) {, unrolled; a plain block with tl_i
 * = 0 when there is one tile (closed by close_block either way). */
static void open_tile_loop(emitter *E, int mt)
{
    if (mt == 1) {
        tli_e_line(E, "{");
        E->indent++;
        tli_e_line(E, "const int tl_i = 0;");
        return;
    }
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < %d; ++tl_i) {", mt);
    E->indent++;
}

static void emit_gemm_wgmma(emitter *E, const tli_snode *s)
{
    const tli_bnode *a = buf_of(E, s->gemm[0]), *b = buf_of(E, s->gemm[1]), *c = buf_of(E, s->gemm[2]);
    const tli_warp_layout *w = &lay(E, s->gemm[2])->w;
    bool tb = s->a1 & TL_GEMM_TRANS_B, a_regs = s->x[TLI_X_GEMM_A_REGS], zero = s->x[TLI_X_GEMM_ZERO];
    bool ta = s->a1 & TL_GEMM_TRANS_A; /* A [K, M] stored M-major: [M / 64][K][64] */
    int32_t c2 = tli_gemm_acc2(s);
    int64_t K = ta ? a->cshape[0] : a->cshape[1], N1 = w->wn, N = N1 + (c2 ? lay(E, c2)->w.wn : 0);
    /* a K step is 32 bytes of a 128-byte swizzled row (wgmma's k16 of 16-bit
     * elements, k32 of 8-bit ones); W columns are one row of a block */
    bool f8 = tli_dtype_is_f8((tl_dtype)b->dtype);
    const long long ks = f8 ? 32 : 16, W = tli_row128((tl_dtype)b->dtype);
    const char *fn = f8 ? wgmma_f8_helper(E, (int)N, (tl_dtype)a->dtype, (tl_dtype)b->dtype)
                        : wgmma_helper(E, (int)N, (tl_dtype)b->dtype, !tb, a_regs, ta, c2 ? (int)(N1 / 2) : 0);
    const char *et = ctype(b);
    const char *scale_d = zero ? "tl_k > 0" : "1";
    if (c2)
        tli_e_line(E, "{ // tl_gemm %s, %s %s %s * [%s; %s]^T: %d warpgroup%s x %d m64n%lldk16 wgmma (two gemms of one "
                   "A, their B tiles adjacent)", c->name, buf_of(E, c2)->name, zero ? "=" : "+=", a->name, b->name,
                   buf_of(E, s->x[TLI_X_GEMM_PAIR_B])->name, w->wgm, w->wgm > 1 ? "s" : "", w->mt, (long long)N);
    else
        tli_e_line(E, "{ // tl_gemm %s %s %s * %s%s: %d warpgroup%s x %d m64n%lldk%lld wgmma, A from %s", c->name,
                   zero ? "=" : "+=", a->name, b->name, tb ? "^T" : "", w->wgm, w->wgm > 1 ? "s" : "", w->mt,
                   (long long)N, ks, a_regs ? "registers" : "shared memory");
    E->indent++;
    if (ta) /* the warpgroup's rows: its blocks of 64 columns of A^T */
        tli_e_line(E, "const %s *const tl_A = %s + %s;", et, a->name,
                   tli_e_add(E, stage_base(E, s->gemm[0]), tli_e_fmt(E, "tl_wgi * %lld", (long long)(w->wm * K))));
    else if (!a_regs)
        tli_e_line(E, "const %s *const tl_A = %s + %s;", ctype(a), a->name,
                   tli_e_add(E, stage_base(E, s->gemm[0]), tli_e_fmt(E, "tl_wgi * %lld", (long long)(w->wm * W))));
    tli_e_line(E, "const %s *const tl_B = %s + %s;", et, b->name, stage_base(E, s->gemm[1]));
    if (a_regs) { /* packed before the fence: no register of A is written between the wgmmas (ptxas would put
                   * a warpgroup.arrive before each one that reads a register written after the fence) */
        tli_e_line(E, "unsigned tl_ap[%lld][%d][4];", (long long)(K / 16), w->mt);
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_k = 0; tl_k < %lld; tl_k += 16) {", (long long)K);
        E->indent++;
        open_tile_loop(E, w->mt);
        pack_a_regs(E, a->name, (int)(K / 8), "tl_i", "tl_k / 16");
        tli_e_line(E, "for (int tl_j = 0; tl_j < 4; ++tl_j) tl_ap[tl_k / 16][tl_i][tl_j] = tl_a[tl_j];");
        close_block(E);
        close_block(E);
    }
    /* the tiles' descriptors once; each step's is the tile's moved on by the step's bytes (tl_wgmma_desc_at) */
    int eb = esize(b);
    if (!tb) /* [K, N] stored [N / 64][K][64]: 16 K rows of 128 bytes per step, blocks K * 128 bytes apart */
        tli_e_line(E, "const unsigned long long tl_db0 = tl_wgmma_desc_mn_sw128(tl_B, %lld);",
                   (long long)(b->cshape[0] * 128));
    else
        tli_e_line(E, "const unsigned long long tl_db0 = tl_wgmma_desc_sw128(tl_B);");
    if (!a_regs)
        tli_e_line(E, "const unsigned long long tl_da0 = %s;",
                   ta ? tli_e_fmt(E, "tl_wgmma_desc_mn_sw128(tl_A, %lld)", (long long)(K * 128))
                      : "tl_wgmma_desc_sw128(tl_A)");
    tli_e_line(E, "tl_wgmma_fence();");
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_k = 0; tl_k < %lld; tl_k += %lld) {", (long long)K, ks);
    E->indent++;
    if (!tb)
        tli_e_line(E, "const unsigned long long tl_db = tl_wgmma_desc_at(tl_db0, tl_k * %d);", 64 * eb);
    else if (K > W) /* [N, K] stored [K / W][N][W] */
        tli_e_line(E, "const unsigned long long tl_db = tl_wgmma_desc_at(tl_db0, (tl_k / %lld * %lld + tl_k %% %lld) * %d);",
                   W, (long long)(b->cshape[0] * W), W, eb);
    else
        tli_e_line(E, "const unsigned long long tl_db = tl_wgmma_desc_at(tl_db0, tl_k * %d);", eb);
    open_tile_loop(E, w->mt);
    if (a_regs) {
        tli_e_line(E, "%s(%s + tl_i * %lld, tl_ap[tl_k / 16][tl_i], tl_db, %s);", fn, c->name, (long long)(N / 2),
                   scale_d);
    } else {
        const char *koff = K > W ? tli_e_fmt(E, "tl_k / %lld * %lld + tl_k %% %lld", W, (long long)(a->cshape[0] * W), W)
                                 : "tl_k";
        const char *acc = c2 ? tli_e_fmt(E, "%s + tl_i * %lld, %s + tl_i * %lld", c->name, (long long)(N1 / 2),
                                         buf_of(E, c2)->name, (long long)((N - N1) / 2))
                             : tli_e_fmt(E, "%s + tl_i * %lld", c->name, (long long)(N / 2));
        int ea = esize(a);
        const char *da = ta ? tli_e_fmt(E, "tl_wgmma_desc_at(tl_da0, (tl_i * %lld + tl_k * 64) * %d)", (long long)(K * 64), ea)
                            : tli_e_fmt(E, "tl_wgmma_desc_at(tl_da0, (tl_i * %lld + %s) * %d)", 64 * W, koff, ea);
        tli_e_line(E, "%s(%s, %s, tl_db, %s);", fn, acc, da, scale_d);
    }
    close_block(E);
    close_block(E);
    tli_e_line(E, "tl_wgmma_commit();");
    close_block(E);
}

/* One k16 step per iteration for each warp: A by ldmatrix.x4 (or packed
 * from a 16-bit fragment in registers), B by ldmatrix.x4.trans (B as
 * [K, N]) or ldmatrix.x4 (B as [N, K]), two n8 tiles per load, then
 * mt x nt mma.sync m16n8k16. */
static void emit_gemm_mma(emitter *E, const tli_snode *s)
{
    const tli_bnode *a = buf_of(E, s->gemm[0]), *b = buf_of(E, s->gemm[1]), *c = buf_of(E, s->gemm[2]);
    const tli_warp_layout *w = &lay(E, s->gemm[2])->w;
    bool tb = s->a1 & TL_GEMM_TRANS_B, a_regs = s->x[TLI_X_GEMM_A_REGS];
    int64_t K = a->cshape[1];
    const char *et = ctype(b);
    tli_e_line(E, "{ // tl_gemm %s += %s * %s%s: %dx%d warps, warp tile %lldx%lld = %dx%d mma.m16n8k16", c->name, a->name,
               b->name, tb ? "^T" : "", w->wgm, w->wgn, (long long)w->wm, (long long)w->wn, w->mt, w->nt);
    E->indent++;
    if (esize(b) != 2 || (!a_regs && esize(a) != 2)) {
        tli_e_fail(E, "an mma.sync tl_gemm of %d-byte operands (16-bit ones only)", esize(b));
        return;
    }
    if (w->wgn == 1)
        tli_e_line(E, "const int tl_m0 = tl_warp * %lld, tl_n0 = 0;", (long long)w->wm);
    else
        tli_e_line(E, "const int tl_m0 = (tl_warp / %d) * %lld, tl_n0 = (tl_warp %% %d) * %lld;", w->wgn,
                   (long long)w->wm, w->wgn, (long long)w->wn);
    /* shared addresses of the operands' stages, and the four swizzled
     * offsets of this thread's ldmatrix rows (tl_swz4: loads at register +
     * immediate); the loops below step rows by 8s and columns by 16s */
    if (!a_regs) {
        tli_e_line(E, "const unsigned tl_A = tl_smem_addr(%s + %s);", a->name, stage_base(E, s->gemm[0]));
        tli_e_line(E, "const tl_swz4<%lld, 2> tl_sa(tl_m0 + tl_lane %% 16, tl_lane / 16 * 8);",
                   (long long)a->cshape[1]);
    }
    tli_e_line(E, "const unsigned tl_B = tl_smem_addr(%s + %s);", b->name, stage_base(E, s->gemm[1]));
    if (tb)
        tli_e_line(E, "const tl_swz4<%lld, 2> tl_sb(tl_n0 + tl_lane %% 8 + tl_lane / 16 * 8, tl_lane / 8 %% 2 * 8);",
                   (long long)b->cshape[1]);
    else
        tli_e_line(E, "const tl_swz4<%lld, 2> tl_sb(tl_lane %% 16, tl_n0 + tl_lane / 16 * 8);", (long long)b->cshape[1]);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_k = 0; tl_k < %lld; tl_k += 16) {", (long long)K);
    E->indent++;
    tli_e_line(E, "unsigned tl_af[%d][4], tl_b[%d][2];", w->mt, w->nt);
    open_tile_loop(E, w->mt);
    if (a_regs) {
        pack_a_regs(E, a->name, (int)(K / 8), "tl_i", "tl_k / 16");
        tli_e_line(E, "for (int tl_q = 0; tl_q < 4; ++tl_q) tl_af[tl_i][tl_q] = tl_a[tl_q];");
    } else {
        tli_e_line(E, "tl_ldsm_x4(tl_af[tl_i], tl_A + 2 * tl_sa.at(tl_i * 16, tl_k));");
    }
    close_block(E);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %d; tl_j += 2) {", w->nt);
    E->indent++;
    tli_e_line(E, "unsigned tl_r4[4];");
    if (tb) /* tl_j is even: rows in steps of 16 */
        tli_e_line(E, "tl_ldsm_x4(tl_r4, tl_B + 2 * tl_sb.at(tl_j * 8, tl_k));");
    else
        tli_e_line(E, "tl_ldsm_x4_trans(tl_r4, tl_B + 2 * tl_sb.at(tl_k, tl_j * 8));");
    tli_e_line(E, "tl_b[tl_j][0] = tl_r4[0]; tl_b[tl_j][1] = tl_r4[1];");
    tli_e_line(E, "tl_b[tl_j + 1][0] = tl_r4[2]; tl_b[tl_j + 1][1] = tl_r4[3];");
    close_block(E);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < %d; ++tl_i)", w->mt);
    tli_e_line(E, "    #pragma unroll");
    tli_e_line(E, "    for (int tl_j = 0; tl_j < %d; ++tl_j)", w->nt);
    tli_e_line(E, "        tl_mma_16816<%s>(%s + (tl_i * %d + tl_j) * 4, tl_af[tl_i], tl_b[tl_j]);", et, c->name, w->nt);
    close_block(E);
    close_block(E);
}

void tli_e_gemm(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    if (s->x[TLI_X_GEMM_ATOM] == MMA_WGMMA_M64NNK16)
        emit_gemm_wgmma(E, s);
    else if (s->x[TLI_X_GEMM_ATOM] == MMA_SYNC_M16N8K16)
        emit_gemm_mma(E, s);
    else
        tli_e_fail(E, "a tl_gemm without an MMA atom");
}

/* ----------------------------------------------------------- reductions */

static const char *red_identity(int op)
{
    switch (op) {
    case R_MAX: return "__int_as_float(0xff800000)";
    case R_MIN: return "__int_as_float(0x7f800000)";
    default: return "0.0f";
    }
}

/* op(a, b) on f32 texts; `first` takes |b| for absmax partials. */
static const char *red_combine(emitter *E, int op, const char *a, const char *b, bool raw)
{
    switch (op) {
    case R_MAX: return tli_e_fmt(E, "fmaxf(%s, %s)", a, b);
    case R_MIN: return tli_e_fmt(E, "fminf(%s, %s)", a, b);
    case R_ABSMAX: return raw ? tli_e_fmt(E, "fmaxf(%s, fabsf(%s))", a, b) : tli_e_fmt(E, "fmaxf(%s, %s)", a, b);
    default: return tli_e_fmt(E, "%s + %s", a, b);
    }
}

static const char *red_name(int op)
{
    static const char *const n[] = {"max", "sum", "min", "absmax"};
    return op >= 0 && op < 4 ? n[op] : "?";
}

/* dst[j] = v, or combined with its old value when accumulating. */
static void red_store(emitter *E, const tli_snode *s, const char *j, const char *v)
{
    const tli_bnode *d = buf_of(E, s->gemm[1]);
    int op = s->a1 & TLI_REDUCE_OP_MASK;
    if (s->a1 & TLI_REDUCE_ACCUM)
        v = red_combine(E, op, tli_e_fmt(E, "tl_f32(%s[%s])", d->name, j), v, false);
    tli_e_line(E, "%s[%s] = %s;", d->name, j, convert(E, v, TL_F32, (tl_dtype)d->dtype));
}

/* The flat index of slice register j's element in dst, and its guard. */
static const char *slice_elem(emitter *E, int32_t dst, const char *j, const char **guard)
{
    const char *idx[TL_MAX_RANK];
    frag_coords(E, dst, j, idx, guard);
    return idx[0];
}

/* The index of this warp among the warps that share an element: its warp
 * number's bits under `mask`, packed. */
static const char *warp_rank(emitter *E, unsigned mask)
{
    const char *r = "0";
    int k = 0;
    for (int bit = 0; bit < 16; bit++)
        if (mask >> bit & 1) {
            r = tli_e_add(E, r, tli_e_fmt(E, "((tl_warp >> %d & 1) << %d)", bit, k));
            k++;
        }
    return r;
}

/* tl_finalize_reducer (TLI_REDUCE_FINAL): each thread's part of an element
 * is its partial, into tl_red[]; the exchange that follows adds the holders'
 * parts up. */
static void finalize_partials(emitter *E, const tli_snode *s, int64_t nj)
{
    const tli_bnode *db = buf_of(E, s->gemm[1]);
    unsigned lanes = (unsigned)s->x[TLI_X_RED_LANES], warps = (unsigned)s->x[TLI_X_RED_WARPS];
    tli_e_line(E, "{ // tl_finalize_reducer %s: the parts of its holders summed, shuffles over lanes xor 0x%x%s",
               db->name, lanes, warps ? ", then a partial per warp into shared memory" : "");
    E->indent++;
    tli_e_line(E, "float tl_red[%lld];", (long long)nj);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) tl_red[tl_j] = tl_f32(%s[tl_j]);", (long long)nj,
               db->name);
}

/* Each thread's partials of its registers, into tl_red[] (opens the
 * statement's block). */
static void thread_partials(emitter *E, const tli_snode *s, int64_t nj, int64_t np)
{
    int32_t src = s->gemm[0], dst = s->gemm[1];
    const tli_bnode *sb = buf_of(E, src), *db = buf_of(E, dst);
    int op = s->a1 & TLI_REDUCE_OP_MASK;
    unsigned lanes = (unsigned)s->x[TLI_X_RED_LANES], warps = (unsigned)s->x[TLI_X_RED_WARPS];
    const tli_frag_layout *sl = lay(E, dst);
    if (db->reducer) /* lanes and warps are 0: tl_finalize_reducer exchanges */
        tli_e_line(E, "{ // tl_reduce_%s %s -> reducer %s along dimension %d: each thread keeps its part", red_name(op),
                   sb->name, db->name, s->rank);
    else
        tli_e_line(E, "{ // tl_reduce_%s %s -> %s along dimension %d: partials in registers, shuffles over lanes xor 0x%x%s",
                   red_name(op), sb->name, db->name, s->rank, lanes,
                   warps ? ", then a partial per warp into shared memory" : "");
    E->indent++;
    /* Long runs per result go into CHAINS independent partials (the
     * registers split into CHAINS contiguous quarters), combined by a small
     * tree: a single chain of dependent max/add is latency-bound where few
     * warps share an SM (FlashAttention's softmax, 32 registers a row). */
    enum { CHAINS = 4 };
    bool chains = np % CHAINS == 0 && np / nj >= 4 * CHAINS;
    const char *acc = chains ? "tl_ch" : "tl_red";
    if (chains)
        tli_e_line(E, "float tl_ch[%lld][%d];", (long long)nj, (int)CHAINS);
    else
        tli_e_line(E, "float tl_red[%lld];", (long long)nj);
    tli_e_line(E, "#pragma unroll");
    if (chains)
        tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) tl_ch[tl_j][0] = tl_ch[tl_j][1] = tl_ch[tl_j][2] = "
                   "tl_ch[tl_j][3] = %s;", (long long)nj, red_identity(op));
    else
        tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) tl_red[tl_j] = %s;", (long long)nj, red_identity(op));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) {", (long long)np);
    E->indent++;
    const char *idx[TL_MAX_RANK], *guard;
    frag_coords(E, src, "tl_r", idx, &guard);
    const char *j = slice_reg(E, src, sl->dim, "tl_r");
    const char *slot = chains ? tli_e_fmt(E, "%s[%s][tl_r / %lld]", acc, j, (long long)(np / CHAINS))
                              : tli_e_fmt(E, "%s[%s]", acc, j);
    const char *upd = tli_e_fmt(E, "%s = %s;", slot,
                                red_combine(E, op, slot, tli_e_fmt(E, "tl_f32(%s[tl_r])", sb->name), true));
    if (guard)
        tli_e_line(E, "if (%s) %s", guard, upd);
    else
        tli_e_line(E, "%s", upd);
    close_block(E);
    if (chains) {
        tli_e_line(E, "float tl_red[%lld];", (long long)nj);
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j)", (long long)nj);
        tli_e_line(E, "    tl_red[tl_j] = %s;",
                   red_combine(E, op, tli_e_fmt(E, "(%s)", red_combine(E, op, "tl_ch[tl_j][0]", "tl_ch[tl_j][1]", false)),
                               tli_e_fmt(E, "(%s)", red_combine(E, op, "tl_ch[tl_j][2]", "tl_ch[tl_j][3]", false)),
                               false));
    }
}

/* A reduction of a fragment: each thread's partials over its registers,
 * a butterfly of shuffles over the lanes that share a result, and (phase
 * 1 / 2, split by the reduce pass) one exchange through shared memory
 * among the warps that share one. */
static void emit_reduce_frag(emitter *E, const tli_snode *s)
{
    int32_t src = s->gemm[0], dst = s->gemm[1];
    const tli_bnode *sb = buf_of(E, src), *db = buf_of(E, dst);
    int op = s->a1 & TLI_REDUCE_OP_MASK, phase = s->x[TLI_X_RED_PHASE];
    unsigned lanes = (unsigned)s->x[TLI_X_RED_LANES], warps = (unsigned)s->x[TLI_X_RED_WARPS];
    int64_t nj = lay(E, dst)->per_thread, np = lay(E, src)->per_thread;
    int32_t scratch = s->x[TLI_X_RED_SCRATCH];
    int group = s->x[TLI_X_RED_GROUP];
    if (phase == 2) {
        /* When every lane of a warp holds the same elements (all 32 share
         * each one), lane l reads partial l % group and a butterfly over the
         * low lane bits combines them: 1 load and log2(group) shuffles where
         * each thread reading every partial takes `group` loads (a row of
         * 32768 over 32 warps: 11 instructions instead of 64). */
        bool by_lane = lanes == 31u && group <= 32;
        const char *what = s->a1 & TLI_REDUCE_FINAL ? tli_e_fmt(E, "tl_finalize_reducer %s", db->name)
                                                    : tli_e_fmt(E, "tl_reduce_%s %s -> %s", red_name(op), sb->name, db->name);
        tli_e_line(E, "{ // %s, phase 2: the partials of the %d warps that share each element%s", what, group,
                   by_lane ? ", one per lane, then shuffles" : "");
        E->indent++;
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) {", (long long)nj);
        E->indent++;
        const char *guard;
        const char *el = slice_elem(E, dst, "tl_j", &guard);
        const char *row = tli_e_fmt(E, "%s[(%s) * %d + ", buf_of(E, scratch)->name,
                                    guard ? tli_e_fmt(E, "(%s) ? %s : 0", guard, el) : el, group);
        if (by_lane) {
            tli_e_line(E, "float tl_v = %s(tl_lane & %d)];", row, group - 1);
            for (int b = 1; b < group; b *= 2)
                tli_e_line(E, "tl_v = %s;", red_combine(E, op, "tl_v", tli_e_fmt(E, "tl_shfl_xor(tl_v, %d)", b), false));
        } else {
            tli_e_line(E, "float tl_v = %s;", red_identity(op));
            tli_e_line(E, "#pragma unroll");
            tli_e_line(E, "for (int tl_w = 0; tl_w < %d; ++tl_w)", group);
            tli_e_line(E, "    tl_v = %s;", red_combine(E, op, "tl_v", tli_e_fmt(E, "%stl_w]", row), false));
        }
        red_store(E, s, "tl_j", "tl_v");
        close_block(E);
        close_block(E);
        return;
    }
    if (s->a1 & TLI_REDUCE_FINAL)
        finalize_partials(E, s, nj);
    else
        thread_partials(E, s, nj, np);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) {", (long long)nj);
    E->indent++;
    for (int bit = 0; bit < 5; bit++)
        if (lanes >> bit & 1)
            tli_e_line(E, "tl_red[tl_j] = %s;",
                       red_combine(E, op, "tl_red[tl_j]", tli_e_fmt(E, "tl_shfl_xor(tl_red[tl_j], %d)", 1 << bit), false));
    if (warps) {
        const char *g2;
        const char *el = slice_elem(E, dst, "tl_j", &g2);
        tli_e_line(E, "if ((tl_lane & 0x%x) == 0%s)", lanes, g2 ? tli_e_fmt(E, " && %s", g2) : "");
        tli_e_line(E, "    %s[(%s) * %d + %s] = tl_red[tl_j];", buf_of(E, scratch)->name, el, group, warp_rank(E, warps));
    } else {
        red_store(E, s, "tl_j", "tl_red[tl_j]");
    }
    close_block(E);
    close_block(E);
}

/* A reduction of a shared tile: each thread computes the results its
 * registers hold by walking the reduced dimension. */
static void emit_reduce_shared(emitter *E, const tli_snode *s)
{
    int32_t src = s->gemm[0], dst = s->gemm[1];
    const tli_bnode *sb = buf_of(E, src), *db = buf_of(E, dst);
    int op = s->a1 & TLI_REDUCE_OP_MASK, dim = s->rank;
    tli_e_line(E, "{ // tl_reduce_%s %s -> %s along dimension %d, from shared memory", red_name(op), sb->name, db->name, dim);
    E->indent++;
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) {", (long long)lay(E, dst)->per_thread);
    E->indent++;
    const char *di[TL_MAX_RANK], *guard;
    frag_coords(E, dst, "tl_j", di, &guard);
    if (guard) {
        tli_e_line(E, "if (!(%s))", guard);
        tli_e_line(E, "    continue;");
    }
    const char *si[TL_MAX_RANK];
    for (int d = 0, k = 0; d < sb->rank; d++)
        si[d] = d == dim ? "tl_k" : (db->rank == 1 && db->cshape[0] == 1 && sb->rank == 1 ? "0" : di[k++]);
    char *off, *ok;
    tli_e_smem_access(E, src, si, NULL, &off, &ok);
    tli_e_line(E, "float tl_v = %s;", red_identity(op));
    tli_e_line(E, "for (int tl_k = 0; tl_k < %lld; ++tl_k)", (long long)sb->cshape[dim]);
    tli_e_line(E, "    tl_v = %s;", red_combine(E, op, "tl_v", tli_e_fmt(E, "tl_f32(%s[%s])", sb->name, off), true));
    red_store(E, s, "tl_j", "tl_v");
    close_block(E);
    close_block(E);
}

/* The row-major flat index of fragment register r's element, and its guard. */
static const char *frag_flat(emitter *E, int32_t buf, const char *r, const char **guard)
{
    const tli_bnode *b = buf_of(E, buf);
    const char *idx[TL_MAX_RANK];
    frag_coords(E, buf, r, idx, guard);
    const char *flat = tli_e_fmt(E, "(%s)", idx[0]);
    for (int d = 1; d < b->rank; d++)
        flat = tli_e_fmt(E, "(%s * %lld + (%s))", flat, (long long)b->cshape[d], idx[d]);
    return flat;
}

/* tl_cluster_reduce_*: this block's elements into its half of the
 * exchange slots (one writer per element), a cluster barrier, then each
 * holder folds every block's slot in rank order (the reduce pass says why
 * two halves taken in turn need no second barrier). */
void tli_e_cluster_reduce(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    const tli_bnode *b = buf_of(E, s->buf), *slots = buf_of(E, s->x[TLI_X_RED_SCRATCH]);
    int op = s->a1 & TLI_REDUCE_OP_MASK, size = tli_cluster_size(E->ir);
    int halves = s->x[TLI_X_RED_GROUP] > 1 ? 2 : 1;
    int64_t nj = lay(E, s->buf)->per_thread, half = slots->cshape[0] / halves;
    unsigned vary = (unsigned)s->x[TLI_X_RED_LANES];
    tli_e_line(E, "{ // tl_cluster_reduce_%s %s across the %d blocks of the cluster", red_name(op), b->name, size);
    E->indent++;
    if (halves == 2)
        tli_e_line(E, "float *tl_slot = %s + tl_cluster_turn * %lld;", slots->name, (long long)half);
    else
        tli_e_line(E, "float *tl_slot = %s; // the kernel's one cluster reduction: one half", slots->name);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) {", (long long)nj);
    E->indent++;
    const char *guard;
    const char *el = frag_flat(E, s->buf, "tl_j", &guard);
    const char *who = vary ? tli_e_fmt(E, "(tl_tid & 0x%x) == 0", vary) : NULL;
    const char *cond = who && guard ? tli_e_fmt(E, "%s && %s", who, guard) : who ? who : guard;
    const char *put = tli_e_fmt(E, "tl_slot[%s] = tl_f32(%s[tl_j]);", el, b->name);
    if (cond)
        tli_e_line(E, "if (%s) %s", cond, put);
    else
        tli_e_line(E, "%s", put);
    close_block(E);
    tli_e_line(E, "tl_cluster_sync();");
    if (s->a0) { /* tl_cluster_reduce_sum_to: only the root reads the slots */
        tli_e_line(E, "if (tl_cluster_ctarank() == %d) {", s->a0 - 1);
        E->indent++;
    }
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %lld; ++tl_j) {", (long long)nj);
    E->indent++;
    el = frag_flat(E, s->buf, "tl_j", &guard);
    if (guard) {
        tli_e_line(E, "if (!(%s))", guard);
        tli_e_line(E, "    continue;");
    }
    tli_e_line(E, "float tl_v = %s;", red_identity(op));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (unsigned tl_r = 0; tl_r < %d; ++tl_r)", size);
    tli_e_line(E, "    tl_v = %s;", red_combine(E, op, "tl_v", tli_e_fmt(E, "tl_cluster_ld_f32(&tl_slot[%s], tl_r)", el), true));
    tli_e_line(E, "%s[tl_j] = %s;", b->name, convert(E, "tl_v", TL_F32, (tl_dtype)b->dtype));
    close_block(E);
    if (s->a0)
        close_block(E);
    if (halves == 2)
        tli_e_line(E, "tl_cluster_turn ^= 1;");
    close_block(E);
}

void tli_e_reduce(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    if (buf_of(E, s->gemm[0])->scope == B_FRAGMENT)
        emit_reduce_frag(E, s);
    else
        emit_reduce_shared(E, s);
}
