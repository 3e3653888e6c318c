/*
 * pass_verify.c - the checks that need the whole kernel, before anything is
 * decided: where fragments may be touched and how they must be indexed,
 * and what tl_cluster, tl_use_pingpong and tl_use_warp_specialize ask of
 * the kernel's shape and target. The builder has already checked each call on its own (operand
 * kinds, dtypes, shapes, scopes); every message here names the builder call
 * whose use is wrong, so the user knows which line to look at.
 *
 * Fragments: a fragment lives in registers spread over the block's threads,
 * so element-wise work on it goes in a tl_parallel loop that indexes it by
 * the loop's own variables: all of them (a loop over its exact shape), or
 * all but some (a fragment reduced along those dimensions, read or written
 * once per element of the loop: the broadcast of a row maximum over a row).
 * The layout pass then maps such a loop onto the registers the threads
 * hold; it never needs the inverse map from an arbitrary index to a
 * thread.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

typedef struct verifier {
    tli_lowered *L;
    const tli_ir *ir;
} verifier;

/* Whether the indices idx (rank r of buffer b) are loop variables of
 * parallel loop `loop` in increasing dimension order, each over b's extent
 * in that dimension. */
static bool indexed_by_loop(const tli_ir *ir, const tli_bnode *b, int32_t idx, int32_t loop)
{
    const tli_snode *l = tli_S(ir, loop);
    int prev = -1;
    for (int d = 0; d < b->rank; d++) {
        const tli_enode *x = tli_E(ir, ir->pool.v[idx + d]);
        if (x->op != E_LOOP_VAR || x->loop != loop || x->ival <= prev || l->extents[x->ival] != b->cshape[d])
            return false;
        prev = (int)x->ival;
    }
    return true;
}

static void check_frag_access(verifier *V, int32_t buf, int32_t idx, int32_t loop, const char *api)
{
    const tli_bnode *b = tli_B(V->ir, buf);
    if (b->scope != B_FRAGMENT)
        return;
    if (!loop) {
        tli_low_fail(V->L, TL_ERR_SCOPE,
                     "%s: fragment '%s' is accessed outside tl_parallel: element-wise work on a fragment goes in a "
                     "tl_parallel loop over its shape",
                     api, b->name);
        return;
    }
    if (!indexed_by_loop(V->ir, b, idx, loop))
        tli_low_fail(V->L, TL_ERR_SHAPE,
                     "%s: fragment layout conflict: '%s' must be indexed by the variables of the enclosing tl_parallel "
                     "(all of them over its exact shape, or, for a reduced fragment, the ones of its remaining "
                     "dimensions, in order)",
                     api, b->name);
}

/* Loads of fragments in e (each node once: `seen`). */
static void check_expr(verifier *V, int32_t root, int32_t loop, uint8_t *seen)
{
    int32_t stack[256];
    int sp = 0;
    if (root)
        stack[sp++] = root;
    while (sp && V->L->st == TL_OK) {
        int32_t e = stack[--sp];
        if (seen[e])
            continue;
        seen[e] = 1;
        const tli_enode *n = tli_E(V->ir, e);
        if (n->op == E_LOAD) {
            check_frag_access(V, n->buf, n->idx, loop, "tl_load");
            for (int d = 0; d < tli_B(V->ir, n->buf)->rank && sp < 250; d++)
                stack[sp++] = V->ir->pool.v[n->idx + d];
        }
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++) {
            if (sp == 256) { /* wider than the stack: finish this branch depth-first */
                check_expr(V, n->a[i], loop, seen);
                continue;
            }
            stack[sp++] = n->a[i];
        }
    }
}

static void check_body(verifier *V, int32_t first, int32_t loop, uint8_t *seen)
{
    const tli_ir *ir = V->ir;
    for (int32_t s = first; s && V->L->st == TL_OK; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        /* a loop variable's loads are checked once per enclosing loop */
        switch ((tli_sop)n->op) {
        case S_STORE:
            check_expr(V, n->value, loop, seen);
            for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
                check_expr(V, ir->pool.v[n->idx + d], loop, seen);
            check_frag_access(V, n->buf, n->idx, loop, "tl_store");
            break;
        case S_IF:
        case S_SERIAL:
        case S_PIPELINED: check_expr(V, n->a0, loop, seen); break;
        case S_FILL: check_expr(V, n->value, loop, seen); break;
        default: break;
        }
        check_body(V, n->body, n->op == S_PARALLEL ? s : loop, seen);
        check_body(V, n->orelse, loop, seen);
    }
}

