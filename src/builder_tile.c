/*
 * builder_tile.c - the tile operations of the builder: shared tiles,
 * fragments, locals, regions, tl_copy, tl_clear/tl_fill, tl_pipelined,
 * tl_gemm, tl_use_swizzle. Same rules as builder.c: check everything,
 * record the first error, never crash.
 */
#include "ctx.h"
#include "kernel.h"
#include "lower.h"

#include <string.h>

static tl_buf alloc_tile(tl_kernel *k, tli_bscope scope, tl_dtype dt, int rank, const int64_t *shape,
                         const char *api)
{
    if (!tli_klive(k))
        return TL_NONE_BUF;
    bool dt_ok = dt == TL_F32 || dt == TL_F16 || dt == TL_BF16 || tli_dtype_is_f8(dt) ||
                 (scope == B_LOCAL && (dt == TL_I32 || dt == TL_I64));
    if (!dt_ok) {
        tli_kfail(k, TL_ERR_DTYPE, api, "element type %s is not allowed here", tl_dtype_name(dt));
        return TL_NONE_BUF;
    }
    if (rank < 1 || rank > TL_MAX_RANK || !shape) {
        tli_kfail(k, TL_ERR_SHAPE, api, "rank %d is not in 1..%d (or shape is NULL)", rank, TL_MAX_RANK);
        return TL_NONE_BUF;
    }
    tli_bnode b = {.scope = (uint8_t)scope, .dtype = (uint8_t)dt, .rank = rank, .at = k->ir.e.n};
    /* The running product stays within 2^24 * 2^20: no overflow (a 2^80
     * element tile used to wrap to 0 and pass). */
    int64_t total = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 1 || shape[d] > (1 << 20)) {
            tli_kfail(k, TL_ERR_SHAPE, api, "extent %d = %lld is not in 1..2^20", d, (long long)shape[d]);
            return TL_NONE_BUF;
        }
        b.cshape[d] = shape[d];
        total *= shape[d];
        if (total > (1 << 24)) {
            tli_kfail(k, TL_ERR_SHAPE, api, "more than 2^24 elements is too many for one tile");
            return TL_NONE_BUF;
        }
    }
    /* a name of the library's own (tl_ prefix, which user names cannot have)
     * until tl_name gives it one */
    static const char *prefix[] = {"", "", "smem", "frag", "local"};
    tli_fmt(b.name, sizeof b.name, "tl_%s%d", prefix[scope], k->ir.b.n);
    int32_t id = tli_ir_add_buf(&k->ir, &b);
    if (!id) {
        tli_koom(k, api);
        return TL_NONE_BUF;
    }
    return (tl_buf){k->tag, (uint32_t)id};
}

TL_API tl_buf tl_alloc_shared(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape)
{
    return alloc_tile(k, B_SHARED, dtype, rank, shape, "tl_alloc_shared");
}

TL_API tl_buf tl_alloc_fragment(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape)
{
    return alloc_tile(k, B_FRAGMENT, dtype, rank, shape, "tl_alloc_fragment");
}

/* A fragment whose holders keep parts of each element (tilec.h: deferred
 * sums); the parts are f32, as a reduction's partials are. */
TL_API tl_buf tl_alloc_reducer(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape)
{
    if (tli_klive(k) && dtype != TL_F32) {
        tli_kfail(k, TL_ERR_DTYPE, "tl_alloc_reducer", "a reducer holds f32 parts, not %s", tl_dtype_name(dtype));
        return TL_NONE_BUF;
    }
    tl_buf b = alloc_tile(k, B_FRAGMENT, dtype, rank, shape, "tl_alloc_reducer");
    if (b.id)
        k->ir.b.v[b.id].reducer = true;
    return b;
}

TL_API tl_buf tl_alloc_local(tl_kernel *k, tl_dtype dtype, int rank, const int64_t *shape)
{
    return alloc_tile(k, B_LOCAL, dtype, rank, shape, "tl_alloc_local");
}

