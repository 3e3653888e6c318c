/*
 * analysis.c - questions the passes ask of the graph: which buffers a
 * statement touches, how an index moves with a loop variable, whether a
 * parallel loop can move whole vectors, how warps can split a GEMM tile.
 * Expression walks visit each node of the DAG once per question (a stamp
 * per node, tli_marks), so shared subexpressions cost nothing extra, and
 * keep their pending nodes on a stack of their own, so a deep chain costs
 * no call stack.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- bit sets */

bool tli_bufset_init(tli_bufset *s, int32_t nbufs)
{
    s->words = (nbufs + 63) / 64;
    s->bits = calloc((size_t)(s->words ? s->words : 1), sizeof *s->bits);
    return s->bits != NULL;
}

void tli_bufset_free(tli_bufset *s)
{
    free(s->bits);
    s->bits = NULL;
    s->words = 0;
}

void tli_bufset_clear(tli_bufset *s) { memset(s->bits, 0, (size_t)s->words * sizeof *s->bits); }

void tli_bufset_add(tli_bufset *s, int32_t b)
{
    if (b > 0 && b / 64 < s->words)
        s->bits[b / 64] |= 1ull << (b % 64);
}

bool tli_bufset_has(const tli_bufset *s, int32_t b)
{
    return b > 0 && b / 64 < s->words && (s->bits[b / 64] >> (b % 64) & 1);
}

bool tli_bufset_meets(const tli_bufset *a, const tli_bufset *b)
{
    int32_t n = a->words < b->words ? a->words : b->words;
    for (int32_t i = 0; i < n; i++)
        if (a->bits[i] & b->bits[i])
            return true;
    return false;
}

void tli_bufset_union(tli_bufset *a, const tli_bufset *b)
{
    int32_t n = a->words < b->words ? a->words : b->words;
    for (int32_t i = 0; i < n; i++)
        a->bits[i] |= b->bits[i];
}

bool tli_bufset_empty(const tli_bufset *s)
{
    for (int32_t i = 0; i < s->words; i++)
        if (s->bits[i])
            return false;
    return true;
}

/* ------------------------------------------------------------ walks */

/* Grows the arrays to cover every expression of ir (the passes add some). */
static bool marks_cover(tli_marks *m, const tli_ir *ir)
{
    if (m->n >= ir->e.n)
        return true;
    int64_t twice = 2 * (int64_t)m->n;
    int32_t n = twice > ir->e.n && twice <= INT32_MAX ? (int32_t)twice : ir->e.n;
    uint32_t *st = realloc(m->stamp, (size_t)n * sizeof *st);
    if (st)
        m->stamp = st;
    int64_t *v = realloc(m->val, (size_t)n * sizeof *v);
    if (v)
        m->val = v;
    if (!st || !v)
        return false;
    memset(m->stamp + m->n, 0, (size_t)(n - m->n) * sizeof *st);
    m->n = n;
    return true;
}

bool tli_marks_begin(tli_marks *m, const tli_ir *ir)
{
    m->sp = 0;
    if (!marks_cover(m, ir)) {
        m->oom = true;
        return false;
    }
    if (++m->now == 0) { /* the stamps wrapped around: start afresh */
        memset(m->stamp, 0, (size_t)m->n * sizeof *m->stamp);
        m->now = 1;
    }
    return true;
}

bool tli_marks_seen(const tli_marks *m, int32_t e) { return e > 0 && e < m->n && m->stamp[e] == m->now; }

void tli_marks_set(tli_marks *m, int32_t e)
{
    if (e > 0 && e < m->n)
        m->stamp[e] = m->now;
}

void tli_marks_push(tli_marks *m, int32_t e)
{
    if (!e || tli_marks_seen(m, e))
        return;
    if (m->sp == m->cap) {
        int32_t cap = m->cap ? 2 * m->cap : 64;
        int32_t *st = realloc(m->stack, (size_t)cap * sizeof *st);
        if (!st) {
            m->oom = true;
            return;
        }
        m->stack = st;
        m->cap = cap;
    }
    m->stack[m->sp++] = e;
}

