/*
 * emit_tile.c - CUDA for the tile operations on the sm_80 path (which also
 * runs on Hopper): shared tiles in dynamic shared memory with swizzled
 * 16-byte chunks, fragments as per-thread register arrays in the m16n8
 * accumulator layout, cp.async copies in a multi-stage pipeline, and
 * ldmatrix + mma.sync m16n8k16 for tl_gemm.
 */
#include "emit_internal.h"

#include "emit.h"

#include <stdlib.h>
#include <string.h>

int64_t tli_target_smem_limit(const char *target)
{
    int v = target ? atoi(target + 3) : 0;
    if (v >= 90)
        return 232448; /* 227 KiB: Hopper and later */
    if (v == 80 || v == 87)
        return 166912; /* 163 KiB: A100 */
    if (v >= 86)
        return 101376; /* 99 KiB */
    return 49152;
}

static const tli_bnode *buf_of(emitter *E, int32_t b) { return tli_B(E->ir, b); }

static int esize(const tli_bnode *b) { return (int)tl_dtype_size((tl_dtype)b->dtype); }

/* ------------------------------------------------------------ prologue */

static char *shape_text(emitter *E, const tli_bnode *b)
{
    tli_str s;
    tli_str_init(&s);
    for (int d = 0; d < b->rank; d++)
        tli_str_appendf(&s, "%s%lld", d ? "x" : "", (long long)b->cshape[d]);
    return tli_e_keep(E, tli_str_take(&s));
}

/* Blocks of one panel of `panel` block rows run one after another, so the
 * tiles of A and B they share stay in L2:
 *   bid = y * gridDim.x + x;  panel p = bid / (panel * gridDim.x);
 *   by = p * panel + (bid % (panel * gridDim.x)) % rows_in_panel, ... */
static void emit_block_remap(emitter *E)
{
    int p = E->ir->swizzle;
    tli_e_line(E, "// tl_use_swizzle(%d): blocks walk down panels of %d block rows", p, p);
    tli_e_line(E, "const long long tl_bid = (long long)blockIdx.y * gridDim.x + blockIdx.x;");
    tli_e_line(E, "const long long tl_panel = %dLL * gridDim.x;", p);
    tli_e_line(E, "const long long tl_row0 = tl_bid / tl_panel * %dLL;", p);
    tli_e_line(E, "const long long tl_rows = tl_min(%dLL, (long long)gridDim.y - tl_row0);", p);
    tli_e_line(E, "const long long tl_by = tl_row0 + tl_bid %% tl_panel %% tl_rows;");
    tli_e_line(E, "const long long tl_bx = tl_bid %% tl_panel / tl_rows;");
}

void tli_e_tile_prologue(emitter *E)
{
    const tli_ir *ir = E->ir;
    if (ir->swizzle && !ir->pingpong) /* ping-pong: per block, in its loop */
        emit_block_remap(E);
    if (E->plan.smem_bytes)
        tli_e_line(E, "extern __shared__ __align__(128) unsigned char tl_smem[];");
    bool warps = false;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = buf_of(E, i);
        const char *ct = tli_dtype_ctype((tl_dtype)b->dtype);
        if (b->scope == B_SHARED) {
            const tli_smem_info *si = &E->plan.smem[i];
            tli_e_line(E, "%s *const %s = (%s *)(tl_smem + %lld); // shared %s %s, %d stage%s", ct, b->name, ct,
                       (long long)si->offset, shape_text(E, b), tl_dtype_name((tl_dtype)b->dtype), si->stages,
                       si->stages > 1 ? "s" : "");
        } else if (b->scope == B_FRAGMENT) {
            const tli_frag_layout *fl = &E->plan.frag[i];
            if (fl->mma)
                tli_e_line(E, "%s %s[%lld]; // fragment %s: m16n8 accumulators, %dx%d warps of %lldx%lld", ct, b->name,
                           (long long)fl->per_thread, shape_text(E, b), fl->w.wgm, fl->w.wgn, (long long)fl->w.wm,
                           (long long)fl->w.wn);
            else
                tli_e_line(E, "%s %s[%lld]; // fragment %s: element e in thread e %% %d", ct, b->name,
                           (long long)fl->per_thread, shape_text(E, b), ir->threads);
            warps = warps || fl->mma;
        } else if (b->scope == B_LOCAL) {
            tli_e_line(E, "%s %s[%lld]; // local %s", ct, b->name, (long long)tli_buf_elems(b), shape_text(E, b));
        }
    }
    if (warps)
        tli_e_line(E, "const int tl_warp = tl_tid / 32, tl_lane = tl_tid %% 32;");
}

/* ------------------------------------------------------------ accesses */