TL_API tl_region tl_tile_n(tl_kernel *k, tl_buf buf, const tl_expr *idx, int n)
{
    static const char api[] = "tl_tile_n";
    tl_region none = {TL_NONE_BUF, 0};
    if (!tli_klive(k))
        return none;
    int32_t bid = tli_kbuf(k, buf, api);
    if (!bid)
        return none;
    const tli_bnode *b = tli_B(&k->ir, bid);
    if (b->scope != B_GLOBAL) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "tiles are taken of global tensors; use tl_all for '%s'", b->name);
        return none;
    }
    if (n != b->rank || !idx) {
        tli_kfail(k, TL_ERR_SHAPE, api, "'%s' has rank %d but %d tile indices were given", b->name, b->rank, n);
        return none;
    }
    tli_rnode r = {.buf = bid, .tiled = true};
    for (int d = 0; d < n; d++) {
        r.idx[d] = tli_kexpr(k, idx[d], api, "tile index");
        if (!r.idx[d])
            return none;
        if (!tli_dtype_is_int((tl_dtype)tli_E(&k->ir, r.idx[d])->dtype)) {
            tli_kfail(k, TL_ERR_DTYPE, api, "tile index %d is not an integer", d);
            return none;
        }
    }
    int32_t id = tli_ir_add_region(&k->ir, &r);
    if (!id) {
        tli_koom(k, api);
        return none;
    }
    return (tl_region){buf, (uint32_t)id};
}

/* The tile indices of region rid may be used here: every loop variable
 * they use is still in scope (a tile taken inside a loop and copied after
 * it used to reach NVRTC as an undeclared identifier). */
static bool region_in_scope(tl_kernel *k, int32_t rid, const char *api, const char *what)
{
    const tli_rnode *r = tli_R(&k->ir, rid);
    for (int d = 0; d < tli_B(&k->ir, r->buf)->rank; d++)
        if (!tli_kscope_open(k, tli_E(&k->ir, r->idx[d])->scope)) {
            tli_kfail(k, TL_ERR_SCOPE, api, "%s: tile index %d uses a loop variable outside its loop", what, d);
            return false;
        }
    return true;
}

/* The buffer of a region (0 after recording an error). */
static int32_t region_buf(tl_kernel *k, tl_region r, const char *api, const char *what)
{
    int32_t bid = tli_kbuf(k, r.buf, api);
    if (!bid)
        return 0;
    if (r.id && (r.id >= (uint32_t)k->ir.r.n || tli_R(&k->ir, (int32_t)r.id)->buf != bid)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "%s is not a region of this kernel", what);
        return 0;
    }
    if (r.id && !region_in_scope(k, (int32_t)r.id, api, what))
        return 0;
    if (!r.id && tli_B(&k->ir, bid)->scope == B_GLOBAL) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "%s: tl_all of a global tensor; copy tiles of it with tl_tile", what);
        return 0;
    }
    return bid;
}

static bool statement_level(tl_kernel *k, const char *api)
{
    if (tli_kinside_parallel(k)) {
        tli_kfail(k, TL_ERR_SCOPE, api, "a tile operation cannot be inside tl_parallel");
        return false;
    }
    return true;
}

static bool copy_kinds_ok(tl_kernel *k, const tli_bnode *s, const tli_bnode *d, const char *api)
{
    static const char *names[] = {"", "global", "shared", "fragment", "local"};
    bool ok = (s->scope == B_GLOBAL && (d->scope == B_SHARED || d->scope == B_FRAGMENT)) ||
              (s->scope == B_SHARED && (d->scope == B_GLOBAL || d->scope == B_FRAGMENT)) ||
              (s->scope == B_FRAGMENT && (d->scope == B_GLOBAL || d->scope == B_SHARED || d->scope == B_FRAGMENT));
    if (!ok)
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "copies from %s to %s memory are not supported", names[s->scope],
                  names[d->scope]);
    return ok;
}