static int count_pipelines(const tli_ir *ir, int32_t first)
{
    int n = 0;
    for (int32_t s = first; s; s = tli_S(ir, s)->next) {
        const tli_snode *x = tli_S(ir, s);
        n += x->op == S_PIPELINED;
        n += count_pipelines(ir, x->body) + count_pipelines(ir, x->orelse);
    }
    return n;
}

/* Whether e reads memory (a loop extent the producer warpgroup must be able
 * to compute without the consumers). */
static bool reads_memory(tli_lowered *L, int32_t e)
{
    if (!e)
        return false;
    tli_bufset rd;
    if (!tli_bufset_init(&rd, L->ir.b.n)) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return false;
    }
    tli_expr_reads(L, e, &rd);
    bool r = !tli_bufset_empty(&rd);
    tli_bufset_free(&rd);
    return r;
}

/* Whether a tl_gemm sits below the top level of the list starting at s. */
static bool nested_gemm(const tli_ir *ir, int32_t s, int depth)
{
    for (; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_GEMM && depth > 0)
            return true;
        if (nested_gemm(ir, n->body, depth + 1) || nested_gemm(ir, n->orelse, depth + 1))
            return true;
    }
    return false;
}

/* tl_use_pingpong / tl_use_warp_specialize: a producer warpgroup runs the
 * copies of the kernel's one pipelined loop for every block, so the loop
 * must sit at the top level of the body and its trip count must not depend
 * on memory (the producer computes it on its own). */
static void check_warp_specialized(verifier *V)
{
    const tli_ir *ir = V->ir;
    const char *api = ir->pingpong ? "tl_use_pingpong" : "tl_use_warp_specialize";
    int32_t pipe = 0;
    for (int32_t s = ir->body; s; s = tli_S(ir, s)->next)
        if (tli_S(ir, s)->op == S_PIPELINED)
            pipe = s;
    const char *no = NULL;
    if (ir->threads % 128)
        no = "a block must be whole warpgroups (a multiple of 128 threads)";
    else if (!pipe || count_pipelines(ir, ir->body) != 1)
        no = "the body needs exactly one tl_pipelined loop, at its top level";
    else if (tli_S(ir, pipe)->a1 < 2)
        no = "the pipelined loop needs at least 2 stages";
    else if (reads_memory(V->L, tli_S(ir, pipe)->a0))
        no = "the pipelined loop's extent must not depend on memory";
    else if (tli_S(ir, pipe)->body == tli_first_consumer(ir, pipe))
        no = "the pipelined loop has no copy into shared memory to hand to a producer";
    else if (ir->pingpong && ir->threads != 128 && ir->threads != 256 && ir->threads != 384)
        no = "a block must be one warpgroup (128 threads: two blocks take turns), two or three (256 or 384: its "
             "warpgroups take turns)";
    else if (ir->pingpong && ir->threads == 128 && tli_uses_block(V->L, tli_S(ir, pipe)->a0))
        no = "the pipelined loop's extent must not depend on the block (the blocks of a persistent CTA share one "
             "ring)";
    else if (ir->pingpong && ir->threads == 128 && tli_S(ir, pipe)->a1 < 3)
        no = "the pipelined loop needs at least 3 stages (two blocks' tiles share the ring)";
    else if (ir->pingpong && ir->threads >= 256 && nested_gemm(ir, tli_first_consumer(ir, pipe), 0))
        no = "with warpgroups taking turns, every tl_gemm of the pipelined loop must be at its top level "
             "(each one is a turn every group takes)";
    if (no)
        tli_low_fail(V->L, TL_ERR_UNSUPPORTED, "%s: %s", api, no);
}

/* tl_use_persistent: the CTA's blocks share one ring, whose positions
 * run on from block to block (block p's iteration j is slot p n + j, or,
 * where the trip count depends on the block, the running sum of the
 * earlier blocks' plus j), and its producer is the one warp
 * specialisation adds. With tl_use_pingpong on 256 threads the two groups'
 * turns run on across blocks the same way. */