static char *stage_offset(emitter *E, int32_t buf)
{
    const char *st = E->stage[buf];
    if (!st || strcmp(st, "0") == 0)
        return "";
    return tli_e_fmt(E, "(%s) * %lld + ", st, (long long)E->plan.smem[buf].stage_elems);
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
static char *flat_offset(emitter *E, const tli_bnode *b, const char *const *idx)
{
    tli_str s;
    tli_str_init(&s);
    int64_t st = 1;
    for (int d = b->rank - 1; d >= 0; d--) {
        if (st == 1)
            tli_str_appendf(&s, "%s(%s)", d < b->rank - 1 ? " + " : "", idx[d]);
        else
            tli_str_appendf(&s, " + (%s) * %lld", idx[d], (long long)st);
        st *= b->cshape[d];
    }
    return tli_e_keep(E, tli_str_take(&s));
}

/* The in-bounds test of an access to an on-chip buffer: one tl_in per
 * index that the range analysis cannot place inside the shape (ids: the
 * index expressions, or NULL when the indices are generated text); "true"
 * when none is needed. Every test left is a branch per element in a
 * fully unrolled fragment loop, and the registers to hold its address. */
static char *const_bounds(emitter *E, const tli_bnode *b, const char *const *idx, const int32_t *ids)
{
    tli_str s;
    tli_str_init(&s);
    for (int d = 0; d < b->rank; d++) {
        int64_t lo, hi;
        if (ids && tli_expr_range(E->ir, ids[d], &lo, &hi) && lo >= 0 && hi < b->cshape[d])
            continue;
        tli_str_appendf(&s, "%stl_in(%s, %lld)", s.len ? " && " : "", idx[d], (long long)b->cshape[d]);
    }
    if (!s.len)
        tli_str_append(&s, "true");
    return tli_e_keep(E, tli_str_take(&s));
}

void tli_e_smem_access(emitter *E, int32_t buf, const char *const *idx, const int32_t *ids, char **off, char **ok)
{
    const tli_bnode *b = buf_of(E, buf);
    const char *base = stage_offset(E, buf);
    if (E->plan.smem[buf].mn_major) /* [N / 64][K][64] */
        *off = tli_e_fmt(E, "%s(int)(%s) / 64 * %lld + tl_swz_off<64, %d>((int)(%s), (int)(%s) %% 64)", base, idx[1],
                         (long long)(64 * b->cshape[0]), esize(b), idx[0], idx[1]);
    else if (swizzled(b))
        *off = tli_e_fmt(E, "%stl_swz_off<%lld, %d>((int)(%s), (int)(%s))", base, (long long)b->cshape[1], esize(b),
                         idx[0], idx[1]);
    else
        *off = tli_e_fmt(E, "%s%s", base, flat_offset(E, b, idx));
    *ok = const_bounds(E, b, idx, ids);
}

static void fail_lowering(emitter *E, tl_status st, const char *msg)
{
    if (E->st == TL_OK) {
        E->st = st;
        tli_fmt(E->err, sizeof E->err, "%s", msg);
    }
}

/* A read of an on-chip buffer; a plain one where the indices are known to
 * be in range. */
static char *checked_read(emitter *E, const char *name, const char *off, const char *ok)
{
    return strcmp(ok, "true") == 0 ? tli_e_fmt(E, "%s[%s]", name, off) : tli_e_fmt(E, "tl_ld(%s + (%s), %s)", name, off, ok);
}

char *tli_e_tile_load(emitter *E, const tli_enode *n)
{
    const tli_bnode *b = buf_of(E, n->buf);
    const char *idx[TL_MAX_RANK];
    const int32_t *ids = &E->ir->pool.v[n->idx];
    for (int d = 0; d < b->rank; d++)
        idx[d] = tli_e_expr(E, ids[d]);
    if (b->scope == B_FRAGMENT) {
        if (!E->frag_loop)
            fail_lowering(E, TL_ERR_INTERNAL, "fragment read outside its layout loop");
        return tli_e_fmt(E, "%s[tl_r]", b->name);
    }
    if (b->scope == B_LOCAL)
        return checked_read(E, b->name, flat_offset(E, b, idx), const_bounds(E, b, idx, ids));
    char *off, *ok;
    tli_e_smem_access(E, n->buf, idx, ids, &off, &ok);
    return checked_read(E, b->name, off, ok);
}

/* "if (ok) " before a store, or nothing when ok is "true". */
static const char *guard_text(emitter *E, const char *ok)
{
    return strcmp(ok, "true") == 0 ? "" : tli_e_fmt(E, "if (%s) ", ok);
}

void tli_e_tile_store(emitter *E, const tli_snode *s, const char *val, const char *const *idx)
{
    const tli_bnode *b = buf_of(E, s->buf);
    const int32_t *ids = &E->ir->pool.v[s->idx];
    if (b->scope == B_FRAGMENT) {
        if (!E->frag_loop)
            fail_lowering(E, TL_ERR_INTERNAL, "fragment written outside its layout loop");
        tli_e_line(E, "%s[tl_r] = %s;", b->name, val);
        return;
    }
    if (b->scope == B_LOCAL) {
        tli_e_line(E, "%s%s[%s] = %s;", guard_text(E, const_bounds(E, b, idx, ids)), b->name, flat_offset(E, b, idx),
                   val);
        return;
    }
    char *off, *ok;
    tli_e_smem_access(E, s->buf, idx, ids, &off, &ok);
    if (E->inside_parallel)
        tli_e_line(E, "%s%s[%s] = %s;", guard_text(E, ok), b->name, off, val);
    else
        tli_e_line(E, "if (tl_tid == 0 && %s) %s[%s] = %s;", ok, b->name, off, val);
}

/* ------------------------------------------------------------ fragments */

/* Coordinates of register tl_r of fragment buf, into idx[0..rank). For the
 * m16n8 layout (rank 2): tile (mi, ni) = (r / (4 nt), r / 4 % nt), and in
 * it rows lane/4 (+8 for c2, c3), columns 2 (lane % 4) (+1 for c1, c3).
 * For the spread layout the flat element is r * threads + tid (*guard says
 * whether it can run past the end). */
static void frag_coords(emitter *E, int32_t buf, const char *r, const char **idx, const char **guard)
{
    const tli_bnode *b = buf_of(E, buf);
    const tli_frag_layout *fl = &E->plan.frag[buf];
    *guard = NULL;
    if (fl->mma && fl->w.wgmma) {
        const tli_warp_layout *w = &fl->w;
        idx[0] = tli_e_fmt(E, "(tl_warp / 4) * %lld + (%s) / %d * 64 + (tl_warp %% 4) * 16 + tl_lane / 4 + (%s) %% 4 / 2 * 8",
                           (long long)w->wm, r, 4 * w->nt, r);
        idx[1] = tli_e_fmt(E, "(%s) / 4 %% %d * 8 + tl_lane %% 4 * 2 + (%s) %% 2", r, w->nt, r);
        return;
    }
    if (fl->mma) {
        const tli_warp_layout *w = &fl->w;
        idx[0] = tli_e_fmt(E, "(tl_warp / %d) * %lld + (%s) / %d * 16 + tl_lane / 4 + (%s) %% 4 / 2 * 8", w->wgn,
                           (long long)w->wm, r, 4 * w->nt, r);
        idx[1] = tli_e_fmt(E, "(tl_warp %% %d) * %lld + (%s) / 4 %% %d * 8 + tl_lane %% 4 * 2 + (%s) %% 2", w->wgn,
                           (long long)w->wn, r, w->nt, r);
        return;
    }
    int64_t total = tli_buf_elems(b);
    const char *flat = tli_e_fmt(E, "((%s) * %d + tl_tid)", r, E->ir->threads);
    if (total % E->ir->threads)
        *guard = tli_e_fmt(E, "%s < %lld", flat, (long long)total);
    int64_t inner = 1;
    for (int d = b->rank - 1; d >= 0; d--) {
        idx[d] = d > 0 ? tli_e_fmt(E, "%s / %lld %% %lld", flat, (long long)inner, (long long)b->cshape[d])
                       : tli_e_fmt(E, "%s / %lld", flat, (long long)inner);
        inner *= b->cshape[d];
    }
}

/* The first fragment the statements touch (loads or stores), or 0. */
static int32_t find_fragment_expr(const tli_ir *ir, int32_t e)
{
    const tli_enode *n = tli_E(ir, e);
    if (n->op == E_LOAD && tli_B(ir, n->buf)->scope == B_FRAGMENT)
        return n->buf;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++) {
        int32_t f = find_fragment_expr(ir, n->a[i]);
        if (f)
            return f;
    }
    return 0;
}