TL_API void tl_copy(tl_kernel *k, tl_region src, tl_region dst)
{
    static const char api[] = "tl_copy";
    if (!tli_klive(k) || !statement_level(k, api))
        return;
    int32_t sb = region_buf(k, src, api, "src"), db = sb ? region_buf(k, dst, api, "dst") : 0;
    if (!db)
        return;
    const tli_bnode *s = tli_B(&k->ir, sb), *d = tli_B(&k->ir, db);
    if (!copy_kinds_ok(k, s, d, api))
        return;
    if (!tli_dtype_is_float((tl_dtype)s->dtype) || !tli_dtype_is_float((tl_dtype)d->dtype) || s->dtype == TL_F64 ||
        d->dtype == TL_F64) {
        tli_kfail(k, TL_ERR_DTYPE, api, "tile copies move f32, f16, bf16 or 8-bit float elements, not %s -> %s",
                  tl_dtype_name((tl_dtype)s->dtype), tl_dtype_name((tl_dtype)d->dtype));
        return;
    }
    /* a tile of a global tensor may have fewer dimensions than the tensor:
     * its leading extents are then 1 (one head of a [B, H, S, D] tensor) */
    int grank = s->scope == B_GLOBAL ? s->rank : d->scope == B_GLOBAL ? d->rank : 0;
    int trank = s->scope == B_GLOBAL ? d->rank : s->rank;
    if (grank ? trank > grank : s->rank != d->rank) {
        tli_kfail(k, TL_ERR_SHAPE, api, "ranks differ: %d and %d%s", s->rank, d->rank,
                  grank ? " (a tile may have fewer dimensions than its tensor, not more)" : "");
        return;
    }
    if (s->scope != B_GLOBAL && d->scope != B_GLOBAL)
        for (int i = 0; i < s->rank; i++)
            if (s->cshape[i] != d->cshape[i]) {
                tli_kfail(k, TL_ERR_SHAPE, api, "extent %d differs: %lld and %lld", i, (long long)s->cshape[i],
                          (long long)d->cshape[i]);
                return;
            }
    tli_snode n = {.op = S_COPY, .a0 = (int32_t)src.id, .a1 = (int32_t)dst.id};
    /* a whole-buffer region is stored as buffer id negated: regions of
     * non-global buffers need no node */
    if (!src.id)
        n.a0 = -sb;
    if (!dst.id)
        n.a1 = -db;
    if (tli_kappend(k, &n, api))
        k->ir.b.v[db].written = true, k->ir.b.v[sb].read = true;
}

static void fill(tl_kernel *k, tl_buf buf, int32_t value, const char *api)
{
    if (!statement_level(k, api))
        return;
    int32_t bid = tli_kbuf(k, buf, api);
    if (!bid)
        return;
    const tli_bnode *b = tli_B(&k->ir, bid);
    if (b->scope == B_GLOBAL) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "'%s' is a global tensor: fill tiles of shared, fragment or local buffers",
                  b->name);
        return;
    }
    if (value && tli_E(&k->ir, value)->dtype != b->dtype) {
        tli_kfail(k, TL_ERR_DTYPE, api, "value of dtype %s for '%s' of dtype %s (use tl_cast)",
                  tl_dtype_name((tl_dtype)tli_E(&k->ir, value)->dtype), b->name, tl_dtype_name((tl_dtype)b->dtype));
        return;
    }
    tli_snode n = {.op = S_FILL, .buf = bid, .value = value};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[bid].written = true;
}

TL_API void tl_clear(tl_kernel *k, tl_buf buf)
{
    if (tli_klive(k))
        fill(k, buf, 0, "tl_clear");
}

TL_API void tl_fill(tl_kernel *k, tl_buf buf, tl_expr value)
{
    if (!tli_klive(k))
        return;
    int32_t v = tli_kexpr(k, value, "tl_fill", "value");
    if (v)
        fill(k, buf, v, "tl_fill");
}

TL_API tl_expr tl_pipelined(tl_kernel *k, tl_expr extent, int stages)
{
    static const char api[] = "tl_pipelined";
    if (!tli_klive(k) || !statement_level(k, api))
        return TL_NONE_EXPR;
    int32_t ie = tli_kexpr(k, extent, api, "extent");
    if (!ie)
        return TL_NONE_EXPR;
    if (!tli_dtype_is_int((tl_dtype)tli_E(&k->ir, ie)->dtype)) {
        tli_kfail(k, TL_ERR_DTYPE, api, "extent must be an integer");
        return TL_NONE_EXPR;
    }
    if (stages < 1 || stages > 8) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "stages = %d is not in 1..8", stages);
        return TL_NONE_EXPR;
    }
    /* The pipeline pass builds one software pipeline per loop nest (an
     * inner pipelined loop reached lowering as TL_ERR_INTERNAL). */
    for (int i = 0; i < k->depth; i++)
        if (tli_S(&k->ir, k->open[i])->op == S_PIPELINED) {
            tli_kfail(k, TL_ERR_UNSUPPORTED, api, "tl_pipelined inside tl_pipelined: pipeline one loop of the nest");
            return TL_NONE_EXPR;
        }
    tli_snode n = {.op = S_PIPELINED, .a0 = ie, .a1 = stages, .rank = 1};
    int32_t sid = tli_kappend(k, &n, api);
    tl_expr v = TL_NONE_EXPR;
    if (sid && tli_kpush_scope(k, sid, api))
        tli_kloop_vars(k, sid, 1, &v, api);
    return k->status == TL_OK ? v : TL_NONE_EXPR;
}