static void check_persistent(verifier *V)
{
    const tli_ir *ir = V->ir;
    const char *no = NULL;
    if (!ir->warp_specialize && !ir->pingpong)
        no = "it needs tl_use_warp_specialize (a producer that runs ahead across blocks)";
    else if (tli_cluster_size(ir) > 1)
        no = "not with tl_cluster (a cluster's blocks run together, not in turn)";
    if (no)
        tli_low_fail(V->L, TL_ERR_UNSUPPORTED, "tl_use_persistent: %s", no);
}

/* tl_use_stream_k: a unit of a block is its K steps [j0, j1), so what the
 * loop carries from one iteration to the next must be one accumulator,
 * summed by tl_gemm and zero before the loop, whose partial sums then add
 * up to the block's. */
static void check_stream_k(verifier *V)
{
    const tli_ir *ir = V->ir;
    const char *no = NULL;
    int32_t pipe = 0, prev = 0, acc = 0;
    for (int32_t s = ir->body; s && !pipe; s = tli_S(ir, s)->next) {
        if (tli_S(ir, s)->op == S_PIPELINED)
            pipe = s;
        else
            prev = s;
    }
    if (!ir->persistent)
        no = "it needs tl_use_persistent (CTAs that each take a share of the blocks)";
    else if (ir->pingpong)
        no = "not with tl_use_pingpong";
    else if (!pipe)
        no = "it needs a tl_pipelined loop at the kernel body's top level";
    else if (tli_uses_block(V->L, tli_S(ir, pipe)->a0))
        no = "the pipelined loop's trip count must not depend on the block (its K steps are cut into equal "
             "shares)";
    for (int32_t s = pipe ? tli_S(ir, pipe)->body : 0; s && !no; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_COPY && tli_B(ir, tli_copy_buf(ir, n->a1))->scope == B_SHARED)
            continue;
        if (n->op != S_GEMM)
            no = "the pipelined loop's body may only copy tiles to shared memory and call tl_gemm";
        else if (acc && n->gemm[2] != acc)
            no = "the pipelined loop's tl_gemm calls must all sum into one accumulator";
        acc = n->op == S_GEMM ? n->gemm[2] : acc;
    }
    if (!no && !acc)
        no = "the pipelined loop has no tl_gemm";
    else if (!no && tli_B(ir, acc)->scope != B_FRAGMENT)
        no = "the accumulator must be a fragment";
    else if (!no && tli_B(ir, acc)->dtype != TL_F32)
        no = "the accumulator must be f32";
    else if (!no && !(prev && tli_S(ir, prev)->op == S_FILL && !tli_S(ir, prev)->value && tli_S(ir, prev)->buf == acc))
        no = "the statement before the pipelined loop must be tl_clear of its accumulator";
    if (no)
        tli_low_fail(V->L, TL_ERR_UNSUPPORTED, "tl_use_stream_k: %s", no);
}

/* tl_cluster: the target must launch clusters, and ping-pong (two blocks
 * taking turns in one CTA) would split the blocks of a cluster over CTAs.
 * tl_use_swizzle remaps whole clusters (pass_launch.c); a producer
 * warpgroup reaches the cluster's barriers with the consumers. */
static void check_clusters(verifier *V)
{
    const tli_ir *ir = V->ir;
    const char *no = NULL;
    if (!V->L->target.clusters)
        no = "the target has no thread-block clusters (sm_90 and later)";
    else if (ir->pingpong)
        no = "not with tl_use_pingpong";
    if (no)
        tli_low_fail(V->L, TL_ERR_UNSUPPORTED, "tl_cluster (%d x %d x %d): %s", ir->cluster[0], ir->cluster[1],
                     ir->cluster[2], no);
}

void tli_pass_verify(tli_lowered *L)
{
    verifier V = {L, &L->ir};
    uint8_t *seen = calloc((size_t)L->ir.e.n, 1);
    if (!seen) {
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
        return;
    }
    check_body(&V, L->ir.body, 0, seen);
    free(seen);
    if (L->st == TL_OK)
        tli_verify_reducers(L);
    if (L->st == TL_OK && tli_cluster_size(&L->ir) > 1)
        check_clusters(&V);
    if (L->st == TL_OK && (L->ir.pingpong || L->ir.warp_specialize))
        check_warp_specialized(&V);
    if (L->st == TL_OK && L->ir.persistent)
        check_persistent(&V);
    if (L->st == TL_OK && L->ir.stream_k)
        check_stream_k(&V);
}
