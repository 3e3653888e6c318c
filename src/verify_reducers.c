/*
 * verify_reducers.c - the rules of reducers (tl_alloc_reducer, tilec.h's
 * deferred sums), checked before lowering.
 *
 * Until tl_finalize_reducer, each thread that holds an element of a
 * reducer keeps only a part of it, and the element is the sum of the parts.
 * What the kernel does with a reducer must give the same sum whichever way
 * the parts are split: a part may be scaled by a factor every holder
 * shares and added to another reducer's part, and nothing else may read
 * it. So a store into a reducer must be linear in reducers' loads with no
 * other term (l * alpha + rowsum; a plain term would be added once per
 * holder), and every other expression (a store into a plain buffer, a
 * condition, a loop bound) must read no reducer that is not finalized.
 * The statements walk in program order: tl_finalize_reducer stands at the
 * top level, so what comes after it in the walk runs after it.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

/* An expression's use of reducers not yet finalized */
enum { LIN_UNKNOWN = 0, LIN_NONE, LIN_HOM, LIN_BAD };

typedef struct rcheck {
    tli_lowered *L;
    const tli_ir *ir;
    uint8_t *final;  /* per buffer: finalized already */
    uint8_t *memo;   /* per expression: LIN_*, valid while `final` is unchanged */
} rcheck;

static bool partial(const rcheck *R, int32_t b) { return tli_B(R->ir, b)->reducer && !R->final[b]; }

static int combine_add(int a, int b)
{
    if (a == LIN_BAD || b == LIN_BAD)
        return LIN_BAD;
    return a == b ? a : LIN_BAD; /* a reducer's part plus a plain value is counted once per holder */
}

/* LIN_NONE: e reads no partial reducer; LIN_HOM: e is a sum of partial
 * reducers' loads, each times factors that read none; LIN_BAD otherwise. */
static int linearity(rcheck *R, int32_t e, int depth)
{
    if (!e)
        return LIN_NONE;
    if (R->memo[e])
        return R->memo[e];
    if (depth > 256)
        return LIN_BAD; /* deeper than any kernel writes: refused rather than walked */
    const tli_enode *n = tli_E(R->ir, e);
    int r = LIN_NONE;
    switch ((tli_eop)n->op) {
    case E_LOAD:
        for (int d = 0; d < tli_B(R->ir, n->buf)->rank && r == LIN_NONE; d++)
            if (linearity(R, R->ir->pool.v[n->idx + d], depth + 1) != LIN_NONE)
                r = LIN_BAD;
        if (r == LIN_NONE && partial(R, n->buf))
            r = LIN_HOM;
        break;
    case E_ADD:
    case E_SUB: r = combine_add(linearity(R, n->a[0], depth + 1), linearity(R, n->a[1], depth + 1)); break;
    case E_MUL: {
        int a = linearity(R, n->a[0], depth + 1), b = linearity(R, n->a[1], depth + 1);
        r = a == LIN_NONE ? b : b == LIN_NONE ? a : LIN_BAD;
        break;
    }
    case E_DIV: {
        int a = linearity(R, n->a[0], depth + 1), b = linearity(R, n->a[1], depth + 1);
        r = b == LIN_NONE ? a : LIN_BAD;
        break;
    }
    case E_NEG: r = linearity(R, n->a[0], depth + 1); break;
    case E_CAST:
        r = linearity(R, n->a[0], depth + 1);
        if (r == LIN_HOM && !tli_dtype_is_float((tl_dtype)n->dtype))
            r = LIN_BAD;
        break;
    default:
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
            if (linearity(R, n->a[i], depth + 1) != LIN_NONE)
                r = LIN_BAD;
        break;
    }
    R->memo[e] = (uint8_t)r;
    return r;
}

/* The first partial reducer e reads (for messages), or 0: after
 * linearity(e), down the operands it did not find plain. */
static int32_t first_partial(const rcheck *R, int32_t e, int depth)
{
    if (!e || depth > 256 || R->memo[e] == LIN_NONE)
        return 0;
    const tli_enode *n = tli_E(R->ir, e);
    if (n->op == E_LOAD && partial(R, n->buf))
        return n->buf;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++) {
        int32_t b = first_partial(R, n->a[i], depth + 1);
        if (b)
            return b;
    }
    return 0;
}

static void fail_read(rcheck *R, int32_t e, const char *api, const char *where)
{
    int32_t b = first_partial(R, e, 0);
    tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                 "%s: %s reads reducer '%s' before tl_finalize_reducer (until then only a store into a reducer "
                 "may read it, linearly)",
                 api, where, b ? tli_B(R->ir, b)->name : "?");
}

/* An expression that must read no partial reducer. */
static void plain_expr(rcheck *R, int32_t e, const char *api, const char *where)
{
    int lin = linearity(R, e, 0);
    if (lin == LIN_BAD && !first_partial(R, e, 0))
        tli_low_fail(R->L, TL_ERR_INVALID_ARG, "%s: %s is too deep an expression to check for reducers", api, where);
    else if (lin != LIN_NONE)
        fail_read(R, e, api, where);
}

static void written(rcheck *R, int32_t b, const char *api)
{
    if (tli_B(R->ir, b)->reducer && R->final[b])
        tli_low_fail(R->L, TL_ERR_INVALID_ARG, "%s: reducer '%s' is written after its tl_finalize_reducer", api,
                     tli_B(R->ir, b)->name);
}

