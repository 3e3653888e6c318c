/*
 * lower_tile.c - layout decisions for tiles: the warp split of each tl_gemm,
 * the register layout of each fragment (inferred from the gemm that writes
 * it and checked against every loop that touches it), and the shared memory
 * plan (offsets, multi-buffering for pipelined copies, the device limit).
 */
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tli_gemm_warp_layout(int64_t m, int64_t n, int64_t k, int threads, unsigned flags, tli_warp_layout *out,
                          char *why, size_t why_len)
{
    if (k % 16 != 0) {
        tli_fmt(why, why_len, "K = %lld is not a multiple of 16, the MMA's k step", (long long)k);
        return false;
    }
    int warps = threads / 32;
    bool found = false;
    double best = 0;
    for (int wgm = 1; wgm <= warps; wgm++) {
        if (warps % wgm)
            continue;
        int wgn = warps / wgm;
        if ((flags & TL_GEMM_WARP_ROWS) && wgn != 1)
            continue;
        if ((flags & TL_GEMM_WARP_COLS) && wgm != 1)
            continue;
        if (m % (16 * wgm) || n % (16 * wgn))
            continue;
        int64_t wm = m / wgm, wn = n / wgn;
        /* as square as possible; ties go to taller warp tiles */
        double skew = wm > wn ? (double)wm / (double)wn : (double)wn / (double)wm + 0.01;
        if (!found || skew < best) {
            found = true;
            best = skew;
            *out = (tli_warp_layout){wgm, wgn, wm, wn, (int)(wm / 16), (int)(wn / 8), false};
        }
    }
    if (!found) {
        tli_fmt(why, why_len,
                "the MMA layout cannot tile C %lldx%lld over %d warps: warp tiles must be multiples of 16x16%s",
                (long long)m, (long long)n, warps,
                flags & TL_GEMM_WARP_ROWS ? " (policy: rows)" : flags & TL_GEMM_WARP_COLS ? " (policy: columns)" : "");
        return false;
    }
    if (out->mt * out->nt * 4 > 256) {
        tli_fmt(why, why_len, "warp tile %lldx%lld needs %d accumulator registers per thread (at most 256): use more threads",
                (long long)out->wm, (long long)out->wn, out->mt * out->nt * 4);
        return false;
    }
    return true;
}

bool tli_gemm_wgmma_layout(const tli_ir *ir, int32_t gemm, const char *target, tli_warp_layout *out)
{
    const tli_snode *n = tli_S(ir, gemm);
    const tli_bnode *a = tli_B(ir, n->gemm[0]), *b = tli_B(ir, n->gemm[1]), *c = tli_B(ir, n->gemm[2]);
    if (!target || strcmp(target, "sm_90a") != 0 || (n->a1 & TL_GEMM_TRANS_A))
        return false;
    int groups = ir->threads / 128;
    int64_t m = c->cshape[0], nn = c->cshape[1];
    /* B as [N, 64] (K-major) or as [64, N] with N in 64-column blocks */
    bool b_ok = (n->a1 & TL_GEMM_TRANS_B) ? b->cshape[1] == 64 : (b->cshape[0] == 64 && nn % 64 == 0);
    if (ir->threads % 128 || a->cshape[1] != 64 || !b_ok || m % (64 * groups) || nn % 16 || nn > 256)
        return false;
    int64_t rows = m / groups;
    if ((rows / 64) * (nn / 2) > 256) /* accumulator registers per thread */
        return false;
    *out = (tli_warp_layout){.wgm = groups, .wgn = 1, .wm = rows, .wn = nn, .mt = (int)(rows / 64),
                             .nt = (int)(nn / 8), .wgmma = true};
    return true;
}

int32_t tli_copy_buf(const tli_ir *ir, int32_t operand)
{
    return operand < 0 ? -operand : tli_R(ir, operand)->buf;
}

bool tli_is_producer(const tli_ir *ir, int32_t s)
{
    const tli_snode *n = tli_S(ir, s);
    return n->op == S_COPY && tli_B(ir, tli_copy_buf(ir, n->a0))->scope == B_GLOBAL &&
           tli_B(ir, tli_copy_buf(ir, n->a1))->scope == B_SHARED;
}

typedef struct planner {
    const tli_ir *ir;
    const char *target;
    tli_tile_plan *plan;
    char *err;
    size_t errlen;
    tl_status st;
    bool wgmma; /* some gemm reads shared memory through wgmma descriptors */
} planner;

static void plan_fail(planner *P, tl_status st, const char *fmt, ...) TLI_PRINTF(3, 4);
static void plan_fail(planner *P, tl_status st, const char *fmt, ...)
{
    if (P->st != TL_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->err, P->errlen, fmt, ap);
    va_end(ap);
    P->st = st;
}