/* The operand shapes of C += A B, with the transposes applied. */
static bool gemm_shapes(tl_kernel *k, const tli_bnode *a, const tli_bnode *b, const tli_bnode *c, unsigned flags,
                        int64_t mnk[3], const char *api)
{
    int64_t m = flags & TL_GEMM_TRANS_A ? a->cshape[1] : a->cshape[0];
    int64_t ka = flags & TL_GEMM_TRANS_A ? a->cshape[0] : a->cshape[1];
    int64_t kb = flags & TL_GEMM_TRANS_B ? b->cshape[1] : b->cshape[0];
    int64_t n = flags & TL_GEMM_TRANS_B ? b->cshape[0] : b->cshape[1];
    if (ka != kb || c->cshape[0] != m || c->cshape[1] != n) {
        tli_kfail(k, TL_ERR_SHAPE, api,
                  "shapes do not agree: A is %lldx%lld, B is %lldx%lld, C is %lldx%lld (M=%lld, K=%lld vs %lld, N=%lld)",
                  (long long)a->cshape[0], (long long)a->cshape[1], (long long)b->cshape[0], (long long)b->cshape[1],
                  (long long)c->cshape[0], (long long)c->cshape[1], (long long)m, (long long)ka, (long long)kb,
                  (long long)n);
        return false;
    }
    mnk[0] = m, mnk[1] = n, mnk[2] = ka;
    return true;
}

static bool gemm_operands_ok(tl_kernel *k, const tli_bnode *a, const tli_bnode *b, const tli_bnode *c,
                             unsigned flags, const char *api)
{
    if (a->rank != 2 || b->rank != 2 || c->rank != 2) {
        tli_kfail(k, TL_ERR_SHAPE, api, "A, B and C must be 2-D tiles");
        return false;
    }
    if (flags & ~(unsigned)(TL_GEMM_TRANS_A | TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS | TL_GEMM_WARP_COLS)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "unknown flag bits 0x%x", flags & ~(unsigned)(TL_GEMM_TRANS_A |
                  TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS | TL_GEMM_WARP_COLS));
        return false;
    }
    if ((flags & TL_GEMM_WARP_ROWS) && (flags & TL_GEMM_WARP_COLS)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "TL_GEMM_WARP_ROWS and TL_GEMM_WARP_COLS together");
        return false;
    }
    if ((flags & TL_GEMM_TRANS_A) && a->scope != B_SHARED) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "a transposed A must be a shared tile, not registers");
        return false;
    }
    if ((a->scope != B_SHARED && a->scope != B_FRAGMENT) || b->scope != B_SHARED || c->scope != B_FRAGMENT) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "A must be a shared tile or a fragment, B a shared tile, C a fragment");
        return false;
    }
    bool f8 = tli_dtype_is_f8((tl_dtype)a->dtype) && tli_dtype_is_f8((tl_dtype)b->dtype);
    if ((a->dtype != b->dtype && !f8) || (a->dtype != TL_BF16 && a->dtype != TL_F16 && !f8) || c->dtype != TL_F32) {
        tli_kfail(k, TL_ERR_DTYPE, api, "A and B must both be bf16, both f16 or both 8-bit floats (f8e4m3, f8e5m2, "
                  "mixed or not), and C f32 (got %s, %s, %s)", tl_dtype_name((tl_dtype)a->dtype),
                  tl_dtype_name((tl_dtype)b->dtype), tl_dtype_name((tl_dtype)c->dtype));
        return false;
    }
    /* wgmma reads 8-bit operands K-major from shared memory only */
    if (f8 && (a->scope != B_SHARED || (flags & TL_GEMM_TRANS_A) || !(flags & TL_GEMM_TRANS_B))) {
        tli_kfail(k, TL_ERR_UNSUPPORTED, api, "8-bit operands must be K-major shared tiles: A [M, K] in shared "
                  "memory (not registers, no TL_GEMM_TRANS_A) and B [N, K] (TL_GEMM_TRANS_B)");
        return false;
    }
    return true;
}

