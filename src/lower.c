/* lower.c - thread mapping and vectorisation decisions for tl_parallel. */
#include "lower.h"

/* The coefficient of loop variable (loop, dim) in integer expression e, when
 * e is affine in it; false when it is not (a product of two variables, a
 * division, a load that depends on it, ...). */
static bool affine_coef(const tli_ir *ir, int32_t e, int32_t loop, int dim, int64_t *coef)
{
    const tli_enode *n = tli_E(ir, e);
    if (!tli_expr_uses_var(ir, e, loop, dim)) {
        *coef = 0;
        return true;
    }
    int64_t ca, cb, c;
    switch (n->op) {
    case E_LOOP_VAR:
        *coef = 1;
        return true;
    case E_ADD:
    case E_SUB:
        if (!affine_coef(ir, n->a[0], loop, dim, &ca) || !affine_coef(ir, n->a[1], loop, dim, &cb))
            return false;
        *coef = n->op == E_ADD ? ca + cb : ca - cb;
        return true;
    case E_NEG:
        if (!affine_coef(ir, n->a[0], loop, dim, &ca))
            return false;
        *coef = -ca;
        return true;
    case E_MUL:
        if (tli_expr_const_int(ir, n->a[0], &c) && affine_coef(ir, n->a[1], loop, dim, &cb)) {
            *coef = c * cb;
            return true;
        }
        if (tli_expr_const_int(ir, n->a[1], &c) && affine_coef(ir, n->a[0], loop, dim, &ca)) {
            *coef = c * ca;
            return true;
        }
        return false;
    case E_CAST: /* i32 -> i64 widening keeps the value */
        if (n->dtype == TL_I64 && tli_E(ir, n->a[0])->dtype == TL_I32)
            return affine_coef(ir, n->a[0], loop, dim, coef);
        return false;
    default:
        return false;
    }
}

static bool buf_written_in(const tli_ir *ir, int32_t s, int32_t buf)
{
    for (; s; s = tli_S(ir, s)->next) {
        const tli_snode *n = tli_S(ir, s);
        if (n->op == S_STORE && n->buf == buf)
            return true;
        if (n->body && buf_written_in(ir, n->body, buf))
            return true;
        if (n->orelse && buf_written_in(ir, n->orelse, buf))
            return true;
    }
    return false;
}

bool tli_access_vectorizable(const tli_ir *ir, int32_t s, int32_t buf, int32_t idx, int lanes,
                             bool is_load)
{
    const tli_snode *loop = tli_S(ir, s);
    const tli_bnode *b = tli_B(ir, buf);
    int last = loop->rank - 1;
    size_t bytes = tl_dtype_size((tl_dtype)b->dtype) * (size_t)lanes;
    if (b->scope != B_GLOBAL || lanes < 2 || (bytes != 4 && bytes != 8 && bytes != 16))
        return false;
    if (is_load && buf_written_in(ir, loop->body, buf))
        return false;
    for (int d = 0; d < b->rank; d++) {
        int64_t c;
        if (!affine_coef(ir, ir->pool.v[idx + d], s, last, &c))
            return false;
        if (c != (d == b->rank - 1 ? 1 : 0))
            return false;
    }
    /* A constant last stride other than 1 can never be contiguous. */
    int64_t st;
    if (tli_expr_const_int(ir, b->stride[b->rank - 1], &st) && st != 1)
        return false;
    return true;
}

/* Largest element size among the global accesses of expression e that move
 * with the last loop variable of s; counts vectorisable candidates. */
static void scan_expr(const tli_ir *ir, int32_t s, int32_t e, size_t *maxsize)
{
    const tli_enode *n = tli_E(ir, e);
    const tli_snode *loop = tli_S(ir, s);
    if (n->scope == 0)
        return;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        scan_expr(ir, s, n->a[i], maxsize);
    if (n->op == E_LOAD && tli_expr_uses_var(ir, e, s, loop->rank - 1)) {
        size_t sz = tl_dtype_size((tl_dtype)tli_B(ir, n->buf)->dtype);
        if (sz > *maxsize)
            *maxsize = sz;
    }
}

/* Vector mode needs a body of plain stores (no nested control flow). */
static bool straight_stores(const tli_ir *ir, int32_t body)
{
    for (int32_t s = body; s; s = tli_S(ir, s)->next)
        if (tli_S(ir, s)->op != S_STORE || tli_B(ir, tli_S(ir, s)->buf)->scope != B_GLOBAL)
            return false;
    return body != 0;
}

static bool any_vector_access(const tli_ir *ir, int32_t s, int lanes);