static bool same_layout(const tli_frag_layout *a, const tli_frag_layout *b)
{
    if (a->mma != b->mma)
        return false;
    return !a->mma || (a->w.wgm == b->w.wgm && a->w.wgn == b->w.wgn && a->w.wm == b->w.wm && a->w.wn == b->w.wn &&
                       a->w.wgmma == b->w.wgmma);
}

/* Fragment layouts: the accumulator layout of each gemm's C. */
static void plan_gemms(planner *P, int32_t first)
{
    const tli_ir *ir = P->ir;
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        plan_gemms(P, n->body);
        plan_gemms(P, n->orelse);
        if (n->op != S_GEMM)
            continue;
        const tli_bnode *a = tli_B(ir, n->gemm[0]), *c = tli_B(ir, n->gemm[2]);
        int64_t k = (n->a1 & TL_GEMM_TRANS_A) ? a->cshape[0] : a->cshape[1];
        tli_frag_layout fl = {.mma = true};
        char why[200];
        if (tli_gemm_wgmma_layout(ir, s, P->target, &fl.w)) {
            /* the tensor cores of sm_90a read A and B straight from shared memory */
        } else if (!tli_gemm_warp_layout(c->cshape[0], c->cshape[1], k, ir->threads, (unsigned)n->a1, &fl.w, why,
                                         sizeof why)) {
            plan_fail(P, TL_ERR_SHAPE, "tl_gemm: %s", why);
            return;
        }
        fl.per_thread = (int64_t)fl.w.mt * fl.w.nt * 4;
        if (fl.w.wgmma)
            P->wgmma = true;
        if (fl.w.wgmma && !(n->a1 & TL_GEMM_TRANS_B))
            P->plan->smem[n->gemm[1]].mn_major = true;
        tli_frag_layout *cur = &P->plan->frag[n->gemm[2]];
        if (cur->mma && !same_layout(cur, &fl)) {
            plan_fail(P, TL_ERR_SHAPE, "fragment layout conflict: '%s' is the accumulator of two tl_gemm with "
                                       "different warp splits", c->name);
            return;
        }
        *cur = fl;
    }
}

/* Checks the fragment accesses of expression e inside parallel loop `loop`
 * (0: outside every parallel loop); *seen is the first fragment seen. */
static void check_frag_access(planner *P, int32_t buf, int32_t idx, int32_t loop, int32_t *seen)
{
    const tli_ir *ir = P->ir;
    const tli_bnode *b = tli_B(ir, buf);
    if (b->scope != B_FRAGMENT)
        return;
    if (!loop) {
        plan_fail(P, TL_ERR_SCOPE, "fragment '%s' is accessed outside tl_parallel: element-wise work on a fragment "
                                   "goes in a tl_parallel loop over its shape", b->name);
        return;
    }
    const tli_snode *l = tli_S(ir, loop);
    bool exact = l->rank == b->rank;
    for (int d = 0; exact && d < b->rank; d++) {
        const tli_enode *ix = tli_E(ir, ir->pool.v[idx + d]);
        exact = l->extents[d] == b->cshape[d] && ix->op == E_LOOP_VAR && ix->loop == loop && ix->ival == d;
    }
    if (!exact) {
        plan_fail(P, TL_ERR_SHAPE, "fragment layout conflict: '%s' must be indexed by the variables of a tl_parallel "
                                   "loop over its exact shape", b->name);
        return;
    }
    if (*seen && !same_layout(&P->plan->frag[*seen], &P->plan->frag[buf]))
        plan_fail(P, TL_ERR_SHAPE, "fragment layout conflict: '%s' and '%s' are laid out differently and cannot "
                                   "share one tl_parallel loop", tli_B(ir, *seen)->name, b->name);
    if (!*seen)
        *seen = buf;
}

static void check_expr(planner *P, int32_t e, int32_t loop, int32_t *seen)
{
    const tli_enode *n = tli_E(P->ir, e);
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        check_expr(P, n->a[i], loop, seen);
    if (n->op == E_LOAD) {
        for (int d = 0; d < tli_B(P->ir, n->buf)->rank; d++)
            check_expr(P, P->ir->pool.v[n->idx + d], loop, seen);
        check_frag_access(P, n->buf, n->idx, loop, seen);
    }
}