static int32_t find_fragment(const tli_ir *ir, int32_t first)
{
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        int32_t f = 0;
        if (n->op == S_STORE)
            f = tli_B(ir, n->buf)->scope == B_FRAGMENT ? n->buf : find_fragment_expr(ir, n->value);
        else if (n->op == S_IF)
            f = find_fragment_expr(ir, n->a0);
        if (!f)
            f = find_fragment(ir, n->body);
        if (!f)
            f = find_fragment(ir, n->orelse);
        if (f)
            return f;
    }
    return 0;
}

/*   #pragma unroll
 *   for (int tl_r = 0; tl_r < 64; ++tl_r) { const long long i7_0 = row, i7_1 = col; body }  */
bool tli_e_frag_parallel(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int32_t f = find_fragment(E->ir, s->body);
    if (!f)
        return false;
    const tli_bnode *b = buf_of(E, f);
    int64_t count = E->plan.frag[f].per_thread;
    tli_e_line(E, "{ // tl_parallel over fragment %s (%s): %lld elements per thread, in registers", b->name,
               shape_text(E, b), (long long)count);
    E->indent++;
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) {", (long long)count);
    E->indent++;
    const char *idx[TL_MAX_RANK], *guard;
    frag_coords(E, f, "tl_r", idx, &guard);
    for (int d = 0; d < s->rank; d++)
        tli_e_line(E, "const long long i%d_%d = %s;", sid, d, idx[d]);
    if (guard) {
        tli_e_line(E, "if (%s) {", guard);
        E->indent++;
    }
    E->frag_loop = sid;
    E->inside_parallel = true;
    tli_e_stmts(E, s->body);
    E->inside_parallel = false;
    E->frag_loop = 0;
    if (guard) {
        E->indent--;
        tli_e_line(E, "}");
    }
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
    return true;
}

void tli_e_fill(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    const tli_bnode *b = buf_of(E, s->buf);
    const char *ct = tli_dtype_ctype((tl_dtype)b->dtype);
    const char *v = s->value ? tli_e_single(E, s->value) : tli_e_fmt(E, "tl_zero<%s>()", ct);
    if (b->scope == B_SHARED) {
        tli_e_line(E, "for (int tl_e = tl_tid; tl_e < %lld; tl_e += %d) %s[%stl_e] = %s;", (long long)tli_buf_elems(b),
                   E->ir->threads, b->name, stage_offset(E, s->buf), v);
        return;
    }
    int64_t n = b->scope == B_FRAGMENT ? E->plan.frag[s->buf].per_thread : tli_buf_elems(b);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; ++tl_r) %s[tl_r] = %s;", (long long)n, b->name, v);
}

/* --------------------------------------------------------------- copies */

/* Index texts of element `local` (texts per axis) of the tile of global
 * tensor `region` with extents ext: origin idx[d] * ext[d] plus local. */
static void tile_global_idx(emitter *E, int32_t region, const int64_t *ext, int rank, const char *const *local,
                            const char **out)
{
    const tli_rnode *r = tli_R(E->ir, region);
    for (int d = 0; d < rank; d++)
        out[d] = tli_e_fmt(E, "(%s) * %lldLL + (%s)", tli_e_single(E, r->idx[d]), (long long)ext[d], local[d]);
}

/* Value text converted from type `from` to `to` (through f32). */
static const char *convert(emitter *E, const char *v, tl_dtype from, tl_dtype to)
{
    if (from == to)
        return v;
    return tli_e_fmt(E, "tl_conv<%s>(tl_f32(%s))", tli_dtype_ctype(to), v);
}

/*   for (int tl_e = tl_tid; tl_e < ELEMS; tl_e += THREADS) {
 *       const int tl_l1 = tl_e / 1 % C1; const int tl_l0 = tl_e / C1 % C0;
 * opens an element-by-element loop over tile t (closed by the caller);
 * loc gets the element's tile indices, gi its global ones (tl_o<d> + loc). */
static void open_element_loop(emitter *E, const tli_bnode *t, const char **loc, const char **gi)
{
    tli_e_line(E, "for (int tl_e = tl_tid; tl_e < %lld; tl_e += %d) {", (long long)tli_buf_elems(t), E->ir->threads);
    E->indent++;
    int64_t inner = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        tli_e_line(E, "const int tl_l%d = tl_e / %lld %% %lld;", d, (long long)inner, (long long)t->cshape[d]);
        inner *= t->cshape[d];
    }
    for (int d = 0; d < t->rank; d++) {
        loc[d] = tli_e_fmt(E, "tl_l%d", d);
        gi[d] = tli_e_fmt(E, "tl_o%d + tl_l%d", d, d);
    }
}

/* Global tile -> shared: 16-byte cp.async per chunk when rows are 16-byte
 * aligned (checked at run time, uniformly), element by element otherwise. */
static void emit_copy_g2s(emitter *E, const tli_snode *s, bool in_pipeline)
{
    const tli_ir *ir = E->ir;
    int32_t gb = tli_copy_buf(ir, s->a0), sb = tli_copy_buf(ir, s->a1);
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, sb);
    int T = ir->threads, per_chunk = 16 / esize(t);
    int64_t elems = tli_buf_elems(t);
    const char *zero[TL_MAX_RANK] = {"0", "0", "0", "0"};
    const char *origin[TL_MAX_RANK];
    tile_global_idx(E, s->a0, t->cshape, t->rank, zero, origin);
    tli_e_line(E, "{ // tl_copy %s tile (%s) -> %s", g->name, shape_text(E, t), t->name);
    E->indent++;
    for (int d = 0; d < t->rank; d++)
        tli_e_line(E, "const long long tl_o%d = %s;", d, origin[d]);
    int last = t->rank - 1;
    bool chunkable = g->dtype == t->dtype && t->cshape[last] % per_chunk == 0 && t->rank <= 2;
    if (chunkable) {
        int64_t row_chunks = t->cshape[last] / per_chunk, chunks = elems / per_chunk;
        tli_str cond;
        tli_str_init(&cond);
        tli_str_appendf(&cond, "tl_aligned<16>(%s) && %s_d%d %% %d == 0", g->name, g->name, last, per_chunk);
        if (t->rank == 2)
            tli_str_appendf(&cond, " && %s_s0 %% %d == 0", g->name, per_chunk);
        if (g->explicit_strides)
            tli_str_appendf(&cond, " && %s_s%d == 1", g->name, last);
        tli_e_line(E, "if (%s) {", cond.data);
        tli_str_free(&cond);
        E->indent++;
        tli_e_line(E, "#pragma unroll");
        tli_e_line(E, "for (int tl_q = tl_tid; tl_q < %lld; tl_q += %d) { // 16-byte chunks", (long long)chunks, T);
        E->indent++;
        const char *loc[2];
        if (t->rank == 2) {
            loc[0] = tli_e_fmt(E, "tl_q / %lld", (long long)row_chunks);
            loc[1] = tli_e_fmt(E, "tl_q %% %lld * %d", (long long)row_chunks, per_chunk);
        } else {
            loc[0] = tli_e_fmt(E, "tl_q * %d", per_chunk);
        }
        const char *gi[2];
        for (int d = 0; d <= last; d++) {
            tli_e_line(E, "const int tl_l%d = %s;", d, loc[d]);
            gi[d] = tli_e_fmt(E, "tl_o%d + tl_l%d", d, d);
            loc[d] = tli_e_fmt(E, "tl_l%d", d);
        }
        char *goff, *gok, *soff, *sok;
        tli_e_global_access(E, gb, gi, &goff, &gok);
        tli_e_smem_access(E, sb, loc, NULL, &soff, &sok);
        tli_e_line(E, "tl_cp_async16(%s + (%s), %s + (%s), %s);", t->name, soff, g->name, goff, gok);
        E->indent--;
        tli_e_line(E, "}");
        if (!in_pipeline)
            tli_e_line(E, "tl_cp_async_commit(); // waited for before %s is next touched", t->name);
        E->indent--;
        tli_e_line(E, "} else {");
        E->indent++;
    }
    const char *loc[TL_MAX_RANK], *gi[TL_MAX_RANK];
    open_element_loop(E, t, loc, gi);
    char *goff, *gok, *soff, *sok;
    tli_e_global_access(E, gb, gi, &goff, &gok);
    tli_e_smem_access(E, sb, loc, NULL, &soff, &sok);
    const char *v = convert(E, tli_e_fmt(E, "tl_ld(%s + (%s), %s)", g->name, goff, gok), (tl_dtype)g->dtype,
                            (tl_dtype)t->dtype);
    tli_e_line(E, "%s[%s] = %s;", t->name, soff, v);
    E->indent--;
    tli_e_line(E, "}");
    if (chunkable) {
        E->indent--;
        tli_e_line(E, "}");
    }
    E->indent--;
    tli_e_line(E, "}");
}