void tli_plan_parallel(const tli_ir *ir, int32_t s, int threads, tli_par_plan *plan)
{
    const tli_snode *loop = tli_S(ir, s);
    plan->total = 1;
    for (int d = 0; d < loop->rank; d++)
        plan->total *= loop->extents[d];
    plan->vector = false;
    plan->lanes = 1;
    if (straight_stores(ir, loop->body)) {
        size_t maxsize = 0;
        for (int32_t st = loop->body; st; st = tli_S(ir, st)->next) {
            const tli_snode *n = tli_S(ir, st);
            size_t sz = tl_dtype_size((tl_dtype)tli_B(ir, n->buf)->dtype);
            if (sz > maxsize)
                maxsize = sz;
            scan_expr(ir, s, n->value, &maxsize);
        }
        int64_t elast = loop->extents[loop->rank - 1];
        for (int v = maxsize ? (int)(16 / maxsize) : 0; v >= 2; v /= 2)
            if (elast % v == 0 && any_vector_access(ir, s, v)) {
                plan->vector = true;
                plan->lanes = v;
                break;
            }
    }
    plan->chunks = plan->total / plan->lanes;
    plan->per_thread = (plan->chunks + threads - 1) / threads;
    /* Enough independent accesses in flight to cover memory latency, few
     * enough registers: up to 4 chunks per group, all of them when few. */
    plan->group = plan->per_thread < 4 ? (int)plan->per_thread : 4;
    if (plan->group < 1)
        plan->group = 1;
}

static bool any_vector_access_expr(const tli_ir *ir, int32_t s, int32_t e, int lanes)
{
    const tli_enode *n = tli_E(ir, e);
    if (n->scope == 0)
        return false;
    if (n->op == E_LOAD && tli_access_vectorizable(ir, s, n->buf, n->idx, lanes, true))
        return true;
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        if (any_vector_access_expr(ir, s, n->a[i], lanes))
            return true;
    return false;
}

static bool any_vector_access(const tli_ir *ir, int32_t s, int lanes)
{
    for (int32_t st = tli_S(ir, s)->body; st; st = tli_S(ir, st)->next) {
        const tli_snode *n = tli_S(ir, st);
        if (tli_access_vectorizable(ir, s, n->buf, n->idx, lanes, false) ||
            any_vector_access_expr(ir, s, n->value, lanes))
            return true;
    }
    return false;
}

bool tli_stmt_stores(const tli_ir *ir, int32_t s)
{
    const tli_snode *n = tli_S(ir, s);
    /* tile operations write or read shared memory through many threads */
    if (n->op == S_STORE || n->op == S_COPY || n->op == S_FILL || n->op == S_GEMM || n->op == S_PIPELINED)
        return true;
    for (int32_t c = n->body; c; c = tli_S(ir, c)->next)
        if (tli_stmt_stores(ir, c))
            return true;
    for (int32_t c = n->orelse; c; c = tli_S(ir, c)->next)
        if (tli_stmt_stores(ir, c))
            return true;
    return false;
}

static bool expr_uses_buf(const tli_ir *ir, int32_t e, int32_t buf)
{
    if (!e)
        return false;
    const tli_enode *n = tli_E(ir, e);
    if (n->op == E_LOAD) {
        if (n->buf == buf)
            return true;
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            if (expr_uses_buf(ir, ir->pool.v[n->idx + d], buf))
                return true;
        return false;
    }
    for (int i = 0; i < 3; i++)
        if (n->a[i] && expr_uses_buf(ir, n->a[i], buf))
            return true;
    return false;
}

/* r: a copy operand, a region id or minus a whole buffer's id */
static bool region_uses_buf(const tli_ir *ir, int32_t r, int32_t buf)
{
    if (r < 0)
        return -r == buf;
    const tli_rnode *n = tli_R(ir, r);
    if (n->buf == buf)
        return true;
    if (n->tiled)
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            if (expr_uses_buf(ir, n->idx[d], buf))
                return true;
    return false;
}

bool tli_stmt_uses_buf(const tli_ir *ir, int32_t s, int32_t buf)
{
    const tli_snode *n = tli_S(ir, s);
    switch ((tli_sop)n->op) {
    case S_STORE:
        if (n->buf == buf || expr_uses_buf(ir, n->value, buf))
            return true;
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            if (expr_uses_buf(ir, ir->pool.v[n->idx + d], buf))
                return true;
        return false;
    case S_COPY: return region_uses_buf(ir, n->a0, buf) || region_uses_buf(ir, n->a1, buf);
    case S_FILL: return n->buf == buf || expr_uses_buf(ir, n->value, buf);
    case S_GEMM: return n->gemm[0] == buf || n->gemm[1] == buf || n->gemm[2] == buf;
    case S_SERIAL:
    case S_PIPELINED:
    case S_IF:
        if (expr_uses_buf(ir, n->a0, buf))
            return true;
        break;
    default: break;
    }
    for (int32_t c = n->body; c; c = tli_S(ir, c)->next)
        if (tli_stmt_uses_buf(ir, c, buf))
            return true;
    for (int32_t c = n->orelse; c; c = tli_S(ir, c)->next)
        if (tli_stmt_uses_buf(ir, c, buf))
            return true;
    return false;
}