int32_t tli_marks_next(tli_marks *m)
{
    while (m->sp) {
        int32_t e = m->stack[--m->sp];
        if (!tli_marks_seen(m, e)) {
            tli_marks_set(m, e);
            return e;
        }
    }
    return 0;
}

void tli_marks_push_operands(tli_marks *m, const tli_ir *ir, int32_t e)
{
    const tli_enode *n = tli_E(ir, e);
    for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
        tli_marks_push(m, n->a[i]);
}

void tli_marks_free(tli_marks *m)
{
    free(m->stamp);
    free(m->val);
    free(m->stack);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------ buffer accesses */

/* Adds the loads of e to rd, skipping the nodes this walk has seen. */
static void reads_of(tli_lowered *L, int32_t root, tli_bufset *rd)
{
    const tli_ir *ir = &L->ir;
    tli_marks *m = &L->walk;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        const tli_enode *x = tli_E(ir, e);
        if (x->op == E_LOAD) {
            tli_bufset_add(rd, x->buf);
            for (int d = 0; d < tli_B(ir, x->buf)->rank; d++)
                tli_marks_push(m, ir->pool.v[x->idx + d]);
        }
        tli_marks_push_operands(m, ir, e);
    }
}

void tli_expr_reads(tli_lowered *L, int32_t e, tli_bufset *rd)
{
    if (tli_marks_begin(&L->walk, &L->ir))
        reads_of(L, e, rd);
}

static void region_access(tli_lowered *L, int32_t operand, tli_bufset *rd, tli_bufset *touched)
{
    const tli_ir *ir = &L->ir;
    tli_bufset_add(touched, tli_copy_buf(ir, operand));
    if (operand > 0 && tli_R(ir, operand)->tiled)
        for (int d = 0; d < tli_B(ir, tli_R(ir, operand)->buf)->rank; d++)
            reads_of(L, tli_R(ir, operand)->idx[d], rd);
}

static void stmt_access(tli_lowered *L, int32_t s, tli_bufset *rd, tli_bufset *wr)
{
    const tli_ir *ir = &L->ir;
    const tli_snode *n = tli_S(ir, s);
    switch ((tli_sop)n->op) {
    case S_STORE:
        tli_bufset_add(wr, n->buf);
        reads_of(L, n->value, rd);
        for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
            reads_of(L, ir->pool.v[n->idx + d], rd);
        break;
    case S_COPY:
        /* a pipeline's own copies are ordered by the pipeline's mbarriers
         * and waits, not by the barriers hazards call for */
        if (n->x[TLI_X_COPY_MANAGED])
            break;
        region_access(L, n->a0, rd, rd);
        region_access(L, n->a1, rd, wr);
        break;
    case S_FILL:
        tli_bufset_add(wr, n->buf);
        reads_of(L, n->value, rd);
        break;
    case S_GEMM:
        tli_bufset_add(rd, n->gemm[0]);
        tli_bufset_add(rd, n->gemm[1]);
        tli_bufset_add(rd, n->gemm[2]);
        tli_bufset_add(wr, n->gemm[2]);
        if (tli_gemm_acc2(n)) { /* a pair (pass_layout): the second gemm's B and C too */
            tli_bufset_add(rd, n->x[TLI_X_GEMM_PAIR_B]);
            tli_bufset_add(rd, n->x[TLI_X_GEMM_PAIR_C]);
            tli_bufset_add(wr, n->x[TLI_X_GEMM_PAIR_C]);
        }
        break;
    case S_REDUCE:
        tli_bufset_add(rd, n->gemm[0]);
        tli_bufset_add(wr, n->gemm[1]);
        if (n->a1 & TLI_REDUCE_ACCUM)
            tli_bufset_add(rd, n->gemm[1]);
        if (n->x[TLI_X_RED_SCRATCH]) {
            tli_bufset_add(rd, n->x[TLI_X_RED_SCRATCH]);
            tli_bufset_add(wr, n->x[TLI_X_RED_SCRATCH]);
        }
        break;
    case S_CLUSTER_REDUCE: /* its exchange slots are ordered by its own cluster barriers */
        tli_bufset_add(rd, n->buf);
        tli_bufset_add(wr, n->buf);
        break;
    case S_SERIAL:
    case S_PIPELINED:
    case S_IF:
    case S_LET:
    case S_STAGE:
        reads_of(L, n->a0, rd);
        break;
    default: break;
    }
    for (int32_t c = n->body; c; c = tli_S(ir, c)->next)
        stmt_access(L, c, rd, wr);
    for (int32_t c = n->orelse; c; c = tli_S(ir, c)->next)
        stmt_access(L, c, rd, wr);
}