/* Shared -> global tile, element by element over the block's threads. */
static void emit_copy_s2g(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), gb = tli_copy_buf(ir, s->a1);
    const tli_bnode *t = buf_of(E, sb), *g = buf_of(E, gb);
    const char *zero[TL_MAX_RANK] = {"0", "0", "0", "0"}, *origin[TL_MAX_RANK];
    tile_global_idx(E, s->a1, t->cshape, t->rank, zero, origin);
    tli_e_line(E, "{ // tl_copy %s -> %s tile (%s)", t->name, g->name, shape_text(E, t));
    E->indent++;
    for (int d = 0; d < t->rank; d++)
        tli_e_line(E, "const long long tl_o%d = %s;", d, origin[d]);
    const char *loc[TL_MAX_RANK], *gi[TL_MAX_RANK];
    open_element_loop(E, t, loc, gi);
    char *goff, *gok, *soff, *sok;
    tli_e_global_access(E, gb, gi, &goff, &gok);
    tli_e_smem_access(E, sb, loc, NULL, &soff, &sok);
    tli_e_line(E, "if (%s) %s[%s] = %s;", gok, g->name, goff,
               convert(E, tli_e_fmt(E, "%s[%s]", t->name, soff), (tl_dtype)t->dtype, (tl_dtype)g->dtype));
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

/* tl_v: accumulator registers tl_r and tl_r + 1 of fragment f (adjacent
 * columns) converted to o's type. */
static void emit_pair_vec(emitter *E, const tli_bnode *f, const tli_bnode *o)
{
    tli_e_line(E, "tl_vec<%s, 2> tl_v;", tli_dtype_ctype((tl_dtype)o->dtype));
    tli_e_line(E, "tl_v.e[0] = %s;", convert(E, tli_e_fmt(E, "%s[tl_r]", f->name), TL_F32, (tl_dtype)o->dtype));
    tli_e_line(E, "tl_v.e[1] = %s;", convert(E, tli_e_fmt(E, "%s[tl_r + 1]", f->name), TL_F32, (tl_dtype)o->dtype));
}

/* The fast path of an accumulator -> global store, for a tile wholly
 * inside the tensor with a unit inner stride and an even row stride: every
 * pair of neighbouring elements is one aligned 4- or 8-byte store at a
 * constant offset from one of the thread's row pointers, with no tests.
 * Emits "if (interior) { ... } else" and returns; the masked loop follows
 * as the else branch. Without it each pair cost ~30 instructions of 64-bit
 * index arithmetic, bounds and alignment tests (a tenth of a 4096^3 GEMM). */
static void emit_frag_pairs_interior(emitter *E, const tli_bnode *f, const tli_bnode *o, int32_t oreg, int32_t fb)
{
    const tli_frag_layout *fl = &E->plan.frag[fb];
    const char *zero[2] = {"0", "0"}, *origin[2];
    tile_global_idx(E, oreg, f->cshape, 2, zero, origin);
    tli_e_line(E, "const long long tl_t0 = %s, tl_t1 = %s;", origin[0], origin[1]);
    const char *oct = tli_dtype_ctype((tl_dtype)o->dtype);
    /* offsets within the tile in 32 bits: 64-bit ones cost a register pair
     * per store, which pushed the kernel into spills */
    tli_e_line(E, "if (tl_t0 + %lldLL <= %s_d0 && tl_t1 + %lldLL <= %s_d1 && %s_s0 %% 2 == 0%s &&",
               (long long)f->cshape[0], o->name, (long long)f->cshape[1], o->name, o->name,
               o->explicit_strides ? tli_e_fmt(E, " && %s_s1 == 1", o->name) : "");
    tli_e_line(E, "    %s_s0 <= 2147483647LL / %lld &&", o->name, (long long)(f->cshape[0] + 1));
    tli_e_line(E, "    tl_aligned<%d>(%s)) { // the whole tile inside: unmasked pair stores", 2 * esize(o), o->name);
    E->indent++;
    tli_e_line(E, "%s *const tl_cb = %s + (tl_t0 * %s_s0 + tl_t1);", oct, o->name, o->name);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_r = 0; tl_r < %lld; tl_r += 2) {", (long long)fl->per_thread);
    E->indent++;
    const char *loc[TL_MAX_RANK], *guard;
    frag_coords(E, fb, "tl_r", loc, &guard);
    tli_e_line(E, "const int tl_l0 = %s, tl_l1 = %s;", loc[0], loc[1]);
    emit_pair_vec(E, f, o);
    tli_e_line(E, "tl_st_vec(tl_cb + (tl_l0 * (int)%s_s0 + tl_l1), tl_v);", o->name);
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "} else // masked: the tile crosses an edge, or the pointer or stride is odd");
}

/* Fragment <-> global tile or shared, register by register. Accumulator
 * pairs (c0, c1) are adjacent columns: one 2-element store to global when
 * both are inside and aligned. */