static void check_stmts(planner *P, int32_t first, int32_t loop, int32_t *seen)
{
    const tli_ir *ir = P->ir;
    for (int32_t s = first; s && P->st == TL_OK; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        int32_t fseen = 0, *sp = seen;
        int32_t inner = loop;
        if (n->op == S_PARALLEL) {
            inner = s;
            sp = &fseen;
        }
        if (n->op == S_STORE) {
            check_expr(P, n->value, loop, seen);
            for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
                check_expr(P, ir->pool.v[n->idx + d], loop, seen);
            check_frag_access(P, n->buf, n->idx, loop, seen);
        } else if (n->op == S_IF || n->op == S_SERIAL || n->op == S_PIPELINED) {
            check_expr(P, n->a0, loop, seen);
        } else if (n->op == S_FILL && n->value) {
            check_expr(P, n->value, loop, seen);
        }
        check_stmts(P, n->body, inner, sp);
        check_stmts(P, n->orelse, inner, sp);
    }
}

/* Multi-buffering: the shared destinations of a pipelined loop's leading
 * copies get one copy per stage. */
static void plan_stages(planner *P, int32_t first)
{
    const tli_ir *ir = P->ir;
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_PIPELINED)
            for (int32_t c = n->body; c && tli_is_producer(ir, c); c = tli_S(ir, c)->next) {
                tli_smem_info *si = &P->plan->smem[tli_copy_buf(ir, tli_S(ir, c)->a1)];
                if (n->a1 > si->stages)
                    si->stages = n->a1;
            }
        plan_stages(P, n->body);
        plan_stages(P, n->orelse);
    }
}

static void plan_smem(planner *P, int64_t limit)
{
    const tli_ir *ir = P->ir;
    int64_t off = 0;
    char detail[512] = "";
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        tli_smem_info *si = &P->plan->smem[i];
        if (b->scope != B_SHARED)
            continue;
        /* outside the pipeline: one copy, or one per consumer warpgroup of
         * a ping-pong kernel (their blocks run at once) */
        if (si->stages < 1)
            si->stages = ir->pingpong ? 2 : 1;
        si->stage_elems = tli_buf_elems(b);
        si->offset = off;
        int64_t bytes = si->stages * si->stage_elems * (int64_t)tl_dtype_size((tl_dtype)b->dtype);
        /* wgmma's 128-byte swizzle works on 1024-byte aligned atoms */
        int64_t align = P->wgmma ? 1024 : 128;
        off += (bytes + align - 1) / align * align;
        size_t len = strlen(detail);
        tli_fmt(detail + len, sizeof detail - len, "%s%s: %lldx%lld %s x %d stage%s = %lld", len ? ", " : "", b->name,
                (long long)b->cshape[0], (long long)(b->rank > 1 ? b->cshape[1] : 1), tl_dtype_name((tl_dtype)b->dtype),
                si->stages, si->stages > 1 ? "s" : "", (long long)bytes);
    }
    /* mbarriers for TMA-fed pipelines (two per stage) */
    P->plan->barriers = P->wgmma ? off : -1;
    if (P->wgmma)
        off += 256;
    P->plan->smem_bytes = off;
    if (off > limit)
        plan_fail(P, TL_ERR_SHAPE, "shared memory: %lld bytes per block (%s) exceeds the device's limit of %lld bytes",
                  (long long)off, detail, (long long)limit);
}

tl_status tli_plan_tiles(const tli_ir *ir, const char *target, int64_t smem_limit, tli_tile_plan *plan, char *err,
                         size_t errlen)
{
    memset(plan, 0, sizeof *plan);
    plan->frag = calloc((size_t)ir->b.n, sizeof *plan->frag);
    plan->smem = calloc((size_t)ir->b.n, sizeof *plan->smem);
    if (!plan->frag || !plan->smem) {
        tli_tile_plan_free(plan);
        tli_fmt(err, errlen, "out of host memory");
        return TL_ERR_OUT_OF_MEMORY;
    }
    planner P = {.ir = ir, .target = target, .plan = plan, .err = err, .errlen = errlen, .st = TL_OK};
    plan_gemms(&P, ir->body);
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        if (b->scope == B_FRAGMENT && !plan->frag[i].mma)
            plan->frag[i].per_thread = (tli_buf_elems(b) + ir->threads - 1) / ir->threads;
        if (b->scope == B_FRAGMENT && plan->frag[i].per_thread > 512)
            plan_fail(&P, TL_ERR_SHAPE, "fragment '%s' needs %lld registers per thread (at most 512)", b->name,
                      (long long)plan->frag[i].per_thread);
    }
    int32_t seen = 0;
    check_stmts(&P, ir->body, 0, &seen);
    plan_stages(&P, ir->body);
    plan_smem(&P, smem_limit);
    plan->wgmma = P.wgmma;
    if (P.st != TL_OK)
        tli_tile_plan_free(plan);
    return P.st;
}

void tli_tile_plan_free(tli_tile_plan *plan)
{
    free(plan->frag);
    free(plan->smem);
    plan->frag = NULL;
    plan->smem = NULL;
}
