/*
 * builder_reduce.c - the fragment reductions of the builder: tl_reduce_max,
 * tl_reduce_sum, tl_reduce_min and tl_reduce_absmax, after TileLang's
 * T.reduce_*. Same rules as builder.c: check everything, record the first
 * error, never crash. The builder checks what it can know alone (kinds,
 * dimension, shapes); whether the lowering can reduce a fragment's layout is
 * the lowering's to say when the kernel is compiled. Also the all-reduce
 * of a fragment across a cluster's blocks (tl_cluster_reduce_*).
 */
#include "kernel.h"

#include <string.h>

/* "[4, 8, 16]": a tile's shape for messages. */
static const char *shape_text(char *buf, size_t len, int rank, const int64_t *shape)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && n < len; d++) {
        tli_fmt(buf + n, len - n, "%s%lld", d ? ", " : "[", (long long)shape[d]);
        n = strlen(buf);
    }
    if (n < len)
        tli_fmt(buf + n, len - n, "]");
    return buf;
}

static bool reduce_kinds_ok(tl_kernel *k, const tli_bnode *s, const tli_bnode *d, bool same, const char *api)
{
    static const char *kind[] = {"", "global tensor", "shared tile", "fragment", "local buffer"};
    if (s->scope != B_FRAGMENT && s->scope != B_SHARED) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "src '%s' is a %s: a reduction reads a fragment or a shared tile",
                  s->name, kind[s->scope]);
        return false;
    }
    if (d->scope != B_FRAGMENT) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "dst '%s' is a %s: a reduction writes a fragment", d->name,
                  kind[d->scope]);
        return false;
    }
    if (same) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "src and dst are the same fragment '%s'", s->name);
        return false;
    }
    return true;
}

/* dst must have src's shape without dimension dim; [1] for a rank-1 src. */
static bool reduce_shape_ok(tl_kernel *k, const tli_bnode *s, const tli_bnode *d, int dim, const char *api)
{
    int64_t want[TL_MAX_RANK] = {1};
    int rank = 0;
    for (int i = 0; i < s->rank; i++)
        if (i != dim)
            want[rank++] = s->cshape[i];
    if (rank == 0)
        rank = 1;
    bool ok = d->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = d->cshape[i] == want[i];
    if (!ok) {
        char got[64], src[64], need[64];
        tli_kfail(k, TL_ERR_SHAPE, api, "dst '%s' is %s, but '%s' %s reduced along dimension %d is %s", d->name,
                  shape_text(got, sizeof got, d->rank, d->cshape), s->name,
                  shape_text(src, sizeof src, s->rank, s->cshape), dim, shape_text(need, sizeof need, rank, want));
    }
    return ok;
}

/* One reduction statement: dst[rest] = op over src[..., i_dim, ...],
 * combined with dst's old values when clear is 0. */
static void reduce(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear, tli_redop op, const char *api)
{
    if (!tli_klive(k))
        return;
    if (tli_kinside_parallel(k)) {
        tli_kfail(k, TL_ERR_SCOPE, api, "a tile operation cannot be inside tl_parallel");
        return;
    }
    int32_t is = tli_kbuf(k, src, api), id = is ? tli_kbuf(k, dst, api) : 0;
    if (!id)
        return;
    const tli_bnode *s = tli_B(&k->ir, is), *d = tli_B(&k->ir, id);
    if (!reduce_kinds_ok(k, s, d, is == id, api))
        return;
    if (dim < 0 || dim >= s->rank) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "dim = %d is not a dimension of '%s' (rank %d)", dim, s->name, s->rank);
        return;
    }
    if (!reduce_shape_ok(k, s, d, dim, api))
        return;
    tli_snode n = {.op = S_REDUCE, .rank = dim, .a1 = (int32_t)op | (clear ? 0 : TLI_REDUCE_ACCUM), .gemm = {is, id}};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[id].written = true, k->ir.b.v[is].read = true;
}

TL_API void tl_reduce_max(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear)
{
    reduce(k, src, dst, dim, clear, R_MAX, "tl_reduce_max");
}

TL_API void tl_reduce_sum(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear)
{
    reduce(k, src, dst, dim, clear, R_SUM, "tl_reduce_sum");
}