static void emit_copy_frag(emitter *E, const tli_snode *s)
{
    const tli_ir *ir = E->ir;
    int32_t sb = tli_copy_buf(ir, s->a0), db = tli_copy_buf(ir, s->a1);
    bool from_frag = buf_of(E, sb)->scope == B_FRAGMENT;
    int32_t fb = from_frag ? sb : db, ob = from_frag ? db : sb, oreg = from_frag ? s->a1 : s->a0;
    const tli_bnode *f = buf_of(E, fb), *o = buf_of(E, ob);
    const tli_frag_layout *fl = &E->plan.frag[fb];
    bool pairs = from_frag && fl->mma && o->scope == B_GLOBAL;
    tli_e_line(E, "{ // tl_copy %s -> %s (%s)", buf_of(E, sb)->name, buf_of(E, db)->name, shape_text(E, f));
    E->indent++;
    if (pairs && f->rank == 2 && tli_R(ir, oreg)->tiled)
        emit_frag_pairs_interior(E, f, o, oreg, fb);
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
        emit_pair_vec(E, f, o);
        tli_e_line(E, "tl_st_chunk(%s + (%s), %s, %s, %s_d1, tl_in(%s, %s_d0), tl_v);", o->name, off,
                   o->explicit_strides ? tli_e_fmt(E, "%s_s1", o->name) : "1", oi[1], o->name, oi[0], o->name);
    } else if (from_frag) {
        const char *v = convert(E, tli_e_fmt(E, "%s[tl_r]", f->name), (tl_dtype)f->dtype, (tl_dtype)o->dtype);
        tli_e_line(E, "if (%s) %s[%s] = %s;", ok, o->name, off, v);
    } else {
        const char *v = tli_e_fmt(E, "tl_ld(%s + (%s), %s)", o->name, off, ok);
        tli_e_line(E, "%s[tl_r] = %s;", f->name, convert(E, v, (tl_dtype)o->dtype, (tl_dtype)f->dtype));
    }
    if (guard) {
        E->indent--;
        tli_e_line(E, "}");
    }
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_copy(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    int sa = buf_of(E, tli_copy_buf(E->ir, s->a0))->scope, da = buf_of(E, tli_copy_buf(E->ir, s->a1))->scope;
    if (sa == B_GLOBAL && da == B_SHARED) {
        if (E->npending == TLI_MAX_PENDING)
            tli_e_flush_pending(E, 0);
        emit_copy_g2s(E, s, false);
        E->pending[E->npending++] = tli_copy_buf(E->ir, s->a1);
    } else if (sa == B_SHARED && da == B_GLOBAL)
        emit_copy_s2g(E, s);
    else
        emit_copy_frag(E, s);
}

void tli_e_flush_pending(emitter *E, int from)
{
    tli_e_line(E, "tl_cp_async_wait<0>();");
    if (E->plan.wgmma) /* wgmma and TMA read shared memory through the async proxy */
        tli_e_line(E, "tl_fence_proxy_async();");
    tli_e_sync(E);
    E->npending = from;
}

/* ----------------------------------------------------------------- gemm */

/* One k16 step for the warp: A fragments by ldmatrix.x4 (rows of A), B
 * fragments by ldmatrix.x4.trans (B as [K, N]) or ldmatrix.x4 (B as [N, K]),
 * two n8 tiles per load, then mt x nt mma.sync m16n8k16. */
/* The device function for one wgmma m64nNk16 with f32 accumulators:
 *   wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 {d0..d(N/2-1)}, da, db, 1, 1, 1, 0, 0; */
static const char *wgmma_helper(emitter *E, int n, tl_dtype dt, bool trans_b)
{
    const char *ty = dt == TL_F16 ? "f16" : "bf16";
    const char *name = tli_e_fmt(E, "tl_wgmma_m64n%dk16_%s%s", n, ty, trans_b ? "_tb" : "");
    bool *done = &E->wgmma_n[(dt == TL_F16) * 2 + trans_b][n / 8];
    if (*done)
        return name;
    *done = true;
    tli_str *h = &E->helpers;
    int regs = n / 2;
    tli_str_appendf(h, "// One warpgroup-wide m64n%dk16 MMA from shared memory (descriptors da, db).\n", n);
    tli_str_appendf(h, "__device__ __forceinline__ void %s(float *d, unsigned long long da, unsigned long long db)\n{\n",
                    name);
    tli_str_appendf(h, "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n", regs + 2);
    tli_str_appendf(h, "        \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {\"\n        \"", n, ty, ty);
    for (int i = 0; i < regs; i++)
        tli_str_appendf(h, "%%%d%s", i, i + 1 < regs ? (i % 16 == 15 ? ", \"\n        \"" : ", ") : "");
    tli_str_appendf(h, "}, %%%d, %%%d, p, 1, 1, 0, %d;\\n}\\n\"\n        : ", regs, regs + 1, trans_b ? 1 : 0);
    for (int i = 0; i < regs; i++)
        tli_str_appendf(h, "\"+f\"(d[%d])%s", i, i + 1 < regs ? (i % 8 == 7 ? ",\n          " : ", ") : "");
    tli_str_appendf(h, "\n        : \"l\"(da), \"l\"(db), \"r\"(1));\n}\n\n");
    return name;
}

/* sm_90a: each warpgroup runs its m64 tiles of C with wgmma, A and B read
 * straight from the swizzled shared tiles through descriptors; four k16
 * steps per 64-wide K tile, committed as one group and waited for. */
void tli_e_gemm_wgmma(emitter *E, const tli_snode *s, int wait)
{
    const tli_bnode *a = buf_of(E, s->gemm[0]), *b = buf_of(E, s->gemm[1]), *c = buf_of(E, s->gemm[2]);
    const tli_warp_layout *w = &E->plan.frag[s->gemm[2]].w;
    bool mn = E->plan.smem[s->gemm[1]].mn_major;
    const char *fn = wgmma_helper(E, (int)w->wn, (tl_dtype)a->dtype, mn);
    const char *et = tli_dtype_ctype((tl_dtype)a->dtype);
    tli_e_line(E, "{ // tl_gemm %s += %s * %s%s: %d warpgroup%s x %d m64n%lldk16 wgmma from shared memory", c->name,
               a->name, b->name, mn ? "" : "^T", w->wgm, w->wgm > 1 ? "s" : "", w->mt, (long long)w->wn);
    E->indent++;
    tli_e_line(E, "const %s *const tl_A = %s + %s(tl_warp / 4) * %lld;", et, a->name, stage_offset(E, s->gemm[0]),
               (long long)(w->wm * a->cshape[1]));
    tli_e_line(E, "const %s *const tl_B = %s + %s0;", et, b->name, stage_offset(E, s->gemm[1]));
    tli_e_line(E, "tl_wgmma_fence();");
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_k = 0; tl_k < 64; tl_k += 16) {");
    E->indent++;
    if (mn) /* 16 K rows of 128 bytes per step; 64-column blocks K * 128 bytes apart */
        tli_e_line(E, "const unsigned long long tl_db = tl_wgmma_desc_mn_sw128(tl_B + tl_k * 64, %lld);",
                   (long long)(b->cshape[0] * 128));
    else
        tli_e_line(E, "const unsigned long long tl_db = tl_wgmma_desc_sw128(tl_B + tl_k);");
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < %d; ++tl_i)", w->mt);
    tli_e_line(E, "    %s(%s + tl_i * %lld, tl_wgmma_desc_sw128(tl_A + tl_i * %lld + tl_k), tl_db);", fn, c->name,
               (long long)(w->wn / 2), (long long)(64 * a->cshape[1]));
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_wgmma_commit();");
    if (wait >= 0)
        tli_e_line(E, "tl_wgmma_wait<%d>();", wait);
    E->indent--;
    tli_e_line(E, "}");
}