void tli_stmt_access(tli_lowered *L, int32_t s, tli_bufset *rd, tli_bufset *wr)
{
    if (tli_marks_begin(&L->walk, &L->ir))
        stmt_access(L, s, rd, wr);
    else /* empty sets would read as "touches nothing": the lowering fails rather than decide on them */
        tli_low_fail(L, TL_ERR_OUT_OF_MEMORY, "out of host memory");
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

int32_t tli_first_consumer(const tli_ir *ir, int32_t s)
{
    int32_t c = tli_S(ir, s)->body;
    while (c && tli_is_producer(ir, c))
        c = tli_S(ir, c)->next;
    return c;
}

/* ----------------------------------------------------- affine indices */

/* Per-question memory of the coefficient of one loop variable in each
 * expression node (L->coef): stamped nodes are known, with their
 * coefficient in val, or NOT_AFFINE. */
typedef tli_marks coef_memo;
#define NOT_AFFINE INT64_MIN

static bool affine_coef(const tli_ir *ir, int32_t e, int32_t loop, int dim, int64_t *coef, coef_memo *m, int depth);

static bool affine_child(const tli_ir *ir, int32_t e, int32_t loop, int dim, int64_t *coef, coef_memo *m, int depth)
{
    if (tli_marks_seen(m, e)) {
        *coef = m->val[e];
        return *coef != NOT_AFFINE;
    }
    bool ok = affine_coef(ir, e, loop, dim, coef, m, depth + 1);
    tli_marks_set(m, e);
    m->val[e] = ok ? *coef : NOT_AFFINE;
    return ok;
}

/* The coefficient of loop variable (loop, dim) in integer expression e when
 * e is affine in it; false when it is not (a product of two variables, a
 * division of it, a load that depends on it, ...). Index expressions are
 * short; a chain deeper than 256 nodes is simply not affine here. */
static bool affine_coef(const tli_ir *ir, int32_t e, int32_t loop, int dim, int64_t *coef, coef_memo *m, int depth)
{
    const tli_enode *n = tli_E(ir, e);
    int64_t ca, cb, c;
    if (depth > 256)
        return false;
    if (n->scope == 0 || n->op == E_CONST_INT || n->op == E_PARAM || n->op == E_BLOCK_IDX) {
        *coef = 0;
        return true;
    }
    switch (n->op) {
    case E_LOOP_VAR:
        *coef = n->loop == loop && n->ival == dim;
        return true;
    case E_ADD:
    case E_SUB:
        if (!affine_child(ir, n->a[0], loop, dim, &ca, m, depth) || !affine_child(ir, n->a[1], loop, dim, &cb, m, depth))
            return false;
        *coef = n->op == E_ADD ? ca + cb : ca - cb;
        return true;
    case E_NEG:
        if (!affine_child(ir, n->a[0], loop, dim, &ca, m, depth))
            return false;
        *coef = -ca;
        return true;
    case E_MUL:
        if (tli_expr_const_int(ir, n->a[0], &c) && affine_child(ir, n->a[1], loop, dim, &cb, m, depth)) {
            *coef = c * cb;
            return true;
        }
        if (tli_expr_const_int(ir, n->a[1], &c) && affine_child(ir, n->a[0], loop, dim, &ca, m, depth)) {
            *coef = c * ca;
            return true;
        }
        /* a product is affine when neither factor moves with the variable */
        if (affine_child(ir, n->a[0], loop, dim, &ca, m, depth) && affine_child(ir, n->a[1], loop, dim, &cb, m, depth) &&
            ca == 0 && cb == 0) {
            *coef = 0;
            return true;
        }
        return false;
    case E_CAST: /* i32 -> i64 widening keeps the value */
        if (n->dtype == TL_I64 && tli_E(ir, n->a[0])->dtype == TL_I32)
            return affine_child(ir, n->a[0], loop, dim, coef, m, depth);
        return false;
    default: {
        /* anything else is affine only when it does not move at all */
        for (int i = 0; i < tli_eop_arity((tli_eop)n->op); i++)
            if (!affine_child(ir, n->a[i], loop, dim, &ca, m, depth) || ca != 0)
                return false;
        if (n->op == E_LOAD)
            for (int d = 0; d < tli_B(ir, n->buf)->rank; d++)
                if (!affine_child(ir, ir->pool.v[n->idx + d], loop, dim, &ca, m, depth) || ca != 0)
                    return false;
        *coef = 0;
        return n->op != E_LOAD || !tli_expr_uses_var(ir, e, loop, dim);
    }
    }
}

static bool coef_of(tli_lowered *L, int32_t e, int32_t loop, int dim, int64_t *coef)
{
    return tli_marks_begin(&L->coef, &L->ir) && affine_child(&L->ir, e, loop, dim, coef, &L->coef, 0);
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

bool tli_access_vectorizable(tli_lowered *L, int32_t s, int32_t buf, int32_t idx, int lanes, bool is_load)
{
    const tli_ir *ir = &L->ir;
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
        if (!coef_of(L, ir->pool.v[idx + d], s, last, &c))
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

/* ------------------------------------------------------ parallel loops */

/* The loads of e inside the loop (not built before it), in *list (up to
 * max), each node once in the walk begun by the caller. */
static void loop_loads(tli_lowered *L, int32_t root, int32_t *list, int *n, int max)
{
    tli_marks *m = &L->walk;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        const tli_enode *x = tli_E(&L->ir, e);
        if (x->scope == 0)
            continue;
        if (x->op == E_LOAD && *n < max)
            list[(*n)++] = e;
        tli_marks_push_operands(m, &L->ir, e);
    }
}

/* Vector mode needs a body of plain stores to global tensors. */
static bool straight_stores(const tli_ir *ir, int32_t body)
{
    for (int32_t s = body; s; s = tli_S(ir, s)->next)
        if (tli_S(ir, s)->op != S_STORE || tli_B(ir, tli_S(ir, s)->buf)->scope != B_GLOBAL)
            return false;
    return body != 0;
}

#define MAX_LOADS 64

void tli_plan_parallel(tli_lowered *L, int32_t s, int threads, tli_par_plan *plan)
{
    const tli_ir *ir = &L->ir;
    const tli_snode *loop = tli_S(ir, s);
    plan->total = 1;
    for (int d = 0; d < loop->rank; d++)
        plan->total *= loop->extents[d];
    plan->vector = false;
    plan->lanes = 1;
    if (straight_stores(ir, loop->body) && tli_marks_begin(&L->walk, ir)) {
        size_t maxsize = 0;
        int32_t loads[MAX_LOADS];
        int nloads = 0;
        for (int32_t st = loop->body; st; st = tli_S(ir, st)->next) {
            const tli_snode *n = tli_S(ir, st);
            size_t sz = tl_dtype_size((tl_dtype)tli_B(ir, n->buf)->dtype);
            maxsize = sz > maxsize ? sz : maxsize;
            loop_loads(L, n->value, loads, &nloads, MAX_LOADS);
        }
        for (int i = 0; i < nloads; i++) {
            const tli_enode *x = tli_E(ir, loads[i]);
            size_t sz = tl_dtype_size((tl_dtype)tli_B(ir, x->buf)->dtype);
            if (tli_B(ir, x->buf)->scope == B_GLOBAL && tli_expr_uses_var(ir, loads[i], s, loop->rank - 1))
                maxsize = sz > maxsize ? sz : maxsize;
        }
        int64_t elast = loop->extents[loop->rank - 1];
        for (int v = maxsize ? (int)(16 / maxsize) : 0; v >= 2 && !plan->vector; v /= 2) {
            if (elast % v)
                continue;
            bool any = false;
            for (int32_t st = loop->body; st && !any; st = tli_S(ir, st)->next)
                any = tli_access_vectorizable(L, s, tli_S(ir, st)->buf, tli_S(ir, st)->idx, v, false);
            for (int i = 0; i < nloads && !any; i++)
                any = tli_access_vectorizable(L, s, tli_E(ir, loads[i])->buf, tli_E(ir, loads[i])->idx, v, true);
            if (any) {
                plan->vector = true;
                plan->lanes = v;
            }
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

/* ---------------------------------------------------------- GEMM tiles */

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

bool tli_gemm_wgmma_layout(const tli_ir *ir, int32_t gemm, int threads, tli_warp_layout *out)
{
    const tli_snode *n = tli_S(ir, gemm);
    const tli_bnode *a = tli_B(ir, n->gemm[0]), *b = tli_B(ir, n->gemm[1]), *c = tli_B(ir, n->gemm[2]);
    bool ta = n->a1 & TL_GEMM_TRANS_A;
    int groups = threads / 128;
    int64_t m = c->cshape[0], nn = c->cshape[1], k = ta ? a->cshape[0] : a->cshape[1];
    bool a_regs = a->scope == B_FRAGMENT;
    /* Operands in shared memory are stored in blocks of 64 columns of
     * 128-byte swizzled rows (lowered.h, tli_smem_info.blocked): A as
     * [M, K] and B as [N, K] (K-major) with K a multiple of 64, or B as
     * [K, N] (MN-major) with N a multiple of 64. A in registers has the
     * accumulator layout of an m64 x K tile: K a multiple of 16. 8-bit
     * operands: K-major, in blocks of 128 columns (128 bytes again). */
    bool a_ok = a_regs ? k % 16 == 0 : ta ? k % 16 == 0 && m % (64 * groups) == 0 : k % 64 == 0;
    bool b_ok = (n->a1 & TL_GEMM_TRANS_B) ? b->cshape[1] == k && k % 64 == 0 : b->cshape[0] == k && nn % 64 == 0;
    if (tli_dtype_is_f8((tl_dtype)a->dtype)) /* K-major only (the builder checked), blocks of 128 columns */
        a_ok = b_ok = !a_regs && !ta && (n->a1 & TL_GEMM_TRANS_B) && b->cshape[1] == k && k % 128 == 0;
    else if (a->dtype != b->dtype || tl_dtype_size((tl_dtype)a->dtype) != 2)
        return false;
    if (threads % 128 || groups < 1 || !a_ok || !b_ok || m % (64 * groups) || nn % 16 || nn > 256)
        return false;
    int64_t rows = m / groups;
    if ((rows / 64) * (nn / 2) > 256) /* accumulator registers per thread */
        return false;
    *out = (tli_warp_layout){.wgm = groups, .wgn = 1, .wm = rows, .wn = nn, .mt = (int)(rows / 64),
                             .nt = (int)(nn / 8), .wgmma = true};
    return true;
}

/* Whether expression root reads the block index along `axis` (-1: any
 * axis) or memory, which may hold anything. */
static bool reads_block(tli_lowered *L, int32_t root, int axis)
{
    tli_marks *m = &L->walk;
    if (!tli_marks_begin(m, &L->ir))
        return true;
    tli_marks_push(m, root);
    for (int32_t e; (e = tli_marks_next(m));) {
        const tli_enode *n = tli_E(&L->ir, e);
        if ((n->op == E_BLOCK_IDX && (axis < 0 || n->ival == axis)) || n->op == E_LOAD)
            return true;
        tli_marks_push_operands(m, &L->ir, e);
    }
    return false;
}

/* Whether expression root depends on the block or on memory (a persistent
 * CTA's blocks must all run the same number of iterations, or their ring
 * positions drift apart). */
bool tli_uses_block(tli_lowered *L, int32_t root) { return reads_block(L, root, -1); }

/* The same along one axis: a tile that does not read it is the same tile
 * for every block along that axis (TMA multicast). */
bool tli_uses_block_axis(tli_lowered *L, int32_t root, int axis) { return reads_block(L, root, axis); }