TL_API void tl_reduce_min(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear)
{
    reduce(k, src, dst, dim, clear, R_MIN, "tl_reduce_min");
}

TL_API void tl_reduce_absmax(tl_kernel *k, tl_buf src, tl_buf dst, int dim, int clear)
{
    reduce(k, src, dst, dim, clear, R_ABSMAX, "tl_reduce_absmax");
}

TL_API void tl_finalize_reducer(tl_kernel *k, tl_buf r)
{
    static const char api[] = "tl_finalize_reducer";
    if (!tli_klive(k))
        return;
    if (k->depth > 0) {
        tli_kfail(k, TL_ERR_SCOPE, api, "a reducer is finalized at the kernel body's top level, not inside a scope");
        return;
    }
    int32_t ib = tli_kbuf(k, r, api);
    if (!ib)
        return;
    const tli_bnode *b = tli_B(&k->ir, ib);
    if (!b->reducer) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s' is not a reducer (tl_alloc_reducer)", b->name);
        return;
    }
    for (int32_t s = k->ir.body; s; s = tli_S(&k->ir, s)->next)
        if (tli_S(&k->ir, s)->op == S_FINALIZE && tli_S(&k->ir, s)->buf == ib) {
            tli_kfail(k, TL_ERR_INVALID_ARG, api, "reducer '%s' is finalized already", b->name);
            return;
        }
    tli_snode n = {.op = S_FINALIZE, .buf = ib};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[ib].written = true, k->ir.b.v[ib].read = true;
}

/* buf[i] = op over the cluster's blocks of their buf[i], in every block
 * (root < 0) or in block `root` only. */
static void cluster_reduce(tl_kernel *k, tl_buf buf, tli_redop op, int root, const char *api)
{
    if (!tli_klive(k))
        return;
    if (tli_kinside_parallel(k)) {
        tli_kfail(k, TL_ERR_SCOPE, api, "a tile operation cannot be inside tl_parallel");
        return;
    }
    int32_t ib = tli_kbuf(k, buf, api);
    if (!ib)
        return;
    const tli_bnode *b = tli_B(&k->ir, ib);
    if (b->scope != B_FRAGMENT || (b->dtype != TL_F32 && b->dtype != TL_F16 && b->dtype != TL_BF16)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "'%s' is not a fragment of f32, f16 or bf16", b->name);
        return;
    }
    if (tli_cluster_size(&k->ir) < 2) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "the kernel has no clusters: call tl_cluster first");
        return;
    }
    if (root >= tli_cluster_size(&k->ir)) {
        tli_kfail(k, TL_ERR_INVALID_ARG, api, "root = %d is not a rank of a cluster of %d blocks", root,
                  tli_cluster_size(&k->ir));
        return;
    }
    tli_snode n = {.op = S_CLUSTER_REDUCE, .buf = ib, .a1 = (int32_t)op, .a0 = root + 1};
    if (tli_kappend(k, &n, api))
        k->ir.b.v[ib].written = true, k->ir.b.v[ib].read = true;
}

TL_API void tl_cluster_reduce_max(tl_kernel *k, tl_buf buf)
{
    cluster_reduce(k, buf, R_MAX, -1, "tl_cluster_reduce_max");
}
TL_API void tl_cluster_reduce_sum(tl_kernel *k, tl_buf buf)
{
    cluster_reduce(k, buf, R_SUM, -1, "tl_cluster_reduce_sum");
}
TL_API void tl_cluster_reduce_min(tl_kernel *k, tl_buf buf)
{
    cluster_reduce(k, buf, R_MIN, -1, "tl_cluster_reduce_min");
}
TL_API void tl_cluster_reduce_absmax(tl_kernel *k, tl_buf buf)
{
    cluster_reduce(k, buf, R_ABSMAX, -1, "tl_cluster_reduce_absmax");
}
TL_API void tl_cluster_reduce_sum_to(tl_kernel *k, tl_buf buf, int root)
{
    if (tli_klive(k) && root < 0) {
        tli_kfail(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_sum_to", "root = %d is negative", root);
        return;
    }
    cluster_reduce(k, buf, R_SUM, root, "tl_cluster_reduce_sum_to");
}