void tli_e_gemm(emitter *E, int32_t sid)
{
    const tli_snode *s = tli_S(E->ir, sid);
    if (E->plan.frag[s->gemm[2]].w.wgmma) {
        tli_e_gemm_wgmma(E, s, 0);
        return;
    }
    const tli_bnode *a = buf_of(E, s->gemm[0]), *b = buf_of(E, s->gemm[1]), *c = buf_of(E, s->gemm[2]);
    const tli_warp_layout *w = &E->plan.frag[s->gemm[2]].w;
    bool tb = s->a1 & TL_GEMM_TRANS_B;
    int64_t K = a->cshape[1];
    const char *et = tli_dtype_ctype((tl_dtype)a->dtype);
    tli_e_line(E, "{ // tl_gemm %s += %s * %s%s: %dx%d warps, warp tile %lldx%lld = %dx%d mma.m16n8k16", c->name,
               a->name, b->name, tb ? "^T" : "", w->wgm, w->wgn, (long long)w->wm, (long long)w->wn, w->mt, w->nt);
    E->indent++;
    tli_e_line(E, "const %s *const tl_A = %s + %s0;", et, a->name, stage_offset(E, s->gemm[0]));
    tli_e_line(E, "const %s *const tl_B = %s + %s0;", et, b->name, stage_offset(E, s->gemm[1]));
    tli_e_line(E, "const int tl_m0 = (tl_warp / %d) * %lld, tl_n0 = (tl_warp %% %d) * %lld;", w->wgn, (long long)w->wm,
               w->wgn, (long long)w->wn);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_k = 0; tl_k < %lld; tl_k += 16) {", (long long)K);
    E->indent++;
    tli_e_line(E, "unsigned tl_a[%d][4], tl_b[%d][2];", w->mt, w->nt);
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < %d; ++tl_i)", w->mt);
    tli_e_line(E, "    tl_ldmatrix_x4(tl_a[tl_i], tl_A + tl_swz_off<%lld, %d>(tl_m0 + tl_i * 16 + tl_lane %% 16, "
                  "tl_k + tl_lane / 16 * 8));",
               (long long)a->cshape[1], esize(a));
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_j = 0; tl_j < %d; tl_j += 2) {", w->nt);
    E->indent++;
    tli_e_line(E, "unsigned tl_r4[4];");
    if (tb)
        tli_e_line(E, "tl_ldmatrix_x4(tl_r4, tl_B + tl_swz_off<%lld, %d>(tl_n0 + tl_j * 8 + tl_lane %% 8 + tl_lane / 16 "
                      "* 8, tl_k + tl_lane / 8 %% 2 * 8));",
                   (long long)b->cshape[1], esize(b));
    else
        tli_e_line(E, "tl_ldmatrix_x4_trans(tl_r4, tl_B + tl_swz_off<%lld, %d>(tl_k + tl_lane %% 16, tl_n0 + tl_j * 8 "
                      "+ tl_lane / 16 * 8));",
                   (long long)b->cshape[1], esize(b));
    tli_e_line(E, "tl_b[tl_j][0] = tl_r4[0]; tl_b[tl_j][1] = tl_r4[1];");
    tli_e_line(E, "tl_b[tl_j + 1][0] = tl_r4[2]; tl_b[tl_j + 1][1] = tl_r4[3];");
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_i = 0; tl_i < %d; ++tl_i)", w->mt);
    tli_e_line(E, "    #pragma unroll");
    tli_e_line(E, "    for (int tl_j = 0; tl_j < %d; ++tl_j)", w->nt);
    tli_e_line(E, "        tl_mma_16816<%s>(%s + (tl_i * %d + tl_j) * 4, tl_a[tl_i], tl_b[tl_j]);", et, c->name, w->nt);
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
}

/* ------------------------------------------------------------ pipeline */

/* Producers (the leading global -> shared copies) for iteration `it`
 * (text) into stage `stage` (text). */
static void emit_producers(emitter *E, const tli_snode *loop, int32_t first_consumer, const char *it,
                           const char *stage)
{
    E->var_text[loop->vars[0]] = (char *)it;
    for (int32_t c = loop->body; c != first_consumer; c = tli_S(E->ir, c)->next) {
        int32_t sb = tli_copy_buf(E->ir, tli_S(E->ir, c)->a1);
        E->stage[sb] = stage;
        emit_copy_g2s(E, tli_S(E->ir, c), true);
    }
}

/*   for (tl_s = 0; tl_s < count; ++tl_s) { if (tl_s < n) copies of iteration tl_s; commit }
 * the prologue of a cp.async pipeline: `count` iterations in flight. */
static void emit_cp_async_prologue(emitter *E, int32_t sid, int32_t first_consumer, int count)
{
    tli_e_line(E, "#pragma unroll");
    tli_e_line(E, "for (int tl_s = 0; tl_s < %d; ++tl_s) {", count);
    E->indent++;
    tli_e_line(E, "if (tl_s < tl_n%d) {", sid);
    E->indent++;
    emit_producers(E, tli_S(E->ir, sid), first_consumer, "tl_s", "tl_s");
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_cp_async_commit();");
    E->indent--;
    tli_e_line(E, "}");
}

/* The stage the consumers read: the producers' destination buffers are
 * addressed at `stage` (NULL: back to stage 0). */
void tli_e_consumer_stage(emitter *E, const tli_snode *loop, int32_t first_consumer, const char *stage)
{
    for (int32_t c = loop->body; c != first_consumer; c = tli_S(E->ir, c)->next)
        E->stage[tli_copy_buf(E->ir, tli_S(E->ir, c)->a1)] = stage;
}