static void check_stmt(rcheck *R, int32_t s)
{
    const tli_ir *ir = R->ir;
    const tli_snode *n = tli_S(ir, s);
    switch ((tli_sop)n->op) {
    case S_STORE:
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            plain_expr(R, ir->pool.v[n->idx + d], "tl_store", "an index");
        written(R, n->buf, "tl_store");
        if (!tli_B(ir, n->buf)->reducer) {
            plain_expr(R, n->value, "tl_store", "the value stored");
        } else if (R->L->st == TL_OK && linearity(R, n->value, 0) != LIN_HOM) {
            tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                         "tl_store: the value stored into reducer '%s' must be linear in reducers' loads with no "
                         "other term (r * a + s, a read by every holder alike); each holder would add anything "
                         "else once",
                         tli_B(ir, n->buf)->name);
        }
        break;
    case S_FILL:
        written(R, n->buf, "tl_fill");
        if (tli_B(ir, n->buf)->reducer && n->value)
            tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                         "tl_fill: reducer '%s' can only be cleared (tl_clear): each holder would add the value",
                         tli_B(ir, n->buf)->name);
        else
            plain_expr(R, n->value, "tl_fill", "the value");
        break;
    case S_COPY: {
        int32_t src = tli_copy_buf(ir, n->a0), dst = tli_copy_buf(ir, n->a1);
        written(R, dst, "tl_copy");
        if (partial(R, src) && !tli_B(ir, dst)->reducer)
            tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                         "tl_copy: reducer '%s' is copied into '%s', which is not a reducer, before its "
                         "tl_finalize_reducer",
                         tli_B(ir, src)->name, tli_B(ir, dst)->name);
        else if (tli_B(ir, dst)->reducer && !partial(R, src))
            tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                         "tl_copy: reducer '%s' is written from '%s', which is not a reducer being summed: each "
                         "holder would add it once",
                         tli_B(ir, dst)->name, tli_B(ir, src)->name);
        break;
    }
    case S_GEMM:
        for (int i = 0; i < 3; i++)
            if (tli_B(ir, n->gemm[i])->reducer)
                tli_low_fail(R->L, TL_ERR_INVALID_ARG, "tl_gemm: reducer '%s' cannot be a gemm operand",
                             tli_B(ir, n->gemm[i])->name);
        break;
    case S_REDUCE: {
        static const char *const names[] = {"tl_reduce_max", "tl_reduce_sum", "tl_reduce_min", "tl_reduce_absmax"};
        int op = n->a1 & TLI_REDUCE_OP_MASK;
        const char *api = op <= R_ABSMAX ? names[op] : "tl_reduce";
        if (partial(R, n->gemm[0]))
            tli_low_fail(R->L, TL_ERR_INVALID_ARG, "%s: the source is reducer '%s' before its tl_finalize_reducer",
                         api, tli_B(ir, n->gemm[0])->name);
        written(R, n->gemm[1], api);
        if (tli_B(ir, n->gemm[1])->reducer && op != R_SUM)
            tli_low_fail(R->L, TL_ERR_INVALID_ARG, "%s: reducer '%s' only sums (tl_reduce_sum)", api,
                         tli_B(ir, n->gemm[1])->name);
        /* from a shared tile each holder walks the whole row: its part would be the whole sum */
        else if (tli_B(ir, n->gemm[1])->reducer && tli_B(ir, n->gemm[0])->scope != B_FRAGMENT)
            tli_low_fail(R->L, TL_ERR_INVALID_ARG,
                         "%s: reducer '%s' is summed from shared tile '%s': each holder would hold the whole sum "
                         "(reduce a fragment into a reducer)",
                         api, tli_B(ir, n->gemm[1])->name, tli_B(ir, n->gemm[0])->name);
        break;
    }
    case S_CLUSTER_REDUCE:
        if (tli_B(ir, n->buf)->reducer)
            tli_low_fail(R->L, TL_ERR_INVALID_ARG, "tl_cluster_reduce: '%s' is a reducer",
                         tli_B(ir, n->buf)->name);
        break;
    case S_FINALIZE:
        R->final[n->buf] = 1;
        memset(R->memo, 0, (size_t)ir->e.n); /* loads of it are plain from here on */
        break;
    case S_IF: plain_expr(R, n->a0, "tl_if", "the condition"); break;
    case S_SERIAL: plain_expr(R, n->a0, "tl_serial", "the trip count"); break;
    case S_PIPELINED: plain_expr(R, n->a0, "tl_pipelined", "the trip count"); break;
    default: break;
    }
}

static void check_body(rcheck *R, int32_t first)
{
    for (int32_t s = first; s && R->L->st == TL_OK; s = tli_S(R->ir, s)->next) {
        check_stmt(R, s);
        check_body(R, tli_S(R->ir, s)->body);
        check_body(R, tli_S(R->ir, s)->orelse);
    }
}

void tli_verify_reducers(tli_lowered *L)
{
    const tli_ir *ir = &L->ir;
    bool any = false;
    for (int32_t b = 1; b < ir->b.n && !any; b++)
        any = tli_B(ir, b)->reducer;
    if (!any)
        return;
    rcheck R = {L, ir, calloc((size_t)ir->b.n, 1), calloc((size_t)ir->e.n, 1)};
    if (!R.final || !R.memo)
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
    else
        check_body(&R, ir->body);
    free(R.final);
    free(R.memo);
}