/* Known flag bits, one warp policy at most, and a grid to split C over. */
static bool gemm_flags_ok(tl_kernel *k, unsigned flags, const char *api)
{
    const unsigned known = TL_GEMM_TRANS_A | TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS | TL_GEMM_WARP_COLS;
    if (flags & ~known) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "unknown flag bits 0x%x", flags & ~known);
        return false;
    }
    if ((flags & TL_GEMM_WARP_ROWS) && (flags & TL_GEMM_WARP_COLS)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "TL_GEMM_WARP_ROWS and TL_GEMM_WARP_COLS exclude each other");
        return false;
    }
    if (!k->ir.threads) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "call tl_grid before the first statement");
        return false;
    }
    return true;
}

TL_API void tl_gemm(tl_kernel *k, tl_buf A, tl_buf B, tl_buf C, unsigned flags)
{
    static const char api[] = "tl_gemm";
    if (!tli_klive(k) || !statement_level(k, api) || !gemm_flags_ok(k, flags, api))
        return;
    int32_t ia = tli_kbuf(k, A, api), ib = ia ? tli_kbuf(k, B, api) : 0, ic = ib ? tli_kbuf(k, C, api) : 0;
    if (!ic)
        return;
    const tli_bnode *a = tli_B(&k->ir, ia), *b = tli_B(&k->ir, ib), *c = tli_B(&k->ir, ic);
    int64_t mnk[3];
    if (!k->ir.threads) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "call tl_grid first: the warp split depends on the block's threads");
        return;
    }
    if (!gemm_operands_ok(k, a, b, c, flags, api) || !gemm_shapes(k, a, b, c, flags, mnk, api))
        return;
    tli_warp_layout wl;
    char why[200];
    if (!tli_gemm_warp_layout(mnk[0], mnk[1], mnk[2], k->ir.threads, flags, &wl, why, sizeof why)) {
        tli_kfail(k, TL_ERR_SHAPE, api, "%s", why);
        return;
    }
    tli_snode n = {.op = S_GEMM, .a1 = (int32_t)flags, .gemm = {ia, ib, ic}};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[ic].written = true, k->ir.b.v[ia].read = true, k->ir.b.v[ib].read = true;
}

TL_API void tl_use_swizzle(tl_kernel *k, int panel)
{
    if (!tli_klive(k))
        return;
    if (panel < 0 || panel > 64) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_use_swizzle", "panel = %d is not in 0..64", panel);
        return;
    }
    k->ir.swizzle = panel > 1 ? panel : 0;
}

TL_API void tl_use_pingpong(tl_kernel *k, int on)
{
    if (!tli_klive(k))
        return;
    if (on < 0 || on > 2) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_use_pingpong", "mode %d (0 off, 1 on, 2 on with the overlap of the next "
                  "tile's first gemm)", on);
        return;
    }
    k->ir.pingpong = (uint8_t)on;
}

TL_API void tl_use_warp_specialize(tl_kernel *k, int on)
{
    if (tli_klive(k))
        k->ir.warp_specialize = on != 0;
}

TL_API void tl_use_persistent(tl_kernel *k, int on)
{
    if (!tli_klive(k))
        return;
    if (on < 0 || on > 2) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_use_persistent", "mode %d (0 off, 1 blocks dealt in turn, 2 blocks "
                  "taken from a counter)", on);
        return;
    }
    k->ir.persistent = (uint8_t)on;
}

TL_API void tl_use_stream_k(tl_kernel *k, int on)
{
    if (tli_klive(k))
        k->ir.stream_k = on != 0;
}

TL_API void tl_name(tl_kernel *k, tl_buf buf, const char *name)
{
    static const char api[] = "tl_name";
    if (!tli_klive(k))
        return;
    int32_t bid = tli_kbuf(k, buf, api);
    if (!bid)
        return;
    if (tli_B(&k->ir, bid)->scope == B_GLOBAL) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s' is a tensor parameter: its name is given by tl_param_tensor",
                  tli_B(&k->ir, bid)->name);
        return;
    }
    if (tli_kname_free(k, name, api))
        tli_fmt(k->ir.b.v[bid].name, sizeof k->ir.b.v[bid].name, "%s", name);
}