/* The TMA descriptor index for a box of global buffer gb (added if new). */
static int tma_map(emitter *E, int32_t gb, int64_t inner, int64_t outer)
{
    tli_tma_list *l = E->tma;
    for (int i = 0; i < l->n; i++)
        if (l->map[i].buf == gb && l->map[i].box_inner == inner && l->map[i].box_outer == outer)
            return i;
    if (l->n == TLI_MAX_TMA)
        return -1;
    l->map[l->n] = (tli_tma_map){gb, inner, outer};
    return l->n++;
}

/* Whether producer copy c can be one or more TMA boxes: a 2-D tile of the
 * same element type into a 128-byte-row buffer (K-major, 64 16-bit
 * columns) or an MN-major one; boxes of at most 256 rows. */
bool tli_e_tma_copy_ok(emitter *E, int32_t c)
{
    const tli_snode *n = tli_S(E->ir, c);
    int32_t gb = tli_copy_buf(E->ir, n->a0), sb = tli_copy_buf(E->ir, n->a1);
    const tli_bnode *g = buf_of(E, gb), *t = buf_of(E, sb);
    if (g->rank != 2 || t->rank != 2 || g->dtype != t->dtype || esize(t) != 2 || g->explicit_strides)
        return false;
    if (E->plan.smem[sb].mn_major)
        return t->cshape[0] <= 256 && t->cshape[1] % 64 == 0;
    return t->cshape[1] == 64 && t->cshape[0] <= 256;
}

/* TMA loads of the producers for iteration `it` into stage `stage` (texts),
 * completing on barrier `bar`; `bytes` gets the stage's size. */
void tli_e_tma_stage(emitter *E, const tli_snode *loop, int32_t first_consumer, const char *it, const char *stage,
                     const char *bar)
{
    const tli_ir *ir = E->ir;
    int64_t bytes = 0;
    for (int32_t c = loop->body; c != first_consumer; c = tli_S(ir, c)->next) {
        const tli_bnode *t = buf_of(E, tli_copy_buf(ir, tli_S(ir, c)->a1));
        bytes += tli_buf_elems(t) * esize(t);
    }
    tli_e_line(E, "tl_mbar_expect(%s, %lld);", bar, (long long)bytes);
    E->var_text[loop->vars[0]] = (char *)it;
    for (int32_t c = loop->body; c != first_consumer; c = tli_S(ir, c)->next) {
        const tli_snode *n = tli_S(ir, c);
        int32_t gb = tli_copy_buf(ir, n->a0), sb = tli_copy_buf(ir, n->a1);
        const tli_bnode *t = buf_of(E, sb);
        const char *zero[2] = {"0", "0"}, *origin[2];
        tile_global_idx(E, n->a0, t->cshape, 2, zero, origin);
        bool mn = E->plan.smem[sb].mn_major;
        int64_t inner = mn ? 64 : t->cshape[1], boxes = mn ? t->cshape[1] / 64 : 1;
        int m = tma_map(E, gb, inner, t->cshape[0]);
        for (int64_t j = 0; j < boxes; j++)
            tli_e_line(E, "tl_tma_load_2d(%s + (%s) * %lld + %lld, &tl_map%d, (int)(%s) + %lld, (int)(%s), %s);", t->name,
                       stage, (long long)E->plan.smem[sb].stage_elems, (long long)(j * inner * t->cshape[0]), m,
                       origin[1], (long long)(j * inner), origin[0], bar);
    }
    E->var_text[loop->vars[0]] = NULL;
}

/* The wgmma pipeline fed by TMA: one thread issues the bulk tensor copies,
 * per-stage mbarriers say when a stage is full (transaction bytes) and when
 * every warp is done with it, so the loop takes no block barrier:
 *   for (ko...) { wait full[ko % S]; wgmma on it, commit; wait until the
 *                 wgmma of ko - 1 is done; each warp marks stage (ko - 1) % S
 *                 empty; thread 0 waits for it empty and refills it with
 *                 the tiles of ko + S - 1 } */
static bool emit_pipelined_tma(emitter *E, int32_t sid, int32_t first_consumer)
{
    const tli_ir *ir = E->ir;
    const tli_snode *s = tli_S(ir, sid);
    const tli_snode *g = tli_S(ir, first_consumer);
    int S = s->a1;
    int copies = 0;
    for (int32_t c = s->body; c != first_consumer; c = tli_S(ir, c)->next, copies++)
        if (!tli_e_tma_copy_ok(E, c))
            return false;
    if (E->tma->n + copies > TLI_MAX_TMA) /* out of descriptor slots: cp.async only */
        return false;
    const char *v = tli_e_fmt(E, "i%d_0", sid);
    tli_e_line(E, "if (tl_tma) { // tl_pipelined: %d stages fed by TMA, mbarriers instead of block barriers", S);
    E->indent++;
    tli_e_line(E, "unsigned long long *const tl_full = (unsigned long long *)(tl_smem + %lld);",
               (long long)E->plan.barriers);
    tli_e_line(E, "unsigned long long *const tl_empty = tl_full + %d;", S);
    tli_e_line(E, "if (tl_tid == 0) {");
    E->indent++;
    tli_e_line(E, "for (int tl_s = 0; tl_s < %d; ++tl_s) {", S);
    tli_e_line(E, "    tl_mbar_init(&tl_full[tl_s], 1);");
    tli_e_line(E, "    tl_mbar_init(&tl_empty[tl_s], %d);", ir->threads / 32);
    tli_e_line(E, "}");
    tli_e_line(E, "tl_mbar_init_fence();");
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "__syncthreads();");
    tli_e_line(E, "const long long tl_n%d = %s;", sid, tli_e_single(E, s->a0));
    tli_e_line(E, "if (tl_tid == 0)");
    tli_e_line(E, "    for (int tl_s = 0; tl_s < %d && tl_s < tl_n%d; ++tl_s) {", S - 1, sid);
    E->indent += 2;
    tli_e_tma_stage(E, s, first_consumer, "tl_s", "tl_s", "&tl_full[tl_s]");
    E->indent -= 2;
    tli_e_line(E, "    }");
    tli_e_line(E, "for (long long %s = 0; %s < tl_n%d; ++%s) {", v, v, sid, v);
    E->indent++;
    tli_e_line(E, "tl_mbar_wait(&tl_full[%s %% %d], (unsigned)(%s / %d) & 1);", v, S, v, S);
    tli_e_consumer_stage(E, s, first_consumer, tli_e_fmt(E, "%s %% %d", v, S));
    tli_e_gemm_wgmma(E, g, 1);
    tli_e_consumer_stage(E, s, first_consumer, NULL);
    tli_e_line(E, "if (%s > 0 && tl_lane == 0)", v);
    tli_e_line(E, "    tl_mbar_arrive(&tl_empty[(%s - 1) %% %d]);", v, S);
    tli_e_line(E, "if (tl_tid == 0 && %s + %d < tl_n%d) {", v, S - 1, sid);
    E->indent++;
    tli_e_line(E, "const long long tl_it = %s + %d;", v, S - 1);
    tli_e_line(E, "const int tl_sn = (int)(tl_it %% %d);", S);
    tli_e_line(E, "if (tl_it >= %d)", S);
    tli_e_line(E, "    tl_mbar_wait(&tl_empty[tl_sn], (unsigned)((tl_it - %d) / %d) & 1);", S, S);
    tli_e_tma_stage(E, s, first_consumer, "tl_it", "tl_sn", "&tl_full[tl_sn]");
    E->indent--;
    tli_e_line(E, "}");
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_wgmma_wait<0>();");
    E->indent--;
    tli_e_line(E, "} else");
    return true;
}

/* The pipeline of a loop whose compute is one wgmma gemm (sm_90a), so
 * that the tensor cores keep working while the next tiles are requested:
 *   prologue: copies of iterations 0 .. stages-3 in flight
 *   for (ko...) { wait for ko's copies; fence; barrier;
 *                 issue the wgmma on stage ko % stages, commit;
 *                 wait until the wgmma of ko - 1 is done (one group in flight);
 *                 issue the copies of ko + stages - 2 (into the stage ko - 2 used) }
 * The copies run stages - 2 tiles ahead: the stage they fill was read by
 * the wgmma of ko - 2, which every warpgroup finished before the barrier. */
static bool emit_pipelined_wgmma(emitter *E, int32_t sid, int32_t first_consumer)
{
    const tli_ir *ir = E->ir;
    const tli_snode *s = tli_S(ir, sid);
    int S = s->a1;
    const tli_snode *g = first_consumer ? tli_S(ir, first_consumer) : NULL;
    if (S < 3 || !g || g->op != S_GEMM || g->next || !E->plan.frag[g->gemm[2]].w.wgmma)
        return false;
    emit_pipelined_tma(E, sid, first_consumer);
    const char *v = tli_e_fmt(E, "i%d_0", sid);
    tli_e_line(E, "{ // tl_pipelined: %d stages, copies %d tiles ahead of the wgmma", S, S - 2);
    E->indent++;
    tli_e_line(E, "const long long tl_n%d = %s;", sid, tli_e_single(E, s->a0));
    emit_cp_async_prologue(E, sid, first_consumer, S - 2);
    tli_e_line(E, "for (long long %s = 0; %s < tl_n%d; ++%s) {", v, v, sid, v);
    E->indent++;
    tli_e_line(E, "tl_cp_async_wait<%d>();", S - 3);
    tli_e_line(E, "tl_fence_proxy_async();");
    tli_e_line(E, "__syncthreads();");
    E->var_text[s->vars[0]] = NULL;
    tli_e_consumer_stage(E, s, first_consumer, tli_e_fmt(E, "%s %% %d", v, S));
    tli_e_gemm_wgmma(E, g, 1);
    tli_e_line(E, "{");
    E->indent++;
    tli_e_line(E, "const long long tl_next = %s + %d;", v, S - 2);
    tli_e_line(E, "if (tl_next < tl_n%d) {", sid);
    E->indent++;
    emit_producers(E, s, first_consumer, "tl_next", tli_e_fmt(E, "tl_next %% %d", S));
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_cp_async_commit();");
    E->indent--;
    tli_e_line(E, "}");
    E->var_text[s->vars[0]] = NULL;
    tli_e_consumer_stage(E, s, first_consumer, NULL);
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_wgmma_wait<0>();");
    tli_e_line(E, "tl_cp_async_wait<0>();");
    E->indent--;
    tli_e_line(E, "}");
    return true;
}

/*   prologue: stages - 1 iterations of copies in flight, one commit group each
 *   for (ko...) { wait until iteration ko's group landed; barrier;
 *                 issue the copies of ko + stages - 1; compute on stage ko % stages }  */
void tli_e_pipelined(emitter *E, int32_t sid)
{
    const tli_ir *ir = E->ir;
    const tli_snode *s = tli_S(ir, sid);
    int S = s->a1;
    int32_t first_consumer = s->body;
    while (first_consumer && tli_is_producer(ir, first_consumer))
        first_consumer = tli_S(ir, first_consumer)->next;
    if (E->pingpong) {
        tli_e_pingpong_pipelined(E, sid, first_consumer);
        return;
    }
    if (emit_pipelined_wgmma(E, sid, first_consumer))
        return;
    const char *n = tli_e_single(E, s->a0);
    const char *v = tli_e_fmt(E, "i%d_0", sid);
    tli_e_line(E, "{ // tl_pipelined: %d stage%s", S, S > 1 ? "s" : "");
    E->indent++;
    tli_e_line(E, "const long long tl_n%d = %s;", sid, n);
    if (S > 1)
        emit_cp_async_prologue(E, sid, first_consumer, S - 1);
    tli_e_line(E, "for (long long %s = 0; %s < tl_n%d; ++%s) {", v, v, sid, v);
    E->indent++;
    if (S > 1) {
        tli_e_line(E, "tl_cp_async_wait<%d>();", S - 2);
        if (E->plan.wgmma)
            tli_e_line(E, "tl_fence_proxy_async();");
        tli_e_line(E, "__syncthreads();");
        tli_e_line(E, "{");
        E->indent++;
        tli_e_line(E, "const long long tl_next = %s + %d;", v, S - 1);
        tli_e_line(E, "if (tl_next < tl_n%d) {", sid);
        E->indent++;
        emit_producers(E, s, first_consumer, "tl_next", tli_e_fmt(E, "tl_next %% %d", S));
        E->indent--;
        tli_e_line(E, "}");
        tli_e_line(E, "tl_cp_async_commit();");
        E->indent--;
        tli_e_line(E, "}");
    } else {
        emit_producers(E, s, first_consumer, v, "0");
        tli_e_line(E, "tl_cp_async_commit();");
        tli_e_line(E, "tl_cp_async_wait<0>();");
        if (E->plan.wgmma)
            tli_e_line(E, "tl_fence_proxy_async();");
        tli_e_line(E, "__syncthreads();");
    }
    E->var_text[s->vars[0]] = NULL;
    const char *stage = S > 1 ? tli_e_fmt(E, "%s %% %d", v, S) : "0";
    tli_e_consumer_stage(E, s, first_consumer, stage);
    tli_e_stmts(E, first_consumer);
    if (S == 1)
        tli_e_line(E, "__syncthreads();");
    tli_e_consumer_stage(E, s, first_consumer, NULL);
    E->indent--;
    tli_e_line(E, "}");
    tli_e_line(E, "tl_cp_async_wait<0>();");
    E->indent--;
    tli_e_line(E, "}");
}
